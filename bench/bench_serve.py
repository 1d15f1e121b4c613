"""``ctxledger serve`` under load: /pack latency with 50 concurrent clients.

Issue 15's target: 50 concurrent clients for 60 s on loopback, p99 of /pack
under 100 ms at 100k chunks, warm, 0 errors.

1. The warehouse ``bench_pack`` builds once and caches (``--chunks`` synthetic
   evidence chunks in 20 tenants, ``--memories`` memories; ``build_warehouse``
   below writes the chunks).
2. The real server (``python -m jobs.cli serve``) in its own process on
   127.0.0.1, so the load generator does not share its interpreter; a token
   for tenant t00, groups [sre], any subject.
3. Closed-loop clients (one connection each, the next request when the
   previous answered) post /pack (2,000-token window, a subject of t00,
   purpose support, a random question of a fixed list of ``--queries``):
   after one warm-up pass over the list, ``--sweep`` client counts for
   ``--sweep-seconds`` each, then ``--clients`` for ``--seconds``. Per run:
   throughput, errors (any non-200 or transport error), p50/p95/p99, the
   server's CPU per request (``/proc``) and the load generator's own, a
   host speed probe before and after (``host_probe``), and the most clients
   meeting the p99 target. The client (``--client``):
   ``raw`` (default), pre-encoded HTTP/1.1 keep-alive requests on asyncio
   connections that read only the status line and ``Content-Length``, like
   ``wrk``, on uvloop (~0.1 ms of CPU a request, on the server's cores;
   ~0.3 ms on asyncio's own loop); ``httpx``, the earlier client (~1 ms or
   more).
4. ``--distinct N``: then N requests from ``--clients`` clients, each with a
   question asked nowhere before (no query-embedding cache hit: every request
   embeds its question), the server's honest capacity for new questions.

A closed loop of N clients against a server doing R requests/s waits about
N/R s per request, so the p99 says as much about throughput as about one
pack's cost: the sweep shows both.

Run: ``python bench/bench_serve.py [--chunks 100000] [--memories 1000000]
[--clients 50] [--seconds 60] [--sweep 1,2,4,8,16] [--client raw|httpx]
[--distinct 2000]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

TARGET_P99_MS = 100.0
TOKEN = "bench-token-t00-sre-000001"
CHUNKS_PER_DOC = 20


def _column(field, n: int, given: dict):
    """A column for ``field``: given values, else a default of its type."""
    import pyarrow as pa

    if field.name in given:
        return pa.array(given[field.name], field.type)
    if field.nullable:
        return pa.nulls(n, field.type)
    if pa.types.is_list(field.type):
        return pa.array([[] for _ in range(n)], field.type)
    if pa.types.is_boolean(field.type):
        return pa.array([False] * n, field.type)
    if pa.types.is_integer(field.type):
        return pa.array([0] * n, field.type)
    if pa.types.is_timestamp(field.type):
        return pa.array([0] * n, field.type)
    return pa.array(["bench"] * n, field.type)


def _table(model, n: int, given: dict):
    import pyarrow as pa

    from ctxledger.schemas.arrow import arrow_schema

    schema = arrow_schema(model)
    return pa.table([_column(f, n, given) for f in schema], schema=schema)


def build_warehouse(root: Path, n: int, tenants: int = 20) -> list[str]:
    """Commit ``n`` synthetic chunks; returns the corpus sentences they use."""
    import pyarrow as pa
    from bench_evidence import synthetic

    from ctxledger.pipelines.ingest.tokens import count_tokens
    from ctxledger.schemas.evidence import DocumentVersion, EvidenceChunk
    from ctxledger.warehouse import Warehouse

    table, vectors, sentences, _ = synthetic(n, tenants=tenants)
    chunks = {name: table.column(name).to_pylist() for name in table.column_names}
    chunks.pop("authority")
    chunks.pop("effective_to")
    # Realistic documents: the 20 chunks of a version share its tenant, ACL
    # and date (the last 180 days: an epoch date would decay every chunk's
    # freshness to 0), lie one after another, and count their real tokens.
    rng = np.random.default_rng(7)
    docs_n = (n + CHUNKS_PER_DOC - 1) // CHUNKS_PER_DOC
    doc_tenant = rng.integers(0, tenants, size=docs_n)
    groups = ["*", "sre", "billing", "legal"]
    doc_acl = rng.integers(0, len(groups), size=docs_n)
    now = int(time.time() * 1_000_000)
    doc_from = now - rng.integers(1, 180, size=docs_n) * 86_400_000_000
    doc_of = np.arange(n) // CHUNKS_PER_DOC
    chunks["doc_id"] = [f"doc_{d}" for d in doc_of]
    chunks["doc_version_id"] = [f"dv_{d}" for d in doc_of]
    chunks["tenant_id"] = [f"t{int(doc_tenant[d]):02d}" for d in doc_of]
    chunks["acl"] = [[groups[int(doc_acl[d])]] for d in doc_of]
    chunks["effective_from"] = pa.array(doc_from[doc_of], pa.timestamp("us", "UTC"))
    chunks["token_count"] = [count_tokens(t) for t in chunks["text"]]
    starts, position = [], {}
    for d, text in zip(doc_of, chunks["text"], strict=True):
        at = position.get(d, 0)
        starts.append(at)
        position[d] = at + len(text) + 2
    chunks["char_start"] = starts
    chunks["char_end"] = [
        a + len(t) for a, t in zip(starts, chunks["text"], strict=True)
    ]
    chunks["ordinal"] = [i % CHUNKS_PER_DOC for i in range(n)]
    chunks["embedding"] = pa.FixedSizeListArray.from_arrays(
        pa.array(vectors.reshape(-1), pa.float32()), vectors.shape[1]
    ).cast(pa.list_(pa.float32()))
    chunks["embed_model"] = ["all-MiniLM-L6-v2"] * n
    first = {}
    for i, version in enumerate(chunks["doc_version_id"]):
        first.setdefault(version, i)
    rows = list(first.values())
    docs = {
        "doc_version_id": [chunks["doc_version_id"][i] for i in rows],
        "tenant_id": [chunks["tenant_id"][i] for i in rows],
        "doc_id": [chunks["doc_id"][i] for i in rows],
        "kind": ["document"] * len(rows),
        "version": ["v01"] * len(rows),
        "version_sort": ["v01"] * len(rows),
        "acl": [chunks["acl"][i] for i in rows],
        "trust": ["untrusted"] * len(rows),
        "effective_from": pa.array(doc_from, pa.timestamp("us", "UTC")),
    }
    extra = {
        "documents": _table(DocumentVersion, len(rows), docs),
        "evidence_chunks": _table(EvidenceChunk, n, chunks),
    }
    with Warehouse.open(root, create=True) as wh:
        wh.commit_staged("bench-serve", {}, extra, {})
    return sentences


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(
    wh: Path, tmp: Path, port: int, workers: int | None = None
) -> subprocess.Popen:
    """The real server in its own process (``workers`` worker processes, the
    server's default when None); its log goes to ``tmp/serve.log``."""
    tokens = tmp / "tokens.json"
    row = {"token": TOKEN, "tenant": "t00", "groups": ["sre"], "subjects": ["*"]}
    tokens.write_text(json.dumps({"tokens": [row]}))
    argv = [
        sys.executable,
        "-m",
        "ctxledger.jobs.cli",
        "serve",
        "--tokens",
        str(tokens),
    ]
    argv += ["-w", str(wh), "--port", str(port)]
    argv += ["--workers", str(workers)] if workers else []
    log = open(tmp / "serve.log", "wb")  # noqa: SIM115 (closed with the process)
    return subprocess.Popen(argv, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)


#: uvicorn's line once a (worker) process serves.
STARTED = "Application startup complete"


async def _wait_ready(
    url: str,
    proc: subprocess.Popen,
    timeout: float = 1200,
    log: Path | None = None,
    workers: int = 1,
) -> None:
    """Until /health answers and, with ``log``, ``workers`` processes have
    logged their startup (each opens its own Context, one after another or
    together: /health answers from the first)."""
    import httpx

    deadline = time.monotonic() + timeout
    async with httpx.AsyncClient() as client:
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError("the server exited; see serve.log")
            try:
                if (await client.get(f"{url}/health")).status_code == 200 and (
                    log is None
                    or log.read_text(errors="replace").count(STARTED) >= workers
                ):
                    return
            except httpx.HTTPError:
                pass
            await asyncio.sleep(0.5)
    raise TimeoutError("the server did not start")


def body_for(query: str, i: int) -> dict:
    """A /pack body: a subject of tenant t00 (bench_pack's), 2,000 tokens."""
    from bench_pack import subject_of

    return {
        "query": query,
        "window_tokens": 2000,
        "subject_id": subject_of(i),
        "purpose": "support",
    }


async def load(
    url: str, queries: list[str], clients: int, seconds: float | None
) -> tuple[list[float], list[str]]:
    """Latencies (ms) of every /pack and the errors, from ``clients`` closed
    loops (one connection each; the next request when the previous answered,
    a random query of the fixed list). ``seconds=None``: one pass over the
    queries in order (the warm-up)."""
    import httpx

    latencies: list[float] = []
    errors: list[str] = []
    stop = time.monotonic() + (seconds or 0)
    headers = {"Authorization": f"Bearer {TOKEN}"}

    async def client_loop(seed: int) -> None:
        rng = random.Random(seed)
        limits = httpx.Limits(max_connections=1)
        async with httpx.AsyncClient(base_url=url, timeout=60, limits=limits) as c:
            n = 0
            while (n < len(queries)) if seconds is None else time.monotonic() < stop:
                i = n if seconds is None else rng.randrange(len(queries))
                n += 1
                start = time.perf_counter()
                try:
                    r = await c.post(
                        "/pack", json=body_for(queries[i], i), headers=headers
                    )
                    if r.status_code != 200:
                        errors.append(f"{r.status_code}")
                        continue
                except httpx.HTTPError as exc:
                    errors.append(type(exc).__name__)
                    continue
                latencies.append((time.perf_counter() - start) * 1000)

    await asyncio.gather(*(client_loop(i) for i in range(clients)))
    return latencies, errors


def pack_requests(port: int, queries: list[str]) -> list[bytes]:
    """Every /pack of ``queries`` as the bytes of one HTTP/1.1 keep-alive
    request, encoded once (the ``raw`` client writes them as they are)."""
    head = (
        f"POST /pack HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
        f"Authorization: Bearer {TOKEN}\r\nContent-Type: application/json\r\n"
    )
    out = []
    for i, query in enumerate(queries):
        body = json.dumps(body_for(query, i)).encode()
        out.append(f"{head}Content-Length: {len(body)}\r\n\r\n".encode() + body)
    return out


class _Connection(asyncio.Protocol):
    """One keep-alive connection of the ``raw`` client: writes a pre-encoded
    request and resolves a future with the status once ``Content-Length``
    bytes of body have arrived (the server always sends one). Like ``wrk``,
    it parses only the status line and that header, so the load generator
    spends a few tens of microseconds of CPU per request (httpx: ~1 ms),
    CPU the server on the same cores keeps."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.buffer = bytearray()
        self.need = -1
        self.status = 0
        self.waiter: asyncio.Future[int] | None = None

    def connection_made(self, transport) -> None:  # type: ignore[override]
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        if self.need < 0:
            end = self.buffer.find(b"\r\n\r\n")
            if end < 0:
                return
            head = bytes(self.buffer[:end]).lower()
            self.status = int(head[9:12])
            at = head.find(b"\r\ncontent-length:")
            if at < 0:
                self._fail(ConnectionError("no content-length"))
                return
            stop = head.find(b"\r\n", at + 2)
            length = int(head[at + 17 : stop if stop > 0 else len(head)])
            self.need = end + 4 + length
        if len(self.buffer) >= self.need:
            del self.buffer[: self.need]
            self.need = -1
            if self.waiter is not None and not self.waiter.done():
                self.waiter.set_result(self.status)

    def _fail(self, exc: Exception) -> None:
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_exception(exc)

    def connection_lost(self, exc: Exception | None) -> None:
        self._fail(exc or ConnectionError("connection closed"))

    async def send(self, request: bytes) -> int:
        assert self.transport is not None
        self.waiter = asyncio.get_running_loop().create_future()
        self.transport.write(request)
        return await self.waiter


async def load_raw(
    port: int,
    requests: list[bytes],
    clients: int,
    seconds: float | None,
    *,
    distinct: bool = False,
    per_client: list[float] | None = None,
) -> tuple[list[float], list[str]]:
    """``load`` with the lean client (``_Connection``, pre-encoded requests).
    ``distinct``: each request takes the next unused one of ``requests`` (no
    query is asked twice; the run stops early when they run out);
    ``per_client`` gets each connection's median latency (ms): with several
    server workers a connection stays on the one that accepted it, so the
    spread shows how evenly the connections landed."""
    latencies: list[float] = []
    errors: list[str] = []
    stop = time.monotonic() + (seconds or 0)
    loop = asyncio.get_running_loop()
    taken = iter(range(len(requests)))

    async def client_loop(seed: int) -> None:
        rng = random.Random(seed)
        try:
            _, conn = await loop.create_connection(_Connection, "127.0.0.1", port)
        except OSError as exc:
            errors.append(type(exc).__name__)
            return
        n = 0
        mine: list[float] = []
        try:
            while (n < len(requests)) if seconds is None else time.monotonic() < stop:
                if seconds is None:
                    i = n
                elif distinct:
                    i = next(taken, -1)
                    if i < 0:
                        return
                else:
                    i = rng.randrange(len(requests))
                n += 1
                start = time.perf_counter()
                try:
                    status = await conn.send(requests[i])
                except (OSError, ConnectionError) as exc:
                    errors.append(type(exc).__name__)
                    _, conn = await loop.create_connection(
                        _Connection, "127.0.0.1", port
                    )
                    continue
                if status != 200:
                    errors.append(f"{status}")
                    continue
                latencies.append((time.perf_counter() - start) * 1000)
                mine.append(latencies[-1])
        finally:
            if conn.transport is not None:
                conn.transport.close()
            if per_client is not None and mine:
                per_client.append(float(np.median(mine)))

    await asyncio.gather(*(client_loop(i) for i in range(clients)))
    return latencies, errors


def _stat(pid: int) -> list[str] | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None


def host_probe() -> float:
    """CPU ms of a fixed pure-Python loop (~210 ms on a quiet spell here):
    the shared machine's speed moves by ±10-30% within minutes, so each run
    prints it before and after, and runs compare at similar probes."""
    started = time.process_time()
    total = 0
    for i in range(5_000_000):
        total += i * i % 7
    return (time.process_time() - started) * 1000


def cpu_by_process(pid: int) -> dict[int, float]:
    """User + system CPU seconds so far of a process and of each of its live
    descendants (the worker processes of ``serve --workers N``; ``/proc``)."""
    parent: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (fields := _stat(int(entry.name))):
            parent[int(entry.name)] = int(fields[1])
    tree, grew = {pid}, True
    while grew:
        more = {p for p, pp in parent.items() if pp in tree} - tree
        tree |= more
        grew = bool(more)
    out = {}
    for p in tree:
        fields = _stat(p)
        if fields is not None:
            out[p] = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return out


def cpu_seconds(pid: int) -> float:
    """``cpu_by_process`` summed: the server's CPU seconds so far."""
    return sum(cpu_by_process(pid).values()) if _stat(pid) else float("nan")


def _pct(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) if values else float("nan")


def _line(label: str, run: tuple, seconds: float) -> str:
    lat, errors, cpu, client_cpu = run
    p99 = _pct(lat, 99)
    verdict = "met" if p99 < TARGET_P99_MS and not errors else "NOT met"
    per = cpu * 1000 / max(1, len(lat))
    return (
        f"  {label}: {len(lat):,} requests ({len(lat) / seconds:.0f}/s), errors "
        f"{len(errors)} {dict(Counter(errors).most_common(3))}, p50 "
        f"{_pct(lat, 50):.1f} ms, p95 {_pct(lat, 95):.1f} ms, p99 {p99:.1f} ms "
        f"(target < {TARGET_P99_MS:.0f} ms: {verdict}); CPU per request: server "
        f"{per:.1f} ms, load generator {client_cpu * 1000 / max(1, len(lat)):.2f} ms"
    )


class Loader:
    """The load generator: ``raw`` (``load_raw``, the default) or ``httpx``
    (``load``), over the bench's fixed questions or, for ``distinct`` runs,
    a list of questions none of which is asked twice."""

    def __init__(self, port: int, queries: list[str], client: str, distinct: list[str]):
        self.port, self.url = port, f"http://127.0.0.1:{port}"
        self.queries, self.client, self.distinct = queries, client, distinct
        if client == "raw":
            self.encoded = pack_requests(port, queries)
            self.encoded_distinct = pack_requests(port, distinct)

    def run(
        self, clients: int, seconds: float | None, distinct: bool = False
    ) -> tuple[list[float], list[str]]:
        self.spread: list[float] = []
        if self.client == "raw":
            requests = self.encoded_distinct if distinct else self.encoded
            return run_loop(
                load_raw(
                    self.port,
                    requests,
                    clients,
                    seconds,
                    distinct=distinct,
                    per_client=self.spread,
                )
            )
        if distinct:
            raise SystemExit("--distinct runs need --client raw")
        return asyncio.run(load(self.url, self.queries, clients, seconds))


def run_loop(coro):
    """``asyncio.run`` on uvloop where it is installed (the serve extra): the
    load generator shares the server's cores, and uvloop's loop spends about
    half the CPU per request of asyncio's own."""
    try:
        import uvloop
    except ImportError:  # pragma: no cover - without the serve extra
        return asyncio.run(coro)
    return uvloop.run(coro)


def measured(
    pid: int, loader: Loader, clients: int, seconds: float, distinct: bool = False
):
    """A load run, the server's CPU seconds over it (``/proc``) and the load
    generator's own (this process). Prints how the connections' median
    latencies spread, each server process's share of the CPU (workers that
    got more connections work more), the machine's load average (1 min)
    and ``host_probe`` before and after: the cores are shared, so they say
    what else ran and how fast the host was."""
    load, probe = os.getloadavg()[0], host_probe()
    before, mine = cpu_by_process(pid), time.process_time()
    lat, errors = loader.run(clients, seconds, distinct)
    after = cpu_by_process(pid)
    mine = time.process_time() - mine
    used = {p: after[p] - before.get(p, 0.0) for p in after}
    busy = sorted((v for v in used.values() if v >= 0.05), reverse=True)
    print(
        f"  ({clients} clients: median latency per connection "
        f"{min(loader.spread, default=float('nan')):.0f}-"
        f"{max(loader.spread, default=float('nan')):.0f} ms; server CPU by "
        f"process {' / '.join(f'{v:.1f}' for v in busy)} s; load average "
        f"{load:.1f} -> {os.getloadavg()[0]:.1f}; host probe {probe:.0f} -> "
        f"{host_probe():.0f} ms)"
    )
    return lat, errors, sum(used.values()), mine


def distinct_queries(wh: Path, n: int, avoid: list[str]) -> list[str]:
    """``n`` questions made like the bench's (``bench_pack.queries_from``,
    another seed) that are not among ``avoid``: each misses the per-process
    query-embedding cache, so a run over them embeds every question."""
    from bench_pack import queries_from

    sentences = json.loads((wh.parent / "sentences.json").read_text())
    seen = set(avoid)
    made = queries_from(sentences, n + len(seen), seed=15)
    return [q for q in made if q not in seen][:n]


def main() -> None:
    from bench_pack import warehouse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--memories", type=int, default=1_000_000)
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument(
        "--sweep",
        default="1,2,4,8,16",
        help="client counts to run for --sweep-seconds each ('' for none)",
    )
    parser.add_argument("--sweep-seconds", type=float, default=10.0)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument(
        "--workers", type=int, default=None, help="server worker processes "
        "(default: the server's, one per core)"
    )  # fmt: skip
    parser.add_argument(
        "--client", choices=("raw", "httpx"), default="raw",
        help="load generator: pre-encoded requests on raw asyncio connections "
        "(default), or httpx",
    )  # fmt: skip
    parser.add_argument(
        "--distinct", type=int, default=0, metavar="N",
        help="then a run of N requests with --clients clients where every "
        "question is new (every request embeds its query)",
    )  # fmt: skip
    args = parser.parse_args()

    wh, queries = warehouse(args.chunks, args.memories, queries=args.queries)
    fresh = distinct_queries(wh, args.distinct, queries) if args.distinct else []
    with tempfile.TemporaryDirectory(prefix="bench-serve-") as tmp:
        port = _free_port()
        url = f"http://127.0.0.1:{port}"
        loader = Loader(port, queries, args.client, fresh)
        proc = start_server(wh, Path(tmp), port, args.workers)
        sweep: dict[int, tuple] = {}
        try:
            started = time.perf_counter()
            workers = args.workers or len(os.sched_getaffinity(0))
            log = Path(tmp) / "serve.log" if workers > 1 else None
            asyncio.run(_wait_ready(url, proc, log=log, workers=workers))
            print(
                f"serve bench: {args.chunks:,} chunks, {args.memories:,} memories; "
                f"server ready (snapshot copied, replica and index warmed) in "
                f"{time.perf_counter() - started:.1f} s; client {args.client}"
            )
            # every query seen once by every worker (most likely: each
            # connection stays on the worker the kernel gave it; with 4 per
            # worker, one gets none with odds (1 - 1 / workers) ** (4 *
            # workers): 0.4% for 2 workers, under 2% for any number)
            loader.run(4 * workers if workers > 1 else 1, None)
            for n in [int(x) for x in args.sweep.split(",") if x.strip()]:
                sweep[n] = measured(proc.pid, loader, n, args.sweep_seconds)
            main_run = measured(proc.pid, loader, args.clients, args.seconds)
            if fresh:
                began = time.perf_counter()
                new_run = measured(proc.pid, loader, args.clients, 1e9, True)
                new_seconds = time.perf_counter() - began
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    print(
        f"  server workers: {workers}; load average (1 min) at the end: "
        f"{os.getloadavg()[0]:.1f}"
    )
    for n, run in sweep.items():
        print(_line(f"{n:>2} clients, {args.sweep_seconds:.0f} s", run,
                    args.sweep_seconds))  # fmt: skip
    print(_line(f"{args.clients} clients, {args.seconds:.0f} s", main_run,
                args.seconds))  # fmt: skip
    if fresh:
        label = f"{args.clients} clients, {len(fresh):,} distinct questions"
        print(_line(label, new_run, new_seconds))
    meeting = [
        n for n, (s_lat, s_err, _, _) in sweep.items()
        if not s_err and _pct(s_lat, 99) < TARGET_P99_MS
    ]  # fmt: skip
    if meeting:
        print(f"  most clients meeting p99 < {TARGET_P99_MS:.0f} ms: {max(meeting)}")


if __name__ == "__main__":
    main()
