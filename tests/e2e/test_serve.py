"""End to end: ``serving`` over HTTP on 127.0.0.1 (a real uvicorn server), while
a real nightly in another process commits to the same local warehouse.

The concurrent test is the point of ``serving.snapshot``: a resident reader must
never hold the catalog file's lock (a READ_ONLY attach does), so the nightly
commits while the server answers, with 0 errors, and the answers move to the
new snapshot after the commit.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest
import uvicorn

from ctxledger.pipelines.memory.extract import memory_id_for
from ctxledger.schemas.arrow import to_table
from ctxledger.schemas.memory import ConsentRecord, MemoryRecord, Provenance
from ctxledger.serving import Context
from ctxledger.serving.auth import Tokens
from ctxledger.serving.http import create_app
from ctxledger.warehouse import Warehouse
from ctxledger.warehouse.memory_api import record_consent

pytestmark = pytest.mark.slow

NOW = datetime.now(UTC)
CACHE_DOC = (
    "# Build cache runbook\n\n## Rotation\n\nTo rotate the build cache, drain the "
    "runners, then run the cache rotate job and wait for the checksum report.\n"
)
QUEUE_DOC = (
    "# Deploy queue runbook\n\n## Unblocking\n\nWhen the deploy queue is stuck, "
    "pause the merge train, purge the stale lease and resume the deploy queue.\n"
)
TOKENS = {
    "acme-support-token-1": {
        "tenant": "acme",
        "groups": ["support"],
        "subjects": ["u1"],
    },
    "globex-token-000001": {"tenant": "globex", "groups": ["support"]},
}
ACME = {"Authorization": "Bearer acme-support-token-1"}
GLOBEX = {"Authorization": "Bearer globex-token-000001"}


def seed_memories(root: Path) -> None:
    """One fact with a live basis for acme/u1 (no models needed)."""
    prov = Provenance(session_id="ses_1", message_id="msg_1", turn=1)
    when = NOW - timedelta(days=3)
    memory = MemoryRecord(
        memory_id=memory_id_for(
            "acme", "u1", "support", "fact", "system_record", "Plan: Pro", prov
        ),
        tenant_id="acme", subject_id="u1", purpose="support", kind="fact",
        source="system_record", text="Plan: Pro", extractor="seed",
        extractor_version="seed-1", provenance=prov, basis="contract",
        created_at=when, valid_from=when, recorded_at=when,
        expires_at=NOW + timedelta(days=30), policy_version="seed", run_id="seed",
    )  # fmt: skip
    grant = NOW - timedelta(days=60)
    event = ConsentRecord(
        consent_id=ConsentRecord.id_for(
            "acme", "u1", "support", "contract", "grant", grant, None
        ),
        tenant_id="acme", subject_id="u1", purpose="support", basis="contract",
        event="grant", effective_at=grant,
    )  # fmt: skip
    with Warehouse.open(root, create=True) as wh:
        table = to_table(MemoryRecord, [memory.row()])
        wh.commit_staged("seed", {}, {"memories": table}, {})
        record_consent(wh, [event])


def write_doc(docs: Path, name: str, text: str, doc_id: str) -> None:
    folder = docs / "tenant=acme"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(text)
    meta = {"doc_id": doc_id, "acl": ["support"], "effective_date": "2024-01-01"}
    (folder / f"{name}.meta.json").write_text(json.dumps(meta))


def nightly(job_server, tmp: Path, docs: Path, wh: Path, log: str):
    argv = ["nightly", "--landing", str(tmp / "landing"), "--docs", str(docs)]
    return job_server.start([*argv, "--warehouse", str(wh)], tmp / log)


def write_tokens(path: Path) -> Path:
    rows = [{"token": t, **p} for t, p in TOKENS.items()]
    path.write_text(json.dumps({"tokens": rows}))
    return path


@pytest.fixture(scope="module")
def lake(job_server, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("serve")
    (tmp / "landing").mkdir()
    (tmp / "landing" / "chat.jsonl").write_text(
        json.dumps({"session_id": "c1", "turn": 0, "role": "user", "content": "hi"})
        + "\n"
    )
    docs, wh = tmp / "docs", tmp / "wh"
    write_doc(docs, "cache.md", CACHE_DOC, "cache-runbook")
    seed_memories(wh)
    job = nightly(job_server, tmp, docs, wh, "nightly1.log")
    assert job.wait(timeout=300) == 0, job.output()[-3000:]
    return tmp


class Server:
    """uvicorn serving ``create_app`` on a free 127.0.0.1 port, in a thread."""

    def __init__(self, context: Context, tokens: Tokens):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        config = uvicorn.Config(
            create_app(context, tokens), host="127.0.0.1", port=self.port,
            log_level="warning",
        )  # fmt: skip
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started:
            assert time.monotonic() < deadline, "uvicorn did not start"
            time.sleep(0.05)
        self.url = f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)


@pytest.fixture(scope="module")
def served(lake):
    context = Context.open(lake / "wh", poll_s=0.2)
    server = Server(context, Tokens.load(write_tokens(lake / "tokens.json")))
    with httpx.Client(base_url=server.url, timeout=30) as client:
        yield context, client
    server.stop()
    context.close()


def test_health_and_openapi_are_published(served):
    context, client = served
    assert client.get("/health").json() == {
        "status": "ok",
        "snapshot_id": context.snapshot_id,
    }
    paths = client.get("/openapi.json").json()["paths"]
    assert {"/memories", "/search", "/pack", "/health"} <= set(paths)


def test_reads_are_scoped_by_the_token(served):
    _, client = served
    memories = client.get(
        "/memories", params={"subject_id": "u1", "purpose": "support"}, headers=ACME
    )
    assert memories.status_code == 200, memories.text
    assert memories.json()["facts"] == ["Plan: Pro"]
    search = {"query": "how do I rotate the build cache"}
    hits = client.post("/search", json=search, headers=ACME).json()["hits"]
    assert [h["doc_id"] for h in hits] == ["cache-runbook"]
    # the same query with another tenant's token: its own (empty) tenant
    assert client.post("/search", json=search, headers=GLOBEX).json()["hits"] == []
    body = {"query": search["query"], "window_tokens": 400, "subject_id": "u1",
            "purpose": "support", "now": NOW.isoformat()}  # fmt: skip
    full = {**body, "include_dropped_content": True}
    pack = client.post("/pack", json=full, headers=ACME)
    assert pack.status_code == 200, pack.text
    manifest = pack.json()["manifest"]
    selected = manifest["selected"]
    considered = selected + [d["item"] for d in manifest["dropped"]]
    facts = [i for i in considered if i["kind"] == "fact"]
    assert len(facts) == 1 and '"text":"Plan: Pro"' in facts[0]["content"]
    assert "cache-runbook" in {i["doc_id"] for i in selected}
    assert pack.json()["manifest"]["principal_groups"] == ["support"]
    # by default a dropped item is its summary: the same decisions, no text
    slim = client.post("/pack", json=body, headers=ACME).json()["manifest"]
    assert slim["manifest_id"] == manifest["manifest_id"]
    assert slim["selected"] == selected
    assert [{**d, "item": None} for d in manifest["dropped"]] == slim["dropped"]
    for d in manifest["dropped"]:
        summary = {k: d["item"][k] for k in ("item_id", "kind", "source")}
        assert summary == {k: d[k] for k in summary}


def test_a_token_of_tenant_a_asking_for_tenant_b_gets_403(served):
    _, client = served
    search = {"query": "rotate the build cache", "tenant_id": "acme"}
    assert client.post("/search", json=search, headers=GLOBEX).status_code == 403
    params = {"subject_id": "u1", "purpose": "support", "tenant_id": "acme"}
    assert client.get("/memories", params=params, headers=GLOBEX).status_code == 403
    body = {"query": "x", "window_tokens": 100, "tenant_id": "acme"}
    assert client.post("/pack", json=body, headers=GLOBEX).status_code == 403
    # a subject the token does not list (tool artifacts are per subject)
    params = {"subject_id": "u2", "purpose": "support"}
    assert client.get("/memories", params=params, headers=ACME).status_code == 403
    # no token, an unknown token, groups in the body: refused
    assert client.post("/search", json=search).status_code == 401
    bad = {"Authorization": "Bearer not-a-known-token"}
    assert client.post("/search", json=search, headers=bad).status_code == 401
    groups = {**search, "principal_groups": ["operators"]}
    assert client.post("/search", json=groups, headers=ACME).status_code == 422


def test_a_nightly_commits_while_the_server_answers(served, lake, job_server):
    context, client = served
    before = context.snapshot_id
    results: list[tuple[float, int, int | None, list[str]]] = []
    errors: list[str] = []
    stop = threading.Event()

    def hammer() -> None:
        body = {"query": "the deploy queue is stuck", "k": 3}
        with httpx.Client(base_url=str(client.base_url), timeout=30) as own:
            while not stop.is_set():
                try:
                    r = own.post("/search", json=body, headers=ACME)
                    if r.status_code != 200:
                        errors.append(f"{r.status_code} {r.text[:200]}")
                        continue
                    data = r.json()
                    docs = [h["doc_id"] for h in data["hits"]]
                    results.append((time.monotonic(), 200, data["snapshot_id"], docs))
                except httpx.HTTPError as exc:
                    errors.append(repr(exc))

    def pack() -> None:  # concurrent packs share the query embedder
        body = {"query": "the deploy queue is stuck", "window_tokens": 300}
        with httpx.Client(base_url=str(client.base_url), timeout=30) as own:
            while not stop.is_set():
                try:
                    r = own.post("/pack", json=body, headers=ACME)
                    if r.status_code != 200:
                        errors.append(f"{r.status_code} {r.text[:200]}")
                except httpx.HTTPError as exc:
                    errors.append(repr(exc))

    threads = [threading.Thread(target=hammer) for _ in range(3)]
    threads += [threading.Thread(target=pack) for _ in range(2)]
    for t in threads:
        t.start()
    try:
        write_doc(lake / "docs", "queue.md", QUEUE_DOC, "queue-runbook")
        job = nightly(job_server, lake, lake / "docs", lake / "wh", "nightly2.log")
        rc = job.wait(timeout=300)
        committed = time.monotonic()
        deadline = committed + 20
        while time.monotonic() < deadline:
            if results and "queue-runbook" in results[-1][3]:
                break
            time.sleep(0.1)
        time.sleep(0.3)
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=30)
    assert rc == 0, job.output()[-3000:]
    assert "lost a race" not in job.output()  # it never waited on the reader
    assert errors == []
    snapshots = [r[2] for r in results]
    assert snapshots[0] == before
    assert snapshots[-1] > before
    assert "queue-runbook" in results[-1][3]
    # no request answered from the new snapshot before the nightly ended
    first_new = next(r[0] for r in results if r[2] != before)
    assert first_new <= committed + 20
    assert all("queue-runbook" not in r[3] for r in results if r[2] == before)


def _holders(port: int, state: str) -> dict[int, int]:
    """Pid -> how many TCP sockets on local ``port`` in ``state`` (``0A``:
    listening, ``01``: established) it holds (``/proc``, Linux)."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == state and int(fields[1].rsplit(":", 1)[1], 16) == port:
                inodes.add(f"socket:[{fields[9]}]")
    held: dict[int, int] = {}
    for fd_dir in Path("/proc").glob("[0-9]*/fd"):
        try:
            links = [os.readlink(fd) for fd in fd_dir.iterdir()]
        except OSError:
            continue
        # one socket per inode and process (a dup'ed descriptor is the same one)
        count = len(set(links) & inodes)
        if count:
            held[int(fd_dir.parent.name)] = count
    return held


def test_serve_workers_share_the_port_evenly_and_stop_cleanly(lake, tmp_path):
    """``ctxledger serve --workers 2``: the supervisor and both worker
    processes hold one listening socket, eight keep-alive connections land
    four on each worker (``serving.balance``), /pack answers on every one,
    and SIGTERM stops the server with every worker's snapshot copy
    deleted."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    tokens = write_tokens(tmp_path / "tokens.json")
    argv = [sys.executable, "-m", "ctxledger.jobs.cli", "serve", "--tokens",
            str(tokens), "-w", str(lake / "wh"), "--port", str(port),
            "--workers", "2"]  # fmt: skip
    log = tmp_path / "serve.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            argv, stdout=out, stderr=subprocess.STDOUT,
            env={**os.environ, "TMPDIR": str(tmp)},
        )  # fmt: skip
    try:
        deadline = time.monotonic() + 240
        while log.read_text(errors="replace").count("startup complete") < 2:
            assert proc.poll() is None, log.read_text(errors="replace")[-3000:]
            assert time.monotonic() < deadline, "the workers did not start"
            time.sleep(0.5)
        listening = _holders(port, "0A")
        assert len(listening) == 3 and proc.pid in listening  # one socket
        body = {"query": "rotate the build cache", "window_tokens": 300}
        url = f"http://127.0.0.1:{port}/pack"
        clients = [httpx.Client(timeout=30) for _ in range(8)]
        try:
            for _ in range(2):  # keep-alive: the same connection twice
                for client in clients:
                    answer = client.post(url, json=body, headers=ACME)
                    assert answer.status_code == 200, answer.text
                    assert answer.json()["manifest"]["tenant_id"] == "acme"
            # the server's ends of the eight connections: four per worker
            served = _holders(port, "01")
            workers = set(listening) - {proc.pid}
            assert {pid: served.get(pid, 0) for pid in workers} == dict.fromkeys(
                workers, 4
            ), served
        finally:
            for client in clients:
                client.close()
        assert [p.name for p in tmp.glob("ctxledger-serve-*")]  # while serving
    finally:
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(timeout=60)
    assert rc == 0, log.read_text(errors="replace")[-3000:]
    assert not list(tmp.glob("ctxledger-serve-*"))
