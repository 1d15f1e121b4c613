"""``Context``: the read path a context builder holds open (memories, search, pack).

It owns a ``SnapshotReader`` (``serving.snapshot``): every call reads one
committed snapshot from a private copy of the catalog, so a resident reader
(a server, a notebook) never blocks the nightly, backfill or forget. The
memory replica and the evidence index of each new snapshot are warmed before
it is served; calls then read memory-mapped files (through the snapshot's
``MemoryStore``, which the context owns and closes with the snapshot) and an
in-process index.

The query functions live beside it in ``serving`` (``memories``,
``evidence_search``, ``evidence_pack``); ``warehouse`` keeps the lake, its
lifecycle and erasure, and never imports this package.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

from ctxledger.schemas.evidence import ContextManifest, PackRequest, SearchHit
from ctxledger.schemas.policy import Policy, load_policy
from ctxledger.schemas.sources import SourceRegistry
from ctxledger.schemas.turns import TurnHit
from ctxledger.serving.memories import MemoryStore, MemoryView
from ctxledger.serving.snapshot import Generation, SnapshotReader, is_missing_file
from ctxledger.warehouse.catalog import Warehouse
from ctxledger.warehouse.scopes import UnknownScope

T = TypeVar("T")


def as_time(value: datetime | str | int | float | None, name: str) -> datetime | None:
    """``value`` as the HTTP API reads it (pydantic's datetime parsing: a
    ``datetime``, an ISO date or date-time string, epoch seconds), so Python
    callers and HTTP ones can pass the same ``as_of``/``at`` forms; a value
    it cannot read is a ``ValueError`` naming ``name``."""
    if value is None or isinstance(value, datetime):
        return value
    from pydantic import TypeAdapter, ValidationError

    try:
        return TypeAdapter(datetime).validate_python(value)
    except ValidationError as exc:
        reason = exc.errors()[0]["msg"]
        raise ValueError(f"{name}: {reason} (got {value!r})") from None


#: Per snapshot: the active source registry (one catalog query; it was a
#: third of a warm pack when read per call). Two generations overlap at a swap.
_REGISTRIES_KEPT = 2


class Context:
    """Memories, evidence search and context packs over a warehouse's latest
    committed snapshot. Thread-safe: calls run in parallel (the embedding
    model serialises its own calls, ``warehouse.evidence_api.embedder``; the
    memory replica and the evidence index are read-only); open once per
    process::

        with Context.open("warehouse") as ctx:
            ctx.memories("acme", "u-1", "support").facts
    """

    def __init__(self, reader: SnapshotReader, policy: Policy, replica: bool = True):
        self.reader = reader
        self.policy = policy
        #: Memories from each snapshot's replica (False: the lake, see ``open``).
        self.replica = replica
        self._registries: dict[int, SourceRegistry] = {}
        self._registry_lock = threading.Lock()
        self._store_lock = threading.Lock()
        #: (snapshot id, tenant) pairs ``scope_problem`` found known: a
        #: miss for a new subject of a known tenant then costs no query.
        self._known_tenants: set[tuple[int | None, str]] = set()

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
        blas_threads: int | None = 1,
        replica: bool = True,
    ) -> Context:
        """Open the warehouse at ``path`` for reading; ``poll_s``: how often to
        look for a new snapshot (0: only on ``refresh()``); ``blas_threads``:
        the process's BLAS pool size (``limit_blas_threads``; None: leave it);
        ``replica=False``: memories run the ``memories_served`` macro on the
        snapshot instead of building this reader's private replica of it, for a
        one-shot reader (the ``memories`` command): at 1M memories one lake read
        took 0.4-0.5 s, the replica build 7-10 s (loaded 2-core machine)."""
        policy = serving_policy(load_policy(policy_file))
        if blas_threads:
            limit_blas_threads(blas_threads)
        reader = SnapshotReader(
            path,
            catalog=catalog,
            data_path=data_path,
            poll_s=poll_s,
            warm=(lambda wh: _warm(wh, policy, replica)) if warm else None,
        )
        return cls(reader.start(), policy, replica)

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
    def _read(self, call: Callable[[Generation], T]) -> tuple[T, int]:
        """``call`` on the current snapshot; once more on a fresh one if a data
        file the old snapshot names was removed by a writer meanwhile."""
        for attempt in (0, 1):
            with self.reader.generation() as gen:
                try:
                    return call(gen), gen.snapshot_id
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
        """``serving.memories.memories`` at the current snapshot."""
        return self.memories_at(tenant_id, subject_id, purpose, at)[0]

    def memories_at(
        self, tenant_id: str, subject_id: str, purpose: str, at: datetime | None
    ) -> tuple[MemoryView, int]:
        """``memories`` and the snapshot id that answered."""
        from ctxledger.serving.memories import memories

        at = as_time(at, "at")
        settings = self.policy.memory
        return self._read(
            lambda gen: memories(
                gen.wh,
                tenant_id,
                subject_id,
                purpose,
                at,
                settings=settings,
                lake=not self.replica,
                store=self._store(gen) if self.replica else None,
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
        """``serving.evidence_search.search_evidence`` at the current snapshot."""
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
        from ctxledger.serving.evidence_search import embed_query, search_evidence

        as_of = as_time(as_of, "as_of")
        vector = embed_query(self.policy.evidence.embedding, query)
        return self._read(
            lambda gen: search_evidence(
                gen.wh,
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

    #: ``search`` is ``search_evidence`` (the name the design and callers use).
    search = search_evidence

    def scope_problem(self, tenant_id: str, purpose: str) -> UnknownScope | None:
        """Why ``memories(tenant_id, _, purpose)`` can never match: an unknown
        tenant or purpose (``warehouse.scopes``); None when both are known.
        Callers ask only after an empty answer (the CLI, the servers)."""
        from ctxledger.warehouse.scopes import memory_scope_problem

        purposes = self.policy.memory.purpose_names
        snapshot = self.snapshot_id
        if purpose in purposes and (snapshot, tenant_id) in self._known_tenants:
            return None  # an unknown subject of a known scope: no query
        problem, _ = self._read(
            lambda gen: memory_scope_problem(gen.wh, tenant_id, purpose, purposes)
        )
        if problem is None or problem.field != "tenant":
            if len(self._known_tenants) > 10_000:  # tenants of old snapshots
                self._known_tenants.clear()
            self._known_tenants.add((snapshot, tenant_id))
        return problem

    def search_messages(
        self,
        tenant_id: str,
        subject_id: str,
        query: str,
        k: int = 5,
        *,
        since: datetime | None = None,
        until: datetime | None = None,
        context_turns: int = 0,
    ) -> list[TurnHit]:
        """``serving.message_search.search_messages`` at the current snapshot:
        the subject's conversation turns that best answer ``query``."""
        return self.search_messages_at(
            tenant_id,
            subject_id,
            query,
            k,
            since=since,
            until=until,
            context_turns=context_turns,
        )[0]

    def search_messages_at(
        self,
        tenant_id: str,
        subject_id: str,
        query: str,
        k: int = 5,
        *,
        since: datetime | None = None,
        until: datetime | None = None,
        context_turns: int = 0,
    ) -> tuple[list[TurnHit], int]:
        """``search_messages`` and the snapshot id that answered."""
        from ctxledger.serving.message_search import search_messages

        return self._read(
            lambda gen: search_messages(
                gen.wh,
                tenant_id,
                subject_id,
                query,
                k,
                policy=self.policy,
                since=since,
                until=until,
                context_turns=context_turns,
            )
        )

    def pack(self, request: PackRequest) -> ContextManifest:
        """``serving.evidence_pack.pack`` at the current snapshot."""
        return self.pack_at(request)[0]

    def pack_at(self, request: PackRequest) -> tuple[ContextManifest, int]:
        """``pack`` and the snapshot id that answered."""
        from ctxledger.serving.evidence_pack import pack

        return self._pack(pack, request)

    def pack_data_at(self, request: PackRequest) -> tuple[dict[str, Any], int]:
        """``pack_at``'s manifest as unvalidated JSON-ready data
        (``serving.evidence_pack.manifest_data``) and the snapshot id: what
        the HTTP server serialises without building the pydantic objects."""
        from ctxledger.serving.evidence_pack import pack_data

        return self._pack(pack_data, request)

    def _pack(self, pack: Callable[..., T], request: PackRequest) -> tuple[T, int]:
        """``pack`` (``evidence_pack.pack`` or ``pack_data``) on the current
        snapshot, with its registry and memory store."""
        from ctxledger.serving.memories import memories as read_memories

        settings = self.policy.memory
        lake = not self.replica

        def run(gen: Generation) -> T:
            registry = self._registry(gen.wh)
            store = None if lake else self._store(gen)

            def memories(
                tenant_id: str, subject_id: str, purpose: str, at: datetime | None
            ) -> MemoryView:
                return read_memories(
                    gen.wh, tenant_id, subject_id, purpose, at,
                    settings=settings, lake=lake, store=store,
                )  # fmt: skip

            return pack(
                gen.wh,
                request,
                policy=self.policy,
                registry=registry,
                memories=memories,
            )

        return self._read(run)

    def _store(self, gen: Generation) -> MemoryStore:
        """The snapshot's memory store (made by the warm-up, or here on first
        use), closed with its generation: the context owns it, not the
        ``Warehouse``."""
        store = gen.state
        if store is None:
            with self._store_lock:
                store = gen.state
                if store is None:
                    store = gen.state = MemoryStore(gen.wh, frozen=True)
        return store

    def _registry(self, wh: Warehouse) -> SourceRegistry:
        """The snapshot's active source registry, read once per snapshot
        (under a lock: the snapshot's DuckDB connection runs one statement
        at a time)."""
        from ctxledger.warehouse.sources import active_registry

        key = wh.current_snapshot()
        registry = self._registries.get(key)
        if registry is None:
            with self._registry_lock:
                registry = self._registries.get(key)
                if registry is None:
                    registry = active_registry(wh, self.policy)
                    for old in sorted(self._registries)[: -_REGISTRIES_KEPT + 1]:
                        del self._registries[old]
                    self._registries[key] = registry
        return registry


def limit_blas_threads(threads: int) -> None:
    """Size the process's BLAS (OpenBLAS) pool to ``threads``.

    A pack's matrix products are small (a tenant's slice of vectors times one
    query, a hundred-odd candidates times a selected item): a second BLAS
    thread gains nothing, and OpenBLAS threads busy-wait, against the request
    threads and anything else on the cores. Measured (bench_pack, 100k chunks,
    load average ~9 on 2 cores): a warm pack took 34.6 ms of CPU with
    OpenBLAS's default 2 threads, 15.6 ms with 1. Process-wide, like the
    ``OPENBLAS_NUM_THREADS`` variable it replaces for a running process;
    a no-op without ``threadpoolctl`` (a direct dependency)."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - the query-only install
        return
    threadpool_limits(threads, user_api="blas")


def serving_policy(policy: Policy) -> Policy:
    """``policy`` with query embeddings on one torch thread unless it sets
    ``evidence.embedding.torch_threads`` itself.

    A query is one short text: a second thread saves nothing, and on a busy
    2-core machine torch's pool spins against the request threads. Measured
    (load average ~10): one MiniLM query embedding took 20-29 ms wall and
    8-10 ms CPU on one thread, 440-740 ms wall and 130-290 ms CPU on two."""
    embedding = policy.evidence.embedding
    if embedding.torch_threads:
        return policy
    evidence = policy.evidence.model_copy(
        update={"embedding": embedding.model_copy(update={"torch_threads": 1})}
    )
    return policy.model_copy(update={"evidence": evidence})


def _warm(wh: Warehouse, policy: Policy, replica: bool = True) -> MemoryStore:
    """Build what the first request of a new snapshot would otherwise pay for:
    the memory replica (unless ``replica`` is off), the evidence index and the
    query embedder. Returns the snapshot's memory store (the generation's
    ``state``)."""
    from ctxledger.serving.evidence_search import load_index
    from ctxledger.warehouse.evidence_api import embedder
    from ctxledger.warehouse.memory_serving import REPLICA_TABLES

    store = MemoryStore(wh, frozen=True)
    try:
        tables = wh.existing_tables()
        if replica and set(REPLICA_TABLES) <= tables:
            store.ensure_current()
        if "evidence_chunks" in tables:
            load_index(wh, policy.evidence.search).warm()
        embedder(policy.evidence.embedding)
    except BaseException:
        store.close()
        raise
    _freeze_heap()
    return store


def _freeze_heap() -> None:
    """Move what is alive now (the index's columns, the model, caches) out of
    the cyclic garbage collector's reach: a full collection scans every
    tracked object, and with a warm 100k-chunk index one took 90-990 ms
    (bench_pack, loaded 2-core machine), a pause every thread of a server
    waits for. Unfreezing first lets the previous snapshot's cycles be
    collected; objects are still freed by reference counting when dropped."""
    gc.unfreeze()
    gc.collect()
    gc.freeze()
