"""The memory classifier embeds a batch of sessions in shared forward passes.

``ExtractSessionMemoriesFn`` runs the rule extractor over a batch of sessions
inside ``MiniLMEncoder.collect()`` (texts recorded, no model), embeds them in
batches (``warm``), then extracts each session for real from the cache
(issue 14: per-session passes of one or two sentences cost several times
their share of a batch). The dry run must decide nothing: the real run gives
the candidates it gives alone, and finds every vector cached.
"""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
import pytest

from ctxledger.pipelines.config import JobConfig
from ctxledger.pipelines.ingest.grouped import SessionGroup
from ctxledger.pipelines.memory.classify import MiniLMEncoder, PrototypeClassifier
from ctxledger.schemas import Message, Session
from ctxledger.schemas.policy import load_policy


class _FakeOnnx:
    """An ``onnx-int8``-style model: numpy rows, no tokenizer (one call)."""

    def __init__(self):
        self.calls: list[list[str]] = []

    def encode(self, texts, batch_size):
        self.calls.append(list(texts))
        rows = np.zeros((len(texts), 384), dtype=np.float32)
        rows[:, 0] = 1.0
        return rows


@pytest.fixture
def fake_encoder():
    encoder = MiniLMEncoder(backend="onnx-int8", bf16=False)
    encoder._model = _FakeOnnx()
    added = []
    yield encoder, added
    for text in added:  # the cache is process-wide: leave it as found
        encoder._cache.pop(text, None)


def test_collect_records_without_the_model_and_warm_fills_the_cache(fake_encoder):
    encoder, added = fake_encoder
    texts = ["t1 collect test: I prefer email.", "t1 collect test: my team is A."]
    added.extend(texts)
    with encoder.collect() as wanted:
        rows = encoder([texts[0], texts[1], texts[0]])
        with pytest.raises(RuntimeError):
            with encoder.collect():
                pass
    assert encoder._model.calls == []  # no model inside collect()
    assert list(wanted) == texts and rows.shape == (3, 384) and not rows.any()
    assert not encoder.collecting
    assert encoder.warm(list(wanted)) == 2
    assert encoder._model.calls == [texts]  # one batched call
    assert encoder.warm(texts) == 0
    assert encoder(texts)[:, 0].tolist() == [1.0, 1.0]
    assert len(encoder._model.calls) == 1  # served from the cache
    with encoder.collect() as wanted:  # cached texts: real rows, nothing recorded
        assert encoder(texts)[:, 0].tolist() == [1.0, 1.0]
    assert not wanted


def test_prototype_matrix_is_not_kept_from_a_collecting_call(fake_encoder):
    encoder, added = fake_encoder
    prototypes = {"a": ("t1 proto test one",), "b": ("t1 proto test two",)}
    added.extend(t for texts in prototypes.values() for t in texts)
    classifier = PrototypeClassifier(encoder, prototypes, 0.5, 0.0)
    with encoder.collect() as wanted:
        assert not classifier.matrix.any()  # placeholder rows
    assert classifier._matrix is None and len(wanted) == 2
    encoder.warm(list(wanted))
    assert classifier.matrix[:, 0].tolist() == [1.0, 1.0]
    assert classifier._matrix is not None


def _element(session_id: str, subject: str, lines: list[str]):
    session = Session(
        session_id=session_id,
        tenant_id="acme",
        source_format="canonical",
        source_file=f"tenant=acme/subject={subject}/chat.jsonl",
        source_hash=f"h-{session_id}",
    )
    messages = [
        Message(
            message_id=f"msg_{session_id}_{turn}",
            session_id=session_id,
            tenant_id="acme",
            turn=turn,
            role="user" if turn % 2 == 0 else "assistant",
            content=text,
            content_hash="h",
            created_at=datetime(2026, 3, 14, 10, turn, tzinfo=UTC),
            token_count=1,
            policy_version="p",
            source_ref=f"f#line:{turn + 1}",
        )
        for turn, text in enumerate(lines)
    ]
    return SessionGroup(session_id, (session,), tuple(messages))


BATCH = [
    _element(
        "ses_t1_a",
        "ana",
        [
            "Brief replies suit me best. Our office is in Lisbon.",
            "Noted.",
            "Never call me before nine, and send receipts to accounts payable.",
        ],
    ),
    _element(
        "ses_t1_b",
        "bo",
        [
            "I work on the payments team and I'd rather get updates by email.",
            "Sure.",
            "The outage was caused by a bad config push. Run the tests.",
        ],
    ),
    SessionGroup("ses_t1_orphan"),
]


def _fn():
    from ctxledger.pipelines.memory.transforms import ExtractSessionMemoriesFn

    policy = load_policy(None)
    config = JobConfig(
        job="test",
        run_id="run_t1",
        landing="/nonexistent/landing",
        warehouse="/nonexistent/wh",
        policy_version=policy.policy_version,
        code_version="test",
    )
    fn = ExtractSessionMemoriesFn(config, policy)
    fn.setup()
    return fn


def _candidates(outputs):
    from ctxledger.pipelines.memory.extract import MemoryCandidate

    return sorted(
        (c.memory_id, c.subject_id, c.kind, c.text, c.purpose, c.extractor)
        for c in outputs
        if isinstance(c, MemoryCandidate)
    )


@pytest.mark.slow
def test_batched_sessions_give_their_own_candidates_from_the_cache():
    from ctxledger.pipelines.memory import classify

    alone = []
    for element in BATCH:  # a batch of one: no dry run
        alone.extend(_fn().process([element]))
    fn = _fn()
    model = fn._encoder.load()._model
    classify._VECTORS.clear()  # nothing cached: the batch must embed it all
    calls = []
    original = model.encode

    def counting(texts, *args, **kwargs):
        calls.append(list(texts))
        return original(texts, *args, **kwargs)

    model.encode = counting
    try:
        with fn._encoder.collect() as seen:
            pass
        assert not seen
        fn._warm(BATCH)
        warmed = sum(map(len, calls))
        batched = list(fn._session(BATCH[0])) + list(fn._session(BATCH[1]))
    finally:
        del model.encode  # the instance attribute; the class method is back
    assert warmed > 0
    assert sum(map(len, calls)) == warmed  # the real run embedded nothing
    got = _candidates(batched)
    assert got and got == _candidates(alone)
