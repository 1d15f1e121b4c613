"""Two nightlies over the same new files, started together, both succeed.

Both get the same run id (a hash of what they process: a rerun after a crash
must write what the uninterrupted run would have), but each attempt stages its
shards under its own ``staging/<run_id>-<attempt>/`` folder, a short wait covers
the moment the other job holds the local catalog file, and the commit lock lets
one commit win: the warehouse holds every row once and one ``runs`` row.
"""

from __future__ import annotations

import json

import pytest

from ctxledger.warehouse import Warehouse

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
    staging = warehouse / "staging"
    assert not staging.exists() or not any(staging.iterdir())
