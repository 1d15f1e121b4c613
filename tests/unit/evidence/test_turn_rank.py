"""``serving.turn_rank``: BM25 + cosine fusion over conversation turns."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxledger.serving.turn_rank import (
    TurnRanker,
    TurnWeights,
    rank_bm25,
    rank_cosine,
)

TERMS = [
    ["hello", "how", "are", "you"],
    ["paint", "sunris", "lake"],
    ["kid", "swim", "lesson"],
    ["what", "paint"],
    ["support", "group", "lgbtq"],
]
GROUPS = ["D1", "D1", "D1", "D2", "D2"]


def unit(rows: list[list[float]]) -> np.ndarray:
    vectors = np.asarray(rows, dtype=np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def test_bm25_finds_the_turn_that_names_the_words():
    ranker = TurnRanker(TERMS, GROUPS, weights=TurnWeights(neighbours=0, session=0))
    assert [r.row for r in ranker.rank(["support", "group"], k=1)] == [4]
    assert rank_bm25(ranker, ["sunris"], 1) == [1]


def test_words_of_neighbours_lift_a_turn_but_never_across_sessions():
    # "what paint" (row 3, session D2) has no neighbour in D1: row 2 (D1) is
    # lifted by row 1's "paint" words, row 3 only by its own.
    plain = TurnRanker(TERMS, GROUPS, weights=TurnWeights(neighbours=0, session=0))
    lifted = TurnRanker(TERMS, GROUPS, weights=TurnWeights(neighbours=0.5, session=0))
    base = plain.scores(["lake"])[0]
    more = lifted.scores(["lake"])[0]
    assert base[0] == 0 and more[0] > 0  # row 0 sits next to row 1
    assert more[3] == base[3] == 0  # row 3 is in another session


def test_cosine_finds_a_turn_with_no_shared_word():
    vectors = unit([[1, 0, 0], [0, 1, 0], [0, 0, 1], [1, 1, 0], [0, 1, 1]])
    ranker = TurnRanker(TERMS, GROUPS, vectors=vectors)
    query = unit([[0, 0, 1]])[0]
    assert rank_cosine(ranker, query, 1) == [2]
    top = ranker.rank(["nothing", "shared"], query, k=1)[0]
    assert top.row == 2 and top.bm25 == 0 and top.cosine > 0.99


def test_a_lexical_winner_keeps_its_lead_over_close_cosines():
    # Rank fusion would put row 1 (best cosine, second BM25) first; the score
    # fusion keeps the turn that names the thing asked about.
    vectors = unit([[1, 0], [1, 0.05], [0, 1], [0, 1], [1, 0.1]])
    query = unit([[1, 0.02]])[0]
    ranker = TurnRanker(
        TERMS, GROUPS, vectors=vectors, weights=TurnWeights(neighbours=0, session=0)
    )
    assert ranker.rank(["lgbtq", "support"], query, k=1)[0].row == 4


@settings(max_examples=50, deadline=None)
@given(
    st.lists(st.lists(st.sampled_from("abcdefg"), max_size=6), min_size=1, max_size=12),
    st.lists(st.sampled_from("abcdefgh"), max_size=4),
    st.integers(min_value=1, max_value=15),
)
def test_rank_is_a_deterministic_prefix_of_all_rows(terms, query, k):
    groups = [f"D{i // 3}" for i in range(len(terms))]
    ranker = TurnRanker(terms, groups)
    first = [r.row for r in ranker.rank(query, k=k)]
    assert first == [r.row for r in ranker.rank(query, k=k)]
    assert len(first) == min(k, len(terms)) == len(set(first))
    everything = [r.row for r in ranker.rank(query, k=len(terms))]
    assert everything[: len(first)] == first
    scores = [r.score for r in ranker.rank(query, k=len(terms))]
    assert scores == sorted(scores, reverse=True)


def test_groups_must_match_turns():
    try:
        TurnRanker(TERMS, GROUPS[:2])
    except ValueError as exc:
        assert "one group per turn" in str(exc)
    else:
        raise AssertionError("expected ValueError")
