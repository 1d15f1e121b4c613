"""``greedy_select`` ranks the remaining candidates once per selection instead
of once per decision (a drop changes no utility). This property test runs it
against the previous loop, which re-scored and re-sorted after every decision,
kept here verbatim as the reference: same selections, drops, reasons, order of
decisions and used tokens, for random candidates, redundancy scorers (a
selection lowers the utilities of candidates sharing its group, or marks them
near-duplicates), duplicate content keys, mandatory items, a relevance floor
and a cost that grows with selected neighbours (like the warehouse's joins).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxledger.serving.context_pack import PackError, greedy_select


@dataclass(frozen=True)
class _C:
    item_id: str
    token_count: int
    relevance: float
    content_key: str | None
    group: int


class _GroupScorer:
    """Utility = base minus ``penalty`` per selected item of the same group;
    ``near`` once a group has ``near_after`` selections. Counts its calls."""

    def __init__(self, base, groups, penalty, near_after):
        self.base = np.round(np.asarray(base, dtype=float), 6)
        self.groups = np.asarray(groups)
        self.penalty = penalty
        self.near_after = near_after
        self.taken = np.zeros(len(self.base))
        self.calls = 0

    def utilities(self):
        self.calls += 1
        counts = np.array([self.taken[self.groups == g].sum() for g in self.groups])
        near = counts >= self.near_after if self.near_after else counts < 0
        return np.round(self.base - self.penalty * counts, 6), near

    def add(self, i):
        self.taken[i] = 1


class _LazyGroupScorer(_GroupScorer):
    """The same utilities, offered one candidate at a time (``LazyScorer``):
    ``greedy_select`` then takes its lazy path (a heap of stale utilities)."""

    monotone = True  # penalties are >= 0 and counts only grow

    def utility_of(self, i):
        utility, near = _GroupScorer.utilities(self)
        self.calls -= 1  # counted as a ranking by ``utilities``
        return float(utility[i]), bool(near[i])


def _reference(candidates, budget, scorer, *, mandatory, min_relevance, cost,
               on_select, on_drop):  # fmt: skip
    """The selection loop before the cached order (re-sorts every decision)."""
    picked, dropped, chosen_keys, used = [], [], set(), 0

    def key(c):
        return c.content_key or c.item_id

    def select(i, forced):
        nonlocal used
        used += cost(i)
        on_select(i, forced)
        chosen_keys.add(key(candidates[i]))
        scorer.add(i)
        picked.append((i, forced))

    def drop(i, reason):
        on_drop(i, reason)
        dropped.append((i, reason))

    def redundant(i, near):
        if key(candidates[i]) in chosen_keys:
            return "duplicate"
        return "near_duplicate" if near[i] else None

    mandatory = list(dict.fromkeys(mandatory))
    if sum(candidates[i].token_count for i in mandatory) > budget:
        raise PackError("mandatory")
    for i in mandatory:
        select(i, True)
    n = len(candidates)
    id_rank = np.argsort(np.argsort([c.item_id for c in candidates]))
    remaining = np.ones(n, dtype=bool)
    remaining[mandatory] = False
    for i in np.flatnonzero(remaining):
        if candidates[i].relevance < min_relevance:
            drop(int(i), "low_relevance")
            remaining[i] = False
    while remaining.any():
        utility, near = scorer.utilities()
        rows = np.flatnonzero(remaining)
        best = int(rows[np.lexsort((id_rank[rows], -utility[rows]))[0]])
        remaining[best] = False
        why = redundant(best, near)
        if why is not None:
            drop(best, why)
            continue
        if utility[best] <= 0:
            drop(best, "non_positive_utility")
            rest = np.flatnonzero(remaining)
            for i in rest[np.lexsort((id_rank[rest], -utility[rest]))]:
                drop(int(i), redundant(int(i), near) or "non_positive_utility")
            break
        if used + cost(best) > budget:
            drop(best, "over_budget")
            continue
        select(best, False)
    return picked, dropped, used


_case = st.integers(1, 25).flatmap(
    lambda n: st.tuples(
        st.lists(st.integers(0, 12), min_size=n, max_size=n),  # item ids (ties)
        st.lists(st.integers(1, 400), min_size=n, max_size=n),  # tokens
        st.lists(
            st.sampled_from([0.0, 0.1, 0.3, 0.5, 0.9, 1.0]), min_size=n, max_size=n
        ),
        st.lists(st.integers(0, 4), min_size=n, max_size=n),  # groups
        st.lists(st.one_of(st.none(), st.sampled_from("abc")), min_size=n, max_size=n),
        st.lists(
            st.sampled_from([-0.2, 0.0, 0.2, 0.45, 0.5, 0.8]), min_size=n, max_size=n
        ),
        st.lists(st.integers(0, n - 1), max_size=3),  # mandatory
    )
)


@settings(max_examples=300, deadline=None)
@given(
    case=_case,
    budget=st.integers(0, 2500),
    penalty=st.sampled_from([0.0, 0.1, 0.3, 1.0]),
    near_after=st.sampled_from([0, 1, 2]),
    min_relevance=st.sampled_from([0.0, 0.2, 0.6]),
    join=st.sampled_from([0, 1, 7]),
    lazy=st.booleans(),
)
def test_cached_order_decides_like_the_reference_loop(
    case, budget, penalty, near_after, min_relevance, join, lazy
):
    """The ranked rounds, and with a ``LazyScorer`` the lazy heap, decide
    like the reference: selections, drops and reasons, their order, the
    scorer's state at each callback, the tokens used."""
    ids, tokens, relevance, groups, keys, base, mandatory = case
    candidates = [
        _C(f"i{ids[k]:02d}-{k % 3}", tokens[k], relevance[k], keys[k], groups[k])
        for k in range(len(ids))
    ]
    outcomes = []
    for loop in (greedy_select, _reference):
        kind = _LazyGroupScorer if lazy and loop is greedy_select else _GroupScorer
        scorer = kind(base, groups, penalty, near_after)
        events: list[tuple] = []
        chosen: set[int] = set()

        def cost(i, chosen=chosen):
            # a join with a selected neighbour (i - 1 or i + 1) adds tokens
            return tokens[i] + join * len({i - 1, i + 1} & chosen)

        def on_select(i, forced, events=events, chosen=chosen, scorer=scorer):
            events.append(("select", i, forced, tuple(scorer.taken)))
            chosen.add(i)

        def on_drop(i, reason, events=events, scorer=scorer):
            events.append(("drop", i, reason, tuple(scorer.taken)))

        try:
            result = loop(
                candidates,
                budget,
                scorer,
                mandatory=mandatory,
                min_relevance=min_relevance,
                cost=cost,
                on_select=on_select,
                on_drop=on_drop,
            )
        except PackError:
            result = "PackError"
        outcomes.append((result, events))
    assert outcomes[0] == outcomes[1]


def test_utilities_are_computed_once_per_selection_not_per_drop():
    """30 candidates of which 29 do not fit: one ranking, not 30."""
    candidates = [_C(f"i{k:02d}", 500 if k else 10, 1.0, None, k) for k in range(30)]
    scorer = _GroupScorer(np.linspace(1.0, 0.5, 30), range(30), 0.0, 0)
    picked, dropped, used = greedy_select(candidates, 100, scorer)
    assert [i for i, _ in picked] == [0]
    assert {r for _, r in dropped} == {"over_budget"} and len(dropped) == 29
    assert used == 10
    # one ranking before the selection, one for the 29 left after it
    assert scorer.calls == 2


@settings(max_examples=100, deadline=None)
@given(
    texts=st.lists(
        st.lists(st.sampled_from("abcdefgh"), min_size=0, max_size=14).map(" ".join),
        min_size=1,
        max_size=12,
    ),
    picks=st.lists(st.integers(0, 11), max_size=6),
)
def test_redundancy_state_tracks_shingle_overlap_with_the_selected(texts, picks):
    """``_Greedy`` keeps each candidate's shared shingles in sorted arrays
    (not a dict of posting lists): after any selections, its overlap is
    ``overlap(candidate, selected shingles)`` computed from scratch."""
    from ctxledger.schemas.policy import load_policy
    from ctxledger.serving.evidence_pack import Candidate, _Greedy, overlap, shingles

    settings_ = load_policy(None).evidence.pack
    candidates = [
        Candidate(
            item_id=f"c{k}",
            kind="evidence",
            source="s",
            trust="trusted",
            version="1",
            text=t,
            token_count=1,
            vector=np.ones(3, np.float32),
            authority=1.0,
            effective_from=None,
            content_key=f"c{k}",
            shingles=shingles(t, 3),
        )  # fmt: skip
        for k, t in enumerate(texts)
    ]
    state = _Greedy(candidates, settings_)
    seen: set[int] = set()
    for pick in (p for p in picks if p < len(candidates)):
        state.add(pick)
        seen |= candidates[pick].shingles
        expected = [overlap(c.shingles, seen) for c in candidates]
        got = [
            state.shared[j] / state.sizes[j] if c.shingles else 0.0
            for j, c in enumerate(candidates)
        ]
        assert got == pytest.approx(expected)
