"""The in-memory search index: scope (tenant, ACL, validity) before ranking,
scope-local BM25 statistics, IVF probing, fusion."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
import pyarrow as pa
import pytest

from ctxledger.schemas.evidence import SearchSettings
from ctxledger.serving.evidence_index import EvidenceIndex

T0 = datetime(2024, 1, 1, tzinfo=UTC)
T1 = datetime(2024, 6, 1, tzinfo=UTC)


def _table(rows: list[dict]) -> pa.Table:
    n = len(rows)
    col = lambda name, default=None: [r.get(name, default) for r in rows]  # noqa: E731
    return pa.table(
        {
            "chunk_id": col("chunk_id"),
            "doc_id": col("doc_id", "d"),
            "doc_version": ["v1"] * n,
            "doc_version_id": col("doc_id", "d"),
            "kind": ["document"] * n,
            "tenant_id": col("tenant_id"),
            "section_path": [[]] * n,
            "char_start": [0] * n,
            "char_end": [len(r["text"]) for r in rows],
            "text": col("text"),
            "token_count": [1] * n,
            "content_hash": col("chunk_id"),
            "trust": ["untrusted"] * n,
            "authority": pa.array([None] * n, pa.float64()),
            "effective_from": pa.array(col("from", T0), pa.timestamp("us", tz="UTC")),
            "effective_to": pa.array(col("to"), pa.timestamp("us", tz="UTC")),
            "acl": col("acl", ["*"]),
        }
    )


def _unit(rng, n):
    v = rng.standard_normal((n, 384)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


@pytest.fixture(scope="module")
def small():
    rows = [
        dict(chunk_id="a1", tenant_id="a", text="rotate the api key", acl=["*"]),
        dict(chunk_id="a2", tenant_id="a", text="rotate keys weekly", acl=["sre"]),
        dict(chunk_id="a3", tenant_id="a", text="old key policy", to=T1),
        dict(chunk_id="a4", tenant_id="a", text="new key policy", **{"from": T1}),
        dict(chunk_id="b1", tenant_id="b", text="rotate the api key", acl=["*"]),
    ]
    rng = np.random.default_rng(0)
    return EvidenceIndex.from_rows(
        _table(rows), _unit(rng, len(rows)), SearchSettings()
    )


def _ids(index, rows):
    return {index.row(r)["chunk_id"] for r in rows}


def test_scope_is_tenant_then_acl_then_validity(small):
    mid, late = datetime(2024, 3, 1, tzinfo=UTC), datetime(2024, 9, 1, tzinfo=UTC)
    assert _ids(small, small.scope("a", [], mid)) == {"a1", "a3"}
    assert _ids(small, small.scope("a", ["sre"], mid)) == {"a1", "a2", "a3"}
    assert _ids(small, small.scope("a", [], late)) == {"a1", "a4"}
    assert _ids(small, small.scope("b", ["sre"], late)) == {"b1"}
    assert len(small.scope("nobody", ["*"], late)) == 0


def test_search_never_returns_out_of_scope_rows(small):
    rng = np.random.default_rng(1)
    for vector in _unit(rng, 50):
        for tenant, groups in (("a", []), ("b", ["sre"]), ("a", ["sre"])):
            hits = small.search(tenant, groups, "rotate key", vector, 10, T1, 20)
            ids = _ids(small, [h.row for h in hits])
            assert all(i.startswith(tenant) for i in ids)
            if not groups:
                assert "a2" not in ids


def test_bm25_statistics_come_from_the_scope_only():
    base = [
        {"chunk_id": f"a{i}", "tenant_id": "a", "text": f"rotate key step {i}"}
        for i in range(5)
    ]
    noise = [
        {"chunk_id": f"b{i}", "tenant_id": "b", "text": "rotate rotate rotate"}
        for i in range(50)
    ]
    rng = np.random.default_rng(2)
    settings = SearchSettings()
    alone = EvidenceIndex.from_rows(_table(base), _unit(rng, 5), settings)
    mixed = EvidenceIndex.from_rows(_table(base + noise), _unit(rng, 55), settings)
    scores_alone = alone.bm25("rotate key", alone.scope("a", [], None), 10)
    scores_mixed = mixed.bm25("rotate key", mixed.scope("a", [], None), 10)
    assert [s for _, s in scores_alone] == [s for _, s in scores_mixed]


def test_acl_beyond_62_groups_per_tenant_is_checked_exactly():
    rows = [
        {"chunk_id": f"c{i:03d}", "tenant_id": "a", "text": "x", "acl": [f"g{i}"]}
        for i in range(80)
    ]
    rng = np.random.default_rng(3)
    index = EvidenceIndex.from_rows(_table(rows), _unit(rng, 80), SearchSettings())
    for i in (0, 61, 62, 79):
        assert _ids(index, index.scope("a", [f"g{i}"], None)) == {f"c{i:03d}"}
    assert len(index.scope("a", ["g999"], None)) == 0


def test_ivf_probes_only_scope_rows_and_finds_near_neighbours():
    rng = np.random.default_rng(4)
    centres = _unit(rng, 40)
    n = 4000
    vectors = centres[rng.integers(0, 40, n)] + rng.normal(0, 0.05, (n, 384))
    vectors = (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).astype(
        np.float32
    )
    rows = [
        {"chunk_id": f"r{i:05d}", "tenant_id": "a", "text": "t",
         "acl": ["sre"] if i % 2 else ["*"]}
        for i in range(n)
    ]  # fmt: skip
    settings = SearchSettings(ivf_min_rows=1000, exact_max_rows=100)
    index = EvidenceIndex.from_rows(_table(rows), vectors, settings)
    assert index._ivf is not None
    exact = EvidenceIndex.from_rows(
        _table(rows), vectors, SearchSettings(ivf_min_rows=0)
    )
    recall = []
    for q in vectors[rng.integers(0, n, 30)]:
        scope = index.scope("a", [], None)
        probed = index.vector(q, scope, 10)
        assert all(int(index.row(r)["chunk_id"][1:]) % 2 == 0 for r, _ in probed)
        truth = exact.vector(q, exact.scope("a", [], None), 10)
        found = {index.row(r)["chunk_id"] for r, _ in probed}
        recall.append(len(found & {exact.row(r)["chunk_id"] for r, _ in truth}) / 10)
    assert np.mean(recall) >= 0.8


def test_rows_without_a_vector_rank_by_bm25_only():
    """Deferred embeddings: a pending row (all-zero, ``has_vector`` False) is
    found by its words, is never a cosine candidate, and the rest still are."""
    rows = [
        dict(chunk_id="p1", tenant_id="a", text="rotate the api key"),
        dict(chunk_id="v1", tenant_id="a", text="weekly backup of the ledger"),
        dict(chunk_id="v2", tenant_id="a", text="restart the gateway pods"),
    ]
    rng = np.random.default_rng(3)
    vectors = _unit(rng, 3)
    vectors[0] = 0.0
    index = EvidenceIndex.from_rows(
        _table(rows), vectors, SearchSettings(), has_vector=np.array([0, 1, 1], bool)
    )
    # a query vector equal to v1's: only vector rows are cosine candidates
    ranked = index.search("a", ["*"], "rotate api key", vectors[1], 5, T1, 20)
    by_id = {index.row(r.row)["chunk_id"]: r for r in ranked}
    assert by_id["p1"].bm25_rank == 1 and by_id["p1"].cosine is None
    assert by_id["v1"].cosine_rank == 1
    assert {c for c, r in by_id.items() if r.cosine is not None} == {"v1", "v2"}
    assert not index.has_vector[index.row_of("p1")]
    assert index.has_vector[index.row_of("v2")]
