"""The ``onnx-int8`` embedding backend (``pipelines.onnx_minilm``).

The slow test exports the packaged MiniLM once per session into a temporary
cache (a real export in a fresh interpreter, without transformers: torch ->
ONNX -> ORT optimizer -> int8) and checks its
vectors against torch fp32, through both callers: the evidence ``Embedder``
and the memory classifier's ``MiniLMEncoder``.
"""

from __future__ import annotations

import numpy as np
import pytest
from pydantic import ValidationError

from ctxledger.pipelines.evidence.embed import Embedder
from ctxledger.schemas.evidence import EmbeddingSettings

SENTENCES = [
    "The deploy failed with exit code 1 after the migration step.",
    "I prefer to be contacted by email rather than by phone.",
    "kubelet has too many pods and new pods are pending",
    "Run pytest tests/unit -q and fix the failing assertion in test_parse.",
    "The incident commander hands off to the next on-call engineer.",
]


def test_backend_setting_defaults_to_torch_and_rejects_unknown():
    assert EmbeddingSettings().backend == "torch"
    assert EmbeddingSettings(backend="onnx-int8").backend == "onnx-int8"
    with pytest.raises(ValidationError):
        EmbeddingSettings(backend="onnx-fp16")


def test_onnx_backend_encodes_without_torch_autocast():
    """The ONNX path hands texts and the batch size to the model as they are
    and returns its rows (no torch, no autocast)."""
    calls = []

    class FakeOnnx:
        def encode(self, texts, batch_size):
            calls.append((list(texts), batch_size))
            return np.eye(len(texts), 384, dtype=np.float64)

    settings = EmbeddingSettings(backend="onnx-int8", max_batch_size=7)
    out = Embedder(settings).encode(["a", "b"], model=FakeOnnx())
    assert calls == [(["a", "b"], 7)]
    assert out.dtype == np.float32 and out.shape == (2, 384)


def test_export_key_follows_weights_and_recipe(tmp_path, monkeypatch):
    from ctxledger.pipelines import onnx_minilm

    (tmp_path / "config.json").write_text("{}")
    (tmp_path / "model.safetensors").write_bytes(b"weights-1")
    first = onnx_minilm.export_key(str(tmp_path))
    assert onnx_minilm.export_key(str(tmp_path)) == first  # deterministic
    (tmp_path / "model.safetensors").write_bytes(b"weights-2")
    second = onnx_minilm.export_key(str(tmp_path))
    assert second != first
    monkeypatch.setattr(onnx_minilm, "RECIPE", "another-recipe")
    assert onnx_minilm.export_key(str(tmp_path)) not in (first, second)


def test_unknown_backend_is_refused_before_loading():
    from ctxledger.pipelines.models import sentence_model

    with pytest.raises(ValueError, match="unknown embedding backend"):
        sentence_model("/nonexistent", backend="tensorrt")


#: The export in a fresh interpreter: it must not need transformers (the
#: graph is ``pipelines.minilm_export`` over the weights ``minilm`` loads).
EXPORT = """
import sys
from ctxledger.pipelines.evidence.embed import model_path
from ctxledger.pipelines.onnx_minilm import export_int8
print(export_int8(model_path("all-MiniLM-L6-v2")))
heavy = sorted(m for m in ("transformers", "sentence_transformers") if m in sys.modules)
assert not heavy, heavy
"""


@pytest.fixture(scope="session")
def onnx_cache(tmp_path_factory):
    """One real export per test session, in a cache of its own."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    cache = tmp_path_factory.mktemp("ctxledger-cache")
    before = os.environ.get("CTXLEDGER_CACHE")
    os.environ["CTXLEDGER_CACHE"] = str(cache)
    try:
        done = subprocess.run(
            [sys.executable, "-c", EXPORT],
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert done.returncode == 0, done.stderr[-2000:]
        path = Path(done.stdout.strip().splitlines()[-1])
        assert path.is_relative_to(cache)
        yield path
    finally:
        if before is None:
            os.environ.pop("CTXLEDGER_CACHE", None)
        else:
            os.environ["CTXLEDGER_CACHE"] = before


@pytest.mark.slow
def test_onnx_int8_vectors_match_torch_fp32(onnx_cache):
    from ctxledger.pipelines.memory.classify import MiniLMEncoder

    assert onnx_cache.is_file() and onnx_cache.name == "model-int8.onnx"
    fp32 = Embedder(EmbeddingSettings(), precision="fp32").encode(SENTENCES)
    int8 = Embedder(EmbeddingSettings(backend="onnx-int8")).encode(SENTENCES)
    assert int8.shape == fp32.shape == (len(SENTENCES), 384)
    np.testing.assert_allclose(np.linalg.norm(int8, axis=1), 1.0, atol=1e-5)
    cosine = np.sum(fp32 * int8, axis=1)
    # int8 weights move each vector a little (bench: mean 0.993 on real text)
    assert cosine.mean() >= 0.99 and cosine.min() >= 0.98, cosine
    # the memory classifier reads the same model and vectors; input order is
    # kept although batches are sorted by length
    encoder = MiniLMEncoder(backend="onnx-int8")
    classified = encoder(SENTENCES[::-1])
    np.testing.assert_allclose(classified, int8[::-1], atol=1e-5)
