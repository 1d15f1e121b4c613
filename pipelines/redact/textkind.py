"""Where the natural language is: cheap heuristics that pick the spans worth NER.

spaCy NER is by far the most expensive step (DESIGN §8), and on logs, code, JSON
and stack traces it mostly produces false positives. ``nl_spans`` returns the
character spans of a text that read as prose; only those go to NER. Regex-based
detectors still run on the whole text.

JSON (and Python-repr) tool outputs are handled by scanning their string literals
without decoding: the raw characters between escape sequences keep their offsets,
so a value like ``"Hello Mia\\nHow are you"`` yields two prose pieces. Object keys
are reported separately (``json_pairs``) so key rules (``"first_name": "Mia"``)
need no NER at all.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

_DQ_LITERAL = re.compile(r'"((?:[^"\\\n]|\\.)*)"')
_SQ_LITERAL = re.compile(r"'((?:[^'\\\n]|\\.)*)'")
_ESCAPE = re.compile(r"\\(?:u[0-9a-fA-F]{4}|.)")
_AFTER_KEY = re.compile(r"\s*:")

_CODE_START = re.compile(
    r"^\s*(?:def |class |import |from \S+ import |return\b|if \(|for \(|while \(|"
    r"#include|\$ |>>> |\.\.\. |at [\w.$]+\(|File \"|Traceback|raise |assert |"
    r"elif |else:|try:|except\b|finally:|with \S+ as |async |await |const |let |"
    r"var |function |public |private |protected |static |package |@@ |diff --git|"
    r"index [0-9a-f]|[+\-]{3} [ab]/|[-+] |\d+\s*\||[│├└┌┐┘┴┬─]|[A-Z_]{2,}=|"
    r"\[?\d{4}-\d\d-\d\d[T ]\d\d:\d\d|\[?\d\d:\d\d:\d\d|(?:DEBUG|INFO|WARN|WARNING|"
    r"ERROR|TRACE|FATAL|CRITICAL)\b[:\] ])"
)
_FENCE = re.compile(r"^\s*(?:```|~~~)")


def looks_json(text: str) -> bool:
    """Whether ``text`` starts like a JSON/Python-repr object or array."""
    stripped = text.lstrip()[:1]
    return stripped in ("{", "[")


_NON_LETTER = re.compile(r"[\W\d_]+")
_CODE_CHAR_RE = re.compile(r"[{}\[\]()<>=;$\\|`^~_/#*@&%+]")


#: Data tokens that read as one word in prose: e-mails, phone numbers, IBANs,
#: IPv4 addresses (bracketed or not).
_DATA_TOKEN = re.compile(
    r"\(?[\w.+\-]+@[\w\-]+(?:\.[\w\-]+)+\)?"
    r"|(?<![\w/])\(?\+?\d[\d() .\-]{5,}\d(?:x\d{1,6})?\)?(?![\w/])"
    r"|\(?\b[A-Z]{2}\d{2}[A-Z0-9]{10,30}\b\)?"
    r"|\b\d{1,3}(?:\.\d{1,3}){3}\b"
)


_DIGIT = re.compile(r"\d")


def has_digit(text: str) -> bool:
    """``any(ch.isdigit() for ch in text)`` at C speed: every ``\\d`` (Unicode
    Nd) is a digit to ``isdigit``; only non-ASCII text without one can still
    hold an ``isdigit``-only character (``²``, ``①``)."""
    if _DIGIT.search(text) is not None:
        return True
    return not text.isascii() and any(ch.isdigit() for ch in text)


def is_prose_line(line: str) -> bool:
    """A cheap classifier: does this line read as natural language?

    Letters must dominate (>= 60% of non-space characters, 45% on short lines such
    as address lines), code punctuation must be rare, and tokens must look like
    words rather than paths, hashes or identifiers. Lines that start like code,
    shell prompts, stack frames, diffs or log records are never prose.
    """
    if _CODE_START.match(line):
        return False
    s = line.strip()
    if "@" in s or has_digit(s):
        # an e-mail, a phone, an IBAN or an IP in a sentence is data, not code:
        # "Amanda Moore called from +1-863-550-6819x77660 yesterday."
        s = _DATA_TOKEN.sub("data", s)
    n = len(s)
    if n < 2:
        return False
    spaces = s.count(" ")
    nonspace = n - spaces
    letters = len(_NON_LETTER.sub("", s))
    if nonspace == 0:
        return False
    short = n <= 40
    if letters / nonspace < (0.45 if short else 0.6):
        return False
    code = len(_CODE_CHAR_RE.findall(s))
    if code > 2 and code / n > 0.06:
        return False
    if spaces == 0:
        # a single token: a name/place line in an address block counts
        return short and s[0].isupper() and letters == nonspace
    words = s.split()
    long_chars = sum(len(w) for w in words if len(w) > 40)
    if long_chars * 2 > n:
        return False  # mostly paths, hashes, tokens
    odd = sum(1 for w in words if "_" in w or w.count(".") >= 2)
    return odd * 4 <= len(words)


def _prose_runs(text: str, base: int, end_limit: int) -> Iterator[tuple[int, int]]:
    """Maximal runs of consecutive prose lines in ``text[base:end_limit]``."""
    in_fence = False
    run_start = -1
    run_end = -1
    pos = base
    while pos < end_limit:
        nl = text.find("\n", pos, end_limit)
        line_end = end_limit if nl < 0 else nl
        line = text[pos:line_end]
        if _FENCE.match(line):
            in_fence = not in_fence
            prose = False
        else:
            prose = not in_fence and is_prose_line(line)
        if prose:
            if run_start < 0:
                run_start = pos
            run_end = line_end
        elif line.strip():
            if run_start >= 0:
                yield run_start, run_end
            run_start = -1
        pos = line_end + 1
    if run_start >= 0:
        yield run_start, run_end


def _literal_pieces(raw: str, offset: int) -> Iterator[tuple[int, int]]:
    """Pieces of a JSON string literal's raw content between escape sequences.

    ``\\n``/``\\t`` separate pieces; ``\\uXXXX`` and ``\\"`` split words too (we
    trade a few split words for exact offsets without decoding).
    """
    pos = 0
    for m in _ESCAPE.finditer(raw):
        if m.start() > pos:
            yield offset + pos, offset + m.start()
        pos = m.end()
    if pos < len(raw):
        yield offset + pos, offset + len(raw)


def json_literals(text: str) -> Iterator[tuple[str | None, int, int]]:
    """``(key or None, start, end)`` of each string *value* literal's content.

    Works on JSON and Python-repr text without parsing it (truncated or invalid
    documents still yield their complete literals). Keys themselves are not
    yielded; a value directly after ``"key":`` carries that key.
    """
    head = text.lstrip()[:200]
    dq = head.find('"')
    sq = head.find("'")
    literal = _DQ_LITERAL if (dq >= 0 and (sq < 0 or dq < sq)) else _SQ_LITERAL
    pending_key: str | None = None
    pending_end = -1
    for m in literal.finditer(text):
        if _AFTER_KEY.match(text, m.end()):
            pending_key = m.group(1)
            pending_end = m.end()
            continue
        key = None
        if pending_key is not None:
            gap = text[_AFTER_KEY.match(text, pending_end).end() : m.start()]
            if not gap.strip():
                key = pending_key
        pending_key = None
        yield key, m.start(1), m.end(1)


def nl_spans(
    text: str, skip_keys: frozenset[str] = frozenset()
) -> list[tuple[int, int]]:
    """Spans of ``text`` that read as natural language (for NER).

    In JSON, values of ``skip_keys`` (already handled by key rules) and values
    that are a single word are not prose: NER on an isolated word is a guess.
    """
    if not text or not any(ch.isalpha() for ch in text):
        return []
    if looks_json(text):
        spans = []
        for key, start, end in json_literals(text):
            if key is not None and key.lower() in skip_keys:
                continue
            raw = text[start:end]
            if " " not in raw:
                continue
            if "\\" in raw:
                pieces = list(_literal_pieces(raw, start))
            else:
                pieces = [(start, end)]
            for p_start, p_end in pieces:
                if p_end - p_start < 2:
                    continue
                if "\n" in text[p_start:p_end]:
                    spans.extend(_prose_runs(text, p_start, p_end))
                elif is_prose_line(text[p_start:p_end]):
                    spans.append((p_start, p_end))
        return spans
    return list(_prose_runs(text, 0, len(text)))
