"""Quarantine copies and staged shards are whole or absent (issue 32, item 3).

A full disk is injected as ``OSError(ENOSPC)`` half-way through the write: the
final name must not appear (a truncated copy under a name that claims the full
file's sha256 was skipped by every later run), the temporary file must go
(debris filled the disk), and a copy cut short by an older version is repaired.
"""

from __future__ import annotations

import errno
import hashlib
import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ctxledger.pipelines.ingest.landing import write_quarantine
from ctxledger.pipelines.sink.shards import write_shard

RAW = b'{"content": "' + b"x" * 200_000 + b'"}\n'


def _full_disk(monkeypatch):
    """Every ``os.fdopen`` writer writes half of what it is given, then fails
    as a full disk does."""
    real = os.fdopen

    class HalfWriter:
        def __init__(self, handle):
            self.handle = handle

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.handle.close()

        def write(self, data):
            self.handle.write(data[: len(data) // 2])
            self.handle.flush()
            raise OSError(errno.ENOSPC, "No space left on device")

        def __getattr__(self, name):
            return getattr(self.handle, name)

    monkeypatch.setattr(os, "fdopen", lambda *a, **k: HalfWriter(real(*a, **k)))


def _files(folder):
    return sorted(p.name for p in folder.rglob("*") if p.is_file())


def test_a_full_disk_leaves_no_quarantine_copy_and_no_debris(tmp_path, monkeypatch):
    _full_disk(monkeypatch)
    with pytest.raises(OSError) as failed:
        write_quarantine(tmp_path, "run_x", RAW)
    assert failed.value.errno == errno.ENOSPC
    assert _files(tmp_path / "quarantine") == []
    monkeypatch.undo()
    ref = write_quarantine(tmp_path, "run_x", RAW)  # the next run writes it whole
    assert (tmp_path / ref).read_bytes() == RAW
    assert _files(tmp_path / "quarantine") == [f"{hashlib.sha256(RAW).hexdigest()}.bin"]


def test_a_truncated_quarantine_copy_is_rewritten(tmp_path):
    digest = hashlib.sha256(RAW).hexdigest()
    folder = tmp_path / "quarantine" / "run_x"
    folder.mkdir(parents=True)
    (folder / f"{digest}.bin").write_bytes(RAW[:1000])  # cut short by a full disk
    ref = write_quarantine(tmp_path, "run_x", RAW)
    assert (tmp_path / ref).read_bytes() == RAW
    assert _files(folder) == [f"{digest}.bin"]


def test_a_full_disk_leaves_no_partial_shard(tmp_path, monkeypatch):
    real = pq.write_table

    def half_then_enospc(table, where, **kwargs):
        real(table, where, **kwargs)
        size = os.path.getsize(where)
        os.truncate(where, size // 2)
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(pq, "write_table", half_then_enospc)
    schema = pa.schema([("content", pa.string())])
    rows = [{"content": f"row {i}"} for i in range(1000)]
    with pytest.raises(OSError):
        write_shard(tmp_path / "shards", schema, rows)
    assert _files(tmp_path / "shards") == []
    monkeypatch.undo()
    path = write_shard(tmp_path / "shards", schema, rows)
    assert pq.read_table(path).num_rows == 1000
    assert _files(tmp_path / "shards") == [os.path.basename(path)]


def test_retention_removes_a_killed_writes_stale_temporary_file(tmp_path):
    from ctxledger.warehouse.retention import _remove_stale_partials

    folder = tmp_path / "quarantine" / "run_x"
    folder.mkdir(parents=True)
    whole = folder / "ab.bin"
    whole.write_bytes(b"whole")
    stale = folder / ".ab.bin.0123.partial"
    stale.write_bytes(b"who")  # a write a kill -9 cut short
    os.utime(stale, (1_000, 1_000))
    fresh = folder / ".cd.bin.4567.partial"  # a write that may be running
    fresh.write_bytes(b"x")
    _remove_stale_partials(folder, limit=2_000)
    assert _files(folder) == [".cd.bin.4567.partial", "ab.bin"]
