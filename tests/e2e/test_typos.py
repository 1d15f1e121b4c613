"""A typo is an error, never a silent success (issue 32, item 9).

On a small real lake (one fact of acme/u1 for support, no pipeline run):
* ``memories`` with an unknown tenant or purpose exits 2 naming the known
  values; over HTTP it is a 404 that names the known purposes but never
  another tenant (a token sees its own tenant only); MCP says the same;
* ``forget`` of an unknown tenant or subject exits 2 and changes nothing: no
  snapshot, no expiry, no receipt;
* ``Context.search``/``memories`` take ``as_of``/``at`` in the forms the HTTP
  API takes (an ISO date string among them);
* ``ctxledger --version`` prints the package, policy and detector versions.
"""

from __future__ import annotations

import json
import socket
import threading
import time

import httpx
import pytest
import uvicorn
from test_serve import seed_memories
from typer.testing import CliRunner

from ctxledger.jobs.cli import app
from ctxledger.serving import Context
from ctxledger.serving.auth import Tokens
from ctxledger.serving.http import create_app
from ctxledger.warehouse import Warehouse

RUNNER = CliRunner()
TOKENS = {
    "acme-support-token-1": {"tenant": "acme", "groups": ["support"],
                             "subjects": ["*"]},
    "initech-token-00001": {"tenant": "initech", "groups": ["support"],
                            "subjects": ["*"]},
}  # fmt: skip


@pytest.fixture(scope="module")
def lake(tmp_path_factory):
    root = tmp_path_factory.mktemp("typos") / "wh"
    seed_memories(root)
    return root


def _invoke(*args):
    return RUNNER.invoke(app, [str(a) for a in args])


def _state(root) -> tuple:
    """What a no-op must leave as it was: snapshots, receipts, rows."""
    with Warehouse.open(root) as wh:
        snapshots = wh.query("SELECT count(*) FROM lake.snapshots()").fetchone()[0]
        receipts = wh.query("SELECT count(*) FROM erasures").fetchone()[0]
        rows = wh.query("SELECT count(*) FROM memories").fetchone()[0]
    return snapshots, receipts, rows


# -- memories ----------------------------------------------------------------------


def test_memories_of_a_known_scope_still_answers(lake):
    done = _invoke("memories", "-w", lake, "--tenant", "acme", "--subject", "u1",
                   "--purpose", "support", "-o", "json")  # fmt: skip
    assert done.exit_code == 0, done.output
    assert [m["text"] for m in json.loads(done.stdout)] == ["Plan: Pro"]
    # a known tenant and purpose with nothing stored is an empty answer, rc 0
    done = _invoke("memories", "-w", lake, "--tenant", "acme", "--subject", "u9",
                   "--purpose", "billing")  # fmt: skip
    assert done.exit_code == 0, done.output
    assert "no memories served" in done.stdout


@pytest.mark.parametrize(
    ("tenant", "purpose", "named"),
    [
        ("acmee", "support", "unknown tenant 'acmee'; known tenants: acme"),
        ("acme", "suport", "unknown purpose 'suport'; known purposes: billing, "),
    ],
)
def test_memories_of_an_unknown_tenant_or_purpose_exits_2(lake, tenant, purpose, named):
    done = _invoke("memories", "-w", lake, "--tenant", tenant, "--subject", "u1",
                   "--purpose", purpose)  # fmt: skip
    assert done.exit_code == 2, done.output
    assert named in " ".join(done.stderr.split())
    assert done.stdout == ""


class _Server:
    def __init__(self, app):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started:
            assert time.monotonic() < deadline, "uvicorn did not start"
            time.sleep(0.02)
        self.url = f"http://127.0.0.1:{port}"

    def stop(self):
        self.server.should_exit = True
        self.thread.join(timeout=20)


@pytest.fixture(scope="module")
def context(lake):
    with Context.open(lake, poll_s=0) as ctx:
        yield ctx


def test_http_memories_of_an_unknown_purpose_or_tenant_is_a_404(context, tmp_path):
    path = tmp_path / "tokens.json"
    rows = [{"token": t, **p} for t, p in TOKENS.items()]
    path.write_text(json.dumps({"tokens": rows}))
    server = _Server(create_app(context, Tokens.load(path)))
    acme = {"Authorization": "Bearer acme-support-token-1"}
    initech = {"Authorization": "Bearer initech-token-00001"}
    try:
        with httpx.Client(base_url=server.url, timeout=30) as client:
            ok = {"subject_id": "u1", "purpose": "support"}
            assert client.get("/memories", params=ok, headers=acme).status_code == 200
            typo = {"subject_id": "u1", "purpose": "suport"}
            answer = client.get("/memories", params=typo, headers=acme)
            assert answer.status_code == 404
            assert "known purposes: billing, support" in answer.json()["detail"]
            # a token whose tenant holds nothing: 404, no other tenant named
            answer = client.get("/memories", params=ok, headers=initech)
            assert answer.status_code == 404
            detail = answer.json()["detail"]
            assert "initech" in detail and "acme" not in detail
    finally:
        server.stop()


def test_mcp_memories_of_an_unknown_purpose_is_a_404(context):
    import asyncio

    from mcp.server.mcpserver.exceptions import ToolError

    from ctxledger.serving.auth import Principal
    from ctxledger.serving.mcp import create_server

    server = create_server(context, Principal(tenant="acme", subjects=("*",)))
    arguments = {"subject_id": "u1", "purpose": "suport"}
    with pytest.raises(ToolError, match="404: unknown purpose 'suport'"):
        asyncio.run(server.call_tool("memories", arguments))
    other = create_server(context, Principal(tenant="initech", subjects=("*",)))
    with pytest.raises(ToolError, match="404") as refused:
        asyncio.run(other.call_tool("memories", {**arguments, "purpose": "support"}))
    assert "acme" not in str(refused.value)


# -- forget ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tenant", "subject", "said"),
    [
        ("acmee", "u1", "unknown tenant 'acmee'; known tenants: acme"),
        ("acme", "u-404", "holds nothing of subject 'u-404'"),
    ],
)
def test_forget_of_an_unknown_tenant_or_subject_changes_nothing(
    lake, tenant, subject, said
):
    before = _state(lake)
    done = _invoke("forget", "-w", lake, "--tenant", tenant, "--subject", subject)
    assert done.exit_code == 2, done.output
    assert said in " ".join(done.stderr.split())
    assert "no receipt" in done.stderr
    assert _state(lake) == before


# -- as_of forms ---------------------------------------------------------------------


def test_python_takes_the_as_of_forms_http_takes(context):
    hits = context.search("acme", ["support"], "which plan", as_of="2022-04-01")
    assert hits == []  # no evidence in this lake; the point is no AttributeError
    assert context.search_evidence("acme", ["support"], "plan", as_of=1650000000) == []
    now = context.memories("acme", "u1", "support", at="2099-01-01T00:00:00Z")
    assert now.items == ()  # expired by then
    with pytest.raises(ValueError, match="as_of"):
        context.search("acme", ["support"], "plan", as_of="April 1st")


# -- version -------------------------------------------------------------------------


def test_version_prints_package_policy_and_detector_versions():
    done = _invoke("--version")
    assert done.exit_code == 0, done.output
    text = done.stdout
    assert text.startswith("ctxledger ")
    assert "policy" in text and "detector" in text
    from ctxledger.pipelines.redact.registry import load_checked_policy

    version = load_checked_policy(None).policy_version
    assert version in text  # policy hash and detector fingerprint
    assert f"detector {version.rsplit('.', 1)[1]}" in text
