"""Live per-stage progress of a running pipeline, for logs and spinners.

Why: Beam's metrics can only be read once the pipeline has finished, and its
worker processes do not share the launcher's stdout, so a nightly piped to a
file used to show nothing between "run ... on DirectRunner" and the end. The
timed steps already write their running totals to clock files in the run's
staging folder (``pipelines.timing``); ``watch_stages`` polls those files from
a thread of the launcher and hands one line per stage to the job's progress
callback whenever that stage's totals changed: on a terminal the spinner shows
it, in a pipe each is a timestamped line (``jobs.cli_support.job_progress``).

A stage's line appears when a bundle of it finishes (for the DirectRunner that
is usually when the stage is done on that worker) and, for long bundles, at
most every ``pipelines.timing.PROGRESS_FLUSH_SECONDS``.

A stage with a ``UNITS`` entry counts in the final table's unit and shows
done / total and the time left once its total is known: ingest in files
(the total is the run's new files), redact in sessions (the total is what
ingest drafted, known once ingest is done) with its ``out`` the messages it
staged, the redact row of the final table (``redact: 9 in, 4338 out`` counted
calls of 32-session batches and every record of every table).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from ctxledger.pipelines.timing import MAIN_TAG, StageProgress, read_progress

#: How often the launcher looks at the clock files.
POLL_SECONDS = 0.5


@dataclass(frozen=True)
class Unit:
    """How a stage's progress is counted: ``done`` (its ``name``s) is its
    calls (``done_tag`` None) or its outputs to ``done_tag``; ``out_tag``:
    the outputs its final-table row counts (None: no such row in this unit,
    so only its dead letters are shown); its total is
    handed in (``totals``) or, with ``total_of``, the outputs of an earlier
    stage to a tag once that stage is complete."""

    name: str
    done_tag: str | None = None
    out_tag: str | None = None
    total_of: tuple[str, str] | None = None
    #: Outputs the final table counts as ``dead`` (memory_gate's rejections).
    dead_tags: tuple[str, ...] = ()


#: ``Unit.done_tag`` for a stage whose done count is its ``out + dead``.
IN = "<in>"


UNITS: dict[str, Unit] = {
    "ingest": Unit("files"),
    "redact": Unit(
        "sessions", done_tag=MAIN_TAG, out_tag="messages",
        total_of=("ingest", MAIN_TAG),
    ),
    # one call per session / per artifact, of what redact emitted
    "ledger": Unit("sessions", total_of=("redact", MAIN_TAG)),
    "evidence_artifacts": Unit("artifacts", total_of=("redact", "artifacts")),
    # a candidate is stored (main) or rejected with a reason (dead)
    "memory_gate": Unit(
        "candidates", done_tag=IN, out_tag=MAIN_TAG, dead_tags=("memory_rejections",)
    ),
}  # fmt: skip


def _count(n: int) -> str:
    return f"{n:,}"


def _left(seconds: float) -> str:
    if seconds < 90:
        return f"~{seconds:.0f}s left"
    if seconds < 5400:
        return f"~{seconds / 60:.0f} min left"
    return f"~{seconds / 3600:.1f} h left"


def describe_unit(
    progress: StageProgress,
    unit: Unit,
    elapsed: float,
    total: int | None,
    running: float | None,
) -> str:
    """``stage redact: 120 / 300 sessions (40%), ~31s left; 3,090 out, 4 dead
    (3,094 in) at 9.4s``: done / total once the total is known, the time left
    from the rate since the stage began (``running`` seconds), and the counts
    of the final table's row."""
    out = progress.tagged(unit.out_tag) if unit.out_tag else 0
    dead = progress.dead + sum(progress.tagged(tag) for tag in unit.dead_tags)
    if unit.done_tag is None:
        done = progress.calls
    else:
        done = out + dead if unit.done_tag == IN else progress.tagged(unit.done_tag)
    head = f"stage {progress.stage}: {_count(done)}"
    if total:
        head += f" / {_count(total)} {unit.name} ({min(done / total, 1.0):.0%})"
        if running and done and done < total:
            head += ", " + _left(running / done * (total - done))
    else:
        head += f" {unit.name}"
    if unit.out_tag is None:  # no final-table row in this unit: dead only
        return f"{head}; {_count(dead)} dead at {elapsed:.1f}s"
    return (
        f"{head}; {_count(out)} out, {_count(dead)} dead "
        f"({_count(out + dead)} in) at {elapsed:.1f}s"
    )


def describe(progress: StageProgress, elapsed: float) -> str:
    """One log line: ``stage redact: 154 in, 180 out, 2 dead (3.1s work) at 9.4s``.

    ``in`` counts the elements (or batches) the stage's steps processed,
    ``out`` what they emitted besides dead letters, summed over workers;
    ``work`` is the stage's own time, which parallel workers can make
    longer than the elapsed wall time.
    """
    return (
        f"stage {progress.stage}: {progress.calls} in, {progress.outputs} out, "
        f"{progress.dead} dead ({progress.seconds:.1f}s work) at {elapsed:.1f}s"
    )


def describe_timing(stage: str, calls: int, seconds: float, elapsed: float) -> str:
    """A stage known only from the committed run's timings (see ``settle``)."""
    return f"stage {stage}: {calls} in ({seconds:.1f}s work) at {elapsed:.1f}s"


class StageWatcher:
    """Remembers what was reported; ``poll`` reports what changed since."""

    def __init__(
        self,
        staging_dir: str | os.PathLike[str],
        emit: Callable[[str], None],
        started: float | None = None,
        totals: dict[str, int] | None = None,
    ) -> None:
        self.staging_dir = staging_dir
        self.emit = emit
        self.started = time.monotonic() if started is None else started
        #: Stage -> its total in its unit, where the job knows it up front.
        self.totals = dict(totals or {})
        self._seen: dict[str, StageProgress] = {}
        self._began: dict[str, float] = {}

    def total(self, stage: str, now: dict[str, StageProgress]) -> int | None:
        """``stage``'s total: handed in, or its ``total_of`` stage's outputs
        once that stage is complete (its own done == its total)."""
        if stage in self.totals:
            return self.totals[stage]
        unit = UNITS.get(stage)
        if unit is None or unit.total_of is None:
            return None
        before, tag = unit.total_of
        earlier, known = now.get(before), self.total(before, now)
        if earlier is None or known is None:
            return None
        first = UNITS.get(before)
        done = earlier.calls if first is None or first.done_tag is None else (
            earlier.tagged(first.done_tag)
        )  # fmt: skip
        return earlier.tagged(tag) if done >= known else None

    def poll(self) -> list[str]:
        """Emit (and return) one line per stage whose totals changed."""
        lines = []
        clock = time.monotonic()
        elapsed = clock - self.started
        stages = read_progress(self.staging_dir)
        now = {stage.stage: stage for stage in stages}
        for stage in stages:
            if self._seen.get(stage.stage) == stage:
                continue
            began = self._began.setdefault(stage.stage, clock)
            self._seen[stage.stage] = stage
            unit = UNITS.get(stage.stage)
            if unit is None:
                line = describe(stage, elapsed)
            else:
                total = self.total(stage.stage, now)
                line = describe_unit(stage, unit, elapsed, total, clock - began)
            lines.append(line)
            self.emit(line)
        return lines

    def settle(self, timings: Iterable[Any]) -> list[str]:
        """After the commit: a line for each stage of the run's committed
        ``stage_timings`` that no poll saw (the commit step itself, or a last
        stage whose files the commit removed between two polls)."""
        lines = []
        elapsed = time.monotonic() - self.started
        for timing in timings:
            if timing.stage in self._seen:
                continue
            line = describe_timing(timing.stage, timing.calls, timing.seconds, elapsed)
            self._seen[timing.stage] = StageProgress(
                timing.stage, timing.calls, seconds=timing.seconds
            )
            lines.append(line)
            self.emit(line)
        return lines


@contextmanager
def watch_stages(
    staging_dir: str | os.PathLike[str],
    emit: Callable[[str], None],
    interval: float = POLL_SECONDS,
    totals: dict[str, int] | None = None,
) -> Iterator[StageWatcher]:
    """Poll ``staging_dir``'s clock files every ``interval`` seconds while the
    body runs (a daemon thread), then once more at the end. A failing poll
    (the folder being removed) never fails the job: progress is diagnostics.
    ``totals``: stage -> its total where the job knows it (ingest: files)."""
    watcher = StageWatcher(staging_dir, emit, totals=totals)
    stop = threading.Event()

    def loop() -> None:
        while not stop.wait(interval):
            try:
                watcher.poll()
            except Exception:  # noqa: BLE001 - diagnostics only
                continue

    thread = threading.Thread(target=loop, name="stage-progress", daemon=True)
    thread.start()
    try:
        yield watcher
    finally:
        stop.set()
        thread.join(timeout=5)
        try:
            watcher.poll()
        except Exception:  # noqa: BLE001 - diagnostics only
            pass
