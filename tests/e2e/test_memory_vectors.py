"""Memory vectors stored at write time (issue 13): the serving replica and the
lake path hand them to ``pack``, which embeds only memories without one; a lake
written before vectors were stored gains the columns and still serves.

Vectors here are random unit vectors (no model): what is tested is that the
stored vector, not a fresh embedding of the text, reaches ``pack``.
"""

from __future__ import annotations

import numpy as np
import pytest
from test_memory_serving import _commit, _event, _memory

import ctxledger.serving.evidence_search as evidence_search
import ctxledger.warehouse.evidence_api as evidence_api
from ctxledger.schemas.evidence import PackRequest
from ctxledger.schemas.policy import load_policy
from ctxledger.serving.evidence_pack import pack
from ctxledger.serving.memories import memories
from ctxledger.warehouse import Warehouse
from ctxledger.warehouse.memory_api import install_macros as install_memory_macros
from ctxledger.warehouse.memory_api import record_consent
from ctxledger.warehouse.memory_serving import read_replica, replica_path

MODEL = "all-MiniLM-L6-v2"


def _unit(seed: int) -> np.ndarray:
    v = np.random.default_rng(seed).standard_normal(384).astype(np.float32)
    return v / np.linalg.norm(v)


QUERY = _unit(0)
#: Close to the query (cosine ~0.9), so it is relevant and selected.
NEAR = (0.9 * QUERY + 0.44 * _unit(1)) / np.linalg.norm(0.9 * QUERY + 0.44 * _unit(1))


def _with(memory, vector, model=MODEL):
    return memory.model_copy(
        update={"embedding": vector.tolist(), "embed_model": model}
    )


@pytest.fixture
def lake(tmp_path):
    stored = _with(_memory("acme", "u1", "Prefers replies by email"), NEAR)
    other = _with(
        _memory("acme", "u1", "Lives in Lyon"), _unit(2), model="another-model"
    )
    legacy = _memory("acme", "u1", "Account tier is gold")  # written before
    with Warehouse.open(tmp_path / "wh", create=True) as wh:
        _commit(wh, "r1", [stored, other, legacy])
        record_consent(wh, [_event("acme", "u1", "grant")])
    return tmp_path / "wh", stored, other, legacy


def test_replica_and_lake_serve_the_stored_vectors(lake):
    root, stored, other, legacy = lake
    with Warehouse.open(root) as wh:
        served = memories(wh, "acme", "u1", "support")
        from_lake = memories(wh, "acme", "u1", "support", lake=True)
    assert {m.memory_id for m in served.items} == {
        stored.memory_id,
        other.memory_id,
        legacy.memory_id,
    }
    model, vector = served.vectors[stored.memory_id]
    assert model == MODEL
    np.testing.assert_allclose(vector, NEAR, atol=1e-3)  # float16 in the replica
    assert legacy.memory_id not in served.vectors
    # the replica keeps the lake's main model; the lake path names each row's
    assert other.memory_id not in served.vectors
    assert from_lake.vectors[other.memory_id][0] == "another-model"
    assert np.array_equal(from_lake.vectors[stored.memory_id][1], vector)
    with read_replica(replica_path(root, "memories")) as replica:
        assert replica.embed_model == MODEL and len(replica.vectors) == 1


def test_pack_embeds_only_memories_without_a_stored_vector(lake, monkeypatch):
    root, stored, other, legacy = lake
    asked: list[list[str]] = []

    class Fake:
        def encode(self, texts):
            asked.append(list(texts))
            return np.stack([QUERY if t == "email please" else _unit(3) for t in texts])

    # the query (``embed_query``) and the memories (``_text_vectors``)
    monkeypatch.setattr(evidence_search, "embedder", lambda settings: Fake())
    monkeypatch.setattr(evidence_api, "embedder", lambda settings: Fake())
    policy = load_policy(None)
    with Warehouse.open(root) as wh:
        manifest = pack(
            wh,
            PackRequest(
                tenant_id="acme",
                subject_id="u1",
                purpose="support",
                query="email please",
                window_tokens=2000,
                include_evidence=False,
                include_dropped_content=True,
            ),
            policy=policy,
        )
    # the query, then the two memories without a vector of the query's model
    assert asked == [["email please"], sorted([legacy.text, other.text])]
    assert any("2 memory(ies) without a stored vector" in n for n in manifest.notes)
    items = {i.item_id: i for i in manifest.selected}
    items.update({d.item.item_id: d.item for d in manifest.dropped})
    relevance = items[stored.memory_id].scores.relevance
    assert relevance == pytest.approx(float(QUERY @ NEAR), abs=1e-3)
    assert stored.memory_id in {i.item_id for i in manifest.selected}


def test_a_lake_written_before_vectors_gains_the_columns(tmp_path):
    root = tmp_path / "wh"
    legacy = _memory("acme", "u1", "Account tier is gold")
    with Warehouse.open(root, create=True) as wh:
        _commit(wh, "r1", [legacy])
        record_consent(wh, [_event("acme", "u1", "grant")])
        wh.connection().execute("ALTER TABLE memories DROP COLUMN embedding")
        wh.connection().execute("ALTER TABLE memories DROP COLUMN embed_model")
        view = memories(wh, "acme", "u1", "support")  # replica without vectors
        assert view.facts == [legacy.text] and view.vectors == {}
    with Warehouse.open(root, create=True) as wh:
        columns = {
            r[0]
            for r in wh.query(
                "SELECT column_name FROM (DESCRIBE SELECT * FROM memories)"
            ).fetchall()
        }
        assert {"embedding", "embed_model"} <= columns
        assert wh.query("SELECT embedding FROM memories").fetchall() == [(None,)]
        view = memories(wh, "acme", "u1", "support")
        assert view.facts == [legacy.text] and view.vectors == {}


def test_the_sql_macros_leave_the_vector_out(lake, tmp_path):
    """Analysts' ``SELECT *`` from ``memories_served`` gets no 384-float column
    (the read path reads vectors by id); a lake without the column still works."""
    root, stored, _other, _legacy = lake

    def columns_and_rows(wh):
        con = wh.connection()
        install_memory_macros(wh)
        rel = con.execute(
            "SELECT * FROM memories_served('acme', 'u1', 'support') ORDER BY text"
        )
        names = [d[0] for d in rel.description]
        return names, rel.fetchall()

    with Warehouse.open(root) as wh:
        names, rows = columns_and_rows(wh)
        facts = wh.connection().execute(
            "SELECT * FROM memory_facts('acme', 'u1', 'support')"
        )
        assert "embedding" not in [d[0] for d in facts.description]
    assert "embedding" not in names
    assert {"memory_id", "text", "embed_model", "served_as"} <= set(names)
    assert len(rows) == 3
    legacy_root = tmp_path / "legacy"
    with Warehouse.open(legacy_root, create=True) as wh:
        _commit(wh, "r1", [_memory("acme", "u1", "Account tier is gold")])
        record_consent(wh, [_event("acme", "u1", "grant")])
        wh.connection().execute("ALTER TABLE memories DROP COLUMN embedding")
    with Warehouse.open(legacy_root) as wh:
        names, rows = columns_and_rows(wh)
        view = memories(wh, "acme", "u1", "support", lake=True)
    assert "embedding" not in names and len(rows) == 1
    assert view.facts == ["Account tier is gold"]
