"""What a backfill changed, row by row of a small diff table (``backfill_diffs``).

A backfill compares its base snapshot with the snapshot it commits; each row is
one figure of that diff: a table's row changes, redactions of one entity type
added or removed, memories added/expired/superseded, ledger entries rebuilt,
chunks re-embedded. Analysts can recompute every figure with
``AT (VERSION => base_snapshot)`` against the run's own snapshot
(``docs/backfill.md`` has the SQL).
"""

from __future__ import annotations

from typing import ClassVar, Literal

from ctxledger.schemas.base import Record

DiffSection = Literal["tables", "redactions", "memories", "ledger", "chunks"]


class BackfillChange(Record):
    """One figure of a backfill's diff against its base snapshot."""

    table: ClassVar[str | None] = "backfill_diffs"
    key: ClassVar[tuple[str, ...]] = ("run_id", "section", "item")

    run_id: str
    base_snapshot: int
    section: DiffSection
    #: A table name, an entity type, or a metric (``rebuilt``, ``re_embedded``...).
    item: str
    before: int = 0
    after: int = 0
    added: int = 0
    removed: int = 0
    unchanged: int = 0
    updated: int = 0
