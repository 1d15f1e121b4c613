"""Names written in another script inside Latin-script text.

"The meeting with सरल तिवारीजी in अहमदाबाद was moved": the English spaCy model,
the name bank (Latin script only) and the gazetteer (Latin-script alternate
names only) see nothing in the Devanagari words, so they stayed verbatim. In a
line whose grammar is English (two or more everyday English words), a short
run of words in a
letter script with spaces between words (Indic scripts, Arabic, Hebrew,
Cyrillic, Greek) is nearly always a proper name copied in its own spelling.
A run right after a locative word ("in", "from", "visited") is typed
LOCATION, any other PERSON.

Lines without English grammar (a Hindi message, a Russian log, with maybe one
English term in it) are left to the other detectors: there the script says
nothing about names. CJK and
Thai write without spaces between words, so a "run" there is a sentence; they
are not handled here.
"""

from __future__ import annotations

import re

from ctxledger.pipelines.redact.lexicon import zipf_en
from ctxledger.pipelines.redact.spans import Detection

#: Letters (and combining vowel signs) of the scripts handled here.
_LETTERS = (
    r"\u0370-\u03ff"  # Greek
    r"\u0400-\u04ff"  # Cyrillic
    r"\u0590-\u05ff"  # Hebrew
    r"\u0600-\u06ff"  # Arabic
    r"\u0900-\u0dff"  # Devanagari, Bengali, Gurmukhi, Gujarati, Oriya, Tamil,
    # Telugu, Kannada, Malayalam, Sinhala
)
_WORD = r"[" + _LETTERS + r"]+(?:['’\-][" + _LETTERS + r"]+)*"
#: One to four such words separated by blanks, not glued to Latin letters or digits.
#: Only blanks and ordinary punctuation may touch a run ("ן¿½" is mojibake).
_RUN_RE = re.compile(
    r"(?<![^\s(\[\"'“‘,;:])"
    + _WORD
    + r"(?:[ \t]+"
    + _WORD
    + r"){0,3}(?=[\s.,;:!?)\]\"'”’]|$)"
)
_HINT_RE = re.compile(r"[" + _LETTERS + r"]")
_LATIN_WORD_RE = re.compile(r"(?<![\w'])[A-Za-z]+(?:'[a-z]+)?(?![\w])")
_LOCATIVE_RE = re.compile(
    r"(?i:\b(?:in|from|to|at|near|visited|visit|visiting|into|via)[ \t]+)$"
)
#: Everyday English words a line needs for its grammar to count as English.
_MIN_ENGLISH_WORDS = 2
_ENGLISH_ZIPF = 4.0
_MAX_WORDS = 4


def foreign_script_names(text: str) -> list[Detection]:
    """PERSON/LOCATION runs of another script embedded in Latin-script lines."""
    if not _HINT_RE.search(text):
        return []
    out: list[Detection] = []
    line_cache: dict[int, bool] = {}
    for m in _RUN_RE.finditer(text):
        if len(m.group(0).split()) > _MAX_WORDS or len(m.group(0)) < 2:
            continue
        line_start = text.rfind("\n", 0, m.start()) + 1
        english = line_cache.get(line_start)
        if english is None:
            line_end = text.find("\n", m.end())
            line = text[line_start : len(text) if line_end < 0 else line_end]
            english = _english_line(line)
            line_cache[line_start] = english
        if not english:
            continue
        before = text[max(line_start, m.start() - 16) : m.start()]
        kind = "LOCATION" if _LOCATIVE_RE.search(before) else "PERSON"
        out.append(Detection(m.start(), m.end(), kind, 0.6, "names:script"))
    return out


def _english_line(line: str) -> bool:
    """Whether ``line`` holds at least two everyday English words."""
    count = 0
    for m in _LATIN_WORD_RE.finditer(line):
        if zipf_en(m.group(0).lower()) >= _ENGLISH_ZIPF:
            count += 1
            if count >= _MIN_ENGLISH_WORDS:
                return True
    return False
