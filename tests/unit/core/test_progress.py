"""Live per-stage progress: clock files count outputs and dead letters, flush
mid-bundle, and the launcher's watcher logs one line per changed stage."""

from __future__ import annotations

import time
from types import SimpleNamespace

import ctxledger.pipelines.timing as timing
from ctxledger.jobs.progress import StageWatcher, watch_stages
from ctxledger.pipelines.timing import StageClock, read_progress, read_timings, timed
from ctxledger.schemas.operations import StageTiming


@timed("redact")
class _FakeFn:
    """DoFn-shaped (no Beam): one output per element, a dead letter for odd ones."""

    def __init__(self, staging_dir):
        self.config = SimpleNamespace(staging_dir=str(staging_dir))

    def process(self, element: int):
        yield element
        if element % 2:
            yield SimpleNamespace(tag="dead_letter", value=element)


def test_timed_steps_count_outputs_and_dead_letters_mid_bundle(tmp_path, monkeypatch):
    fn = _FakeFn(tmp_path)
    assert list(fn.process(2)) == [2]
    assert read_progress(tmp_path) == []  # flush not due yet
    monkeypatch.setattr(timing, "PROGRESS_FLUSH_SECONDS", 0.0)
    outs = list(fn.process(3))
    assert outs[0] == 3 and outs[1].tag == "dead_letter"
    (stage,) = read_progress(tmp_path)  # before the bundle ends
    assert (stage.stage, stage.calls, stage.outputs, stage.dead) == ("redact", 2, 2, 1)
    fn.finish_bundle()
    # The committed timings keep their schema (the extra counts stay out).
    (committed,) = read_timings(tmp_path)
    assert isinstance(committed, StageTiming) and committed.calls == 2


def test_session_bundles_are_neither_outputs_nor_dead_letters(tmp_path):
    """The redact stage's per-session bundles repeat records its other tags
    already emitted: its progress line counts the records once."""
    clock = StageClock(tmp_path, "redact")
    clock.count(
        [
            "session",
            SimpleNamespace(tag="messages", value=1),
            SimpleNamespace(tag="session_records", value=("ses_1", None)),
            SimpleNamespace(tag="dead_letter", value=2),
        ]
    )
    assert (clock.outputs, clock.dead) == (2, 1)


def _clock(tmp_path, stage, calls, outputs=0, dead=0):
    clock = StageClock(tmp_path, stage)
    clock.add(0.5, calls)
    clock.outputs, clock.dead = outputs, dead
    clock.flush()
    return clock


def test_watcher_logs_one_line_per_stage_only_when_it_changed(tmp_path):
    lines: list[str] = []
    watcher = StageWatcher(tmp_path, lines.append, started=time.monotonic())
    assert watcher.poll() == []
    redact = _clock(tmp_path, "redact", 3, outputs=30, dead=1)
    _clock(tmp_path, "ingest", 2, outputs=3)
    _clock(tmp_path, "redact", 1, outputs=5)  # a second worker
    first = watcher.poll()
    assert [line.split(":")[0] for line in first] == ["stage ingest", "stage redact"]
    assert first[1].startswith("stage redact: 4 in, 35 out, 1 dead (1.0s work) at ")
    assert watcher.poll() == []  # nothing changed, nothing logged
    redact.add(0.1, 2)
    redact.flush()
    (again,) = watcher.poll()
    assert again.startswith("stage redact: 6 in, 35 out, 1 dead")
    settled = watcher.settle(
        [
            StageTiming(stage="redact", seconds=1.1, calls=6),
            StageTiming(stage="commit", seconds=0.25, calls=1),
        ]
    )
    assert [line.split(" at ")[0] for line in settled] == [
        "stage commit: 1 in (0.2s work)"
    ]
    assert lines == first + [again] + settled


def test_watch_stages_reports_while_the_body_runs(tmp_path):
    lines: list[str] = []
    with watch_stages(tmp_path, lines.append, interval=0.01):
        _clock(tmp_path, "ledger", 4, outputs=4)
        deadline = time.monotonic() + 5
        while not lines and time.monotonic() < deadline:
            time.sleep(0.01)
        assert lines and lines[0].startswith("stage ledger: 4 in, 4 out, 0 dead")
    assert len(lines) == 1  # the final poll saw no change
