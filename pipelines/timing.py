"""Time per stage: each stage's steps measure their own work; the commit reads it.

Why this shape: Beam metrics are only readable once the pipeline has finished,
which is after the commit step, so they could not be committed atomically with
the run. Instead every timed step keeps a ``StageClock`` per worker instance and
writes its running total to a small JSON file under
``<staging_dir>/_timings/`` (at the end of each bundle). Those files sit next to
the run's Parquet shards: the commit step reads them (``read_timings``) into the
run manifest, in the same snapshot, and removes them with the staging folder. A
bundle's files are written before its outputs count as done, so by the time the
commit step runs every upstream bundle has flushed.

``timed("redact")`` decorates a ``DoFn`` class: its ``process`` is timed with its
outputs materialised first (Beam runs fused downstream steps while a generator
yields, which would otherwise be counted here too) and its ``finish_bundle``
flushes. Timings are diagnostics: a clock that cannot write its file logs a
warning and the run goes on. No Beam import here (DESIGN.md convention 1).
"""

from __future__ import annotations

import functools
import json
import logging
import os
import time
import uuid
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

from schemas.operations import StageTiming

log = logging.getLogger(__name__)

TIMINGS_DIR = "_timings"

#: Display and sort order of the stages the pipeline times; others follow.
STAGE_ORDER = (
    "ingest",
    "redact",
    "ledger",
    "memory_extract",
    "memory_gate",
    "evidence_docs",
    "evidence_artifacts",
    "evidence_embed",
    "commit",
)

T = TypeVar("T")


class StageClock:
    """Running total of one stage's work on one worker instance.

    Each clock owns one file (a random name), rewritten atomically with its
    cumulative total, so flushing twice never double counts. A pickled clock
    comes back as a fresh one with its own file, so copies never overwrite
    each other's totals.
    """

    def __init__(self, staging_dir: str | os.PathLike[str] | None, stage: str):
        self.staging_dir = str(staging_dir) if staging_dir else None
        self.stage = stage
        self.seconds = 0.0
        self.calls = 0
        self._flushed = (0.0, 0)
        self._name = f"{stage}.{uuid.uuid4().hex}.json"
        self._warned = False

    def __reduce__(self):
        return (StageClock, (self.staging_dir, self.stage))

    def add(self, seconds: float, calls: int = 1) -> None:
        self.seconds += max(seconds, 0.0)
        self.calls += calls

    def measure(self, call: Callable[[], T]) -> T:
        """Run ``call()`` and add its wall time."""
        start = time.perf_counter()
        try:
            return call()
        finally:
            self.add(time.perf_counter() - start)

    def flush(self) -> None:
        """Write the running total (nothing to do when unchanged)."""
        if self.staging_dir is None or self._flushed == (self.seconds, self.calls):
            return
        folder = Path(self.staging_dir) / TIMINGS_DIR
        target = folder / self._name
        body = {"stage": self.stage, "seconds": self.seconds, "calls": self.calls}
        try:
            folder.mkdir(parents=True, exist_ok=True)
            partial = target.with_name(target.name + ".tmp")
            partial.write_text(json.dumps(body))
            os.replace(partial, target)
        except OSError as exc:
            if not self._warned:
                log.warning("stage timings of %s not written: %s", self.stage, exc)
                self._warned = True
            return
        self._flushed = (self.seconds, self.calls)


def clock_of(owner: Any, stage: str, staging_dir: str | None) -> StageClock:
    """The clock ``owner`` (a DoFn or model handler) keeps for ``stage``."""
    clocks = owner.__dict__.setdefault("_stage_clocks", {})
    clock = clocks.get(stage)
    if clock is None:
        clock = clocks[stage] = StageClock(staging_dir, stage)
    return clock


def _staging_dir(owner: Any) -> str | None:
    config = getattr(owner, "config", None)
    return getattr(config, "staging_dir", None)


def timed(stage: str) -> Callable[[type[T]], type[T]]:
    """Class decorator for a DoFn whose ``self.config`` is the run's ``JobConfig``:
    time ``process``, flush in ``finish_bundle`` (see the module docstring)."""

    def decorate(cls: type[T]) -> type[T]:
        process = cls.process  # type: ignore[attr-defined]
        finish = cls.__dict__.get("finish_bundle")

        @functools.wraps(process)
        def timed_process(self, *args, **kwargs):
            clock = clock_of(self, stage, _staging_dir(self))
            outputs = clock.measure(lambda: list(process(self, *args, **kwargs) or ()))
            yield from outputs

        def finish_bundle(self):
            clock_of(self, stage, _staging_dir(self)).flush()
            if finish is not None:
                return finish(self)
            return None

        cls.process = timed_process  # type: ignore[attr-defined]
        cls.finish_bundle = finish_bundle  # type: ignore[attr-defined]
        return cls

    return decorate


def _order(stage: str) -> tuple[int, str]:
    index = STAGE_ORDER.index(stage) if stage in STAGE_ORDER else len(STAGE_ORDER)
    return index, stage


def merge_timings(parts: Iterable[StageTiming]) -> list[StageTiming]:
    """Sum timings per stage, in pipeline order."""
    totals: dict[str, tuple[float, int]] = {}
    for part in parts:
        seconds, calls = totals.get(part.stage, (0.0, 0))
        totals[part.stage] = (seconds + part.seconds, calls + part.calls)
    return [
        StageTiming(stage=stage, seconds=round(seconds, 6), calls=calls)
        for stage, (seconds, calls) in sorted(
            totals.items(), key=lambda i: _order(i[0])
        )
    ]


def read_timings(staging_dir: str | os.PathLike[str]) -> list[StageTiming]:
    """Every clock file a run's steps flushed, summed per stage.

    A file that cannot be read (a worker died mid-write leaves only ``.tmp``
    files, which are ignored) is skipped: timings never fail a commit.
    """
    folder = Path(staging_dir) / TIMINGS_DIR
    if not folder.is_dir():
        return []
    parts = []
    for path in sorted(folder.glob("*.json")):
        try:
            parts.append(StageTiming.model_validate_json(path.read_text()))
        except (OSError, ValueError) as exc:
            log.warning("unreadable stage timing %s: %s", path.name, exc)
    return merge_timings(parts)
