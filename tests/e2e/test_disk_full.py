"""A nightly that meets a full disk fails cleanly and leaves no debris
(issue 32, item 3): ``ENOSPC`` is injected half-way through the first staged
Parquet shard; the run must fail (and record the failure), leave no staging
folder, no temporary file and no truncated file anywhere under the warehouse,
and the next run (disk freed) must commit every record."""

from __future__ import annotations

import errno
import os

import pyarrow.parquet as pq
import pytest

from ctxledger.jobs.nightly import run_nightly
from ctxledger.warehouse import Warehouse

pytestmark = pytest.mark.slow


def _line(session, turn, role, content):
    import json

    return json.dumps(
        {"session_id": session, "turn": turn, "role": role, "content": content}
    )


def test_a_full_disk_fails_the_run_and_leaves_no_debris(tmp_path, monkeypatch):
    landing = tmp_path / "landing" / "tenant=acme"
    landing.mkdir(parents=True)
    lines = [_line("s-1", i, "user", f"note {i} about the deploy") for i in range(6)]
    lines.append('{"session_id": "s-1", "role": "robot", "content": "bad"}')
    (landing / "chat.jsonl").write_text("\n".join(lines) + "\n")
    warehouse = tmp_path / "wh"
    real = pq.write_table

    def half_then_enospc(table, where, **kwargs):
        real(table, where, **kwargs)
        os.truncate(where, os.path.getsize(where) // 2)
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(pq, "write_table", half_then_enospc)
    with pytest.raises(Exception, match="No space left on device"):
        run_nightly(tmp_path / "landing", warehouse, source_format="canonical")
    monkeypatch.undo()
    staging = warehouse / "staging"
    assert not staging.exists() or list(staging.iterdir()) == []
    debris = [p for p in warehouse.rglob("*") if p.name.endswith(".partial")]
    assert debris == []
    with Warehouse.open(warehouse) as wh:
        status = wh.query("SELECT status FROM runs").fetchall()
    assert status == [("failed",)]
    result = run_nightly(tmp_path / "landing", warehouse, source_format="canonical")
    assert result.manifest is not None and result.manifest.status == "committed"
    with Warehouse.open(warehouse) as wh:
        messages = wh.query("SELECT count(*) FROM messages").fetchone()[0]
        dead = wh.query("SELECT quarantine_ref FROM dead_letters").fetchall()
    assert messages == 6
    (ref,) = dead[0]
    assert (warehouse / ref).read_bytes().startswith(b'{"session_id": "s-1"')
