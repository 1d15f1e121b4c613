"""``/pack``'s fast path (``serving.http._FastPack``) answers like the route.

The fast path serves a well-formed, authorised /pack on the event loop and
hands anything else to FastAPI with the body replayed. Every request here is
sent to an app with the fast path and to one without it: status, body and
the headers a client reads must be the same, and the good requests must
have been answered by the fast path (not on FastAPI's thread pool).
"""

from __future__ import annotations

import json
import threading
from datetime import UTC, datetime
from types import SimpleNamespace

import pytest
from fastapi.testclient import TestClient

from ctxledger.schemas.evidence import ContextManifest
from ctxledger.serving.auth import Tokens
from ctxledger.serving.context_pack import PackError
from ctxledger.serving.http import create_app

TOKEN = "acme-support-token-1"
NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
SCORES = {"relevance": 0.5, "authority": 0.6, "freshness": 0.9, "utility": 0.27}


def _manifest(request) -> dict:
    """A small manifest's data, checked against the model."""
    item = {
        "item_id": "chk_1", "kind": "evidence", "source": "document:d@v1",
        "trust": "untrusted", "retrieved_at": NOW, "version": "v1",
        "token_count": 3, "content": '{"text":"a"}', "scores": SCORES,
    }  # fmt: skip
    dropped = {"item_id": "chk_2", "kind": "evidence", "source": "document:d@v1",
               "token_count": 9, "scores": SCORES, "reason": "over_budget"}  # fmt: skip
    data = {
        "manifest_id": "ctx_1", "tenant_id": request.tenant_id,
        "subject_id": request.subject_id, "principal_groups": request.principal_groups,
        "query": request.query, "created_at": NOW, "window_tokens": 10,
        "max_output_tokens": 0, "overhead_tokens": 0, "budget_tokens": 10,
        "used_tokens": 3, "selected": [item], "dropped": [dropped],
        "notes": [f"content {request.include_dropped_content}"],
    }  # fmt: skip
    return ContextManifest.model_validate(data).model_dump()


class _Context:
    snapshot_id = 4
    policy = SimpleNamespace(
        evidence=SimpleNamespace(artifacts=SimpleNamespace(operator_groups=["ops"]))
    )

    def __init__(self):
        self.threads: list[str] = []

    def pack_data_at(self, request):
        self.threads.append(threading.current_thread().name)
        if request.query == "too big":
            raise PackError("mandatory items need 9 tokens but the budget is 1")
        return _manifest(request), self.snapshot_id

    def close(self):
        pass


@pytest.fixture()
def clients(tmp_path):
    path = tmp_path / "tokens.json"
    row = {"token": TOKEN, "tenant": "acme", "groups": ["support"], "subjects": ["u1"]}
    path.write_text(json.dumps({"tokens": [row]}))
    tokens = Tokens.load(path)
    fast, plain = _Context(), _Context()
    with (
        TestClient(create_app(fast, tokens)) as a,
        TestClient(create_app(plain, tokens, fast_pack=False)) as b,
    ):
        yield (a, fast), (b, plain)


AUTH = {"Authorization": f"Bearer {TOKEN}"}
GOOD = {"query": "rotate the key", "window_tokens": 10}
CASES = {
    "good": (GOOD, AUTH),
    "subject and dropped texts": (
        {**GOOD, "subject_id": "u1", "include_dropped_content": True},
        AUTH,
    ),
    "no token": (GOOD, {}),
    "unknown token": (GOOD, {"Authorization": "Bearer not-a-known-token-0"}),
    "basic scheme": (GOOD, {"Authorization": f"Basic {TOKEN}"}),
    "another tenant": ({**GOOD, "tenant_id": "globex"}, AUTH),
    "an unlisted subject": ({**GOOD, "subject_id": "u2"}, AUTH),
    "groups in the body": ({**GOOD, "principal_groups": ["ops"]}, AUTH),
    "no window": ({"query": "q"}, AUTH),
    "a zero window": ({**GOOD, "window_tokens": 0}, AUTH),
    "a pack error": ({**GOOD, "query": "too big"}, AUTH),
    "not an object": ([1, 2], AUTH),
}
GOOD_CASES = {"good", "subject and dropped texts"}


def _send(client, body, headers, raw=None, content_type="application/json"):
    content = raw if raw is not None else json.dumps(body).encode()
    headers = {**headers, "Content-Type": content_type}
    return client.post("/pack", content=content, headers=headers)


def _same(a, b) -> None:
    assert (a.status_code, a.content) == (b.status_code, b.content)
    for name in ("content-type", "www-authenticate"):
        assert a.headers.get(name) == b.headers.get(name), name


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_fast_path_answers_what_the_route_answers(clients, case):
    (fast, fast_ctx), (plain, plain_ctx) = clients
    body, headers = CASES[case]
    got, expected = _send(fast, body, headers), _send(plain, body, headers)
    _same(got, expected)
    if case in GOOD_CASES:
        assert got.status_code == 200
        answer = got.json()
        assert answer["snapshot_id"] == 4
        assert answer["manifest"]["tenant_id"] == "acme"
        flag = body.get("include_dropped_content", False)
        assert answer["manifest"]["notes"] == [f"content {flag}"]
        # the fast path ran it on the loop; the route on FastAPI's pool
        assert fast_ctx.threads and "AnyIO worker" not in fast_ctx.threads[-1]
        assert "AnyIO worker" in plain_ctx.threads[-1]
    else:
        assert got.status_code in (401, 403, 422)


@pytest.mark.parametrize(
    ("raw", "content_type"),
    [
        (b'{"query": "q", "window_tokens": ', "application/json"),
        (b"", "application/json"),
        (json.dumps(GOOD).encode(), "text/plain"),
        (json.dumps(GOOD).encode(), "application/json; charset=utf-8"),
        (json.dumps(GOOD).encode(), "application/merge-patch+json"),
    ],
)
def test_bodies_and_content_types_the_fast_path_is_not_sure_of(
    clients, raw, content_type
):
    (fast, _), (plain, _) = clients
    _same(
        _send(fast, None, AUTH, raw=raw, content_type=content_type),
        _send(plain, None, AUTH, raw=raw, content_type=content_type),
    )


def test_other_routes_and_methods_pass_through(clients):
    (fast, _), (plain, _) = clients
    _same(fast.get("/pack", headers=AUTH), plain.get("/pack", headers=AUTH))
    _same(fast.get("/health"), plain.get("/health"))
    assert fast.get("/openapi.json").json() == plain.get("/openapi.json").json()


def test_the_gc_threshold_is_the_servers_while_it_serves_and_restored_after(
    tmp_path,
):
    """A young collection every 700 allocations scanned each pack in
    flight; the app raises the threshold while it serves (``GC_THRESHOLD``)
    and puts the process's own back when it stops (tests, embedders)."""
    import gc

    from ctxledger.serving.http import GC_THRESHOLD

    path = tmp_path / "tokens.json"
    path.write_text(json.dumps({"tokens": []}))
    before = gc.get_threshold()
    assert before != GC_THRESHOLD
    with TestClient(create_app(_Context(), Tokens.load(path))) as client:
        assert gc.get_threshold() == GC_THRESHOLD
        assert client.get("/health").status_code == 200
    assert gc.get_threshold() == before
