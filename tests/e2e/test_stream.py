"""`ctxledger stream`: 1,000 messages dropped in 10 files while the job runs are
all in the warehouse exactly once after a SIGTERM.

The job runs as its own process (forked from the tests' job server,
``tests/forked_cli.py``) on a fresh landing folder and warehouse with 2 s
windows. Once it watches, the test drops five canonical JSONL files of 100
messages each (renamed into place from hidden temporary names, except one
written in place), polls the warehouse until the first micro-batch's rows
appear (retrying while the job holds the catalog), drops the other five and
sends SIGTERM a second later, before they can all settle: the drain must still
commit them. Then: exit code 0, every message present once, every file
processed once by a committed ``stream`` run, no dead letters; and a restart
over the same folder commits nothing.
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import duckdb
import pytest
from forked_cli import Job, JobServer

from ctxledger.warehouse import Warehouse

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
FILES, PER_FILE = 10, 100
#: Generous: model loading dominates each micro-batch on a busy 2-core machine.
TIMEOUT_S = 900


def transcript(index: int) -> str:
    """One session of ``PER_FILE`` synthetic, PII-free canonical lines."""
    lines = []
    for turn in range(PER_FILE):
        if turn % 2 == 0:
            role = "user"
            text = (
                f"Step {turn} of batch {index}: run the unit tests of module m{turn}."
            )
        else:
            role = "assistant"
            text = f"Module m{turn} of batch {index}: {turn + 3} cases passed."
        lines.append(
            json.dumps(
                {
                    "session_id": f"stream-{index:02d}",
                    "turn": turn,
                    "role": role,
                    "content": text,
                    "created_at": f"2026-03-01T09:{turn // 60:02d}:{turn % 60:02d}Z",
                }
            )
        )
    return "\n".join(lines) + "\n"


def drop(landing: Path, index: int) -> None:
    """Write a file the way producers should (hidden name, then rename), except
    file 0, written in place (the watcher waits until it stopped changing)."""
    folder = landing / ("tenant=acme" if index % 2 else "")
    folder.mkdir(parents=True, exist_ok=True)
    name = f"chat-{index:02d}.jsonl"
    if index == 0:
        (folder / name).write_text(transcript(index))
        return
    tmp = folder / f".{name}.tmp"
    tmp.write_text(transcript(index))
    os.rename(tmp, folder / name)


def query(warehouse: Path, sql: str, deadline: float):
    """Run one read, retrying while the job holds the catalog file's lock."""
    while True:
        try:
            with Warehouse.open(warehouse) as wh:
                return wh.query(sql).fetchall()
        except duckdb.Error as exc:
            if "lock" not in str(exc).lower() or time.monotonic() > deadline:
                raise
        time.sleep(0.5)


def start(server: JobServer, landing: Path, warehouse: Path, log: Path) -> Job:
    command = [
        "stream",
        "--landing", str(landing), "--warehouse", str(warehouse),
        "--window-seconds", "2", "--poll-seconds", "0.5",
    ]  # fmt: skip
    return server.start(command, log)


def wait_for(predicate, deadline: float, proc: Job, log: Path):
    while not predicate():
        if proc.poll() is not None:
            pytest.fail(f"stream exited early ({proc.returncode}):\n{log.read_text()}")
        if time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"timed out; output so far:\n{log.read_text()}")
        time.sleep(0.5)


def test_stream_commits_every_dropped_message_once(tmp_path, job_server):
    landing, warehouse = tmp_path / "landing", tmp_path / "warehouse"
    landing.mkdir()
    log, log2 = tmp_path / "stream.log", tmp_path / "restart.log"
    deadline = time.monotonic() + TIMEOUT_S
    proc = start(job_server, landing, warehouse, log)
    try:
        wait_for(lambda: "watching" in log.read_text(), deadline, proc, log)
        for index in range(FILES // 2):
            drop(landing, index)
            time.sleep(0.3)

        def rows_appeared() -> bool:
            if "committed micro-batch" not in log.read_text():
                return False
            return query(warehouse, "SELECT count(*) FROM messages", deadline)[0][0] > 0

        wait_for(rows_appeared, deadline, proc, log)
        for index in range(FILES // 2, FILES):
            drop(landing, index)
            time.sleep(0.2)
        time.sleep(1.0)
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(timeout=max(1.0, deadline - time.monotonic()))
    finally:
        if proc.poll() is None:
            proc.kill()
    output = log.read_text()
    assert rc == 0, output
    assert "stopped (SIGTERM)" in output
    assert "still being written" not in output

    with Warehouse.open(warehouse) as wh:
        total, distinct = wh.query(
            "SELECT count(*), count(DISTINCT message_id) FROM messages"
        ).fetchone()
        files = wh.query(
            "SELECT path, count(*), min(status), sum(messages_parsed) "
            "FROM landing_files GROUP BY ALL ORDER BY 1"
        ).fetchall()
        runs = wh.query(
            "SELECT job, status, count(*) FROM runs GROUP BY ALL"
        ).fetchall()
        dead = wh.query("SELECT count(*) FROM dead_letters").fetchone()[0]
        sessions = wh.query(
            "SELECT count(DISTINCT session_id) FROM messages"
        ).fetchone()
        tenants = dict(
            wh.query("SELECT tenant_id, count(*) FROM messages GROUP BY ALL").fetchall()
        )
    assert (total, distinct) == (FILES * PER_FILE, FILES * PER_FILE), output
    assert len(files) == FILES, files
    assert all(row[1:] == (1, "processed", PER_FILE) for row in files), files
    assert [(job, status) for job, status, _n in runs] == [("stream", "committed")]
    # At least the first micro-batch and the drain's own.
    assert runs[0][2] == output.count("committed micro-batch") >= 2, output
    assert sessions == (FILES,)
    assert tenants == {"acme": FILES * PER_FILE // 2, "default": FILES * PER_FILE // 2}
    assert dead == 0

    # A restart over the same folder finds every file committed: no new run.
    proc = start(job_server, landing, warehouse, log2)
    try:
        wait_for(lambda: "watching" in log2.read_text(), deadline, proc, log2)
        time.sleep(3)  # two polls and a window
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=max(1.0, deadline - time.monotonic())) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    again = log2.read_text()
    assert "0 micro-batch(es)" in again, again
    assert f"{FILES} already-committed" in again, again
