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

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache

from pipelines.ledger.boilerplate import (
    is_demonstration,
    is_lead_in,
    request_text,
    sentence_key,
)
from pipelines.ledger.protected import (
    FieldCheck,
    check_fields,
    find_facts,
    find_rules,
)
from pipelines.ledger.text import (
    clip,
    content_words,
    cut,
    cut_left,
    sentences,
    strip_observation,
    text_lines,
)
from pipelines.ledger.trail import text_action
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
#: Assistant sentences that state a result (findings), not a plan.
_FINDING = re.compile(
    r"\b(?:found|find that|shows?|showed|shown|indicates?|indicating|suggests?|"
    r"confirms|confirmed|reveals?|revealed|because|due to|caused by|"
    r"the (?:issue|problem|bug|cause|error|root cause|output|result) (?:is|was)|"
    r"(?:is|are) (?:located|defined|declared|set|present|stored|missing)|"
    r"(?:was|were|has been|have been) (?:fixed|updated|created|removed|added|"
    r"resolved|recovered|applied|booked|cancell?ed|modified|changed|raised)|"
    r"successful(?:ly)?|succeeded|reproduced|raised|returns?|returned|"
    r"output (?:is|was|shows|changed)|changed from|worked|passe[sd]|"
    r"total (?:cost|price) is|it seems|it appears|appears to)\b",
    re.IGNORECASE,
)
#: Assistant sentences saying an attempt failed: a rejected option with its why.
_FAILED = re.compile(
    r"\b(?:did not|didn't|does not work|doesn't work|doesn't seem|do not work|"
    r"could not|couldn't|unable to|cannot be|not (?:sufficient|enough|eligible|"
    r"allowed|possible|available|present|correct(?:ly)?|working|the cause)|"
    r"failed|syntax error|wrong|incorrect|typo|timed out|no luck|"
    r"no (?:additional|new) output|multiple occurrences|not recovered)\b",
    re.IGNORECASE,
)
#: Hypotheticals and checks ("to see if it fails", "without an error").
_NOT_FAILED = re.compile(
    r"\b(?:to see if|to ensure|to make sure|to check|without (?:an? )?error|"
    r"next step)\b",
    re.IGNORECASE,
)
#: A user turning down what was proposed ("still above my budget", "Neither
#: of those works for me"): a rejected option, the why in the sentence.
_USER_DECLINE = re.compile(
    r"\b(?:too (?:expensive|high|long|late|early|slow|much)|above my|over my|"
    r"higher than my|more than i|(?:doesn't|does not|won't|will not) work for me|"
    r"neither|rather not|(?:i|we) (?:don't|do not) want|not (?:acceptable|"
    r"what i (?:want|asked))|prefer not)\b",
    re.IGNORECASE,
)
_PLAN = re.compile(
    r"^\W*(?:let's|let me|let us|i'll|i will|we'll|we will|we should|i should|"
    r"now,? (?:let's|i'll|we)|next,|first,|then,|to (?:do|fix|find|verify|check)|"
    r"please)\b",
    re.IGNORECASE,
)
#: An assistant asking the user to confirm before it acts (pending approval).
_CONFIRM_ASK = re.compile(
    r"\b(?:please confirm|confirm (?:if|whether|that|the following|these|this)|"
    r"once you confirm|do you confirm|can you confirm|could you confirm|"
    r"(?:would|do) you (?:like|want) (?:me )?to proceed|shall i proceed|"
    r"should i proceed|(?:reply|answer) (?:yes|with yes))\b",
    re.IGNORECASE,
)
CONFIRM_PREFIX = "confirmation asked: "
REQUEST_PREFIX = "latest request: "
ACTION_PREFIX = "latest action: "
#: Cue sentences kept under "Next steps" (the latest ones: older ones are stale).
NEXT_CUES_KEPT = 4
FINDINGS_PER_MESSAGE = 2
#: Findings kept: this many times ``max_section_items`` (earliest and latest
#: half each): they are what the agent learnt, the core of a continuation.
FINDINGS_FACTOR = 2
FACT_CHARS = 160
_ERROR_LINE = re.compile(
    r"(?:\b[A-Z]\w*(?:Error|Exception)\b|^(?:error|fatal|E)\b\s*[:\]]|"
    r"\bERROR\b|\bFAIL(?:ED)?\b|No such file|command not found|not found|"
    r"permission denied|\bexit (?:code|status):? ?[1-9])",
    re.IGNORECASE | re.MULTILINE,
)
_KEY_FACT = re.compile(
    r"(?:^|_)(?:id|ids|number|reference|ref|code|key|status|state|error|errors|"
    r"message|result|total|amount|count|items)$",
    re.IGNORECASE,
)
_PLEASANTRY = re.compile(
    r"^\W*(?:i can help|i'd be happy|i would be happy|of course|sure|certainly|"
    r"no worries|no problem|great|thank(?:s| you)|you're welcome|understood)\b",
    re.IGNORECASE,
)
_EXIT_CODE = re.compile(r"\bexit (?:code|status):? ?(\d+)", re.IGNORECASE)
_MARKDOWN = re.compile(r"[*_`]{1,3}")
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
    #: artifact id -> redacted tool output (key facts of tool results).
    outputs: Mapping[str, str] = field(default_factory=dict)
    #: Sentences of the system prompt (``sentence_key``): template text when a
    #: user message repeats them.
    framework: frozenset[str] = frozenset()
    #: Whether the message before this span was a tool result (so a window's
    #: first assistant turn reads it, as it would in a build from raw).
    after_result: bool = False


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


def _facts(key_fields: str, limit: int = FACT_CHARS) -> str:
    try:
        value = json.loads(key_fields)
    except ValueError:
        return ""
    if not isinstance(value, dict):
        return ""
    items = sorted((k, v) for k, v in value.items() if k != "keys")
    # Ids, status and errors first: they are what a continuation refers to.
    items.sort(key=lambda kv: 0 if _KEY_FACT.search(kv[0]) else 1)
    parts = [f"{k}={v}" for k, v in items]
    return clip(", ".join(parts), limit)


@lru_cache(maxsize=8_192)
def output_facts(output: str | None, limit: int = FACT_CHARS) -> str:
    """Key facts of a raw tool output: its exit code and its last error line
    (``AssertionError: expected 5 but got None``, ``Error: payment amount does
    not add up, total price is 305``), never the output itself."""
    if not output:
        return ""
    parts = []
    code = _EXIT_CODE.search(output)
    if code:
        parts.append(f"exit={code[1]}")
    errors = [
        line.strip()
        for line in output.splitlines()
        if _ERROR_LINE.search(line) and 8 <= len(line.strip())
    ]
    errors = [e for e in errors if not _EXIT_CODE.fullmatch(e)]
    if errors:
        parts.append("error: " + clip(errors[-1], limit - 20))
    return clip(", ".join(parts), limit)


@lru_cache(maxsize=65_536)
def is_pinned(sentence: str) -> bool:
    """Whether a user sentence is a standing rule or fact worth keeping verbatim."""
    return bool(_PIN.search(sentence) or find_facts(sentence) or find_rules(sentence))


def pinned_statements(
    message: Message, limit: int = 400, framework: frozenset[str] = frozenset()
) -> list[str]:
    """The sentences of a user message the summary pins verbatim: from its
    request only (framework templates, demonstrations and sentences the system
    prompt repeats are not the user's rules)."""
    if message.role != "user":
        return []
    return [
        s
        for s in _request_sentences(message, limit)
        if is_pinned(s) and sentence_key(s) not in framework
    ]


def _message_sentences(message: Message, limit: int) -> list[str]:
    return [clip(s, limit) for s in sentences(strip_observation(message.content))]


def _request_sentences(message: Message, limit: int) -> list[str]:
    """Sentences of the request part of a user message (none for a demonstration)."""
    text = strip_observation(message.content)
    if is_demonstration(text):
        return []
    return [clip(s, limit) for s in sentences(request_text(text))]


@lru_cache(maxsize=65_536)
def assistant_kind(sentence: str) -> str:
    """What an assistant sentence is for the sections: ``skip`` (a plan, a
    pleasantry, too short), ``failed`` (an attempt that failed: a rejected
    option with its why), ``finding`` (a result cue), ``plain`` (a statement:
    a finding when it opens the turn after a tool result) or ``other`` (a
    question, a request or a cue sentence that has its own section)."""
    plain = _MARKDOWN.sub("", sentence)
    words = len(plain.split())
    if _PLAN.match(plain) or words < 4 or (_PLEASANTRY.match(plain) and words <= 8):
        return "skip"
    if (
        _FAILED.search(plain)
        and not _NOT_FAILED.search(plain)
        and not _REJECT.search(plain)
    ):
        return "failed"
    if (
        plain.rstrip().endswith("?")
        or "please" in plain.lower()
        or _ANY_CUE.search(plain)
    ):
        return "other"
    return "finding" if _FINDING.search(plain) else "plain"


def _substantive(sentence: str, words: int = 3) -> bool:
    plain = _MARKDOWN.sub("", sentence).strip()
    return (
        len(plain.split()) >= words
        and not _GREETING.match(plain)
        and not is_lead_in(plain)
    )


def _confirmation_text(message: Message, limit: int) -> str:
    """The whole natural-language text of a confirmation request (the ids and
    amounts to confirm sit in its list lines), markdown removed."""
    lines = [_MARKDOWN.sub("", line) for line in text_lines(message.content)]
    return clip(" ".join(lines), limit)


def _action_text(message: Message, limit: int = 200) -> str | None:
    """What an assistant message does: its tool calls or its text action."""
    if message.tool_calls:
        parts = []
        for call in message.tool_calls:
            args = call.arguments.strip()
            try:
                value = json.loads(args) if args else {}
            except ValueError:
                value = args
            if isinstance(value, dict):
                main = next(
                    (
                        value[k]
                        for k in ("command", "code", "message", "path", "query")
                        if isinstance(value.get(k), str)
                    ),
                    None,
                )
                args = (
                    main
                    if main is not None
                    else " ".join(
                        f"{k}={v if isinstance(v, str) else json.dumps(v)}"
                        for k, v in value.items()
                    )
                )
            parts.append(f"{call.tool_name} {args}".strip())
        return cut(" ; ".join(_SPACES_RE.sub(" ", p) for p in parts), limit)
    action = text_action(message.content)
    if action:
        return cut(_SPACES_RE.sub(" ", action).strip(), limit)
    return None


_SPACES_RE = re.compile(r"\s+")


def extract_sections(span: Span, settings: LedgerSettings) -> SummarySections:
    """Sections of one span of messages, on their own (no earlier summary)."""
    return merge_sections(SummarySections(), span, settings)


def _replace_latest(
    items: list[SectionItem], prefix: str, new: SectionItem | None
) -> list[SectionItem]:
    if new is None:
        return items
    kept = [i for i in items if not i.text.startswith(prefix)]
    return [*kept, new] if new.text else kept


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
    have_goal = bool(goal)
    pinned_texts = {p.text for p in pinned}
    user_said = [p.text for p in pinned] + [g.text for g in goal]
    latest_request: SectionItem | None = None
    latest_action: SectionItem | None = None
    action_name = "unknown"
    previous_was_result = span.after_result
    for message in span.messages:
        is_result = message.role == "tool" or message.message_id in span.environment
        after_result, previous_was_result = previous_was_result, is_result
        if is_result:
            observation = span.observations.get(message.message_id)
            if observation is not None:
                output = span.outputs.get(observation.artifact_ref or "")
                facts = ", ".join(
                    f
                    # The error first: a long fact list must not clip it off.
                    for f in (
                        output_facts(output),
                        _facts(observation.key_fields, FACT_CHARS // 2 + 20),
                    )
                    if f
                )
                name = observation.tool_name or "unknown"
                if name == "unknown" and not message.tool_call_id:
                    name = action_name
                tool_results.append(
                    ToolResultRef(
                        turn=message.turn,
                        tool_name=name,
                        status=observation.status,
                        artifact_ref=observation.artifact_ref,
                        facts=clip(facts, FACT_CHARS + 60),
                    )
                )
            continue
        if message.role not in ("user", "assistant"):
            continue
        item = _item_factory(message)
        if message.role == "assistant":
            said = _message_sentences(message, chars)
            if said:
                questions = [q for q in questions if q.turn > message.turn]
            action = _action_text(message)
            if action is not None:
                action_name = cut((action.split() or ["unknown"])[0], 40)
                latest_action = item(ACTION_PREFIX + action)
            found = 0
            # The first statement after a tool result reads that result.
            first = after_result
            for sentence in said:
                if _CONFIRM_ASK.search(sentence):
                    text = CONFIRM_PREFIX + _confirmation_text(message, chars)
                    _add_unique(approvals, item(text))
                    break
            for sentence in said:
                kind = assistant_kind(sentence)
                if kind == "skip":
                    continue
                if kind == "failed":
                    _add_unique(rejected, item(sentence))
                elif (
                    found < FINDINGS_PER_MESSAGE
                    and (first or kind == "finding")
                    and kind != "other"
                    # An echo of the user ("Noted: ...") is the user's
                    # statement, not a finding.
                    and not any(_similar(sentence, u) for u in user_said)
                ):
                    # An agent's turn opens by reading the last result: its
                    # first statement is a finding even without a cue word.
                    _add_unique(findings, item(sentence))
                    found += 1
                first = False
        else:
            said = [
                s
                for s in _request_sentences(message, chars)
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
            firsts = [s for s in said if _substantive(s)]
            if not have_goal and firsts:
                for sentence in firsts[:2]:
                    goal.append(item(sentence))
                have_goal = True
            elif firsts:
                # A one-sentence request that is pinned or a next-step cue is
                # in the summary verbatim already: it only retires the older one.
                verbatim = len(firsts) == 1 and bool(
                    is_pinned(firsts[0]) or _NEXT.search(firsts[0])
                )
                latest_request = item(
                    "" if verbatim else REQUEST_PREFIX + " ".join(firsts[:2])
                )
        for sentence in said:
            if message.role == "user":
                if _USER_DECLINE.search(sentence) and not _REJECT.search(sentence):
                    _add_unique(rejected, item(sentence))
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
    cues = [
        n for n in next_steps if not n.text.startswith((REQUEST_PREFIX, ACTION_PREFIX))
    ]
    kept = {id(n) for n in _latest(cues, NEXT_CUES_KEPT)}
    next_steps = [
        n
        for n in next_steps
        if id(n) in kept or n.text.startswith((REQUEST_PREFIX, ACTION_PREFIX))
    ]
    next_steps = _replace_latest(next_steps, REQUEST_PREFIX, latest_request)
    next_steps = _replace_latest(next_steps, ACTION_PREFIX, latest_action)
    return SummarySections(
        goal=_earliest(goal, limit),
        findings=_ends(findings, FINDINGS_FACTOR * limit),
        decisions=_latest(decisions, limit),
        rejected_options=_latest(rejected, limit),
        open_questions=_latest(questions, limit),
        pending_approvals=_latest(approvals, limit),
        changed_artifacts=_changed(old.changed_artifacts, span.trail),
        sources_read=_reads(old.sources_read, span.trail, limit),
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


def _reads(
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
    return _latest(sorted(latest.values(), key=lambda i: i.turn), limit)


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
            # Older steps drop off at a step boundary, never mid-word.
            change=cut_left(
                f"{current.change}, {step}" if current.change else step, 400
            ),
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


def _result_lines(results: Sequence[ToolResultRef]) -> list[str]:
    """One typed line per result with key facts or a failure; results without
    either are folded into one line (their ``artifact_ref`` s stay in the
    sections and the trail): a list of bare refs tells a model nothing."""
    lines = []
    plain = []
    for r in results:
        if r.facts or r.status == "error":
            lines.append(
                f"- (t{r.turn}) {r.tool_name} [{r.status}] artifact={r.artifact_ref}"
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
    section("Findings", _lines(sections.findings, pinned=pins))
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
    section(
        "Sources read",
        # One line: a read is a pointer, not a statement.
        ["- " + "; ".join(f"t{i.turn} {i.text}" for i in sections.sources_read)]
        if sections.sources_read
        else ["- none"],
    )
    section("Test status", _lines(sections.test_status))
    section("Next steps", _lines(sections.next_steps, pinned=pins))
    section("Pinned user statements", _lines(sections.pinned_user_statements, True))
    section("Tool results", _result_lines(sections.tool_results))
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
