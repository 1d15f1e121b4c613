"""Tool results: typed lines with key facts, never the raw output.

A result's facts are what its output says about itself (test summary, exit
code, and the error line when it failed; ``outcome.verdict``), then the
observation's key fields (ids, status and errors first); results with neither
are folded into one line when rendered.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache

from ctxledger.pipelines.ledger.outcome import verdict
from ctxledger.pipelines.ledger.text import clip, key_fields_map
from ctxledger.schemas.ledger import ToolResultRef

FACT_CHARS = 160
ARTIFACT_ID = re.compile(r"art_[0-9a-f]{32}")
REF_DIGITS = 12
KEY_FACT = re.compile(
    r"(?:^|_)(?:id|ids|number|reference|ref|code|key|status|state|error|errors|"
    r"message|result|total|amount|count|items)$",
    re.IGNORECASE,
)


def key_facts(key_fields: str, limit: int = FACT_CHARS) -> str:
    value = key_fields_map(key_fields)
    if not value:
        return ""
    items = sorted((k, v) for k, v in value.items() if k != "keys")
    # Ids, status and errors first: they are what a continuation refers to.
    items.sort(key=lambda kv: 0 if KEY_FACT.search(kv[0]) else 1)
    parts = [f"{k}={v}" for k, v in items]
    return clip(", ".join(parts), limit)


@lru_cache(maxsize=8_192)
def output_facts(output: str | None, limit: int = FACT_CHARS) -> str:
    """Key facts of a raw tool output, from what it says about itself
    (``pipelines.ledger.outcome``): its test summary (``tests passed: 48
    passed, 0 failed``), exit code and, when it failed, its error line
    (``AssertionError: expected 5 but got None``, ``Error: payment amount
    does not add up, total price is 305``), never the output itself nor a
    line that merely mentions an error (``Warning: _curses.error: ...``)."""
    found = verdict(output)
    parts = []
    if found.tests is not None:
        parts.append(f"tests {found.tests[0]}: {found.tests[1]}")
    if found.exit is not None:
        parts.append(f"exit={found.exit}")
    if found.error is not None:
        parts.append("error: " + clip(found.error, limit - 20))
    return clip(", ".join(parts), limit)


def result_status(status: str | None, output: str | None) -> str:
    """A result's status: ``error`` when its reader said so (an error event,
    a non-zero exit code in the format's metadata), else the output's own
    verdict (``outcome.verdict``), else the reader's."""
    if status == "error":
        return "error"
    return verdict(output).status or status or "unknown"


def short_ref(ref: str | None) -> str:
    """An artifact id as the summary text shows it: ``art_`` and the first 12
    hex digits of its content hash (enough to find it, ``WHERE artifact_id
    LIKE 'art_f647fa5c9687%'``; the sections keep the whole id). The full
    32 digits cost 23 tokens a line and tell a model nothing more."""
    if ref and ARTIFACT_ID.fullmatch(ref):
        return ref[: 4 + REF_DIGITS]
    return ref or ""


def result_lines(results: Sequence[ToolResultRef]) -> list[str]:
    """One typed line per result with key facts or a failure; results without
    either are folded into one line (their ``artifact_ref`` s stay in the
    sections and the trail): a list of bare refs tells a model nothing."""
    lines = []
    plain = []
    for r in results:
        if r.facts or r.status == "error":
            lines.append(
                f"- (t{r.turn}) {r.tool_name} [{r.status}]"
                f" artifact={short_ref(r.artifact_ref)}"
                + (f" facts: {r.facts}" if r.facts else "")
            )
        else:
            plain.append(r)
    if plain:
        names: dict[str, int] = {}
        for r in plain:
            names[r.tool_name] = names.get(r.tool_name, 0) + 1
        tools = ", ".join(f"{n} x{c}" if c > 1 else n for n, c in names.items())
        lines.append(f"- {len(plain)} more without key facts: {tools}")
    return lines or ["- none"]
