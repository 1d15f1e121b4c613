"""Models loaded once per process and shared by every stage that uses them, and
the thread budget each worker process gives them.

The memory classifier and the evidence embedder both use MiniLM; a job's stages
(and a stream's micro-batches) would otherwise each load it again (seconds of
every run). Models are only used for inference after loading (``eval()``, no
weights changed; bf16 runs under autocast), so one instance serves all callers.

Threads: torch, OpenMP/MKL/OpenBLAS (numpy, spaCy's thinc) and tokenizers each
default to one thread per core *per process*. With Beam's multi-process
DirectRunner (``--direct_num_workers=N --direct_running_mode=multi_processing``)
N workers then run N x cores spinning threads on the cores (measured: the
nightly became 4x slower on 2 cores). So the launcher sizes every worker to
``cores // workers`` threads (``threads_per_worker``) through the environment
the worker processes inherit (``worker_thread_env``: OpenMP reads it before
its pool starts), and ``sentence_model`` also sets torch's pool from it, for
workers that share one process (``multi_threading``) where torch may already
be initialised. No torch or Beam import here until a model loads.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from ctxledger.pipelines.batching import TOKEN_BUDGET, token_batches
from ctxledger.pipelines.cpu_share import available_cores

_MODELS: dict[str, Any] = {}
_LOCK = threading.Lock()

#: Set by the launcher for its workers: threads each worker process may use.
WORKER_THREADS_ENV = "CTXLEDGER_WORKER_THREADS"
#: Thread-pool sizes read by OpenMP (torch), MKL, OpenBLAS (numpy, thinc).
THREAD_POOL_ENVS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")
#: Runners whose workers share the launcher's machine (and its cores).
_LOCAL_RUNNERS = ("DirectRunner", "BundleBasedDirectRunner", "SwitchingDirectRunner")


def model_lock() -> threading.Lock:
    """The lock model loads run under (``pipelines.redact.loading`` holds it
    while spaCy imports with torch marked absent)."""
    return _LOCK


def threads_per_worker(cores: int | None, workers: int) -> int:
    """Threads one worker process may use: its share of the cores, at least 1."""
    return max(1, (cores or 1) // max(1, workers))


def beam_flag(beam_args: Sequence[str], name: str) -> str | None:
    """The value of ``--name=value`` or ``--name value`` (the last one wins, as
    in Beam's argparse); None when absent."""
    value = None
    flag = f"--{name}"
    for index, arg in enumerate(beam_args):
        if arg.startswith(flag + "="):
            value = arg.split("=", 1)[1]
        elif arg == flag and index + 1 < len(beam_args):
            value = beam_args[index + 1]
    return value


def local_workers(beam_args: Sequence[str], cores: int | None = None) -> int:
    """Beam worker processes (or threads) that share this machine's cores.

    ``--direct_num_workers=N`` of the DirectRunner in ``multi_processing`` or
    ``multi_threading`` mode (0 means one per core, as in Beam); 1 for the
    default in-memory mode and for remote runners, whose workers run on their
    own machines.
    """
    runner = beam_flag(beam_args, "runner") or "DirectRunner"
    if runner.rsplit(".", 1)[-1] not in _LOCAL_RUNNERS:
        return 1
    mode = beam_flag(beam_args, "direct_running_mode") or "in_memory"
    if mode not in ("multi_processing", "multi_threading"):
        return 1
    raw = beam_flag(beam_args, "direct_num_workers")
    try:
        workers = int(raw) if raw is not None else 1
    except ValueError:
        return 1
    if workers == 0:
        workers = cores or available_cores()
    return max(1, workers)


def shares_process(beam_args: Sequence[str]) -> bool:
    """Whether every stage of a job runs in the launcher's own process: Beam's
    local DirectRunner in its default in-memory or its ``multi_threading``
    mode, not worker processes (``multi_processing``), not a remote runner."""
    runner = beam_flag(beam_args, "runner") or "DirectRunner"
    if runner.rsplit(".", 1)[-1] not in _LOCAL_RUNNERS:
        return False
    return beam_flag(beam_args, "direct_running_mode") != "multi_processing"


#: Log level of local worker processes (Beam's SDK harness) unless the user
#: gave one (see ``quiet_worker_args``).
WORKER_LOG_LEVEL = "ERROR"


def quiet_worker_args(beam_args: Sequence[str]) -> list[str]:
    """``beam_args`` plus ``--default_sdk_harness_log_level=ERROR`` for the
    DirectRunner's worker processes (``multi_processing``).

    At Beam's default (INFO) each worker printed its pipeline options, and
    warnings about its staging folder and the DirectRunner flags it ignores,
    to the launcher's console, also relayed through the launcher's logger:
    eight lines among the stage lines of ``jobs.progress`` on two workers.
    Our stages report through their stage clocks; errors still show. A level
    the user passed is kept, and other runners' workers (their logs go to the
    runner's service) are left alone. Two lines per worker remain, logged
    before the harness reads its options.
    """
    args = list(beam_args)
    mode = beam_flag(args, "direct_running_mode")
    if local_workers(args) > 1 and mode == "multi_processing":
        if beam_flag(args, "default_sdk_harness_log_level") is None:
            args.append(f"--default_sdk_harness_log_level={WORKER_LOG_LEVEL}")
    return args


def worker_thread_env(
    threads: int, environ: Mapping[str, str] | None = None
) -> dict[str, str]:
    """Environment variables that limit a worker to ``threads`` threads.

    A pool size the user set explicitly is kept (their machine, their call);
    tokenizers' own pool is switched off (workers already run in parallel).
    """
    environ = os.environ if environ is None else environ
    wanted = {WORKER_THREADS_ENV: str(threads), "TOKENIZERS_PARALLELISM": "false"}
    wanted.update(dict.fromkeys(THREAD_POOL_ENVS, str(threads)))
    return {k: v for k, v in wanted.items() if k not in environ}


@contextmanager
def sized_worker_threads(workers: int) -> Iterator[dict[str, str]]:
    """While a pipeline runs with ``workers`` local workers, export their thread
    budget (``worker_thread_env``) for the worker processes Beam starts;
    restore the environment afterwards. One worker: nothing changes."""
    added = {}
    if workers > 1:
        added = worker_thread_env(threads_per_worker(available_cores(), workers))
        os.environ.update(added)
    try:
        yield added
    finally:
        for name in added:
            os.environ.pop(name, None)


def worker_threads() -> int:
    """The launcher's thread budget for this worker (0: none was set)."""
    try:
        return max(0, int(os.environ.get(WORKER_THREADS_ENV, "0")))
    except ValueError:
        return 0


def sentence_model(path: str, threads: int = 0, backend: str = "torch") -> Any:
    """The MiniLM sentence model at local ``path`` on the CPU, loaded once.

    ``backend="torch"``: ``pipelines.minilm.MiniLM``, our own forward pass in
    torch with the vectors of sentence-transformers (without importing it
    or transformers: seconds of every process that embeds).
    ``threads`` (else the launcher's ``worker_threads()``, else torch's
    default) sizes torch's intra-op pool when the model first loads.
    ``backend="onnx-int8"`` gives the int8 ONNX Runtime model instead
    (``pipelines.onnx_minilm.OnnxSentenceModel``, same ``encode`` and vectors
    within cosine ~0.99), its pool sized the same way.
    """
    if backend != "torch":
        return _onnx_model(path, threads, backend)
    with _LOCK:
        model = _MODELS.get(path)
        if model is None:
            os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
            import torch  # noqa: PLC0415

            from ctxledger.pipelines.minilm import MiniLM  # noqa: PLC0415

            threads = threads or worker_threads()
            if threads:
                torch.set_num_threads(threads)
            model = MiniLM(path)
            _MODELS[path] = model
        return model


def loaded_model(path: str) -> Any | None:
    """The torch sentence model at ``path`` if this process loaded it already
    (``sentence_model``), else None: a caller that only helps out when the
    model costs no load asks this first."""
    with _LOCK:
        return _MODELS.get(path)


def _onnx_model(path: str, threads: int, backend: str) -> Any:
    if backend != "onnx-int8":
        raise ValueError(f"unknown embedding backend {backend!r}")
    with _LOCK:
        key = f"{backend}:{path}"
        model = _MODELS.get(key)
        if model is None:
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
            os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
            from ctxledger.pipelines.onnx_minilm import OnnxSentenceModel  # noqa: PLC0415

            model = OnnxSentenceModel(path, threads or worker_threads())
            _MODELS[key] = model
        return model


def word_piece_lengths(model: Any, texts: Sequence[str]) -> list[int] | None:
    """Word pieces per text as ``model`` reads them (special tokens included,
    cut at its ``max_seq_length``: ``pipelines.minilm.WordPieces``); None for
    a model that does not say (a test double)."""
    lengths = getattr(model, "word_piece_lengths", None)
    return None if lengths is None else list(lengths(texts))


def encode_by_token_budget(
    model: Any,
    texts: Sequence[str],
    encode_batch: Any,
    max_count: int = 0,
    budget: int = TOKEN_BUDGET,
) -> Any:
    """Rows of ``encode_batch(batch_texts)`` for ``texts``, in input order, the
    texts grouped by ``token_batches`` (each group is one forward pass).

    A model without a tokenizer (a test double) gets all texts in one call.
    A text's vector does not depend on its batch (torch: padding is masked;
    bf16 moves cosine by < 1e-4), so the grouping only changes the cost.
    """
    import numpy as np  # noqa: PLC0415

    texts = list(texts)
    lengths = word_piece_lengths(model, texts)
    if lengths is None:
        return np.asarray(encode_batch(texts))
    out = None
    for group in token_batches(lengths, budget, max_count):
        rows = np.asarray(encode_batch([texts[i] for i in group]))
        if out is None:
            out = np.empty((len(texts), rows.shape[1]), dtype=rows.dtype)
        out[group] = rows
    return out
