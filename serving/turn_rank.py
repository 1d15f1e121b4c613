"""Ranking conversation turns: stemmed BM25 and MiniLM cosine, fused by score.

A context builder asks "what did this user say before that matters now?". The
answer is a handful of turns out of thousands, and two signals find them:

* **words** (BM25 over ``evidence_terms``-style stems) find the turn that names
  the thing asked about ("When did Caroline go to the support group?");
* **meaning** (cosine of unit vectors) finds the turn that says it in other
  words. A turn is short and often only makes sense with the one before it
  ("Wow, what did you paint?" / "A sunrise over the lake"), so each turn also
  has a *context vector* of the previous turn and itself.

Two facts measured on LoCoMo (``eval/locomo_recall.py``, docs/conversation_recall.md)
shape the fusion:

1. reciprocal-rank fusion of BM25 and cosine lost to BM25 alone (turn recall@10
   0.59 against 0.62 on the two dev conversations): a rank throws away how far
   ahead the lexical winner is. Max-normalised BM25 plus cosine kept it and won;
2. the evidence for a question sits in one session, often across neighbouring
   turns, so a turn also scores a little for the words of its neighbours (and,
   optionally, of its whole session).

The module is pure (numpy in, numpy out): the serving index and the eval call
it with their own tokenizer and embedder, so both rank exactly alike.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class TurnWeights:
    """The fusion's weights (``score = bm25/max + w_vec*cos + w_ctx*cos_ctx +
    w_nb*bm25_neighbours/max + w_session*bm25_session/max``).

    Defaults: the best turn recall@10 + session recall@5 of a 54-point grid
    (vector 0.25-1, context 0-1, neighbours 0-0.6, session 0-0.3) on LoCoMo
    ``conv-26`` only; ``conv-30`` was measured, never tuned on
    (docs/conversation_recall.md). The session term is kept for callers that
    rank sessions first; on ``conv-26`` it did not pay."""

    vector: float = 1.0
    context: float = 1.0
    neighbours: float = 0.3
    session: float = 0.0
    k1: float = 1.2
    b: float = 0.75


class _Postings:
    """BM25 over term lists: per term, the rows it occurs in and how often."""

    def __init__(self, docs: Sequence[Sequence[str]]):
        self.n = len(docs)
        self.lengths = np.array([len(d) for d in docs], dtype=np.float64)
        self.avg = float(self.lengths.mean()) if self.n and self.lengths.sum() else 1.0
        index: dict[str, dict[int, int]] = {}
        for row, terms in enumerate(docs):
            for term in terms:
                rows = index.setdefault(term, {})
                rows[row] = rows.get(row, 0) + 1
        self.postings = {
            term: (
                np.fromiter(rows.keys(), dtype=np.int64, count=len(rows)),
                np.fromiter(rows.values(), dtype=np.float64, count=len(rows)),
            )
            for term, rows in index.items()
        }

    def scores(self, query: Sequence[str], k1: float, b: float) -> np.ndarray:
        out = np.zeros(self.n, dtype=np.float64)
        if not self.n:
            return out
        norm = k1 * (1.0 - b + b * self.lengths / self.avg)
        for term in dict.fromkeys(query):
            hit = self.postings.get(term)
            if hit is None:
                continue
            rows, tf = hit
            df = len(rows)
            idf = math.log(1.0 + (self.n - df + 0.5) / (df + 0.5))
            out[rows] += idf * tf * (k1 + 1.0) / (tf + norm[rows])
        return out


def _by_max(values: np.ndarray) -> np.ndarray:
    top = float(values.max()) if len(values) else 0.0
    return values / top if top > 0 else values


@dataclass(frozen=True)
class RankedTurn:
    """One ranked turn: its row and the parts of its score."""

    row: int
    score: float
    bm25: float
    cosine: float | None


class TurnRanker:
    """Ranks the turns of one scope (already filtered: a tenant's subject).

    ``terms``: each turn's stems; ``groups``: each turn's session (neighbours
    and session words never cross a session); ``vectors``/``context_vectors``:
    unit float32 rows (None: words only)."""

    def __init__(
        self,
        terms: Sequence[Sequence[str]],
        groups: Sequence[str],
        vectors: np.ndarray | None = None,
        context_vectors: np.ndarray | None = None,
        weights: TurnWeights | None = None,
    ):
        if len(groups) != len(terms):
            raise ValueError("one group per turn expected")
        self.weights = weights or TurnWeights()
        self.n = len(terms)
        self.vectors = vectors
        self.context_vectors = context_vectors
        self.turns = _Postings(terms)
        neighbours = []
        for row in range(self.n):
            around: list[str] = []
            for other in (row - 1, row + 1):
                if 0 <= other < self.n and groups[other] == groups[row]:
                    around.extend(terms[other])
            neighbours.append(around)
        self.neighbours = _Postings(neighbours)
        session_ids = list(dict.fromkeys(groups))
        code = {g: i for i, g in enumerate(session_ids)}
        self.session_of = np.array([code[g] for g in groups], dtype=np.int64)
        words: list[list[str]] = [[] for _ in session_ids]
        for row, terms_of_row in enumerate(terms):
            words[self.session_of[row]].extend(terms_of_row)
        self.sessions = _Postings(words)

    def scores(
        self, query_terms: Sequence[str], query_vector: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """Fused score, BM25 and cosine (None without vectors) per turn."""
        w = self.weights
        bm25 = self.turns.scores(query_terms, w.k1, w.b)
        fused = _by_max(bm25)
        if w.neighbours:
            fused = fused + w.neighbours * _by_max(
                self.neighbours.scores(query_terms, w.k1, w.b)
            )
        if w.session:
            per_session = _by_max(self.sessions.scores(query_terms, w.k1, w.b))
            fused = fused + w.session * per_session[self.session_of]
        cosine = None
        if query_vector is not None and self.vectors is not None:
            cosine = self.vectors @ query_vector
            fused = fused + w.vector * cosine
            if self.context_vectors is not None and w.context:
                fused = fused + w.context * (self.context_vectors @ query_vector)
        return fused, bm25, cosine

    def rank(
        self,
        query_terms: Sequence[str],
        query_vector: np.ndarray | None = None,
        k: int = 10,
    ) -> list[RankedTurn]:
        """The ``k`` best turns, best first; ties go to the earlier turn."""
        fused, bm25, cosine = self.scores(query_terms, query_vector)
        order = np.lexsort((np.arange(self.n), -np.round(fused, 9)))[:k]
        return [
            RankedTurn(
                row=int(row),
                score=float(fused[row]),
                bm25=float(bm25[row]),
                cosine=None if cosine is None else float(cosine[row]),
            )
            for row in order
        ]


def rank_bm25(ranker: TurnRanker, query_terms: Sequence[str], k: int) -> list[int]:
    """The BM25 baseline on the same turns: plain turn BM25, nothing fused."""
    w = ranker.weights
    scores = ranker.turns.scores(query_terms, w.k1, w.b)
    return [int(r) for r in np.lexsort((np.arange(ranker.n), -scores))[:k]]


def rank_cosine(ranker: TurnRanker, query_vector: np.ndarray, k: int) -> list[int]:
    """The MiniLM baseline on the same turns: plain cosine of each turn."""
    if ranker.vectors is None:
        raise ValueError("the ranker holds no vectors")
    scores = ranker.vectors @ query_vector
    return [int(r) for r in np.lexsort((np.arange(ranker.n), -scores))[:k]]
