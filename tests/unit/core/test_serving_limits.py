"""What the HTTP server and the MCP tools accept (issue 32, item 7).

Over a real socket (uvicorn on 127.0.0.1, in a thread): numbers past the
schema's bounds are a 422 naming the field (``window_tokens=10**30`` was a
bare 500), a body over the limit is a 413 whether it declares its length or
is chunked, a token over its rate is a 429 with ``Retry-After``, two
``Authorization`` headers are a 400; OpenAPI declares bearer security and
``/docs`` loads nothing from another host. The MCP tools take the same
bounds and honour ``principal_groups`` (narrow, or 403), never ignore it.
The context is a stand-in that echoes the request into its manifest: the
limits are about the server, not the pack.
"""

from __future__ import annotations

import asyncio
import json
import re
import socket
import threading
import time
from datetime import UTC, datetime
from types import SimpleNamespace

import httpx
import pytest
import uvicorn

from ctxledger.schemas.evidence import ContextManifest
from ctxledger.serving.auth import Principal, Tokens
from ctxledger.serving.http import DOCS_ASSETS, create_app
from ctxledger.serving.limits import Limits, TokenBuckets

TOKEN = "acme-support-token-1"
OTHER = "acme-other-token-0002"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
GOOD = {"query": "rotate the key", "window_tokens": 10}


class _Context:
    """Answers /pack with an empty manifest that echoes the request's
    numbers (so a number the JSON writer cannot take reaches it)."""

    snapshot_id = 4
    policy = SimpleNamespace(
        evidence=SimpleNamespace(artifacts=SimpleNamespace(operator_groups=["ops"]))
    )

    def __init__(self):
        self.requests = []

    def _data(self, request) -> dict:
        self.requests.append(request)
        return {
            "manifest_id": "ctx_1", "tenant_id": request.tenant_id,
            "subject_id": request.subject_id,
            "principal_groups": request.principal_groups, "query": request.query,
            "created_at": NOW, "window_tokens": request.window_tokens,
            "max_output_tokens": request.max_output_tokens,
            "overhead_tokens": request.overhead_tokens,
            "budget_tokens": request.budget_tokens, "used_tokens": 0,
            "selected": [], "dropped": [],
        }  # fmt: skip

    def pack_data_at(self, request):
        return self._data(request), self.snapshot_id

    def pack_at(self, request):
        return ContextManifest.model_validate(self._data(request)), self.snapshot_id

    def search_at(self, tenant, groups, query, k, as_of, candidates, subject):
        self.requests.append((tenant, tuple(groups), k, candidates))
        return [], self.snapshot_id

    def close(self):
        pass


def _tokens(tmp_path) -> Tokens:
    path = tmp_path / "tokens.json"
    rows = [
        {"token": TOKEN, "tenant": "acme", "groups": ["support"], "subjects": ["u1"]},
        {"token": OTHER, "tenant": "acme", "groups": ["support"]},
    ]
    path.write_text(json.dumps({"tokens": rows}))
    return Tokens.load(path)


class _Server:
    """uvicorn serving ``app`` on a free 127.0.0.1 port, in a thread."""

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

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=20)


@pytest.fixture()
def serve(tmp_path):
    """Start a server over the stand-in context: ``serve(**create_app_args)``."""
    servers = []

    def start(**kwargs):
        server = _Server(create_app(_Context(), _tokens(tmp_path), **kwargs))
        servers.append(server)
        return server.url

    yield start
    for server in servers:
        server.stop()


@pytest.mark.parametrize("fast_pack", [True, False])
@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("window_tokens", 10**30),
        ("window_tokens", 2**63),
        ("max_output_tokens", 10**30),
        ("overhead_tokens", 10**12),
        ("candidates", 10**9),
    ],
)
def test_a_number_past_the_schema_is_a_422_naming_the_field(
    serve, fast_pack, field, value
):
    url = serve(fast_pack=fast_pack)
    body = {**GOOD, field: value}
    answer = httpx.post(f"{url}/pack", json=body, headers=AUTH, timeout=30)
    assert answer.status_code == 422, answer.text
    (error,) = answer.json()["detail"]
    assert error["loc"] == ["body", field]
    # the bounds are in the published schema too
    schema = httpx.get(f"{url}/openapi.json").json()["components"]["schemas"]
    assert "maximum" in json.dumps(schema["PackBody"]["properties"][field])


def test_the_largest_window_the_schema_allows_is_answered(serve):
    from ctxledger.schemas.evidence import MAX_REQUEST_TOKENS

    url = serve()
    body = {**GOOD, "window_tokens": MAX_REQUEST_TOKENS}
    answer = httpx.post(f"{url}/pack", json=body, headers=AUTH, timeout=30)
    assert answer.status_code == 200, answer.text
    assert answer.json()["manifest"]["window_tokens"] == MAX_REQUEST_TOKENS


def test_a_body_over_the_default_limit_is_a_413_and_the_server_goes_on(serve):
    url = serve()
    huge = {**GOOD, "query": "x" * 2_000_000}
    with httpx.Client(timeout=30) as client:
        answer = client.post(f"{url}/pack", json=huge, headers=AUTH)
        assert answer.status_code == 413
        assert "1000000 bytes" in answer.json()["detail"]
        assert client.post(f"{url}/pack", json=GOOD, headers=AUTH).status_code == 200


def test_a_chunked_body_over_the_limit_is_a_413(serve):
    """No Content-Length: the guard counts what it reads."""
    url = serve(limits=Limits(max_body_bytes=4096))

    def chunks():
        yield b'{"query": "'
        for _ in range(1000):
            yield b"x" * 1024
        yield b'", "window_tokens": 10}'

    headers = {**AUTH, "Content-Type": "application/json"}
    try:
        answer = httpx.post(f"{url}/pack", content=chunks(), headers=headers)
        status = answer.status_code
    except httpx.HTTPError:  # the server may close while the client still sends
        status = 413
    assert status == 413
    small = httpx.post(f"{url}/pack", json=GOOD, headers=AUTH, timeout=30)
    assert small.status_code == 200
    for path in ("/search", "/pack"):
        big = {"query": "y" * 5000, "window_tokens": 1}
        answer = httpx.post(f"{url}{path}", json=big, headers=AUTH, timeout=30)
        assert answer.status_code == 413, path


def test_the_guard_stops_reading_a_body_once_it_passes_the_limit():
    """At most the limit (plus one chunk) is read into memory: a 10 MB
    chunked body is refused after its fifth 1 KB chunk."""
    from ctxledger.serving.limits import RequestGuard

    read, sent = [], []

    async def receive():
        read.append(1)
        return {"type": "http.request", "body": b"x" * 1024, "more_body": True}

    async def send(message):
        sent.append(message)

    async def app(scope, receive, send):  # never reached
        raise AssertionError("the app got a body over the limit")

    guard = RequestGuard(
        app, limits=Limits(max_body_bytes=4096), token_key=lambda _h: None
    )
    scope = {"type": "http", "method": "POST", "path": "/pack", "headers": []}
    asyncio.run(guard(scope, receive, send))
    assert len(read) == 5
    assert sent[0]["status"] == 413


def test_a_token_over_its_rate_gets_429_with_retry_after(serve):
    url = serve(limits=Limits(rate_per_s=0.01, burst=2))
    with httpx.Client(base_url=url, timeout=30) as client:
        codes = [
            client.post("/pack", json=GOOD, headers=AUTH).status_code for _ in range(3)
        ]
        assert codes == [200, 200, 429]
        refused = client.post("/search", json={"query": "q"}, headers=AUTH)
        assert refused.status_code == 429
        assert int(refused.headers["retry-after"]) >= 1
        # per token: another token still has its own bucket
        other = {"Authorization": f"Bearer {OTHER}"}
        assert client.post("/pack", json=GOOD, headers=other).status_code == 200
        # no token, an unknown one: not counted (the route answers 401)
        assert client.get("/health").status_code == 200
        stranger = {"Authorization": "Bearer not-a-known-token-0"}
        assert client.post("/pack", json=GOOD, headers=stranger).status_code == 401


def test_token_buckets_refill_at_their_rate():
    now = [0.0]
    buckets = TokenBuckets(rate_per_s=2.0, size=2, clock=lambda: now[0])
    assert [buckets.take("a") for _ in range(2)] == [0.0, 0.0]
    assert buckets.take("a") == pytest.approx(0.5)
    now[0] = 0.5
    assert buckets.take("a") == 0.0
    assert buckets.take("b") == 0.0
    now[0] = 100.0  # never more than the bucket holds
    assert [buckets.take("a") for _ in range(3)][-1] > 0.0


def test_two_authorization_headers_are_a_400(serve):
    url = serve()
    headers = [
        ("Authorization", "Bearer not-a-known-token-0"),
        ("Authorization", f"Bearer {TOKEN}"),
        ("Content-Type", "application/json"),
    ]
    for path in ("/pack", "/search"):
        answer = httpx.post(
            f"{url}{path}", content=json.dumps(GOOD), headers=headers, timeout=30
        )
        assert answer.status_code == 400, path
        assert "Authorization" in answer.json()["detail"]


def test_openapi_declares_bearer_security_on_the_reads(serve):
    url = serve()
    spec = httpx.get(f"{url}/openapi.json").json()
    schemes = spec["components"]["securitySchemes"]
    (name,) = [n for n, s in schemes.items() if s == {**s, "type": "http"}]
    assert schemes[name]["scheme"].lower() == "bearer"
    for path, method in (("/pack", "post"), ("/search", "post"), ("/memories", "get")):
        operation = spec["paths"][path][method]
        assert operation["security"] == [{name: []}], path
        params = [p["name"].lower() for p in operation.get("parameters", [])]
        assert "authorization" not in params  # no longer an optional header
    assert "security" not in spec["paths"]["/health"]["get"]
    # a token still works, and its absence is a 401 with the header
    assert httpx.post(f"{url}/pack", json=GOOD, headers=AUTH).status_code == 200
    missing = httpx.post(f"{url}/pack", json=GOOD)
    assert missing.status_code == 401
    assert missing.headers["www-authenticate"] == "Bearer"


def test_docs_load_swagger_ui_from_the_server_itself(serve):
    url = serve()
    page = httpx.get(f"{url}/docs")
    assert page.status_code == 200
    sources = re.findall(r'(?:src|href)="([^"]+)"', page.text)
    sources += re.findall(r"url: '([^']+)'", page.text)
    assert sources
    assert not [s for s in sources if "//" in s], sources  # no other host
    assets = {s for s in sources if s.startswith(DOCS_ASSETS)}
    assert {f"{DOCS_ASSETS}/swagger-ui-bundle.js", f"{DOCS_ASSETS}/swagger-ui.css"} <= (
        assets
    )
    for asset in assets:
        answer = httpx.get(f"{url}{asset}")
        assert answer.status_code == 200, asset
        assert len(answer.content) > 1000, asset
    script = httpx.get(f"{url}{DOCS_ASSETS}/swagger-ui-bundle.js").text
    assert "SwaggerUIBundle" in script


# --- MCP: the same bounds, and principal_groups honoured -------------------


def _mcp(principal_groups=("support", "billing")):
    from ctxledger.serving.mcp import create_server

    context = _Context()
    principal = Principal(tenant="acme", groups=principal_groups, subjects=("u1",))
    return create_server(context, principal), context


def _call(server, tool, arguments):
    return asyncio.run(server.call_tool(tool, arguments))


@pytest.mark.parametrize(
    ("tool", "field", "value"),
    [
        ("pack", "window_tokens", 10**30),
        ("pack", "max_output_tokens", 10**30),
        ("pack", "window_tokens", 0),
        ("search", "k", 10**30),
        ("search", "candidates", 10**9),
    ],
)
def test_mcp_refuses_a_number_past_the_schema_naming_it(tool, field, value):
    from mcp.server.mcpserver.exceptions import ToolError

    server, context = _mcp()
    arguments = {"query": "q"}
    if tool == "pack":
        arguments["window_tokens"] = 10
    with pytest.raises(ToolError, match=field):
        _call(server, tool, {**arguments, field: value})
    assert context.requests == []


def test_mcp_honours_principal_groups_by_narrowing_them():
    server, context = _mcp()
    result = _call(server, "pack", {**GOOD, "principal_groups": ["billing"]})
    assert context.requests[-1].principal_groups == ["billing"]
    assert result.structured_content["manifest"]["principal_groups"] == ["billing"]
    _call(server, "search", {"query": "q", "principal_groups": ["support"]})
    assert context.requests[-1][1] == ("support",)
    # absent: the token's groups
    _call(server, "pack", GOOD)
    assert context.requests[-1].principal_groups == ["support", "billing"]


@pytest.mark.parametrize("tool", ["pack", "search"])
def test_mcp_refuses_principal_groups_the_token_lacks(tool):
    from mcp.server.mcpserver.exceptions import ToolError

    server, context = _mcp()
    arguments = {**GOOD, "principal_groups": ["support", "ops"]}
    with pytest.raises(ToolError, match="403"):
        _call(server, tool, arguments)
    assert context.requests == []


CHROMIUM = "/usr/bin/chromium"


@pytest.mark.slow
@pytest.mark.skipif(
    not __import__("os").path.exists(CHROMIUM),
    reason="/usr/bin/chromium is not installed (apt-get install -y chromium)",
)
def test_docs_render_in_a_browser_with_no_other_host_reachable(serve, tmp_path):
    """Headless Chromium, every host name resolving nowhere: swagger-ui
    renders the three reads and the Authorize button (bearer security)."""
    import subprocess

    url = serve()
    done = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu",
         "--disable-quic", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync",
         f"--user-data-dir={tmp_path / 'profile'}", "--enable-logging=stderr",
         "--v=0", "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
         "--virtual-time-budget=15000", "--dump-dom", f"{url}/docs"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    dom = done.stdout
    assert "swagger-ui" in dom
    for path in ("/pack", "/search", "/memories"):
        assert f'data-path="{path}"' in dom, path
    assert "authorize" in dom.lower()
    assert "net::ERR_NAME_NOT_RESOLVED" not in done.stderr
