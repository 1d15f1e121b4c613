"""Where a finding comes from: the tool call it reads and the lines it cites.

A conclusion without its source cannot be checked or built on ("the rounding
issue has been fixed": says which run?). Each finding therefore names the
recent tool results it rests on: the results whose output holds the finding's
distinctive tokens (identifiers, numbers, paths, backticked names), newest
first, each with its call (``t25 python decrypt.py``) and, when the output
holds a token the call does not, the output lines that hold it; a finding that
reads the result right before it and cites none of these tokens names that
result, with the output itself when it is short (``-> "345"``). Only results of
the last ``RECENT_MESSAGES`` messages count (a conclusion reads what the agent
just saw; this also keeps a merged window and a build from raw in agreement).
Pure: no Beam, works on redacted text.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from ctxledger.pipelines.ledger.boilerplate import is_prompt_line
from ctxledger.pipelines.ledger.items import SOURCE_PREFIX
from ctxledger.pipelines.ledger.next_steps import call_text
from ctxledger.pipelines.ledger.text import cut
from ctxledger.pipelines.ledger.trail import text_action
from ctxledger.pipelines.redact.residual import secret_in_text
from ctxledger.schemas.transcript import Message

#: How far back (in messages) a finding's sources may lie.
RECENT_MESSAGES = 16
SOURCES_PER_FINDING = 2
LINES_PER_SOURCE = 2
#: An output this short (after prompt lines) is quoted whole when cited.
SHORT_OUTPUT_CHARS = 160
SHORT_OUTPUT_LINES = 3
LINE_CHARS = 120
ACTION_CHARS = 80

_QUOTED = re.compile(r"`([^`\n]{3,60})`")
_WORD = re.compile(r"\w[\w./:+-]*[\w}]")
_CAMEL = re.compile(r"[a-z][A-Z]")
_STRUCTURED = re.compile(r"^\s*[{\[]")
#: A thousands separator: "$1,000" and "1000" are one token.
_THOUSANDS = re.compile(r"(?<=\d),(?=\d{3}\b)")
#: Tools whose result is the agent's own note, never a source.
NOT_SOURCES = frozenset({"think"})


@dataclass(frozen=True)
class Read:
    """A tool result a finding may cite."""

    position: int
    turn: int
    action: str
    output: str
    #: Whether "Tool results" shows the result (its key facts or an error):
    #: a note then names the call by its tool and turn only.
    typed: bool = False


def _distinctive(word: str) -> bool:
    if len(word) < 3:
        return False
    if word.isdigit():
        return len(word) >= 2
    return bool(
        any(c.isdigit() for c in word)
        or any(c in "_/.{" for c in word[1:-1])
        or _CAMEL.search(word)
    )


@lru_cache(maxsize=16_384)
def tokens_of(sentence: str) -> tuple[str, ...]:
    """The finding's distinctive tokens, lower-cased: backticked names, and
    words holding a digit, an underscore, a path or dot, or camelCase."""
    found: dict[str, None] = {}
    sentence = _THOUSANDS.sub("", sentence)
    for quoted in _QUOTED.findall(sentence):
        found[quoted.strip().lower()] = None
    for word in _WORD.findall(sentence.replace("`", " ")):
        word = word.rstrip(".:")
        if _distinctive(word):
            found[word.lower()] = None
    return tuple(t for t in found if t)


@lru_cache(maxsize=1_024)
def folded(text: str) -> str:
    """``text`` lower-cased, thousands separators dropped (cached: a result is
    searched once per finding that may cite it)."""
    return _THOUSANDS.sub("", text).lower()


@lru_cache(maxsize=4_096)
def output_lines(output: str) -> tuple[str, ...]:
    """The non-blank lines of a tool output, without the prompt lines."""
    return tuple(
        line.strip()
        for line in output.splitlines()
        if line.strip() and not is_prompt_line(line)
    )


def _snippet(line: str, token: str) -> str:
    """``line`` cut to ``LINE_CHARS`` around ``token``, at word boundaries."""
    if len(line) <= LINE_CHARS:
        return line
    at = line.lower().find(token)
    start = max(0, at - LINE_CHARS // 3)
    if start:
        space = line.find(" ", start)
        start = space + 1 if 0 <= space < at else start
    text = cut(line[start:], LINE_CHARS)
    return ("…" if start else "") + text


def cited_lines(tokens: Sequence[str], read: Read) -> list[str]:
    """The output lines of ``read`` holding a token its call does not name:
    most tokens first, at most ``LINES_PER_SOURCE``, in output order."""
    if _STRUCTURED.match(read.output):
        # Structured data: the call names the record and "Tool results" holds
        # its key fields; a cut JSON line reads as noise.
        return []
    action = read.action.lower()
    wanted = [t for t in tokens if t not in action]
    if not wanted:
        return []
    scored = []
    for index, line in enumerate(output_lines(read.output)):
        low = line.lower()
        hit = [t for t in wanted if t in low]
        if hit and not secret_in_text(line):
            scored.append((-len(hit), index, _snippet(line, hit[0])))
    best = sorted(scored)[:LINES_PER_SOURCE]
    return [text for _, _, text in sorted(best, key=lambda s: s[1])]


def short_output(read: Read) -> list[str]:
    """The last line of a short output (a value, a flag, a runner's summary:
    "345", "24 passed in 12.3s"): what the result came to, never the output
    itself; none for structured data (see ``cited_lines``)."""
    if _STRUCTURED.match(read.output):
        return []
    lines = output_lines(read.output)
    if (
        lines
        and len(lines) <= SHORT_OUTPUT_LINES
        and sum(map(len, lines)) <= SHORT_OUTPUT_CHARS
        and not secret_in_text(lines[-1])
    ):
        return [lines[-1]]
    return []


def cut_middle(text: str, limit: int) -> str:
    """``text`` within ``limit`` characters, its middle left out: a call's
    head names the tool and its tail the target (``curl ... file.pl?/flag``)."""
    if len(text) <= limit:
        return text
    head = cut(text, limit // 2)
    tail = text[len(text) - (limit - len(head) - 3) :]
    # Start the tail at a word or path boundary.
    breaks = [i for i in (tail.find(" "), tail.find("/")) if 0 <= i < len(tail) // 2]
    if breaks:
        tail = tail[min(breaks) :].lstrip()
    return f"{head.rstrip('…')} … {tail}"


def cite(sentence: str, reads: Sequence[Read], position: int, direct: bool) -> str:
    """The source note of a finding made at ``position`` (empty when none).

    ``reads`` are the results seen so far (oldest first); ``direct`` says the
    finding's turn reads the last of them (it follows it at once). A token
    that more than ``SOURCES_PER_FINDING`` recent results hold (a year, a user
    id) tells them apart no better than none; the results holding the most of
    the other tokens are cited, the newest first on a tie.
    """
    recent = [r for r in reads if position - r.position <= RECENT_MESSAGES]
    texts = [(r, f"{folded(r.action)}\n{folded(r.output)}") for r in recent]
    tokens = [
        t
        for t in tokens_of(sentence)
        if sum(t in text for _, text in texts) <= SOURCES_PER_FINDING
    ]
    scored = []
    for read, text in texts:
        score = sum(t in text for t in tokens)
        if score:
            scored.append((-score, -read.position, read))
    picked = [read for _, _, read in sorted(scored, key=lambda s: s[:2])]
    picked = picked[:SOURCES_PER_FINDING]
    last = recent[-1] if direct and recent else None
    if not picked and last is not None:
        picked.append(last)
    if not picked:
        return ""
    notes = []
    for read in sorted(picked, key=lambda r: r.position):
        lines = cited_lines(tokens, read)
        if not lines and read is last:
            if read.typed and len(picked) == 1:
                # The result right above, shown under "Tool results" with its
                # facts: the finding's turn says where it comes from already.
                return ""
            # The result the turn reads at once: its last line when short.
            lines = short_output(read)
        call = read.action.split(" ", 1)[0] if read.typed else read.action
        note = f"t{read.turn} {cut_middle(call, ACTION_CHARS)}"
        if lines:
            note += ' -> "' + " | ".join(lines) + '"'
        notes.append(note)
    note = SOURCE_PREFIX + "; ".join(notes) + "]"
    # A note that trips a secret rule would take its finding down with it.
    return "" if secret_in_text(note) else note


class ReadLog:
    """The recent tool results of a walk through a session, with their calls."""

    def __init__(self) -> None:
        self.reads: list[Read] = []
        self._calls: dict[str, str] = {}
        self._action = ""

    def saw_action(self, message: Message) -> None:
        """Remember an assistant message's tool calls or text action (none:
        the next result's call is unknown, never the one before)."""
        if message.tool_calls:
            self._calls = {c.call_id: call_text(c) for c in message.tool_calls}
            self._action = " ; ".join(self._calls.values())
            return
        action = text_action(message.content)
        self._calls = {}
        # An edit's body is not its name: the command line is.
        self._action = action.strip().splitlines()[0].strip() if action else ""

    def saw_result(
        self,
        message: Message,
        position: int,
        output: str,
        tool: str = "",
        typed: bool = False,
    ) -> None:
        """Record a tool result (``output``: its raw text, ``tool``: its tool's
        name when known, ``typed``: see ``Read``) at ``position``."""
        action = self._calls.get(message.tool_call_id or "", self._action) or tool
        if action.split(" ", 1)[0] in NOT_SOURCES:
            return
        self.reads.append(Read(position, message.turn, action or "?", output, typed))
        while self.reads and position - self.reads[0].position > RECENT_MESSAGES:
            self.reads.pop(0)
