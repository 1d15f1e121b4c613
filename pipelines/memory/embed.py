"""Memory vectors computed once, when the nightly writes the memory.

``pack`` ranks a subject's memories by cosine to the request's query. Embedding
them per request cost 0.9-4.8 s a call (issue 13); a memory's text never
changes once stored, so its vector is computed here, in batches, with the
model queries are embedded with (``policy.evidence.embedding``), and stored
beside it (``MemoryRecord.embedding`` / ``embed_model``). Readers embed only
rows without one (rows of older runs, deferred embedding, a failed batch).

Memories written outside the Beam graph, by consent re-admission in the
lifecycle step (nightly commit, retention run, backfill), get theirs from
``MemoryVectors``, with the same embedder and model name; with deferred
embedding they stay without, and ``ctxledger embed`` fills them later.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import numpy as np

from ctxledger.schemas.memory import MemoryRecord

log = logging.getLogger(__name__)


def with_vectors(
    memories: Sequence[MemoryRecord], vectors: np.ndarray, model: str
) -> list[MemoryRecord]:
    """``memories`` with ``vectors`` (one row each, same order) and ``model``."""
    if len(vectors) != len(memories):
        raise ValueError(f"{len(vectors)} vectors for {len(memories)} memories")
    return [
        m.model_copy(
            update={
                "embedding": np.asarray(v, dtype=np.float32).tolist(),
                "embed_model": model,
            }
        )
        for m, v in zip(memories, vectors, strict=True)
    ]


def embed_memories(
    memories: Sequence[MemoryRecord], embedder: Any
) -> list[MemoryRecord]:
    """Embed each distinct text of ``memories`` once (``embedder.encode``, named
    by ``embedder.model_name``); memories that already carry a vector of that
    model keep it."""
    model = embedder.model_name
    todo = [m for m in memories if m.embedding is None or m.embed_model != model]
    if not todo:
        return list(memories)
    texts = list(dict.fromkeys(m.text for m in todo))
    vectors = dict(zip(texts, embedder.encode(texts), strict=True))
    done = {
        id(m): e
        for m, e in zip(
            todo,
            with_vectors(todo, np.stack([vectors[m.text] for m in todo]), model),
            strict=True,
        )
    }
    return [done.get(id(m), m) for m in memories]


class MemoryVectors:
    """Vectors for memories a lifecycle step writes (consent re-admission).

    Called with the memories about to be inserted; returns them with vectors
    of ``settings.model`` in batches of ``settings.max_batch_size``, like
    ``EmbedMemoriesFn`` does in the nightly graph. The model loads on the
    first call that has a memory to embed (most lifecycle steps re-admit
    nothing, and must not pay for MiniLM), once per process. Deferred mode
    (``settings.mode``): returned as they are. A batch the model fails on is
    returned without vectors (readers embed such rows): a re-admission is
    never lost for its vector.
    """

    def __init__(self, settings: Any, embedder: Any = None):
        self.settings = settings
        self.embedder = embedder
        #: memories embedded / left without a vector by a failure (counts only)
        self.embedded = 0
        self.failed = 0

    def __call__(self, memories: Sequence[MemoryRecord]) -> list[MemoryRecord]:
        memories = list(memories)
        if not memories or getattr(self.settings, "mode", "inline") != "inline":
            return memories
        if self.embedder is None:
            from ctxledger.pipelines.evidence.embed import Embedder

            self.embedder = Embedder(self.settings)
        size = max(1, int(getattr(self.settings, "max_batch_size", 64)))
        out: list[MemoryRecord] = []
        for start in range(0, len(memories), size):
            batch = memories[start : start + size]
            try:
                done = embed_memories(batch, self.embedder)
            except Exception as exc:  # noqa: BLE001 - stored without vectors
                log.warning(
                    "memory embedding failed for %d re-admitted memories (%s): "
                    "stored without vectors",
                    len(batch),
                    type(exc).__name__,
                )
                self.failed += len(batch)
                out.extend(batch)
                continue
            self.embedded += len(done)
            out.extend(done)
        return out


__all__ = ["MemoryVectors", "embed_memories", "with_vectors"]
