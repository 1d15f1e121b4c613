"""The stream job's loop: windows, one micro-batch in flight, the drain on stop.

The Beam part of a micro-batch (``StreamJob._work``) is replaced by a recorder,
the source by a scripted one and the clock by one that moves a second per poll;
the warehouse is a real (empty) DuckLake folder. The whole job, Beam and commit
included, runs in tests/e2e/test_stream.py.
"""

from __future__ import annotations

import signal
import threading

import pytest

from ctxledger.jobs.stream import StopFlag, StreamAborted, StreamJob
from ctxledger.pipelines.ingest.landing import LandingItem


def item(name: str, digest: str | None = None) -> LandingItem:
    return LandingItem(f"/l/{name}", name, digest or f"h-{name}", 1, "default")


class ScriptedSource:
    """Hands out one scripted list per poll; each poll moves the clock 1 s."""

    def __init__(self, script, clock, unsettled=()):
        self.script = list(script)
        self.unsettled_script = list(unsettled)
        self._unsettled = 0
        self.clock = clock
        self.polls = 0
        self.acked: list[str] = []
        self.closed = False

    def poll(self):
        self.polls += 1
        self.clock.t += 1.0
        if self.unsettled_script:
            self._unsettled = self.unsettled_script.pop(0)
        return self.script.pop(0) if self.script else []

    def unsettled(self) -> int:
        return self._unsettled

    def ack(self, items):
        self.acked.extend(i.rel_path for i in items)

    def close(self):
        self.closed = True


class Clock:
    def __init__(self):
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


class RecordingJob(StreamJob):
    """Records micro-batches instead of running the batch graph."""

    def __init__(self, *args, on_work=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.batches: list[list[str]] = []
        self.on_work = on_work or (lambda job, commit: None)

    def _work(self, commit):
        self.batches.append([i.rel_path for i in commit.batch.items])
        self.on_work(self, commit)
        return None


def make_job(
    tmp_path, script, stop, unsettled=(), **kwargs
) -> tuple[RecordingJob, ScriptedSource]:
    clock = Clock()
    source = ScriptedSource(script, clock, unsettled)
    job = RecordingJob(
        tmp_path / "landing",
        tmp_path / "warehouse",
        policy_file=None,
        default_tenant="default",
        source_format=None,
        key_file=None,
        catalog=None,
        data_path=None,
        window_seconds=2.0,
        poll_seconds=0.01,
        beam_args=(),
        source=source,
        stop=stop,
        clock=clock,
        progress=lambda _m: None,
        on_commit=lambda _r: None,
        **kwargs,
    )
    return job, source


def test_closed_windows_commit_and_a_stop_drains_what_was_picked(tmp_path):
    stop = StopFlag()
    # Poll 1 at t=1001 picks a, b (window 1000-1002); poll 3 at t=1003 picks c.
    script = [[item("a"), item("b")], [], [item("c")], [item("d")]]

    def stop_after_first(job, commit):
        if commit.index == 1:
            while source.polls < 4:  # c and d are picked while 1 is in flight
                threading.Event().wait(0.01)
            stop.set("test")

    job, source = make_job(tmp_path, script, stop, on_work=stop_after_first)
    result = job.run()
    assert job.batches == [["a", "b"], ["c", "d"]]
    assert [b.files for b in result.batches] == [2, 2]
    assert source.acked == ["a", "b", "c", "d"]
    assert result.stopped_by == "test"
    assert source.closed


@pytest.mark.parametrize(
    ("unsettled", "committed", "left"),
    [((1, 0), [["x"]], 0), ((1, 1), [], 1)],
    ids=["settles-on-the-extra-poll", "still-being-written"],
)
def test_the_drain_polls_once_more_for_files_being_written(
    tmp_path, unsettled, committed, left
):
    stop = StopFlag()
    stop.set("SIGTERM")  # the stop came while x was still being written
    x = [item("x")] if committed else []
    job, source = make_job(tmp_path, [[], x], stop, unsettled=unsettled)
    result = job.run()
    assert source.polls == 2
    assert job.batches == committed
    assert result.left_unsettled == left
    assert result.stopped_by == "SIGTERM"


def test_a_copy_of_a_committed_file_is_skipped(tmp_path):
    stop = StopFlag()
    script = [[item("a", "same")], [], [], [item("copy-of-a", "same")], [], []]

    def stop_later(job, commit):
        while source.script:
            threading.Event().wait(0.01)
        stop.set("test")

    job, source = make_job(tmp_path, script, stop, on_work=stop_later)
    result = job.run()
    assert job.batches == [["a"]]
    assert result.skipped_known == 1


def test_a_failed_micro_batch_stops_the_job_with_its_error(tmp_path):
    def fail(job, commit):
        raise RuntimeError("boom")

    job, _source = make_job(tmp_path, [[item("a")]], StopFlag(), on_work=fail)
    with pytest.raises(RuntimeError, match="boom"):
        job.run()
    # The failure is recorded as a failed run of its own.
    from ctxledger.warehouse import Warehouse

    with Warehouse.open(tmp_path / "warehouse") as wh:
        rows = wh.query("SELECT job, status, error FROM runs").fetchall()
    assert rows == [("stream", "failed", "RuntimeError: boom")]


def test_a_second_signal_aborts():
    stop = StopFlag()
    stop.install()
    try:
        signal.raise_signal(signal.SIGTERM)
        assert stop.reason == "SIGTERM"
        with pytest.raises(StreamAborted):
            signal.raise_signal(signal.SIGINT)
    finally:
        stop.restore()
    assert signal.getsignal(signal.SIGTERM) is not stop._handle


def test_stop_flag_wait_returns_early_once_set():
    stop = StopFlag()
    assert stop.wait(0.01) is False
    stop.set()
    assert stop.wait(60) is True
