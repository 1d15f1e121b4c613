"""Models loaded once per process and shared by every stage that uses them.

The memory classifier and the evidence embedder both use MiniLM; a job's stages
(and a stream's micro-batches) would otherwise each load it again (seconds of
every run). Models are only used for inference after loading (``eval()``, no
weights changed; bf16 runs under autocast), so one instance serves all callers.
"""

from __future__ import annotations

import os
import threading
from typing import Any

_MODELS: dict[str, Any] = {}
_LOCK = threading.Lock()


def sentence_model(path: str) -> Any:
    """The ``SentenceTransformer`` at local ``path`` on the CPU, loaded once."""
    with _LOCK:
        model = _MODELS.get(path)
        if model is None:
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
            os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
            from sentence_transformers import SentenceTransformer  # noqa: PLC0415
            from transformers.utils import logging as hf_logging  # noqa: PLC0415

            hf_logging.disable_progress_bar()  # no bars in job output
            model = SentenceTransformer(path, device="cpu")
            model.eval()
            _MODELS[path] = model
        return model
