"""Memory vectors outside the nightly graph: ``ctxledger embed`` fills the
memories a deferred run stored without one of the policy's model, and a
backfill keeps stored vectors unless the model changed (vectors are not
content: re-derived floats that differ in the last bits change no row)."""

from __future__ import annotations

import numpy as np
import pytest
from memfactory import memory

from ctxledger.jobs.embed import run_embed
from ctxledger.pipelines.sink.replace import refresh_memory_vectors
from ctxledger.schemas.arrow import to_table
from ctxledger.schemas.memory import MemoryRecord
from ctxledger.schemas.policy import load_policy
from ctxledger.warehouse import Warehouse
from ctxledger.warehouse.replace import drop_scope, register_scope, replace_scope

MODEL = load_policy(None).evidence.embedding.model


def _unit(seed: int) -> list[float]:
    v = np.random.default_rng(seed).standard_normal(384).astype(np.float32)
    return (v / np.linalg.norm(v)).tolist()


def _with(m: MemoryRecord, vector, model=MODEL) -> MemoryRecord:
    return m.model_copy(update={"embedding": vector, "embed_model": model})


def _bare(m: MemoryRecord) -> MemoryRecord:
    return m.model_copy(update={"embedding": None, "embed_model": None})


def _lake(root, rows: list[MemoryRecord]):
    with Warehouse.open(root, create=True) as wh:
        wh.commit_staged(
            "r1", {}, {"memories": to_table(MemoryRecord, [m.row() for m in rows])}, {}
        )


def _vectors(root) -> dict[str, tuple[str | None, list | None]]:
    with Warehouse.open(root) as wh:
        rows = wh.query("SELECT memory_id, embed_model, embedding FROM memories")
        return {m: (model, v) for m, model, v in rows.fetchall()}


A = memory("I prefer email.", turn=1)
B = memory("I live in Lyon.", turn=2)
C = memory("Call me Ana.", turn=3)
D = memory("I prefer email.", turn=4, subject="u-2")  # same text as A


def test_embed_fills_memories_without_a_vector_of_the_model(tmp_path):
    root = tmp_path / "wh"
    kept = _with(C, _unit(3))
    _lake(root, [A, B, _with(D, _unit(4), "old-model"), kept])
    asked: list[list[str]] = []

    def encode(texts):
        asked.append(list(texts))
        return np.stack([np.asarray(_unit(len(t)), np.float32) for t in texts])

    with Warehouse.open(root) as wh:
        snapshot = wh.current_snapshot()
    result = run_embed(root, encode=encode)
    # A and D share a text: embedded once; C already has the policy's model
    assert sorted(t for call in asked for t in call) == sorted({A.text, B.text})
    assert (result.memories_pending, result.memory_texts) == (3, 2)
    assert (result.memories_updated, result.updated, result.pending) == (3, 0, 0)
    assert result.changed and result.snapshot_id == snapshot + 1
    stored = _vectors(root)
    assert {m for m, _v in stored.values()} == {MODEL}
    assert stored[A.memory_id][1] == pytest.approx(_unit(len(A.text)))
    assert stored[D.memory_id][1] == stored[A.memory_id][1]
    assert stored[C.memory_id][1] == pytest.approx(kept.embedding)
    again = run_embed(root, encode=encode)
    assert (again.memories_pending, again.memories_updated) == (0, 0)
    assert not again.changed and again.snapshot_id is None and len(asked) == 1


def _backfill(root, staged: list[MemoryRecord]):
    """The backfill's memory replacement on ``staged`` (session ``ses_1``)."""
    with Warehouse.open(root) as wh:
        con = wh.connection()
        con.register("__staged", to_table(MemoryRecord, [m.row() for m in staged]))
        with wh.transaction():
            register_scope(con, ["ses_1"], "SELECT NULL::VARCHAR AS artifact_id")
            change = replace_scope(con, "memories", "SELECT * FROM __staged")
            refreshed = refresh_memory_vectors(con, "SELECT * FROM __staged")
            drop_scope(con)
        con.unregister("__staged")
    return change, refreshed, _vectors(root)


def test_backfill_keeps_vectors_unless_the_model_changed(tmp_path):
    root = tmp_path / "wh"
    va = _unit(1)
    _lake(root, [_with(A, va), B])
    # same text, same model: floats a hair off, and B now has one
    noisy = (np.asarray(va, np.float32) + np.float32(1e-7)).tolist()
    change, refreshed, stored = _backfill(root, [_with(A, noisy), _with(B, _unit(2))])
    assert (change.unchanged, change.deleted, change.inserted) == (2, 0, 0)
    assert refreshed == 1  # B had none
    assert stored[A.memory_id] == (MODEL, pytest.approx(va, abs=0))
    assert stored[B.memory_id] == (MODEL, pytest.approx(_unit(2)))
    # deferred embedding: re-derived rows without vectors clear nothing
    change, refreshed, after = _backfill(root, [_bare(A), _bare(B)])
    assert (change.unchanged, refreshed) == (2, 0) and after == stored
    # the policy's model changed: every vector is recomputed for it, in place
    change, refreshed, after = _backfill(
        root, [_with(A, _unit(5), "new-model"), _with(B, _unit(6), "new-model")]
    )
    assert (change.unchanged, change.deleted, refreshed) == (2, 0, 2)
    assert after[A.memory_id] == ("new-model", pytest.approx(_unit(5)))
    assert after[B.memory_id] == ("new-model", pytest.approx(_unit(6)))
