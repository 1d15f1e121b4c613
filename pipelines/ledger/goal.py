"""The user's side: the goal (the first real request) and pinned statements.

Only the request part of a user message counts (framework templates,
demonstrations and sentences the system prompt repeats are left out, see
``boilerplate``).

The goal is what the user came for, so it is never an identity line ("Hi, I'm
Dana", "My user id is X"), a greeting or a standing rule: those are pinned
statements, listed once under their own heading. A user message whose sentences
are all of that kind does not set the goal; the next one may. When no user
sentence ever asks for anything (a support chat where the user only identifies
themselves and the assistant names the task), the goal falls back to the first
task the assistant takes on ("I'll open ticket T-9921 for the duplicate
charge"), marked ``assistant:``, until a real user request replaces it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache

from ctxledger.pipelines.ledger.boilerplate import (
    is_demonstration,
    is_lead_in,
    request_text,
    sentence_key,
)
from ctxledger.pipelines.ledger.cues import (
    ASK,
    CLOSING,
    GREETING,
    IDENTITY,
    MARKDOWN,
    PIN,
    TAKES_ON,
)
from ctxledger.pipelines.ledger.protected import find_facts, find_rules
from ctxledger.pipelines.ledger.text import clip, sentences, strip_observation
from ctxledger.schemas.transcript import Message

#: Marks a goal line the assistant stated (no user sentence asked yet).
ASSISTANT_GOAL_PREFIX = "assistant: "
#: A greeting (and whom it greets) at the start of a sentence: "Hi, ",
#: "Hello Dana, ", "Thanks <PERSON:3f9a1c2b>. ".
_GREETING_LEAD = re.compile(
    r"^\W*(?i:hi|hello|hey|dear|greetings|good (?:morning|afternoon|evening)|"
    r"thanks|thank you)(?:\s+(?:(?i:there|all|everyone|team|so much)|"
    r"<[A-Z_]+:[0-9a-f]+>|[A-Z][\w'-]*))?\s*[,!.:;-]+\s*"
)


@lru_cache(maxsize=65_536)
def is_pinned(sentence: str) -> bool:
    """Whether a user sentence is a standing rule or fact worth keeping verbatim."""
    return bool(PIN.search(sentence) or find_facts(sentence) or find_rules(sentence))


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
        for s in request_sentences(message, limit)
        if is_pinned(s) and sentence_key(s) not in framework
    ]


def request_sentences(message: Message, limit: int) -> list[str]:
    """Sentences of the request part of a user message (none for a demonstration)."""
    text = strip_observation(message.content)
    if is_demonstration(text):
        return []
    return [clip(s, limit) for s in sentences(request_text(text))]


def without_greeting(sentence: str) -> str:
    """``sentence`` without a leading greeting ("Hi, I need..." -> "I need...")."""
    return _GREETING_LEAD.sub("", sentence, count=1)


def substantive(sentence: str, words: int = 3) -> bool:
    """Whether a sentence says something: not a greeting, a lead-in or a
    short closing ("No, thank you.")."""
    plain = MARKDOWN.sub("", sentence).strip()
    size = len(plain.split())
    return (
        size >= words
        and not GREETING.match(plain)
        and not (size <= 8 and CLOSING.match(plain))
        and not is_lead_in(plain)
    )


def is_ask(sentence: str) -> bool:
    """A question or an ask ("I need to...", "Can you...", "please ...")."""
    return bool(ASK.search(sentence))


def goal_sentences(said: Sequence[str]) -> list[tuple[str, str]]:
    """The goal lines of one user message as ``(sentence, shown)`` pairs (the
    greeting left out of ``shown``), or none when the message holds no request.

    A standing rule (pinned) and a fact or identity line that asks nothing
    ("My user id is X", "Hi, I'm Dana") are not the goal; a request that names
    an id or a date is ("Can you cancel reservation SI5UKW?"), and so is a
    sentence describing the problem ("the insurance isn't appearing online");
    either is then written under the goal only, not pinned as well. Two lines are
    kept: the first one and the first ask (the opening says what "that" in
    "Can you help with that?" is).
    """
    candidates = []
    for sentence in said:
        shown = without_greeting(sentence)
        if not substantive(shown):
            continue
        if PIN.search(shown):
            continue
        if (find_facts(shown) or IDENTITY.match(shown)) and not is_ask(shown):
            continue
        candidates.append((sentence, shown))
    asks = [i for i, (_, shown) in enumerate(candidates) if is_ask(shown)]
    if asks and asks[0] > 1:
        # The opening names the task ("The CTF challenge is ... named X"),
        # the ask says what to do with it.
        return [candidates[0], candidates[asks[0]]]
    return candidates[:2]


def assistant_goal(said: Sequence[str]) -> str | None:
    """The first task an assistant message takes on ("I'll open ticket
    T-9921 for the duplicate charge"), as a fallback goal line; not a step of
    its own investigation ("I'll check", "let me look up")."""
    for sentence in said:
        if TAKES_ON.match(sentence) and substantive(sentence, 5):
            return ASSISTANT_GOAL_PREFIX + sentence
    return None
