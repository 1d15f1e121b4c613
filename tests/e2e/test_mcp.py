"""End to end: ``ctxledger mcp`` over stdio, driven by the official MCP client.

The server is the real CLI command in a child process; the client lists the
tools and calls them, and a call naming another tenant fails as a 403 does
over HTTP. The warehouse is seeded directly (no nightly) to keep this short.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from test_serve import seed_memories

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "acme-support-token-1"


async def _session(wh: Path, tokens: Path) -> dict:
    params = StdioServerParameters(
        command=sys.executable,
        args=[
            "-m",
            "ctxledger.jobs.cli",
            "mcp",
            "--tokens",
            str(tokens),
            "-w",
            str(wh),
        ],
        env={**os.environ, "CTXLEDGER_TOKEN": TOKEN, "PYTHONPATH": str(ROOT)},
        cwd=str(ROOT),
    )
    out: dict = {}
    async with Client(params, read_timeout_seconds=60) as client:
        out["tools"] = sorted(t.name for t in (await client.list_tools()).tools)
        args = {"subject_id": "u1", "purpose": "support"}
        out["memories"] = await client.call_tool("memories", args)
        out["search"] = await client.call_tool("search", {"query": "plan", "k": 3})
        pack = {"query": "which plan", "window_tokens": 300, **args}
        out["pack"] = await client.call_tool("pack", pack)
        # a 1-token window: the subject's fact is dropped (listed, not selected)
        tight = {**pack, "window_tokens": 1}
        out["slim"] = await client.call_tool("pack", tight)
        full = {**tight, "include_dropped_content": True}
        out["full"] = await client.call_tool("pack", full)
        other = {**args, "tenant_id": "globex"}
        out["other_tenant"] = await client.call_tool("memories", other)
        out["other_subject"] = await client.call_tool(
            "memories", {"subject_id": "u2", "purpose": "support"}
        )
    return out


def test_mcp_client_calls_the_three_tools_over_stdio(tmp_path):
    wh = tmp_path / "wh"
    seed_memories(wh)
    tokens = tmp_path / "tokens.json"
    row = {"token": TOKEN, "tenant": "acme", "groups": ["support"], "subjects": ["u1"]}
    tokens.write_text(json.dumps({"tokens": [row]}))
    out = asyncio.run(asyncio.wait_for(_session(wh, tokens), timeout=120))

    assert out["tools"] == ["memories", "pack", "search"]
    memories = out["memories"]
    assert not memories.is_error, memories.content
    assert memories.structured_content["facts"] == ["Plan: Pro"]
    search = out["search"]
    assert not search.is_error, search.content
    assert search.structured_content["hits"] == []  # no evidence in this lake
    pack = out["pack"]
    assert not pack.is_error, pack.content
    manifest = pack.structured_content["manifest"]
    assert manifest["tenant_id"] == "acme"
    assert manifest["principal_groups"] == ["support"]
    # dropped items: their summary by default, the whole item on request
    slim = out["slim"].structured_content["manifest"]
    full = out["full"].structured_content["manifest"]
    assert not slim["selected"] and not full["selected"]
    (summary,) = slim["dropped"]
    assert summary["kind"] == "fact" and summary["item"] is None
    assert summary["reason"] in ("over_budget", "low_relevance")
    (listed,) = full["dropped"]
    same = ("item_id", "kind", "source", "token_count", "reason")
    assert [listed[k] for k in same] == [summary[k] for k in same]
    assert listed["item"]["item_id"] == summary["item_id"]
    assert '"text":"Plan: Pro"' in listed["item"]["content"]
    assert full["manifest_id"] == slim["manifest_id"]
    for refused in (out["other_tenant"], out["other_subject"]):
        assert refused.is_error
        assert "403" in refused.content[0].text
