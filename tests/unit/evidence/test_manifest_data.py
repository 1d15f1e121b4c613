"""The manifest a pack returns: dropped items by summary unless the request
asks for their content, and the HTTP server's bytes equal to the model's JSON.

``pack`` builds its manifest as plain data (``manifest_data``); the Python API
validates it into ``ContextManifest``, the HTTP server serialises it as it is
(``serving.http.manifest_bytes``). Both must say the same thing, byte for
byte, on real packs: the on-call runbook of ``test_evidence_pack`` with a
near-copy of it (near-duplicates), tight and loose budgets (over-budget
drops), an unrelated question (low relevance) and a superseded version.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from types import SimpleNamespace

import pytest
from test_evidence_pack import NOW, QUERY, _index, _rows

import ctxledger.serving.evidence_search as evidence_search
from ctxledger.schemas.arrow import arrow_schema
from ctxledger.schemas.evidence import (
    ContextItem,
    ContextManifest,
    DroppedItem,
    PackRequest,
)
from ctxledger.schemas.policy import load_policy
from ctxledger.serving.evidence_pack import manifest_data, pack_context
from ctxledger.serving.http import PackResponse, manifest_bytes

SUMMARY = ("item_id", "kind", "source", "token_count", "scores")


@pytest.fixture(scope="module")
def policy():
    return load_policy(None)


@pytest.fixture(scope="module")
def index(policy):
    from test_evidence_pack import ONCALL

    from ctxledger.pipelines.evidence.landing import split_front_matter

    raw = ONCALL.read_text()
    text = raw[split_front_matter(raw)[1] :]
    old = text.replace("laptop", "computer")
    rows = _rows(
        "being_oncall", "v10", old, datetime(2024, 3, 1, tzinfo=UTC),
        effective_to=datetime(2025, 1, 7, tzinfo=UTC),
    )  # fmt: skip
    rows += _rows("being_oncall", "v11", text, datetime(2025, 1, 7, tzinfo=UTC))
    copy = text.replace("laptop", "notebook")
    rows += _rows("wiki-copy", "1", copy, datetime(2024, 6, 1, tzinfo=UTC))
    return _index(policy, rows)


def _request(**fields) -> PackRequest:
    base = dict(
        tenant_id="t",
        principal_groups=["sre"],
        query=QUERY,
        window_tokens=2000,
        include_memories=False,
        now=NOW,
    )
    return PackRequest(**{**base, **fields})


CASES = [
    {},
    {"window_tokens": 300},
    {"window_tokens": 6000},
    {"query": "sourdough bread recipe"},
    {"window_tokens": 900, "max_output_tokens": 200, "overhead_tokens": 50},
]


@pytest.mark.parametrize("fields", CASES)
def test_dropped_items_are_summaries_unless_their_content_is_asked_for(
    monkeypatch, policy, index, fields
):
    monkeypatch.setattr(evidence_search, "load_index", lambda wh, settings: index)
    slim = pack_context(SimpleNamespace(), _request(**fields), policy)
    full = pack_context(
        SimpleNamespace(), _request(**fields, include_dropped_content=True), policy
    )
    assert slim.dropped  # every case drops something
    # the same decisions, and the same manifest id: the flag is a view
    assert slim.manifest_id == full.manifest_id
    assert slim.selected == full.selected
    assert [d.model_copy(update={"item": None}) for d in full.dropped] == slim.dropped
    for d in slim.dropped:
        assert d.item is None
    for d in full.dropped:
        assert d.item is not None and d.item.content
        assert {k: getattr(d, k) for k in SUMMARY} == {
            k: getattr(d.item, k) for k in SUMMARY
        }
    # a dropped item's text reaches the JSON only when asked for
    slim_json, full_json = slim.model_dump_json(), full.model_dump_json()
    escaped = [
        json.dumps(d.item.content, ensure_ascii=False)[1:-1] for d in full.dropped
    ]
    assert all(e in full_json for e in escaped)
    assert not any(e in slim_json for e in escaped)


@pytest.mark.parametrize("dropped_content", [False, True])
@pytest.mark.parametrize("fields", CASES)
def test_the_servers_bytes_are_the_models_json(
    monkeypatch, policy, index, fields, dropped_content
):
    monkeypatch.setattr(evidence_search, "load_index", lambda wh, settings: index)
    request = _request(**fields, include_dropped_content=dropped_content)
    data = manifest_data(SimpleNamespace(), request, policy)
    model = ContextManifest.model_validate(data)
    expected = PackResponse(snapshot_id=12, manifest=model).model_dump_json()
    assert manifest_bytes(12, data) == expected.encode()
    assert model == pack_context(SimpleNamespace(), request, policy)


def test_a_superseded_version_is_listed_with_what_replaced_it(
    monkeypatch, policy, index
):
    monkeypatch.setattr(evidence_search, "load_index", lambda wh, settings: index)
    manifest = pack_context(SimpleNamespace(), _request(), policy)
    old = [d for d in manifest.dropped if d.reason == "superseded"]
    assert old and all(d.superseded_by == "being_oncall@v11" for d in old)
    assert all(d.source.startswith("document:being_oncall@v10") for d in old)


@pytest.mark.parametrize("model", [ContextManifest, DroppedItem, ContextItem])
def test_the_manifest_models_map_to_arrow_with_their_optional_fields(model):
    """The manifest is a contract like the tables (``schemas.arrow``): every
    field maps, and exactly the optional ones (a dropped item's ``item``
    among them) are nullable."""
    import typing

    schema = arrow_schema(model)
    assert schema.names == list(model.model_fields)
    hints = typing.get_type_hints(model)
    for field in schema:
        optional = type(None) in typing.get_args(hints[field.name])
        assert field.nullable == optional, field.name
    if model is DroppedItem:
        assert schema.field("item").nullable
