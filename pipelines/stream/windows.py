"""Fixed processing-time windows that cut a stream of landing items into
micro-batches.

Each item is stamped with the time the source handed it over (``picked_at``) and
falls into the fixed window ``[start, start + size)`` with ``start = t - t % size``:
exactly Beam's ``FixedWindows(size)`` assignment (a test checks both agree), so a
runner-native streaming graph would cut the same batches. A window is *due* once
the clock passed its end. ``take_due`` hands out every due window as one
micro-batch: one window normally, several when a slow commit let the job fall
behind (catch-up, as in Spark's trigger-interval semantics), so a backlog never
turns into a queue of tiny commits. When the job drains (a stop was asked for)
everything pending is due at once.

Times are integer microseconds inside (Beam's own resolution), so window edges
never depend on float rounding.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ctxledger.pipelines.ingest.landing import LandingItem

MICROS = 1_000_000


def to_micros(seconds: float) -> int:
    """Seconds (``time.time()``) as integer microseconds."""
    return round(seconds * MICROS)


def window_start(t_us: int, size_us: int) -> int:
    """Start of the fixed window holding ``t_us`` (Beam ``FixedWindows``, offset 0)."""
    if size_us <= 0:
        raise ValueError("window size must be positive")
    return t_us - t_us % size_us


@dataclass(frozen=True)
class Picked:
    """A landing item and the time (microseconds) the source handed it over."""

    item: LandingItem
    picked_at_us: int


@dataclass(frozen=True)
class MicroBatch:
    """The items of one or more consecutive due windows, committed as one run."""

    window_start_us: int
    window_end_us: int
    items: tuple[LandingItem, ...]
    windows: int

    @property
    def file_hashes(self) -> list[str]:
        return [item.file_hash for item in self.items]


def unique_by_hash(items: Iterable[LandingItem]) -> list[LandingItem]:
    """The same bytes under two names (of one tenant and subject folder: the
    landing identity) are one file: keep the first path."""
    seen: dict[str, LandingItem] = {}
    for item in items:
        seen.setdefault(item.landing_id, item)
    return list(seen.values())


def take_due(
    pending: Sequence[Picked],
    now_us: int,
    size_us: int,
    *,
    drain: bool = False,
) -> tuple[MicroBatch | None, list[Picked]]:
    """Split ``pending`` into the micro-batch of all due windows and the rest.

    A window is due when ``now_us >= window end``; with ``drain`` every window is.
    Items keep their pick-up order (then path order) inside the batch; a file hash
    met twice is kept once. Returns ``(None, pending)`` when nothing is due.
    """
    due: list[Picked] = []
    rest: list[Picked] = []
    for picked in pending:
        end = window_start(picked.picked_at_us, size_us) + size_us
        (due if drain or end <= now_us else rest).append(picked)
    if not due:
        return None, list(pending)
    due.sort(key=lambda p: (p.picked_at_us, p.item.rel_path))
    starts = {window_start(p.picked_at_us, size_us) for p in due}
    batch = MicroBatch(
        window_start_us=min(starts),
        window_end_us=max(starts) + size_us,
        items=tuple(unique_by_hash(p.item for p in due)),
        windows=len(starts),
    )
    return batch, rest


def assign_windows(
    pending: Iterable[Picked], size_us: int
) -> dict[int, list[LandingItem]]:
    """Items per window start, in pick-up order: the grouping Beam's
    ``FixedWindows`` + ``GroupByKey`` would produce (used to check both agree)."""
    grouped: dict[int, list[LandingItem]] = {}
    for picked in sorted(pending, key=lambda p: (p.picked_at_us, p.item.rel_path)):
        start = window_start(picked.picked_at_us, size_us)
        grouped.setdefault(start, []).append(picked.item)
    return grouped
