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
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from ctxledger.pipelines.timing import StageProgress, read_progress

#: How often the launcher looks at the clock files.
POLL_SECONDS = 0.5


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
    ) -> None:
        self.staging_dir = staging_dir
        self.emit = emit
        self.started = time.monotonic() if started is None else started
        self._seen: dict[str, StageProgress] = {}

    def poll(self) -> list[str]:
        """Emit (and return) one line per stage whose totals changed."""
        lines = []
        elapsed = time.monotonic() - self.started
        for stage in read_progress(self.staging_dir):
            if self._seen.get(stage.stage) == stage:
                continue
            self._seen[stage.stage] = stage
            line = describe(stage, elapsed)
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
) -> Iterator[StageWatcher]:
    """Poll ``staging_dir``'s clock files every ``interval`` seconds while the
    body runs (a daemon thread), then once more at the end. A failing poll
    (the folder being removed) never fails the job: progress is diagnostics."""
    watcher = StageWatcher(staging_dir, emit)
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
