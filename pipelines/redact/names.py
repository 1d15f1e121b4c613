"""Person-name cues the small NER model misses, as cheap regexes.

* titles: ``Mr./Mrs./Ms./Dr./Prof. Name`` (the title is not part of the span);
* phrases: ``my name is X``, ``call me X``, ``maiden name is X``, ``last name? X``,
  ``regards, X``, ``directed by X``;
* vocatives at the start of a sentence: ``Marisca, can I ...``;
* a known given name (``lexicon.FIRST_NAMES``) followed by capitalised surnames, or
  alone.

Also ``relabel_org``: an NER ``ORG`` whose first word is a known given name and
whose last word is no company suffix is taken as a PERSON ("Megan Payne").
"""

from __future__ import annotations

import re

from pipelines.redact.lexicon import COMMON_WORDS, FIRST_NAMES, ORG_SUFFIXES
from pipelines.redact.spans import Detection

_CAP = r"[A-Z\u00c0-\u00de][\w'’\-]*[^\W\d_]"
_NAME = _CAP + r"(?:[ \t]+" + _CAP + r"){0,2}"
_TITLE_RE = re.compile(
    r"\b(?i:mr|mrs|ms|miss|mx|dr|prof|sir|madam|mister|dame|mme|herr|frau)\.?[ \t]+"
    r"(?P<name>" + _NAME + r")"
)
_PHRASE_RE = re.compile(
    r"(?i:\bmy name is|\bname is|\bcall me|\bcalls me|\bmaiden name is|"
    r"\blast name(?: is|\?|:)|\bfirst name(?: is|\?|:)|\bsurname(?: is|:)|"
    r"\bregards,|\bsincerely,|\bcheers,|\bthanks,|\bdirected by|\bwritten by|"
    r"\bstarring|\bsaid|\bsays|\bfan of|\bmy (?:partner|wife|husband|son|daughter|"
    r"kid|friend|colleague|manager|boss)(?:'s name is|,)?)"
    r"[ \t]+(?P<name>" + _NAME + r")"
)
_VOCATIVE_RE = re.compile(
    r"(?:^|(?<=[.!?\n]\s)|(?<=\n))(?P<name>" + _CAP + r"),[ \t]+"
    r"(?=(?:can|could|would|will|please|i|you|do|did|are|is|have|thanks|thank)\b)",
    re.M,
)
_FIRST_RE = re.compile(
    r"\b(?P<first>" + _CAP + r")(?P<rest>(?:[ \t]+" + _CAP + r"){0,2})"
)


_TITLES = frozenset("mr mrs ms miss mx dr prof sir madam mister dame".split())
_POSSESSIVE = re.compile(r"['’]s?$")


def _is_name_word(word: str) -> bool:
    low = _POSSESSIVE.sub("", word.lower()).rstrip(".,")
    if low in COMMON_WORDS or low in _TITLES:
        return False
    return not (word.isupper() and len(word) <= 4)


def _trim_name(text: str, start: int, end: int) -> tuple[int, int] | None:
    """Drop trailing common words ("Lauren Thanks" -> "Lauren")."""
    words = [(m.start() + start, m.end() + start)
             for m in re.finditer(r"\S+", text[start:end])]
    while words and not _is_name_word(text[words[-1][0] : words[-1][1]]):
        words.pop()
    if not words:
        return None
    first = text[words[0][0] : words[0][1]]
    if not _is_name_word(first):
        return None
    return words[0][0], words[-1][1]


def find_names(text: str) -> list[Detection]:
    """PERSON detections from cues and the given-name lexicon."""
    out: list[Detection] = []
    # explicit cues outrank NER's label for the same words (0.9 > 0.85)
    for regex, score, tag in ((_TITLE_RE, 0.9, "title"), (_PHRASE_RE, 0.9, "phrase"),
                              (_VOCATIVE_RE, 0.6, "vocative")):
        for m in regex.finditer(text):
            span = _trim_name(text, m.start("name"), m.end("name"))
            if span:
                out.append(Detection(*span, "PERSON", score, f"names:{tag}"))
    for m in _FIRST_RE.finditer(text):
        first = m.group("first")
        if first.lower() not in FIRST_NAMES:
            continue
        rest = m.group("rest")
        end = m.end("first")
        if rest:
            span = _trim_name(text, m.start(), m.end())
            if span:
                end = span[1]
        score = 0.7 if end > m.end("first") else 0.55
        out.append(Detection(m.start(), end, "PERSON", score, "names:given"))
    return out


def relabel_org(text: str, det: Detection) -> Detection | None:
    """A PERSON version of an NER ORG that is really a name, else None."""
    words = text[det.start : det.end].split()
    if not words or len(words) > 3:
        return None
    if words[0].lower() not in FIRST_NAMES:
        return None
    if words[-1].lower().rstrip(".,") in ORG_SUFFIXES:
        return None
    return Detection(det.start, det.end, "PERSON", 0.7, "ner:ORG->PERSON")
