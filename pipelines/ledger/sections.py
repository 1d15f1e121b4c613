"""Anchored summary sections: extract them from messages, merge, render.

The rule engine reads the natural-language sentences of user and assistant
messages (system prompts are kept verbatim by every context policy, so they are
not summarised) and fills fixed sections:

* ``goal``: the first substantive sentences of the first user message, plus user
  sentences that state a goal; anchored: later windows never replace it;
* ``decisions`` / ``rejected_options``: sentences with decision cues ("decided",
  "confirmed", "agreed", "will use") / rejection cues ("decided against",
  "ruled out", "instead of"): the reason stays in the verbatim sentence;
* ``open_questions``: user questions no assistant message answered afterwards;
* ``pending_approvals``: approval and sign-off requests not yet granted;
* ``changed_artifacts`` and ``test_status``: from the artifact trail;
* ``next_steps``: next steps, to-dos, follow-ups (the latest ones);
* ``pinned_user_statements``: the user's standing rules and facts, verbatim: user
  sentences with a protected field or a rule cue ("always", "never", "from now
  on", "standing rule", "correction", "keep"...);
* ``tool_results``: typed results (tool, status, key facts) with ``artifact_ref``,
  never the raw output;
* ``protected_facts``: filled last, with any protected field the other sections
  do not carry, so a summary always carries all of them.

``merge_sections`` folds a new window into an existing summary's sections (no
summary is ever summarised again); every cap keeps the earliest and/or latest
items, so merging window by window and building from raw agree.

``drop_secret_lines`` is the last gate before a summary is stored: a line whose
text still matches a secret rule after redaction (``pipelines.redact.residual``)
is dropped and reported as a ``DroppedLine`` (section, message, turn; no text).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache

from pipelines.ledger.protected import (
    FieldCheck,
    check_fields,
    find_facts,
    find_rules,
)
from pipelines.ledger.text import clip, content_words, sentences, strip_observation
from pipelines.redact.residual import secret_in_text
from schemas.ledger import (
    ArtifactTrailEntry,
    ChangedArtifact,
    ProtectedField,
    SectionItem,
    SummarySections,
    ToolResultRef,
)
from schemas.policy import LedgerSettings
from schemas.transcript import Message, ToolObservation

_GREETING = re.compile(
    r"^(?:hi|hello|hey|thanks|thank you|good (?:morning|afternoon|evening))\b", re.I
)
_GOAL = re.compile(
    r"\b(?:the goal is|our goal|my goal|goal:|objective:|the task is|task:|"
    r"i want you to|i need you to|please (?:fix|implement|add|make|build|write|"
    r"update|investigate|find))\b",
    re.IGNORECASE,
)
_REJECT = re.compile(
    r"\b(?:decided against|rejected|ruled out|rule out|instead of|rather than|"
    r"abandon(?:ed)?|discarded|not going with|won't go with|will not go with)\b",
    re.IGNORECASE,
)
_DECISION = re.compile(
    r"\b(?:decided|decision|we will go with|going with|agreed|let's go with|"
    r"confirmed|settled on|chose|we'll use|will use|we will use)\b",
    re.IGNORECASE,
)
_APPROVAL = re.compile(
    r"\b(?:pending|awaiting|awaits|await|waiting (?:for|on)|needs?|requires?|"
    r"required|requests?|requesting)\b.{0,80}?\b(?:approv\w*|sign[- ]?offs?)\b",
    re.IGNORECASE,
)
_GRANTED = re.compile(
    r"\b(?:approved|signed off|sign-off (?:given|received|granted)|go ahead|"
    r"granted)\b",
    re.IGNORECASE,
)
_NEXT = re.compile(
    r"\b(?:next steps?|next,|todo|to-do|follow[- ]ups?|action items?|remaining|"
    r"plan:|then i will|then we will)\b",
    re.IGNORECASE,
)
_PIN = re.compile(
    r"\b(?:always|never|must|do not|don't|standing rule|rule:|from now on|"
    r"going forward|remember|make sure|keep|prefer|correction|important)\b",
    re.IGNORECASE,
)
SIMILAR = 0.6
#: Any cue a section looks for (one search instead of five on most sentences).
_ANY_CUE = re.compile(
    "|".join(
        f"(?:{p.pattern})" for p in (_REJECT, _DECISION, _APPROVAL, _GRANTED, _NEXT)
    ),
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Span:
    """One window of a session and what the sections need to know about it."""

    messages: Sequence[Message]
    trail: Sequence[ArtifactTrailEntry]
    observations: Mapping[str, ToolObservation]
    #: ``user`` messages that are tool output (text-action results): skipped.
    environment: frozenset[str] = frozenset()


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
_ITEM_SECTIONS = (
    "goal",
    "decisions",
    "rejected_options",
    "open_questions",
    "pending_approvals",
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
    for name in _ITEM_SECTIONS:
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


def _similar(a: str, b: str) -> bool:
    """Near-duplicates: most content words of the shorter one are in the other."""
    wa, wb = content_words(a), content_words(b)
    if min(len(wa), len(wb)) < 3:
        return a.strip().lower() == b.strip().lower()
    return len(wa & wb) / min(len(wa), len(wb)) >= SIMILAR


def _add_unique(items: list[SectionItem], item: SectionItem) -> None:
    if not any(_similar(item.text, old.text) for old in items):
        items.append(item)


def _earliest(items: list, limit: int) -> list:
    return items[:limit]


def _latest(items: list, limit: int) -> list:
    return items[-limit:] if len(items) > limit else items


def _ends(items: list, limit: int) -> list:
    if len(items) <= limit:
        return items
    head = limit // 2
    return items[:head] + items[len(items) - (limit - head) :]


def _facts(key_fields: str, limit: int = 200) -> str:
    try:
        value = json.loads(key_fields)
    except ValueError:
        return ""
    if not isinstance(value, dict):
        return ""
    parts = [f"{k}={v}" for k, v in sorted(value.items()) if k != "keys"]
    return clip(", ".join(parts), limit)


@lru_cache(maxsize=65_536)
def is_pinned(sentence: str) -> bool:
    """Whether a user sentence is a standing rule or fact worth keeping verbatim."""
    return bool(_PIN.search(sentence) or find_facts(sentence) or find_rules(sentence))


def pinned_statements(message: Message, limit: int = 400) -> list[str]:
    """The sentences of a user message the summary pins verbatim."""
    if message.role != "user":
        return []
    return [s for s in _message_sentences(message, limit) if is_pinned(s)]


def _message_sentences(message: Message, limit: int) -> list[str]:
    return [clip(s, limit) for s in sentences(strip_observation(message.content))]


def extract_sections(span: Span, settings: LedgerSettings) -> SummarySections:
    """Sections of one span of messages, on their own (no earlier summary)."""
    return merge_sections(SummarySections(), span, settings)


def merge_sections(
    old: SummarySections, span: Span, settings: LedgerSettings
) -> SummarySections:
    """Fold ``span`` into ``old`` (``protected_facts`` is left to ``finish``)."""
    limit = settings.max_section_items
    chars = settings.max_statement_chars
    goal = list(old.goal)
    decisions = list(old.decisions)
    rejected = list(old.rejected_options)
    questions = list(old.open_questions)
    approvals = list(old.pending_approvals)
    next_steps = list(old.next_steps)
    pinned = list(old.pinned_user_statements)
    tool_results = list(old.tool_results)
    have_goal = bool(goal)
    pinned_texts = {p.text for p in pinned}
    for message in span.messages:
        if message.role == "tool":
            observation = span.observations.get(message.message_id)
            if observation is not None:
                tool_results.append(
                    ToolResultRef(
                        turn=message.turn,
                        tool_name=observation.tool_name or "unknown",
                        status=observation.status,
                        artifact_ref=observation.artifact_ref,
                        facts=_facts(observation.key_fields),
                    )
                )
            continue
        if message.role not in ("user", "assistant"):
            continue
        if message.message_id in span.environment:
            continue
        said = _message_sentences(message, chars)
        if said and message.role == "assistant":
            questions = [q for q in questions if q.turn > message.turn]
        item = _item_factory(message)
        if message.role == "user" and not have_goal:
            firsts = [s for s in said if len(s.split()) >= 4 and not _GREETING.match(s)]
            for sentence in firsts[:2]:
                goal.append(item(sentence))
            have_goal = bool(firsts)
        for sentence in said:
            if message.role == "user":
                if _GOAL.search(sentence):
                    _add_unique(goal, item(sentence))
                if sentence.rstrip().endswith("?"):
                    questions.append(item(sentence))
                if sentence not in pinned_texts and is_pinned(sentence):
                    pinned.append(item(sentence))
                    pinned_texts.add(sentence)
            if not _ANY_CUE.search(sentence):
                continue
            if _REJECT.search(sentence):
                _add_unique(rejected, item(sentence))
            elif _DECISION.search(sentence):
                _add_unique(decisions, item(sentence))
            if _APPROVAL.search(sentence):
                _add_unique(approvals, item(sentence))
            elif _GRANTED.search(sentence):
                words = content_words(sentence)
                approvals = [
                    a
                    for a in approvals
                    if len(content_words(a.text) & words) < 2 or a.turn > message.turn
                ]
            if _NEXT.search(sentence):
                _add_unique(next_steps, item(sentence))
    return SummarySections(
        goal=_earliest(goal, limit),
        decisions=_latest(decisions, limit),
        rejected_options=_latest(rejected, limit),
        open_questions=_latest(questions, limit),
        pending_approvals=_latest(approvals, limit),
        changed_artifacts=_changed(old.changed_artifacts, span.trail),
        test_status=_tests(old.test_status, span.trail, limit),
        next_steps=_latest(next_steps, limit),
        pinned_user_statements=_ends(pinned, settings.max_pinned_statements),
        tool_results=_latest(tool_results, limit),
        protected_facts=[],
    )


def _item_factory(message: Message) -> Callable[[str], SectionItem]:
    def make(text: str) -> SectionItem:
        return SectionItem(
            text=text, turn=message.turn, source_message_id=message.message_id
        )

    return make


def _changed(
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
            change=(f"{current.change}, {step}" if current.change else step)[-400:],
        )
    return [by_resource[resource] for resource in order]


def _tests(
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
            text += f" [artifact {entry.artifact_ref}]"
        latest.pop(entry.resource, None)
        latest[entry.resource] = SectionItem(
            text=text, turn=entry.turn, source_message_id=entry.message_id
        )
    return _latest(sorted(latest.values(), key=lambda i: i.turn), limit)


# -- rendering -----------------------------------------------------------------
def _lines(
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

    section("Goal", _lines(sections.goal, pinned=pins))
    section("Decisions", _lines(sections.decisions, pinned=pins))
    section("Rejected options", _lines(sections.rejected_options, pinned=pins))
    section("Open questions", _lines(sections.open_questions, pinned=pins))
    section("Pending approvals", _lines(sections.pending_approvals, pinned=pins))
    section(
        "Changed artifacts",
        [
            f"- {a.resource}: {a.change} -> {a.outcome}"
            + (f" ({a.content_hash[:19]})" if a.content_hash else "")
            for a in sections.changed_artifacts
        ]
        or ["- none"],
    )
    section("Test status", _lines(sections.test_status))
    section("Next steps", _lines(sections.next_steps, pinned=pins))
    section("Pinned user statements", _lines(sections.pinned_user_statements, True))
    section(
        "Tool results",
        [
            f"- (t{r.turn}) {r.tool_name} [{r.status}] artifact={r.artifact_ref}"
            + (f" facts: {r.facts}" if r.facts else "")
            for r in sections.tool_results
        ]
        or ["- none"],
    )
    section("Protected facts", _lines(sections.protected_facts))
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
