"""The assistant's side: findings (conclusions) and failed attempts.

A finding is the first statement of an assistant turn that follows a tool
result (the agent reading that result) or a sentence with a result cue; never a
plan, a question, a pleasantry or an echo of the user. A sentence saying an
attempt failed is a rejected option, its why in the sentence.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache

from ctxledger.pipelines.ledger.boilerplate import is_lead_in
from ctxledger.pipelines.ledger.citations import tokens_of
from ctxledger.pipelines.ledger.cues import (
    ANY_CUE,
    FAILED,
    FINDING,
    MARKDOWN,
    NEGATED,
    NOT_FAILED,
    PLAN,
    PLEASANTRY,
    REJECT,
    SUCCEEDED,
)
from ctxledger.pipelines.ledger.items import LIST_SEP, SIMILAR, SOURCE_PREFIX, similar
from ctxledger.pipelines.ledger.text import (
    clip,
    content_words,
    sentences,
    strip_observation,
)
from ctxledger.schemas.ledger import SectionItem
from ctxledger.schemas.transcript import Message

FINDINGS_PER_MESSAGE = 2
#: A lead-in keeps this much of the list it announces (its first items).
LIST_CHARS = 300
#: Findings kept: this many times ``max_section_items`` (earliest and latest
#: half each): they are what the agent learnt, the core of a continuation.
FINDINGS_FACTOR = 2


def message_sentences(message: Message, limit: int) -> list[str]:
    return [clip(s, limit) for s in sentences(strip_observation(message.content))]


@lru_cache(maxsize=65_536)
def assistant_kind(sentence: str) -> str:
    """What an assistant sentence is for the sections: ``skip`` (a plan, a
    pleasantry, too short), ``failed`` (an attempt that failed: a rejected
    option with its why), ``finding`` (a result cue), ``plain`` (a statement:
    a finding when it opens the turn after a tool result) or ``other`` (a
    question, a request or a cue sentence that has its own section)."""
    plain = MARKDOWN.sub("", sentence)
    words = len(plain.split())
    if PLAN.match(plain) or words < 4 or (PLEASANTRY.match(plain) and words <= 8):
        return "skip"
    if (
        FAILED.search(plain)
        and not NOT_FAILED.search(plain)
        and not REJECT.search(plain)
        # "ran successfully ... the syntax error is resolved": a success.
        and not (SUCCEEDED.search(plain) and not NEGATED.search(plain))
    ):
        return "failed"
    if (
        plain.rstrip().endswith("?")
        or "please" in plain.lower()
        or ANY_CUE.search(plain)
    ):
        return "other"
    return "finding" if FINDING.search(plain) else "plain"


def is_echo(sentence: str, user_said: Sequence[str]) -> bool:
    """An echo of the user ("Noted: ...") is the user's statement, not a
    finding: most of *its* words are the user's. A sentence that merely holds
    the user's short request ("Your reservation has been updated to the
    fastest trip from Denver to Houston on May 27, with an upgrade ...") or
    adds ids, numbers or names the user did not say ("under reservations
    SE9KEL and FDZ0T5") is a finding."""
    words = content_words(sentence)
    tokens = tokens_of(sentence)
    for said in user_said:
        if not similar(sentence, said):
            continue
        if len(words) >= 3 and len(words & content_words(said)) < SIMILAR * len(words):
            continue
        low = said.lower()
        if all(t in low for t in tokens):
            return True
    return False


_LIST_LINE = re.compile(r"^\s*(?:[-*+\u2022]|\d{1,3}[.)])\s+|^\s{2,}\S")
_LIST_MARK = re.compile(r"^\s*[-*+\u2022]\s+")


def list_after(content: str, sentence: str) -> list[str]:
    """The list lines that follow the line holding ``sentence`` (markdown and
    bullet marks removed): what a lead-in sentence announces."""
    lines = content.splitlines()
    head = sentence[:40]
    start = next((i for i, line in enumerate(lines) if head in line), None)
    if start is None:
        return []
    out = []
    for line in lines[start + 1 :]:
        if not line.strip():
            continue
        if not _LIST_LINE.match(line):
            break
        text = MARKDOWN.sub("", _LIST_MARK.sub("", line)).strip()
        if text:
            out.append(text)
    return out


def with_lists(conclusions: Sequence[str], content: str, limit: int) -> list[str]:
    """A turn's findings, lead-ins resolved: a lead-in ("here are the
    details:") is dropped when the turn states a conclusion too, and otherwise
    carries the list it announces (the ids and values sit in its lines), or
    is dropped when it announces none."""
    plain = [s for s in conclusions if not is_lead_in(s)]
    if plain:
        return plain
    out = []
    for sentence in conclusions:
        listed = list_after(content, sentence)
        if not listed:
            continue  # announces nothing the summary can keep
        # "Flight Segments:; IAH to LAS" reads as "Flight Segments: IAH to LAS".
        joined = "".join(
            f"{line} " if line.endswith(":") else f"{line}; " for line in listed
        ).rstrip("; ")
        text = clip(f"{sentence}{LIST_SEP}{joined}", max(len(sentence), LIST_CHARS))
        out.append(clip(text, limit))
    return out


def add_finding(findings: list[SectionItem], item: SectionItem) -> None:
    """Append ``item`` unless an earlier finding says it already: most of its
    words are in that finding and it names no id or number that one does not
    (a longer conclusion that holds an earlier short one is new; so is the
    same lead-in announcing another list)."""
    text = item.text.split(SOURCE_PREFIX, 1)[0]
    words = content_words(text)
    tokens = tokens_of(text)
    for old in findings:
        before = old.text.split(SOURCE_PREFIX, 1)[0]
        if len(words) < 3:
            if text.strip().lower() == before.strip().lower():
                return
            continue
        covered = len(words & content_words(before)) >= SIMILAR * len(words)
        low = before.lower()
        if covered and all(t in low for t in tokens):
            return
    findings.append(item)
