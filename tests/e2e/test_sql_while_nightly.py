"""A read-only ``ctxledger sql`` session never makes a writer wait (issue 32).

An analyst's console stays open (its connection held, as during a long query)
in another process while a nightly commits; the nightly gets a short lock wait
(``CTXLEDGER_LOCK_WAIT_S=3``), so if the console held the catalog file's lock
the nightly would fail. Both must succeed: the console keeps answering from the
snapshot it opened, and a new console sees the nightly's rows.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from ctxledger.warehouse import Warehouse

pytestmark = pytest.mark.slow

#: The console's own helper (``ctxledger sql`` opens the lake through it),
#: held open until the test writes ``go``, then queried.
CONSOLE = """
import sys, time
from pathlib import Path
from ctxledger.warehouse.sql_access import console_lake
root, signal = sys.argv[1], Path(sys.argv[2])
with console_lake(root, None, None, None) as wh:
    wh.query("SELECT count(*) FROM messages").fetchone()
    print("open", flush=True)
    while not signal.exists():
        time.sleep(0.1)
    print(wh.query("SELECT count(*) FROM messages").fetchone()[0], flush=True)
"""


def _chat(folder, session, lines):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{session}.jsonl").write_text(
        "".join(
            json.dumps({"session_id": session, "turn": i, "role": "user",
                        "content": text})
            + "\n"
            for i, text in enumerate(lines)
        )
    )  # fmt: skip


def test_an_open_console_does_not_fail_a_nightly(job_server, tmp_path):
    landing = tmp_path / "landing"
    warehouse = tmp_path / "wh"
    _chat(landing, "c1", ["How do I rotate the build cache?", "Run the job"])
    argv = ["nightly", "--landing", str(landing), "--warehouse", str(warehouse)]
    first = job_server.start(argv, tmp_path / "first.log")
    assert first.wait(timeout=600) == 0, first.output()[-3000:]

    signal = tmp_path / "go"
    console = subprocess.Popen(
        [sys.executable, "-c", CONSOLE, str(warehouse), str(signal)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert console.stdout.readline().strip() == "open", console.stderr.read()
        _chat(landing, "c2", ["Where are the deploy logs?", "In the bucket", "ok"])
        nightly = job_server.start(
            argv, tmp_path / "second.log", env={"CTXLEDGER_LOCK_WAIT_S": "3"}
        )
        assert nightly.wait(timeout=600) == 0, nightly.output()[-3000:]
        assert console.poll() is None, "the console stayed open during the nightly"
        signal.touch()
        out, err = console.communicate(timeout=120)
    finally:
        if console.poll() is None:
            console.kill()
            console.wait()
    assert console.returncode == 0, err
    assert out.strip() == "2"  # the snapshot the console opened
    with Warehouse.open(warehouse) as wh:
        assert wh.query("SELECT count(*) FROM messages").fetchone()[0] == 5


def test_the_cli_console_reads_while_a_writer_holds_the_lake(tmp_path):
    """``ctxledger sql`` answers while another process has the catalog open
    read-write (a nightly committing): it does not wait for the lock."""
    from test_memory_api import SEED, _commit

    root = tmp_path / "wh"
    with Warehouse.open(root, create=True) as wh:
        _commit(wh, "seed", SEED)
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import sys, time\n"
         "from ctxledger.warehouse import Warehouse\n"
         "wh = Warehouse.open(sys.argv[1])\n"
         "print('held', flush=True)\n"
         "time.sleep(600)\n",
         str(root)],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout.readline().strip() == "held"
        done = subprocess.run(
            [sys.executable, "-m", "ctxledger.jobs.cli", "sql", "-w", str(root),
             "-o", "csv", "SELECT count(*) FROM memories"],
            capture_output=True, text=True, timeout=300,
            env={**os.environ, "CTXLEDGER_LOCK_WAIT_S": "2"},
        )  # fmt: skip
    finally:
        holder.kill()
        holder.wait()
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == str(len(SEED))
