"""MiniLM batches formed by word-piece budget (``pipelines.models.token_batches``).

Fixed-count batches pad every text to the longest of its batch: on the tool
artifacts of corpora section A that was 46% of the word pieces MiniLM read
(issue 14). Batches are now one length class each, bounded by a budget of
padded word pieces. The grouping must only change the cost: every text comes
back, in input order, with the vector it gets alone.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxledger.pipelines.models import (
    TOKEN_BUDGET,
    encode_by_token_budget,
    token_batches,
    word_piece_lengths,
)


@given(
    st.lists(st.integers(min_value=1, max_value=300), max_size=80),
    st.integers(min_value=1, max_value=2048),
    st.integers(min_value=0, max_value=70),
)
def test_token_batches_partition_within_budget(lengths, budget, max_count):
    groups = token_batches(lengths, budget, max_count)
    flat = [i for g in groups for i in g]
    assert sorted(flat) == list(range(len(lengths)))  # each index once
    assert all(groups)
    for group in groups:
        padded = len(group) * max(lengths[i] for i in group)
        assert len(group) == 1 or padded <= budget
        assert not max_count or len(group) <= max_count
    # longest first: a group's texts are never shorter than the next group's
    for first, second in zip(groups, groups[1:], strict=False):
        assert min(lengths[i] for i in first) >= max(lengths[i] for i in second)


def test_token_batches_pad_less_than_fixed_batches():
    """Mixed lengths: the padded size of the budget's batches is near the real
    size, where one fixed batch pads everything to the longest text."""
    lengths = [256, 12, 200, 30, 9, 256, 64, 15, 128, 20] * 4
    groups = token_batches(lengths, TOKEN_BUDGET, 64)
    padded = sum(len(g) * max(lengths[i] for i in g) for g in groups)
    assert padded < 1.2 * sum(lengths) < len(lengths) * max(lengths)


class _Model:
    """Word pieces = words + 2 (CLS, SEP), cut at 8 (the real tokenizer's
    counts are pinned in ``test_minilm.py``)."""

    def word_piece_lengths(self, texts):
        return [min(len(t.split()) + 2, 8) for t in texts]


def test_encode_by_token_budget_keeps_input_order():
    texts = [" ".join(["w"] * n) + f" {i}" for i, n in enumerate([1, 7, 3, 20, 2, 5])]
    seen = []

    def encode(batch):
        seen.append(list(batch))
        return np.array([[float(t.rsplit(" ", 1)[1])] for t in batch])

    out = encode_by_token_budget(_Model(), texts, encode, max_count=2, budget=16)
    assert out[:, 0].tolist() == list(range(len(texts)))
    assert sorted(t for b in seen for t in b) == sorted(texts)
    assert all(len(b) <= 2 for b in seen)
    assert word_piece_lengths(_Model(), texts) == [4, 8, 6, 8, 5, 8]


def test_model_without_tokenizer_gets_one_call():
    calls = []

    def encode(batch):
        calls.append(list(batch))
        return np.zeros((len(batch), 3))

    out = encode_by_token_budget(object(), ["a", "b", "c"], encode)
    assert calls == [["a", "b", "c"]] and out.shape == (3, 3)


@pytest.mark.slow
@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_budget_batches_give_each_text_its_own_vector(precision):
    """The real model: vectors of mixed-length texts batched by budget match
    each text embedded alone (padding is masked), for both callers."""
    from ctxledger.pipelines.evidence.embed import Embedder
    from ctxledger.pipelines.memory.classify import MiniLMEncoder
    from ctxledger.schemas.evidence import EmbeddingSettings

    texts = [
        "Disk full.",
        "I prefer short answers by email.",
        "Traceback (most recent call last): File app.py, line 3 " * 30,
        "The deploy failed after the migration step; rollback started at 09:12.",
        "ok",
        "kubelet has too many pods and new pods are pending " * 8,
    ]
    embedder = Embedder(EmbeddingSettings(max_batch_size=4), precision=precision)
    batched = embedder.encode(texts)
    alone = np.concatenate([embedder.encode([t]) for t in texts])
    assert batched.shape == (len(texts), 384)
    assert (batched * alone).sum(axis=1).min() >= 0.9999
    encoder = MiniLMEncoder(batch_size=4, bf16=precision == "bf16").load()
    classified = encoder(list(reversed(texts)))[::-1]
    assert (classified * alone).sum(axis=1).min() >= 0.9999
