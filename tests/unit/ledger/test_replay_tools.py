"""Replay's tool-definition bucket: defined tools the session never called, and
what their definitions cost per turn and over the session."""

from __future__ import annotations

import json
from dataclasses import replace

from ctxledger.pipelines.ingest.tokens import count_tokens
from ctxledger.pipelines.ledger.replay import (
    DEFAULT_POLICIES,
    SessionView,
    parse_policy,
    replay,
)
from ctxledger.schemas.base import canonical_json


def _with_tools(sources, tools):
    session = sources.session.model_copy(
        update={"metadata": json.dumps({"tools": tools})}
    )
    return replace(sources, session=session)


def test_never_called_definitions_are_named_and_costed(planted_sources, settings):
    called = sorted(
        {c.tool_name for m in planted_sources.messages for c in m.tool_calls}
    )
    assert called  # the planted session calls tools
    unused = {
        "type": "function",
        "function": {
            "name": "delete_database",
            "description": "Drop a database and every table in it.",
            "parameters": {"type": "object", "properties": {"name": {}}},
        },
    }
    tools = [*called, unused]
    view = SessionView(_with_tools(planted_sources, tools), settings)
    usage = view.tool_usage
    assert usage.never_called == ("delete_database",)
    assert set(usage.called) == set(called)
    cost = count_tokens(canonical_json(unused))
    assert usage.never_called_tokens == cost
    turns = len(view.messages)
    assert usage.never_called_session_tokens == cost * turns
    # the bucket counts every defined tool, on every turn, for every policy
    results = replay(view, [parse_policy(p) for p in DEFAULT_POLICIES])
    for result in results:
        assert result.final["tool_definitions"] == usage.defined_tokens
        assert result.session_total["tool_definitions"] == usage.defined_tokens * turns
    # a catalogue passed in defines tools too (and wins over the metadata)
    catalogue = {"lookup_order": canonical_json({"name": "lookup_order"})}
    other = SessionView(planted_sources, settings, tool_catalogue=catalogue)
    assert other.tool_usage.never_called == ("lookup_order",)


def test_without_definitions_nothing_is_reported_unused(planted_sources, settings):
    view = SessionView(planted_sources, settings)
    assert view.tool_usage.never_called == ()
    assert view.tool_usage.never_called_session_tokens == 0
    assert view.tool_definition_tokens > 0  # still estimated from the calls
