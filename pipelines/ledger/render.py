"""The summary as text: fixed sections in a fixed order, then ``finish``.

``finish`` adds every protected field the sections do not carry to "Protected
facts", so a summary always carries all of them.
"""

from __future__ import annotations

from collections.abc import Sequence

from ctxledger.pipelines.ledger.items import SOURCE_PREFIX
from ctxledger.pipelines.ledger.protected import FieldCheck, check_fields
from ctxledger.pipelines.ledger.results import result_lines
from ctxledger.schemas.ledger import ProtectedField, SectionItem, SummarySections

#: Findings whose source note is rendered (the latest ones).
SOURCED_FINDINGS = 8
#: Where the "Sources read" line goes once the rest of the text is known.
_READS_SLOT = "\x00reads\x00"


def _repeated_read(text: str, tools: frozenset[str], rest: str) -> bool:
    """Whether a read of an API (``api:get_reservation_details?reservation_id=
    SE9KEL``) says nothing the summary does not: its call's result is listed
    under "Tool results" and every argument value occurs elsewhere in the text
    (the result's facts, the goal, the latest action). File reads, failed reads
    and reads whose result is not listed stay."""
    if not text.startswith("api:") or text.endswith(")"):
        return False
    tool, _, query = text[4:].partition("?")
    if tool not in tools:
        return False
    values = [v.partition("=")[2].rstrip("…") for v in query.split("&") if v]
    return all(v.lower() in rest for v in values)


def read_lines(
    items: Sequence[SectionItem], tools: frozenset[str], rest: str
) -> list[str]:
    """The reads, one line (a read is a pointer, not a statement), without the
    API reads the rest of the summary repeats (see ``_repeated_read``)."""
    rest = rest.lower()
    kept = [i for i in items if not _repeated_read(i.text, tools, rest)]
    if not kept:
        return ["- none"]
    return ["- " + "; ".join(f"t{i.turn} {i.text}" for i in kept)]


def item_lines(
    items: Sequence[SectionItem],
    quote: bool = False,
    pinned: frozenset[tuple[int, str]] = frozenset(),
) -> list[str]:
    if not items:
        return ["- none"]
    out = []
    for item in items:
        if (item.turn, item.text) in pinned:
            out.append(f"- (t{item.turn}) see pinned user statement")
        elif quote:
            out.append(f'- (t{item.turn}) "{item.text}"')
        else:
            out.append(f"- (t{item.turn}) {item.text}")
    return out


def finding_lines(
    items: Sequence[SectionItem], pinned: frozenset[tuple[int, str]] = frozenset()
) -> list[str]:
    """Findings with their source notes on the latest ``SOURCED_FINDINGS``
    only (what a continuation builds on; older ones keep the statement), and
    a note the finding above carries already left out."""
    shown = []
    previous = ""
    for index, item in enumerate(items):
        text, sep, note = item.text.partition(SOURCE_PREFIX)
        note = sep + note
        if index < len(items) - SOURCED_FINDINGS or note == previous:
            previous = note
            note = ""
        else:
            previous = note
        if (item.turn, item.text) not in pinned and text + note != item.text:
            item = item.model_copy(update={"text": text + note})
        shown.append(item)
    return item_lines(shown, pinned=pinned)


def render(sections: SummarySections, header: str) -> str:
    """The summary as text: a header and every fixed section, in a fixed order.

    A sentence that is also a pinned user statement is written once, verbatim,
    under "Pinned user statements"; other sections point to it.
    """
    out = [f"# {header}"]
    pins = frozenset((p.turn, p.text) for p in sections.pinned_user_statements)

    def section(title: str, lines: list[str]) -> None:
        out.append(f"## {title}")
        out.extend(lines)

    section("Goal", item_lines(sections.goal, pinned=pins))
    section("Findings", finding_lines(sections.findings, pins))
    section("Decisions", item_lines(sections.decisions, pinned=pins))
    section("Rejected options", item_lines(sections.rejected_options, pinned=pins))
    section("Open questions", item_lines(sections.open_questions, pinned=pins))
    section("Pending approvals", item_lines(sections.pending_approvals, pinned=pins))
    section(
        "Changed artifacts",
        [
            f"- {a.resource}: {a.change} -> {a.outcome}"
            + (f" ({a.content_hash[:19]})" if a.content_hash else "")
            for a in sections.changed_artifacts
        ]
        or ["- none"],
    )
    section("Sources read", [_READS_SLOT])
    section("Test status", item_lines(sections.test_status))
    section("Next steps", item_lines(sections.next_steps, pinned=pins))
    section("Pinned user statements", item_lines(sections.pinned_user_statements, True))
    section("Tool results", result_lines(sections.tool_results))
    section("Protected facts", item_lines(sections.protected_facts))
    tools = frozenset(r.tool_name for r in sections.tool_results)
    slot = out.index(_READS_SLOT)
    rest = "\n".join(out[:slot] + out[slot + 1 :])
    out[slot : slot + 1] = read_lines(sections.sources_read, tools, rest)
    return "\n".join(out) + "\n"


def finish(
    sections: SummarySections, fields: Sequence[ProtectedField], header: str
) -> tuple[SummarySections, str, list[FieldCheck]]:
    """Add every protected field the sections do not carry to ``protected_facts``
    and render. Returns the final sections, text and field checks of that text."""
    text = render(sections, header)
    checks = check_fields(text, fields)
    facts = [
        SectionItem(
            text=f"{c.field.kind}/{c.field.label}: {c.field.value}",
            turn=c.field.turn,
            source_message_id=c.field.source_message_id,
        )
        for c in checks
        if c.status != "present"
    ]
    if not facts:
        return sections, text, checks
    final = sections.model_copy(update={"protected_facts": facts})
    text = render(final, header)
    return final, text, check_fields(text, fields)
