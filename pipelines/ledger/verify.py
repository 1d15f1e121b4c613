"""Audit summaries against their sources: ours (stored entries) or written elsewhere.

* ``audit_text``: which protected fields a summary text is missing or has altered,
  and which changed artifacts of the trail it does not mention (a file counts as
  mentioned by its path, a path suffix or its file name; an API change by the
  tool name or an id it created or changed).
* ``reverify_entry``: re-checks a stored ``LedgerEntry`` against the *current*
  source messages. A changed protected value changes the checksum and leaves the
  summary without the new value: ``verified`` flips to false and
  ``rebuild_required`` is set (reason ``drift``); a source change that touches no
  protected value still sets ``rebuild_required`` (``sources_changed``).
* ``OutsideSummary`` / ``audit_outside``: the ``verify --summaries FILE`` input,
  one JSON object per line (see docs/ledger.md), checked the same way.
"""

from __future__ import annotations

import json
import posixpath
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from ctxledger.pipelines.ledger.build import (
    LedgerBuilder,
    SessionSources,
    settings_digest,
    sources_digest,
)
from ctxledger.pipelines.ledger.protected import FieldCheck, check_fields, checksum
from ctxledger.pipelines.ledger.trail import net_changes
from ctxledger.schemas.ledger import ArtifactTrailEntry, LedgerEntry, ProtectedField
from ctxledger.schemas.policy import LedgerSettings
from ctxledger.schemas.transcript import Message

_KV = re.compile(r"(\w+)=([^\s,\]&]+)")


@dataclass
class TextAudit:
    """The result of checking one summary text against its sources."""

    checks: list[FieldCheck]
    missing_artifacts: list[str] = field(default_factory=list)
    changed_artifacts: int = 0

    @property
    def missing(self) -> list[str]:
        return [c.field.canonical for c in self.checks if c.status == "missing"]

    @property
    def altered(self) -> list[FieldCheck]:
        return [c for c in self.checks if c.status == "altered"]

    @property
    def present(self) -> int:
        return sum(1 for c in self.checks if c.status == "present")

    @property
    def passed(self) -> bool:
        return not self.missing and not self.altered and not self.missing_artifacts


def resource_aliases(resource: str, detail: str = "") -> list[str]:
    """Ways a summary may name a changed resource."""
    if resource.startswith("api:"):
        name, _, query = resource[4:].partition("?")
        aliases = [name, name.replace("_", " ")]
        aliases += [v for _, v in _KV.findall(query)]
        aliases += [v for _, v in _KV.findall(detail)]
        return [a for a in aliases if a]
    parts = [p for p in resource.split("/") if p]
    aliases = [resource]
    aliases += ["/".join(parts[i:]) for i in range(1, len(parts))]
    return aliases or [resource]


def mentions(text: str, aliases: Sequence[str]) -> bool:
    """Whether ``text`` names any alias as a whole token (case-insensitive)."""
    lower = text.lower()
    for alias in aliases:
        pattern = r"(?<![\w/.-])" + re.escape(alias.lower()) + r"(?![\w-])"
        if re.search(pattern, lower):
            return True
    return False


def changed_in(trail: Sequence[ArtifactTrailEntry]) -> dict[str, str]:
    """Resource -> detail of its last successful change, for ``audit_text``."""
    net = net_changes(trail)
    details: dict[str, str] = {}
    for entry in trail:
        if entry.resource in net:
            details[entry.resource] = (
                f"{details.get(entry.resource, '')} {entry.detail}"
            )
    return {r: details.get(r, "") for r in net}


def audit_text(
    text: str,
    fields: Sequence[ProtectedField],
    trail: Sequence[ArtifactTrailEntry] = (),
) -> TextAudit:
    """Check a summary text against protected fields and the artifact trail."""
    changes = changed_in(trail)
    missing = [
        resource
        for resource, detail in changes.items()
        if not mentions(text, resource_aliases(resource, detail))
    ]
    return TextAudit(check_fields(text, fields), missing, len(changes))


# -- stored entries ------------------------------------------------------------
@dataclass
class EntryAudit:
    """A stored entry re-checked against the current sources."""

    entry: LedgerEntry
    audit: TextAudit
    sources_changed: bool
    checksum_changed: bool
    settings_changed: bool


def covered_messages(
    messages: Sequence[Message], first: int, last: int
) -> list[Message]:
    """Messages with ``first <= turn <= last`` in (turn, id) order."""
    return sorted(
        (m for m in messages if first <= m.turn <= last),
        key=lambda m: (m.turn, m.message_id),
    )


def reverify_entry(
    entry: LedgerEntry, sources: SessionSources, settings: LedgerSettings
) -> EntryAudit:
    """``entry`` re-verified against the current ``sources`` (see module docs)."""
    builder = LedgerBuilder(sources, settings)
    covered = covered_messages(
        builder.messages, entry.covered_from_turn, entry.covered_to_turn
    )
    fields = builder.fields_of(covered)
    ids = {m.message_id for m in covered}
    trail = [t for t in builder.trail if t.message_id in ids]
    audit = audit_text(entry.summary_text, fields, trail)
    sources_changed = sources_digest(covered) != entry.sources_digest
    checksum_changed = checksum(fields) != entry.protected_checksum
    settings_changed = settings_digest(settings) != entry.settings_digest
    verified = not audit.missing and not audit.altered and not checksum_changed
    reasons = list(entry.rebuild_required_reasons)
    for flag, reason in (
        (not verified, "drift"),
        (sources_changed, "sources_changed"),
        (settings_changed, "settings_changed"),
    ):
        if flag and reason not in reasons:
            reasons.append(reason)
    updated = entry.model_copy(
        update={
            "verified": verified,
            "missing_fields": audit.missing,
            "altered_fields": [c.field.canonical for c in audit.altered],
            "rebuild_required": bool(reasons),
            "rebuild_required_reasons": reasons,
        }
    )
    return EntryAudit(
        updated, audit, sources_changed, checksum_changed, settings_changed
    )


# -- summaries written elsewhere -----------------------------------------------
class OutsideSummary(BaseModel):
    """One line of ``verify --summaries FILE``.

    ``session_id``: our session id (``ses_...``) or the source's own id (the
    ``external_id``, e.g. the canonical ``session_id``). ``window``: ``"session"``
    (or absent) for the whole session; an integer ``k`` for everything up to the
    end of compaction window ``k`` (``LedgerSettings.window_turns`` messages each);
    ``[first, last]`` (or ``"first-last"``) for an explicit turn range.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    session_id: str = Field(min_length=1)
    text: str
    generator: str = Field(min_length=1)
    generator_version: str | None = None
    window: int | str | list[int] | None = None
    tenant_id: str | None = None

    @field_validator("window")
    @classmethod
    def _window_shape(cls, value):
        if isinstance(value, list) and (
            len(value) != 2 or value[0] < 0 or value[1] < value[0]
        ):
            raise ValueError("window range must be [first, last] with first <= last")
        if isinstance(value, int) and value < 0:
            raise ValueError("window index must be >= 0")
        if isinstance(value, str) and value != "session":
            if not re.fullmatch(r"\d+-\d+", value):
                raise ValueError('window must be "session", an index or "first-last"')
            first, last = (int(x) for x in value.split("-"))
            if last < first:
                raise ValueError("window range must have first <= last")
        return value

    def turn_range(self, n_messages: int, window_turns: int) -> tuple[int, int]:
        """The ``(first, last)`` turns the summary claims to cover."""
        last_turn = n_messages - 1
        window = self.window
        if window is None or window == "session":
            return 0, last_turn
        if isinstance(window, int):
            return 0, min(last_turn, (window + 1) * window_turns - 1)
        if isinstance(window, str):
            first, last = (int(x) for x in window.split("-"))
            return first, last
        return window[0], window[1]

    @property
    def window_label(self) -> str:
        if self.window is None or self.window == "session":
            return "session"
        if isinstance(self.window, list):
            return f"{self.window[0]}-{self.window[1]}"
        return str(self.window)


@dataclass
class BadLine:
    """A ``--summaries`` line that could not be used (never quotes the line)."""

    line: int
    reason: str


def parse_summaries(raw: str) -> tuple[list[tuple[int, OutsideSummary]], list[BadLine]]:
    """Parse ``--summaries`` JSONL into summaries (with line numbers) and rejects."""
    good: list[tuple[int, OutsideSummary]] = []
    bad: list[BadLine] = []
    for number, line in enumerate(raw.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except ValueError:
            bad.append(BadLine(number, "malformed_json"))
            continue
        try:
            good.append((number, OutsideSummary.model_validate(value)))
        except ValidationError as exc:
            problems = sorted(
                {".".join(str(p) for p in e["loc"]) or "record" for e in exc.errors()}
            )
            bad.append(BadLine(number, "invalid_summary: " + ", ".join(problems)))
    return good, bad


def audit_outside(
    summary_text: str,
    sources: SessionSources,
    settings: LedgerSettings,
    first: int,
    last: int,
) -> TextAudit:
    """Check an outside summary of turns ``first..last`` of a session."""
    builder = LedgerBuilder(sources, settings)
    covered = covered_messages(builder.messages, first, last)
    ids = {m.message_id for m in covered}
    trail = [t for t in builder.trail if t.message_id in ids]
    return audit_text(summary_text, builder.fields_of(covered), trail)


def display_value(value: str | None) -> str:
    """A value found in an outside summary, safe to print: long digit runs (card
    or account numbers) are masked but for their last four digits."""
    if value is None:
        return ""
    return re.sub(r"\d{9,}", lambda m: "*" * (len(m[0]) - 4) + m[0][-4:], value)[:60]


def basename(resource: str) -> str:
    """The file name of a path resource (API resources unchanged)."""
    return resource if resource.startswith("api:") else posixpath.basename(resource)
