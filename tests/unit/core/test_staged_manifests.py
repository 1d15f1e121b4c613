"""The commit's check of reported shard paths against the writers' per-shard
manifests (``pipelines.sink.staged``): lost paths, bad files and a run that
ingested fewer landing files than it planned all fail with one line."""

from __future__ import annotations

import pytest
from staged_rows import session

from ctxledger.pipelines.sink.shards import ShardBuffer
from ctxledger.pipelines.sink.staged import (
    StagingMismatchError,
    read_manifests,
    verify_staged,
)
from ctxledger.schemas import Session
from ctxledger.schemas.arrow import arrow_schema


def _stage(tmp_path, table="sessions", shards=3, rows=2):
    buffer = ShardBuffer(tmp_path / table, arrow_schema(Session), max_rows=rows)
    paths = []
    for i in range(shards * rows):
        path = buffer.add(session(i, "run").row())
        if path:
            paths.append(path)
    return paths


def test_every_written_shard_has_a_manifest(tmp_path):
    paths = _stage(tmp_path)
    manifests = read_manifests(tmp_path)
    assert sorted(m.path for m in manifests) == sorted(paths)
    assert {m.rows for m in manifests} == {2}
    assert verify_staged(tmp_path, paths) == {"sessions": 6}


def test_lost_shard_paths_fail_naming_table_shards_and_rows(tmp_path):
    paths = _stage(tmp_path)
    with pytest.raises(StagingMismatchError) as err:
        verify_staged(tmp_path, paths[:1])
    message = str(err.value)
    assert "sessions: 2 shard(s), 4 row(s) staged but never reported" in message
    assert "\n" not in message


def test_all_paths_lost_fails_even_if_every_count_would_balance(tmp_path):
    _stage(tmp_path)
    with pytest.raises(StagingMismatchError, match="never reported"):
        verify_staged(tmp_path, [])


def test_a_reported_file_without_manifest_or_with_other_rows_fails(tmp_path):
    paths = _stage(tmp_path, shards=1)
    with pytest.raises(StagingMismatchError, match="without a manifest"):
        verify_staged(tmp_path, [*paths, str(tmp_path / "sessions" / "x.parquet")])
    other = _stage(tmp_path / "other", shards=1, rows=3)
    (tmp_path / "other" / "sessions").rename(tmp_path / "moved")
    # a file replaced under its name after its manifest was written
    import shutil

    shutil.copy(tmp_path / "moved" / other[0].rsplit("/", 1)[1], paths[0])
    with pytest.raises(StagingMismatchError, match="holds 3 row"):
        verify_staged(tmp_path, paths)


def test_new_landing_files_that_were_not_ingested_fail_the_run(tmp_path):
    with pytest.raises(StagingMismatchError, match="3 new landing file"):
        verify_staged(tmp_path, [], expected_landing_files=3)
    assert verify_staged(tmp_path, [], expected_landing_files=0) == {}
