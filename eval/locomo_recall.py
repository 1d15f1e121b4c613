"""Recall over conversation history on LoCoMo: ``python -m eval.locomo_recall``.

LoCoMo (snap-research/LoCoMo, CC BY-NC 4.0) holds long two-person conversations
of many dated sessions, and questions whose evidence turns (``dia_id`` such as
``D3:7``) are labelled. For every non-adversarial question (category 5 is
unanswerable) the eval ranks the conversation's turns and asks whether the
evidence turns are among the top k:

* **turn recall@k**: the share of a question's evidence turns in the top k turns,
  averaged over questions;
* **session recall@k**: the share of a question's evidence sessions (``D3``) that
  hold at least one of the top k turns, averaged over questions.

Three rankers run on the same turns in the same run (``serving.turn_rank``):
``bm25`` (stemmed BM25, the DuckDB ``evidence_terms`` stems the evidence index
uses), ``minilm`` (plain cosine of MiniLM vectors) and ``fused`` (ours: BM25 and
cosine fused by score with neighbour, session and context-vector terms). A turn
is indexed as ``speaker: text`` plus ``[image: caption]`` for a shared photo.

Split by source: the fusion's weights were chosen on ``conv-26`` only (``dev``);
``conv-30`` was only measured (``measure``). The maintainers hold the other 8
conversations. Both columns are printed; the measured one is the headline in
docs/conversation_recall.md.

``--pipeline`` measures the product path instead: each sample is landed under
a subject of its own (``tenant=eval/subject=<sample_id>/``), ``ctxledger
nightly`` ingests it (the LoCoMo reader, redaction, pseudonyms) into a
temporary warehouse, and every question goes through
``Context.search_messages`` (pseudonymised with the tenant's key, as HTTP
``/search`` does); the ``fused`` row is then that search, while ``bm25`` and
``minilm`` stay the raw-text baselines.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

#: Conversations the fusion weights were chosen on; every other one is measured.
DEV_SAMPLES = frozenset({"conv-26"})
LOCOMO_FILE = Path("locomo-dev") / "locomo_dev2.json"
KS = (5, 10)
ADVERSARIAL = 5


@dataclass(frozen=True)
class Turn:
    """One LoCoMo turn: its id, session and indexed text."""

    dia_id: str
    session: str
    text: str


def turns_of(sample: dict[str, Any]) -> list[Turn]:
    """The turns of one LoCoMo sample in order (``session_1``, ``session_2``...)."""
    conversation = sample["conversation"]
    out: list[Turn] = []
    number = 1
    while f"session_{number}" in conversation:
        for turn in conversation[f"session_{number}"]:
            text = f"{turn['speaker']}: {turn['text']}"
            if turn.get("blip_caption"):
                text += f" [image: {turn['blip_caption']}]"
            out.append(Turn(str(turn["dia_id"]), f"D{number}", text))
        number += 1
    return out


def session_of(dia_id: str) -> str:
    """``D3`` for ``D3:7``."""
    return dia_id.split(":", 1)[0].strip()


def questions_of(sample: dict[str, Any]) -> list[tuple[str, set[str]]]:
    """(question, evidence turn ids) of the answerable, labelled questions."""
    out = []
    for qa in sample.get("qa", []):
        evidence = {e.strip() for e in qa.get("evidence") or [] if e and e.strip()}
        if qa.get("category") != ADVERSARIAL and evidence:
            out.append((qa["question"], evidence))
    return out


def recall(ranked: Sequence[str], evidence: set[str], k: int) -> tuple[float, float]:
    """(turn recall, session recall) of the top ``k`` of ``ranked`` turn ids."""
    top = list(ranked[:k])
    turn = len(evidence & set(top)) / len(evidence)
    sessions = {session_of(e) for e in evidence}
    found = {session_of(t) for t in top}
    return turn, len(sessions & found) / len(sessions)


class _Models:
    """The project's own tokenizer and embedder, loaded once."""

    def __init__(self) -> None:
        from ctxledger.schemas.policy import load_policy  # noqa: PLC0415
        from ctxledger.serving.evidence_index import TermTokenizer  # noqa: PLC0415
        from ctxledger.warehouse.evidence_api import embedder  # noqa: PLC0415

        self.tokenizer = TermTokenizer()
        self.embedder = embedder(load_policy(None).evidence.embedding)

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        return np.asarray(self.embedder.encode(list(texts)), dtype=np.float32)


def score_sample(sample: dict[str, Any], models: _Models) -> dict[str, list[float]]:
    """Per ranker and k: each question's turn and session recall."""
    from ctxledger.serving.turn_rank import (  # noqa: PLC0415
        TurnRanker,
        rank_bm25,
        rank_cosine,
    )

    turns = turns_of(sample)
    ids = [t.dia_id for t in turns]
    texts = [t.text for t in turns]
    context = [
        (texts[i - 1] + "\n" if i and turns[i - 1].session == turns[i].session else "")
        + texts[i]
        for i in range(len(turns))
    ]
    ranker = TurnRanker(
        [models.tokenizer.terms(t) for t in texts],
        [t.session for t in turns],
        vectors=models.encode(texts),
        context_vectors=models.encode(context),
    )
    questions = questions_of(sample)
    vectors = models.encode([q for q, _ in questions])
    out: dict[str, list[float]] = {}
    top = max(KS)
    for (question, evidence), vector in zip(questions, vectors, strict=True):
        terms = models.tokenizer.terms(question)
        ranked = {
            "bm25": rank_bm25(ranker, terms, top),
            "minilm": rank_cosine(ranker, vector, top),
            "fused": [r.row for r in ranker.rank(terms, vector, top)],
        }
        for name, rows in ranked.items():
            for k in KS:
                turn, session = recall([ids[r] for r in rows], evidence, k)
                out.setdefault(f"{name} turn@{k}", []).append(turn)
                out.setdefault(f"{name} session@{k}", []).append(session)
    return out


def pipeline_scores(samples: Sequence[dict[str, Any]], path: Path):
    """Per sample id: the ``fused`` recalls of ``Context.search_messages`` over
    a warehouse the real nightly built from ``path``."""
    import os  # noqa: PLC0415
    import subprocess  # noqa: PLC0415
    import tempfile  # noqa: PLC0415

    from ctxledger.serving.context import Context  # noqa: PLC0415

    out: dict[str, dict[str, list[float]]] = {}
    with tempfile.TemporaryDirectory(prefix="locomo-eval-") as tmp:
        landing = Path(tmp) / "landing"
        for sample in samples:
            sid = str(sample.get("sample_id"))
            folder = landing / "tenant=eval" / f"subject={sid}"
            folder.mkdir(parents=True)
            (folder / "locomo.json").write_text(json.dumps([sample]))
        warehouse = Path(tmp) / "warehouse"
        env = {**os.environ, "CTXLEDGER_PSEUDONYM_KEY": os.environ.get(
            "CTXLEDGER_PSEUDONYM_KEY", "locomo-eval-key-" + "0" * 48)}  # fmt: skip
        os.environ["CTXLEDGER_PSEUDONYM_KEY"] = env["CTXLEDGER_PSEUDONYM_KEY"]
        subprocess.run(
            [sys.executable, "-m", "ctxledger.jobs.cli", "nightly", "--landing",
             str(landing), "--warehouse", str(warehouse), "--format", "locomo"],
            check=True, env=env, stdout=subprocess.DEVNULL,
        )  # fmt: skip
        with Context.open(warehouse, poll_s=0) as context:
            for sample in samples:
                sid = str(sample.get("sample_id"))
                scores = out.setdefault(sid, {})
                for question, evidence in questions_of(sample):
                    hits = context.search_messages("eval", sid, question, max(KS))
                    ranked = [h.source_id or "" for h in hits]
                    for k in KS:
                        turn, session = recall(ranked, evidence, k)
                        scores.setdefault(f"fused turn@{k}", []).append(turn)
                        scores.setdefault(f"fused session@{k}", []).append(session)
    return out


def evaluate(
    samples: Sequence[dict[str, Any]], pipeline: dict[str, Any] | None = None
) -> dict[str, Any]:
    """Mean recalls per split (``dev``/``measure``) and ranker, with counts;
    ``pipeline``: per sample id, ``fused`` recalls that replace the raw-text ones."""
    models = _Models()
    per_split: dict[str, dict[str, list[float]]] = {}
    names: dict[str, list[str]] = {}
    for sample in samples:
        split = "dev" if sample.get("sample_id") in DEV_SAMPLES else "measure"
        names.setdefault(split, []).append(str(sample.get("sample_id")))
        scored = score_sample(sample, models)
        if pipeline is not None:
            scored.update(pipeline[str(sample.get("sample_id"))])
        bucket = per_split.setdefault(split, {})
        for key, values in scored.items():
            bucket.setdefault(key, []).extend(values)
    result: dict[str, Any] = {}
    for split, bucket in per_split.items():
        some = next(iter(bucket.values()), [])
        result[split] = {
            "samples": names[split],
            "questions": len(some),
            "recall": {k: round(float(np.mean(v)), 3) for k, v in bucket.items()},
        }
    return result


def _print(result: dict[str, Any]) -> None:
    splits = [s for s in ("measure", "dev") if s in result]
    print(
        "LoCoMo recall over conversation turns (evidence turns in the top k); "
        f"fused from: {result.get('fused_from')}"
    )
    for split in splits:
        info = result[split]
        print(
            f"  {split}: {', '.join(info['samples'])} ({info['questions']} questions)"
        )
    metrics = ("turn@5", "turn@10", "session@5", "session@10")
    print(f"  {'split':<8} {'ranker':<7}" + "".join(f"{m:>11}" for m in metrics))
    for split in splits:
        recalls = result[split]["recall"]
        for ranker in ("fused", "bm25", "minilm"):
            cells = "".join(f"{recalls[f'{ranker} {m}']:>11.3f}" for m in metrics)
            print(f"  {split:<8} {ranker:<7}{cells}")


def main(argv: list[str] | None = None) -> int:
    """Score the LoCoMo file; print the table (``--json`` for JSON)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpora", type=Path, default=None)
    parser.add_argument("--locomo", type=Path, default=None, help="a LoCoMo JSON file")
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.add_argument(
        "--pipeline",
        action="store_true",
        help="fused = nightly + Context.search_messages (the product path)",
    )
    args = parser.parse_args(argv)
    path = args.locomo
    if path is None:
        from eval.corpora import default_corpora  # noqa: PLC0415

        corpora = args.corpora or default_corpora()
        path = Path(corpora) / LOCOMO_FILE if corpora else None
    if path is None or not Path(path).is_file():
        print("locomo recall: LoCoMo file not found, skipped", file=sys.stderr)
        return 0
    samples = json.loads(Path(path).read_text(encoding="utf-8"))
    pipeline = pipeline_scores(samples, Path(path)) if args.pipeline else None
    result = evaluate(samples, pipeline)
    result["fused_from"] = "pipeline" if args.pipeline else "raw turns"
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        _print(result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
