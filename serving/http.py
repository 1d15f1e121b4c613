"""``ctxledger serve``: the read path as an HTTP JSON API (FastAPI on uvicorn).

``/memories``, ``/search`` and ``/pack`` need ``Authorization: Bearer <token>``;
the token file (``serving.auth``) gives the tenant and the principal groups, so
request bodies carry neither groups nor (except to name the token's own) a
tenant. ``/health`` is open. The pydantic models below and in ``schemas`` are
the schema; FastAPI publishes it at ``/openapi.json`` (``/docs`` renders it).

Handlers are plain functions: uvicorn runs them on its thread pool, and the
``Context`` they call is thread-safe and never waits on a writer.
"""

# No ``from __future__ import annotations``: FastAPI resolves the handlers'
# annotations at runtime, and ``Caller`` is local to ``create_app``.

from datetime import datetime
from typing import Annotated

import orjson
from fastapi import Depends, FastAPI, Header, HTTPException, Query, Response
from pydantic import BaseModel, ConfigDict, Field

from ctxledger.schemas.evidence import ContextManifest, PackRequest, SearchHit
from ctxledger.serving.auth import AuthError, Principal, Tokens, subject_for, tenant_for
from ctxledger.serving.context import Context
from ctxledger.serving.memories import MemoryView, ServedMemory


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class MemoriesResponse(BaseModel):
    snapshot_id: int
    tenant_id: str
    subject_id: str
    purpose: str
    facts: list[str]
    hypotheses: list[str]
    conflicts: list[str]
    #: the served rows themselves (``serving.memories.ServedMemory``, one
    #: definition for the Python API and the HTTP schema)
    items: list[ServedMemory]


class SearchBody(_Body):
    """A search; the tenant defaults to the token's, the groups are the token's."""

    query: str = Field(min_length=1)
    tenant_id: str | None = None
    subject_id: str | None = None
    k: int = Field(default=5, ge=1, le=100)
    candidates: int = Field(default=20, ge=1, le=1000)
    as_of: datetime | None = None


class SearchResponse(BaseModel):
    snapshot_id: int
    hits: list[SearchHit]


class PackBody(_Body):
    """``schemas.evidence.PackRequest`` without ``principal_groups`` (the token's)."""

    query: str = Field(min_length=1)
    window_tokens: int = Field(gt=0)
    tenant_id: str | None = None
    subject_id: str | None = None
    purpose: str | None = None
    max_output_tokens: int = Field(default=0, ge=0)
    overhead_tokens: int = Field(default=0, ge=0)
    mandatory: list[str] = Field(default_factory=list)
    as_of: datetime | None = None
    now: datetime | None = None
    candidates: int | None = Field(default=None, ge=1)
    include_memories: bool = True
    include_evidence: bool = True
    #: List each dropped item in full, with its text, besides its summary
    #: (``DroppedItem.item``); off, a 2,000-token pack's JSON is ~3x smaller.
    include_dropped_content: bool = False


class PackResponse(BaseModel):
    snapshot_id: int
    manifest: ContextManifest


class Health(BaseModel):
    status: str
    snapshot_id: int | None


def memories_response(view: MemoryView, snapshot_id: int) -> MemoriesResponse:
    return MemoriesResponse(
        snapshot_id=snapshot_id,
        tenant_id=view.tenant_id,
        subject_id=view.subject_id,
        purpose=view.purpose,
        facts=view.facts,
        hypotheses=view.hypotheses,
        conflicts=view.conflicts,
        items=list(view.items),
    )


def manifest_bytes(snapshot_id: int, manifest: dict) -> bytes:
    """A ``PackResponse`` as JSON from its manifest's data
    (``serving.evidence_pack.manifest_data``): ``orjson`` writes the same
    bytes pydantic's ``model_dump_json`` writes for the validated model
    (shortest round-trip floats, ``Z`` for UTC; checked on real manifests
    by ``tests/unit/evidence/test_manifest_data.py``) in ~0.1 ms instead of
    ~1 ms for building and dumping the models."""
    return orjson.dumps(
        {"snapshot_id": snapshot_id, "manifest": manifest}, option=orjson.OPT_UTC_Z
    )


def pack_request(body: PackBody, principal: Principal, operators) -> PackRequest:
    """The ``PackRequest`` a body asks for, scoped by the token (403s raise)."""
    fields = body.model_dump(exclude={"tenant_id", "subject_id"})
    return PackRequest(
        **fields,
        tenant_id=tenant_for(principal, body.tenant_id),
        subject_id=subject_for(principal, body.subject_id, operators),
        principal_groups=list(principal.groups),
    )


#: Request threads per process (uvicorn runs the handlers on anyio's thread
#: pool, 40 by default). A pack is CPU-bound Python that holds the GIL most of
#: its time: a second thread only takes turns with it, and the switching cost
#: CPU (bench_serve, 1 process, 4 clients: 17.4 ms of server CPU per /pack on
#: 4 threads, 12.2 ms on 1; 62 -> 82 packs/s). More cores are used by more
#: processes (``serve --workers``); queued requests wait their turn in order.
REQUEST_THREADS = 1


def create_app(
    context: Context,
    tokens: Tokens,
    threads: int = REQUEST_THREADS,
    *,
    close_context: bool = False,
) -> FastAPI:
    """The FastAPI application serving ``context`` to holders of ``tokens``,
    running handlers on ``threads`` threads; ``close_context``: the app owns
    ``context`` and closes it when the server shuts down (a worker process)."""
    from contextlib import asynccontextmanager

    from ctxledger.serving.evidence_pack import PackError

    @asynccontextmanager
    async def lifespan(_app: FastAPI):
        from anyio import to_thread

        to_thread.current_default_thread_limiter().total_tokens = threads
        try:
            yield
        finally:
            if close_context:
                context.close()

    app = FastAPI(
        title="ctxledger",
        summary="Memories, evidence search and context packs for context builders.",
        version="1",
        lifespan=lifespan,
    )
    operators = tuple(context.policy.evidence.artifacts.operator_groups)

    # async: a token lookup is a dict read, not worth a hop to the thread pool
    async def principal(
        authorization: Annotated[str | None, Header()] = None,
    ) -> Principal:
        try:
            return tokens.from_header(authorization)
        except AuthError as exc:
            raise HTTPException(
                exc.status, exc.message, headers={"WWW-Authenticate": "Bearer"}
            ) from None

    Caller = Annotated[Principal, Depends(principal)]  # noqa: N806

    def guard(call):
        try:
            return call()
        except AuthError as exc:
            raise HTTPException(exc.status, exc.message) from None
        except PackError as exc:
            raise HTTPException(422, str(exc)) from None

    @app.get("/health")
    def health() -> Health:
        """Liveness, and the snapshot requests read now."""
        return Health(status="ok", snapshot_id=context.snapshot_id)

    @app.get("/memories")
    def memories(
        caller: Caller,
        subject_id: str,
        purpose: str,
        tenant_id: str | None = None,
        at: Annotated[datetime | None, Query()] = None,
    ) -> MemoriesResponse:
        """Memories of one subject a context builder may use for ``purpose``."""

        def run() -> MemoriesResponse:
            tenant = tenant_for(caller, tenant_id)
            subject = subject_for(caller, subject_id, operators)
            view, snap = context.memories_at(tenant, subject, purpose, at)
            return memories_response(view, snap)

        return guard(run)

    @app.post("/search")
    def search(caller: Caller, body: SearchBody) -> SearchResponse:
        """Hybrid evidence search within the token's tenant, groups and subject."""

        def run() -> SearchResponse:
            hits, snap = context.search_at(
                tenant_for(caller, body.tenant_id),
                caller.groups,
                body.query,
                body.k,
                body.as_of,
                body.candidates,
                subject_for(caller, body.subject_id, operators),
            )
            return SearchResponse(snapshot_id=snap, hits=hits)

        return guard(run)

    def packed(caller: Principal, body: PackBody) -> bytes:
        """The /pack answer: the manifest's data serialised as it is
        (``manifest_bytes``), not validated into pydantic objects first."""
        data, snap = context.pack_data_at(pack_request(body, caller, operators))
        return manifest_bytes(snap, data)

    @app.post("/pack", response_model=PackResponse)
    def pack(caller: Caller, body: PackBody) -> Response:
        """A context pack with its manifest (selected and dropped, with reasons).

        Dropped items are listed by their summary (id, kind, source, token
        count, scores, reason); ``include_dropped_content`` adds each one's
        full item with its text."""
        return guard(
            lambda: Response(
                content=packed(caller, body), media_type="application/json"
            )
        )

    return app


def serve(
    context: Context, tokens: Tokens, host: str = "127.0.0.1", port: int = 8080
) -> None:
    """Run the API on uvicorn until interrupted.

    uvicorn re-raises the SIGTERM or SIGINT that stopped it once it has shut
    down; with the default SIGTERM handler the process would then die before
    the caller closes ``context``, leaving its snapshot copies (memory texts
    among them) in the temp folder. A SIGTERM handler that exits keeps the
    caller's cleanup running.
    """
    import signal
    import sys

    import uvicorn

    def _exit(signum: int, _frame: object) -> None:
        sys.exit(128 + signum)

    previous = signal.signal(signal.SIGTERM, _exit)
    try:
        uvicorn.run(create_app(context, tokens), host=host, port=port, log_level="info")
    finally:
        signal.signal(signal.SIGTERM, previous)


#: The environment variable a worker process of ``serve_workers`` reads its
#: ``Context.open`` arguments and token file from (JSON).
WORKER_ENV = "CTXLEDGER_SERVE_WORKER"


def worker_app() -> FastAPI:
    """uvicorn's app factory in each worker process of ``serve_workers``.

    Every worker opens its own ``Context`` (its own snapshot copy, memory
    replica and index): DuckDB connections and the replica cannot be shared
    across processes, and a pack is CPU-bound Python that one process runs on
    one core at a time (the GIL), so N processes is what uses N cores."""
    import json
    import os

    spec = json.loads(os.environ[WORKER_ENV])
    tokens = Tokens.load(spec.pop("tokens"))
    context = Context.open(spec.pop("warehouse"), **spec)
    return create_app(context, tokens, close_context=True)


def serve_workers(
    warehouse: str,
    tokens_file: str,
    *,
    workers: int,
    host: str = "127.0.0.1",
    port: int = 8080,
    **open_args: object,
) -> None:
    """Run the API in ``workers`` uvicorn worker processes sharing one socket,
    each with its own ``Context`` over ``warehouse`` (``worker_app``);
    ``open_args`` go to ``Context.open`` (JSON-serialisable: catalog,
    data_path, policy_file, poll_s). uvicorn's supervisor restarts a worker
    that dies; a worker answers its health pings from a thread while it opens
    its Context (tens of seconds on a large warehouse)."""
    import json
    import os

    import uvicorn

    spec = {"warehouse": str(warehouse), "tokens": str(tokens_file)}
    spec |= {k: (str(v) if k != "poll_s" else v) for k, v in open_args.items()
             if v is not None}  # fmt: skip
    os.environ[WORKER_ENV] = json.dumps(spec)
    uvicorn.run(
        "ctxledger.serving.http:worker_app",
        factory=True,
        workers=workers,
        host=host,
        port=port,
        log_level="info",
        timeout_worker_healthcheck=30,
    )
