"""``ctxledger serve``: the read path as an HTTP JSON API (FastAPI on uvicorn).

``/memories``, ``/search`` and ``/pack`` need ``Authorization: Bearer <token>``;
the token file (``serving.auth``) gives the tenant and the principal groups, so
request bodies carry neither groups nor (except to name the token's own) a
tenant. ``/health`` is open. The pydantic models below and in ``schemas`` are
the schema; FastAPI publishes it at ``/openapi.json`` (``/docs`` renders it).

Handlers are plain functions: uvicorn runs them on its thread pool, and the
``Context`` they call is thread-safe and never waits on a writer. A
well-formed ``/pack`` is answered before FastAPI's routing, on the event loop
(``_FastPack``), with JSON written from the manifest's data
(``manifest_bytes``); anything it is unsure of takes the route. ``serve
--workers N`` runs N processes that share one listening socket and keep
their connection counts even (``Workers``, ``serving.balance``).
"""

# No ``from __future__ import annotations``: FastAPI resolves the handlers'
# annotations at runtime, and ``Caller`` is local to ``create_app``.

from collections.abc import Callable
from datetime import datetime
from typing import Annotated, Literal

import orjson
from fastapi import Depends, FastAPI, HTTPException, Query, Response
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import BaseModel, ConfigDict, Field

from ctxledger.schemas.evidence import (
    MAX_REQUEST_CANDIDATES,
    MAX_REQUEST_TOKENS,
    ContextManifest,
    PackRequest,
    SearchHit,
)
from ctxledger.schemas.turns import TurnHit
from ctxledger.serving.auth import AuthError, Principal, Tokens, subject_for, tenant_for
from ctxledger.serving.context import Context
from ctxledger.serving.fair_queue import FairQueue
from ctxledger.serving.limits import Limits, RequestGuard
from ctxledger.serving.memories import MemoryView, ServedMemory
from ctxledger.serving.message_search import MessageSearchError


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
    """A search; the tenant defaults to the token's, the groups are the token's.

    ``kinds``: what to search: ``evidence`` (document and tool-output chunks,
    ``hits``) and/or ``messages`` (the subject's conversation turns, ``turns``;
    needs ``subject_id``). ``since``/``until`` bound a turn's time;
    ``context_turns`` returns that many neighbouring turns around each turn."""

    query: str = Field(min_length=1)
    tenant_id: str | None = None
    subject_id: str | None = None
    k: int = Field(default=5, ge=1, le=100)
    candidates: int = Field(default=20, ge=1, le=MAX_REQUEST_CANDIDATES)
    as_of: datetime | None = None
    kinds: list[Literal["evidence", "messages"]] = Field(
        default_factory=lambda: ["evidence"], min_length=1
    )
    since: datetime | None = None
    until: datetime | None = None
    context_turns: int = Field(default=0, ge=0, le=10)


class SearchResponse(BaseModel):
    snapshot_id: int
    hits: list[SearchHit]
    turns: list[TurnHit] = Field(default_factory=list)


class PackBody(_Body):
    """``schemas.evidence.PackRequest`` without ``principal_groups`` (the token's)."""

    query: str = Field(min_length=1)
    window_tokens: int = Field(gt=0, le=MAX_REQUEST_TOKENS)
    tenant_id: str | None = None
    subject_id: str | None = None
    purpose: str | None = None
    max_output_tokens: int = Field(default=0, ge=0, le=MAX_REQUEST_TOKENS)
    overhead_tokens: int = Field(default=0, ge=0, le=MAX_REQUEST_TOKENS)
    mandatory: list[str] = Field(default_factory=list)
    as_of: datetime | None = None
    now: datetime | None = None
    candidates: int | None = Field(default=None, ge=1, le=MAX_REQUEST_CANDIDATES)
    include_memories: bool = True
    include_evidence: bool = True
    #: List each dropped item in full, with its text, besides its summary
    #: (``DroppedItem.item``); off, a 2,000-token pack's JSON is ~3x smaller.
    include_dropped_content: bool = Field(
        default=False,
        description="Also list each dropped item's full ContextItem, with its "
        "content, in `item`; by default a dropped item is its summary (item_id, "
        "kind, source, token_count, scores, reason). The selection and the "
        "manifest_id are the same either way.",
    )


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


class _FastPack:
    """ASGI middleware answering a well-formed, authorised ``POST /pack``
    itself, on the event loop; every other request, and any /pack it is not
    sure of, goes to the FastAPI app behind it.

    FastAPI's routing, dependency solving, body validation and the hop to
    its thread pool were ~1.1 ms of the ~1.6 ms of server CPU a /pack cost
    beyond the pack itself (py-spy, a canned manifest behind the same app).
    The fast path does what that route does (the token, ``PackBody``, the
    token's scope, the pack, pydantic's JSON), and hands the request, body
    replayed, to FastAPI when anything is off: no token, a bad body, a 403,
    a ``PackError``, any exception. So errors keep FastAPI's exact answers
    (401 with its header, 403, 422 with its error list, 500) and the
    OpenAPI schema stays the route's. It sits inside FastAPI's outer
    middleware (server errors, the body size limit). The pack runs on the
    loop's own thread: a pack is CPU-bound Python holding the GIL, so a
    request thread only added the switch (``REQUEST_THREADS``); other
    requests wait meanwhile, in arrival order (``FairQueue``: one pack a
    loop turn, so none waits for a batch it arrived too late for)."""

    def __init__(self, app, *, answer: Callable[[bytes | None, bytes], bytes | None]):
        self.app = app
        self.answer = answer
        #: Packs run one a loop turn in arrival order (``serving.fair_queue``).
        self.queue = FairQueue()

    async def __call__(self, scope, receive, send) -> None:
        if (
            scope["type"] != "http"
            or scope["method"] != "POST"
            or scope["path"] != "/pack"
        ):
            await self.app(scope, receive, send)
            return
        authorization = None
        json_body = False
        for name, value in scope["headers"]:
            if name == b"authorization" and authorization is None:
                authorization = value
            elif name == b"content-type":
                json_body = value.split(b";", 1)[0].strip().lower() == JSON_TYPE
        chunks = []
        more = True
        while more:
            message = await receive()
            if message["type"] != "http.request":  # the client went away
                await self.app(scope, _replay(b"".join(chunks), receive, message), send)
                return
            chunks.append(message.get("body", b""))
            more = message.get("more_body", False)
        body = b"".join(chunks)
        answer = None
        if json_body:
            try:
                answer = await self.queue.run(self.answer, authorization, body)
            except Exception:  # FastAPI answers it (and raises what it raises)
                answer = None
        if answer is None:
            await self.app(scope, _replay(body, receive), send)
            return
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [
                    (b"content-length", str(len(answer)).encode()),
                    (b"content-type", JSON_TYPE),
                ],
            }
        )
        await send({"type": "http.response.body", "body": answer})


JSON_TYPE = b"application/json"


def _replay(body: bytes, receive, pending: dict | None = None):
    """An ASGI ``receive`` that yields ``body`` (already read) once, then
    ``pending`` (a message read after it) or whatever ``receive`` yields."""
    sent = False

    async def again() -> dict:
        nonlocal sent, pending
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        if pending is not None:
            message, pending = pending, None
            return message
        return await receive()

    return again


#: Request threads per process (uvicorn runs the handlers on anyio's thread
#: pool, 40 by default). A pack is CPU-bound Python that holds the GIL most of
#: its time: a second thread only takes turns with it, and the switching cost
#: CPU (bench_serve, 1 process, 4 clients: 17.4 ms of server CPU per /pack on
#: 4 threads, 12.2 ms on 1; 62 -> 82 packs/s). More cores are used by more
#: processes (``serve --workers``); queued requests wait their turn in order.
REQUEST_THREADS = 1

#: The cyclic garbage collector's thresholds while the app serves (restored
#: when it stops). A /pack allocates a few thousand container objects that
#: reference counting frees; at Python's default (a young collection every
#: 700 net allocations) the server ran ~0.25 young collections a pack, each
#: scanning the pack in flight: 0.14 ms of a ~3-4 ms pack (gc callbacks,
#: one process, bench questions). Every 50,000 allocations, the same loop
#: took 5% less CPU (3.88 vs 4.10 ms a pack, interleaved in one process).
#: Cycles (~3 objects a pack) still go at the next young collection; the
#: warm index is frozen out of every collection (``Context``'s warm-up).
GC_THRESHOLD = (50_000, 20, 100)


def create_app(
    context: Context,
    tokens: Tokens,
    threads: int = REQUEST_THREADS,
    *,
    close_context: bool = False,
    fast_pack: bool = True,
    limits: Limits | None = None,
) -> FastAPI:
    """The FastAPI application serving ``context`` to holders of ``tokens``,
    running handlers on ``threads`` threads; ``close_context``: the app owns
    ``context`` and closes it when the server shuts down (a worker process);
    ``fast_pack``: answer well-formed /pack requests before FastAPI's routing
    (``_FastPack``; off: every request takes the route, as tests compare);
    ``limits``: body size, rate per token (``serving.limits``; default
    ``Limits()``). ``/docs`` is swagger-ui from an installed package
    (``_offline_docs``), never a CDN."""
    import json
    from contextlib import asynccontextmanager

    from ctxledger.serving.evidence_pack import PackError

    @asynccontextmanager
    async def lifespan(_app: FastAPI):
        import gc

        from anyio import to_thread

        to_thread.current_default_thread_limiter().total_tokens = threads
        previous = gc.get_threshold()
        gc.set_threshold(*GC_THRESHOLD)
        try:
            yield
        finally:
            gc.set_threshold(*previous)
            if close_context:
                context.close()

    app = FastAPI(
        title="ctxledger",
        summary="Memories, evidence search and context packs for context builders.",
        version="1",
        lifespan=lifespan,
        docs_url=None,
    )
    _offline_docs(app)
    operators = tuple(context.policy.evidence.artifacts.operator_groups)
    # FastAPI's own scheme: OpenAPI declares bearer security on the routes
    # that use it (``auto_error=False``: our 401s keep their messages)
    bearer = HTTPBearer(auto_error=False, description="A token of the token file.")

    # async: a token lookup is a dict read, not worth a hop to the thread pool
    async def principal(
        credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
    ) -> Principal:
        try:
            return tokens.principal(credentials.credentials if credentials else None)
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
        """Memories of one subject a context builder may use for ``purpose``;
        404 for a tenant with no data or a purpose neither the policy nor the
        tenant's rows know (the known purposes named)."""

        def run() -> MemoriesResponse:
            tenant = tenant_for(caller, tenant_id)
            subject = subject_for(caller, subject_id, operators)
            view, snap = context.memories_at(tenant, subject, purpose, at)
            if not view.items:
                problem = context.scope_problem(tenant, purpose)
                if problem is not None:
                    # the token's own tenant only: never name the others
                    named = problem.field != "tenant"
                    raise HTTPException(404, problem.message(named))
            return memories_response(view, snap)

        return guard(run)

    @app.post("/search")
    def search(caller: Caller, body: SearchBody) -> SearchResponse:
        """Hybrid evidence search within the token's tenant, groups and subject."""

        def run() -> SearchResponse:
            tenant = tenant_for(caller, body.tenant_id)
            subject = subject_for(caller, body.subject_id, operators)
            hits: list[SearchHit] = []
            turns: list[TurnHit] = []
            snap = None
            if "evidence" in body.kinds:
                hits, snap = context.search_at(
                    tenant,
                    caller.groups,
                    body.query,
                    body.k,
                    body.as_of,
                    body.candidates,
                    subject,
                )
            if "messages" in body.kinds:
                if subject is None:
                    raise HTTPException(422, "searching messages needs subject_id")
                try:
                    turns, snap = context.search_messages_at(
                        tenant,
                        subject,
                        body.query,
                        body.k,
                        since=body.since,
                        until=body.until,
                        context_turns=body.context_turns,
                    )
                except MessageSearchError as exc:
                    raise HTTPException(503, str(exc)) from None
            return SearchResponse(snapshot_id=snap, hits=hits, turns=turns)

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

    def fast_answer(authorization: bytes | None, body: bytes) -> bytes | None:
        """/pack's 200 answer, or None for FastAPI to answer (``_FastPack``):
        the same token lookup, JSON decoding and ``PackBody`` validation as
        the route (Starlette decodes with ``json.loads``, FastAPI validates
        the decoded object)."""
        if authorization is None:
            return None
        caller = tokens.from_header(authorization.decode("latin-1"))
        return packed(caller, PackBody.model_validate(json.loads(body)))

    if fast_pack:
        app.add_middleware(_FastPack, answer=fast_answer)
    # outermost of ours: a refused request costs no routing and no fast path
    app.add_middleware(
        RequestGuard, limits=limits or Limits(), token_key=tokens.key_for
    )
    return app


#: Where ``/docs`` finds swagger-ui's files (``_offline_docs``).
DOCS_ASSETS = "/docs-assets"


def _offline_docs(app: FastAPI) -> None:
    """``/docs``: FastAPI's swagger-ui page with its script and style from
    the ``fastapi-offline`` package's copy of swagger-ui (5.x, which reads
    OpenAPI 3.1), served under ``DOCS_ASSETS``: FastAPI's default page loads
    them from a CDN, so it was blank offline (issue 32)."""
    from importlib.resources import files

    from fastapi import Request
    from fastapi.openapi.docs import get_swagger_ui_html
    from fastapi.responses import HTMLResponse
    from fastapi.staticfiles import StaticFiles

    static = files("fastapi_offline") / "static"
    app.mount(DOCS_ASSETS, StaticFiles(directory=str(static)), name="docs-assets")

    @app.get("/docs", include_in_schema=False)
    async def docs(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "")  # behind a proxy's prefix
        return get_swagger_ui_html(
            openapi_url=root + (app.openapi_url or "/openapi.json"),
            title=f"{app.title} - Swagger UI",
            swagger_js_url=f"{root}{DOCS_ASSETS}/swagger-ui-bundle.js",
            swagger_css_url=f"{root}{DOCS_ASSETS}/swagger-ui.css",
            swagger_favicon_url=f"{root}{DOCS_ASSETS}/favicon.png",
        )


def serve(
    context: Context,
    tokens: Tokens,
    host: str = "127.0.0.1",
    port: int = 8080,
    limits: Limits | None = None,
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
        app = create_app(context, tokens, limits=limits)
        uvicorn.run(app, host=host, port=port, log_level="info")
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
    limits = Limits(**spec.pop("limits", {}))
    context = Context.open(spec.pop("warehouse"), **spec)
    return create_app(context, tokens, close_context=True, limits=limits)


def serve_workers(
    warehouse: str,
    tokens_file: str,
    *,
    workers: int,
    host: str = "127.0.0.1",
    port: int = 8080,
    limits: Limits | None = None,
    **open_args: object,
) -> None:
    """Run the API in ``workers`` worker processes, each with its own
    ``Context`` over ``warehouse`` (``worker_app``), sharing one listening
    socket on ``host:port`` and keeping their connection counts even
    (``Workers``); ``open_args`` go to ``Context.open`` (JSON-serialisable:
    catalog, data_path, policy_file, poll_s)."""
    import json
    import os
    from dataclasses import asdict

    spec = {"warehouse": str(warehouse), "tokens": str(tokens_file)}
    spec["limits"] = asdict(limits or Limits())
    spec |= {k: (str(v) if k != "poll_s" else v) for k, v in open_args.items()
             if v is not None}  # fmt: skip
    os.environ[WORKER_ENV] = json.dumps(spec)
    Workers(workers, host, port).run()


def bound_socket(host: str, port: int):
    """A TCP socket bound to ``host:port`` (SO_REUSEADDR), not yet listening:
    the workers of ``Workers`` listen on it once they can serve."""
    import socket

    family, kind, proto, _, address = socket.getaddrinfo(
        host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    )[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
    except BaseException:
        sock.close()
        raise
    return sock


class Workers:
    """The supervisor of ``serve_workers``: ``count`` worker processes that
    share one listening socket, restarted when one dies.

    Each worker accepts for itself, only while it holds no more connections
    than the emptiest or fewer than its even share of those served and
    waiting (``serving.balance``): keep-alive connections stay where they
    land, and a worker's clients wait about its connections times one pack
    per request, so the counts are kept even. (A socket per worker with
    SO_REUSEPORT, the kernel choosing by a hash of the addresses, left 50
    connections 21 / 29 as often as even; one socket left to uvicorn gave
    every waiting connection to the first worker to wake.) The supervisor
    binds the socket; a worker listens on it only once its ``Context`` is
    open, so no connection waits on a worker still warming up (before the
    first one, connections are refused). A worker that dies before it
    served (a bad warehouse, a port in use) stops the server with an error,
    as uvicorn's supervisor does; one that dies later is replaced, and its
    slot in the counts is cleared."""

    def __init__(self, count: int, host: str, port: int):
        self.count, self.host, self.port = count, host, port

    def run(self) -> None:
        import logging
        import logging.config
        import multiprocessing
        import signal
        import threading

        from uvicorn.config import LOGGING_CONFIG

        from ctxledger.serving.balance import ABSENT, shared_counts

        logging.config.dictConfig(LOGGING_CONFIG)  # the workers' log format
        log = logging.getLogger("uvicorn.error")
        sock = bound_socket(self.host, self.port)
        spawn = multiprocessing.get_context("spawn")
        counts = shared_counts(self.count, spawn)
        stop = threading.Event()

        def start(slot: int):
            counts[slot] = ABSENT
            ready = spawn.Event()
            proc = spawn.Process(
                target=_serve_worker, args=(sock, counts, slot, ready), daemon=False
            )
            proc.start()
            log.info("Started worker process [%s]", proc.pid)
            return proc, ready

        previous = {
            sig: signal.signal(sig, lambda *_: stop.set())
            for sig in (signal.SIGINT, signal.SIGTERM)
        }
        failed = False
        procs = [start(slot) for slot in range(self.count)]
        try:
            while not stop.wait(0.5):
                for k, (proc, ready) in enumerate(procs):
                    if proc.is_alive():
                        continue
                    if not ready.is_set() or proc.exitcode == STARTUP_FAILURE:
                        log.error(
                            "Worker process [%s] failed to start (exit code %s); "
                            "stopping", proc.pid, proc.exitcode,
                        )  # fmt: skip
                        failed = True
                        stop.set()
                        break
                    log.info("Worker process [%s] died; restarting", proc.pid)
                    procs[k] = start(k)
        finally:
            for proc, _ in procs:
                if proc.is_alive():
                    proc.terminate()  # SIGTERM: it finishes its requests, closes
            for proc, _ in procs:
                proc.join(timeout=30)
                if proc.is_alive():
                    proc.kill()
                    proc.join()
            sock.close()
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        if failed:
            raise RuntimeError("a server worker failed to start; see its log above")


#: uvicorn's exit code for a worker whose application did not start.
STARTUP_FAILURE = 3


def _serve_worker(sock, counts, slot: int, ready) -> None:
    """One process of ``Workers``: open the ``Context`` (``worker_app``),
    then listen on the shared socket and serve, accepting its share of the
    connections (``_BalancedServer``), until SIGTERM. A SIGTERM exits
    through Python's cleanup (``serve``'s reason): the app's shutdown closes
    the Context and deletes its snapshot copies."""
    import signal
    import sys

    import uvicorn

    signal.signal(signal.SIGTERM, lambda signum, _frame: sys.exit(128 + signum))
    app = worker_app()
    server = _balanced_server(uvicorn.Config(app, log_level="info"), sock, counts, slot)
    ready.set()
    server.run()


def _balanced_server(config, sock, counts, slot: int):
    """A uvicorn ``Server`` that takes its connections from ``sock`` through
    a ``serving.balance.BalancedAcceptor`` (slot ``slot`` of ``counts``)
    instead of a listener of its own: uvicorn's startup with no sockets (the
    lifespan, the app), then the acceptor, which hands each connection to
    uvicorn's HTTP protocol as its listener would. Shutdown closes it with
    uvicorn's own servers."""
    import asyncio

    import uvicorn

    from ctxledger.serving.balance import BalancedAcceptor

    class _BalancedServer(uvicorn.Server):
        async def startup(self, sockets=None) -> None:  # noqa: ARG002
            await super().startup(sockets=[])
            loop = asyncio.get_running_loop()

            def protocol():
                return self.config.http_protocol_class(
                    config=self.config,
                    server_state=self.server_state,
                    app_state=self.lifespan.state,
                )

            async def serve(conn) -> None:
                await loop.connect_accepted_socket(protocol, sock=conn)

            sock.listen(self.config.backlog)
            acceptor = BalancedAcceptor(
                sock, counts, slot, lambda: len(self.server_state.connections), serve
            )
            acceptor.start()
            self.servers.append(acceptor)

    return _BalancedServer(config)
