"""How the landing files of a run are split between local Beam workers.

Why: the DirectRunner's ``multi_processing`` mode hands the keys of a grouped
input to its workers round-robin, and runs one stage at a time. With random
keys (``beam.Reshuffle``) one worker often got 60-70% of the bytes of
corpora section A (its largest file alone is 16%) and the other one waited
for it at the end of the parse + redact stage, the longest stage that reads
files. ``spread_files`` instead packs the files into one group per local
worker, largest first onto the least loaded group (bytes are what parsing and
redaction cost), so both finish together. With one local worker (in-memory
runs, remote runners whose workers are other machines) every file keeps its
own key, which a remote runner spreads by hash as it did ``Reshuffle``'s.

Only the order and the grouping of the work change: every file is still
parsed exactly once, and every id and row is the same.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence

from ctxledger.pipelines.ingest.landing import LandingItem


def spread_files(
    items: Sequence[LandingItem], workers: int
) -> list[tuple[str, LandingItem]]:
    """``(key, item)`` for every item: ``workers`` keys balanced by bytes when
    ``workers > 1``, else one key per file (its landing id). Deterministic:
    ties are broken by landing id and group index."""
    if workers <= 1:
        return [(item.landing_id, item) for item in items]
    ordered = sorted(items, key=lambda i: (-i.size_bytes, i.landing_id))
    groups = [(0, index) for index in range(min(workers, len(ordered)))]
    out: list[tuple[str, LandingItem]] = []
    for item in ordered:
        load, index = heapq.heappop(groups)
        out.append((f"worker-{index}", item))
        heapq.heappush(groups, (load + max(item.size_bytes, 1), index))
    return out
