"""Memory quality on labelled dialogues, split by source family (issue 31, item 3).

``eval/memory_dialogues/*.json`` hold short multi-session dialogues written for
this eval, one file per source family (an author style), each labelled with:

* ``store``: what the store should *serve* at the end (``kind``, ``slot``,
  ``value``): a corrected fact is labelled with its new value only;
* ``must_not``: turns nothing may be served from (venting, small talk, a
  declined or withdrawn statement, someone else's details);
* ``corrections``: ``{old, new}`` pairs; one is right when a served memory
  matches ``new`` and none matches ``old``.

Each dialogue runs the real memory path: ``RuleExtractor`` with the MiniLM
classifier, ``gate`` with consent granted, then ``resolve`` over every session
of the dialogue (one subject; sessions a day apart, so time orders sessions and
turn order orders one session). Served = not superseded. Precision is over the
served ``user_stated`` memories (deduplicated by slot and value), recall over
``store`` labels; matching as in ``eval.memory_quality``.

A file's ``part`` says whether the family is ``dev`` (rules developed on it) or
``measure`` (never read while tuning); docs headline ``measure``. LoCoMo
(``locomo-dev``, two people chatting, no standing instructions to an assistant)
is a label-free measure family: every stored ``rule`` there is a false positive,
and memories per 100 user turns shows how much small talk is kept.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from eval.corpora import default_corpora
from eval.memory_quality import slot_matches, value_matches

DIALOGUES_DIR = Path(__file__).resolve().parent / "memory_dialogues"
_T0 = datetime(2026, 6, 1, 9, 0, tzinfo=UTC)
_NOW = datetime(2026, 12, 1, tzinfo=UTC)
#: LoCoMo sessions scored per conversation (keeps ``make eval`` short).
LOCOMO_SESSIONS = 6


@dataclass(frozen=True)
class Served:
    session: int
    turn: int | None
    kind: str
    slot: str | None
    value: str | None
    text: str


class _Pipeline:
    """The real extract -> gate -> resolve path, models loaded once."""

    def __init__(self):
        from ctxledger.pipelines.memory.classify import (
            MiniLMEncoder,
            PurposeClassifier,
        )
        from ctxledger.pipelines.memory.extract import RuleExtractor
        from ctxledger.schemas.policy import load_policy

        self.settings = load_policy().memory
        encoder = MiniLMEncoder()
        self.extractor = RuleExtractor(self.settings, encoder)
        self.purposes = PurposeClassifier(self.settings, encoder)

    def run(self, did: str, sessions: list[list[tuple[str, str]]]):
        """``(stored memories after resolve, rejections)`` of one subject."""
        from ctxledger.pipelines.memory.extract import SessionContext, extract_session
        from ctxledger.pipelines.memory.gate import gate_candidates
        from ctxledger.pipelines.memory.resolve import resolve
        from ctxledger.schemas import Message, Session
        from ctxledger.schemas.memory import ConsentRecord

        source_file = f"tenant=eval/subject={did.replace('/', '_')}/chat.jsonl"
        memories, rejections = [], []
        for index, turns in enumerate(sessions):
            started = _T0 + timedelta(days=index)
            session = Session(
                session_id=f"ses_{did}_{index}",
                tenant_id="eval",
                source_format="canonical",
                source_file=source_file,
                source_hash="h",
                started_at=started,
            )
            messages = [
                Message(
                    message_id=f"msg_{did}_{index}_{turn}",
                    session_id=session.session_id,
                    tenant_id="eval",
                    turn=turn,
                    role=role,
                    content=text,
                    content_hash="h",
                    created_at=started,
                    token_count=1,
                    policy_version="p",
                    source_ref=f"{source_file}#line:{turn + 1}",
                )
                for turn, (role, text) in enumerate(turns)
            ]
            ctx = SessionContext.build(session, messages)
            result = extract_session(ctx, [self.extractor], self.purposes)
            consent = [
                ConsentRecord(
                    consent_id=f"cns_{purpose}",
                    tenant_id="eval",
                    subject_id=ctx.subject_id,
                    purpose=purpose,
                    basis="contract",
                    event="grant",
                    effective_at=datetime(2000, 1, 1, tzinfo=UTC),
                )
                for purpose in self.settings.purpose_names
            ]
            gated = gate_candidates(
                result.candidates,
                consent,
                self.settings,
                now=_NOW,
                policy_version="eval",
                run_id="eval",
            )
            memories.extend(gated.memories)
            rejections.extend(gated.rejections)
        return resolve(memories), rejections


def _session_index(memory) -> int:
    return int(memory.provenance.session_id.rsplit("_", 1)[1])


def served_of(memories) -> list[Served]:
    """Served user statements, deduplicated by slot and value."""
    out, seen = [], set()
    for m in memories:
        if m.source != "user_stated" or m.superseded_by is not None:
            continue
        key = (m.slot, (m.value or m.text).casefold())
        if key in seen:
            continue
        seen.add(key)
        out.append(
            Served(
                _session_index(m), m.provenance.turn, m.kind, m.slot, m.value, m.text
            )
        )
    return out


def _match(label: dict, memory: Served) -> bool:
    if label.get("slot") and not slot_matches(label["slot"], memory.slot):
        return False
    return value_matches(label["value"], memory.value or memory.text) or (
        value_matches(label["value"], memory.text)
    )


def _mentions(value: str, memory: Served) -> bool:
    """Does a served memory still state ``value`` (a corrected old value)?"""
    words = value.casefold().split()
    text = f" {(memory.value or '')} {memory.text} ".casefold()
    return all(f"{w}" in text for w in words)


def score_family(pipeline: _Pipeline, data: dict) -> dict:
    p_hit = p_all = r_hit = r_all = 0
    c_hit = c_all = violations = must_not = 0
    errors: list[str] = []
    for dialogue in data["dialogues"]:
        did = f"{data['family']}/{dialogue['id']}"
        sessions = [[tuple(t) for t in s] for s in dialogue["sessions"]]
        memories, _ = pipeline.run(did, sessions)
        served = served_of(memories)
        for m in served:
            ok = any(_match(g, m) for g in dialogue["store"])
            p_all += 1
            p_hit += ok
            if not ok:
                errors.append(
                    f"FP {did} s{m.session}t{m.turn} {m.kind}/{m.slot} "
                    f"{m.value!r} {m.text[:80]!r}"
                )
        for g in dialogue["store"]:
            ok = any(_match(g, m) for m in served)
            r_all += 1
            r_hit += ok
            if not ok:
                errors.append(f"FN {did} {g['kind']}/{g['slot']}={g['value']!r}")
        for bad in dialogue.get("must_not", []):
            must_not += 1
            hits = [
                m
                for m in served
                if (m.session, m.turn) == (bad["session"], bad["turn"])
            ]
            violations += bool(hits)
            for m in hits:
                errors.append(f"MUST-NOT {did} s{m.session}t{m.turn} {m.text[:80]!r}")
        for fix in dialogue.get("corrections", []):
            c_all += 1
            new_ok = any(_mentions(fix["new"], m) for m in served)
            old_left = any(
                _mentions(fix["old"], m) and not _mentions(fix["new"], m)
                for m in served
            )
            c_hit += new_ok and not old_left
            if not (new_ok and not old_left):
                errors.append(f"CORRECTION {did} {fix['old']} -> {fix['new']}")
    ratio = lambda a, b: round(a / b, 3) if b else None  # noqa: E731
    return {
        "family": data["family"],
        "part": data["part"],
        "dialogues": len(data["dialogues"]),
        "precision": ratio(p_hit, p_all),
        "served": p_all,
        "recall": ratio(r_hit, r_all),
        "labels": r_all,
        "corrections": ratio(c_hit, c_all),
        "correction_pairs": c_all,
        "must_not_served": violations,
        "must_not_turns": must_not,
        "errors": errors,
    }


def score_locomo(pipeline: _Pipeline, corpora: Path) -> dict | None:
    """Label-free LoCoMo measure: stored rules (all wrong) and memories per 100
    turns, each speaker in turn as the user."""
    path = corpora / "locomo-dev" / "locomo_dev2.json"
    if not path.is_file():
        return None
    kinds: dict[str, int] = defaultdict(int)
    turns = 0
    examples: list[str] = []
    for number, sample in enumerate(json.loads(path.read_text(encoding="utf-8"))):
        conv = sample["conversation"]
        for speaker in (conv["speaker_a"], conv["speaker_b"]):
            sessions = []
            for index in range(1, LOCOMO_SESSIONS + 1):
                rows = conv.get(f"session_{index}") or []
                sessions.append(
                    [
                        ("user" if r["speaker"] == speaker else "assistant", r["text"])
                        for r in rows
                    ]
                )
                turns += sum(r["speaker"] == speaker for r in rows)
            memories, _ = pipeline.run(f"locomo/{number}/{speaker}", sessions)
            for m in memories:
                if m.source == "user_stated":
                    kinds[m.kind] += 1
                    if m.kind == "rule" and len(examples) < 10:
                        examples.append(f"rule: {m.text[:80]!r}")
    stored = sum(kinds.values())
    return {
        "family": "locomo-dev",
        "part": "measure",
        "user_turns": turns,
        "stored": stored,
        "per_100_turns": round(100 * stored / turns, 1) if turns else None,
        "rules_stored": kinds.get("rule", 0),
        "by_kind": dict(sorted(kinds.items())),
        "errors": examples,
    }


def run(corpora: Path | None, parts=("dev", "measure")) -> list[dict]:
    pipeline = _Pipeline()
    out = []
    for path in sorted(DIALOGUES_DIR.glob("*.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        if data["part"] in parts:
            out.append(score_family(pipeline, data))
    if corpora is not None and "measure" in parts:
        locomo = score_locomo(pipeline, corpora)
        if locomo is not None:
            out.append(locomo)
    return out


def _print(rows: list[dict], examples: int) -> None:
    print("\n== memory dialogues, by source family ==")
    print(
        f"{'family':<22}{'part':<9}{'precision':>10}{'n':>4}{'recall':>8}{'n':>4}"
        f"{'corrections':>13}{'n':>4}{'must-not served':>17}"
    )
    for row in rows:
        if "precision" in row:
            fmt = lambda v: "-" if v is None else f"{v:.3f}"  # noqa: E731
            print(
                f"{row['family']:<22}{row['part']:<9}{fmt(row['precision']):>10}"
                f"{row['served']:>4}{fmt(row['recall']):>8}{row['labels']:>4}"
                f"{fmt(row['corrections']):>13}{row['correction_pairs']:>4}"
                f"{row['must_not_served']:>11}/{row['must_not_turns']:<5}"
            )
        else:
            print(
                f"{row['family']:<22}{row['part']:<9} {row['user_turns']} user turns:"
                f" {row['stored']} stored ({row['per_100_turns']}/100 turns),"
                f" rules {row['rules_stored']}, by kind {row['by_kind']}"
            )
    for row in rows:
        for line in row["errors"][:examples]:
            print(f"  {row['family']}: {line}")


def main(argv: list[str] | None = None) -> int:
    """Print the per-family report (``--out``: also JSON); always exit 0."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpora", type=Path, default=None)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--examples", type=int, default=20)
    parser.add_argument("--dev-only", action="store_true")
    args = parser.parse_args(argv)
    corpora = args.corpora or default_corpora()
    parts = ("dev",) if args.dev_only else ("dev", "measure")
    rows = run(corpora, parts)
    _print(rows, args.examples)
    if args.out:
        args.out.write_text(json.dumps(rows, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
