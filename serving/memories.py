"""The memory read path for context builders (moved from ``warehouse.memory_api``
and ``warehouse.memory_serving``, which keep the lifecycle, erasure and the
replica's building): ``memories``, what it returns (``MemoryView``,
``ServedMemory``) and ``MemoryStore``, the long-lived reader of the replica.

``memories(wh, tenant_id, subject_id, purpose, at=None)`` (``ctxledger.Context``
calls it on its current snapshot) returns ``facts`` (texts of user statements
and system records), ``hypotheses`` (model inferences) and ``conflicts`` (facts
that disagree and that no rule decides), plus every served item with its
provenance. Checks, all at query time (a withdrawal or an expiry shows on the
next query, no rebuild): tenant and subject, purpose, not expired, accepted
source with known provenance, valid at ``at``, a live basis now. Lookups on a
current warehouse read the read-optimised replica of ``memories`` and
``consent`` (``warehouse.memory_serving``) through a ``MemoryStore``: the
rules in Python (``serve_rows``, ``live_basis``), the same as the SQL macro
``memories_served`` (``warehouse/sql/memory.sql``; a property test keeps the
two equal), <1 ms instead of ~60-130 ms. ``lake=True`` and time travel run
the macro on the lake.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

from ctxledger.schemas.memory import MemorySettings
from ctxledger.warehouse.catalog import Warehouse
from ctxledger.warehouse.memory_api import _columns, _default_settings, install_macros
from ctxledger.warehouse.memory_serving import (
    _MEMORY_PAYLOAD,
    _TIMES,
    MEMORY_COLUMNS,
    ReplicaSet,
    replica_key,
)

_SERVED_COLUMNS = (*MEMORY_COLUMNS, "served_as")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


# -- the query -----------------------------------------------------------------


@dataclass(frozen=True)
class ServedMemory:
    """One memory as a context builder gets it."""

    memory_id: str
    text: str
    kind: str
    source: str
    purpose: str
    slot: str | None
    value: str | None
    confidence: float
    provenance: dict[str, Any] | None
    basis: str | None
    valid_from: datetime
    valid_to: datetime | None
    recorded_at: datetime
    expires_at: datetime
    conflict_with: str | None
    served_as: str


@dataclass(frozen=True)
class MemoryView:
    """What ``memories(...)`` returns: texts by how they may be used, and items."""

    tenant_id: str
    subject_id: str
    purpose: str
    at: datetime | None
    items: tuple[ServedMemory, ...] = ()
    #: ``memory_id -> (embed_model, float32 vector)`` of the served items
    #: whose vector was stored at write time (``MemoryRecord.embedding``):
    #: ``pack`` embeds only the others (rows of older runs).
    vectors: dict[str, tuple[str, Any]] = field(
        default_factory=dict, compare=False, repr=False
    )

    def _texts(self, served_as: str) -> list[str]:
        return [m.text for m in self.items if m.served_as == served_as]

    @property
    def facts(self) -> list[str]:
        """Texts to use as facts (accepted fact sources, no open conflict)."""
        return self._texts("fact")

    @property
    def hypotheses(self) -> list[str]:
        """Texts to use only as hypotheses (model inferences)."""
        return self._texts("hypothesis")

    @property
    def conflicts(self) -> list[str]:
        """Facts that disagree with another fact; to be confirmed, not used."""
        return self._texts("conflict")

    def items_as(self, served_as: str) -> list[ServedMemory]:
        return [m for m in self.items if m.served_as == served_as]


def memories(
    wh: Warehouse,
    tenant_id: str,
    subject_id: str,
    purpose: str,
    at: datetime | None = None,
    *,
    settings: MemorySettings | None = None,
    lake: bool = False,
    store: MemoryStore | None = None,
) -> MemoryView:
    """Memories of one subject a context builder may use for ``purpose``.

    Served from the read-optimised replica (``warehouse.memory_serving``, same
    rules, refreshed when the lake's snapshot moves) unless ``lake`` is set or
    the warehouse is pinned to a snapshot: then the ``memories_served`` macro
    runs on the lake itself. ``store``: a long-lived ``MemoryStore`` over
    ``wh`` (``Context`` keeps one per snapshot); without one, a store is opened
    for this call (it maps the replica files and checks their snapshot: about
    a millisecond more than a warm store).
    """
    settings = settings or _default_settings()
    if not lake and wh.snapshot is None:
        if store is None:
            with MemoryStore(wh) as once:
                return once.memories(
                    tenant_id, subject_id, purpose, at, settings=settings
                )
        return store.memories(tenant_id, subject_id, purpose, at, settings=settings)
    if at is not None and at.tzinfo is None:
        at = at.replace(tzinfo=UTC)
    install_macros(wh)
    columns = ", ".join(_SERVED_COLUMNS)
    con = wh.connection()
    threads = int(con.execute("SELECT current_setting('threads')").fetchone()[0])
    # A point lookup gains nothing from parallel scans; one thread halves its
    # latency on a small machine.
    con.execute("SET threads = 1")
    try:
        rows = con.execute(
            f"SELECT {columns} FROM memories_served(?, ?, ?, "
            "at_time := ?::TIMESTAMPTZ, fact_sources := ?::VARCHAR[], "
            "hypothesis_sources := ?::VARCHAR[]) "
            "ORDER BY valid_from, memory_id",
            [
                tenant_id,
                subject_id,
                purpose,
                at,
                list(settings.fact_sources),
                list(settings.hypothesis_sources),
            ],
        ).fetchall()
    finally:
        con.execute(f"SET threads = {threads}")
    items = tuple(ServedMemory(*row) for row in rows)
    vectors = stored_vectors(wh, tenant_id, subject_id, [m.memory_id for m in items])
    return MemoryView(tenant_id, subject_id, purpose, at, items, vectors)


def stored_vectors(
    wh: Warehouse, tenant_id: str, subject_id: str, memory_ids: Sequence[str]
) -> dict[str, tuple[str, Any]]:
    """``memory_id -> (embed_model, vector)`` of those memories that have a
    stored vector (none in a lake written before vectors were stored)."""
    if not memory_ids or "embedding" not in _columns(wh).get("memories", set()):
        return {}
    import numpy as np

    rows = wh.query(
        "SELECT memory_id, embed_model, embedding FROM memories "
        "WHERE tenant_id = ? AND subject_id = ? AND embedding IS NOT NULL "
        "AND list_contains(?::VARCHAR[], memory_id)",
        [tenant_id, subject_id, list(memory_ids)],
    ).fetchall()
    # rounded through float16 like the serving replica stores them, so the lake
    # and the replica value a memory the same
    return {
        m: (model, np.asarray(v, dtype=np.float16).astype(np.float32))
        for m, model, v in rows
    }


# -- the serving rules (pure; the same as the memories_served macro) -------------


@dataclass(frozen=True)
class ConsentRow:
    """The columns of a consent row the live-basis rule reads."""

    event: str | None
    purpose: str | None
    basis: str | None
    effective_at: datetime | None
    expires_at: datetime | None


def _le(a: datetime | None, b: datetime | None) -> bool:
    """SQL ``a <= b``: a NULL operand is not true."""
    return a is not None and b is not None and a <= b


def _gt(a: datetime | None, b: datetime | None) -> bool:
    """SQL ``a > b``: a NULL operand is not true."""
    return a is not None and b is not None and a > b


def live_basis(events: Iterable[ConsentRow], purpose: str, t: datetime) -> bool:
    """Whether a legal basis for ``purpose`` is live at ``t``: a grant for the
    purpose took effect at or before ``t``, has not ended by itself, and no
    withdrawal of the purpose (or ``*``) with the same basis (or any) happened
    between the grant and ``t``. ``events``: one subject's consent rows (other
    purposes are ignored), as ``memories_served`` reads them."""
    events = [e for e in events if e.purpose == purpose or e.purpose == "*"]
    for g in events:
        if g.event != "grant" or g.purpose != purpose or not _le(g.effective_at, t):
            continue
        if g.expires_at is not None and not _gt(g.expires_at, t):
            continue
        withdrawn = any(
            w.event == "withdraw"
            and (w.basis is None or (g.basis is not None and w.basis == g.basis))
            and _le(g.effective_at, w.effective_at)
            and _le(w.effective_at, t)
            for w in events
        )
        if not withdrawn:
            return True
    return False


def serve_rows(
    rows: Iterable[Sequence[Any]],
    events: Iterable[ConsentRow],
    purpose: str,
    at: datetime | None,
    now: datetime,
    fact_sources: Sequence[str],
    hypothesis_sources: Sequence[str],
) -> list[tuple[Any, ...]]:
    """The served rows (``MEMORY_COLUMNS`` + ``served_as``) of one subject's
    memories for ``purpose``, ordered by (valid_from, memory_id).

    Validity is checked at ``at`` (default now), expiry and the live basis at
    the later of ``at`` and now, exactly as ``memories_served`` does.
    """
    t_valid = at if at is not None else now
    t_serve = max(t_valid, now)
    rows = [r for r in rows if r[4] == purpose]
    if not rows or not live_basis(events, purpose, t_serve):
        return []
    facts, hypotheses = set(fact_sources), set(hypothesis_sources)
    out = []
    for row in rows:
        (_, _, _, source, _, _, _, _, prov, _, valid_from, valid_to, _, expires_at,
         conflict_with) = row  # fmt: skip
        hypothesis = source in hypotheses
        if not (hypothesis or source in facts):
            continue
        if prov is None or (
            prov.get("message_id") is None and prov.get("input_ref") is None
        ):
            continue
        if not _le(valid_from, t_valid):
            continue
        if valid_to is not None and not _gt(valid_to, t_valid):
            continue
        if not _gt(expires_at, t_serve):
            continue
        served_as = (
            "hypothesis"
            if hypothesis
            else "conflict"
            if conflict_with is not None
            else "fact"
        )
        out.append((*row, served_as))
    out.sort(key=lambda r: (r[10], r[0] is None, r[0] or ""))
    return out


def _time(us: int | None) -> datetime | None:
    return None if us is None else _EPOCH + timedelta(microseconds=us)


_TIME_AT = tuple(i for i, name in enumerate(MEMORY_COLUMNS) if name in _TIMES)


def decode_memory(payload: str | bytes) -> tuple[str, str, tuple[Any, ...]]:
    """(tenant_id, subject_id, row in ``MEMORY_COLUMNS`` order) of a payload."""
    values = json.loads(payload)
    if len(values) != len(_MEMORY_PAYLOAD):
        raise ValueError("memory payload does not match this replica format")
    row = values[2:]
    for i in _TIME_AT:
        row[i] = _time(row[i])
    return values[0], values[1], tuple(row)


def decode_consent(payload: str | bytes) -> tuple[str, str, ConsentRow]:
    """(tenant_id, subject_id, event) of a consent payload."""
    tenant, subject, event, purpose, basis, effective_at, expires_at = json.loads(
        payload
    )
    return (
        tenant,
        subject,
        ConsentRow(event, purpose, basis, _time(effective_at), _time(expires_at)),
    )


# -- the store -----------------------------------------------------------------


class MemoryStore(ReplicaSet):
    """A long-lived memory reader for context-builder code.

    Keeps the replica files memory-mapped and the warehouse open for the
    freshness check, so a lookup pays no connection or attach cost: a ``stat``
    of the catalog (has anything been committed?) and two binary searches.
    ``ctxledger.Context`` keeps one per snapshot; open one directly to keep it
    across requests::

        with MemoryStore.open("warehouse") as store:
            store.memories("acme", "u-1", "support").facts

    Safe to share between threads (refreshes take a lock; lookups read
    immutable mapped files).
    """

    def __init__(
        self,
        wh: Warehouse,
        *,
        settings: Any = None,
        owns: bool = False,
        clock: Callable[[], datetime] | None = None,
        frozen: bool = False,
    ):
        super().__init__(wh, owns=owns)
        self.settings = settings
        #: "Now" for expiry and the live basis (tests move it; default: the time).
        self.clock = clock or (lambda: datetime.now(UTC))
        #: The catalog under ``wh`` never changes (``Context``'s snapshot
        #: generations: a private copy no writer touches), so its signature
        #: is read once instead of on every lookup (``_catalog_signature``).
        self.frozen = frozen
        self._frozen_signature: tuple | None = None

    def _catalog_signature(self) -> tuple | None:
        """The catalog's signature (``ReplicaSet``), read once when ``frozen``:
        the two ``stat`` calls (the WAL's a ``FileNotFoundError`` once
        checkpointed) were ~5% of a warm /pack's CPU, asked of a file nobody
        writes."""
        if not self.frozen:
            return super()._catalog_signature()
        if self._frozen_signature is None:
            self._frozen_signature = super()._catalog_signature()
        return self._frozen_signature

    @classmethod
    def open(
        cls, root: str | Path, *, settings: Any = None, **kwargs: Any
    ) -> MemoryStore:
        """Open the warehouse at ``root`` and a store that owns it."""
        return cls(Warehouse.open(root, **kwargs), settings=settings, owns=True)

    def __enter__(self) -> MemoryStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- lookups ------------------------------------------------------------------
    def memories(
        self,
        tenant_id: str,
        subject_id: str,
        purpose: str,
        at: datetime | None = None,
        *,
        settings: Any = None,
    ):
        """``memories`` served from the replica."""
        settings = settings or self.settings or _default_settings()
        if at is not None and at.tzinfo is None:
            at = at.replace(tzinfo=UTC)
        with self._lock:
            # Time travel (what was known then) reads the lake, and so does a
            # warehouse whose replica cannot be written (read-only folder).
            if self.wh.snapshot is not None or not self.ensure_current():
                return memories(
                    self.wh, tenant_id, subject_id, purpose, at, settings=settings,
                    lake=True,
                )  # fmt: skip
            consent = self._replicas["consent"]
            stored = self._replicas["memories"]
        # Ids are compared too: a key collision cannot serve another subject.
        rows = []
        vectors: dict[str, tuple[str, np.ndarray]] = {}
        key = replica_key(tenant_id, subject_id, purpose)
        lo, _ = stored.span(key)
        for index, payload in enumerate(stored.payloads(key), lo):
            tenant, subject, row = decode_memory(payload)
            if tenant == tenant_id and subject == subject_id:
                rows.append(row)
                vector = stored.vector(index)
                if vector is not None:
                    vectors[row[0]] = (stored.embed_model, vector)
        events = []
        if rows:
            for payload in consent.payloads(replica_key(tenant_id, subject_id)):
                tenant, subject, event = decode_consent(payload)
                if tenant == tenant_id and subject == subject_id:
                    events.append(event)
        served = serve_rows(
            rows,
            events,
            purpose,
            at,
            self.clock(),
            settings.fact_sources,
            settings.hypothesis_sources,
        )
        items = tuple(ServedMemory(*row) for row in served)
        vectors = {
            m.memory_id: vectors[m.memory_id] for m in items if m.memory_id in vectors
        }
        return MemoryView(tenant_id, subject_id, purpose, at, items, vectors)
