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
* **Split by source** (``eval.families``, issue 29): the sets grouped into a
  ``develop`` family (presidio-research, presidio's demo) and a ``measure``
  family (WNUT17 dev, the TAB ECHR sample, CredSweeper, every runbook version),
  each also lower-cased and unpunctuated; the measure column is the headline.
* ``--held-out`` adds ``synth_dataset_v2.json`` and WNUT17 ``emerging.test``
  (acceptance only: never tune on them).

Every labelled set is split into a ``dev`` part (look at its errors, tune on it)
and a ``measure`` part (report only) by ``eval.split``; both are reported. Per
entity type: recall, precision and **verbatim survival** (the whole gold value
still present after redaction), beside plain presidio on the same texts
(``eval.baselines``) and ours without the technical-text filter
(``pipelines.redact.technical``). Secrets are compared with detect-secrets and
CredSweeper when installed. ``eval.technical`` adds the PERSON/LOCATION
placeholder rate per 10k tokens on technical text. ``--quick`` skips the
comparison columns.

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
from eval.split import PARTS, part_of

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
    from ctxledger.pipelines.redact.engine import Redactor
    from ctxledger.schemas.policy import load_policy

    redactor = Redactor(load_policy(policy_path), b"eval-key-not-secret-000000000000")
    redactor.setup()
    return redactor


def _predicted(dets: Any) -> list[Span]:
    return [Span(d.start, d.end, d.entity_type) for d in dets]


# ------------------------------------------------------------------- PII sets


Record = tuple[str, list[Span], list[Span]]  # text, gold, ignored (out of scope)


def _mask(text: str, spans: list[Span]) -> str:
    """``text`` with every predicted span replaced (what survives redaction)."""
    out, pos = [], 0
    for span in sorted(spans, key=lambda s: s.start):
        if span.start < pos:
            continue
        out.append(text[pos : span.start])
        out.append(f"<{span.label}>")
        pos = span.end
    out.append(text[pos:])
    return "".join(out)


def score_parts(
    records: list[Record], predicted: list[list[Span]], labels: frozenset[str] | None
) -> dict[str, dict[str, dict[str, float | int]]]:
    """Per split part: recall/precision per type plus verbatim survival."""
    counts = {part: Counts() for part in PARTS}
    survived: dict[str, Counter[str]] = {part: Counter() for part in PARTS}
    for (text, gold, ignored), preds in zip(records, predicted, strict=True):
        part = part_of(text)
        if labels is not None:
            preds = [p for p in preds if p.label in labels]
        counts[part].add(gold, preds, ignored)
        masked = _mask(text, preds)
        for g in gold:
            if text[g.start : g.end] in masked:
                survived[part][g.label] += 1
                survived[part]["ALL"] += 1
    out = {}
    for part in PARTS:
        table = counts[part].table()
        for label, row in table.items():
            support = row["support"]
            row["survival"] = (
                round(survived[part][label] / support, 4) if support else float("nan")
            )
        out[part] = table
    return out


def _compare(
    redactor: Any,
    records: list[Record],
    comparators: dict[str, Any],
    labels: frozenset[str] | None = None,
) -> dict[str, Any]:
    """Ours, ours without the technical filter, and plain presidio, per part."""
    texts = [text for text, _, _ in records]
    result = {"ours": score_parts(records, _spans(redactor, texts), labels)}
    if comparators.get("no_filter"):
        result["ours_no_filter"] = score_parts(
            records, _spans(redactor, texts, technical_filter=False), labels
        )
    presidio = comparators.get("presidio")
    if presidio is not None:
        if isinstance(presidio, str):
            result["presidio"] = presidio
        else:
            result["presidio"] = score_parts(records, presidio.spans(texts), labels)
    return result


def _spans(
    redactor: Any, texts: list[str], technical_filter: bool = True
) -> list[list[Span]]:
    """Our final detections as spans; optionally with the technical filter off."""
    from ctxledger.pipelines.redact import technical  # noqa: PLC0415

    original = technical.drop_technical
    redactor._cache.clear()  # noqa: SLF001 - a cached result would hide the switch
    try:
        if not technical_filter:
            technical.drop_technical = lambda _text, dets: list(dets)
        return [_predicted(d) for d in redactor.detect_batch(texts)]
    finally:
        technical.drop_technical = original
        redactor._cache.clear()  # noqa: SLF001


def eval_presidio_json(
    redactor: Any, path: Path, comparators: dict[str, Any] | None = None
) -> dict[str, Any]:
    """Per-type recall/precision/survival on a presidio-research JSON file."""
    records = json.loads(path.read_text(encoding="utf-8"))
    scored: list[Record] = []
    for record in records:
        gold, ignored = [], []
        for s in record["spans"]:
            span = (s["start_position"], s["end_position"])
            label = GOLD_MAP.get(s["entity_type"])
            if label is None:
                ignored.append(Span(*span, s["entity_type"]))
            else:
                gold.append(Span(*span, label))
        scored.append((record["full_text"], gold, ignored))
    result = _compare(redactor, scored, comparators or {})
    misses: list[dict[str, str]] = []
    false_pos: list[dict[str, str]] = []
    dets = redactor.detect_batch([t for t, _, _ in scored])
    for (text, gold, ignored), found in zip(scored, dets, strict=True):
        if part_of(text) != "dev":
            continue  # errors are for developing: dev part only
        predicted = _predicted(found)
        for g in gold:
            if not any(p.label == g.label and p.overlaps(g) for p in predicted):
                misses.append({"type": g.label, "value": text[g.start : g.end]})
        for p in predicted:
            if not any(p.overlaps(g) for g in gold + ignored):
                false_pos.append({"type": p.label, "value": text[p.start : p.end]})
    return {
        "file": path.name,
        "records": len(records),
        **result,
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


def eval_wnut(
    redactor: Any, path: Path, comparators: dict[str, Any] | None = None
) -> dict[str, Any]:
    """PERSON and LOCATION recall/precision/survival on a WNUT17 CoNLL file."""
    sentences = _conll_sentences(path)
    records: list[Record] = [(text, gold, []) for text, gold in sentences]
    result = _compare(
        redactor, records, comparators or {}, frozenset({"PERSON", "LOCATION"})
    )
    return {"file": path.name, "sentences": len(sentences), **result}


# ------------------------------------------------------------------- secrets


def _secret_tools(paths: list[Path], tools: bool) -> dict[str, Any]:
    """detect-secrets' and CredSweeper's reported values per file (or why not)."""
    if not tools:
        return {}
    from eval.baselines import (  # noqa: PLC0415
        secret_values_credsweeper,
        secret_values_detect_secrets,
    )

    return {
        "detect-secrets": secret_values_detect_secrets(paths),
        "credsweeper": secret_values_credsweeper(paths),
    }


def _secret_row() -> dict[str, int]:
    return {"positives": 0, "caught": 0, "neg_files": 0, "neg_files_flagged": 0}


def _finish(rows: dict[str, dict[str, int]]) -> dict[str, dict[str, Any]]:
    for row in rows.values():
        row["recall"] = (
            round(row["caught"] / row["positives"], 4)
            if row["positives"]
            else float("nan")
        )
    return rows


def eval_credsweeper(
    redactor: Any, folder: Path, tools: bool = False
) -> dict[str, Any]:
    """Secret recall on CredSweeper positives and FPs on its negative files.

    With ``tools``, detect-secrets and CredSweeper are scored the same way (note:
    the gold findings are CredSweeper's own test output, so it scores itself).
    """
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
    others = _secret_tools(files, tools)
    per_rule: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    parts: dict[str, dict[str, dict[str, int]]] = {
        part: defaultdict(_secret_row) for part in PARTS
    }
    caught = total = 0
    missed: list[dict[str, str]] = []
    neg_files = neg_with_fp = neg_findings = 0
    for path, redaction in zip(files, results, strict=True):
        part = part_of(path.name)
        seen: set[str] = set()
        for rule, value in wanted.get(path.name, []):
            if value in seen:
                continue
            seen.add(value)
            total += 1
            per_rule[rule][1] += 1
            ok = value not in redaction.text
            parts[part]["ours"]["positives"] += 1
            parts[part]["ours"]["caught"] += ok
            for tool, reported in others.items():
                if not isinstance(reported, str):
                    parts[part][tool]["positives"] += 1
                    parts[part][tool]["caught"] += found_value(value, reported[path])
            if ok:
                caught += 1
                per_rule[rule][0] += 1
            elif part == "dev":
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
            if not gold_values:
                parts[part]["ours"]["neg_files"] += 1
                parts[part]["ours"]["neg_files_flagged"] += bool(fps)
                for tool, reported in others.items():
                    if not isinstance(reported, str):
                        parts[part][tool]["neg_files"] += 1
                        parts[part][tool]["neg_files_flagged"] += bool(reported[path])
    return {
        "positives": total,
        "caught": caught,
        "recall": round(caught / total, 4) if total else float("nan"),
        "negative_files": neg_files,
        "negative_files_with_findings": neg_with_fp,
        "negative_findings": neg_findings,
        "parts": {part: _finish(dict(rows)) for part, rows in parts.items()},
        "tools": {k: v if isinstance(v, str) else "ok" for k, v in others.items()},
        "per_rule": {k: {"caught": v[0], "total": v[1]} for k, v in per_rule.items()},
        "missed": missed,
    }


def found_value(value: str, reported: list[str]) -> bool:
    """Whether another tool's reported values cover the gold ``value``."""
    from eval.baselines import found  # noqa: PLC0415

    return found(value, reported)


def _secret_types() -> frozenset[str]:
    from ctxledger.pipelines.redact.spans import SECRET_TYPES

    return SECRET_TYPES


def eval_detect_secrets(
    redactor: Any, folder: Path, tools: bool = False
) -> dict[str, Any]:
    """Recall on detect-secrets test files whose baseline hashes we can resolve."""
    baseline = json.loads((folder / "baseline.file").read_text())
    results = baseline.get("results", {})
    all_files = sorted(
        p
        for p in folder.iterdir()
        if p.is_file()
        and p.name != "baseline.file"
        and not p.name.startswith("LICENSE")
    )
    others = _secret_tools(all_files, tools)
    parts: dict[str, dict[str, dict[str, int]]] = {
        part: defaultdict(_secret_row) for part in PARTS
    }
    total = caught = 0
    details = []
    fp_files = {}
    for path in all_files:
        part = part_of(path.name)
        text = path.read_text(encoding="utf-8", errors="replace")
        redaction = redactor.redact_text(text, "eval", "tool_output")
        if path.name not in results:  # no secrets here: findings are FPs
            fp_files[path.name] = len(redaction.findings)
            rows = parts[part]
            rows["ours"]["neg_files"] += 1
            rows["ours"]["neg_files_flagged"] += bool(redaction.findings)
            for tool, reported in others.items():
                if not isinstance(reported, str):
                    rows[tool]["neg_files"] += 1
                    rows[tool]["neg_files_flagged"] += bool(reported[path])
            continue
        lines = text.splitlines()
        for entry in results[path.name]:
            line_no = entry["line_number"]
            if not 0 < line_no <= len(lines):
                continue
            value = _unhash(lines[line_no - 1], entry["hashed_secret"])
            if value is None:
                continue
            total += 1
            ok = value not in redaction.text
            caught += ok
            parts[part]["ours"]["positives"] += 1
            parts[part]["ours"]["caught"] += ok
            for tool, reported in others.items():
                if not isinstance(reported, str):
                    parts[part][tool]["positives"] += 1
                    parts[part][tool]["caught"] += found_value(value, reported[path])
            details.append(
                {
                    "file": path.name,
                    "line": line_no,
                    "type": entry["type"],
                    "caught": ok,
                }
            )
    return {
        "resolved_positives": total,
        "caught": caught,
        "recall": round(caught / total, 4) if total else float("nan"),
        "details": details,
        "findings_in_files_without_secrets": fp_files,
        "parts": {part: _finish(dict(rows)) for part, rows in parts.items()},
        "tools": {k: v if isinstance(v, str) else "ok" for k, v in others.items()},
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


def run(
    corpora: Path, policy: str | None, held_out: bool, quick: bool = False
) -> dict[str, Any]:
    """Every measurement as one JSON-able dict (``quick``: no comparison columns)."""
    started = time.perf_counter()
    redactor = _redactor(policy)
    report: dict[str, Any] = {
        "policy_version": redactor.policy_version,
        "setup_seconds": round(time.perf_counter() - started, 2),
        "quick": quick,
    }
    comparators: dict[str, Any] = {}
    if not quick:
        from ctxledger.pipelines.redact.ner import FALLBACK_MODEL  # noqa: PLC0415
        from eval.baselines import plain_presidio  # noqa: PLC0415

        comparators = {
            "no_filter": True,
            # plain presidio as a new user gets it: its default small model
            "presidio": plain_presidio(set(GOLD_MAP.values()), FALLBACK_MODEL),
        }
    synth = corpora / "presidio-research-synth-pii"
    fixtures = corpora / "presidio-test-fixtures"
    wnut = corpora / "wnut17-emerging-entities-conll"
    if (synth / "generated_small.json").exists():
        report["dev_generated_small"] = eval_presidio_json(
            redactor, synth / "generated_small.json", comparators
        )
    if (fixtures / "context_sentences_tests.txt").exists():
        report["presidio_context_sentences"] = eval_context_sentences(
            redactor, fixtures / "context_sentences_tests.txt"
        )
    if (fixtures / "demo.txt").exists():
        report["presidio_demo"] = eval_demo(redactor, fixtures)
    if (wnut / "emerging.dev.conll").exists():
        report["wnut17_dev"] = eval_wnut(
            redactor, wnut / "emerging.dev.conll", comparators
        )
    creds = corpora / "credsweeper-secret-samples"
    if (creds / "expected_output.json").exists():
        report["credsweeper"] = eval_credsweeper(redactor, creds, tools=not quick)
    ds = corpora / "detect-secrets-test-data"
    if (ds / "baseline.file").exists():
        report["detect_secrets"] = eval_detect_secrets(redactor, ds, tools=not quick)
    report["technical_text"] = _technical(redactor, corpora, quick)
    from eval import families  # noqa: PLC0415

    report["families"] = families.run(
        redactor,
        corpora,
        GOLD_MAP,
        CREDSWEEPER_NOT_SECRET,
        comparators.get("presidio"),
    )
    if held_out:
        if (synth / "synth_dataset_v2.json").exists():
            report["HELD_OUT_synth_dataset_v2"] = eval_presidio_json(
                redactor, synth / "synth_dataset_v2.json", comparators
            )
        if (wnut / "emerging.test.annotated").exists():
            report["HELD_OUT_wnut17_test"] = eval_wnut(
                redactor, wnut / "emerging.test.annotated", comparators
            )
    report["seconds"] = round(time.perf_counter() - started, 2)
    return report


def _technical(redactor: Any, corpora: Path, quick: bool) -> dict[str, Any]:
    """Placeholder rate on technical text, with and (unless quick) without filter."""
    from ctxledger.pipelines.redact import technical as tech_filter  # noqa: PLC0415
    from eval import technical  # noqa: PLC0415

    texts = technical.technical_texts(corpora)
    names = technical.load_true_names()
    out = {"filtered": technical.measure(redactor, texts, names)}
    if not quick:
        original = tech_filter.drop_technical
        redactor._cache.clear()  # noqa: SLF001
        try:
            tech_filter.drop_technical = lambda _text, dets: list(dets)
            out["no_filter"] = technical.measure(redactor, texts, names)
        finally:
            tech_filter.drop_technical = original
            redactor._cache.clear()  # noqa: SLF001
    return out


def _print_table(title: str, table: dict[str, dict[str, Any]]) -> None:
    print(f"\n{title}")
    print(f"  {'type':<15}{'recall':>8}{'prec':>8}{'f1':>8}{'any':>8}{'n':>6}{'fp':>5}")
    for label, row in table.items():
        print(
            f"  {label:<15}{row['recall']:>8.3f}{row['precision']:>8.3f}"
            f"{row['f1']:>8.3f}{row['recall_any_type']:>8.3f}{row['support']:>6}"
            f"{row['fp']:>5}"
        )


def _fmt(value: Any) -> str:
    return f"{value:>7.3f}" if isinstance(value, float | int) else f"{'-':>7}"


def _print_parts(title: str, result: dict[str, Any]) -> None:
    """One line per part and type: ours (and comparisons) recall/prec/survival."""
    columns = [k for k in ("ours", "ours_no_filter", "presidio") if k in result]
    print(f"\n{title}  (rec/prec/surv = recall, precision, verbatim survival)")
    header = "".join(f"{c:>24}" for c in columns)
    print(f"  {'part':<8}{'type':<15}{'n':>5}{header}")
    for part in PARTS:
        labels = list(result["ours"][part])
        for label in labels:
            row = result["ours"][part][label]
            cells = []
            for col in columns:
                table = result[col]
                if isinstance(table, str):
                    cells.append(f"{table[:23]:>24}")
                    continue
                r = table[part].get(label, {})
                cells.append(
                    f"{_fmt(r.get('recall'))}/{_fmt(r.get('precision'))[1:]}/"
                    f"{_fmt(r.get('survival'))[1:]}".rjust(24)
                )
            print(f"  {part:<8}{label:<15}{row['support']:>5}{''.join(cells)}")


def _print_secret_parts(title: str, result: dict[str, Any]) -> None:
    tools = ", ".join(f"{k}: {v}" for k, v in result.get("tools", {}).items())
    print(f"\n{title}  {('(' + tools + ')') if tools else ''}")
    print(f"  {'part':<8}{'detector':<16}{'recall':>8}{'found':>8}{'neg flagged':>14}")
    for part, rows in result["parts"].items():
        for name, row in rows.items():
            print(
                f"  {part:<8}{name:<16}{row['recall']:>8.3f}"
                f"{row['caught']:>4}/{row['positives']:<3}"
                f"{row['neg_files_flagged']:>14}/{row['neg_files']}"
            )


def print_report(report: dict[str, Any]) -> None:
    """Human-readable summary of ``run``'s output."""
    print(
        f"policy {report['policy_version']}  (setup {report['setup_seconds']} s, "
        f"total {report['seconds']} s)"
    )
    for key in ("dev_generated_small", "HELD_OUT_synth_dataset_v2"):
        if key in report:
            _print_parts(f"{key} (span overlap)", report[key])
    if "presidio_demo" in report:
        _print_table("presidio demo.txt", report["presidio_demo"]["per_type"])
    if "presidio_context_sentences" in report:
        ctx = report["presidio_context_sentences"]
        print(f"\npresidio context sentences: {ctx['found']}/{ctx['cases']} found")
    for key in ("wnut17_dev", "HELD_OUT_wnut17_test"):
        if key in report:
            _print_parts(f"{key} (PERSON/LOCATION only)", report[key])
    if "credsweeper" in report:
        cs = report["credsweeper"]
        print(
            f"\nCredSweeper: secret recall {cs['recall']:.3f} "
            f"({cs['caught']}/{cs['positives']} values gone from the output); "
            f"negative files with findings {cs['negative_files_with_findings']}/"
            f"{cs['negative_files']} ({cs['negative_findings']} findings)"
        )
        _print_secret_parts("CredSweeper samples by part", cs)
    if "detect_secrets" in report:
        ds = report["detect_secrets"]
        print(
            f"\ndetect-secrets: recall {ds['recall']:.3f} ({ds['caught']}/"
            f"{ds['resolved_positives']} resolved baseline secrets); findings in "
            f"files without secrets: {ds['findings_in_files_without_secrets']}"
        )
        _print_secret_parts("detect-secrets test files by part", ds)
    if "technical_text" in report:
        from eval.technical import print_rates  # noqa: PLC0415

        tech = report["technical_text"]
        print_rates(tech["filtered"])
        if "no_filter" in tech:
            print("  (without the technical-text filter:)")
            print_rates(tech["no_filter"])
    if "families" in report:
        from eval.families import print_families  # noqa: PLC0415

        print_families(report["families"])


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
        "--quick",
        action="store_true",
        help="skip plain presidio, detect-secrets, CredSweeper and the no-filter run",
    )
    parser.add_argument(
        "--show-errors",
        action="store_true",
        help="print dev-part misses and false positives",
    )
    args = parser.parse_args(argv)
    corpora = args.corpora or default_corpora()
    if corpora is None or not corpora.is_dir():
        print("no corpora folder found; pass --corpora", file=sys.stderr)
        return 2
    report = run(corpora, args.policy, args.held_out, args.quick)
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
