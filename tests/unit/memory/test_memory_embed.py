"""Memory vectors computed at write time (``pipelines.memory.embed``): each
distinct text is embedded once per batch, vectors of the current model are
kept, and the record validates the vector's width."""

from __future__ import annotations

import numpy as np
import pytest
from memfactory import memory
from pydantic import ValidationError

from ctxledger.pipelines.memory.embed import embed_memories, with_vectors
from ctxledger.schemas.memory import MemoryRecord


class FakeEmbedder:
    model_name = "all-MiniLM-L6-v2"

    def __init__(self):
        self.calls: list[list[str]] = []

    def encode(self, texts):
        self.calls.append(list(texts))
        return np.stack([np.full(384, len(t), dtype=np.float32) for t in texts])


def test_each_distinct_text_is_embedded_once():
    a = memory("I prefer email.", turn=1)
    b = memory("I prefer email.", turn=2)  # same text, another statement
    c = memory("I live in Lyon, France.", turn=3)
    embedder = FakeEmbedder()
    out = embed_memories([a, b, c], embedder)
    assert embedder.calls == [["I prefer email.", "I live in Lyon, France."]]
    assert [m.memory_id for m in out] == [a.memory_id, b.memory_id, c.memory_id]
    assert all(m.embed_model == "all-MiniLM-L6-v2" for m in out)
    assert out[0].embedding == out[1].embedding == [15.0] * 384
    assert out[2].embedding == [23.0] * 384


def test_vectors_of_the_current_model_are_kept_others_recomputed():
    kept = with_vectors(
        [memory("I prefer email.")], np.zeros((1, 384)), "all-MiniLM-L6-v2"
    )
    stale = with_vectors([memory("I live in Lyon.")], np.zeros((1, 384)), "old-model")
    embedder = FakeEmbedder()
    out = embed_memories([*kept, *stale], embedder)
    assert embedder.calls == [["I live in Lyon."]]
    assert out[0] is kept[0]
    assert out[1].embed_model == "all-MiniLM-L6-v2" and out[1].embedding[0] == 15.0
    assert embed_memories(out, embedder) == out and len(embedder.calls) == 1


def test_a_vector_must_have_384_values():
    fields = {**memory("I prefer email.").model_dump(), "embedding": [0.0] * 3}
    with pytest.raises(ValidationError, match="384"):
        MemoryRecord.model_validate(fields)
    with pytest.raises(ValueError, match="2 vectors for 1"):
        with_vectors([memory("x")], np.zeros((2, 384)), "m")


class _Settings:
    def __init__(self, mode="inline", max_batch_size=2):
        self.mode, self.max_batch_size = mode, max_batch_size


def test_readmitted_memories_are_embedded_in_batches_of_the_policy():
    from ctxledger.pipelines.memory.embed import MemoryVectors

    embedder = FakeEmbedder()
    embed = MemoryVectors(_Settings(max_batch_size=2), embedder)
    texts = ["I prefer email.", "I live in Lyon.", "Call me Ana."]
    out = embed([memory(t, turn=i) for i, t in enumerate(texts)])
    assert embedder.calls == [texts[:2], texts[2:]]
    assert [m.embedding[0] for m in out] == [float(len(t)) for t in texts]
    assert {m.embed_model for m in out} == {"all-MiniLM-L6-v2"}
    assert (embed.embedded, embed.failed) == (3, 0)


def test_deferred_mode_loads_no_model_and_a_failed_batch_keeps_the_memory():
    from ctxledger.pipelines.memory.embed import MemoryVectors

    deferred = MemoryVectors(_Settings(mode="deferred"))
    items = [memory("I prefer email.")]
    assert deferred(items) == items and deferred.embedder is None

    class Broken(FakeEmbedder):
        def encode(self, texts):
            raise RuntimeError("model gone")

    broken = MemoryVectors(_Settings(), Broken())
    assert broken(items) == items and items[0].embedding is None
    assert broken.failed == 1
    # nothing to embed: the model is never built
    assert MemoryVectors(_Settings())([]) == []
