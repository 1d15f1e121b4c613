"""The sink's staged Parquet shards: bounded files, every row once, whole files."""

from __future__ import annotations

from pathlib import Path

import apache_beam as beam
import pyarrow.parquet as pq
import pytest
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that
from staged_rows import session

from ctxledger.pipelines.config import JobConfig
from ctxledger.pipelines.sink.commit import group_staged
from ctxledger.pipelines.sink.shards import ShardBuffer
from ctxledger.pipelines.sink.transforms import WriteTables
from ctxledger.schemas import Session
from ctxledger.schemas.arrow import arrow_schema


def _session(i: int) -> Session:
    return session(i, "run_test")


def _ids(paths) -> list[str]:
    return sorted(
        row["session_id"] for path in paths for row in pq.read_table(path).to_pylist()
    )


def test_buffer_writes_a_file_every_max_rows_and_the_rest_on_flush(tmp_path):
    buffer = ShardBuffer(tmp_path / "sessions", arrow_schema(Session), max_rows=3)
    written = [buffer.add(_session(i).row()) for i in range(7)]
    paths = [p for p in written if p is not None]
    assert len(paths) == 2 and written.index(paths[0]) == 2
    last = buffer.flush()
    assert last is not None and buffer.flush() is None
    paths.append(last)
    assert [pq.read_metadata(p).num_rows for p in paths] == [3, 3, 1]
    assert _ids(paths) == sorted(f"ses_{i}" for i in range(7))
    # Only whole files under final names; nothing half-written is left.
    assert sorted(Path(p).name for p in paths) == sorted(
        f.name for f in (tmp_path / "sessions").iterdir()
    )
    assert not list((tmp_path / "sessions").glob("*.partial"))


def test_buffer_rejects_a_bound_below_one(tmp_path):
    with pytest.raises(ValueError, match="max_rows"):
        ShardBuffer(tmp_path, arrow_schema(Session), max_rows=0)


def test_write_tables_reports_every_shard_of_every_table(tmp_path):
    config = JobConfig(
        job="test",
        run_id="run_test",
        landing=str(tmp_path / "landing"),
        warehouse=str(tmp_path / "wh"),
        policy_version="test+0",
        code_version="test",
    )

    def check(paths):
        staged = group_staged(paths)
        assert set(staged) == {"sessions"}
        assert _ids(staged["sessions"]) == sorted(f"ses_{i}" for i in range(25))
        # A bundle writes a file per 10 rows and its remainder at the end.
        assert all(pq.read_metadata(p).num_rows <= 10 for p in staged["sessions"])
        assert len(staged["sessions"]) >= 3

    with TestPipeline() as pipeline:
        sessions = pipeline | beam.Create([_session(i) for i in range(25)])
        empty = pipeline | "NoMessages" >> beam.Create([])
        paths = {"sessions": sessions, "messages": empty} | WriteTables(
            config, max_rows=10
        )
        assert_that(paths, check)
