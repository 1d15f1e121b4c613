"""``Context``: the read path a context builder holds open (memories, search, pack).

It owns a ``SnapshotReader`` (``serving.snapshot``): every call reads one
committed snapshot from a private copy of the catalog, so a resident reader
(a server, a notebook) never blocks the nightly, backfill or forget. The
memory replica and the evidence index of each new snapshot are warmed before
it is served; calls then read memory-mapped files and an in-process index.

The query functions themselves still live in ``warehouse`` (``memory_api``,
``evidence_api``, ``evidence_pack``); this class wraps them until they move.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import TypeVar

from schemas.evidence import ContextManifest, PackRequest, SearchHit
from schemas.policy import Policy, load_policy
from serving.snapshot import SnapshotReader, is_missing_file
from warehouse.catalog import Warehouse
from warehouse.memory_api import MemoryView

T = TypeVar("T")

#: Query embedding runs one at a time per process: two threads encoding with
#: the shared sentence-transformers model at once crashed the server
#: (segfault under 10 concurrent /pack requests). Search embeds its query under
#: the lock and ranks outside it; pack embeds inside ``pack_context``, so the
#: whole pack holds the lock.
_EMBED_LOCK = threading.Lock()


class Context:
    """Memories, evidence search and context packs over a warehouse's latest
    committed snapshot. Thread-safe (query embedding is serialised); open once
    per process::

        with Context.open("warehouse") as ctx:
            ctx.memories("acme", "u-1", "support").facts
    """

    def __init__(self, reader: SnapshotReader, policy: Policy):
        self.reader = reader
        self.policy = policy

    @classmethod
    def open(
        cls,
        path: str | Path,
        *,
        catalog: str | None = None,
        data_path: str | None = None,
        policy_file: str | Path | None = None,
        poll_s: float = 0.5,
        warm: bool = True,
    ) -> Context:
        """Open the warehouse at ``path`` for reading; ``poll_s``: how often to
        look for a new snapshot (0: only on ``refresh()``)."""
        policy = load_policy(policy_file)
        reader = SnapshotReader(
            path,
            catalog=catalog,
            data_path=data_path,
            poll_s=poll_s,
            warm=(lambda wh: _warm(wh, policy)) if warm else None,
        )
        return cls(reader.start(), policy)

    def close(self) -> None:
        self.reader.close()

    def __enter__(self) -> Context:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def snapshot_id(self) -> int | None:
        """The snapshot calls read now."""
        return self.reader.snapshot_id

    def refresh(self) -> bool:
        """Swap in a newer snapshot now (the watcher does it every ``poll_s``)."""
        return self.reader.refresh()

    # -- queries -----------------------------------------------------------------
    def _read(self, call: Callable[[Warehouse], T]) -> tuple[T, int]:
        """``call`` on the current snapshot; once more on a fresh one if a data
        file the old snapshot names was removed by a writer meanwhile."""
        for attempt in (0, 1):
            with self.reader.generation() as gen:
                try:
                    return call(gen.wh), gen.snapshot_id
                except Exception as exc:
                    if attempt or not is_missing_file(exc):
                        raise
            self.reader.refresh(force=True)
        raise AssertionError("unreachable")

    def memories(
        self,
        tenant_id: str,
        subject_id: str,
        purpose: str,
        at: datetime | None = None,
    ) -> MemoryView:
        """``warehouse.memory_api.memories`` at the current snapshot."""
        return self.memories_at(tenant_id, subject_id, purpose, at)[0]

    def memories_at(
        self, tenant_id: str, subject_id: str, purpose: str, at: datetime | None
    ) -> tuple[MemoryView, int]:
        """``memories`` and the snapshot id that answered."""
        from warehouse.memory_api import memories

        settings = self.policy.memory
        return self._read(
            lambda wh: memories(
                wh, tenant_id, subject_id, purpose, at, settings=settings
            )
        )

    def search_evidence(
        self,
        tenant_id: str,
        principal_groups: Sequence[str],
        query: str,
        k: int = 5,
        as_of: datetime | None = None,
        candidates: int = 20,
        subject_id: str | None = None,
    ) -> list[SearchHit]:
        """``warehouse.evidence_api.search_evidence`` at the current snapshot."""
        return self.search_at(
            tenant_id, principal_groups, query, k, as_of, candidates, subject_id
        )[0]

    def search_at(
        self,
        tenant_id: str,
        principal_groups: Sequence[str],
        query: str,
        k: int = 5,
        as_of: datetime | None = None,
        candidates: int = 20,
        subject_id: str | None = None,
    ) -> tuple[list[SearchHit], int]:
        """``search_evidence`` and the snapshot id that answered."""
        from warehouse.evidence_api import embedder, search_evidence

        with _EMBED_LOCK:
            vector = embedder(self.policy.evidence.embedding).encode([query])[0]
        return self._read(
            lambda wh: search_evidence(
                wh,
                tenant_id,
                principal_groups,
                query,
                k,
                as_of,
                candidates,
                query_embedding=vector,
                policy=self.policy,
                subject_id=subject_id,
            )
        )

    def pack(self, request: PackRequest) -> ContextManifest:
        """``warehouse.evidence_api.pack`` at the current snapshot."""
        return self.pack_at(request)[0]

    def pack_at(self, request: PackRequest) -> tuple[ContextManifest, int]:
        """``pack`` and the snapshot id that answered."""
        from warehouse.evidence_api import pack

        def locked(wh: Warehouse) -> ContextManifest:
            with _EMBED_LOCK:
                return pack(wh, request, policy=self.policy)

        return self._read(locked)


def _warm(wh: Warehouse, policy: Policy) -> None:
    """Build what the first request of a new snapshot would otherwise pay for:
    the memory replica, the evidence index and the query embedder."""
    from warehouse.evidence_api import embedder, load_index
    from warehouse.memory_serving import REPLICA_TABLES, serving_store

    tables = wh.existing_tables()
    if set(REPLICA_TABLES) <= tables:
        serving_store(wh).ensure_current()
    if "evidence_chunks" in tables:
        load_index(wh, policy.evidence.search)
    embedder(policy.evidence.embedding)
