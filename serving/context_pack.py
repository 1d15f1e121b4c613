"""The selection step of ``pack``, as a pure function over candidates.

``pack_context(candidates, tenant_id, window, max_output, overhead)`` is the
design's context-packing example made literal: given scored candidates it
decides which go into a model's window and why the others do not. No
warehouse, no DuckDB, no model: a context builder (or a test) that already
holds its candidates calls it directly, and the warehouse path
(``serving.evidence_pack.pack_context``) runs its own candidates, with text
redundancy and joined neighbours, through the same ``greedy_select`` loop.

Rules, in order:

* the budget for retrieved items is ``window - max_output - overhead``; a
  negative budget is an error (``PackError``);
* an item of another tenant is never a candidate: it is not selected and not
  listed either (its text must not reach a manifest), only counted
  (``PackResult.withheld``);
* a superseded version is never selected, even when it is the only candidate
  and the budget has room: it is listed as dropped with reason ``superseded``
  (a reader learns an older text exists and why it is not in);
* mandatory items go in first (``PackError`` when they do not fit, are
  unknown, or are superseded);
* an item whose relevance is below ``min_relevance`` is dropped
  (``low_relevance``); an ``untrusted`` one below ``untrusted_min_relevance``
  too (``untrusted_low_relevance``): text of low trust or high injection risk
  goes in for what it says about the query, never as filler;
* then, greedily, the remaining item of highest utility (ties: lowest
  ``item_id``, so the result does not depend on the input order): an exact
  duplicate of a selected item's content is dropped (``duplicate``), a
  near-duplicate (the scorer's verdict) too (``near_duplicate``); an item whose
  utility is not positive is dropped (``non_positive_utility``) with every item
  after it (utilities only fall as items are selected); an item that does not
  fit the remaining budget is dropped (``over_budget``) and the next one tried.

Utility here is ``relevance x authority x freshness``; ``authority`` defaults
by trust (``TRUST_AUTHORITY``, the policy's defaults). The warehouse path
passes a scorer that also subtracts redundancy against what is selected.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

import numpy as np

#: Authority by trust when a candidate states none (``evidence.pack`` defaults).
TRUST_AUTHORITY = {"trusted": 1.0, "untrusted": 0.6}


class PackError(ValueError):
    """The request cannot be packed (mandatory items do not fit or are unknown,
    or the window is smaller than the output and overhead it must hold)."""


@dataclass(frozen=True)
class ContextCandidate:
    """An item that may go into the window, with what ``pack`` weighs.

    The fields of the design's ``ContextItem`` plus what selection reads:
    ``tenant`` (scope), ``freshness`` and ``relevance`` (0..1),
    ``superseded`` (a newer version exists) and, optionally, ``authority``
    (default by ``trust``) and ``content_key`` (equal keys are exact
    duplicates; default: the item id, so no two items are).
    """

    item_id: str
    kind: str
    source: str
    trust: str
    retrieved_at: datetime | None
    version: str
    token_count: int
    tenant: str
    freshness: float = 1.0
    superseded: bool = False
    relevance: float = 1.0
    authority: float | None = None
    content_key: str | None = None

    @property
    def value(self) -> float:
        """``relevance x authority x freshness``."""
        authority = (
            self.authority
            if self.authority is not None
            else TRUST_AUTHORITY.get(self.trust, 0.0)
        )
        return self.relevance * authority * self.freshness


@dataclass(frozen=True)
class Dropped:
    """A candidate that was not selected, and why."""

    item: ContextCandidate
    reason: str


@dataclass(frozen=True)
class PackResult:
    """What ``pack_context`` selected (in selection order) and dropped."""

    tenant_id: str
    window: int
    max_output: int
    overhead: int
    budget: int
    used: int
    selected: list[ContextCandidate] = field(default_factory=list)
    dropped: list[Dropped] = field(default_factory=list)
    #: Candidates of other tenants: never selected, never listed.
    withheld: int = 0

    @property
    def reasons(self) -> dict[str, str]:
        """``item_id -> reason`` of every dropped item."""
        return {d.item.item_id: d.reason for d in self.dropped}


def budget_tokens(window: int, max_output: int, overhead: int) -> int:
    """Tokens left for retrieved items (``PackError`` when negative)."""
    budget = window - max_output - overhead
    if budget < 0:
        raise PackError("window_tokens is smaller than max output plus overhead")
    return budget


class Scorer(Protocol):
    """Utilities of every candidate given what is selected so far."""

    def utilities(self) -> tuple[np.ndarray, np.ndarray]:
        """``(utility, near_duplicate)`` of every candidate, as arrays."""
        ...

    def add(self, i: int) -> None:
        """Candidate ``i`` was selected."""
        ...


class LazyScorer(Scorer, Protocol):
    """A ``Scorer`` whose utilities never rise as items are selected
    (``monotone``) and that can say one candidate's current utility:
    ``greedy_select`` then keeps a heap of possibly stale utilities and
    re-scores only the candidates it looks at (lazy greedy), instead of
    re-scoring and re-ranking every candidate after each selection."""

    #: No utility rises after a selection (checked by the scorer itself).
    monotone: bool

    def utility_of(self, i: int) -> tuple[float, bool]:
        """``(utility, near_duplicate)`` of candidate ``i`` now: exactly
        ``utilities()``'s values at ``i``."""
        ...


class StaticScorer:
    """Fixed utilities (rounded like the manifest), no near-duplicates."""

    def __init__(self, values: Sequence[float]):
        self.values = np.round(np.asarray(values, dtype=float), 6)
        self.near = np.zeros(len(self.values), dtype=bool)

    def utilities(self) -> tuple[np.ndarray, np.ndarray]:
        return self.values, self.near

    def add(self, i: int) -> None:
        return None


class _Selectable(Protocol):
    item_id: str
    token_count: int
    relevance: float
    content_key: Any


def _key(c: _Selectable) -> str:
    return c.content_key or c.item_id


def greedy_select(
    candidates: Sequence[_Selectable],
    budget: int,
    scorer: Scorer,
    *,
    mandatory: Sequence[int] = (),
    min_relevance: float = 0.0,
    floors: np.ndarray | Sequence[float] | None = None,
    cost: Callable[[int], int] | None = None,
    on_select: Callable[[int, bool], None] | None = None,
    on_drop: Callable[[int, str], None] | None = None,
    budget_detail: str = "",
) -> tuple[list[tuple[int, bool]], list[tuple[int, str]], int]:
    """The selection loop (module docstring) over candidate indices.

    ``floors``: per candidate, a relevance below which it is dropped
    (``untrusted_low_relevance``) though it passes ``min_relevance``: an
    untrusted or injection-prone item is never filler.
    ``cost(i)``: tokens candidate ``i`` would add now (default its
    ``token_count``; the warehouse adds the joins with selected neighbours).
    ``on_select`` / ``on_drop`` are called at the moment of each decision,
    before the scorer moves on, so a caller can record scores as they were.
    Returns ``([(index, mandatory)], [(index, reason)], used tokens)``.
    """
    cost = cost or (lambda i: candidates[i].token_count)
    picked: list[tuple[int, bool]] = []
    dropped: list[tuple[int, str]] = []
    chosen_keys: set[str] = set()
    keys = [_key(c) for c in candidates]
    used = 0

    def select(i: int, forced: bool, spent: int | None = None) -> None:
        # ``spent``: ``cost(i)`` as the caller just computed it (the cost of
        # joined neighbours is the same until this selection)
        nonlocal used
        used += cost(i) if spent is None else spent
        if on_select is not None:
            on_select(i, forced)
        chosen_keys.add(keys[i])
        scorer.add(i)
        picked.append((i, forced))

    def drop(i: int, reason: str) -> None:
        if on_drop is not None:
            on_drop(i, reason)
        dropped.append((i, reason))

    def redundant(i: int, near: bool) -> str | None:
        """Why candidate ``i`` adds nothing new (``near``: the scorer calls it
        a near duplicate of what is selected), or None."""
        if keys[i] in chosen_keys:
            return "duplicate"
        return "near_duplicate" if near else None

    mandatory = list(dict.fromkeys(mandatory))
    need = sum(candidates[i].token_count for i in mandatory)
    if need > budget:
        raise PackError(
            f"mandatory items need {need} tokens but the budget is {budget}"
            + budget_detail
        )
    for i in mandatory:
        select(i, True)
    n = len(candidates)
    id_rank = np.argsort(np.argsort([c.item_id for c in candidates]))
    remaining = np.ones(n, dtype=bool)
    remaining[mandatory] = False
    # below ``min_relevance``, or below an untrusted item's own floor: one
    # array pass over the relevances, a call only per dropped candidate
    relevance = np.fromiter((c.relevance for c in candidates), float, n)
    low = relevance < min_relevance
    guarded = ~low
    if floors is not None:
        guarded &= relevance < np.asarray(floors, dtype=float)
    else:
        guarded[:] = False
    for i in np.flatnonzero(remaining & (low | guarded)).tolist():
        drop(i, "low_relevance" if low[i] else "untrusted_low_relevance")
        remaining[i] = False
    utility_of = getattr(scorer, "utility_of", None)
    if utility_of is not None and getattr(scorer, "monotone", False):
        used = _lazy_rounds(
            scorer, utility_of, remaining, id_rank,
            budget, used, cost, select, drop, redundant,
        )  # fmt: skip
        return picked, dropped, used
    # Utilities depend only on what is selected (``Scorer``), so the order of
    # the remaining candidates is computed once per selection, not per
    # decision: a drop leaves every utility as it was, and the next best is
    # the next one in that order. Same decisions as re-sorting every step.
    while len(rows := remaining.nonzero()[0]):
        utility, near = scorer.utilities()
        ranked = _ranked(rows, utility, id_rank)
        for at, best in enumerate(ranked):
            remaining[best] = False
            why = redundant(best, near[best])
            if why is not None:
                drop(best, why)
                continue
            if utility[best] <= 0:
                drop(best, "non_positive_utility")
                # utilities only fall from here: the rest, in this order
                for i in ranked[at + 1 :]:
                    drop(i, redundant(i, near[i]) or "non_positive_utility")
                remaining[ranked[at + 1 :]] = False
                break
            spent = cost(best)
            if used + spent > budget:
                drop(best, "over_budget")
                continue
            select(best, False, spent)
            break  # the scorer moved on: rank what remains again
    return picked, dropped, used


def _ranked(rows: np.ndarray, utility: np.ndarray, id_rank: np.ndarray) -> list[int]:
    """``rows`` best first: highest utility, ties by item id (``id_rank``)."""
    return rows[np.lexsort((id_rank[rows], -utility[rows]))].tolist()


def _lazy_rounds(
    scorer: Scorer,
    utility_of: Callable[[int], tuple[float, bool]],
    remaining: np.ndarray,
    id_rank: np.ndarray,
    budget: int,
    used: int,
    cost: Callable[[int], int],
    select: Callable[[int, bool, int | None], None],
    drop: Callable[[int, str], None],
    redundant: Callable[[int, bool], str | None],
) -> int:
    """``greedy_select``'s rounds for a ``LazyScorer``; returns the tokens used.

    The best remaining candidate is the one with the highest utility now,
    ties by item id (``id_rank``, distinct). The heap holds each candidate's
    utility as last seen, which is never below its utility now (utilities
    only fall): when the top's utility is unchanged, no other candidate can
    beat it now, so it is the best; otherwise it goes back with its new
    value. The decisions, their order and the callbacks are those of the
    ranked rounds (``tests/unit/evidence/test_greedy_select_equivalence.py``):
    ~50 selections of ~160 candidates re-scored a handful of candidates
    each instead of all of them, with a sort, about 25 array calls each."""
    utility, _ = scorer.utilities()
    rows = remaining.nonzero()[0]
    heap = list(
        zip(
            (-utility[rows]).tolist(),
            id_rank[rows].tolist(),
            rows.tolist(),
            strict=True,
        )
    )
    heapq.heapify(heap)
    while heap:
        stale, rank, best = heap[0]
        value, near = utility_of(best)
        if value != -stale:
            heapq.heapreplace(heap, (-value, rank, best))
            continue
        heapq.heappop(heap)
        remaining[best] = False
        why = redundant(best, near)
        if why is not None:
            drop(best, why)
            continue
        if value <= 0:
            drop(best, "non_positive_utility")
            # utilities only fall from here: the rest, in the order of now
            rest = remaining.nonzero()[0]
            utility, near_now = scorer.utilities()
            for i in _ranked(rest, utility, id_rank):
                drop(i, redundant(i, near_now[i]) or "non_positive_utility")
            remaining[rest] = False
            break
        spent = cost(best)
        if used + spent > budget:
            drop(best, "over_budget")
            continue
        select(best, False, spent)
        used += spent  # ``select`` adds it to the caller's count
    return used


def pack_context(
    candidates: Sequence[ContextCandidate],
    tenant_id: str,
    window: int,
    max_output: int,
    overhead: int,
    *,
    mandatory: Sequence[str] = (),
    min_relevance: float = 0.0,
    untrusted_min_relevance: float = 0.0,
) -> PackResult:
    """Select the candidates that go into the window (module docstring).

    ``mandatory``: item ids that must be selected (``PackError`` when one is
    unknown, of another tenant, superseded, or they do not fit together).
    """
    budget = budget_tokens(window, max_output, overhead)
    in_scope = [c for c in candidates if c.tenant == tenant_id]
    withheld = len(candidates) - len(in_scope)
    superseded = [c for c in in_scope if c.superseded]
    live = [c for c in in_scope if not c.superseded]
    positions = {c.item_id: i for i, c in enumerate(live)}
    old = {c.item_id for c in superseded}
    forced: list[int] = []
    for item_id in mandatory:
        if item_id in old:
            raise PackError(f"mandatory item {item_id} is superseded")
        if item_id not in positions:
            # another tenant's id reads exactly like an unknown one
            raise PackError(f"mandatory items not found in scope: {item_id}")
        forced.append(positions[item_id])
    picked, drops, used = greedy_select(
        live,
        budget,
        StaticScorer([c.value for c in live]),
        mandatory=forced,
        min_relevance=min_relevance,
        floors=[
            untrusted_min_relevance if c.trust == "untrusted" else 0.0 for c in live
        ],
        budget_detail=(
            f" (window {window} - output {max_output} - overhead {overhead})"
        ),
    )
    return PackResult(
        tenant_id=tenant_id,
        window=window,
        max_output=max_output,
        overhead=overhead,
        budget=budget,
        used=used,
        selected=[live[i] for i, _ in picked],
        dropped=[Dropped(c, "superseded") for c in superseded]
        + [Dropped(live[i], reason) for i, reason in drops],
        withheld=withheld,
    )


__all__ = [
    "TRUST_AUTHORITY",
    "ContextCandidate",
    "Dropped",
    "LazyScorer",
    "PackError",
    "PackResult",
    "Scorer",
    "StaticScorer",
    "budget_tokens",
    "greedy_select",
    "pack_context",
]
