"""The array paths ``pack`` takes for speed give what the plain ones give.

A warm /pack spends its time on ~160 candidates and their manifest items, so
four steps run on arrays instead of per-row Python: the fused candidate rows
(``Searcher.top_rows`` against ``Searcher.top``), the score rounding
(``round6`` against ``round(x, 6)``), the shingle overlap and closest cosine
that ``_Greedy.add`` keeps per candidate (against sets and a loop), and
every candidate's relevance in one matrix-vector product (against a dot per
candidate). Each is checked here against the plain computation on random
inputs, ties included (repeated texts and vectors): the first three give the
same values, since a manifest must not change; relevance agrees to float32
precision (another summation order may move the last bit of a cosine).
"""

from __future__ import annotations

import math

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxledger.schemas.evidence import MAX_REQUEST_TOKENS, PackSettings, SearchSettings
from ctxledger.serving.evidence_index import EvidenceIndex
from ctxledger.serving.evidence_pack import (
    Candidate,
    _Greedy,
    _relevance,
    _shingle_array,
    _stacked,
    round6,
)

_WORDS = "rotate key api on call pager escalate restart node disk".split()


def _same_float(a: float, b: float) -> bool:
    if math.isnan(b):
        return math.isnan(a)
    return a == b and math.copysign(1.0, a) == math.copysign(1.0, b)


@given(
    st.lists(
        st.one_of(
            st.floats(allow_nan=True, allow_infinity=True),
            st.floats(min_value=-2.0, max_value=2.0),
            # exact and near halves of the sixth decimal
            st.integers(-2_000_000, 2_000_000).map(lambda k: (k + 0.5) / 1e6),
            st.integers(-2_000_000, 2_000_000).map(lambda k: k / 1e6 + 5e-7),
        ),
        max_size=60,
    )
)
def test_round6_is_round_to_six_places(values):
    assert all(
        _same_float(a, round(v, 6)) for a, v in zip(round6(values), values, strict=True)
    )


@given(st.integers(0, 2**32 - 1), st.integers(0, 40), st.integers(1, 24))
def test_relevance_is_each_candidates_clipped_cosine(seed, n, dim):
    rng = np.random.default_rng(seed)
    vectors = rng.standard_normal((n, dim)).astype(np.float32)
    vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-6)
    query = vectors[0] if n and seed % 3 == 0 else rng.standard_normal(dim)
    query = (query / np.linalg.norm(query)).astype(np.float32)
    got = _relevance(vectors, query)
    assert len(got) == n
    for value, row in zip(got, vectors, strict=True):
        expected = max(0.0, min(1.0, float(row.dot(query))))
        assert 0.0 <= value <= 1.0
        assert value == pytest.approx(expected, abs=1e-6)
    assert _relevance(np.zeros((0, dim), dtype=np.float32), query) == []


def test_stacked_holds_each_candidates_float32_vector():
    rng = np.random.default_rng(7)
    rows = [rng.standard_normal(5) for _ in range(4)]  # float64 in, float32 out
    candidates = [Candidate(
        item_id=f"c{i}", kind="evidence", source="s", trust="trusted",
        version="v1", text="t", token_count=1, vector=v, authority=1.0,
        effective_from=None, content_key=f"k{i}",
    ) for i, v in enumerate(rows)]  # fmt: skip
    matrix = _stacked(candidates)
    assert matrix.dtype == np.float32 and matrix.shape == (4, 5)
    for got, v in zip(matrix, rows, strict=True):
        assert np.array_equal(got, np.asarray(v, dtype=np.float32))
    assert _stacked([]).shape == (0, 1)


def _index(seed: int, n: int) -> EvidenceIndex:
    """``n`` chunks in tenants a/b with repeated texts and vectors (ties in
    both rankings), ACLs ``*``/``sre``."""
    rng = np.random.default_rng(seed)
    texts = [" ".join(rng.choice(_WORDS, size=4)) for _ in range(n)]
    base = rng.standard_normal((max(1, n // 3), 384)).astype(np.float32)
    vectors = base[rng.integers(0, len(base), size=n)]
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    ts = pa.timestamp("us", tz="UTC")
    table = pa.table(
        {
            "chunk_id": [f"c{int(i):05d}" for i in rng.permutation(n)],
            "doc_id": [f"d{i // 5}" for i in range(n)],
            "doc_version": ["v1"] * n,
            "doc_version_id": [f"d{i // 5}" for i in range(n)],
            "kind": ["document"] * n,
            "tenant_id": ["a" if i % 4 else "b" for i in range(n)],
            "section_path": [[]] * n,
            "char_start": [0] * n,
            "char_end": [len(t) for t in texts],
            "text": texts,
            "token_count": [7] * n,
            "content_hash": [f"h{i}" for i in range(n)],
            "trust": ["untrusted"] * n,
            "authority": pa.array([None] * n, pa.float64()),
            "effective_from": pa.array([0] * n, ts),
            "effective_to": pa.array([None] * n, ts),
            "acl": [["*"] if i % 3 else ["sre"] for i in range(n)],
        }
    )
    # IVF lists from 16 rows on: rows sort by tenant, list, chunk id, so row
    # order is not chunk-id order and ties must break by chunk id
    return EvidenceIndex.from_rows(table, vectors, SearchSettings(ivf_min_rows=16))


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    n=st.integers(1, 120),
    tenant=st.sampled_from(["a", "b", "c"]),
    groups=st.sampled_from([[], ["sre"], ["billing"]]),
    query=st.lists(st.sampled_from([*_WORDS, "zebra"]), min_size=1, max_size=4),
    sizes=st.lists(st.integers(1, 150), min_size=1, max_size=4),
)
def test_top_rows_are_the_rows_of_top(seed, n, tenant, groups, query, sizes):
    index = _index(seed, n)
    vector = np.random.default_rng(seed + 1).standard_normal(384).astype(np.float32)
    searcher = index.searcher(tenant, groups, " ".join(query), vector, None)
    for k in sizes:
        for candidates in (k, 2 * k):
            rows = searcher.top_rows(k, candidates)
            assert rows.tolist() == [r.row for r in searcher.top(k, candidates)]


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    n=st.integers(1, 40),
    pool=st.integers(1, 60),
    picks=st.lists(st.integers(0, 39), max_size=25),
)
def test_greedy_overlap_and_closest_match_sets(seed, n, pool, picks):
    rng = np.random.default_rng(seed)
    hashes = rng.integers(-(2**62), 2**62, size=pool)
    vectors = rng.standard_normal((n, 384)).astype(np.float32)
    candidates = [
        Candidate(
            item_id=f"i{i}",
            kind="evidence",
            source="s",
            trust="trusted",
            version="v",
            text=f"t{i}",
            token_count=5,
            vector=vectors[i],
            authority=1.0,
            effective_from=None,
            content_key=f"k{i}",
            shingles=frozenset(
                int(h) for h in rng.choice(hashes, size=rng.integers(0, 8))
            ),
            relevance=0.5,
        )
        for i in range(n)
    ]
    for c in candidates[::2]:  # rows' candidates carry their shingle array
        c.shingle_ids = _shingle_array(c.shingles)
    for c in candidates[::3]:  # and some an injection-risk penalty
        c.risk = 0.15
    state = _Greedy(candidates, PackSettings())
    seen: set[int] = set()
    best = np.full(n, -1.0)
    closest = np.full(n, -1)
    for pick in [p % n for p in picks]:
        state.add(pick)
        seen |= candidates[pick].shingles
        sims = state.vectors @ vectors[pick]
        better = sims > best
        best[better], closest[better] = sims[better], pick
        shared = [len(c.shingles & seen) for c in candidates]
        assert state.shared.tolist() == shared
        assert state.max_cos.tolist() == best.tolist()
        assert state.closest.tolist() == closest.tolist()
        assert [state._closest_of(j) for j in range(n)] == closest.tolist()
        # one candidate at a time (the lazy selection) = the arrays, exactly
        utility, near = state.utilities()
        penalty = state._now()[0]
        for j in range(n):
            assert state.utility_of(j) == (utility[j], near[j])
            assert _same_float(state.penalty(j), float(penalty[j]))
        assert state.monotone


def _reference_apply_sources(candidates, registry, settings, at, clearance):
    """``_apply_sources`` as it was: ``_stamp`` and ``above_clearance`` per
    candidate, no per-call memo."""
    from ctxledger.schemas.sources import above_clearance
    from ctxledger.serving.evidence_pack import _aware, _stamp

    kept, dropped, withheld = [], [], 0
    for c in candidates:
        spec = _stamp(c, registry, settings, at)
        if above_clearance(spec.sensitivity, clearance):
            withheld += 1
        elif spec.invalidated:
            dropped.append((c, "source_invalidated"))
        elif (
            spec.ttl_days is not None
            and c.effective_from is not None
            and (at - _aware(c.effective_from)).total_seconds() / 86_400.0
            > spec.ttl_days
        ):
            dropped.append((c, "source_expired"))
        else:
            kept.append(c)
    return kept, dropped, withheld


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    n=st.integers(0, 60),
    clearance=st.sampled_from(["public", "internal", "confidential", "restricted"]),
    stamped=st.booleans(),
)
def test_apply_sources_memo_matches_the_per_candidate_loop(seed, n, clearance, stamped):
    """``_apply_sources`` works out freshness per (date, half-life) and
    clearance per source once a call; the verdicts, freshness values, order
    and stamped fields equal the per-candidate loop's, for dates shared by
    many candidates, naive and aware dates, unknown dates, several sources
    (half-lives, TTLs, sensitivities, invalidated) and pre-stamped rows."""
    from datetime import UTC, datetime, timedelta

    from ctxledger.schemas.sources import SourceRegistry, SourceSpec
    from ctxledger.serving.evidence_pack import _apply_sources, _copy, _stamp_source

    rng = np.random.default_rng(seed)
    at = datetime(2026, 12, 1, 12, tzinfo=UTC)
    specs = (
        SourceSpec(source_id="runbooks", kind="document", match=("run*",),
                   freshness_half_life_days=30.0, sensitivity="public"),
        SourceSpec(source_id="wiki", kind="document", match=("wiki*",),
                   ttl_days=40.0, sensitivity="confidential"),
        SourceSpec(source_id="old", kind="document", match=("old*",),
                   invalidated=True, authority=0.2),
        SourceSpec(source_id="secret", kind="document", match=("sec*",),
                   sensitivity="restricted"),
    )  # fmt: skip
    registry = SourceRegistry(sources=specs)
    days = [None, *rng.uniform(-5, 120, size=6).tolist()]
    pack = PackSettings()
    made = []
    for i in range(n):
        d = days[int(rng.integers(len(days)))]
        when = None if d is None else at - timedelta(days=d)
        if when is not None and rng.random() < 0.2:
            when = when.replace(tzinfo=None)
        doc = str(rng.choice(["run-a", "wiki-b", "old-c", "sec-d", "misc-e"]))
        c = Candidate(
            item_id=f"i{i}", kind="evidence", source="s", trust="trusted",
            version="v", text="t", token_count=5, vector=np.zeros(3),
            authority=0.5, effective_from=when, content_key=f"k{i}",
            source_keys=(doc,), relevance=0.5,
        )  # fmt: skip
        if stamped:
            _stamp_source(c, registry, pack)
        made.append(c)
    ours = [_copy(c) for c in made]
    theirs = [_copy(c) for c in made]
    got = _apply_sources(ours, registry, pack, at, clearance)
    want = _reference_apply_sources(theirs, registry, pack, at, clearance)
    assert got[2] == want[2]
    assert [c.item_id for c in got[0]] == [c.item_id for c in want[0]]
    assert [(c.item_id, r) for c, r in got[1]] == [(c.item_id, r) for c, r in want[1]]
    for a, b in zip(ours, theirs, strict=True):
        assert vars(a) == vars(b)


_JSON_TEXT = st.text(
    st.characters(blacklist_categories=("Cs",)), max_size=20
)  # every code point but lone surrogates (UTF-8 cannot carry them either way)


@settings(max_examples=150, deadline=None)
@given(
    query=_JSON_TEXT,
    groups=st.lists(_JSON_TEXT, max_size=3),
    window=st.integers(1, MAX_REQUEST_TOKENS),
    candidates=st.one_of(st.none(), st.integers(1, 500)),
    flags=st.tuples(st.booleans(), st.booleans()),
    selected=st.lists(_JSON_TEXT, max_size=4),
    dropped=st.lists(st.tuples(_JSON_TEXT, _JSON_TEXT), max_size=4),
)
def test_manifest_id_is_the_content_hash_of_the_decision(
    query, groups, window, candidates, flags, selected, dropped
):
    """``_manifest_id`` writes the canonical JSON with orjson; it must hash
    the same text ``content_hash`` does (control characters, non-ASCII,
    quotes included; windows past ``MAX_REQUEST_TOKENS``, such as integers
    past 64 bits that orjson refuses, are refused by ``PackRequest`` itself)."""
    from datetime import UTC, datetime

    from ctxledger.schemas import content_hash
    from ctxledger.schemas.evidence import PackRequest
    from ctxledger.serving.evidence_pack import _manifest_id

    request = PackRequest(
        tenant_id="t\u00e9",
        principal_groups=groups,
        query=query or "q",
        window_tokens=window,
        candidates=candidates,
        include_memories=flags[0],
        include_evidence=flags[1],
        as_of=datetime(2026, 1, 2, 3, 4, 5, 6789, tzinfo=UTC),
    ).model_dump(mode="json", exclude={"include_dropped_content"})
    assert _manifest_id(request, selected, dropped) == content_hash(
        request, selected, dropped, prefix="ctx_"
    )


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    n=st.integers(2, 120),
    picks=st.lists(st.integers(0, 6), min_size=1, max_size=12),
)
def test_scope_vectors_are_the_gathered_rows_and_stay_bounded(seed, n, picks):
    """``scope_vectors`` keeps gathered scope vectors: each is exactly
    ``vectors[rows]`` (the matrix the cosines are computed on, bit for bit),
    read-only, and the kept bytes never pass ``SCOPE_VECTORS_BYTES``."""
    import ctxledger.serving.evidence_index as evidence_index

    index = _index(seed, n)
    rng = np.random.default_rng(seed)
    scopes = [
        np.sort(rng.choice(n, size=rng.integers(1, n + 1), replace=False))
        for _ in range(7)
    ]
    limit = 3 * n * 384 * 4 // 2  # room for a few, so old ones are evicted
    query = rng.standard_normal(384).astype(np.float32)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(evidence_index, "SCOPE_VECTORS_BYTES", limit)
        _gather_scopes(index, scopes, picks, query, limit)


def _gather_scopes(index, scopes, picks, query, limit) -> None:
    for pick in picks:
        rows = scopes[pick]
        got = index.scope_vectors(rows.copy())
        assert np.array_equal(got, index.vectors[rows])
        assert not got.flags.writeable
        fresh = index.vectors[rows] @ query
        assert np.array_equal((got @ query).view(np.int32), fresh.view(np.int32))
        assert index._scope_bytes <= limit
        assert index._scope_bytes == sum(
            v.nbytes for v in index._scope_vectors.values()
        )
