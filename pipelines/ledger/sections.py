"""Anchored summary sections: extract them from messages, merge, render.

The rule engine reads the natural-language sentences of user and assistant
messages (system prompts are kept verbatim by every context policy, so they are
not summarised) and fills fixed sections:

* ``goal``: the first substantive sentences of the first real request (the
  request part of the first user message: framework templates, demonstrations
  and system-prompt repeats are left out, see ``boilerplate``), plus user
  sentences that state a goal; anchored: later windows never replace it;
* ``findings``: assistant conclusions: the first statement of a turn that
  follows a tool result, and sentences with a result cue (never plans,
  questions or echoes of the user);
* ``decisions`` / ``rejected_options``: sentences with decision cues ("decided",
  "confirmed", "agreed", "will use") / rejection cues ("decided against",
  "ruled out", "instead of") and assistant sentences saying an attempt failed
  ("did not", "unable to", "not sufficient"): the why stays in the sentence;
* ``open_questions``: user questions no assistant message answered afterwards;
* ``pending_approvals``: approval and sign-off requests not yet granted, and an
  assistant's request to confirm (with its whole text) until the user answers;
* ``changed_artifacts``, ``sources_read`` and ``test_status``: from the trail;
* ``next_steps``: the latest next-step cue sentences, the latest user request
  and the latest assistant action (a stale plan is not the next step);
* ``pinned_user_statements``: the user's standing rules and facts, verbatim: user
  sentences with a protected field or a rule cue ("always", "never", "from now
  on", "standing rule", "correction", "keep"...);
* ``tool_results``: typed results (tool, status, key facts: the output's error
  line and exit code, the observation's ids and status) with ``artifact_ref``,
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

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ctxledger.pipelines.ledger.boilerplate import is_lead_in, sentence_key
from ctxledger.pipelines.ledger.citations import ReadLog, cite, short_output
from ctxledger.pipelines.ledger.cues import (
    ANY_CUE,
    APPROVAL,
    CONFIRM_ASK,
    DECISION,
    GOAL,
    GRANTED,
    META_REQUEST,
    NEXT,
    PROPOSAL,
    REJECT,
    USER_DECLINE,
)
from ctxledger.pipelines.ledger.decisions import rejected_text
from ctxledger.pipelines.ledger.findings import (
    FINDINGS_FACTOR,
    FINDINGS_PER_MESSAGE,
    add_finding,
    assistant_kind,
    is_echo,
    message_sentences,
    with_lists,
)
from ctxledger.pipelines.ledger.from_trail import changed_items, read_items, test_items
from ctxledger.pipelines.ledger.goal import (
    ASSISTANT_GOAL_PREFIX,
    assistant_goal,
    goal_sentences,
    is_pinned,
    pinned_statements,
    request_sentences,
    substantive,
    without_greeting,
)
from ctxledger.pipelines.ledger.items import (
    add_unique,
    item_factory,
    keep_earliest,
    keep_ends,
    keep_latest,
    replace_latest,
)
from ctxledger.pipelines.ledger.next_steps import (
    ACTION_PREFIX,
    CONFIRM_PREFIX,
    NEXT_CUES_KEPT,
    REQUEST_PREFIX,
    action_text,
    confirmation_text,
)
from ctxledger.pipelines.ledger.render import finish, render
from ctxledger.pipelines.ledger.results import (
    FACT_CHARS,
    key_facts,
    output_facts,
    result_status,
)
from ctxledger.pipelines.ledger.secret_lines import (
    DroppedLine,
    drop_secret_lines,
    has_secret,
)
from ctxledger.pipelines.ledger.text import clip, content_words, cut, strip_observation
from ctxledger.schemas.ledger import (
    ArtifactTrailEntry,
    SectionItem,
    SummarySections,
    ToolResultRef,
)
from ctxledger.schemas.policy import LedgerSettings
from ctxledger.schemas.transcript import Message, ToolObservation

__all__ = [
    "ACTION_PREFIX",
    "CONFIRM_PREFIX",
    "REQUEST_PREFIX",
    "DroppedLine",
    "Span",
    "assistant_kind",
    "drop_secret_lines",
    "extract_sections",
    "finish",
    "has_secret",
    "is_pinned",
    "merge_sections",
    "output_facts",
    "pinned_statements",
    "render",
]


@dataclass(frozen=True)
class Span:
    """One window of a session and what the sections need to know about it."""

    messages: Sequence[Message]
    trail: Sequence[ArtifactTrailEntry]
    observations: Mapping[str, ToolObservation]
    #: ``user`` messages that are tool output (text-action results): skipped.
    environment: frozenset[str] = frozenset()
    #: artifact id -> redacted tool output (key facts of tool results).
    outputs: Mapping[str, str] = field(default_factory=dict)
    #: Sentences of the system prompt (``sentence_key``): template text when a
    #: user message repeats them.
    framework: frozenset[str] = frozenset()
    #: Whether the message before this span was a tool result (so a window's
    #: first assistant turn reads it, as it would in a build from raw).
    after_result: bool = False
    #: Up to ``citations.RECENT_MESSAGES`` messages before the span: the tool
    #: results a finding of the span may cite (read, never summarised again).
    history: Sequence[Message] = ()


def _result_facts(observation: ToolObservation, span: Span) -> str:
    """A tool result's key facts: the output's error first (a long fact list
    must not clip it off), then the observation's key fields."""
    output = span.outputs.get(observation.artifact_ref or "")
    return ", ".join(
        f
        for f in (
            output_facts(output),
            key_facts(observation.key_fields, FACT_CHARS // 2 + 20),
        )
        if f
    )


def _log_message(log: ReadLog, message: Message, position: int, span: Span) -> str:
    """Feed ``log`` the message: an assistant's action or a tool result.
    Returns a tool result's key facts (see ``_result_facts``)."""
    if message.role == "tool" or message.message_id in span.environment:
        observation = span.observations.get(message.message_id)
        output = None
        tool = ""
        typed = False
        facts = ""
        if observation is not None:
            output = span.outputs.get(observation.artifact_ref or "")
            tool = "" if observation.tool_name == "unknown" else observation.tool_name
            facts = _result_facts(observation, span)
            typed = result_status(observation.status, output) == "error" or bool(facts)
        log.saw_result(
            message,
            position,
            output or strip_observation(message.content),
            tool or "",
            typed,
        )
        return facts
    if message.role == "assistant":
        log.saw_action(message)
    return ""


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
    findings = list(old.findings)
    decisions = list(old.decisions)
    rejected = list(old.rejected_options)
    questions = list(old.open_questions)
    approvals = list(old.pending_approvals)
    next_steps = list(old.next_steps)
    pinned = list(old.pinned_user_statements)
    tool_results = list(old.tool_results)
    # A goal the assistant stated is a fallback: a user request replaces it.
    have_goal = any(not g.text.startswith(ASSISTANT_GOAL_PREFIX) for g in goal)
    pinned_texts = {p.text for p in pinned}
    user_said = [p.text for p in pinned] + [
        g.text for g in goal if not g.text.startswith(ASSISTANT_GOAL_PREFIX)
    ]
    latest_request: SectionItem | None = None
    #: The latest option a user proposed (what "I rejected it" refers to).
    proposal: str | None = None
    latest_action: SectionItem | None = None
    action_name = "unknown"
    previous_was_result = span.after_result
    log = ReadLog()
    #: The latest assistant message with an action, and what it came to.
    acted: Message | None = None
    outcome = ""
    history = [(p, m, False) for p, m in enumerate(span.history, -len(span.history))]
    walk = history + [(p, m, True) for p, m in enumerate(span.messages)]
    for position, message, in_span in walk:
        is_result = message.role == "tool" or message.message_id in span.environment
        facts = _log_message(log, message, position, span)
        if is_result and acted is not None and log.reads:
            read = log.reads[-1]
            # A typed result shows its facts under "Tool results" already.
            outcome = "" if read.typed else " ".join(short_output(read))
        elif message.role == "assistant" and action_text(message) is not None:
            acted, outcome = message, ""
        if not in_span:
            continue
        after_result, previous_was_result = previous_was_result, is_result
        if is_result:
            observation = span.observations.get(message.message_id)
            if observation is not None:
                name = observation.tool_name or "unknown"
                if name == "unknown" and not message.tool_call_id:
                    name = action_name
                tool_results.append(
                    ToolResultRef(
                        turn=message.turn,
                        tool_name=name,
                        status=result_status(
                            observation.status,
                            span.outputs.get(observation.artifact_ref or ""),
                        ),
                        artifact_ref=observation.artifact_ref,
                        facts=clip(facts, FACT_CHARS + 60),
                    )
                )
            continue
        if message.role not in ("user", "assistant"):
            continue
        item = item_factory(message)
        #: This message's sentences that are goal lines (not pinned as well).
        goal_said: set[str] = set()
        if message.role == "assistant":
            said = message_sentences(message, chars)
            if said:
                questions = [q for q in questions if q.turn > message.turn]
            fallback = None if have_goal or goal else assistant_goal(said)
            if fallback is not None:
                goal.append(item(fallback))
            action = action_text(message)
            if action is not None:
                action_name = cut((action.split() or ["unknown"])[0], 40)
            found = 0
            # The first statement after a tool result reads that result.
            first = after_result
            conclusions: list[str] = []
            for sentence in said:
                if CONFIRM_ASK.search(sentence):
                    text = CONFIRM_PREFIX + confirmation_text(message, chars)
                    add_unique(approvals, item(text))
                    break
            for sentence in said:
                kind = assistant_kind(sentence)
                if kind == "skip":
                    continue
                if kind == "failed":
                    add_unique(rejected, item(sentence))
                elif (
                    found < FINDINGS_PER_MESSAGE
                    and (first or kind == "finding")
                    and kind != "other"
                    # An echo of the user ("Noted: ...") is the user's
                    # statement, not a finding.
                    # (a lead-in is judged by the list it announces)
                    and (is_lead_in(sentence) or not is_echo(sentence, user_said))
                ):
                    # An agent's turn opens by reading the last result: its
                    # first statement is a finding even without a cue word.
                    conclusions.append(sentence)
                    found += 1
                first = False
            for sentence in with_lists(conclusions, message.content, chars):
                note = cite(sentence, log.reads, position, after_result)
                add_finding(findings, item(sentence + note))
        else:
            said = [
                s
                for s in request_sentences(message, chars)
                if sentence_key(s) not in span.framework
            ]
            if said:
                # The user spoke: any confirmation asked before is answered.
                approvals = [
                    a
                    for a in approvals
                    if not a.text.startswith(CONFIRM_PREFIX) or a.turn > message.turn
                ]
            user_said.extend(said)
            firsts = [
                shown
                for s in said
                if substantive(shown := without_greeting(s)) and not is_pinned(s)
            ]
            # The goal is the first real request: identity lines, greetings
            # and standing rules are pinned statements, not the goal.
            asked = [] if have_goal else goal_sentences(said)
            if asked:
                goal = [g for g in goal if not g.text.startswith(ASSISTANT_GOAL_PREFIX)]
                goal.extend(item(shown) for _, shown in asked)
                goal_said = {sentence for sentence, _ in asked}
                have_goal = True
            elif firsts and all(META_REQUEST.search(f) for f in firsts):
                # "Meanwhile, summarise where we are" asks for no step: the
                # latest request stays the one the session is working on.
                pass
            elif firsts or said:
                # Pinned sentences and a one-sentence next-step cue are in the
                # summary verbatim already: they only retire the older request.
                verbatim = not firsts or (
                    len(firsts) == 1 and bool(NEXT.search(firsts[0]))
                )
                latest_request = item(
                    "" if verbatim else REQUEST_PREFIX + " ".join(firsts[:2])
                )
        for at, sentence in enumerate(said):
            if message.role == "user":
                if PROPOSAL.search(sentence):
                    proposal = sentence
                if USER_DECLINE.search(sentence) and not REJECT.search(sentence):
                    add_unique(rejected, item(sentence))
                if (
                    GOAL.search(sentence)
                    and sentence not in goal_said
                    and not is_pinned(sentence)
                ):
                    add_unique(goal, item(sentence))
                    have_goal = True
                if sentence.rstrip().endswith("?"):
                    questions.append(item(sentence))
                if (
                    sentence not in pinned_texts
                    and sentence not in goal_said
                    and is_pinned(sentence)
                ):
                    pinned.append(item(sentence))
                    pinned_texts.add(sentence)
            if not ANY_CUE.search(sentence):
                continue
            if REJECT.search(sentence) and not (
                # "Could we double it to 128 instead of reverting?" proposes
                message.role == "user" and sentence.rstrip().endswith("?")
            ):
                # what "it" was, and why, when the sentence does not say
                text = rejected_text(sentence, said[:at], proposal, chars)
                add_unique(rejected, item(text))
            elif DECISION.search(sentence):
                add_unique(decisions, item(sentence))
            if APPROVAL.search(sentence):
                add_unique(approvals, item(sentence))
            elif GRANTED.search(sentence):
                words = content_words(sentence)
                approvals = [
                    a
                    for a in approvals
                    if len(content_words(a.text) & words) < 2 or a.turn > message.turn
                ]
            if NEXT.search(sentence):
                add_unique(next_steps, item(sentence))
    cues = [
        n for n in next_steps if not n.text.startswith((REQUEST_PREFIX, ACTION_PREFIX))
    ]
    kept = {id(n) for n in keep_latest(cues, NEXT_CUES_KEPT)}
    next_steps = [
        n
        for n in next_steps
        if id(n) in kept or n.text.startswith((REQUEST_PREFIX, ACTION_PREFIX))
    ]
    next_steps = replace_latest(next_steps, REQUEST_PREFIX, latest_request)
    span_ids = {m.message_id for m in span.messages}
    if acted is not None and (
        acted.message_id in span_ids or log.reads and log.reads[-1].position >= 0
    ):
        # What the latest action came to, when its result is short ("345").
        done = ACTION_PREFIX + (action_text(acted) or "")
        latest_action = item_factory(acted)(
            done + (f' -> "{outcome}"' if outcome else "")
        )
    next_steps = replace_latest(next_steps, ACTION_PREFIX, latest_action)
    if have_goal:
        goal = [g for g in goal if not g.text.startswith(ASSISTANT_GOAL_PREFIX)]
    return SummarySections(
        goal=keep_earliest(goal, limit),
        findings=keep_ends(findings, FINDINGS_FACTOR * limit),
        decisions=keep_latest(decisions, limit),
        rejected_options=keep_latest(rejected, limit),
        open_questions=keep_latest(questions, limit),
        pending_approvals=keep_latest(approvals, limit),
        changed_artifacts=changed_items(old.changed_artifacts, span.trail),
        sources_read=read_items(old.sources_read, span.trail, limit),
        test_status=test_items(old.test_status, span.trail, limit),
        next_steps=keep_latest(next_steps, limit),
        pinned_user_statements=keep_ends(pinned, settings.max_pinned_statements),
        tool_results=keep_latest(tool_results, limit),
        protected_facts=[],
    )
