"""Two nightlies over the same new files, started together, both succeed.

Both get the same run id (a hash of what they process: a rerun after a crash
must write what the uninterrupted run would have), but each attempt stages its
shards under its own ``staging/<run_id>-<attempt>/`` folder, a short wait covers
the moment the other job holds the local catalog file, and the commit lock lets
one commit win: the warehouse holds every row once, one ``runs`` row, and one
snapshot for the run id (the loser finds the winner's ``runs`` row and adds
none). Nightlies over different landings wait for each other's hold on the
local catalog file, stages' read-only attaches included; a hold that outlasts
the wait ends the job with one clear line, not DuckDB's lock error.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from ctxledger.warehouse import Warehouse
from ctxledger.warehouse.concurrency import WarehouseBusyError
from ctxledger.warehouse.evidence_api import lookup_connection

pytestmark = pytest.mark.slow


def test_two_nightlies_started_together_both_succeed(job_server, tmp_path):
    landing = tmp_path / "landing"
    landing.mkdir()
    (landing / "chat.jsonl").write_text(
        "".join(
            json.dumps({"session_id": "c1", "turn": i, "role": role, "content": text})
            + "\n"
            for i, (role, text) in enumerate(
                [("user", "How do I rotate the build cache?"), ("assistant", "Run")]
            )
        )
    )
    warehouse = tmp_path / "wh"
    argv = ["nightly", "--landing", str(landing), "--warehouse", str(warehouse)]
    jobs = [job_server.start(argv, tmp_path / f"job{i}.log") for i in (1, 2)]
    for job in jobs:
        assert job.wait(timeout=600) == 0, job.output()[-3000:]
    with Warehouse.open(warehouse) as wh:
        assert wh.query("SELECT count(*) FROM messages").fetchone()[0] == 2
        runs = wh.query("SELECT run_id FROM runs WHERE job = 'nightly'").fetchall()
    assert len(runs) == 1
    with Warehouse.open(warehouse) as wh:
        messages = [s[2] for s in wh.snapshots()]
    assert messages.count(f"run {runs[0][0]}") == 1, messages
    staging = warehouse / "staging"
    assert not staging.exists() or not any(staging.iterdir())


def _landing(root, session, lines):
    root.mkdir(parents=True)
    (root / f"{session}.jsonl").write_text(
        "".join(
            json.dumps({"session_id": session, "turn": i, "role": "user",
                        "content": text}) + "\n"
            for i, text in enumerate(lines)
        )
    )  # fmt: skip
    return root


def test_two_nightlies_on_different_landings_both_succeed(job_server, tmp_path):
    warehouse = tmp_path / "wh"
    jobs = []
    for i in (1, 2):
        landing = _landing(
            tmp_path / f"landing{i}", f"s{i}", [f"Question {i} about the cache", "ok"]
        )
        argv = ["nightly", "--landing", str(landing), "--warehouse", str(warehouse)]
        jobs.append(job_server.start(argv, tmp_path / f"job{i}.log"))
    for job in jobs:
        assert job.wait(timeout=600) == 0, job.output()[-3000:]
    with Warehouse.open(warehouse) as wh:
        assert wh.query("SELECT count(*) FROM messages").fetchone()[0] == 4
        assert len(wh.query("SELECT run_id FROM runs").fetchall()) == 2


def _holder(root):
    """Another process with the lake open read-write (a job committing)."""
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import sys, time\n"
         "from ctxledger.warehouse import Warehouse\n"
         "wh = Warehouse.open(sys.argv[1], create=True)\n"
         "print('held', flush=True)\n"
         "sys.stdin.readline()\n",
         str(root)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert holder.stdout.readline().strip() == "held"
    return holder


def test_a_stage_attach_waits_then_fails_with_one_line(tmp_path, monkeypatch):
    """The evidence stage's read-only attach (``lookup_connection``) waits for
    a job holding the catalog like the commit does, then says so in one line."""
    root = tmp_path / "wh"
    holder = _holder(root)
    try:
        monkeypatch.setenv("CTXLEDGER_LOCK_WAIT_S", "1")
        with pytest.raises(WarehouseBusyError) as raised:
            lookup_connection(root)
        message = str(raised.value)
        assert message.startswith("another job holds the warehouse")
        assert "retry or use a PostgreSQL catalog" in message
        assert "\n" not in message and "IO Error" not in message
        monkeypatch.setenv("CTXLEDGER_LOCK_WAIT_S", "120")
        holder.stdin.write("\n")  # the other job lets go: the wait ends well
        holder.stdin.flush()
        con = lookup_connection(root)
        assert con is not None
        con.close()
    finally:
        holder.kill()
        holder.wait()


def test_a_nightly_blocked_past_the_wait_says_so_in_one_line(job_server, tmp_path):
    root = tmp_path / "wh"
    landing = _landing(tmp_path / "landing", "s1", ["Where is the runbook?", "ok"])
    holder = _holder(root)
    try:
        job = job_server.start(
            ["nightly", "--landing", str(landing), "--warehouse", str(root)],
            tmp_path / "job.log",
            env={"CTXLEDGER_LOCK_WAIT_S": "2"},
        )
        assert job.wait(timeout=600) == 1
    finally:
        holder.kill()
        holder.wait()
    errors = [line for line in job.output().splitlines() if "error" in line.lower()]
    assert errors and errors[-1].startswith("error: another job holds the warehouse")
    assert "Could not set lock" not in errors[-1]
