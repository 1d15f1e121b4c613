"""Small text helpers shared by the ledger modules: sentences, clauses, words.

Everything here is deterministic and works on redacted text. Lines that read as
code, logs, JSON or file listings are skipped when sentences are taken, so an
agent's tool output pasted into a message does not turn into "statements".
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from functools import lru_cache

#: The observation line ``normalize`` appends to a tool-result message.
OBSERVATION_LINE = re.compile(r"\[tool_result tool=[^\]\n]*\]")

_CODE_LINE = re.compile(
    r"^\s*(?:def |class |import |from \S+ import |return\b|#include|\$ |>>> |"
    r"\.\.\. |File \"|Traceback|raise |diff --git|@@ |\+\+\+ |--- |index [0-9a-f]|"
    r"[{\[]|\d+:\s|\d+\s*\||[│├└┌┐┘┴┬─]|```|~~~|end_of_edit\b|"
    r"(?:DEBUG|INFO|WARN|WARNING|ERROR|TRACE|FATAL|CRITICAL)\b[:\] ])"
)
#: A fenced code block's opening or closing line: what is inside is code.
_FENCE = re.compile(r"^\s*(?:```|~~~)")
_LETTER = re.compile(r"[^\W\d_]")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=\S)")
#: A piece ending in a title ("Dr.", "Mrs.") never ends a sentence; one ending
#: in "a.m.", "e.g.", "vs." does not when the next piece starts in lower case
#: or with a digit ("at 7:00 a.m. on March 16th").
_TITLE_END = re.compile(r"(?:^|\s)(?:Dr|Mr|Mrs|Ms|Mx|Prof|Sr|Jr|St|Mt)\.$")
_ABBREV_END = re.compile(
    r"(?:^|\s)(?:[ap]\.m|e\.g|i\.e|vs|etc|approx|incl|no|cf|fig)\.$", re.I
)
_LOWER_START = re.compile(r"^[a-z0-9(]")
_CLAUSE_SPLIT = re.compile(r"\s*;\s*|\s+(?:but|however|whereas)\s+", re.IGNORECASE)
_WORD = re.compile(r"[^\W_][\w'-]*", re.UNICODE)
_SPACES = re.compile(r"\s+")
_LAST_BREAK = re.compile(r"[\s,;:/&?=)\]]+[^\s,;:/&?=)\]]*$")
_QUOTES = str.maketrans({"\u2019": "'", "\u2018": "'", "\u201c": '"', "\u201d": '"'})

STOPWORDS = frozenset(
    """a an and are as at be been being by for from had has have he her his i if in
    into is it its itself me my of on or our ours she so that the their them then
    there these they this those to too us was we were what when where which while
    who whom why will with would you your yours can could shall should may might
    must do does did done doing not no nor never don't doesn't didn't won't can't
    isn't aren't wasn't weren't shouldn't mustn't just very also any all each
    please let let's ok okay yes""".split()
)


def strip_observation(text: str) -> str:
    """``text`` without the ``[tool_result ...]`` line normalize appended."""
    return OBSERVATION_LINE.sub("", text).strip()


def is_text_line(line: str) -> bool:
    """Whether a line reads as natural language rather than code, logs or data."""
    stripped = line.strip()
    if len(stripped) < 2 or _CODE_LINE.match(stripped):
        return False
    letters = len(_LETTER.findall(stripped))
    return letters >= 0.5 * len(stripped.replace(" ", ""))


def text_lines(text: str) -> Iterator[str]:
    """The natural-language lines of ``text`` (observation lines and fenced
    code blocks removed)."""
    fenced = False
    for line in strip_observation(text).splitlines():
        if _FENCE.match(line):
            # "```python ... ```" on one line opens and closes: no toggle.
            if line.count("```") % 2 == 1 or line.count("~~~") % 2 == 1:
                fenced = not fenced
            continue
        if not fenced and is_text_line(line):
            yield line.strip()


@lru_cache(maxsize=65_536)
def sentences(text: str) -> tuple[str, ...]:
    """Verbatim sentences of the natural-language lines of ``text`` (cached: the
    ledger reads the same messages once per window, rebuild and check)."""
    out: list[str] = []
    for line in text_lines(text):
        pieces: list[str] = []
        for piece in _SENTENCE_END.split(line):
            piece = piece.strip()
            if not piece:
                continue
            if pieces and (
                _TITLE_END.search(pieces[-1])
                or _ABBREV_END.search(pieces[-1])
                and _LOWER_START.match(piece)
            ):
                pieces[-1] += " " + piece
            else:
                pieces.append(piece)
        out.extend(pieces)
    return tuple(out)


def clauses(sentence: str) -> list[str]:
    """A sentence split at ``;`` and contrastive conjunctions."""
    return [c for c in _CLAUSE_SPLIT.split(sentence) if c and c.strip()]


def normalize_clause(text: str, limit: int = 400) -> str:
    """Lower-case, straight quotes, single spaces, no trailing punctuation."""
    value = _SPACES.sub(" ", text.translate(_QUOTES)).strip().lower()
    value = value.rstrip(" .!?:;,")
    if len(value) > limit:
        value = value[:limit].rsplit(" ", 1)[0]
    return value


def clip(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` characters at a word boundary."""
    text = _SPACES.sub(" ", text).strip()
    if len(text) <= limit:
        return text
    return text[: limit - 2].rsplit(" ", 1)[0] + " …"


def cut(text: str, limit: int) -> str:
    """``text`` (whitespace kept) cut to at most ``limit`` characters, never
    inside a word: at the last space or punctuation before the limit, plus "…"."""
    if len(text) <= limit:
        return text
    head = text[: max(limit - 1, 1)]
    match = _LAST_BREAK.search(head)
    if match is not None and match.start() > limit // 3:
        head = head[: match.start()]
    return head.rstrip(" ,;:") + "…"


def cut_left(text: str, limit: int, sep: str = ", ") -> str:
    """The end of ``text`` in at most ``limit`` characters, starting after a
    ``sep`` boundary (or a space), prefixed with "…": never mid-word."""
    if len(text) <= limit:
        return text
    tail = text[len(text) - (limit - 2) :]
    for boundary in (sep, " "):
        index = tail.find(boundary)
        if index >= 0:
            return "… " + tail[index + len(boundary) :]
    return "… " + tail


def stem(word: str) -> str:
    """A crude, deterministic suffix stripper (enough to match inflections)."""
    word = word.lower().strip("'-")
    for suffix in ("ing", "ed", "es", "s"):
        if len(word) > len(suffix) + 3 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word


@lru_cache(maxsize=65_536)
def content_words(text: str) -> frozenset[str]:
    """Stemmed non-stopwords of ``text`` (the words a paraphrase must keep)."""
    words = (w.lower() for w in _WORD.findall(text.translate(_QUOTES)))
    return frozenset(stem(w) for w in words if w not in STOPWORDS and len(w) > 1)


def coverage(needed: frozenset[str], text_words: frozenset[str]) -> float:
    """Share of ``needed`` words present in ``text_words`` (1.0 when none needed)."""
    if not needed:
        return 1.0
    return len(needed & text_words) / len(needed)


def key_fields_map(key_fields: str) -> dict:
    """A tool result's stored ``key_fields`` JSON as a dict; ``{}`` when it is
    not JSON or not an object (older rows, plain-text results)."""
    try:
        value = json.loads(key_fields)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}
