"""Fast leak check without the pipeline: ``python -m eval.leaks_direct``.

Reads the labelled landing JSONL (``tests/fixtures/labelled/landing``), redacts each
record's content with ``Redactor.redact_batch`` (field ``content`` for user and
assistant lines, ``tool_output`` for tool lines), and reports which gold values
(``gold.json``) survive in the outputs, per family. ``--show`` prints the surviving
values. ``--transcripts N`` also reports findings per message (by type) on the first
N messages of the real transcript corpora, to watch for over-redaction.
"""

from __future__ import annotations

import argparse
import json
import time
from collections import Counter
from pathlib import Path

from eval.leaks import find_leaks

HERE = Path(__file__).resolve().parent.parent
FIXTURE = HERE / "tests" / "fixtures" / "labelled"
KEY = b"leaks-direct-key-not-a-secret-00"


def _redactor():  # noqa: ANN202
    from ctxledger.pipelines.redact.engine import Redactor  # noqa: PLC0415
    from ctxledger.schemas.policy import load_policy  # noqa: PLC0415

    redactor = Redactor(load_policy(None), KEY)
    redactor.setup()
    return redactor


def own_record_leaks(
    records: list[dict], outputs: list[str], gold: list[dict]
) -> list[dict]:
    """Gold items that survive in the output of the record they were planted in.

    ``find_leaks`` searches every output for every value, so a short value (a
    house number "23") counts as leaked when any other record's output contains
    those characters (a year, a phone number, a placeholder's hex). Here a
    CredSweeper value is looked up in its own file's tool output, and a sentence
    value in its own sentence (gold lists sentence values in record order, so
    they are aligned greedily).
    """
    by_session: dict[str, list[str]] = {}
    for record, output in zip(records, outputs, strict=True):
        by_session.setdefault(record.get("session_id", ""), []).append(output)
    sentences = [
        (record.get("content") or "", output)
        for record, output in zip(records, outputs, strict=True)
        if str(record.get("session_id", "")).startswith("synth-")
    ]
    out = []
    pos = 0
    for item in gold:
        if item["source"] != "synth":
            texts = by_session.get(f"cred-{item['source']}", [])
            if any(item["value"] in t for t in texts):
                out.append(item)
            continue
        while pos < len(sentences) and item["value"] not in sentences[pos][0]:
            pos += 1
        if pos < len(sentences) and item["value"] in sentences[pos][1]:
            out.append(item)
    return out


def landing_records(landing: Path) -> list[dict]:
    """Every landing record, in file order."""
    records: list[dict] = []
    for path in sorted(landing.glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            if not line.strip():
                continue
            records.append(json.loads(line))
    return records


def landing_items(records: list[dict]) -> list[tuple[str, str]]:
    """``(field, content)``: ``tool_output`` for tool lines, else ``content``."""
    return [
        (
            "tool_output" if r.get("role") == "tool" else "content",
            r.get("content") or "",
        )
        for r in records
    ]


def redact_landing(redactor, landing: Path) -> list[str]:  # noqa: ANN001
    """Redacted contents of every landing record."""
    items = landing_items(landing_records(landing))
    return [r.text for r in redactor.redact_batch(items, "leaks")]


def transcript_findings(redactor, limit: int) -> dict:  # noqa: ANN001
    """Findings per message by type on the first ``limit`` transcript messages."""
    import random  # noqa: PLC0415

    from eval.corpora import default_corpora, transcript_sessions  # noqa: PLC0415

    corpora = default_corpora()
    if corpora is None:
        return {}
    sessions = [s for sets in transcript_sessions(corpora).values() for s in sets]
    random.Random(7).shuffle(sessions)
    kinds: Counter[str] = Counter()
    messages = 0
    started = time.perf_counter()
    for session in sessions:
        if messages >= limit:
            break
        items = [item for message in session for item in message]
        messages += len(session)
        for res in redactor.redact_batch(items, "leaks"):
            kinds.update(f.entity_type for f in res.findings)
    elapsed = time.perf_counter() - started
    return {
        "messages": messages,
        "seconds": round(elapsed, 2),
        "findings_per_message": round(sum(kinds.values()) / max(1, messages), 4),
        "per_type": {k: round(v / max(1, messages), 4) for k, v in kinds.most_common()},
    }


def main(argv: list[str] | None = None) -> int:
    """CLI entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fixture", type=Path, default=FIXTURE)
    parser.add_argument("--show", action="store_true", help="print surviving values")
    parser.add_argument(
        "--transcripts",
        type=int,
        default=0,
        help="also count findings per message on N real messages",
    )
    args = parser.parse_args(argv)
    redactor = _redactor()
    gold = json.loads((args.fixture / "gold.json").read_text())
    records = landing_records(args.fixture / "landing")
    outputs = [r.text for r in redactor.redact_batch(landing_items(records), "leaks")]
    leaks = find_leaks(outputs, gold)
    own = own_record_leaks(records, outputs, gold)
    total = Counter(g["family"] for g in gold)
    leaked = Counter(g["family"] for g in leaks)
    leaked_own = Counter(g["family"] for g in own)
    print(f"{'family':16s} {'leaked':>7s} {'own rec':>7s} {'total':>6s}")
    for family in sorted(total):
        print(
            f"{family:16s} {leaked[family]:7d} {leaked_own[family]:7d} "
            f"{total[family]:6d}"
        )
    print(f"{'all':16s} {len(leaks):7d} {len(own):7d} {len(gold):6d}")
    print(
        "(leaked: anywhere in any output, as eval.leaks counts; own rec: in the "
        "output of a record whose input held the value)"
    )
    if args.show:
        for item in leaks:
            where = "" if item in own else "  (not in its own record's output)"
            print(
                f"  LEAK {item['family']:12s} {item['source']:28s} "
                f"{item['value']!r}{where}"
            )
    if args.transcripts:
        print(json.dumps(transcript_findings(redactor, args.transcripts), indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
