"""Sentences of a redacted message, with their char spans.

Memories keep the user's sentence verbatim, so spans index the redacted message
exactly: ``message.content[start:end] == sentence.text``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# A sentence ends at . ! ? (or a line break) followed by space and a capital,
# digit, quote or placeholder; "$1,249.00" or "e.g. this" do not split.
_BOUNDARY = re.compile(r"(?<=[.!?])\s+(?=[\"'(<A-Z0-9])|\n+")


@dataclass(frozen=True)
class Sentence:
    """One sentence: its text and where it sits in the message."""

    text: str
    start: int
    end: int

    @property
    def is_question(self) -> bool:
        return self.text.rstrip().endswith("?")


def sentences(text: str) -> list[Sentence]:
    """Split ``text`` into trimmed sentences with exact spans."""
    out: list[Sentence] = []
    position = 0
    for match in [*_BOUNDARY.finditer(text), None]:
        end = match.start() if match else len(text)
        chunk = text[position:end]
        stripped = chunk.strip()
        if stripped:
            start = position + (len(chunk) - len(chunk.lstrip()))
            out.append(Sentence(stripped, start, start + len(stripped)))
        if match:
            position = match.end()
    return out
