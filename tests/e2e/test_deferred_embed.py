"""End to end: ``evidence.embedding.mode: deferred``.

The nightly commits chunks without a vector (BM25 finds them at once and the
hit says so); ``ctxledger embed`` fills every vector in one snapshot, keeping
chunk ids and text, and the memories' vectors in the same snapshot; a second
``embed`` does nothing; search is hybrid after.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import yaml
from typer.testing import CliRunner

from ctxledger.jobs.cli import app
from ctxledger.jobs.embed import run_embed
from ctxledger.jobs.nightly import run_nightly
from ctxledger.schemas.evidence import PackRequest
from ctxledger.schemas.policy import DEFAULT_POLICY_PATH, load_policy
from ctxledger.serving.evidence_pack import pack
from ctxledger.serving.evidence_search import search_evidence
from ctxledger.warehouse import Warehouse
from ctxledger.warehouse.evidence_api import embedder, install_macros

pytestmark = pytest.mark.slow

RUNBOOK = """# Rotating the signing key

## Steps

Rotate the signing key with the vault command, then restart the gateway pods so
they read the new key. Check the gateway health endpoint afterwards.

## Rollback

Restore the previous key version from vault and restart the gateway again.
"""
ORDERS = "lookup_orders: order 7731 shipped by parcelco, eta friday"
STATED = "I prefer short answers with bullet points."


def _landing(landing: Path) -> None:
    folder = landing / "tenant=acme" / "subject=cust-2"
    folder.mkdir(parents=True)
    lines = [
        {"session_id": "s2", "turn": 0, "role": "user", "content": "where is my order?",
         "created_at": "2025-03-02T09:00:00Z"},
        {"session_id": "s2", "turn": 1, "role": "assistant", "content": "looking",
         "tool_calls": [{"id": "c2", "name": "lookup_orders", "arguments": {}}],
         "created_at": "2025-03-02T09:00:01Z"},
        {"session_id": "s2", "turn": 2, "role": "tool", "content": ORDERS,
         "tool_call_id": "c2", "name": "lookup_orders", "status": "ok",
         "created_at": "2025-03-02T09:00:02Z"},
        {"session_id": "s2", "turn": 3, "role": "user", "content": STATED,
         "created_at": "2025-03-02T09:00:03Z"},
    ]  # fmt: skip
    (folder / "chat.jsonl").write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    grant = {"event": "grant", "tenant_id": "acme", "subject_id": "cust-2",
             "purpose": "support", "basis": "consent",
             "at": "2025-03-01T00:00:00Z"}  # fmt: skip
    (landing.parent / "consent.jsonl").write_text(json.dumps(grant) + "\n")


def _memory_vectors(path: Path) -> list[tuple]:
    with Warehouse.open(path) as wh:
        return wh.query(
            "SELECT text, embed_model, len(embedding) FROM memories ORDER BY text"
        ).fetchall()


def _chunks(path: Path) -> dict[str, tuple[str, bool]]:
    with Warehouse.open(path) as wh:
        rows = wh.query(
            "SELECT chunk_id, text, embedding IS NOT NULL FROM evidence_chunks"
        ).fetchall()
    return {r[0]: (r[1], r[2]) for r in rows}


def _sql_ranked_by(path: Path, query: str, vector) -> list[str]:
    with Warehouse.open(path) as wh:
        con = wh.connection()
        install_macros(con)
        rows = con.execute(
            "SELECT ranked_by FROM evidence_search('acme', ['*'], ?, k := 5, "
            "query_vec := ?::FLOAT[])",
            [query, [float(v) for v in vector]],
        ).fetchall()
    return [r[0] for r in rows]


def test_deferred_nightly_then_embed(tmp_path):
    docs, landing, path = tmp_path / "docs", tmp_path / "landing", tmp_path / "wh"
    (docs / "tenant=acme").mkdir(parents=True)
    (docs / "tenant=acme" / "rotate.md").write_text(RUNBOOK)
    _landing(landing)
    data = yaml.safe_load(DEFAULT_POLICY_PATH.read_text())
    data["evidence"]["embedding"]["mode"] = "deferred"
    policy_file = tmp_path / "policy.yaml"
    policy_file.write_text(yaml.safe_dump(data))
    policy = load_policy(policy_file)
    query = "rotate the signing key"
    vector = embedder(policy.evidence.embedding).encode([query])[0]

    consent = tmp_path / "consent.jsonl"
    run_nightly(landing, path, docs=docs, policy_file=policy_file, consent=consent)
    before = _chunks(path)
    assert before and not any(has for _t, has in before.values())
    assert _memory_vectors(path) == [(STATED, None, None)]  # deferred: none yet
    with Warehouse.open(path) as wh:
        hits = search_evidence(
            wh, "acme", ["*"], query, query_embedding=vector, policy=policy
        )
        snapshot = wh.current_snapshot()
    assert hits and {h.ranked_by for h in hits} == {"bm25"}
    assert all(h.cosine is None for h in hits)
    assert "signing key" in hits[0].text
    assert set(_sql_ranked_by(path, query, vector)) == {"bm25"}
    # pack embeds the pending chunks it considers, so they are not dropped as
    # irrelevant before ``ctxledger embed`` ran
    with Warehouse.open(path) as wh:
        manifest = pack(
            wh,
            PackRequest(
                tenant_id="acme",
                principal_groups=["*"],
                query=query,
                window_tokens=2000,
                include_memories=False,
            ),
            policy=policy,
        )
    assert any("signing key" in item.content for item in manifest.selected)
    assert any("without a stored vector" in note for note in manifest.notes)

    result = CliRunner().invoke(
        app, ["embed", "-w", str(path), "--policy", str(policy_file)]
    )
    assert result.exit_code == 0, result.output
    assert "and 1 memory(ies)" in result.output
    model = policy.evidence.embedding.model
    assert _memory_vectors(path) == [(STATED, model, 384)]
    after = _chunks(path)
    assert after.keys() == before.keys()  # the same chunk ids, updated in place
    assert all(has for _t, has in after.values())
    assert {c: t for c, (t, _h) in after.items()} == {
        c: t for c, (t, _h) in before.items()
    }
    with Warehouse.open(path) as wh:
        assert wh.current_snapshot() == snapshot + 1  # one snapshot for all vectors
        stored = wh.query(
            "SELECT embedding FROM evidence_chunks WHERE text LIKE '%signing key%'"
        ).fetchone()[0]
        assert np.linalg.norm(stored) == pytest.approx(1.0, abs=1e-3)
        hits = search_evidence(
            wh, "acme", ["*"], query, query_embedding=vector, policy=policy
        )
    assert {h.ranked_by for h in hits} == {"hybrid"}
    assert hits[0].cosine is not None and "signing key" in hits[0].text
    assert set(_sql_ranked_by(path, query, vector)) == {"hybrid"}

    again = run_embed(path, policy_file=policy_file)
    assert (again.pending, again.updated, again.snapshot_id) == (0, 0, None)
    assert (again.memories_pending, again.memories_updated) == (0, 0)
    with Warehouse.open(path) as wh:
        assert wh.current_snapshot() == snapshot + 1
