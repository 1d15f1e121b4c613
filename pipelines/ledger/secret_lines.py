"""The last gate before a summary is stored: no line that holds a secret.

A line whose text still matches a secret rule after redaction
(``pipelines.redact.residual``) is dropped and reported as a ``DroppedLine``
(section, message, turn; never its text).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from ctxledger.pipelines.redact.residual import secret_in_text
from ctxledger.schemas.ledger import SummarySections


@dataclass(frozen=True)
class DroppedLine:
    """A summary line dropped because it held a secret (never its text)."""

    section: str
    source_message_id: str
    turn: int


@lru_cache(maxsize=65_536)
def has_secret(text: str) -> bool:
    """``secret_in_text`` cached: a summary re-checks its kept lines each window."""
    return secret_in_text(text)


#: Sections made of ``SectionItem`` s (checked line by line).
ITEM_SECTIONS = (
    "goal",
    "findings",
    "decisions",
    "rejected_options",
    "open_questions",
    "pending_approvals",
    "sources_read",
    "test_status",
    "next_steps",
    "pinned_user_statements",
    "protected_facts",
)


def drop_secret_lines(
    sections: SummarySections,
) -> tuple[SummarySections, list[tuple[DroppedLine, str]]]:
    """``sections`` without any line whose text matches a secret rule.

    Returns the clean sections and, per dropped line, its ``DroppedLine`` and
    its text (for de-duplication in memory only: never store it). A tool
    result keeps its ``artifact_ref`` and loses only its facts; a changed
    artifact whose resource or change text holds a secret is dropped whole.
    """
    dropped: list[tuple[DroppedLine, str]] = []
    update: dict[str, list] = {}
    for name in ITEM_SECTIONS:
        items = getattr(sections, name)
        keep = []
        for item in items:
            if has_secret(item.text):
                dropped.append(
                    (DroppedLine(name, item.source_message_id, item.turn), item.text)
                )
            else:
                keep.append(item)
        if len(keep) != len(items):
            update[name] = keep
    results = []
    for ref in sections.tool_results:
        if ref.facts and has_secret(ref.facts):
            dropped.append((DroppedLine("tool_results", "", ref.turn), ref.facts))
            ref = ref.model_copy(update={"facts": ""})
        results.append(ref)
    if any(
        a.facts != b.facts for a, b in zip(results, sections.tool_results, strict=True)
    ):
        update["tool_results"] = results
    changed = []
    for artifact in sections.changed_artifacts:
        text = f"{artifact.resource} {artifact.change}"
        if has_secret(text):
            turn = artifact.turns[0] if artifact.turns else -1
            dropped.append((DroppedLine("changed_artifacts", "", turn), text))
        else:
            changed.append(artifact)
    if len(changed) != len(sections.changed_artifacts):
        update["changed_artifacts"] = changed
    if not update:
        return sections, dropped
    return sections.model_copy(update=update), dropped
