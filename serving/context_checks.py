"""Context-builder evaluation cases: what a pipeline can check without a model.

A case (the design's format, ``docs/eval_cases.md``) names a request, the
evidence that must be selected (``doc@version#section``), the tools that must
and must not be offered, and what must never appear. ``check_case`` judges one
``ContextManifest`` (plus the tool items offered with it) and returns one
``CheckResult`` per check, each with a reason a person can act on. Everything
here is pure: the runner (``jobs.eval_cases``) packs, looks rows up in the
warehouse and passes them in.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field

from ctxledger.pipelines.evidence.envelope import instruction_like, unwrap
from ctxledger.pipelines.ingest.tokens import count_tokens
from ctxledger.pipelines.redact.residual import secret_in_text
from ctxledger.schemas.evidence import ContextItem, ContextManifest, ContextScores


class _Strict(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class EvalCase(_Strict):
    """One case. ``fixture`` is a note; a quoted span in it (``"..."``) is the
    injected text the case plants, which may reach the context only as
    untrusted data."""

    name: str
    input: str
    actor: dict[str, Any] = Field(default_factory=dict)
    tenant: str = "demo"
    principal_groups: tuple[str, ...] = ("support",)
    subject_id: str | None = None
    purpose: str | None = None
    required_evidence: tuple[str, ...] = ()
    required_tools: tuple[str, ...] = ()
    forbidden_tools: tuple[str, ...] = ()
    must_not_contain: tuple[str, ...] = ()
    fixture: str | None = None
    window_tokens: int = Field(default=2000, gt=0)
    max_output_tokens: int = Field(default=0, ge=0)
    as_of: datetime | None = None

    @property
    def injected_spans(self) -> list[str]:
        """The quoted spans of ``fixture``."""
        return re.findall(r'"([^"]+)"', self.fixture or "")


class ToolSpec(_Strict):
    """A tool of the catalogue. ``write``/``destructive`` tools are offered
    only to a principal in one of ``groups``."""

    name: str
    description: str
    effect: Literal["read", "write", "destructive"] = "read"
    groups: tuple[str, ...] = ()
    parameters: dict[str, Any] = Field(default_factory=dict)

    def definition(self) -> str:
        """The JSON definition a model gets (what the tool item costs)."""
        return json.dumps(
            {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters,
            },
            sort_keys=True,
            separators=(",", ":"),
        )


class CheckResult(_Strict):
    """One check of one case."""

    check: str
    passed: bool
    reason: str = ""


class EvidenceRef(_Strict):
    """``doc@version#section`` (version and section optional)."""

    doc_id: str
    version: str | None = None
    section: str | None = None

    @classmethod
    def parse(cls, ref: str) -> EvidenceRef:
        """Parse ``runbook/api-keys@v7#revoked-keys``."""
        rest, _, section = ref.partition("#")
        doc, _, version = rest.partition("@")
        return cls(doc_id=doc, version=version or None, section=section or None)

    def __str__(self) -> str:
        out = self.doc_id
        if self.version:
            out += f"@{self.version}"
        if self.section:
            out += f"#{self.section}"
        return out


_HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.MULTILINE)


def slug(title: str) -> str:
    """``Revoked keys`` -> ``revoked-keys`` (a heading's anchor)."""
    return "-".join(re.findall(r"[a-z0-9]+", title.lower()))


def load_cases(path: str | Path) -> list[EvalCase]:
    """Cases from a YAML list (or ``{cases: [...]}``)."""
    data = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or []
    if isinstance(data, dict):
        data = data.get("cases", [])
    if not isinstance(data, list):
        raise ValueError(f"{path}: cases are a YAML list")
    cases = [EvalCase.model_validate(c) for c in data]
    names = [c.name for c in cases]
    if len(set(names)) != len(names):
        raise ValueError(f"{path}: case names must be unique")
    return cases


def load_tools(path: str | Path) -> list[ToolSpec]:
    """A tool catalogue (a YAML list of ``ToolSpec``)."""
    data = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or []
    return [ToolSpec.model_validate(t) for t in data]


# ------------------------------------------------------------------- tools
def tool_items(
    tools: Sequence[ToolSpec],
    case: EvalCase,
    relevance: Callable[[str, list[str]], list[float]],
    min_relevance: float,
    now: datetime | None = None,
) -> tuple[list[ContextItem], list[tuple[ContextItem, str]]]:
    """The tools offered for ``case`` as ``ContextItem``s of kind ``tool``
    (token count = the definition's tokens), and those not offered with why:
    ``not_permitted`` (a write/destructive tool outside the principal's
    groups) or ``low_relevance`` (cosine of the query to the tool's name and
    description below ``min_relevance``). The query alone decides relevance:
    retrieved text never adds a tool."""
    now = now or datetime.now(UTC)
    texts = [f"{t.name.replace('_', ' ')}: {t.description}" for t in tools]
    scores = relevance(case.input, texts) if tools else []
    selected, dropped = [], []
    for tool, score in zip(tools, scores, strict=True):
        definition = tool.definition()
        item = ContextItem(
            item_id=f"tool:{tool.name}",
            kind="tool",
            source=f"tool:{tool.name}",
            trust="trusted",
            retrieved_at=now,
            version="1",
            token_count=count_tokens(definition),
            content=definition,
            scores=ContextScores(
                relevance=round(score, 6),
                authority=1.0,
                freshness=1.0,
                utility=round(score, 6),
            ),
        )
        permitted = tool.effect == "read" or bool(
            set(tool.groups) & set(case.principal_groups)
        )
        if not permitted:
            dropped.append((item, "not_permitted"))
        elif score < min_relevance:
            dropped.append((item, "low_relevance"))
        else:
            selected.append(item)
    return selected, dropped


# ------------------------------------------------------------------ checks
#: Named ``must_not_contain`` detectors (anything else is a literal string).
DETECTORS: dict[str, Callable[[str], bool]] = {
    "api_key_value": secret_in_text,
    "secret_value": secret_in_text,
}


def _text(item: ContextItem) -> str:
    try:
        return str(unwrap(item.content).get("text", ""))
    except (ValueError, TypeError):
        return item.content


def _norm(text: str) -> str:
    return " ".join(text.lower().split())


def matches_ref(ref: EvidenceRef, item: ContextItem) -> bool:
    if item.doc_id != ref.doc_id:
        return False
    if ref.version and item.version != ref.version:
        return False
    if ref.section:
        headings = {slug(t) for t in item.section_path}
        headings |= {slug(h) for h in _HEADING.findall(_text(item))}
        return ref.section in headings
    return True


def check_case(
    case: EvalCase,
    manifest: ContextManifest,
    tools: Sequence[ContextItem],
    scope: dict[str, str | None],
    newer: dict[str, str],
) -> list[CheckResult]:
    """Every check of ``case`` against what the builder selected.

    ``scope``: per selected item id, None when the warehouse confirms it is in
    the case's scope, else why not. ``newer``: per required ``doc@version``,
    the version that superseded it at the case's time (when one did).
    """
    items = list(manifest.selected)
    out: list[CheckResult] = []
    # 1. required evidence, by doc@version#section
    missing = []
    for raw in case.required_evidence:
        ref = EvidenceRef.parse(raw)
        if any(matches_ref(ref, i) for i in items):
            continue
        key = f"{ref.doc_id}@{ref.version}" if ref.version else ref.doc_id
        if key in newer:
            missing.append(f"{ref} is superseded by {ref.doc_id}@{newer[key]}")
            continue
        # dropped items explain a miss when the pack listed them in full
        # (``PackRequest.include_dropped_content``, as ``jobs.eval_cases`` asks)
        why = [
            d.reason
            for d in manifest.dropped
            if d.item is not None and matches_ref(ref, d.item)
        ]
        other = sorted(
            {f"{i.doc_id}@{i.version}" for i in items if i.doc_id == ref.doc_id}
        )
        missing.append(
            f"{ref} not selected"
            + (f" (dropped: {', '.join(sorted(set(why)))})" if why else "")
            + (f"; selected {', '.join(other)} instead" if other else "")
        )
    out.append(
        CheckResult(
            check="required_evidence", passed=not missing, reason="; ".join(missing)
        )
    )
    # 2. nothing out of scope
    outside = [f"{i}: {why}" for i, why in scope.items() if why]
    out.append(
        CheckResult(check="scope", passed=not outside, reason="; ".join(outside))
    )
    # 3. must_not_contain, in every item offered (tools included)
    found = []
    for needle in case.must_not_contain:
        test = DETECTORS.get(needle)
        for item in [*items, *tools]:
            text = _text(item)
            hit = test(text) if test else needle.lower() in text.lower()
            if hit:
                found.append(f"{needle} in {item.item_id}")
    out.append(
        CheckResult(check="must_not_contain", passed=not found, reason="; ".join(found))
    )
    # 4. tools: the required ones offered, no forbidden one
    offered = {t.item_id.removeprefix("tool:") for t in tools}
    problems = [
        f"required tool {t} not offered"
        for t in case.required_tools
        if t not in offered
    ]
    problems += [
        f"forbidden tool {t} offered" for t in case.forbidden_tools if t in offered
    ]
    out.append(
        CheckResult(check="tools", passed=not problems, reason="; ".join(problems))
    )
    # 5. injected / instruction-like text only as untrusted data
    bad = []
    spans = [_norm(s) for s in case.injected_spans]
    for item in items:
        text = _text(item)
        injected = instruction_like(text) or any(s in _norm(text) for s in spans)
        if not injected:
            continue
        try:
            envelope = unwrap(item.content)
        except (ValueError, TypeError):
            envelope = {}
        if envelope.get("type") != "retrieved_data":
            bad.append(f"{item.item_id}: not inside a data envelope")
        elif not envelope.get("instruction_like") or item.trust != "untrusted":
            bad.append(f"{item.item_id}: injected text not flagged untrusted")
    out.append(CheckResult(check="injection", passed=not bad, reason="; ".join(bad)))
    return out


__all__ = [
    "CheckResult",
    "EvalCase",
    "EvidenceRef",
    "ToolSpec",
    "check_case",
    "load_cases",
    "load_tools",
    "matches_ref",
    "slug",
    "tool_items",
]
