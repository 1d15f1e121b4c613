"""The trail's sections: changed artifacts, sources read, test status."""

from __future__ import annotations

from collections.abc import Sequence

from ctxledger.pipelines.ledger.items import keep_latest
from ctxledger.pipelines.ledger.results import short_ref
from ctxledger.pipelines.ledger.text import cut_left
from ctxledger.schemas.ledger import ArtifactTrailEntry, ChangedArtifact, SectionItem


def read_items(
    old: Sequence[SectionItem], trail: Sequence[ArtifactTrailEntry], limit: int
) -> list[SectionItem]:
    """Distinct resources read, each at its latest read (latest last)."""
    latest: dict[str, SectionItem] = {}
    for item in old:
        resource = (
            item.text.rsplit(" (", 1)[0] if item.text.endswith(")") else item.text
        )
        latest[resource] = item
    for entry in trail:
        if entry.operation != "read":
            continue
        latest.pop(entry.resource, None)
        outcome = "" if entry.outcome in ("ok", "unknown") else entry.outcome
        # An ``api:`` resource names its tool already.
        tool = "" if entry.resource.startswith("api:") else entry.tool_name
        how = ", ".join(x for x in (tool, outcome) if x)
        latest[entry.resource] = SectionItem(
            text=entry.resource + (f" ({how})" if how else ""),
            turn=entry.turn,
            source_message_id=entry.message_id,
        )
    return keep_latest(sorted(latest.values(), key=lambda i: i.turn), limit)


def changed_items(
    old: Sequence[ChangedArtifact], trail: Sequence[ArtifactTrailEntry]
) -> list[ChangedArtifact]:
    by_resource = {item.resource: item for item in old}
    order = [item.resource for item in old]
    for entry in trail:
        if entry.operation not in ("write", "create", "delete"):
            continue
        label, _, extra = entry.detail.partition(": ")
        step = (
            entry.operation
            if label in ("", entry.operation)
            else (f"{entry.operation}({label})")
        )
        step += f"@t{entry.turn}" + (f" [{extra}]" if extra else "")
        if entry.outcome == "error":
            step += "!error"
        current = by_resource.get(entry.resource)
        if current is None:
            order.append(entry.resource)
            current = ChangedArtifact(resource=entry.resource)
        by_resource[entry.resource] = ChangedArtifact(
            resource=entry.resource,
            operations=[*current.operations, entry.operation],
            turns=[*current.turns, entry.turn],
            outcome=entry.outcome,
            content_hash=entry.content_hash or current.content_hash,
            # Older steps drop off at a step boundary, never mid-word.
            change=cut_left(
                f"{current.change}, {step}" if current.change else step, 400
            ),
        )
    return [by_resource[resource] for resource in order]


def test_items(
    old: Sequence[SectionItem], trail: Sequence[ArtifactTrailEntry], limit: int
) -> list[SectionItem]:
    latest: dict[str, SectionItem] = {}
    for item in old:
        latest[item.text.split(": ", 1)[0]] = item
    for entry in trail:
        if entry.operation != "test":
            continue
        detail = entry.detail.split(": ", 1)[1] if ": " in entry.detail else ""
        text = f"{entry.resource}: {entry.outcome}"
        if detail:
            text += f" ({detail})"
        if entry.artifact_ref:
            text += f" [artifact {short_ref(entry.artifact_ref)}]"
        latest.pop(entry.resource, None)
        latest[entry.resource] = SectionItem(
            text=text, turn=entry.turn, source_message_id=entry.message_id
        )
    return keep_latest(sorted(latest.values(), key=lambda i: i.turn), limit)
