"""Placeholder rate on technical text (issue 11, point 4).

Runbooks, policy documents and coding-agent tool outputs hold almost no real
names, so nearly every PERSON/LOCATION placeholder there is a false positive that
makes the evidence unreadable (``## <PERSON:...> limits``). We measure, per 10k
whitespace tokens:

* ``all``: every PERSON/LOCATION placeholder;
* ``false``: those whose value is not on the hand-checked list of real names and
  places that occur in these texts (``technical_true_names.json``, how it was made
  is written in that file).

Texts: the latest version of each document of the two section-C document sets
(PagerDuty incident-response docs, prometheus-operator runbooks) and the distinct
tool outputs of the SWE-agent and OpenHands trajectories. Each is assigned to the
dev or measure part by ``eval.split`` (documents by name, tool outputs by content).

``python -m eval.technical --list`` prints every flagged value with its count and
whether the list calls it real: that is how the list is reviewed and extended.
"""

from __future__ import annotations

import argparse
import hashlib
import json
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eval.corpora import default_corpora, transcript_sessions
from eval.split import PARTS, part_of

DOC_SETS = (
    "pagerduty-incident-response-docs-versions",
    "prometheus-operator-runbooks-versions",
)
TOOL_SETS = frozenset({"swe-agent-trajectories", "openhands-trajectories"})
NAME_TYPES = frozenset({"PERSON", "LOCATION"})
TRUE_NAMES_FILE = Path(__file__).with_name("technical_true_names.json")


@dataclass(frozen=True)
class TechText:
    """One technical text: its group (doc set or ``tool_outputs``), key, text."""

    group: str
    key: str
    text: str

    @property
    def part(self) -> str:
        """The split part (``dev`` or ``measure``)."""
        return part_of(f"{self.group}/{self.key}")


def latest_documents(root: Path) -> list[TechText]:
    """The latest version of every document in the section-C document sets."""
    out = []
    for group in DOC_SETS:
        folder = root / group
        index = folder / "versions.json"
        if not index.is_file():
            continue
        for doc in json.loads(index.read_text(encoding="utf-8")):
            latest = max(doc["versions"], key=lambda v: v["version"])
            text = (folder / latest["file"]).read_text(encoding="utf-8")
            out.append(TechText(group, doc["document"], text))
    return out


def _swe_observations(root: Path) -> list[str]:
    """SWE-agent ``trajectory[].observation``: the tool output of every step.

    Most ``.traj`` histories carry observations as ``user`` messages, which the
    transcript reader (rightly) reads as content, so they are taken from here.
    """
    out = []
    for path in sorted((root / "swe-agent-trajectories").glob("*.traj")):
        try:
            steps = json.loads(path.read_text(encoding="utf-8")).get("trajectory")
        except (ValueError, OSError, AttributeError):
            continue
        for step in steps or []:
            if isinstance(step, dict) and isinstance(step.get("observation"), str):
                out.append(step["observation"])
    return out


def tool_outputs(root: Path) -> list[TechText]:
    """Distinct non-empty tool outputs of the SWE-agent and OpenHands runs."""
    texts = _swe_observations(root)
    for _, sessions in sorted(transcript_sessions(root, TOOL_SETS).items()):
        for session in sessions:
            for message in session:
                texts.extend(t for f, t in message if f == "tool_output")
    seen: set[str] = set()
    out = []
    for text in texts:
        if not text.strip() or text in seen:
            continue
        seen.add(text)
        # keyed by content: the part does not depend on file order
        key = hashlib.sha256(text.encode()).hexdigest()[:16]
        out.append(TechText("tool_outputs", key, text))
    return out


def load_true_names(path: Path = TRUE_NAMES_FILE) -> frozenset[str]:
    """Values (case-sensitive) hand-checked as real people or places."""
    if not path.is_file():
        return frozenset()
    data = json.loads(path.read_text(encoding="utf-8"))
    return frozenset(v for values in data["values"].values() for v in values)


def tokens(text: str) -> int:
    """Whitespace tokens: the unit of the rate (stable, tokenizer-free)."""
    return len(text.split())


def measure(
    redactor: Any, texts: list[TechText], true_names: frozenset[str]
) -> dict[str, Any]:
    """Placeholder rates per group and part, and every flagged value."""
    detections = redactor.detect_batch([t.text for t in texts])
    rows: dict[tuple[str, str], Counter[str]] = defaultdict(Counter)
    flagged: dict[str, Counter[str]] = defaultdict(Counter)
    for item, dets in zip(texts, detections, strict=True):
        for group in (item.group, "ALL"):
            row = rows[(group, item.part)]
            row["texts"] += 1
            row["tokens"] += tokens(item.text)
        for det in dets:
            if det.entity_type not in NAME_TYPES:
                continue
            value = item.text[det.start : det.end]
            real = value.strip() in true_names
            flagged[item.part][f"{det.entity_type}\t{value}\t{real}"] += 1
            for group in (item.group, "ALL"):
                row = rows[(group, item.part)]
                row["all"] += 1
                row["false"] += not real
    table: dict[str, dict[str, dict[str, float | int]]] = defaultdict(dict)
    for (group, part), row in sorted(rows.items()):
        per10k = 10_000 / row["tokens"] if row["tokens"] else float("nan")
        table[group][part] = {
            "texts": row["texts"],
            "tokens": row["tokens"],
            "placeholders": row["all"],
            "false": row["false"],
            "all_per_10k": round(row["all"] * per10k, 2),
            "false_per_10k": round(row["false"] * per10k, 2),
        }
    return {
        "per_group": dict(table),
        "flagged": {
            part: [
                {
                    "type": k.split("\t")[0],
                    "value": k.split("\t")[1],
                    "n": n,
                    "real": k.split("\t")[2] == "True",
                }
                for k, n in counts.most_common()
            ]
            for part, counts in flagged.items()
        },
    }


def technical_texts(root: Path) -> list[TechText]:
    """Documents first, then tool outputs."""
    return latest_documents(root) + tool_outputs(root)


def print_rates(result: dict[str, Any]) -> None:
    """The rate table: one line per group and part."""
    print("\nTechnical text: PERSON/LOCATION placeholders per 10k tokens")
    print(
        f"  {'group':<44}{'part':<9}{'texts':>6}{'tokens':>8}{'all':>5}"
        f"{'false':>6}{'all/10k':>9}{'false/10k':>10}"
    )
    for group, parts in result["per_group"].items():
        for part in PARTS:
            row = parts.get(part)
            if row is None:
                continue
            print(
                f"  {group:<44}{part:<9}{row['texts']:>6}{row['tokens']:>8}"
                f"{row['placeholders']:>5}{row['false']:>6}"
                f"{row['all_per_10k']:>9.2f}{row['false_per_10k']:>10.2f}"
            )


def main(argv: list[str] | None = None) -> int:
    """CLI: rates, and with ``--list`` every flagged value (for the review)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpora", type=Path, default=None)
    parser.add_argument("--policy", default=None, help="policy YAML (default policy)")
    parser.add_argument("--list", action="store_true", help="print flagged values")
    parser.add_argument(
        "--part", choices=PARTS, default="dev", help="which part --list shows"
    )
    args = parser.parse_args(argv)
    root = args.corpora or default_corpora()
    if root is None:
        print("no corpora folder found; pass --corpora")
        return 2
    from eval.redaction import _redactor  # noqa: PLC0415

    result = measure(_redactor(args.policy), technical_texts(root), load_true_names())
    print_rates(result)
    if args.list:
        for row in result["flagged"].get(args.part, []):
            mark = "real " if row["real"] else "FALSE"
            print(f"  {mark} {row['type']:<9}{row['n']:>4}  {row['value']!r}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
