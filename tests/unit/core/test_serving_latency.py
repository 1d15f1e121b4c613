"""What keeps a warm pack fast and a server's requests parallel: the query
vector cache, the model serialised around its own call only, the source
registry read once per snapshot, one scoring pass per query however many
candidates pack asks for, and pre-serialised /pack responses."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace

import numpy as np
import pytest

from ctxledger.schemas.evidence import EmbeddingSettings, SearchSettings
from ctxledger.serving import evidence_search
from ctxledger.serving.evidence_index import EvidenceIndex
from ctxledger.warehouse import evidence_api


class _CountingModel:
    """A stand-in embedder: counts calls and the most calls ever in flight."""

    def __init__(self, pause: float = 0.0):
        self.calls = 0
        self.active = 0
        self.most_active = 0
        self.pause = pause
        self._lock = threading.Lock()

    def encode(self, texts):
        with self._lock:
            self.calls += 1
            self.active += 1
            self.most_active = max(self.most_active, self.active)
        time.sleep(self.pause)
        with self._lock:
            self.active -= 1
        return np.ones((len(texts), 384), dtype=np.float32) / np.sqrt(384)


@pytest.fixture
def model(monkeypatch):
    """``evidence_api.embedder`` answering with a counting stand-in model."""
    inner = _CountingModel(pause=0.01)
    settings = EmbeddingSettings()
    monkeypatch.setattr(
        evidence_api,
        "_EMBEDDERS",
        {settings.model_dump_json(): evidence_api._SerialEmbedder(inner)},
    )
    monkeypatch.setattr(
        evidence_search, "_QUERY_VECTORS", type(evidence_search._QUERY_VECTORS)()
    )
    return settings, inner


def test_a_query_is_embedded_once_and_its_vector_is_read_only(model):
    settings, inner = model
    first = evidence_search.embed_query(settings, "rotate the api key")
    again = evidence_search.embed_query(settings, "rotate the api key")
    other = evidence_search.embed_query(settings, "who is on call")
    assert inner.calls == 2
    assert again is first and other is not first
    with pytest.raises(ValueError):
        first[0] = 1.0  # a caller cannot change what the next caller gets


def test_the_query_cache_is_bounded(model, monkeypatch):
    settings, inner = model
    monkeypatch.setattr(evidence_search, "QUERY_CACHE_SIZE", 3)
    for i in range(5):
        evidence_search.embed_query(settings, f"q{i}")
    assert len(evidence_search._QUERY_VECTORS) == 3
    evidence_search.embed_query(settings, "q0")  # evicted: embedded again
    assert inner.calls == 6


def test_the_model_runs_one_call_at_a_time_across_threads(model):
    settings, inner = model
    threads = [
        threading.Thread(
            target=evidence_search.embed_query, args=(settings, f"question {i}")
        )
        for i in range(8)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert inner.calls == 8
    assert inner.most_active == 1


def _index(n: int = 300) -> EvidenceIndex:
    import pyarrow as pa

    rng = np.random.default_rng(3)
    words = "rotate key api on call pager escalate restart node disk".split()
    texts = [" ".join(rng.choice(words, size=6)) for _ in range(n)]
    vectors = rng.standard_normal((n, 384)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    ts = pa.timestamp("us", tz="UTC")
    table = pa.table(
        {
            "chunk_id": [f"c{i:04d}" for i in range(n)],
            "doc_id": [f"d{i // 10}" for i in range(n)],
            "doc_version": ["v1"] * n,
            "doc_version_id": [f"d{i // 10}" for i in range(n)],
            "kind": ["document"] * n,
            "tenant_id": ["a" if i % 3 else "b" for i in range(n)],
            "section_path": [[]] * n,
            "char_start": [0] * n,
            "char_end": [len(t) for t in texts],
            "text": texts,
            "token_count": [7] * n,
            "content_hash": [f"c{i:04d}" for i in range(n)],
            "trust": ["untrusted"] * n,
            "authority": pa.array([None] * n, pa.float64()),
            "effective_from": pa.array([0] * n, ts),
            "effective_to": pa.array([None] * n, ts),
            "acl": [["*"] if i % 2 else ["sre"] for i in range(n)],
        }
    )
    return EvidenceIndex.from_rows(table, vectors, SearchSettings())


def test_one_searcher_answers_every_candidate_count_like_search():
    index = _index()
    query = np.random.default_rng(4).standard_normal(384).astype(np.float32)
    searcher = index.searcher("a", ["sre"], "rotate the api key", query, None)
    for n in (5, 20, 40, 80, 160, 320):
        assert searcher.top(n, n) == index.search(
            "a", ["sre"], "rotate the api key", query, n, None, n
        )
    # the scope came first: only tenant a's rows, with their groups
    rows = {r.row for r in searcher.top(320, 320)}
    assert rows and all(index.row(r)["tenant_id"] == "a" for r in rows)


def test_rows_read_from_cached_columns_match_the_arrow_table():
    index = _index(50)
    for row in (0, 17, 49):
        expected = {
            name: index.meta.column(name)[row].as_py()
            for name in index.meta.column_names
        }
        assert index.row(row) == expected


def test_the_source_registry_is_read_once_per_snapshot(monkeypatch):
    from ctxledger.serving import context as context_mod
    from ctxledger.warehouse import sources

    calls = []

    def active(wh, policy=None):
        calls.append(wh.snapshot)
        return SimpleNamespace(snapshot=wh.snapshot)

    monkeypatch.setattr(sources, "active_registry", active)
    ctx = context_mod.Context(reader=None, policy=None)  # type: ignore[arg-type]
    wh1 = SimpleNamespace(snapshot=1, current_snapshot=lambda: 1)
    wh2 = SimpleNamespace(snapshot=2, current_snapshot=lambda: 2)
    wh3 = SimpleNamespace(snapshot=3, current_snapshot=lambda: 3)
    assert [ctx._registry(wh1).snapshot for _ in range(5)] == [1] * 5
    assert ctx._registry(wh2).snapshot == 2
    assert ctx._registry(wh3).snapshot == 3
    assert calls == [1, 2, 3]
    assert sorted(ctx._registries) == [2, 3]  # old snapshots are let go


def test_a_server_embeds_queries_on_one_thread_unless_the_policy_says():
    from ctxledger.schemas.policy import load_policy
    from ctxledger.serving.context import serving_policy

    policy = load_policy(None)
    assert policy.evidence.embedding.torch_threads == 0
    served = serving_policy(policy)
    assert served.evidence.embedding.torch_threads == 1
    assert served.evidence.search == policy.evidence.search
    assert served.memory == policy.memory
    embedding = policy.evidence.embedding.model_copy(update={"torch_threads": 2})
    evidence = policy.evidence.model_copy(update={"embedding": embedding})
    explicit = policy.model_copy(update={"evidence": evidence})
    assert serving_policy(explicit) is explicit


def test_blas_runs_on_the_threads_a_server_asks_for():
    threadpoolctl = pytest.importorskip("threadpoolctl")
    from ctxledger.serving.context import limit_blas_threads

    before = threadpoolctl.threadpool_info()
    try:
        limit_blas_threads(1)
        blas = [p for p in threadpoolctl.threadpool_info() if p["user_api"] == "blas"]
        assert blas and all(p["num_threads"] == 1 for p in blas)
    finally:
        for pool in before:
            if pool["user_api"] == "blas":
                threadpoolctl.threadpool_limits(pool["num_threads"], user_api="blas")


def test_serve_workers_gives_each_worker_process_its_own_context(monkeypatch, tmp_path):
    """``ctxledger serve --workers N``: the supervisor (``Workers``) runs N
    processes, and the factory each one calls (``worker_app``) opens its own
    ``Context`` with the server's arguments (from the environment, so they
    reach spawned processes); the app closes it at shutdown."""
    import json

    from fastapi.testclient import TestClient

    from ctxledger.serving import http

    tokens = tmp_path / "tokens.json"
    row = {"token": "t" * 20, "tenant": "acme", "groups": ["support"]}
    tokens.write_text(json.dumps({"tokens": [row]}))
    ran: list = []
    monkeypatch.setattr(
        http.Workers, "run", lambda self: ran.append((self.count, self.port))
    )
    monkeypatch.delenv(http.WORKER_ENV, raising=False)
    http.serve_workers(
        "wh", str(tokens), workers=3, port=9, catalog=None, policy_file=None,
        poll_s=2.0,
    )  # fmt: skip
    assert ran == [(3, 9)]

    opened: list = []

    class _Context:
        snapshot_id = 7
        policy = SimpleNamespace(
            evidence=SimpleNamespace(artifacts=SimpleNamespace(operator_groups=[]))
        )
        closed = False

        @classmethod
        def open(cls, path, **kw):
            opened.append((path, kw))
            return cls()

        def close(self):
            type(self).closed = True

    monkeypatch.setattr(http, "Context", _Context)
    app = http.worker_app()
    assert opened == [("wh", {"poll_s": 2.0})]
    with TestClient(app) as client:
        assert client.get("/health").json() == {"status": "ok", "snapshot_id": 7}
        assert not _Context.closed
    assert _Context.closed


def test_a_worker_that_cannot_start_stops_the_server(monkeypatch, tmp_path):
    """A worker that dies before it serves (here: no warehouse) would die
    the same way on every restart: the supervisor stops and says so."""
    import json

    from ctxledger.serving import http

    tokens = tmp_path / "tokens.json"
    tokens.write_text(json.dumps({"tokens": [{"token": "t" * 20, "tenant": "a"}]}))
    spec = {"warehouse": str(tmp_path / "missing"), "tokens": str(tokens)}
    monkeypatch.setenv(http.WORKER_ENV, json.dumps(spec))
    with pytest.raises(RuntimeError, match="failed to start"):
        http.Workers(1, "127.0.0.1", 0).run()
