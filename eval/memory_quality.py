"""Memory quality: precision and recall of extraction against hand-made labels.

The labels (``eval/memory_labels/``, how they were made: its README) list, per
tau-bench and API-Bank dialogue, the durable facts about the user a memory store
should keep: ``(kind, source, slot, value, turn)``. This script runs the real
memory path on each dialogue (ingest reader -> normalize with a no-op redactor ->
``RuleExtractor`` with the MiniLM classifier -> ``gate`` with consent granted for
every purpose) and matches the stored memories to the labels.

Matching: a memory matches a label of its dialogue when the sources are equal,
the slots are compatible (equal, sharing a word, or the memory has no slot) and
the values match loosely (one's normalized tokens contain the other's, or a
token overlap of at least half; a memory without a value is compared by its
text). Memories are first deduplicated per dialogue by (source, slot, value):
a user id stated three times is one memory, as supersession makes it. Precision
is over deduplicated memories of ``user_stated`` and ``system_record`` (the
labelled sources; ``model_inferred`` is counted, not scored); recall over labels.
Both are reported per kind and per source, for the ``dev`` and ``measure``
parts (``eval.split.part_of`` of the dialogue id, fixed before any scoring).

The redactor is a no-op on purpose: the corpora are public, the labels hold the
public values, and redaction quality is ``eval.redaction``'s job. Examples of
errors print values because both corpora are public test data.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from eval.corpora import default_corpora
from eval.split import part_of

LABELS_DIR = Path(__file__).resolve().parent / "memory_labels"
SCORED_SOURCES = ("user_stated", "system_record")
#: The issue's targets, on user_stated + system_record together.
TARGET_PRECISION = 0.90
TARGET_RECALL = 0.80
_NOW = datetime(2030, 1, 1, tzinfo=UTC)
_TOKEN = re.compile(r"[a-z0-9@._-]+")


@dataclass(frozen=True)
class Label:
    dialogue: str
    kind: str
    source: str
    slot: str
    value: str
    turn: int


@dataclass(frozen=True)
class Predicted:
    dialogue: str
    kind: str
    source: str
    slot: str | None
    value: str | None
    text: str
    turn: int | None


def _tokens(text: str) -> set[str]:
    return {t.strip("._-") for t in _TOKEN.findall(text.lower())} - {""}


def value_matches(label: str, predicted: str) -> bool:
    """Loose value match: containment either way, or token overlap >= 0.5."""
    a, b = _tokens(label), _tokens(predicted)
    if not a or not b:
        return False
    if a <= b or b <= a:
        return True
    return len(a & b) / len(a | b) >= 0.5


def slot_matches(label: str, predicted: str | None) -> bool:
    """Equal slots, slots sharing a word (``user_id`` / ``id``), or no slot."""
    if not predicted:
        return True

    def words(slot: str) -> set[str]:  # singular and plural: one slot word
        found = re.split(r"[^a-z0-9]+", slot.lower())
        return {w[:-1] if len(w) > 3 and w.endswith("s") else w for w in found} - {
            "",
            "preference",
        }

    return label == predicted or bool(words(label) & words(predicted))


def matches(label: Label, memory: Predicted) -> bool:
    if label.source != memory.source or not slot_matches(label.slot, memory.slot):
        return False
    return value_matches(label.value, memory.value or memory.text)


def load_labels(directory: Path = LABELS_DIR) -> dict[str, list[Label]]:
    """Labels per dialogue id (``<corpus>/<dialogue>``), every labelled dialogue."""
    out: dict[str, list[Label]] = {}
    for path in sorted(directory.glob("*.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        for item in data["dialogues"]:
            did = f"{data['corpus']}/{item['dialogue_id']}"
            out[did] = [
                Label(did, m["kind"], m["source"], m["slot"], m["value"], m["turn"])
                for m in item["memories"]
            ]
    return out


def _sessions(corpora: Path, dialogues: Sequence[str]):
    """``(dialogue id, NormalizedSession)`` of every labelled dialogue."""
    from ctxledger.pipelines.ingest.drafts import DraftSession, SourceFile
    from ctxledger.pipelines.ingest.normalize import SourceInfo, normalize_session
    from ctxledger.pipelines.ingest.readers import read_source

    @dataclass
    class _Clean:
        text: str
        findings: tuple = ()

    def noop(items):
        return [_Clean(text) for _, text in items]

    wanted = set(dialogues)
    by_file: dict[tuple[str, str], list[str]] = defaultdict(list)
    for did in dialogues:
        corpus, rest = did.split("/", 1)
        if corpus == "tau-bench-airline-gpt4o":
            by_file[(corpus, "gpt-4o-airline.first50.json")].append(did)
        else:
            by_file[(corpus, rest)].append(did)
    fmt = {"tau-bench-airline-gpt4o": "tau_bench", "api-bank-dialogues": "api_bank"}
    for (corpus, rel), _ in sorted(by_file.items()):
        path = corpora / corpus / rel
        source = SourceFile(path=f"{corpus}/{rel}", data=path.read_bytes())
        info = SourceInfo("eval", source.path, "eval", "eval", "eval", "eval")
        for parsed in read_source(source, fmt[corpus]):
            if not isinstance(parsed, DraftSession):
                continue
            did = (
                f"{corpus}/{parsed.external_id}"
                if corpus == "tau-bench-airline-gpt4o"
                else f"{corpus}/{rel}"
            )
            if did in wanted:
                yield did, normalize_session(parsed, info, noop)


def predict(corpora: Path, dialogues: Sequence[str], policy=None) -> list[Predicted]:
    """Stored memories of every dialogue, through the real extract and gate."""
    from ctxledger.pipelines.memory.classify import MiniLMEncoder, PurposeClassifier
    from ctxledger.pipelines.memory.extract import (
        RuleExtractor,
        SessionContext,
        extract_session,
    )
    from ctxledger.pipelines.memory.gate import gate_candidates
    from ctxledger.schemas.memory import ConsentRecord
    from ctxledger.schemas.policy import load_policy

    policy = policy or load_policy()
    settings = policy.memory
    encoder = MiniLMEncoder()
    extractor = RuleExtractor(settings, encoder)
    purposes = PurposeClassifier(settings, encoder)
    out: list[Predicted] = []
    for did, norm in _sessions(corpora, dialogues):
        ctx = SessionContext.build(
            norm.session,
            norm.messages,
            norm.observations,
            settings.subject_metadata_key,
        )
        result = extract_session(ctx, [extractor], purposes)
        granted = datetime(2000, 1, 1, tzinfo=UTC)
        consent = [
            ConsentRecord(
                consent_id=f"cns_{purpose}",
                tenant_id=norm.session.tenant_id,
                subject_id=ctx.subject_id,
                purpose=purpose,
                basis="contract",
                event="grant",
                effective_at=granted,
            )
            for purpose in settings.purpose_names
        ]
        gated = gate_candidates(
            result.candidates,
            consent,
            settings,
            now=_NOW,
            policy_version="eval",
            run_id="eval",
        )
        for memory in gated.memories:
            out.append(
                Predicted(
                    did,
                    memory.kind,
                    memory.source,
                    memory.slot,
                    memory.value,
                    memory.text,
                    memory.provenance.turn if memory.provenance else None,
                )
            )
    return out


def dedupe(memories: Sequence[Predicted]) -> list[Predicted]:
    seen: set[tuple] = set()
    out = []
    for m in memories:
        key = (m.dialogue, m.source, m.slot, " ".join(_tokens(m.value or m.text)))
        if key not in seen:
            seen.add(key)
            out.append(m)
    return out


def _ratio(hit: int, total: int) -> float | None:
    return round(hit / total, 3) if total else None


def score(
    labels: dict[str, list[Label]], memories: Sequence[Predicted]
) -> dict[str, object]:
    """Precision, recall per kind / source / all, and example errors."""
    by_dialogue: dict[str, list[Predicted]] = defaultdict(list)
    for m in dedupe(memories):
        by_dialogue[m.dialogue].append(m)
    p_hit: Counter = Counter()
    p_all: Counter = Counter()
    r_hit: Counter = Counter()
    r_all: Counter = Counter()
    false_pos: list[Predicted] = []
    false_neg: list[Label] = []
    inferred = 0
    for did, gold in labels.items():
        for m in by_dialogue.get(did, []):
            if m.source not in SCORED_SOURCES:
                inferred += 1
                continue
            ok = any(matches(g, m) for g in gold)
            for key in ("all", f"source:{m.source}", f"kind:{m.kind}"):
                p_all[key] += 1
                p_hit[key] += ok
            if not ok:
                false_pos.append(m)
        for g in gold:
            ok = any(matches(g, m) for m in by_dialogue.get(did, []))
            for key in ("all", f"source:{g.source}", f"kind:{g.kind}"):
                r_all[key] += 1
                r_hit[key] += ok
            if not ok:
                false_neg.append(g)
    keys = sorted(set(p_all) | set(r_all), key=lambda k: (k != "all", k))
    table = {
        key: {
            "precision": _ratio(p_hit[key], p_all[key]),
            "predicted": p_all[key],
            "recall": _ratio(r_hit[key], r_all[key]),
            "labels": r_all[key],
        }
        for key in keys
    }
    return {
        "dialogues": len(labels),
        "scores": table,
        "model_inferred_stored": inferred,
        "false_positives": [
            f"{m.dialogue} turn {m.turn} {m.source}/{m.kind} slot={m.slot} "
            f"value={m.value!r} text={m.text[:90]!r}"
            for m in false_pos
        ],
        "false_negatives": [
            f"{g.dialogue} turn {g.turn} {g.source}/{g.kind} {g.slot}={g.value!r}"
            for g in false_neg
        ],
    }


def run(
    corpora: Path,
    labels_dir: Path = LABELS_DIR,
    parts: Sequence[str] = ("dev", "measure"),
) -> dict[str, object]:
    """Score each part; ``parts=("dev",)`` while developing (never tune on measure)."""
    labels = load_labels(labels_dir)
    labels = {d: g for d, g in labels.items() if part_of(d) in parts}
    memories = predict(corpora, list(labels))
    report: dict[str, object] = {}
    for part in parts:
        subset = {d: g for d, g in labels.items() if part_of(d) == part}
        report[part] = score(subset, [m for m in memories if m.dialogue in subset])
    return report


def _print(report: dict[str, object], examples: int) -> None:
    for part, result in report.items():
        print(f"\n== memory quality, {part}: {result['dialogues']} dialogues ==")
        print(f"{'group':<26}{'precision':>10}{'n':>5}{'recall':>9}{'n':>5}")
        for key, row in result["scores"].items():
            p = "-" if row["precision"] is None else f"{row['precision']:.3f}"
            r = "-" if row["recall"] is None else f"{row['recall']:.3f}"
            print(f"{key:<26}{p:>10}{row['predicted']:>5}{r:>9}{row['labels']:>5}")
        print(f"model_inferred stored (not scored): {result['model_inferred_stored']}")
        for name in ("false_positives", "false_negatives"):
            items = result[name]
            print(f"{name} ({len(items)}), first {min(examples, len(items))}:")
            for line in items[:examples]:
                print(f"  {line}")


def main(argv: list[str] | None = None) -> int:
    """Print the report (``--out``: also as JSON); exit 0 even below target."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpora", type=Path, default=None)
    parser.add_argument("--labels", type=Path, default=LABELS_DIR)
    parser.add_argument("--out", type=Path, default=None, help="write JSON here")
    parser.add_argument("--examples", type=int, default=10)
    parser.add_argument(
        "--dev-only", action="store_true", help="score dev only (while tuning)"
    )
    args = parser.parse_args(argv)
    corpora = args.corpora or default_corpora()
    if corpora is None or not (corpora / "tau-bench-airline-gpt4o").is_dir():
        print("memory quality: corpora not found, skipped", file=sys.stderr)
        return 0
    parts = ("dev",) if args.dev_only else ("dev", "measure")
    report = run(corpora, args.labels, parts)
    _print(report, args.examples)
    for part, result in report.items():
        row = result["scores"].get("all", {})
        print(
            f"{part}: user_stated+system_record precision {row.get('precision')} "
            f"(target {TARGET_PRECISION}), recall {row.get('recall')} "
            f"(target {TARGET_RECALL})"
        )
    if args.out:
        args.out.write_text(json.dumps(report, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
