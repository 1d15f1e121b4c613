"""Redaction quality against the labelled corpora: ``python -m eval.redaction``.

Measures, with the default policy (or ``--policy``):

* **PII** on presidio-research ``generated_small.json`` (the dev set): recall and
  precision per entity type with span-overlap matching. Gold types are mapped to
  ours (``GOLD_MAP``); gold types we do not redact by default (``OUT_OF_SCOPE``)
  are neither counted as misses nor do predictions on them count as false
  positives. ``recall_any_type`` counts a gold span as covered when *any*
  placeholder overlaps it (the value is gone, whatever the label).
* presidio's ``context_sentences_tests.txt`` and the ``demo.txt`` round trip.
* PERSON/LOCATION on WNUT17 ``emerging.dev.conll`` (real tweets; NER data).
* **Secrets**: recall on the CredSweeper sample findings (a finding counts when the
  redacted file no longer contains its value), the false-positive rate on the
  CredSweeper negative files (``*_n``, ``*_fp``, ``*FALSE``, ``false_positive``),
  and recall on the detect-secrets test files (values recovered from the
  baseline's SHA-1 hashes).
* ``--held-out`` adds ``synth_dataset_v2.json`` and WNUT17 ``emerging.test``
  (acceptance only: never tune on them).

Prints a table; ``--out FILE`` also writes everything as JSON.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
import time
from collections import Counter, defaultdict
from difflib import SequenceMatcher
from pathlib import Path
from typing import Any

from eval.corpora import default_corpora
from eval.metrics import Counts, Span

#: presidio-research gold label -> our entity type.
GOLD_MAP = {
    "PERSON": "PERSON",
    "ADDRESS": "LOCATION",
    "STREET_ADDRESS": "LOCATION",
    "LOCATION": "LOCATION",
    "GPE": "LOCATION",
    "ZIP_CODE": "LOCATION",
    "CREDIT_CARD": "CREDIT_CARD",
    "PHONE_NUMBER": "PHONE_NUMBER",
    "EMAIL_ADDRESS": "EMAIL_ADDRESS",
    "IBAN_CODE": "IBAN_CODE",
    "US_SSN": "US_SSN",
    "IP_ADDRESS": "IP_ADDRESS",
}
#: Gold labels outside the default policy (off by default or not detected):
#: ORGANIZATION, DATE_TIME, NRP and URL are policy options that are off by default;
#: TITLE, AGE, US_DRIVER_LICENSE are not redacted.
OUT_OF_SCOPE = frozenset(
    {
        "ORGANIZATION",
        "DATE_TIME",
        "TITLE",
        "AGE",
        "NRP",
        "DOMAIN_NAME",
        "US_DRIVER_LICENSE",
        "URL",
    }
)
#: CredSweeper rules that are identifiers or metadata rather than secrets.
CREDSWEEPER_NOT_SECRET = frozenset(
    {
        "UUID",
        "Nonce",
        "AWS S3 Bucket",
        "Firebase Domain",
        "Tencent WeChat API App ID",
        "Salesforce Credentials",
    }
)
_NEGATIVE_FILE = re.compile(r"(?:_n|_fp|_FALSE|^false_positive|\.n\..*)$")


def _redactor(policy_path: str | None) -> Any:
    from pipelines.redact.engine import Redactor
    from schemas.policy import load_policy

    redactor = Redactor(load_policy(policy_path), b"eval-key-not-secret-000000000000")
    redactor.setup()
    return redactor


def _predicted(dets: Any) -> list[Span]:
    return [Span(d.start, d.end, d.entity_type) for d in dets]


# ------------------------------------------------------------------- PII sets


def eval_presidio_json(redactor: Any, path: Path) -> dict[str, Any]:
    """Per-type recall/precision on a presidio-research JSON file."""
    records = json.loads(path.read_text(encoding="utf-8"))
    texts = [r["full_text"] for r in records]
    detections = redactor.detect_batch(texts)
    counts = Counts()
    misses: list[dict[str, str]] = []
    false_pos: list[dict[str, str]] = []
    for record, dets in zip(records, detections, strict=True):
        text = record["full_text"]
        gold, ignored = [], []
        for s in record["spans"]:
            span = (s["start_position"], s["end_position"])
            label = GOLD_MAP.get(s["entity_type"])
            if label is None:
                ignored.append(Span(*span, s["entity_type"]))
            else:
                gold.append(Span(*span, label))
        predicted = _predicted(dets)
        counts.add(gold, predicted, ignored)
        for g in gold:
            if not any(p.label == g.label and p.overlaps(g) for p in predicted):
                misses.append({"type": g.label, "value": text[g.start : g.end]})
        for p in predicted:
            if not any(p.overlaps(g) for g in gold + ignored):
                false_pos.append({"type": p.label, "value": text[p.start : p.end]})
    return {
        "file": path.name,
        "records": len(records),
        "per_type": counts.table(),
        "misses": misses,
        "false_positives": false_pos,
    }


def eval_context_sentences(redactor: Any, path: Path) -> dict[str, Any]:
    """presidio's context sentences: is the labelled type found in each sentence."""
    blocks = [
        b.strip().splitlines()
        for b in re.split(r"\n\s*\n", path.read_text(encoding="utf-8"))
    ]
    cases = [
        (lines[0].strip(), lines[1].strip())
        for lines in blocks
        if len(lines) >= 2 and not lines[0].startswith("#")
    ]
    detections = redactor.detect_batch([sentence for _, sentence in cases])
    per_type: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for (etype, _), dets in zip(cases, detections, strict=True):
        per_type[etype][1] += 1
        if any(d.entity_type == etype for d in dets):
            per_type[etype][0] += 1
    found = sum(v[0] for v in per_type.values())
    return {
        "cases": len(cases),
        "found": found,
        "per_type": {k: {"found": v[0], "cases": v[1]} for k, v in per_type.items()},
    }


def eval_demo(redactor: Any, folder: Path) -> dict[str, Any]:
    """presidio's demo.txt -> demo_anonymized.txt: gold spans by alignment."""
    original = (folder / "demo.txt").read_text(encoding="utf-8")
    expected = (folder / "demo_anonymized.txt").read_text(encoding="utf-8")
    matcher = SequenceMatcher(None, original, expected, autojunk=False)
    gold, ignored = [], []
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag != "replace":
            continue
        label_match = re.fullmatch(r"<([A-Z_]+)>", expected[j1:j2])
        if not label_match:
            continue
        label = label_match.group(1)
        if label in GOLD_MAP:
            gold.append(Span(i1, i2, GOLD_MAP[label]))
        else:
            ignored.append(Span(i1, i2, label))
    dets = redactor.detect_batch([original])[0]
    counts = Counts()
    counts.add(gold, _predicted(dets), ignored)
    return {"per_type": counts.table()}


def _conll_sentences(path: Path) -> list[tuple[str, list[Span]]]:
    out = []
    tokens: list[tuple[str, str]] = []
    for line in path.read_text(encoding="utf-8").splitlines() + [""]:
        if not line.strip():
            if tokens:
                text = ""
                spans: list[Span] = []
                current: list[Any] | None = None
                for tok, tag in tokens:
                    start = len(text) + (1 if text else 0)
                    text = f"{text} {tok}" if text else tok
                    kind = tag[2:] if len(tag) > 2 else ""
                    label = {"person": "PERSON", "location": "LOCATION"}.get(kind)
                    starts = tag.startswith("B-")
                    if starts or (tag.startswith("I-") and current is None):
                        if current:
                            spans.append(Span(*current))
                        current = [start, len(text), label] if label else None
                    elif tag.startswith("I-") and current is not None:
                        current[1] = len(text)
                    else:
                        if current:
                            spans.append(Span(*current))
                        current = None
                if current:
                    spans.append(Span(*current))
                out.append((text, spans))
            tokens = []
            continue
        parts = line.split("\t")
        if len(parts) >= 2:
            tokens.append((parts[0], parts[-1].strip()))
    return out


def eval_wnut(redactor: Any, path: Path) -> dict[str, Any]:
    """PERSON and LOCATION recall/precision on a WNUT17 CoNLL file."""
    sentences = _conll_sentences(path)
    detections = redactor.detect_batch([text for text, _ in sentences])
    counts = Counts()
    for (_, gold), dets in zip(sentences, detections, strict=True):
        predicted = [p for p in _predicted(dets) if p.label in ("PERSON", "LOCATION")]
        counts.add(gold, predicted)
    return {"file": path.name, "sentences": len(sentences), "per_type": counts.table()}


# ------------------------------------------------------------------- secrets


def eval_credsweeper(redactor: Any, folder: Path) -> dict[str, Any]:
    """Secret recall on CredSweeper positives and FPs on its negative files."""
    expected = json.loads((folder / "expected_output.json").read_text())
    samples = folder / "samples"
    wanted: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for finding in expected:
        if finding["rule"] in CREDSWEEPER_NOT_SECRET:
            continue
        for line in finding["line_data_list"]:
            name = line["path"].rsplit("/", 1)[-1]
            wanted[name].append((finding["rule"], line["value"]))
    files = sorted(p for p in samples.iterdir() if p.is_file())
    texts = [p.read_text(encoding="utf-8", errors="replace") for p in files]
    results = redactor.redact_batch([("tool_output", t) for t in texts], "eval")
    per_rule: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    caught = total = 0
    missed: list[dict[str, str]] = []
    neg_files = neg_with_fp = neg_findings = 0
    for path, redaction in zip(files, results, strict=True):
        seen: set[str] = set()
        for rule, value in wanted.get(path.name, []):
            if value in seen:
                continue
            seen.add(value)
            total += 1
            per_rule[rule][1] += 1
            if value not in redaction.text:
                caught += 1
                per_rule[rule][0] += 1
            else:
                missed.append({"file": path.name, "rule": rule, "value": value[:60]})
        if _NEGATIVE_FILE.search(path.name):
            neg_files += 1
            gold_values = {v for _, v in wanted.get(path.name, [])}
            fps = [
                f
                for f in redaction.findings
                if f.entity_type in _secret_types() and not gold_values
            ]
            neg_findings += len(fps)
            neg_with_fp += bool(fps)
    return {
        "positives": total,
        "caught": caught,
        "recall": round(caught / total, 4) if total else float("nan"),
        "negative_files": neg_files,
        "negative_files_with_findings": neg_with_fp,
        "negative_findings": neg_findings,
        "per_rule": {k: {"caught": v[0], "total": v[1]} for k, v in per_rule.items()},
        "missed": missed,
    }


def _secret_types() -> frozenset[str]:
    from pipelines.redact.spans import SECRET_TYPES

    return SECRET_TYPES


def eval_detect_secrets(redactor: Any, folder: Path) -> dict[str, Any]:
    """Recall on detect-secrets test files whose baseline hashes we can resolve."""
    baseline = json.loads((folder / "baseline.file").read_text())
    total = caught = 0
    details = []
    for name, entries in baseline.get("results", {}).items():
        path = folder / name
        if not path.is_file():
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        lines = text.splitlines()
        redacted = redactor.redact_text(text, "eval", "tool_output").text
        for entry in entries:
            line_no = entry["line_number"]
            if not 0 < line_no <= len(lines):
                continue
            value = _unhash(lines[line_no - 1], entry["hashed_secret"])
            if value is None:
                continue
            total += 1
            ok = value not in redacted
            caught += ok
            details.append(
                {"file": name, "line": line_no, "type": entry["type"], "caught": ok}
            )
    # files without baseline entries: findings there are false positives
    fp_files = {}
    for path in sorted(folder.iterdir()):
        if path.name in baseline.get("results", {}) or path.name.startswith("LICENSE"):
            continue
        if path.name == "baseline.file" or not path.is_file():
            continue
        found = redactor.redact_text(path.read_text(errors="replace"), "eval").findings
        fp_files[path.name] = len(found)
    return {
        "resolved_positives": total,
        "caught": caught,
        "recall": round(caught / total, 4) if total else float("nan"),
        "details": details,
        "findings_in_files_without_secrets": fp_files,
    }


def _unhash(line: str, sha1: str) -> str | None:
    """The substring of ``line`` whose SHA-1 is ``sha1`` (token candidates only)."""
    pieces = set(re.split(r"[\s\"'=:,;()\[\]{}]+", line))
    for match in re.finditer(r"[^\s\"']+", line):
        pieces.add(match.group(0))
    for piece in pieces:
        if piece and hashlib.sha1(piece.encode()).hexdigest() == sha1:  # noqa: S324
            return piece
    return None


# ---------------------------------------------------------------------- main


def run(corpora: Path, policy: str | None, held_out: bool) -> dict[str, Any]:
    """Every measurement as one JSON-able dict."""
    started = time.perf_counter()
    redactor = _redactor(policy)
    report: dict[str, Any] = {
        "policy_version": redactor.policy_version,
        "setup_seconds": round(time.perf_counter() - started, 2),
    }
    synth = corpora / "presidio-research-synth-pii"
    fixtures = corpora / "presidio-test-fixtures"
    wnut = corpora / "wnut17-emerging-entities-conll"
    if (synth / "generated_small.json").exists():
        report["dev_generated_small"] = eval_presidio_json(
            redactor, synth / "generated_small.json"
        )
    if (fixtures / "context_sentences_tests.txt").exists():
        report["presidio_context_sentences"] = eval_context_sentences(
            redactor, fixtures / "context_sentences_tests.txt"
        )
    if (fixtures / "demo.txt").exists():
        report["presidio_demo"] = eval_demo(redactor, fixtures)
    if (wnut / "emerging.dev.conll").exists():
        report["wnut17_dev"] = eval_wnut(redactor, wnut / "emerging.dev.conll")
    creds = corpora / "credsweeper-secret-samples"
    if (creds / "expected_output.json").exists():
        report["credsweeper"] = eval_credsweeper(redactor, creds)
    ds = corpora / "detect-secrets-test-data"
    if (ds / "baseline.file").exists():
        report["detect_secrets"] = eval_detect_secrets(redactor, ds)
    if held_out:
        if (synth / "synth_dataset_v2.json").exists():
            report["HELD_OUT_synth_dataset_v2"] = eval_presidio_json(
                redactor, synth / "synth_dataset_v2.json"
            )
        if (wnut / "emerging.test.annotated").exists():
            report["HELD_OUT_wnut17_test"] = eval_wnut(
                redactor, wnut / "emerging.test.annotated"
            )
    report["seconds"] = round(time.perf_counter() - started, 2)
    return report


def _print_table(title: str, table: dict[str, dict[str, Any]]) -> None:
    print(f"\n{title}")
    print(f"  {'type':<15}{'recall':>8}{'prec':>8}{'f1':>8}{'any':>8}{'n':>6}{'fp':>5}")
    for label, row in table.items():
        print(
            f"  {label:<15}{row['recall']:>8.3f}{row['precision']:>8.3f}"
            f"{row['f1']:>8.3f}{row['recall_any_type']:>8.3f}{row['support']:>6}"
            f"{row['fp']:>5}"
        )


def print_report(report: dict[str, Any]) -> None:
    """Human-readable summary of ``run``'s output."""
    print(
        f"policy {report['policy_version']}  (setup {report['setup_seconds']} s, "
        f"total {report['seconds']} s)"
    )
    for key in ("dev_generated_small", "HELD_OUT_synth_dataset_v2"):
        if key in report:
            _print_table(
                f"{key} (span overlap; 'any' = covered by any placeholder)",
                report[key]["per_type"],
            )
    if "presidio_demo" in report:
        _print_table("presidio demo.txt", report["presidio_demo"]["per_type"])
    if "presidio_context_sentences" in report:
        ctx = report["presidio_context_sentences"]
        print(f"\npresidio context sentences: {ctx['found']}/{ctx['cases']} found")
    for key in ("wnut17_dev", "HELD_OUT_wnut17_test"):
        if key in report:
            _print_table(f"{key} (PERSON/LOCATION only)", report[key]["per_type"])
    if "credsweeper" in report:
        cs = report["credsweeper"]
        print(
            f"\nCredSweeper: secret recall {cs['recall']:.3f} "
            f"({cs['caught']}/{cs['positives']} values gone from the output); "
            f"negative files with findings {cs['negative_files_with_findings']}/"
            f"{cs['negative_files']} ({cs['negative_findings']} findings)"
        )
    if "detect_secrets" in report:
        ds = report["detect_secrets"]
        print(
            f"detect-secrets: recall {ds['recall']:.3f} ({ds['caught']}/"
            f"{ds['resolved_positives']} resolved baseline secrets); findings in "
            f"files without secrets: {ds['findings_in_files_without_secrets']}"
        )


def main(argv: list[str] | None = None) -> int:
    """CLI entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--corpora",
        type=Path,
        default=None,
        help="corpora folder (default: ../shared/corpora)",
    )
    parser.add_argument("--policy", default=None, help="policy YAML (default policy)")
    parser.add_argument("--out", type=Path, default=None, help="write JSON here")
    parser.add_argument(
        "--held-out",
        action="store_true",
        help="also measure the held-out sets (report only)",
    )
    parser.add_argument(
        "--show-errors",
        action="store_true",
        help="print dev-set misses and false positives",
    )
    args = parser.parse_args(argv)
    corpora = args.corpora or default_corpora()
    if corpora is None or not corpora.is_dir():
        print("no corpora folder found; pass --corpora", file=sys.stderr)
        return 2
    report = run(corpora, args.policy, args.held_out)
    print_report(report)
    if args.show_errors and "dev_generated_small" in report:
        dev = report["dev_generated_small"]
        print("\nmisses:", Counter(m["type"] for m in dev["misses"]))
        for m in dev["misses"]:
            print("  MISS", m["type"], repr(m["value"]))
        for m in dev["false_positives"]:
            print("  FP  ", m["type"], repr(m["value"]))
        for m in report.get("credsweeper", {}).get("missed", []):
            print("  SECRET MISS", m["file"], m["rule"], repr(m["value"]))
    if args.out:
        args.out.write_text(json.dumps(report, indent=2, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
