"""Evaluation split by source: a family we develop on, families we only measure.

Splitting each labelled set by row (``eval.split``) still lets rules learn the
*style* of a set: the second half of ``generated_small.json`` comes from the same
templates as the first, so its figures say little about text nobody here has
read (issue 29: dev recall 0.962, held-out 0.866). So the sets are also grouped
by where their text comes from:

* ``develop``: presidio-research ``generated_small.json`` and presidio's own
  demo text, the sets whose errors we read and tune on;
* ``measure``: WNUT17 ``emerging.dev.conll`` (real tweets and Reddit posts), the
  TAB ECHR court document and the CredSweeper samples: written by other people
  for other tools, never read while writing a rule. Only their figures are
  quoted as the headline (docs/redaction_recall.md).

Each set is also scored in two variants that strip the cues rules lean on:
``lower`` (the whole text lower-cased) and ``unpunct`` (punctuation that stands
next to a space or a line end removed: sentence ends, commas, quotes and
brackets go, the dots of ``535.104.05`` and an e-mail stay). Gold spans are
carried through the change of text by a character map.

The runbook sets (every version of the PagerDuty and prometheus-operator
documents) are measured for precision: PERSON/LOCATION placeholders per 10k
whitespace tokens, and how many sit in a Markdown heading.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eval.metrics import Counts, Span

VARIANTS = ("original", "lower", "unpunct")
FAMILIES = ("develop", "measure")

#: Punctuation removed by the ``unpunct`` variant when it touches whitespace or
#: a text edge (so tokens such as versions, e-mails and URLs keep their dots).
_PUNCT = frozenset(".,;:!?\"'“”‘’()[]{}«»…")
#: TAB ECHR entity types we redact by default; the rest are out of scope.
_TAB_MAP = {"PERSON": "PERSON", "LOC": "LOCATION"}
_HEADING_RE = re.compile(r"^\s{0,3}#{1,6}\s")


@dataclass(frozen=True)
class Labelled:
    """One text with gold spans (scored) and ignored spans (out of scope)."""

    text: str
    gold: tuple[Span, ...]
    ignored: tuple[Span, ...] = ()


def variant(text: str, kind: str) -> tuple[str, list[int]]:
    """``text`` in variant ``kind`` and, per original character, its new index
    (``-1`` where it was removed; one extra entry maps the end of the text)."""
    if kind == "original":
        return text, list(range(len(text) + 1))
    if kind == "lower":
        lowered = "".join(ch.lower() if len(ch.lower()) == 1 else ch for ch in text)
        return lowered, list(range(len(text) + 1))
    if kind != "unpunct":
        raise ValueError(f"unknown variant {kind!r}")
    n = len(text)
    drop = [False] * n
    for i, ch in enumerate(text):
        if ch not in _PUNCT:
            continue
        # a run of punctuation that touches whitespace or an edge goes whole
        j = i
        while j < n and text[j] in _PUNCT:
            j += 1
        k = i
        while k > 0 and text[k - 1] in _PUNCT:
            k -= 1
        left_edge = k == 0 or text[k - 1].isspace()
        right_edge = j == n or text[j].isspace()
        drop[i] = left_edge or right_edge
    out: list[str] = []
    index: list[int] = []
    for i, ch in enumerate(text):
        index.append(-1 if drop[i] else len(out))
        if not drop[i]:
            out.append(ch)
    index.append(len(out))
    return "".join(out), index


def _map_span(span: Span, index: list[int]) -> Span | None:
    kept = [index[i] for i in range(span.start, span.end) if index[i] >= 0]
    if not kept:
        return None
    return Span(kept[0], kept[-1] + 1, span.label)


def apply_variant(record: Labelled, kind: str) -> Labelled:
    """The record in variant ``kind`` with its spans moved along."""
    text, index = variant(record.text, kind)
    gold = tuple(s for s in (_map_span(g, index) for g in record.gold) if s)
    ignored = tuple(s for s in (_map_span(g, index) for g in record.ignored) if s)
    return Labelled(text, gold, ignored)


# ----------------------------------------------------------------- the sets


def presidio_json(path: Path, gold_map: dict[str, str]) -> list[Labelled]:
    """presidio-research JSON: gold types mapped, the others ignored."""
    out = []
    for record in json.loads(path.read_text(encoding="utf-8")):
        gold, ignored = [], []
        for s in record["spans"]:
            label = gold_map.get(s["entity_type"])
            span = Span(s["start_position"], s["end_position"], label or "OTHER")
            (gold if label else ignored).append(span)
        out.append(Labelled(record["full_text"], tuple(gold), tuple(ignored)))
    return out


def tab_echr(folder: Path) -> list[Labelled]:
    """TAB ECHR documents: PERSON and LOC mentions that annotators would mask
    (DIRECT or QUASI identifiers) are gold; every other mention is ignored."""
    out = []
    for path in sorted(folder.glob("*.json")):
        for doc in json.loads(path.read_text(encoding="utf-8")):
            gold, ignored = [], []
            for annotator in doc["annotations"].values():
                for m in annotator["entity_mentions"]:
                    label = _TAB_MAP.get(m["entity_type"])
                    span = Span(m["start_offset"], m["end_offset"], label or "OTHER")
                    if label and m["identifier_type"] in ("DIRECT", "QUASI"):
                        gold.append(span)
                    else:
                        ignored.append(span)
                break  # the first annotator only: one gold per mention
            out.append(Labelled(doc["text"], tuple(gold), tuple(ignored)))
    return out


def wnut(path: Path) -> list[Labelled]:
    """WNUT17 CoNLL sentences with their person and location spans."""
    from eval.redaction import _conll_sentences  # noqa: PLC0415

    return [Labelled(t, tuple(g)) for t, g in _conll_sentences(path)]


def presidio_demo(folder: Path, gold_map: dict[str, str]) -> list[Labelled]:
    """presidio's demo.txt with gold spans aligned from demo_anonymized.txt."""
    from difflib import SequenceMatcher  # noqa: PLC0415

    original = (folder / "demo.txt").read_text(encoding="utf-8")
    expected = (folder / "demo_anonymized.txt").read_text(encoding="utf-8")
    matcher = SequenceMatcher(None, original, expected, autojunk=False)
    gold, ignored = [], []
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        found = re.fullmatch(r"<([A-Z_]+)>", expected[j1:j2])
        if tag == "replace" and found:
            label = gold_map.get(found.group(1))
            (gold if label else ignored).append(Span(i1, i2, label or "OTHER"))
    return [Labelled(original, tuple(gold), tuple(ignored))]


def credsweeper(
    folder: Path, not_secret: frozenset[str]
) -> list[tuple[str, list[str]]]:
    """CredSweeper sample files with the secret values they hold (texts only)."""
    expected = json.loads((folder / "expected_output.json").read_text())
    wanted: dict[str, list[str]] = {}
    for finding in expected:
        if finding["rule"] in not_secret:
            continue
        for line in finding["line_data_list"]:
            name = line["path"].rsplit("/", 1)[-1]
            wanted.setdefault(name, []).append(line["value"])
    out = []
    for path in sorted((folder / "samples").iterdir()):
        if path.is_file() and path.name in wanted:
            text = path.read_text(encoding="utf-8", errors="replace")
            out.append((text, sorted(set(wanted[path.name]))))
    return out


def runbook_texts(corpora: Path) -> list[str]:
    """Every version of every document in the two runbook sets."""
    from eval.technical import DOC_SETS  # noqa: PLC0415

    out = []
    for group in DOC_SETS:
        folder = corpora / group
        index = folder / "versions.json"
        if not index.is_file():
            continue
        for doc in json.loads(index.read_text(encoding="utf-8")):
            for version in doc["versions"]:
                out.append((folder / version["file"]).read_text(encoding="utf-8"))
    return out


# ---------------------------------------------------------------- scoring


def score_pii(
    records: list[Labelled], predicted: list[list[Span]], labels: frozenset[str]
) -> dict[str, Any]:
    """Pooled recall/precision/survival over ``labels``."""
    counts = Counts()
    survived = support = 0
    for record, preds in zip(records, predicted, strict=True):
        preds = [p for p in preds if p.label in labels]
        gold = [g for g in record.gold if g.label in labels]
        counts.add(gold, preds, list(record.ignored))
        covered = sorted(preds, key=lambda p: p.start)
        for g in gold:
            support += 1
            value = record.text[g.start : g.end]
            survived += value in _masked(record.text, covered)
    row = counts.table()["ALL"]
    return {
        "n": support,
        "tp": row["tp"],
        "fp": row["fp"],
        "recall": row["recall"],
        "precision": row["precision"],
        "survival": round(survived / support, 4) if support else float("nan"),
    }


def _masked(text: str, spans: list[Span]) -> str:
    out, pos = [], 0
    for span in spans:
        if span.start < pos:
            continue
        out.append(text[pos : span.start])
        out.append("\0")
        pos = span.end
    out.append(text[pos:])
    return "".join(out)


def secrets_gone(
    redactor: Any, files: list[tuple[str, list[str]]], kind: str
) -> dict[str, Any]:
    """Share of gold secret values no longer in the redacted file."""
    texts, values = [], []
    for text, wanted in files:
        texts.append(variant(text, kind)[0])
        values.append([variant(v, kind)[0] for v in wanted])
    results = redactor.redact_batch([("tool_output", t) for t in texts], "eval")
    total = gone = 0
    for wanted, redaction in zip(values, results, strict=True):
        for value in wanted:
            if not value:
                continue
            total += 1
            gone += value not in redaction.text
    return {"n": total, "recall": round(gone / total, 4) if total else float("nan")}


def placeholder_rate(
    redactor: Any, texts: list[str], kind: str, true_names: frozenset[str]
) -> dict[str, Any]:
    """PERSON/LOCATION placeholders per 10k tokens (all, and false: the value is
    not on ``eval/technical_true_names.json``), and how many sit in headings."""
    lowered = frozenset(n.lower() for n in true_names)
    variants = [variant(t, kind)[0] for t in texts]
    found = false = 0
    in_heading = 0
    values: Counter[str] = Counter()
    for text, dets in zip(variants, redactor.detect_batch(variants), strict=True):
        for d in dets:
            if d.entity_type not in ("PERSON", "LOCATION"):
                continue
            found += 1
            value = text[d.start : d.end]
            if value not in true_names and value.lower() not in lowered:
                false += 1
                values[value] += 1
            line_start = text.rfind("\n", 0, d.start) + 1
            in_heading += bool(_HEADING_RE.match(text, line_start))
    tokens = sum(len(t.split()) for t in variants)
    return {
        "texts": len(texts),
        "tokens": tokens,
        "placeholders": found,
        "per_10k": round(found * 10_000 / tokens, 2) if tokens else float("nan"),
        "false": false,
        "false_per_10k": round(false * 10_000 / tokens, 2) if tokens else float("nan"),
        "in_headings": in_heading,
        "top": values.most_common(8),
    }


# ------------------------------------------------------------------ running


def run(
    redactor: Any,
    corpora: Path,
    gold_map: dict[str, str],
    not_secret: frozenset[str],
    presidio: Any = None,
) -> dict[str, Any]:
    """Every set of both families in every variant, ours beside plain presidio."""
    from eval.technical import load_true_names  # noqa: PLC0415

    synth = corpora / "presidio-research-synth-pii"
    fixtures = corpora / "presidio-test-fixtures"
    wnut_file = corpora / "wnut17-emerging-entities-conll" / "emerging.dev.conll"
    tab = corpora / "tab-echr-sample"
    creds = corpora / "credsweeper-secret-samples"
    pii_labels = frozenset(gold_map.values())
    names = frozenset({"PERSON", "LOCATION"})
    sets: list[tuple[str, str, list[Labelled], frozenset[str]]] = []
    if (synth / "generated_small.json").is_file():
        records = presidio_json(synth / "generated_small.json", gold_map)
        sets.append(("presidio generated_small", "develop", records, pii_labels))
    if (fixtures / "demo.txt").is_file():
        records = presidio_demo(fixtures, gold_map)
        sets.append(("presidio demo.txt", "develop", records, pii_labels))
    if wnut_file.is_file():
        sets.append(("WNUT17 dev", "measure", wnut(wnut_file), names))
    if tab.is_dir() and any(tab.glob("*.json")):
        sets.append(("TAB ECHR sample", "measure", tab_echr(tab), names))
    rows: list[dict[str, Any]] = []
    for name, family, records, labels in sets:
        for kind in VARIANTS:
            moved = [apply_variant(r, kind) for r in records]
            texts = [r.text for r in moved]
            ours = [
                [Span(d.start, d.end, d.entity_type) for d in dets]
                for dets in redactor.detect_batch(texts)
            ]
            row = {
                "set": name,
                "family": family,
                "variant": kind,
                "ours": score_pii(moved, ours, labels),
            }
            if presidio is not None and not isinstance(presidio, str):
                row["presidio"] = score_pii(moved, presidio.spans(texts), labels)
            rows.append(row)
    secret_rows = []
    if (creds / "expected_output.json").is_file():
        files = credsweeper(creds, not_secret)
        for kind in VARIANTS:
            secret_rows.append(
                {
                    "set": "CredSweeper samples",
                    "family": "measure",
                    "variant": kind,
                    "ours": secrets_gone(redactor, files, kind),
                }
            )
    runbooks = runbook_texts(corpora)
    true_names = load_true_names()
    precision_rows = [
        {
            "set": "runbooks, all versions",
            "family": "measure",
            "variant": kind,
            "ours": placeholder_rate(redactor, runbooks, kind, true_names),
        }
        for kind in VARIANTS
        if runbooks
    ]
    return {
        "pii": rows,
        "secrets": secret_rows,
        "runbooks": precision_rows,
        "headline": pooled(rows, "measure"),
        "develop": pooled(rows, "develop"),
    }


def pooled(rows: list[dict[str, Any]], family: str) -> dict[str, dict[str, float]]:
    """Recall and precision of one family, pooled over its sets, per variant."""
    out = {}
    for kind in VARIANTS:
        tp = fp = n = 0
        for row in rows:
            if row["family"] == family and row["variant"] == kind:
                tp += row["ours"]["tp"]
                fp += row["ours"]["fp"]
                n += row["ours"]["n"]
        out[kind] = {
            "n": n,
            "recall": round(tp / n, 4) if n else float("nan"),
            "precision": round(tp / (tp + fp), 4) if tp + fp else float("nan"),
        }
    return out


def _cell(row: dict[str, Any] | None) -> str:
    if not row:
        return f"{'':>21}"
    return f"{row['recall']:>7.3f}{row['precision']:>7.3f}{row['survival']:>7.3f}"


def print_families(report: dict[str, Any]) -> None:
    """Both families side by side; the measure column is the headline."""
    print("\nSplit by source (issue 29): develop family = text we tune on;")
    print("measure family = text never read while writing rules (headline).")
    print(
        f"  {'variant':<10}{'develop rec':>12}{'prec':>7}{'n':>6}"
        f"{'measure rec':>14}{'prec':>7}{'n':>6}"
    )
    for kind in VARIANTS:
        d, m = report["develop"][kind], report["headline"][kind]
        print(
            f"  {kind:<10}{d['recall']:>12.3f}{d['precision']:>7.3f}{d['n']:>6}"
            f"{m['recall']:>14.3f}{m['precision']:>7.3f}{m['n']:>6}"
        )
    print(
        f"\n  {'set':<26}{'family':<9}{'variant':<9}{'n':>5}"
        f"{'ours rec/prec/surv':>22}{'presidio rec/prec/surv':>24}"
    )
    for row in report["pii"]:
        print(
            f"  {row['set']:<26}{row['family']:<9}{row['variant']:<9}"
            f"{row['ours']['n']:>5} {_cell(row['ours'])}   {_cell(row.get('presidio'))}"
        )
    for row in report["secrets"]:
        print(
            f"  {row['set']:<26}{row['family']:<9}{row['variant']:<9}"
            f"{row['ours']['n']:>5}  secret values gone {row['ours']['recall']:.3f}"
        )
    for row in report["runbooks"]:
        r = row["ours"]
        print(
            f"  {row['set']:<26}{row['family']:<9}{row['variant']:<9}"
            f"{r['tokens']:>7} tokens: {r['placeholders']} PERSON/LOCATION "
            f"({r['per_10k']}/10k), false {r['false']} ({r['false_per_10k']}/10k), "
            f"in headings {r['in_headings']}"
        )
