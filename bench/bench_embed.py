"""MiniLM inference backends on this CPU: torch fp32 / bf16 against ONNX int8.

Decides ``evidence.embedding.backend`` (issue 14, item 4): keep ``onnx-int8``
as the default only where it is faster than the torch path the policy runs
today (``precision: auto``: bf16 on CPUs with native bf16, else fp32) *and*
its vectors agree with fp32 (cosine min >= 0.99, or mean >= 0.99 with the min
reported) *and* retrieval recall@10 is unchanged.

1. Throughput, texts/s (wall, median of 3) and texts per CPU-second (process
   time: steadier on a shared machine), for real 64- and 256-token texts at the
   batch sizes the pipeline uses (64: evidence embedding, 32: the memory
   classifier); torch and ONNX Runtime sized to this process's cores.
2. Cosine to torch fp32 on >= 1,000 distinct real texts of corpora section A
   (every string of 40+ characters of the transcript files: messages, tool
   outputs, arguments): min, 1st percentile, mean.
3. Batch dependence: the same texts embedded alone and inside a batch (int8
   dynamic quantization scales activations per batch).
4. Retrieval recall@10 on the evidence bench's questions (``PACK_QUERIES``)
   over the runbook chunks of ``bench_evidence``: each backend's exact-cosine
   top-10 against torch fp32's top-10 (fp32 recall is 1.0 by definition).
5. Batching (issue 14): the real texts in pipeline-sized calls of 64, each
   call as one fixed batch (what ``Embedder.encode`` did before: one
   batch per call, padded to its longest text) against
   ``Embedder.encode`` now (``pipelines.models.token_batches``: one length
   class per forward pass, at most ``TOKEN_BUDGET`` padded word pieces):
   CPU-s, padded and real word pieces, cosine between the two, recall@10.

Run: ``python bench/bench_embed.py [--quick] [--batching]`` (``--quick``: fewer
texts; ``--batching``: section 5 only, torch at today's default precision).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
for _name, _value in {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "TOKENIZERS_PARALLELISM": "false",
}.items():
    os.environ.setdefault(_name, _value)

import numpy as np  # noqa: E402

from bench.bench_evidence import PACK_QUERIES, corpora, corpus_chunks  # noqa: E402
from bench.bench_pipeline import TRANSCRIPT_SETS  # noqa: E402


def real_texts(limit: int) -> list[str]:
    """Distinct strings of 40+ characters from the section A transcript files,
    in a fixed order (sorted files, then a seeded shuffle)."""
    seen: dict[str, None] = {}

    def walk(value):
        if isinstance(value, str):
            if len(value.strip()) >= 40:
                seen.setdefault(value.strip()[:4000])
        elif isinstance(value, dict):
            for item in value.values():
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    for name in TRANSCRIPT_SETS:
        folder = corpora() / name
        if not folder.is_dir():
            continue
        for path in sorted(folder.rglob("*")):
            if path.suffix not in (".json", ".jsonl", ".traj"):
                continue
            raw = path.read_text(errors="replace")
            lines = raw.splitlines() if path.suffix == ".jsonl" else [raw]
            for line in lines:
                try:
                    walk(json.loads(line))
                except ValueError:
                    continue
    texts = list(seen)
    if not texts:  # a clone without corpora: the runbook fixtures
        texts = corpus_chunks()
    order = np.random.default_rng(0).permutation(len(texts))
    return [texts[i] for i in order[:limit]]


def cut(tokenizer, texts: list[str], tokens: int, count: int) -> list[str]:
    """``count`` texts of exactly ``tokens`` word pieces (with [CLS]/[SEP];
    ``tokenizer``: ``pipelines.minilm.WordPieces``, ``tokens`` <= 256)."""
    out = []
    for text in texts:
        ids = tokenizer.ids([text])[0]
        if len(ids) >= tokens:
            out.append(tokenizer.decode(ids[: tokens - 1]))
        if len(out) == count:
            break
    while out and len(out) < count:  # too few long texts: repeat them
        out += out[: count - len(out)]
    return out


def timed(encode, texts: list[str], repeats: int = 3) -> tuple[float, float]:
    """(texts/s wall, texts per CPU-second), medians of ``repeats`` runs."""
    encode(texts[:8])  # warm up (thread pools, first-call allocations)
    wall, cpu = [], []
    for _ in range(repeats):
        start, start_cpu = time.perf_counter(), time.process_time()
        encode(texts)
        wall.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    return len(texts) / statistics.median(wall), len(texts) / statistics.median(cpu)


def recall_at_10(reference: np.ndarray, candidate: np.ndarray) -> float:
    """Mean share of ``reference``'s top-10 rows in ``candidate``'s top-10
    (both: query x chunk cosine matrices)."""
    hits = []
    for ref_row, row in zip(reference, candidate, strict=True):
        want = set(np.argsort(-ref_row, kind="stable")[:10])
        got = set(np.argsort(-row, kind="stable")[:10])
        hits.append(len(want & got) / len(want))
    return float(np.mean(hits))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer texts")
    parser.add_argument("--batching", action="store_true", help="section 5 only")
    args = parser.parse_args()
    if args.batching:
        batching(args.quick)
        return

    import torch

    from ctxledger.pipelines.evidence.embed import Embedder, cpu_has_native_bf16
    from ctxledger.pipelines.models import available_cores
    from ctxledger.schemas.evidence import EmbeddingSettings

    cores = available_cores()
    torch.set_num_threads(cores)
    settings = EmbeddingSettings(torch_threads=cores)
    default_torch = "bf16" if cpu_has_native_bf16() else "fp32"
    backends = {
        "torch fp32": Embedder(settings, precision="fp32"),
        "torch bf16": Embedder(settings, precision="bf16"),
        "onnx int8": Embedder(settings.model_copy(update={"backend": "onnx-int8"})),
    }
    start = time.perf_counter()
    backends["onnx int8"].load()
    load_s = time.perf_counter() - start
    backends["torch bf16"]._model = backends["torch fp32"].load()
    print(
        f"\n## MiniLM backends ({cores} cores, native bf16: {cpu_has_native_bf16()}, "
        f"today's default: torch {default_torch}; onnx int8 load incl. any "
        f"first export {load_s:.1f}s)"
    )

    pool = real_texts(1000 if not args.quick else 300)
    tokenizer = backends["torch fp32"].load().tokenizer
    n64, n256 = (128, 48) if not args.quick else (64, 24)
    sets = {64: cut(tokenizer, pool, 64, n64), 256: cut(tokenizer, pool, 256, n256)}
    print("\n### throughput: texts/s wall (texts per CPU-second), median of 3")
    rates: dict[tuple[str, int, int], tuple[float, float]] = {}
    for tokens, texts in sets.items():
        for batch in (64, 32):
            line = []
            for name, embedder in backends.items():
                embedder.settings = embedder.settings.model_copy(
                    update={"max_batch_size": batch}
                )
                rate = timed(embedder.encode, texts)
                rates[(name, tokens, batch)] = rate
                line.append(f"{name} {rate[0]:.1f} ({rate[1]:.1f})")
            base = rates[(f"torch {default_torch}", tokens, batch)]
            int8 = rates[("onnx int8", tokens, batch)]
            print(
                f"{tokens:>3} tokens, batch {batch}: {'; '.join(line)}; int8 / "
                f"torch {default_torch}: {int8[0] / base[0]:.2f}x wall, "
                f"{int8[1] / base[1]:.2f}x CPU"
            )

    print(f"\n### cosine to torch fp32 on {len(pool)} real texts (corpora section A)")
    vectors = {name: e.encode(pool) for name, e in backends.items()}
    cosines = {}
    for name in ("torch bf16", "onnx int8"):
        cos = np.sum(vectors["torch fp32"] * vectors[name], axis=1)
        cosines[name] = cos
        print(
            f"{name}: min {cos.min():.4f}, p1 {np.percentile(cos, 1):.4f}, "
            f"mean {cos.mean():.4f}"
        )

    print("\n### batch dependence: 20 texts embedded alone vs inside a batch of 64")
    for name in (f"torch {default_torch}", "onnx int8"):
        embedder = backends[name]
        alone = np.stack([embedder.encode([t])[0] for t in pool[:20]])
        cos = np.sum(alone * embedder.encode(pool[:64])[:20], axis=1)
        print(f"{name}: cosine min {cos.min():.5f}, mean {cos.mean():.5f}")

    chunks = corpus_chunks()
    print(
        f"\n### recall@10 vs torch fp32: {len(PACK_QUERIES)} evidence-bench "
        f"questions over {len(chunks)} runbook chunks (exact cosine)"
    )
    scores = {}
    for name, embedder in backends.items():
        scores[name] = embedder.encode(list(PACK_QUERIES)) @ embedder.encode(chunks).T
    recalls = {n: recall_at_10(scores["torch fp32"], s) for n, s in scores.items()}
    print("; ".join(f"{n} {r:.3f}" for n, r in recalls.items()))

    int8 = cosines["onnx int8"]
    agree = int8.min() >= 0.99 or int8.mean() >= 0.99
    same_recall = recalls["onnx int8"] >= recalls[f"torch {default_torch}"]
    faster = all(
        rates[("onnx int8", t, b)][0] > rates[(f"torch {default_torch}", t, b)][0]
        for t in sets
        for b in (64, 32)
    )
    verdict = "onnx-int8" if agree and same_recall and faster else "torch"
    print(
        f"\nverdict: backend {verdict} (int8 faster than torch {default_torch} at "
        f"every size: {faster}; cosine ok: {agree}; recall@10 unchanged: "
        f"{same_recall}); policy default: {EmbeddingSettings().backend}"
    )
    batching(args.quick)


def batching(quick: bool) -> None:
    """Section 5: fixed batches per call against word-piece-budget batches."""
    import torch

    from ctxledger.pipelines.evidence.embed import Embedder
    from ctxledger.pipelines.models import (
        TOKEN_BUDGET,
        available_cores,
        token_batches,
        word_piece_lengths,
    )
    from ctxledger.schemas.evidence import EmbeddingSettings

    cores = available_cores()
    torch.set_num_threads(cores)
    embedder = Embedder(EmbeddingSettings(torch_threads=cores))
    model = embedder.load()
    pool = real_texts(1000 if not quick else 300)
    calls = [pool[i : i + 64] for i in range(0, len(pool), 64)]
    lengths = word_piece_lengths(model, pool)
    real = sum(lengths)
    fixed_padded = sum(
        len(c) * max(lengths[i : i + len(c)])
        for i, c in zip(range(0, len(pool), 64), calls, strict=True)
    )
    budget_padded = 0
    for start in range(0, len(pool), 64):
        part = lengths[start : start + 64]
        for group in token_batches(part, TOKEN_BUDGET, 64):
            budget_padded += len(group) * max(part[i] for i in group)

    def fixed(texts):
        # one call = fixed batches of 64 sorted by length, no word-piece budget
        return model.encode(
            texts, batch_size=64, bf16=embedder.precision == "bf16", budget=1 << 30
        )

    results = {}
    for name, encode in (
        ("fixed batches of 64", fixed),
        ("word-piece budget", embedder.encode),
    ):
        encode(pool[:8])
        start, start_cpu = time.perf_counter(), time.process_time()
        vectors = np.concatenate([encode(c) for c in calls])
        results[name] = (
            vectors,
            time.perf_counter() - start,
            time.process_time() - start_cpu,
        )
    print(
        f"\n### batching: {len(pool)} real texts in calls of 64, torch "
        f"{embedder.precision}, {cores} threads; {real:,} word pieces"
    )
    for name, padded in (
        ("fixed batches of 64", fixed_padded),
        ("word-piece budget", budget_padded),
    ):
        _, wall, cpu = results[name]
        print(
            f"{name}: {cpu:.1f} CPU-s, {wall:.1f}s wall, {padded:,} padded word "
            f"pieces ({(padded - real) / padded:.0%} padding)"
        )
    before, after = results["fixed batches of 64"][0], results["word-piece budget"][0]
    cos = np.sum(before * after, axis=1)
    chunks = corpus_chunks()
    queries = list(PACK_QUERIES)
    recall = recall_at_10(
        fixed(queries) @ fixed(chunks).T,
        embedder.encode(queries) @ embedder.encode(chunks).T,
    )
    print(
        f"cosine budget vs fixed: min {cos.min():.5f}, mean {cos.mean():.6f}; "
        f"recall@10 of the budget's top-10 against fixed batches' ({len(queries)} "
        f"questions x {len(chunks)} runbook chunks): {recall:.3f}"
    )


if __name__ == "__main__":
    main()
