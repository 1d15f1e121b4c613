"""``ctxledger serve`` under load: /pack latency with 50 concurrent clients.

Issue 15's target: 50 concurrent clients for 60 s on loopback, p99 of /pack
under 100 ms at 100k chunks, warm, 0 errors.

1. A warehouse with ``--chunks`` synthetic evidence chunks (bench_evidence's
   generator: corpus sentences, real chunk vectors plus noise) in 20 tenants,
   committed as documents + evidence_chunks rows.
2. The real server (``python -m jobs.cli serve``) in its own process on
   127.0.0.1, so the load generator does not share its interpreter.
3. ``--clients`` closed-loop clients (asyncio + httpx, one connection each)
   post /pack (2,000-token window, tenant t00, groups [sre]) with questions
   drawn from the corpus for ``--seconds`` after a warm-up; latency per
   request, errors (any non-200 or transport error) and throughput.

A closed loop of N clients against a server doing R requests/s waits about
N/R s per request, so the p99 says as much about throughput as about one
pack's cost; the single-client p50 is printed beside it.

Run: ``python bench/bench_serve.py [--chunks 100000] [--clients 50]
[--seconds 60]``.
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

    from schemas.arrow import arrow_schema

    schema = arrow_schema(model)
    return pa.table([_column(f, n, given) for f in schema], schema=schema)


def build_warehouse(root: Path, n: int) -> list[str]:
    """Commit ``n`` synthetic chunks; returns query texts."""
    import pyarrow as pa
    from bench_evidence import synthetic

    from schemas.evidence import DocumentVersion, EvidenceChunk
    from warehouse import Warehouse

    table, vectors, sentences, _ = synthetic(n, tenants=20)
    chunks = {name: table.column(name).to_pylist() for name in table.column_names}
    chunks.pop("authority")
    chunks.pop("effective_to")
    chunks["ordinal"] = list(range(n))
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
    }
    extra = {
        "documents": _table(DocumentVersion, len(rows), docs),
        "evidence_chunks": _table(EvidenceChunk, n, chunks),
    }
    with Warehouse.open(root, create=True) as wh:
        wh.commit_staged("bench-serve", {}, extra, {})
    rng = random.Random(0)
    return [rng.choice(sentences)[:200] for _ in range(200)]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(root: Path, port: int) -> subprocess.Popen:
    tokens = root / "tokens.json"
    row = {"token": TOKEN, "tenant": "t00", "groups": ["sre"]}
    tokens.write_text(json.dumps({"tokens": [row]}))
    argv = [sys.executable, "-m", "jobs.cli", "serve", "--tokens", str(tokens)]
    argv += ["-w", str(root / "wh"), "--port", str(port)]
    return subprocess.Popen(
        argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )


async def _wait_ready(url: str, proc: subprocess.Popen, timeout: float = 600) -> None:
    import httpx

    deadline = time.monotonic() + timeout
    async with httpx.AsyncClient() as client:
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError("the server exited; see serve.log")
            try:
                if (await client.get(f"{url}/health")).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            await asyncio.sleep(0.5)
    raise TimeoutError("the server did not start")


async def load(url: str, queries: list[str], clients: int, seconds: float):
    """Latencies (ms) of every /pack and the errors, from ``clients`` loops."""
    import httpx

    latencies: list[float] = []
    errors: list[str] = []
    stop = time.monotonic() + seconds
    headers = {"Authorization": f"Bearer {TOKEN}"}

    async def client_loop(seed: int) -> None:
        rng = random.Random(seed)
        limits = httpx.Limits(max_connections=1)
        async with httpx.AsyncClient(base_url=url, timeout=60, limits=limits) as c:
            while time.monotonic() < stop:
                body = {"query": rng.choice(queries), "window_tokens": 2000}
                start = time.perf_counter()
                try:
                    r = await c.post("/pack", json=body, headers=headers)
                    if r.status_code != 200:
                        errors.append(f"{r.status_code}")
                        continue
                except httpx.HTTPError as exc:
                    errors.append(type(exc).__name__)
                    continue
                latencies.append((time.perf_counter() - start) * 1000)

    await asyncio.gather(*(client_loop(i) for i in range(clients)))
    return latencies, errors


def _pct(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) if values else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--warmup", type=float, default=5.0)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="bench-serve-") as tmp:
        root = Path(tmp)
        started = time.perf_counter()
        queries = build_warehouse(root / "wh", args.chunks)
        print(f"serve bench: {args.chunks:,} chunks committed in "
              f"{time.perf_counter() - started:.1f} s")  # fmt: skip
        port = _free_port()
        url = f"http://127.0.0.1:{port}"
        proc = start_server(root, port)
        try:
            started = time.perf_counter()
            asyncio.run(_wait_ready(url, proc))
            print(f"  server ready (snapshot copied, index warmed) in "
                  f"{time.perf_counter() - started:.1f} s")  # fmt: skip
            asyncio.run(load(url, queries, 1, args.warmup))
            one, _ = asyncio.run(load(url, queries, 1, min(10.0, args.seconds)))
            lat, errors = asyncio.run(load(url, queries, args.clients, args.seconds))
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    p99 = _pct(lat, 99)
    verdict = "met" if p99 < TARGET_P99_MS and not errors else "NOT met"
    print(f"  1 client:   /pack p50 {_pct(one, 50):.1f} ms, p99 {_pct(one, 99):.1f} ms")
    print(
        f"  {args.clients} clients, {args.seconds:.0f} s: {len(lat):,} requests "
        f"({len(lat) / args.seconds:.0f}/s), errors {len(errors)} "
        f"{dict(Counter(errors).most_common(3))}, "
        f"p50 {_pct(lat, 50):.1f} ms, p95 {_pct(lat, 95):.1f} ms, p99 {p99:.1f} ms "
        f"(target < {TARGET_P99_MS:.0f} ms: {verdict})"
    )


if __name__ == "__main__":
    main()
