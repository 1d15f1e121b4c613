"""Memories in the warehouse: the SQL macros, consent commits, the nightly
lifecycle step (supersession across runs, retention and withdrawal purges) and
erasure.

The query side moved to ``serving.memories`` (``ctxledger.Context.memories``):
it runs the SQL macro ``memories_served`` (``warehouse/sql/memory.sql``,
installed here by ``install_macros``), so analysts get exactly the same answer
in SQL, or reads the replica ``warehouse.memory_serving`` builds.

Erasure (``warehouse.erasure.erase_subject``, crash-safe through a journal,
uses the helpers here) deletes the subject's memories, rejections and
consent events and every row derived from the subject's sessions, then
``purge_history`` rewrites data files that still hold deleted rows, expires
every older snapshot, deletes unreferenced and orphaned files, drops stale
column statistics from the catalog and (for a local catalog file) rewrites the
catalog file so no freed page keeps old bytes. A receipt (``ErasureReceipt``)
records what was removed. Run it with no other writer on the warehouse.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import lru_cache
from pathlib import Path
from typing import Any

import pyarrow as pa

from ctxledger.schemas import content_hash
from ctxledger.schemas.arrow import to_table
from ctxledger.schemas.memory import (
    ConsentRecord,
    ErasureReceipt,
    MemoryRecord,
    MemorySettings,
    TableRows,
    subject_hash,
)
from ctxledger.warehouse.catalog import LAKE_ALIAS, Warehouse, connect

SQL_FILE = Path(__file__).resolve().parent / "sql" / "memory.sql"
_INSTALLED = "_ctxledger_memory_macros"


# -- macros --------------------------------------------------------------------


def macro_statements() -> list[str]:
    """The statements of ``warehouse/sql/memory.sql``."""
    text = SQL_FILE.read_text(encoding="utf-8")
    out = []
    for chunk in text.split(";\n"):
        body = "\n".join(
            line for line in chunk.splitlines() if not line.lstrip().startswith("--")
        ).strip()
        if body:
            out.append(body)
    return out


def install_macros(wh: Warehouse) -> None:
    """Create the memory macros on the warehouse's connection (once)."""
    if getattr(wh, _INSTALLED, None) is wh.connection():
        return
    con = wh.connection()
    for statement in macro_statements():
        con.execute(statement)
    # DuckLake data files never change once written: caching their Parquet
    # footers saves re-parsing them on every lookup (~30% of a lookup at 10M).
    con.execute("SET parquet_metadata_cache = true")
    setattr(wh, _INSTALLED, con)


@lru_cache(maxsize=1)
def _default_settings() -> MemorySettings:
    from ctxledger.schemas.policy import load_policy

    return load_policy(None).memory


# -- reads the pipeline needs ------------------------------------------------------


def load_consent(wh: Warehouse) -> list[ConsentRecord]:
    """Every stored consent event."""
    if "consent" not in wh.existing_tables():
        return []
    table = wh.query("SELECT * FROM consent ORDER BY effective_at, consent_id").arrow()
    if hasattr(table, "read_all"):
        table = table.read_all()
    return [ConsentRecord.model_validate(row) for row in table.to_pylist()]


def known_input_files(wh: Warehouse) -> list[tuple[str, str, str, str]]:
    """``(file_hash, tenant_id, path, kind)`` of consent / system-record files a
    committed run read (their landing identity: ``pipelines.ingest.landing``)."""
    if "memory_inputs" not in wh.existing_tables():
        return []
    return wh.query(
        "SELECT DISTINCT file_hash, tenant_id, path, kind FROM memory_inputs "
        "WHERE status = 'processed'"
    ).fetchall()


def _arrow_rows(relation) -> list[dict[str, Any]]:
    table = relation.arrow()
    if hasattr(table, "read_all"):
        table = table.read_all()
    return table.to_pylist()


def _set_message(wh: Warehouse, message: str, extra: dict[str, Any]) -> None:
    import json

    wh.connection().execute(
        f"CALL {LAKE_ALIAS}.set_commit_message('ctxledger', ?, extra_info => ?)",
        [message, json.dumps(extra, sort_keys=True)],
    )


def record_consent(wh: Warehouse, events: Sequence[ConsentRecord]) -> int:
    """Commit consent events as one snapshot (duplicates add nothing)."""
    if not events:
        return 0
    wh.ensure_tables()
    con = wh.connection()
    with wh.transaction():
        con.register("__consent", to_table(ConsentRecord, [e.row() for e in events]))
        try:
            added = wh.insert_new("consent", "SELECT * FROM __consent")
        finally:
            con.unregister("__consent")
        _set_message(wh, "consent", {"kind": "consent", "events": len(events)})
    return added


# -- nightly lifecycle -------------------------------------------------------------


@dataclass
class MaintenanceResult:
    """What the nightly lifecycle step changed."""

    resolved: int = 0
    expired: int = 0
    withdrawn: int = 0
    #: Re-admission pointers turned into memories / closed (``_readmissions``).
    readmitted: int = 0
    readmission_closed: int = 0
    receipts: list[ErasureReceipt] = field(default_factory=list)
    snapshot_id: int | None = None
    history: HistoryPurge | None = None
    compacted: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return bool(
            self.resolved
            or self.expired
            or self.withdrawn
            or self.readmitted
            or self.readmission_closed
        )


def _load_memories(wh: Warehouse, subjects: Iterable[tuple[str, str]]) -> list:
    subjects = sorted(set(subjects))
    if not subjects:
        return []
    con = wh.connection()
    con.register(
        "__subjects",
        pa.table(
            {
                "tenant_id": [t for t, _ in subjects],
                "subject_id": [s for _, s in subjects],
            }
        ),
    )
    # the lifecycle reads every memory of the subjects; their vectors are
    # not needed for it (it writes lifecycle columns only) and are the bulk
    skip = (
        " EXCLUDE (embedding)"
        if "embedding" in _columns(wh).get("memories", set())
        else ""
    )
    try:
        rows = _arrow_rows(
            wh.query(
                f"SELECT m.*{skip} FROM memories m "
                "SEMI JOIN __subjects s USING (tenant_id, subject_id)"
            )
        )
    finally:
        con.unregister("__subjects")
    return [MemoryRecord.model_validate(r) for r in rows]


def _resolution_updates(
    wh: Warehouse,
    subjects: Iterable[tuple[str, str]],
    dropped: set[str],
    extra: Sequence[MemoryRecord] = (),
) -> list[MemoryRecord]:
    """Memories of ``subjects`` (minus ``dropped`` ids, plus ``extra`` ones about
    to be inserted) whose lifecycle columns change when re-resolved together."""
    from ctxledger.pipelines.memory.resolve import changed, resolve

    stored = [m for m in _load_memories(wh, subjects) if m.memory_id not in dropped]
    ids = {m.memory_id for m in stored}
    before = stored + [m for m in extra if m.memory_id not in ids]
    return changed(before, resolve(before))


@dataclass
class _ReadmissionPlan:
    """Pending pointers a live basis now covers, and what ``readmit`` made of
    them (memories to insert, pointers to mark)."""

    memories: list[MemoryRecord] = field(default_factory=list)
    #: (rejection_id, readmission, reason)
    marks: list[tuple[str, str, str | None]] = field(default_factory=list)

    @property
    def closed(self) -> int:
        return sum(1 for _, state, _ in self.marks if state == "closed")


_MESSAGE_COLUMNS = (
    "message_id",
    "session_id",
    "tenant_id",
    "turn",
    "role",
    "content",
    "content_hash",
    "token_count",
    "policy_version",
    "source_ref",
)


def _readmissions(
    wh: Warehouse,
    settings: MemorySettings,
    now: datetime,
    policy_version: str,
    run_id: str,
) -> _ReadmissionPlan:
    """Consent re-admission (``pipelines.memory.readmit``): every pending
    ``no_basis`` pointer whose tenant, subject and purpose has a live basis
    now is re-derived from its redacted message and admitted or closed.

    Reads only; the caller writes the plan inside its transaction.
    """
    from ctxledger.pipelines.memory.readmit import MessageText, readmit
    from ctxledger.schemas.memory import MemoryRejection

    plan = _ReadmissionPlan()
    tables = wh.existing_tables()
    if not {"memory_rejections", "consent", "messages"} <= tables:
        return plan
    if "readmission" not in _columns(wh).get("memory_rejections", set()):
        return plan
    con = wh.connection()
    pointers = [
        MemoryRejection.model_validate(row)
        for row in _arrow_rows(
            wh.query(
                "SELECT * FROM memory_rejections r WHERE r.readmission = 'pending' "
                "AND memory_live_basis(r.tenant_id, r.subject_id, r.purpose, ?) "
                "ORDER BY r.tenant_id, r.subject_id, r.rejection_id",
                [now],
            )
        )
    ]
    if not pointers:
        return plan
    ids = sorted({p.provenance.message_id for p in pointers if p.provenance})
    subjects = sorted({(p.tenant_id, p.subject_id) for p in pointers})
    con.register(
        "__readmit_messages", pa.table({"message_id": pa.array(ids, pa.string())})
    )
    con.register(
        "__readmit_subjects",
        pa.table(
            {
                "tenant_id": pa.array([t for t, _ in subjects], pa.string()),
                "subject_id": pa.array([s for _, s in subjects], pa.string()),
            }
        ),
    )
    try:
        messages = {
            row["message_id"]: MessageText(**row)
            for row in _arrow_rows(
                wh.query(
                    f"SELECT {', '.join(_MESSAGE_COLUMNS)} FROM messages "
                    "SEMI JOIN __readmit_messages USING (message_id)"
                )
            )
        }
        consent = [
            ConsentRecord.model_validate(row)
            for row in _arrow_rows(
                wh.query(
                    "SELECT c.* FROM consent c "
                    "SEMI JOIN __readmit_subjects USING (tenant_id, subject_id) "
                    "ORDER BY effective_at, consent_id"
                )
            )
        ]
    finally:
        con.unregister("__readmit_messages")
        con.unregister("__readmit_subjects")
    by_subject: dict[tuple[str, str], list[ConsentRecord]] = {}
    for event in consent:
        by_subject.setdefault((event.tenant_id, event.subject_id), []).append(event)
    for pointer in pointers:
        message_id = pointer.provenance.message_id if pointer.provenance else None
        outcome = readmit(
            pointer,
            messages.get(message_id or ""),
            by_subject.get((pointer.tenant_id, pointer.subject_id), []),
            settings,
            now=now,
            policy_version=policy_version or pointer.policy_version,
            run_id=run_id,
        )
        if outcome.memory is not None:
            plan.memories.append(outcome.memory)
            plan.marks.append((pointer.rejection_id, "readmitted", None))
        elif outcome.closed is not None:
            plan.marks.append((pointer.rejection_id, "closed", outcome.closed))
    return plan


def _write_readmissions(
    wh: Warehouse, plan: _ReadmissionPlan, now: datetime, run_id: str
) -> int:
    """Insert the plan's memories and mark its pointers (inside the caller's
    transaction). Returns the memories inserted (an id already stored: 0)."""
    con = wh.connection()
    inserted = 0
    if plan.memories:
        con.register(
            "__readmitted", to_table(MemoryRecord, [m.row() for m in plan.memories])
        )
        try:
            inserted = wh.insert_new("memories", "SELECT * FROM __readmitted")
        finally:
            con.unregister("__readmitted")
    ts = pa.timestamp("us", tz="UTC")
    marks = pa.table(
        {
            "rejection_id": pa.array([r for r, _, _ in plan.marks], pa.string()),
            "readmission": pa.array([s for _, s, _ in plan.marks], pa.string()),
            "reason": pa.array([c for _, _, c in plan.marks], pa.string()),
            "at": pa.array([now] * len(plan.marks), ts),
            "run_id": pa.array([run_id] * len(plan.marks), pa.string()),
        }
    )
    con.register("__readmission_marks", marks)
    try:
        con.execute(
            "UPDATE memory_rejections SET readmission = k.readmission, "
            "readmission_reason = k.reason, readmitted_at = k.at, "
            "readmission_run_id = k.run_id FROM __readmission_marks k "
            "WHERE memory_rejections.rejection_id = k.rejection_id"
        )
    finally:
        con.unregister("__readmission_marks")
    return inserted


def _write_updates(wh: Warehouse, updates: Sequence[MemoryRecord]) -> None:
    ts = pa.timestamp("us", tz="UTC")
    table = pa.table(
        {
            "memory_id": pa.array([m.memory_id for m in updates], pa.string()),
            "valid_to": pa.array([m.valid_to for m in updates], ts),
            "superseded_at": pa.array([m.superseded_at for m in updates], ts),
            "superseded_by": pa.array([m.superseded_by for m in updates], pa.string()),
            "conflict_with": pa.array([m.conflict_with for m in updates], pa.string()),
        }
    )
    con = wh.connection()
    con.register("__resolved", table)
    try:
        con.execute(
            "UPDATE memories SET valid_to = r.valid_to, "
            "superseded_at = r.superseded_at, superseded_by = r.superseded_by, "
            "conflict_with = r.conflict_with "
            "FROM __resolved r WHERE memories.memory_id = r.memory_id"
        )
    finally:
        con.unregister("__resolved")


def maintain(
    root: str | Path,
    *,
    settings: MemorySettings,
    now: datetime | None = None,
    run_id: str | None = None,
    catalog: str | None = None,
    data_path: str | None = None,
    job_version: str = "",
) -> MaintenanceResult:
    """The nightly lifecycle step, one snapshot when anything changes.

    1. purge memories whose retention ended (``expires_at <= now``) and memories
       no live basis covers any more (withdrawn or ended consent), with a receipt
       per subject and reason;
    2. re-resolve supersession and conflicts for subjects with memories from
       ``run_id`` or with purged memories (a later run's statement supersedes an
       earlier run's);
    3. if anything was purged and ``settings.purge_history``: ``purge_history``.
    """
    now = now or datetime.now(UTC)
    result = MaintenanceResult()
    with Warehouse.open(root, catalog=catalog, data_path=data_path) as wh:
        if "memories" not in wh.existing_tables():
            return result
        ensure_serving_options(wh)
        _lifecycle(wh, settings, now, run_id, job_version, result)
        for table in SERVING_TABLES:
            if data_files(wh, table) > settings.compact_after_files:
                compact_sorted(wh, table)
                result.compacted.append(table)
    if (result.expired or result.withdrawn) and settings.purge_history:
        result.history = purge_history(root, catalog=catalog, data_path=data_path)
    _refresh_replica(root, catalog, data_path, create=True)
    return result


def _refresh_replica(root, catalog, data_path, *, create: bool) -> None:
    """Bring the lookup replica (``warehouse.memory_serving``) up to the commits
    just made, rebuilding the files of tables that changed; ``create=False``:
    only if a replica exists."""
    from ctxledger.warehouse.memory_serving import refresh_serving

    refresh_serving(root, catalog=catalog, data_path=data_path, create=create)


def _lifecycle(
    wh: Warehouse,
    settings: MemorySettings,
    now: datetime,
    run_id: str | None,
    job_version: str,
    result: MaintenanceResult,
    own_transaction: bool = True,
    *,
    policy_version: str = "",
    readmission_run_id: str | None = None,
    embed=None,
) -> None:
    """Consent re-admission, purges and re-resolution of ``maintain``, in one
    transaction (if any).

    ``embed`` (``pipelines.memory.embed.MemoryVectors``): gives re-admitted
    memories their vector before they are written, as the nightly graph does
    for the memories it writes; None: stored without one.

    With ``own_transaction=False`` it runs inside the caller's open transaction
    and sets no commit message (the backfill folds it into its own snapshot).
    Re-admitted memories carry ``readmission_run_id`` (else ``run_id``) and
    ``policy_version`` (else their pointer's).
    """
    install_macros(wh)
    con = wh.connection()
    readmit_run = readmission_run_id or run_id or ""
    plan = _readmissions(wh, settings, now, policy_version, readmit_run)
    if embed is not None and plan.memories:
        plan.memories = embed(plan.memories)
    expired = con.execute(
        "SELECT memory_id, tenant_id, subject_id FROM memories WHERE expires_at <= ?",
        [now],
    ).fetchall()
    withdrawn = con.execute(
        "SELECT m.memory_id, m.tenant_id, m.subject_id FROM memories m "
        "SEMI JOIN (SELECT DISTINCT tenant_id, subject_id FROM consent "
        "  WHERE event = 'withdraw' OR expires_at IS NOT NULL) c "
        "  USING (tenant_id, subject_id) "
        "WHERE m.expires_at > ? "
        "AND NOT memory_live_basis(m.tenant_id, m.subject_id, m.purpose, ?)",
        [now, now],
    ).fetchall()
    touched = set()
    if run_id is not None:
        touched = set(
            con.execute(
                "SELECT DISTINCT tenant_id, subject_id FROM memories WHERE run_id = ?",
                [run_id],
            ).fetchall()
        )
    purged = {(t, s) for _, t, s in expired + withdrawn}
    dropped = {r[0] for r in expired + withdrawn}
    readmitted = {(m.tenant_id, m.subject_id) for m in plan.memories}
    updates = _resolution_updates(
        wh, touched | purged | readmitted, dropped, plan.memories
    )
    if not expired and not withdrawn and not updates and not plan.marks:
        return
    receipts = []
    for reason, rows in (("retention", expired), ("consent_withdrawn", withdrawn)):
        per_subject: dict[tuple[str, str], int] = {}
        for _, tenant, subject in rows:
            key = (tenant, subject)
            per_subject[key] = per_subject.get(key, 0) + 1
        for (tenant, subject), count in sorted(per_subject.items()):
            receipts.append(
                ErasureReceipt(
                    erasure_id=content_hash(
                        "purge", reason, tenant, subject, now, prefix="era_"
                    ),
                    tenant_id=tenant,
                    subject_hash=subject_hash(tenant, subject),
                    reason=reason,
                    requested_at=now,
                    completed_at=datetime.now(UTC),
                    rows=[TableRows(table="memories", rows=count)],
                    rows_total=count,
                    history_purged=settings.purge_history,
                    job_version=job_version,
                )
            )
    with wh.transaction() if own_transaction else nullcontext():
        if plan.marks:
            # Before the resolution updates: they may change a re-admitted row.
            result.readmitted = _write_readmissions(wh, plan, now, readmit_run)
            result.readmission_closed = plan.closed
        if dropped:
            con.register("__purge", pa.table({"memory_id": sorted(dropped)}))
            try:
                con.execute(
                    "DELETE FROM memories WHERE memory_id IN "
                    "(SELECT memory_id FROM __purge)"
                )
            finally:
                con.unregister("__purge")
        if updates:
            _write_updates(wh, updates)
        if receipts:
            con.register(
                "__receipts", to_table(ErasureReceipt, [r.row() for r in receipts])
            )
            try:
                wh.insert_new("erasures", "SELECT * FROM __receipts")
            finally:
                con.unregister("__receipts")
        result.expired, result.withdrawn = len(expired), len(withdrawn)
        result.resolved = len(updates)
        result.receipts = receipts
        if not own_transaction:
            return
        _set_message(
            wh,
            f"maintain {run_id or 'memories'}",
            {
                "kind": "memory_maintenance",
                "run_id": run_id,
                "resolved": result.resolved,
                "expired": result.expired,
                "withdrawn": result.withdrawn,
                "readmitted": result.readmitted,
                "readmission_closed": result.readmission_closed,
            },
        )
    result.snapshot_id = wh.current_snapshot()


# -- serving layout ----------------------------------------------------------------

#: Layout of the tables the query API reads by (tenant_id, subject_id): small
#: row groups let a lookup decode a few thousand rows, not 122,880, and small
#: files let DuckLake prune to one file whose footer is quick to read (10M
#: memories in one file: p50 313 ms; in 25 files of 8 MB: 122 ms, same machine).
SERVING_TABLES = ("memories", "consent")
SERVING_OPTIONS = {"parquet_row_group_size": "16384", "target_file_size": "8MB"}


def data_files(wh: Warehouse, table: str) -> int:
    """Live data files of a table."""
    return len(
        wh.connection()
        .execute(f"SELECT * FROM ducklake_list_files('{LAKE_ALIAS}', ?)", [table])
        .fetchall()
    )


def ensure_serving_options(wh: Warehouse) -> None:
    """Set the serving tables' layout options (catalog options, no snapshot)."""
    con = wh.connection()
    present = {
        (r[0], r[1])
        for r in con.execute(
            f"SELECT option_name, scope_entry FROM {LAKE_ALIAS}.options() "
            "WHERE scope = 'TABLE'"
        ).fetchall()
    }
    for table in SERVING_TABLES:
        for option, value in SERVING_OPTIONS.items():
            if (option, f"main.{table}") not in present:
                con.execute(
                    f"CALL {LAKE_ALIAS}.set_option('{option}', '{value}', "
                    f"table_name => '{table}')"
                )


def compact_sorted(wh: Warehouse, table: str, source: pa.Table | None = None) -> int:
    """Rewrite ``table`` (plus ``source`` rows, if given) sorted by
    (tenant_id, subject_id) in one snapshot, so lookups prune to one file and
    one row group. Written single-threaded: DuckDB's parallel writers would
    interleave row groups and undo the order. Returns the rows written."""
    ensure_serving_options(wh)
    con = wh.connection()
    threads = con.execute("SELECT current_setting('threads')").fetchone()[0]
    con.execute("SET threads = 1")
    try:
        with wh.transaction():
            con.execute(
                f"CREATE OR REPLACE TEMP TABLE __compact AS SELECT * FROM {table}"
            )
            if source is not None:
                con.register("__compact_src", source)
                con.execute("INSERT INTO __compact SELECT * FROM __compact_src")
                con.unregister("__compact_src")
            con.execute(f"DELETE FROM {table}")
            con.execute(
                f"INSERT INTO {table} SELECT * FROM __compact "
                "ORDER BY tenant_id, subject_id"
            )
            rows = con.execute("SELECT count(*) FROM __compact").fetchone()[0]
            con.execute("DROP TABLE __compact")
            _set_message(wh, f"compact {table}", {"kind": "compact", "table": table})
    finally:
        con.execute(f"SET threads = {int(threads)}")
    return int(rows)


# -- history purge -----------------------------------------------------------------


@dataclass
class HistoryPurge:
    """What ``purge_history`` removed."""

    snapshots_expired: list[int] = field(default_factory=list)
    files_deleted: int = 0
    catalog_compacted: bool = False


def _metadata_alias(wh: Warehouse) -> str:
    return f"__ducklake_metadata_{LAKE_ALIAS}"


def purge_history(
    root: str | Path,
    *,
    catalog: str | None = None,
    data_path: str | None = None,
) -> HistoryPurge:
    """Make deleted rows unrecoverable: from data files, snapshots and the catalog.

    1. rewrite every data file that has deletions (``ducklake_rewrite_data_files``
       with ``delete_threshold => 0``), so live rows move to new files;
    2. expire every snapshot but the current one (``ducklake_expire_snapshots``);
    3. delete files no snapshot references (``ducklake_cleanup_old_files``) and
       files the catalog does not know (``ducklake_delete_orphaned_files``);
    4. recompute table-level column statistics (min/max values, which can hold a
       deleted string) from the live files;
    5. for a local catalog file, copy it into a fresh file (``COPY FROM
       DATABASE``) so no freed page still holds old bytes.

    Time travel to the expired snapshots is gone afterwards.
    """
    purge = HistoryPurge()
    with Warehouse.open(root, catalog=catalog, data_path=data_path) as wh:
        con = wh.connection()
        before = {s[0] for s in wh.snapshots()}
        con.execute(f"CALL ducklake_flush_inlined_data('{LAKE_ALIAS}')")
        con.execute(
            f"CALL ducklake_rewrite_data_files('{LAKE_ALIAS}', delete_threshold => 0)"
        )
        con.execute(
            f"CALL ducklake_expire_snapshots('{LAKE_ALIAS}', older_than => now())"
        )
        cleaned = con.execute(
            f"CALL ducklake_cleanup_old_files('{LAKE_ALIAS}', cleanup_all => true)"
        ).fetchall()
        orphans = con.execute(
            f"CALL ducklake_delete_orphaned_files('{LAKE_ALIAS}', cleanup_all => true)"
        ).fetchall()
        purge.files_deleted = len(cleaned) + len(orphans)
        meta = _metadata_alias(wh)
        con.execute(
            f"UPDATE {meta}.ducklake_table_column_stats ts "
            "SET min_value = f.mn, max_value = f.mx "
            "FROM (SELECT fc.table_id, fc.column_id, min(fc.min_value) AS mn, "
            "      max(fc.max_value) AS mx "
            f"     FROM {meta}.ducklake_file_column_stats fc "
            f"     JOIN {meta}.ducklake_data_file df USING (data_file_id) "
            "     WHERE df.end_snapshot IS NULL GROUP BY ALL) f "
            "WHERE ts.table_id = f.table_id AND ts.column_id = f.column_id"
        )
        con.execute(
            f"UPDATE {meta}.ducklake_table_column_stats ts "
            "SET min_value = NULL, max_value = NULL "
            "WHERE NOT EXISTS (SELECT 1 FROM "
            f"  {meta}.ducklake_file_column_stats fc JOIN {meta}.ducklake_data_file df "
            "  USING (data_file_id) WHERE df.end_snapshot IS NULL "
            "  AND fc.table_id = ts.table_id AND fc.column_id = ts.column_id)"
        )
        con.execute(f"CHECKPOINT {meta}")
        after = {s[0] for s in wh.snapshots()}
        purge.snapshots_expired = sorted(before - after)
        catalog_file = wh.catalog
    if not catalog_file.startswith(("postgres:", "postgresql:")):
        compact_catalog(catalog_file)
        purge.catalog_compacted = True
    # The lookup replica must not keep deleted rows either: the expired
    # snapshots leave a gap in the change log, so its files are rebuilt.
    _refresh_replica(root, catalog, data_path, create=False)
    return purge


def compact_catalog(catalog_file: str | Path) -> None:
    """Rewrite a DuckDB catalog file into a fresh one (no stale free pages)."""
    source = Path(catalog_file)
    fresh = source.with_name(source.name + ".compact")
    for leftover in (fresh, Path(str(fresh) + ".wal")):
        leftover.unlink(missing_ok=True)
    con = connect()
    try:
        con.execute(f"ATTACH '{_sql_path(source)}' AS __old (READ_ONLY)")
        con.execute(f"ATTACH '{_sql_path(fresh)}' AS __fresh")
        con.execute("COPY FROM DATABASE __old TO __fresh")
        con.execute("DETACH __old")
        con.execute("CHECKPOINT __fresh")
        con.execute("DETACH __fresh")
    finally:
        con.close()
    os.replace(fresh, source)
    Path(str(source) + ".wal").unlink(missing_ok=True)


def _sql_path(path: Path) -> str:
    return str(path).replace("'", "''")


# -- erasure -----------------------------------------------------------------------


def subject_sessions(
    wh: Warehouse, tenant_id: str, subject_id: str, metadata_key: str
) -> tuple[list[str], dict[str, bool]]:
    """Session ids of the subject, and for each of their source files whether
    every session in that file belongs to the subject."""
    from ctxledger.pipelines.memory.subjects import subject_for

    rows = wh.query(
        "SELECT session_id, source_file, metadata FROM sessions WHERE tenant_id = ?",
        [tenant_id],
    ).fetchall()
    mine: list[str] = []
    files: dict[str, bool] = {}
    for session_id, source_file, metadata in rows:
        own = subject_for(session_id, source_file, metadata, metadata_key) == subject_id
        if own:
            mine.append(session_id)
            files.setdefault(source_file, True)
    for session_id, source_file, metadata in rows:
        if source_file in files and (
            subject_for(session_id, source_file, metadata, metadata_key) != subject_id
        ):
            files[source_file] = False
    return sorted(set(mine)), files


def _columns(wh: Warehouse) -> dict[str, set[str]]:
    rows = wh.query(
        "SELECT table_name, column_name FROM information_schema.columns "
        "WHERE table_catalog = ? AND table_schema = 'main' AND table_name IN "
        "(SELECT table_name FROM information_schema.tables WHERE table_catalog = ? "
        "AND table_type = 'BASE TABLE')",  # not the analysts' views
        [LAKE_ALIAS, LAKE_ALIAS],
    ).fetchall()
    out: dict[str, set[str]] = {}
    for table, column in rows:
        out.setdefault(table, set()).add(column)
    return out


def _delete_sql(
    table: str, cols: set[str], tenant_id: str, subject_id: str
) -> tuple[str, list[str]] | None:
    """The DELETE (and its parameters) for one table of an erasure; None: the
    table holds nothing of a subject.

    Session ids and ``(tenant, artifact)`` keys carry their tenant, so they
    also reach byte-for-byte copies of the subject's files landed under other
    tenants or subjects (``warehouse.erasure``); the subject's own rows are
    matched by ``(tenant_id, subject_id)``."""
    sessions = "SELECT session_id FROM __erase_sessions"
    artifacts = (
        "(tenant_id || chr(0) || doc_id) IN (SELECT artifact_key FROM "
        "__erase_artifacts)"
    )
    if table in ("erasures", "artifacts"):
        return None
    if (
        table != "memories"
        and {"tenant_id", "doc_id"} <= cols
        and ("session_id" not in cols)
    ):
        # Evidence built from the subject's tool artifacts (doc_id = artifact id),
        # and the subject's own versions of outputs another subject saw too
        # (tool evidence is per subject: the shared artifact stays, its copy
        # scoped to this subject goes).
        if "subject_id" in cols:
            return (
                f"DELETE FROM {table} WHERE {artifacts} "
                "OR (tenant_id = ? AND subject_id = ?)",
                [tenant_id, subject_id],
            )
        return f"DELETE FROM {table} WHERE {artifacts}", []
    if {"tenant_id", "subject_id"} <= cols:
        extra = f" OR session_id IN ({sessions})" if "session_id" in cols else ""
        if "provenance" in cols:  # memories drawn from the erased sessions
            extra += f" OR provenance.session_id IN ({sessions})"
        return (
            f"DELETE FROM {table} WHERE (tenant_id = ? AND subject_id = ?){extra}",
            [tenant_id, subject_id],
        )
    if "session_id" in cols:
        return f"DELETE FROM {table} WHERE session_id IN ({sessions})", []
    if "message_id" in cols:
        return (
            f"DELETE FROM {table} WHERE message_id IN "
            "(SELECT message_id FROM __erase_messages)",
            [],
        )
    return None


def _register_erase_sets(wh: Warehouse, sessions: list[str]) -> tuple[int, int]:
    """Register the erased sessions, their messages and their artifacts no
    other session of the same tenant uses (keyed ``tenant \\0 artifact_id``)."""
    con = wh.connection()
    con.register(
        "__erase_sessions", pa.table({"session_id": pa.array(sessions, pa.string())})
    )
    rows = con.execute(
        "SELECT message_id, tenant_id, artifact_ref FROM messages "
        "WHERE session_id IN (SELECT session_id FROM __erase_sessions)"
    ).fetchall()
    shared = {
        (r[0], r[1])
        for r in con.execute(
            "SELECT DISTINCT tenant_id, artifact_ref FROM messages "
            "WHERE artifact_ref IS NOT NULL AND session_id "
            "NOT IN (SELECT session_id FROM __erase_sessions)"
        ).fetchall()
    }
    artifacts = sorted({(t, a) for _, t, a in rows if a} - shared)
    con.register(
        "__erase_messages",
        pa.table({"message_id": pa.array([m for m, _, _ in rows], pa.string())}),
    )
    con.register(
        "__erase_artifacts",
        pa.table(
            {
                "artifact_key": pa.array(
                    [f"{t}\x00{a}" for t, a in artifacts], pa.string()
                )
            }
        ),
    )
    return len(rows), len(artifacts)


def _scrub_file(
    wh: Warehouse, tenant_id: str, path: str, counts: dict[str, int]
) -> list[str]:
    """Replace a subject-only landing file's path by its hash; return the
    quarantine refs of its dead letters."""
    con = wh.connection()
    refs = [
        r[0]
        for r in con.execute(
            "SELECT DISTINCT quarantine_ref FROM dead_letters WHERE tenant_id = ? "
            "AND source_file = ? AND quarantine_ref IS NOT NULL",
            [tenant_id, path],
        ).fetchall()
    ]
    file_hash = con.execute(
        "SELECT max(file_hash) FROM landing_files WHERE path = ? AND tenant_id = ?",
        [path, tenant_id],
    ).fetchone()[0]
    scrubbed = con.execute(
        "UPDATE dead_letters SET source_file = ?, quarantine_ref = NULL "
        "WHERE tenant_id = ? AND source_file = ?",
        [f"erased:{file_hash or 'unknown'}", tenant_id, path],
    ).fetchone()[0]
    renamed = con.execute(
        "UPDATE landing_files SET path = 'erased:' || file_hash "
        "WHERE tenant_id = ? AND path = ?",
        [tenant_id, path],
    ).fetchone()[0]
    for label, n in (("dead_letters", scrubbed), ("landing_files", renamed)):
        if n:
            key = f"{label} (path scrubbed)"
            counts[key] = counts.get(key, 0) + int(n)
    return refs


def _attributed_dead_letters(
    wh: Warehouse,
    tenant_id: str,
    subject_id: str,
    sessions: Sequence[str],
    metadata_key: str,
) -> list[tuple[str, str | None]]:
    """``(dead_letter_id, quarantine_ref)`` of the tenant's dead letters that are
    the subject's: a ``subject=<id>/`` folder on their source file, or quarantined
    raw bytes that name the subject (``metadata.<key>`` of a transcript line,
    ``subject_id`` of a consent event or system record) or continue one of the
    subject's sessions of the same file (its source session id). A rejected
    record in a file shared with other subjects is attributed by its content:
    there is no other place that knows whose it is. Raw bytes that are not a
    JSON object and carry no subject folder cannot be attributed (docs/security.md).
    """
    import json

    from ctxledger.pipelines.memory.subjects import (
        subject_from_metadata,
        subject_from_path,
    )

    con = wh.connection()
    con.register(
        "__erase_dl_sessions",
        pa.table({"session_id": pa.array(list(sessions), pa.string())}),
    )
    try:
        theirs = {
            (f, e)
            for f, e in con.execute(
                "SELECT source_file, external_id FROM sessions WHERE session_id IN "
                "(SELECT session_id FROM __erase_dl_sessions) "
                "AND external_id IS NOT NULL"
            ).fetchall()
        }
    finally:
        con.unregister("__erase_dl_sessions")
    rows = con.execute(
        "SELECT dead_letter_id, source_file, quarantine_ref FROM dead_letters "
        "WHERE tenant_id = ?",
        [tenant_id],
    ).fetchall()
    root = wh.root.resolve()
    found: list[tuple[str, str | None]] = []
    for dead_letter_id, source_file, ref in rows:
        if subject_from_path(source_file or "") == subject_id:
            found.append((dead_letter_id, ref))
            continue
        if not ref:
            continue
        target = (root / ref).resolve()
        if root not in target.parents or not target.is_file():
            continue
        try:
            value = json.loads(target.read_bytes())
        except (ValueError, UnicodeDecodeError, RecursionError):
            continue
        if not isinstance(value, dict):
            continue
        named = subject_from_metadata(value.get("metadata"), metadata_key) or (
            subject_from_metadata(value, "subject_id")
        )
        session = value.get("session_id")
        if named == subject_id or (
            named is None
            and isinstance(session, str)
            and (source_file, session) in theirs
        ):
            found.append((dead_letter_id, ref))
    return found


def _remove_quarantine_copies(root: Path, refs: Iterable[str]) -> int:
    """Delete every quarantined copy of the raw bytes behind ``refs``.

    A quarantine file is named by the sha256 of its bytes, and a run that met
    the same bad record again (a backfill, a rerun after a crash) wrote its own
    copy under its own run folder, with no dead letter pointing at it (the dead
    letter's id did not change, so its row was not inserted again). So the
    copies are found by name in every run folder, not by reference, and so
    are the temporary files of a write cut short (``.<name>.<random>.partial``).
    """
    names = {Path(ref).name for ref in refs if ref and ref.endswith(".bin")}
    base = root / "quarantine"
    removed = 0
    if not names or not base.is_dir():
        return 0
    for folder in base.iterdir():
        if not folder.is_dir():
            continue
        for name in names:
            target = folder / name
            if target.is_file():
                target.unlink()
                removed += 1
        for partial in folder.glob(".*.partial"):
            if partial.name[1:].split(".bin.", 1)[0] + ".bin" in names:
                partial.unlink(missing_ok=True)
    return removed
