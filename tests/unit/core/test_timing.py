"""Stage timings: clocks flush cumulative totals, the commit sums them per stage,
and ``commit_run`` stores them in the run's manifest in the same snapshot."""

from __future__ import annotations

import json
import pickle
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace

import pyarrow.parquet as pq
from hypothesis import given
from hypothesis import strategies as st

from ctxledger.jobs.nightly import load_run
from ctxledger.pipelines.config import JobConfig
from ctxledger.pipelines.sink.commit import commit_run
from ctxledger.pipelines.timing import (
    STAGE_ORDER,
    TIMINGS_DIR,
    StageClock,
    merge_timings,
    read_timings,
    timed,
)
from ctxledger.schemas import LandingFile, RunManifest
from ctxledger.schemas.arrow import to_table
from ctxledger.schemas.operations import StageTiming
from ctxledger.warehouse import Warehouse


def test_flush_writes_the_running_total_once_per_clock(tmp_path):
    clock = StageClock(tmp_path, "redact")
    clock.add(1.5)
    clock.flush()
    clock.add(0.5, calls=2)
    clock.flush()
    clock.flush()  # unchanged: nothing rewritten, nothing double counted
    files = list((tmp_path / TIMINGS_DIR).glob("*.json"))
    assert len(files) == 1
    assert json.loads(files[0].read_text()) == {
        "stage": "redact",
        "seconds": 2.0,
        "calls": 3,
        "outputs": 0,
        "dead": 0,
        "tags": {},
    }
    assert read_timings(tmp_path) == [StageTiming(stage="redact", seconds=2.0, calls=3)]


def test_clocks_of_several_workers_add_up_per_stage_in_pipeline_order(tmp_path):
    for stage, seconds in [("commit", 0.1), ("redact", 1.0), ("ingest", 0.25)]:
        clock = StageClock(tmp_path, stage)
        clock.add(seconds)
        clock.flush()
    other = StageClock(tmp_path, "redact")
    other.add(2.0)
    other.flush()
    (tmp_path / TIMINGS_DIR / "redact.dead.json.tmp").write_text("{")
    (tmp_path / TIMINGS_DIR / "garbage.json").write_text("not json")
    timings = read_timings(tmp_path)
    assert [t.stage for t in timings] == ["ingest", "redact", "commit"]
    assert timings[1] == StageTiming(stage="redact", seconds=3.0, calls=2)


def test_a_pickled_clock_starts_fresh_with_its_own_file(tmp_path):
    clock = StageClock(tmp_path, "ledger")
    clock.add(4.0)
    copy = pickle.loads(pickle.dumps(clock))
    assert copy.seconds == 0 and copy.stage == "ledger"
    copy.add(1.0)
    copy.flush()
    clock.flush()
    assert read_timings(tmp_path) == [StageTiming(stage="ledger", seconds=5.0, calls=2)]


def test_no_staging_dir_or_an_unwritable_one_never_raises(tmp_path, caplog):
    StageClock(None, "ingest").flush()
    blocker = tmp_path / "file"
    blocker.write_text("x")
    clock = StageClock(blocker, "ingest")  # _timings cannot be made under a file
    clock.add(1.0)
    clock.flush()
    assert "stage timings of ingest not written" in caplog.text
    assert read_timings(tmp_path / "missing") == []


@given(
    st.lists(
        st.tuples(
            st.sampled_from([*STAGE_ORDER, "zz_custom"]),
            st.floats(0, 1e4, allow_nan=False),
            st.integers(0, 1000),
        ),
        max_size=30,
    )
)
def test_merge_keeps_every_second_and_call(parts):
    merged = merge_timings(
        StageTiming(stage=s, seconds=x, calls=c) for s, x, c in parts
    )
    assert len({t.stage for t in merged}) == len(merged)
    assert abs(sum(t.seconds for t in merged) - sum(x for _, x, _ in parts)) < 1e-3
    assert sum(t.calls for t in merged) == sum(c for _, _, c in parts)
    known = [t.stage for t in merged if t.stage in STAGE_ORDER]
    assert known == sorted(known, key=STAGE_ORDER.index)


@timed("memory_gate")
class _FakeFn:
    """A DoFn-shaped class (no Beam needed): ``process`` is a generator."""

    def __init__(self, staging_dir: Path):
        self.config = SimpleNamespace(staging_dir=str(staging_dir))
        self.seen: list[int] = []

    def process(self, element: int):
        """Doubles the element."""
        self.seen.append(element)
        yield element * 2
        if element:
            yield -element


def test_timed_process_keeps_outputs_signature_and_flushes_at_bundle_end(tmp_path):
    fn = _FakeFn(tmp_path)
    assert list(fn.process(3)) == [6, -3]
    assert list(fn.process(0)) == [0]
    assert fn.process.__doc__ == "Doubles the element."
    assert fn.process.__wrapped__.__name__ == "process"
    assert read_timings(tmp_path) == []  # nothing until the bundle ends
    assert fn.finish_bundle() is None
    (timing,) = read_timings(tmp_path)
    assert timing.stage == "memory_gate" and timing.calls == 2
    assert timing.seconds >= 0


def _landing(run_id: str) -> dict:
    return LandingFile(
        file_hash="h1", path="a.jsonl", tenant_id="t", size_bytes=3, run_id=run_id
    ).row()


def test_commit_run_stores_timings_with_the_run_in_one_snapshot(tmp_path):
    config = JobConfig(
        job="nightly",
        run_id="run_timed",
        landing=str(tmp_path / "landing"),
        warehouse=str(tmp_path / "wh"),
        policy_version="p1",
        code_version="c1",
    )
    shard = Path(config.staging_dir) / "landing_files" / "part-0.parquet"
    shard.parent.mkdir(parents=True)
    pq.write_table(to_table(LandingFile, [_landing(config.run_id)]), shard)
    for stage, seconds in [("redact", 1.25), ("ingest", 0.5), ("redact", 0.75)]:
        clock = StageClock(config.staging_dir, stage)
        clock.add(seconds)
        clock.flush()
    with Warehouse.open(config.warehouse, create=True) as wh:
        before = wh.current_snapshot()
    commit_run(
        config,
        [str(shard)],
        started_at=datetime.now(UTC),
        files_seen=1,
        files_skipped=0,
        runner="DirectRunner",
    )
    assert not Path(config.staging_dir).exists()  # timing files went with it
    with Warehouse.open(config.warehouse) as wh:
        manifest = load_run(wh, config.run_id)
        assert wh.current_snapshot() == before + 1 == manifest.snapshot_id
    stages = {t.stage: t for t in manifest.stage_timings}
    assert list(stages) == ["ingest", "redact", "commit"]
    assert stages["redact"].seconds == 2.0 and stages["redact"].calls == 2
    assert stages["commit"].seconds >= 0


def test_runs_committed_before_timings_existed_read_back_empty(tmp_path):
    old = RunManifest(
        run_id="run_old",
        job="nightly",
        status="committed",
        started_at=datetime(2026, 1, 1, tzinfo=UTC),
        finished_at=datetime(2026, 1, 1, 0, 1, tzinfo=UTC),
        policy_version="p",
        code_version="c",
        runner="DirectRunner",
    )
    row = old.row()
    row["stage_timings"] = None  # what an added column reads for old rows
    assert RunManifest.model_validate(row).stage_timings == []
