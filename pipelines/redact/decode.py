"""Decoded views of text: detect on what a reader sees, redact what is stored.

A tool's output often hides a value behind an encoding: Python's ``json.dumps``
writes ``"Szyma\\u0144ska"`` (``ensure_ascii``), HTML writes ``Szyma&#324;ska``,
URLs write ``jane%40example.com``. Detectors that read the raw characters miss
these values (issue 29: the escaped name was stored, embedded and served while
the same name with a literal "ń" was redacted).

``decoded_view`` returns the text with those three encodings (and Python's
``ascii()`` escapes of Latin-1 letters, ``Pe\\xf1a``) decoded plus a map
from decoded offsets back to raw ones. The engine detects on the decoded text
and replaces the mapped *raw* spans, so the stored text keeps its structure
(JSON stays valid JSON, HTML stays HTML) and only the value becomes a
placeholder. Escapes that carry structure (``\\"``, ``\\\\``, ``\\n``, control
characters, lone surrogates) are left as they are.
"""

from __future__ import annotations

import html
import re
from bisect import bisect_right
from dataclasses import dataclass
from html.entities import html5

#: A run of backslashes then ``uXXXX``; the run's length decides whether it
#: is an escape here or one JSON level down (JSON inside a JSON string).
_JSON_U = re.compile(r"(\\+)u([0-9a-fA-F]{4})")
#: Python's ``ascii()`` / repr escapes of Latin-1 letters (``'Pe\xf1a'``).
_PY_X = re.compile(r"(?<!\\)((?:\\\\)*)\\x([a-fA-F][0-9a-fA-F])")
#: ``&#324;``, ``&#x144;``, ``&nacute;`` (named ones only when HTML5 knows them).
_ENTITY = re.compile(
    r"&(?:#[0-9]{1,7}|#[xX][0-9a-fA-F]{1,6}|[A-Za-z][A-Za-z0-9]{1,31});"
)
#: Runs of percent-escapes (``%C5%84``, ``%40``).
_PERCENT = re.compile(r"(?:%[0-9A-Fa-f]{2})+")
#: Characters a decoded escape must not become: JSON structure and controls.
_KEEP_ESCAPED = frozenset('"\\') | {chr(i) for i in range(32)} | {"\x7f"}


def _json_escapes(text: str) -> list[tuple[int, int, str]]:
    """``(raw start, raw end, decoded)`` of each ``\\uXXXX`` escape.

    An odd run of backslashes escapes the ``u`` here; an even run is a literal
    backslash here that escapes it one JSON level down: both decode (a nested
    document reads the same character either way). Surrogate pairs join; lone
    surrogates and escapes of structure (quote, backslash, controls) stay.
    """
    out = []
    for m in _JSON_U.finditer(text):
        slashes = len(m.group(1))
        used = 1 if slashes % 2 else 2
        start = m.end(1) - used
        end = m.end()
        code = int(m.group(2), 16)
        if 0xDC00 <= code <= 0xDFFF:
            continue
        if 0xD800 <= code <= 0xDBFF:
            low = text[end : end + used + 5]
            if not (
                low.startswith("\\" * used + "u")
                and re.fullmatch(r"[dD][c-fC-F][0-9a-fA-F]{2}", low[used + 1 :])
            ):
                continue
            code = (
                0x10000 + ((code - 0xD800) << 10) + (int(low[used + 1 :], 16) - 0xDC00)
            )
            end += used + 5
        char = chr(code)
        if char not in _KEEP_ESCAPED:
            out.append((start, end, char))
    return out


def _entity(raw: str) -> str | None:
    if raw.startswith("&#"):
        try:
            code = int(raw[3:-1], 16) if raw[2] in "xX" else int(raw[2:-1])
        except ValueError:
            return None
        if code <= 0 or code > 0x10FFFF or 0xD800 <= code <= 0xDFFF:
            return None
        char = chr(code)
        return None if char in _KEEP_ESCAPED else char
    if raw[1:] not in html5:
        return None
    value = html.unescape(raw)
    return None if any(ch in _KEEP_ESCAPED for ch in value) else value


def _percent(raw: str) -> str | None:
    try:
        value = bytes.fromhex(raw.replace("%", "")).decode("utf-8")
    except ValueError:
        return None
    if any(ch in _KEEP_ESCAPED for ch in value):
        return None
    return value


@dataclass(frozen=True, slots=True)
class DecodedView:
    """``text`` decoded; ``segments`` are the replaced pieces as
    ``(decoded start, decoded end, raw start, raw end)``, sorted."""

    raw: str
    text: str
    segments: tuple[tuple[int, int, int, int], ...]

    def to_raw(self, start: int, end: int) -> tuple[int, int]:
        """The raw span covering decoded ``[start, end)``; a span that cuts
        into a decoded escape covers the whole escape."""
        return self._pos(start, False), self._pos(end, True)

    def _pos(self, pos: int, is_end: bool) -> int:
        i = bisect_right(self._starts, pos) - 1
        if i < 0:
            return pos
        d_start, d_end, r_start, r_end = self.segments[i]
        if pos >= d_end:
            return r_end + (pos - d_end)
        if pos == d_start:
            return r_start
        return r_end if is_end else r_start

    @property
    def _starts(self) -> list[int]:
        return [s[0] for s in self.segments]


def _matches(text: str) -> list[tuple[int, int, str]]:
    """``(raw start, raw end, decoded)`` of every decodable piece, in order."""
    found: list[tuple[int, int, str]] = []
    if "\\u" in text:
        found.extend(_json_escapes(text))
    if "\\x" in text:
        for m in _PY_X.finditer(text):
            char = chr(int(m.group(2), 16))
            if char.isalpha():  # a letter (not NBSP, signs): Peña, Müller
                found.append((m.end(1), m.end(), char))
    if "&" in text:
        for m in _ENTITY.finditer(text):
            value = _entity(m.group())
            if value is not None and value != m.group():
                found.append((m.start(), m.end(), value))
    if "%" in text:
        for m in _PERCENT.finditer(text):
            value = _percent(m.group())
            if value is not None:
                found.append((m.start(), m.end(), value))
    found.sort()
    out: list[tuple[int, int, str]] = []
    last = 0
    for start, end, value in found:  # encodings never nest: first one wins
        if start >= last:
            out.append((start, end, value))
            last = end
    return out


def decoded_view(text: str) -> DecodedView | None:
    """The decoded view of ``text``, or None when nothing in it is encoded
    (most texts: three substring tests)."""
    if not text or ("\\" not in text and "&" not in text and "%" not in text):
        return None
    found = _matches(text)
    if not found:
        return None
    parts: list[str] = []
    segments: list[tuple[int, int, int, int]] = []
    raw_pos = 0
    out_len = 0
    for start, end, value in found:
        parts.append(text[raw_pos:start])
        out_len += start - raw_pos
        segments.append((out_len, out_len + len(value), start, end))
        parts.append(value)
        out_len += len(value)
        raw_pos = end
    parts.append(text[raw_pos:])
    return DecodedView(text, "".join(parts), tuple(segments))


def decode_value(text: str) -> str:
    """``text`` decoded (itself when nothing is encoded): what a pseudonym is
    computed from, so ``Szyma\\u0144ska`` and ``Szymańska`` get one placeholder."""
    view = decoded_view(text)
    return text if view is None else view.text
