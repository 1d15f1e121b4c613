"""MiniLM's cost per process: ``pipelines.minilm`` against sentence-transformers.

Issue 14: every process that embeds (the nightly's memory classifier and
evidence embedder, each Beam worker, ``ctxledger embed``, the server's query
embedding) loaded MiniLM through sentence-transformers, whose import alone
takes 4-6 s on this machine. ``before`` below is that path as
``Embedder.encode`` ran it (``SentenceTransformer`` on torch fp32, texts
grouped by the same word-piece budget, one ``encode`` call per group);
``after`` is ``Embedder.encode`` now (``pipelines.minilm``). Each measurement
runs in a fresh interpreter, before and after alternating, and reports
medians; CPU seconds (the child's own, or its rusage for the start-up) are
the steadier number on a shared machine.

1. Start-up: a fresh interpreter to its first vector of one short question
   (wall, and CPU from ``RUSAGE_CHILDREN``), with the child's own split into
   imports, model load and the first encode.
2. Throughput: CPU-s and wall to embed the same real texts (``bench_embed.
   real_texts``: strings of corpora section A) at 1 and 2 torch threads,
   after a warm-up call.
3. Query latency: one short question per call at 1 thread (the server's
   case, ``serving_policy``): median and p90 wall, mean CPU per call.
4. ``--int8``: torch dynamic int8 quantization of the Linear layers
   (per-channel weights, fbgemm) against fp32: cosine min/mean on the real
   texts, top-10 agreement on the evidence bench questions, CPU-s.

Run: ``python bench/bench_minilm.py [--texts 1000] [--repeats 3] [--int8]``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
ENV = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "TOKENIZERS_PARALLELISM": "false",
}
for _name, _value in ENV.items():
    os.environ.setdefault(_name, _value)

QUESTION = "how do I hand off on-call at the end of my shift"

#: The child: ``encoder(impl, threads)`` gives ``encode(texts) -> rows``.
CHILD = r"""
import json, os, sys, time
start, start_cpu = time.perf_counter(), time.process_time()
impl, threads, task, arg = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]

def encoder(impl, threads):
    from ctxledger.pipelines.evidence.embed import Embedder, model_path
    from ctxledger.schemas.evidence import EmbeddingSettings
    if impl == "after":
        embedder = Embedder(EmbeddingSettings(torch_threads=threads))
        embedder.load()
        return embedder.encode
    # before: sentence-transformers as pipelines.models and Embedder ran it
    import torch
    from sentence_transformers import SentenceTransformer
    from transformers.utils import logging as hf_logging
    from ctxledger.pipelines.models import TOKEN_BUDGET, token_batches
    import numpy as np
    if threads:
        torch.set_num_threads(threads)
    hf_logging.disable_progress_bar()
    model = SentenceTransformer(model_path("all-MiniLM-L6-v2"), device="cpu")
    model.eval()

    def encode(texts):
        lengths = [len(i) for i in model.tokenizer(
            [str(t).strip() for t in texts], truncation=True,
            max_length=model.max_seq_length, return_attention_mask=False,
            return_token_type_ids=False)["input_ids"]]
        out = np.empty((len(texts), 384), dtype=np.float32)
        with torch.inference_mode():
            for group in token_batches(lengths, TOKEN_BUDGET, 64):
                out[group] = model.encode(
                    [texts[i] for i in group], batch_size=len(group),
                    normalize_embeddings=True, convert_to_numpy=True,
                    show_progress_bar=False)
        return out
    return encode

def clock():
    return time.perf_counter(), time.process_time()

if task == "first":
    encode = encoder(impl, threads)
    loaded = clock()
    encode([arg])
    done = clock()
    result = {"load": loaded[0] - start, "first": done[0] - loaded[0]}
elif task == "texts":
    texts = json.loads(open(arg).read())
    encode = encoder(impl, threads)
    encode(texts[:8])
    wall, cpu = clock()
    encode(texts)
    done = clock()
    result = {"wall": done[0] - wall, "cpu": done[1] - cpu}
else:  # latency: one question per call
    questions = json.loads(open(arg).read())
    encode = encoder(impl, threads)
    for q in questions[:10]:
        encode([q])
    walls, cpu = [], time.process_time()
    for q in questions:
        t = time.perf_counter()
        encode([q])
        walls.append(time.perf_counter() - t)
    result = {"walls": walls, "cpu": (time.process_time() - cpu) / len(questions)}
print("RESULT " + json.dumps(result))
"""


def child(impl: str, threads: int, task: str, arg: str) -> tuple[dict, float, float]:
    """(the child's result, its wall from the parent, its CPU from rusage)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", CHILD, impl, str(threads), task, arg],
        cwd=ROOT,
        env={**os.environ, **ENV},
        capture_output=True,
        text=True,
        timeout=1800,
    )
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode:
        raise RuntimeError(done.stderr[-3000:])
    line = [x for x in done.stdout.splitlines() if x.startswith("RESULT ")][-1]
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return json.loads(line[7:]), wall, cpu


def alternating(repeats: int):
    """before/after order per repeat: alternate who goes first."""
    for index in range(repeats):
        yield ("before", "after") if index % 2 == 0 else ("after", "before")


def med(values) -> float:
    return statistics.median(values)


def startup(repeats: int) -> None:
    rows: dict[str, list] = {"before": [], "after": []}
    for order in alternating(repeats):
        for impl in order:
            rows[impl].append(child(impl, 0, "first", QUESTION))
    print("\n### fresh interpreter to the first vector (one short question)")
    for impl, runs in rows.items():
        print(
            f"{impl}: {med([w for _, w, _ in runs]):.2f}s wall, "
            f"{med([c for _, _, c in runs]):.2f} CPU-s (of which imports + load "
            f"{med([r['load'] for r, _, _ in runs]):.2f}s, first encode "
            f"{med([r['first'] for r, _, _ in runs]) * 1000:.0f} ms); "
            f"walls {[round(w, 2) for _, w, _ in runs]}"
        )


def throughput(texts: list[str], repeats: int) -> None:
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as handle:
        json.dump(texts, handle)
    try:
        for threads in (1, 2):
            rows: dict[str, list] = {"before": [], "after": []}
            for order in alternating(repeats):
                for impl in order:
                    rows[impl].append(child(impl, threads, "texts", handle.name)[0])
            cpu = {i: med([r["cpu"] for r in runs]) for i, runs in rows.items()}
            wall = {i: med([r["wall"] for r in runs]) for i, runs in rows.items()}
            print(
                f"{len(texts)} real texts, {threads} thread(s): before "
                f"{cpu['before']:.1f} CPU-s ({wall['before']:.1f}s wall), after "
                f"{cpu['after']:.1f} CPU-s ({wall['after']:.1f}s wall): "
                f"{cpu['before'] / cpu['after']:.2f}x CPU; CPU-s per run "
                f"{ {i: [round(r['cpu'], 1) for r in v] for i, v in rows.items()} }"
            )
    finally:
        os.unlink(handle.name)


def latency(repeats: int) -> None:
    from bench.bench_evidence import PACK_QUERIES

    questions = [f"{q} {i}" for i in range(20) for q in PACK_QUERIES][:200]
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as handle:
        json.dump(questions, handle)
    try:
        rows: dict[str, list] = {"before": [], "after": []}
        for order in alternating(repeats):
            for impl in order:
                rows[impl].append(child(impl, 1, "latency", handle.name)[0])
    finally:
        os.unlink(handle.name)
    print(f"\n### one short question per call, 1 thread ({len(questions)} calls)")
    for impl, runs in rows.items():
        walls = sorted(w for r in runs for w in r["walls"])
        p90 = walls[int(0.9 * (len(walls) - 1))]
        print(
            f"{impl}: median {med(walls) * 1000:.2f} ms wall, p90 "
            f"{p90 * 1000:.2f} ms, {med([r['cpu'] for r in runs]) * 1000:.2f} "
            "ms CPU per call"
        )


def int8(texts: list[str]) -> None:
    """Section 4, in this process: fp32 against dynamic int8 Linear layers."""
    import numpy as np
    import torch

    from bench.bench_embed import recall_at_10
    from bench.bench_evidence import PACK_QUERIES, corpus_chunks
    from ctxledger.pipelines.evidence.embed import model_path
    from ctxledger.pipelines.minilm import MiniLM, quantized

    torch.set_num_threads(1)
    fp32 = MiniLM(model_path("all-MiniLM-L6-v2"))
    q8 = quantized(fp32)
    results = {}
    for name, model in (("fp32", fp32), ("int8", q8), ("fp32 again", fp32)):
        model.encode(texts[:8])
        start = time.process_time()
        vectors = model.encode(texts)
        results[name] = (vectors, time.process_time() - start)
    cosine = np.sum(results["fp32"][0] * results["int8"][0], axis=1)
    chunks, queries = corpus_chunks(), list(PACK_QUERIES)
    scores = {
        name: model.encode(queries) @ model.encode(chunks).T
        for name, model in (("fp32", fp32), ("int8", q8))
    }
    exact = [
        np.argsort(-a, kind="stable")[:10].tolist()
        == np.argsort(-b, kind="stable")[:10].tolist()
        for a, b in zip(scores["fp32"], scores["int8"], strict=True)
    ]
    fp32_cpu = min(results["fp32"][1], results["fp32 again"][1])
    print(
        f"\n### torch dynamic int8 Linear layers vs fp32, 1 thread, {len(texts)} "
        f"real texts\nCPU-s: fp32 {results['fp32'][1]:.1f} / "
        f"{results['fp32 again'][1]:.1f}, int8 {results['int8'][1]:.1f} "
        f"({fp32_cpu / results['int8'][1]:.2f}x); cosine to fp32 min "
        f"{cosine.min():.4f}, p1 {np.percentile(cosine, 1):.4f}, mean "
        f"{cosine.mean():.5f}; top-10 agreement ({len(queries)} questions x "
        f"{len(chunks)} runbook chunks): "
        f"{recall_at_10(scores['fp32'], scores['int8']):.3f}, identical top-10 "
        f"lists {sum(exact)}/{len(exact)}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--texts", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--int8", action="store_true", help="section 4 only")
    parser.add_argument(
        "--skip", default="", help="comma list of startup,throughput,latency"
    )
    args = parser.parse_args()
    from bench.bench_embed import real_texts

    texts = real_texts(args.texts)
    if args.int8:
        int8(texts)
        return
    skip = set(args.skip.split(","))
    print(f"## MiniLM before/after, medians of {args.repeats}, fresh interpreters")
    if "startup" not in skip:
        startup(args.repeats)
    if "throughput" not in skip:
        print("\n### throughput (CPU-s of the child around one encode call)")
        throughput(texts, args.repeats)
    if "latency" not in skip:
        latency(args.repeats)


if __name__ == "__main__":
    main()
