"""The source registry (``schemas.sources``) and how ``pack`` uses it: the
registry values items at query time (authority, invalidation, sensitivity,
injection risk), and a row's source follows from its kind and key."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace

import pytest

import ctxledger.serving.evidence_search as evidence_search
from ctxledger.schemas.evidence import PackRequest
from ctxledger.schemas.sources import (
    SourceRegistry,
    load_registry,
    registry_from_rows,
    registry_rows,
)
from ctxledger.serving.evidence_pack import pack_context
from tests.unit.evidence.test_evidence_pack import _index, _rows

CASES = Path(__file__).resolve().parents[3] / "eval" / "cases"
NOW = datetime(2025, 6, 1, tzinfo=UTC)
RUNBOOK = """# Revoked API keys

A revoked API key returns HTTP 401 with the error key_revoked. Check the key
status first; a revoked key cannot be reactivated, the owner creates a new one.
"""
WIKI = """# API key stopped working

When an API key stops working it was usually revoked. The owner has to create
a new key in the dashboard; support checks the key status and explains why.
"""


def _registry(**overrides) -> SourceRegistry:
    data = {
        "name": "t",
        "version": "1",
        "clearance": {"security": "confidential"},
        "sources": [
            {
                "source_id": "wiki",
                "kind": "document",
                "match": ["wiki/*"],
                "owner": "community",
                "authority": 0.3,
                "injection_risk": "high",
            },
            {
                "source_id": "runbooks",
                "kind": "document",
                "match": ["runbook/*"],
                "owner": "support",
                "authority": 1.0,
            },
            {
                "source_id": "secret",
                "kind": "document",
                "match": ["internal/*"],
                "owner": "security",
                "sensitivity": "confidential",
            },
            {"source_id": "tools", "kind": "tool_artifact", "match": ["check_*"]},
        ],
    }
    for source_id, changes in overrides.items():
        for spec in data["sources"]:
            if spec["source_id"] == source_id:
                spec.update(changes)
    return SourceRegistry.model_validate(data)


def test_rows_resolve_by_kind_and_pattern_else_the_default():
    reg = _registry()
    assert reg.resolve("document", "runbook/api-keys") == "runbooks"
    assert reg.resolve("document", "wiki/faq") == "wiki"
    # a tool artifact key never matches a document source, and vice versa
    assert reg.resolve("tool_artifact", "runbook/x") == "unregistered"
    assert reg.resolve("tool_artifact", "check_api_key_status") == "tools"
    assert reg.resolve("document", None, "docs/runbook/x.md") == "unregistered"
    assert reg.resolve("memory", "user_stated") == "unregistered"
    assert reg.spec("nope").source_id == "unregistered"  # the default resolves
    assert reg.clearance_of(["support"]) == "internal"
    assert reg.clearance_of(["support", "security"]) == "confidential"
    with pytest.raises(ValueError, match="duplicate source ids"):
        SourceRegistry.model_validate(
            {"sources": [{"source_id": "a"}, {"source_id": "a"}]}
        )


def test_registry_version_is_a_content_hash_and_rows_round_trip():
    reg = _registry()
    changed = _registry(wiki={"authority": 0.9})
    assert reg.registry_version.startswith("1+")
    assert reg.registry_version != changed.registry_version
    assert _registry().registry_version == reg.registry_version
    rows = [r.row() for r in registry_rows(reg, NOW)]
    assert {r["source_id"] for r in rows} == {
        "wiki",
        "runbooks",
        "secret",
        "tools",
        "unregistered",
    }
    back = registry_from_rows(rows)
    assert back == reg and back.registry_version == reg.registry_version
    seed = load_registry(CASES / "sources.yaml")
    assert seed.resolve("document", "runbook/api-keys") == "support-runbooks"
    assert seed.resolve("document", "runbook/api-keys-faq") == "runbook-wiki"


@pytest.fixture(scope="module")
def index(policy):
    when = datetime(2025, 5, 1, tzinfo=UTC)
    rows = _rows("runbook/api-keys", "v7", RUNBOOK, when)
    rows += _rows("wiki/api-key-faq", "1", WIKI, when)
    rows += _rows("internal/escrow", "1", RUNBOOK.replace("HTTP", "HTTPS"), when)
    return _index(policy, rows)


@pytest.fixture(scope="module")
def policy():
    from ctxledger.schemas.policy import load_policy

    return load_policy(None)


def _run(monkeypatch, policy, index, reg, groups=("support",)):
    monkeypatch.setattr(evidence_search, "load_index", lambda wh, settings: index)
    request = PackRequest(
        tenant_id="t",
        principal_groups=list(groups),
        query="why is my API key not working",
        window_tokens=2000,
        include_memories=False,
        now=NOW,
        include_dropped_content=True,  # the tests read dropped items' doc ids
    )
    return pack_context(SimpleNamespace(), request, policy, registry=reg)


def test_changing_a_sources_authority_changes_the_ranking(monkeypatch, policy, index):
    """The registry values items at query time: the same index (no row
    rewritten) ranks the wiki above the runbook once its authority is higher."""
    first = _run(monkeypatch, policy, index, _registry())
    ranked = [i.doc_id for i in sorted(first.selected, key=lambda i: -i.scores.utility)]
    assert ranked[0] == "runbook/api-keys"
    flipped = _registry(wiki={"authority": 1.0}, runbooks={"authority": 0.2})
    second = _run(monkeypatch, policy, index, flipped)
    ranked = [
        i.doc_id for i in sorted(second.selected, key=lambda i: -i.scores.utility)
    ]
    assert ranked[0] == "wiki/api-key-faq"
    assert second.registry_version == flipped.registry_version
    by_doc = {i.doc_id: i for i in second.selected}
    assert by_doc["runbook/api-keys"].scores.authority == 0.2
    assert by_doc["runbook/api-keys"].source_id == "runbooks"
    assert by_doc["runbook/api-keys"].source_owner == "support"


def test_invalidated_sensitive_and_risky_sources(monkeypatch, policy, index):
    manifest = _run(
        monkeypatch, policy, index, _registry(runbooks={"invalidated": True})
    )
    dropped = {d.item.doc_id: d.reason for d in manifest.dropped}
    assert dropped["runbook/api-keys"] == "source_invalidated"
    assert "runbook/api-keys" not in {i.doc_id for i in manifest.selected}
    # a confidential source is withheld from a support principal: not listed
    listed = {i.doc_id for i in manifest.selected} | set(dropped)
    assert "internal/escrow" not in listed
    assert any("withheld" in n for n in manifest.notes)
    wiki = next(i for i in manifest.selected if i.doc_id == "wiki/api-key-faq")
    assert wiki.injection_risk == "high" and wiki.trust == "untrusted"
    # with the clearance, the confidential source is a candidate again
    cleared = _run(
        monkeypatch, policy, index, _registry(), groups=("support", "security")
    )
    seen = {i.doc_id for i in cleared.selected} | {
        d.item.doc_id for d in cleared.dropped
    }
    assert "internal/escrow" in seen
