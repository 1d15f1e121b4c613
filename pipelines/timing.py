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
flushes. Its ``setup`` first tunes the process's garbage collector
(``pipelines.runtime``: every process that runs a timed step holds the
models). Timings are diagnostics: a clock that cannot write its file logs a
warning and the run goes on. No Beam import here (DESIGN.md convention 1).

The same files carry live progress: each clock also counts the elements its
stage emitted and the dead letters among them, and flushes mid-bundle at most
every ``PROGRESS_FLUSH_SECONDS``. The launcher polls them (``read_progress``,
``jobs.progress``) to log one line per stage while the run goes on, even from
Beam's worker processes, which share the staging folder but not the launcher's
stdout.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from ctxledger.pipelines.runtime import tune_collector
from ctxledger.schemas.operations import StageTiming

log = logging.getLogger(__name__)

TIMINGS_DIR = "_timings"
#: A timed step rewrites its clock file at most this often inside one bundle.
PROGRESS_FLUSH_SECONDS = 2.0
#: Output tag of every stage's dead letters (``pvalue.TaggedOutput.tag``).
DEAD_LETTER_TAG = "dead_letter"
#: Output tags that repeat records a stage already emitted under another tag
#: (the redact stage's per-session bundles): neither outputs nor dead letters.
UNCOUNTED_TAGS = frozenset({"session_records"})
#: The key of a step's untagged (main) output in a clock's per-tag counts.
MAIN_TAG = "main"

#: Display and sort order of the stages the pipeline times; others follow.
STAGE_ORDER = (
    "ingest",
    "redact",
    "ledger",
    "memory_extract",
    "memory_gate",
    "memory_embed",
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
        self.outputs = 0
        self.dead = 0
        #: Outputs per tag (``MAIN_TAG``: the untagged main output), so the
        #: progress display counts a stage in its own unit (``jobs.progress``).
        self.tags: dict[str, int] = {}
        self._flushed: tuple = (0.0, 0, 0, 0, ())
        self._flushed_at = time.monotonic()
        self._name = f"{stage}.{uuid.uuid4().hex}.json"
        self._warned = False

    def __reduce__(self):
        return (StageClock, (self.staging_dir, self.stage))

    def add(self, seconds: float, calls: int = 1) -> None:
        self.seconds += max(seconds, 0.0)
        self.calls += calls

    def count(self, outputs: Iterable[Any]) -> None:
        """Count emitted elements; a ``TaggedOutput`` to the dead-letter tag
        (duck-typed: no Beam here) is a dead letter, one to an
        ``UNCOUNTED_TAGS`` tag is neither, everything else an output."""
        tags = self.tags
        for out in outputs:
            tag = getattr(out, "tag", None)
            if tag == DEAD_LETTER_TAG:
                self.dead += 1
            elif tag not in UNCOUNTED_TAGS:
                self.outputs += 1
                key = MAIN_TAG if tag is None else tag
                tags[key] = tags.get(key, 0) + 1

    def due(self) -> bool:
        """Whether a mid-bundle flush is due (progress for long bundles)."""
        return time.monotonic() - self._flushed_at >= PROGRESS_FLUSH_SECONDS

    def measure(self, call: Callable[[], T]) -> T:
        """Run ``call()`` and add its wall time."""
        start = time.perf_counter()
        try:
            return call()
        finally:
            self.add(time.perf_counter() - start)

    def flush(self) -> None:
        """Write the running total (nothing to do when unchanged)."""
        state = (
            self.seconds, self.calls, self.outputs, self.dead,
            tuple(sorted(self.tags.items())),
        )  # fmt: skip
        self._flushed_at = time.monotonic()
        if self.staging_dir is None or self._flushed == state:
            return
        folder = Path(self.staging_dir) / TIMINGS_DIR
        target = folder / self._name
        body = {
            "stage": self.stage,
            "seconds": self.seconds,
            "calls": self.calls,
            "outputs": self.outputs,
            "dead": self.dead,
            "tags": self.tags,
        }
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
        self._flushed = state


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
        setup = getattr(cls, "setup", None)

        @functools.wraps(process)
        def timed_process(self, *args, **kwargs):
            clock = clock_of(self, stage, _staging_dir(self))
            outputs = clock.measure(lambda: list(process(self, *args, **kwargs) or ()))
            clock.count(outputs)
            if clock.due():
                clock.flush()
            yield from outputs

        def finish_bundle(self):
            clock_of(self, stage, _staging_dir(self)).flush()
            if finish is not None:
                return finish(self)
            return None

        def tuned_setup(self):
            tune_collector()
            if setup is not None:
                return setup(self)
            return None

        _install(cls, "process", timed_process)
        _install(cls, "finish_bundle", finish_bundle)
        _install(cls, "setup", tuned_setup)
        return cls

    return decorate


def _install(cls: type, name: str, fn: Callable[..., Any]) -> None:
    """Set ``cls.<name> = fn`` under that very name.

    A bound method pickles as ``getattr(instance, fn.__name__)`` (pickle,
    cloudpickle and dill alike): a wrapper whose ``__name__`` differs from the
    attribute it is installed as (``tuned_setup`` as ``setup``) cannot be
    unpickled on a remote worker, which only has the class's attributes
    (``tests/unit/core/test_dofn_pickling.py`` checks every DoFn).
    """
    fn.__name__ = name
    fn.__qualname__ = f"{cls.__qualname__}.{name}"
    fn.__module__ = cls.__module__  # cloudpickle: by reference, not by value
    setattr(cls, name, fn)


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
    parts = [
        StageTiming(stage=p.stage, seconds=p.seconds, calls=p.calls)
        for p in _clock_files(staging_dir, warn=True)
    ]
    return merge_timings(parts)


@dataclass(frozen=True)
class StageProgress:
    """One stage's totals so far over every clock file (all workers)."""

    stage: str
    calls: int = 0
    outputs: int = 0
    dead: int = 0
    seconds: float = 0.0
    #: Outputs per tag, sorted (``MAIN_TAG`` for the main output).
    tags: tuple[tuple[str, int], ...] = ()

    def tagged(self, tag: str) -> int:
        """Outputs to ``tag`` so far."""
        return dict(self.tags).get(tag, 0)


def _clock_files(staging_dir, warn: bool) -> list[StageProgress]:
    folder = Path(staging_dir) / TIMINGS_DIR
    if not folder.is_dir():
        return []
    parts = []
    for path in sorted(folder.glob("*.json")):
        try:
            body = json.loads(path.read_text())
            parts.append(
                StageProgress(
                    stage=str(body["stage"]),
                    calls=int(body.get("calls", 0)),
                    outputs=int(body.get("outputs", 0)),
                    dead=int(body.get("dead", 0)),
                    seconds=float(body.get("seconds", 0.0)),
                    tags=tuple(
                        sorted(
                            (str(k), int(n)) for k, n in body.get("tags", {}).items()
                        )
                    ),
                )
            )
        except (OSError, ValueError, TypeError, KeyError) as exc:
            if warn:
                log.warning("unreadable stage timing %s: %s", path.name, exc)
    return parts


def read_progress(staging_dir: str | os.PathLike[str]) -> list[StageProgress]:
    """Every stage's calls, outputs, dead letters and seconds flushed so far,
    in pipeline order (what ``jobs.progress`` logs while a run goes on). A
    file being replaced or half-written is skipped until the next poll."""
    totals: dict[str, StageProgress] = {}
    for part in _clock_files(staging_dir, warn=False):
        seen = totals.get(part.stage) or StageProgress(part.stage)
        tags = dict(seen.tags)
        for tag, n in part.tags:
            tags[tag] = tags.get(tag, 0) + n
        totals[part.stage] = StageProgress(
            part.stage,
            seen.calls + part.calls,
            seen.outputs + part.outputs,
            seen.dead + part.dead,
            seen.seconds + part.seconds,
            tuple(sorted(tags.items())),
        )
    return [totals[stage] for stage in sorted(totals, key=_order)]
