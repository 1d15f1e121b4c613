"""Our MiniLM forward pass (``pipelines.minilm``) against sentence-transformers.

The torch backend no longer imports sentence-transformers or transformers
(4-6 s of every process that embeds, issue 14); it must still give the
vectors the packaged model gives through ``SentenceTransformer.encode(
normalize_embeddings=True)``, which stays installed for this comparison
(the dev extra). The texts are the repository's own fixtures: strings of
the trimmed agent transcripts (tests/fixtures/transcripts), the runbook
chunks (tests/fixtures/evidence) and edge cases (whitespace, accents, CJK,
control characters, texts cut at 256 word pieces). bench/bench_embed.py
measures the same on 1,000+ texts of the corpora.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ctxledger.pipelines.evidence.embed import model_path

ROOT = Path(__file__).resolve().parents[3]
FIXTURES = ROOT / "tests" / "fixtures"
EDGE_CASES = [
    "  leading and trailing blanks  ",
    "\t\ttabs and a newline\n",
    "",
    "   ",
    "\u00a0no-break\u3000ideographic space",
    "control\x1ccharacters\x1f and \x00 nul",
    "Ünïcödé ÀÉÎ naïve café façade",
    "中文字符测试 and 日本語",
    "emoji 😀 and symbols ∑ → ≥",
    "Traceback (most recent call last): File app.py, line 3 " * 30,
    "x" * 3000,
    "word " * 400,
]
QUERIES = [
    "what does the incident commander do during a major incident",
    "how do I hand off on-call at the end of my shift",
    "the database is out of disk space",
    "rotate a leaked credential",
]


def _strings(value, out: dict[str, None]) -> None:
    if isinstance(value, str):
        if len(value.strip()) >= 40:
            out.setdefault(value.strip())
    elif isinstance(value, dict):
        for item in value.values():
            _strings(item, out)
    elif isinstance(value, list):
        for item in value:
            _strings(item, out)


def transcript_texts() -> list[str]:
    """Distinct 40+ character strings of the transcript fixtures."""
    seen: dict[str, None] = {}
    for path in sorted((FIXTURES / "transcripts").iterdir()):
        if path.suffix not in (".json", ".jsonl", ".traj"):
            continue
        raw = path.read_text(errors="replace")
        for line in raw.splitlines() if path.suffix == ".jsonl" else [raw]:
            try:
                _strings(json.loads(line), seen)
            except ValueError:
                continue
    return list(seen)


def runbook_chunks() -> list[str]:
    from ctxledger.pipelines.evidence.chunking import chunk_text
    from ctxledger.pipelines.evidence.landing import split_front_matter

    chunks = []
    for path in sorted((FIXTURES / "evidence").rglob("*.md")):
        raw = path.read_text()
        body = raw[split_front_matter(raw)[1] :]
        chunks += [body[c.char_start : c.char_end] for c in chunk_text(body)]
    return chunks


@pytest.fixture(scope="module")
def path() -> str:
    return model_path("all-MiniLM-L6-v2")


@pytest.fixture(scope="module")
def ours(path):
    from ctxledger.pipelines.minilm import MiniLM

    return MiniLM(path)


@pytest.fixture(scope="module")
def reference(path):
    """The packaged model through sentence-transformers (what ``torch`` ran
    before ``pipelines.minilm``)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(path, device="cpu")


def _st(model, texts: list[str]) -> np.ndarray:
    return model.encode(
        texts, batch_size=32, normalize_embeddings=True, show_progress_bar=False
    )


def test_fixture_texts_are_enough():
    """The comparison below is only as good as its texts: keep it broad."""
    texts = transcript_texts()
    assert len(texts) >= 150
    assert len(runbook_chunks()) >= 30


@pytest.mark.slow
def test_word_pieces_match_the_transformers_tokenizer(ours, reference):
    texts = transcript_texts() + EDGE_CASES
    theirs = reference.tokenizer(
        texts, truncation="longest_first", max_length=reference.max_seq_length
    )["input_ids"]
    assert reference.max_seq_length == ours.max_seq_length == 256
    assert ours.tokenizer.ids(texts) == [list(ids) for ids in theirs]
    long = ours.tokenizer.ids(["word " * 400])[0]
    assert len(long) == 256 and long[0] == 101 and long[-1] == 102  # [CLS] [SEP]
    assert ours.word_piece_lengths(["", "hello world"]) == [2, 4]


@pytest.mark.slow
def test_vectors_match_sentence_transformers(ours, reference):
    texts = transcript_texts() + runbook_chunks() + EDGE_CASES
    want = _st(reference, texts)
    got = ours.encode(texts)
    assert got.dtype == np.float32 and got.shape == (len(texts), 384)
    np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
    cosine = np.sum(want * got, axis=1)
    assert cosine.min() >= 0.99999, (cosine.min(), texts[int(cosine.argmin())])
    # the same evidence ranks first: top-10 runbook chunks per question
    chunks = runbook_chunks()
    scores_want = _st(reference, QUERIES) @ _st(reference, chunks).T
    scores_got = ours.encode(QUERIES) @ ours.encode(chunks).T
    for row_want, row_got in zip(scores_want, scores_got, strict=True):
        top_want = np.argsort(-row_want, kind="stable")[:10]
        top_got = np.argsort(-row_got, kind="stable")[:10]
        # the same ranking; only chunks the reference scores alike (the same
        # text twice: 1e-7 of float noise orders them differently per CPU) may
        # trade places
        np.testing.assert_allclose(row_want[top_got], row_want[top_want], atol=1e-6)


@pytest.mark.slow
def test_bf16_autocast_stays_close_to_fp32(ours):
    texts = transcript_texts()[:48]
    cosine = np.sum(ours.encode(texts) * ours.encode(texts, bf16=True), axis=1)
    assert cosine.min() >= 0.999, cosine.min()


def test_encode_keeps_input_order_and_empty_input(ours):
    texts = ["ok", "word " * 300, "The deploy failed.", "ok"]
    out = ours.encode(texts, batch_size=2, budget=16)
    alone = np.concatenate([ours.encode([t]) for t in texts])
    assert (out * alone).sum(axis=1).min() >= 0.99999
    assert ours.encode([]).shape == (0, 384)


def test_a_plan_s_passes_give_encode_s_vectors_from_their_ids_alone(ours, monkeypatch):
    """The embed-ahead helper lends the run a pass as word-piece ids
    (``pipelines.evidence.ahead``): the pass's vectors from those ids alone,
    on one thread, are encode's bit for bit, in the plan's positions."""
    from ctxledger.pipelines import cpu_share

    monkeypatch.setattr(cpu_share, "running_elsewhere", lambda: 0)  # two lanes
    texts = transcript_texts()[:40] + ["ok", "word " * 300]
    for bf16 in (False, True):
        want = ours.encode(texts, batch_size=8, bf16=bf16)
        plan = ours.plan(texts, batch_size=8)
        assert sorted(i for rows, _ in plan for i in rows) == list(range(len(texts)))
        assert len(plan) > 4 and all(len(rows) <= 8 for rows, _ in plan)
        for rows, ids in plan:
            got = ours.forward_pass([list(row) for row in ids], bf16, threads=1)
            assert np.array_equal(got, want[rows])


def test_an_embedder_knows_whether_the_model_is_at_hand(monkeypatch):
    """The run embeds lent passes only when its process loaded MiniLM already
    (no second load for the sake of a few passes)."""
    from ctxledger.pipelines import models
    from ctxledger.pipelines.evidence.embed import Embedder
    from ctxledger.schemas.policy import load_policy

    monkeypatch.setattr(models, "_MODELS", {})
    embedder = Embedder(load_policy(None).evidence.embedding)
    assert not embedder.at_hand()
    models.sentence_model(model_path("all-MiniLM-L6-v2"))  # another user's load
    assert embedder.at_hand()


@pytest.mark.slow
def test_embedding_imports_neither_transformers_nor_sentence_transformers():
    """The point of ``pipelines.minilm``: a process that embeds pays for torch
    and the tokenizer, not for transformers, sentence-transformers or
    scikit-learn (4-6 s of imports on 2 cores), nor for ``torch._dynamo``
    (2.3 s; ``nn.Embedding`` built on the ``meta`` device imports it)."""
    code = (
        "import sys\n"
        "from ctxledger.pipelines.evidence.embed import Embedder\n"
        "from ctxledger.pipelines.memory.classify import MiniLMEncoder\n"
        "from ctxledger.schemas.evidence import EmbeddingSettings\n"
        "assert Embedder(EmbeddingSettings()).encode(['a query']).shape == (1, 384)\n"
        "assert MiniLMEncoder()(['a sentence']).shape == (1, 384)\n"
        "heavy = sorted(m for m in ('transformers', 'sentence_transformers', "
        "'sklearn', 'torch._dynamo') if m in sys.modules)\n"
        "assert not heavy, heavy\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
