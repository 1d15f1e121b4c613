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
    gate = _clock(tmp_path, "memory_embed", 3, outputs=30, dead=1)
    _clock(tmp_path, "ingest", 2, outputs=3)
    _clock(tmp_path, "memory_embed", 1, outputs=5)  # a second worker
    first = watcher.poll()
    assert [line.split(":")[0] for line in first] == [
        "stage ingest",
        "stage memory_embed",
    ]
    assert first[1].startswith(
        "stage memory_embed: 4 in, 35 out, 1 dead (1.0s work) at "
    )
    assert watcher.poll() == []  # nothing changed, nothing logged
    gate.add(0.1, 2)
    gate.flush()
    (again,) = watcher.poll()
    assert again.startswith("stage memory_embed: 6 in, 35 out, 1 dead")
    settled = watcher.settle(
        [
            StageTiming(stage="memory_embed", seconds=1.1, calls=6),
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
        _clock(tmp_path, "memory_embed", 4, outputs=4)
        deadline = time.monotonic() + 5
        while not lines and time.monotonic() < deadline:
            time.sleep(0.01)
        assert lines and lines[0].startswith("stage memory_embed: 4 in, 4 out, 0 dead")
    assert len(lines) == 1  # the final poll saw no change


class _Tagged:
    def __init__(self, tag, value=None):
        self.tag, self.value = tag, value


def test_ingest_and_redact_show_done_of_total_in_the_final_tables_units(tmp_path):
    """Issue 32: a nightly showed ``redact: 9 in, 4338 out`` (calls of
    32-session batches; records of every table) and ended with 3,090 /
    3,090. Ingest counts files of the run's total, redact sessions of what
    ingest drafted, and redact's ``out`` is the messages it staged, as the
    final table's redact row; time left once a rate is known."""
    lines: list[str] = []
    watcher = StageWatcher(tmp_path, lines.append, started=0.0, totals={"ingest": 4})
    ingest = StageClock(tmp_path, "ingest")
    ingest.add(0.1, 2)  # 2 of 4 files, 5 sessions drafted, a dead letter
    ingest.count([_Tagged(None)] * 5 + [_Tagged("landing_files")] * 2)
    ingest.count([_Tagged("dead_letter")])
    ingest.flush()
    redact = StageClock(tmp_path, "redact")
    redact.add(0.2, 1)  # one batch: 3 sessions, 40 messages, other tables' rows
    redact.count([_Tagged(None)] * 3 + [_Tagged("messages")] * 40)
    redact.count([_Tagged("tool_observations")] * 20 + [_Tagged("artifacts")] * 9)
    redact.count([_Tagged("dead_letter")] * 2 + [_Tagged("session_records")] * 3)
    redact.flush()
    first = watcher.poll()
    assert first[0].startswith("stage ingest: 2 / 4 files (50%)")
    # ingest is not done: redact's total is not known yet
    assert first[1].startswith("stage redact: 3 sessions; 40 out, 2 dead (42 in)")
    ingest.add(0.1, 2)  # the other 2 files: 2 more sessions
    ingest.count([_Tagged(None)] * 2)
    ingest.flush()
    time.sleep(0.05)  # a rate: some time since the stage began
    redact.add(0.1, 1)
    redact.count([_Tagged(None)] * 1 + [_Tagged("messages")] * 10)
    redact.flush()
    ingest_line, redact_line = watcher.poll()
    assert ingest_line.startswith("stage ingest: 4 / 4 files (100%); 1 dead at ")
    assert redact_line.startswith("stage redact: 4 / 7 sessions (57%), ~")
    assert " left; 50 out, 2 dead (52 in) at " in redact_line


def test_memory_gate_counts_candidates_stored_or_rejected(tmp_path):
    """The final table's memory_gate row: candidates in, stored out,
    rejections (and gate failures) dead."""
    lines: list[str] = []
    gate = StageClock(tmp_path, "memory_gate")
    gate.add(0.1, 4)  # 4 subjects
    gate.count([_Tagged(None)] * 8 + [_Tagged("memory_rejections")] * 12)
    gate.count([_Tagged("dead_letter")])
    gate.flush()
    (line,) = StageWatcher(tmp_path, lines.append).poll()
    assert line.startswith("stage memory_gate: 21 candidates; 8 out, 13 dead (21 in)")
