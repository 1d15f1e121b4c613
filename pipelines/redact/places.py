"""Place cues the small NER model misses, as cheap regexes (LOCATION).

* phrases: ``grew up in X``, ``was born in X``, ``flying to X``, ``hometown is
  X``; ``lives in X`` only after a person (``she lives in``, ``Ana lives in``:
  code "lives in Utils" too); not ``moved to X`` or ``based in X`` (agents move to
  Postgres, apps are based in React);
* labels at a line start: ``Where: X``, ``Location: X``, ``Birthplace: X``;
* ``University of X``, ``State of X``, ``Kingdom of X``: X is the place;
* ``the <nationality> government`` (or embassy, ministry...): the nationality
  stands for its country (``lexicon.DEMONYMS``).

X is one to four capitalised words (any script: ``Ústí nad Labem``), joined by the
small connectors place names use (``de``, ``nad``, ``upon``, ``van``), optionally
followed by a district number. Identifiers are not places: a CamelCase word, a
word followed by ``.py``, ``/`` or ``(`` is never taken.

Also ``recipient_name``: the name line right above a postal address; and
``org_place``: an NER ORG right after ``at <employer> in`` is the town.
"""

from __future__ import annotations

import re

from pipelines.redact.lexicon import COMMON_WORDS, DEMONYMS, ORG_SUFFIXES
from pipelines.redact.spans import Detection

_CAP = r"[A-Z\u00c0-\u00de][\w'’\-]*[^\W\d_]"
_CONNECTOR = (
    r"(?:de|del|della|di|da|do|dos|das|du|des|la|le|les|el|al|am|an|im|nad|pod|"
    r"upon|on|sur|sous|y|van|von|der|den|op|aan|of)"
)
_PLACE = (
    r"(?P<place>"
    + _CAP
    + r"(?:[ \t]+(?:"
    + _CONNECTOR
    + r"[ \t]+)?"
    + _CAP
    + r"){0,3}(?:[ \t]+\d{1,3}\b)?)(?![\w@/\\(]|\.\w)"
)
_CUE_RE = re.compile(
    r"(?i:\b(?:grew up in|born in|raised in|resident of|native of|relocated to|"
    r"hometown(?: is| of|:)?|travel(?:l?ed|l?ing)? to|flew to|flying to|"
    r"fly to))[ \t]+" + _PLACE
)
#: "lives in X" needs a person as its subject: code "lives in Utils" too.
_LIVE_RE = re.compile(
    r"(?:\b(?i:i|we|he|she|they|you|who|also|now|still|currently|and|family|"
    r"parents|mom|mum|dad|brother|sister|wife|husband|friend)|"
    + _CAP
    + r")[ \t]+(?i:(?:live|lives|lived|living|reside|resides|residing)"
    r"[ \t]+in)[ \t]+" + _PLACE
)
_LABEL_RE = re.compile(
    r"(?im:^[ \t]*(?:where|location|venue|place of birth|birthplace|hometown|city|"
    r"country|town)[ \t]*:)[ \t]*" + _PLACE
)
_OF_RE = re.compile(
    r"\b(?:University|College|City|County|State|Republic|Kingdom|Province|Port|Isle|"
    r"Bay|Gulf)[ \t]+of[ \t]+(?:the[ \t]+)?" + _PLACE
)
#: Cheap substring tests before each regex (most texts have none of them).
_CUE_HINTS = (
    "up in",
    "born in",
    "raised in",
    "resident",
    "native of",
    "relocated",
    "hometown",
    "travel",
    "flew",
    "flying",
    "fly to",
)
_LABEL_HINTS = (
    "where",
    "location",
    "venue",
    "birth",
    "hometown",
    "city",
    "country",
    "town",
)
_OF_HINTS = (
    "University",
    "College",
    "City",
    "County",
    "State",
    "Republic",
    "Kingdom",
    "Province",
    "Port",
    "Isle",
    "Bay",
    "Gulf",
)
_WORD_RE = re.compile(r"[^\W\d_][\w'’\-]*")
#: "the sudanese government", "the Peruvian embassy": a nationality adjective
#: before an organ of its state stands for the country.
_NATION_RE = re.compile(
    r"\b(?i:the)[ \t]+(?P<place>[A-Za-z]+)[ \t]+(?=(?i:government|embassy|"
    r"consulate|ministry|parliament|authorities|regime|administration)\b)"
)
_NATION_HINTS = (
    "government",
    "embass",
    "consulate",
    "ministry",
    "parliament",
    "authorities",
    "regime",
    "administration",
)


def _place_ok(value: str) -> bool:
    words = _WORD_RE.findall(value)
    if not words:
        return False
    for word in words:
        if any(ch.isupper() for ch in word[1:]) and not word.isupper():
            return False  # CamelCase: an identifier
    first = words[0].lower()
    return first not in COMMON_WORDS and not all(
        w.lower() in COMMON_WORDS for w in words if w[0].isupper()
    )


_CONNECTOR_RE = re.compile(_CONNECTOR)


def _place_end(text: str, start: int, end: int) -> int:
    """Cut a place before a connector that leads to an ordinary word ("Reykjavik
    on Monday" -> "Reykjavik") and before a trailing ordinary word."""
    words = [
        (m.group(0), start + m.end()) for m in re.finditer(r"\S+", text[start:end])
    ]
    if not words:
        return end
    stop = words[0][1]
    for i in range(1, len(words)):
        word = words[i][0]
        if _CONNECTOR_RE.fullmatch(word):
            following = words[i + 1][0] if i + 1 < len(words) else ""
            if not following or following.lower() in COMMON_WORDS:
                break
            continue
        if word.lower() in COMMON_WORDS:
            break
        stop = words[i][1]
    return stop


def find_places(text: str) -> list[Detection]:
    """LOCATION detections from place cues."""
    out: list[Detection] = []
    lowered = text.lower()
    regexes = []
    if any(hint in lowered for hint in _CUE_HINTS):
        regexes.append((_CUE_RE, 0.8, "cue"))
    if "live" in lowered or "resid" in lowered:
        regexes.append((_LIVE_RE, 0.8, "cue"))
    if ":" in text and any(hint in lowered for hint in _LABEL_HINTS):
        regexes.append((_LABEL_RE, 0.7, "label"))
    if " of " in text and any(hint in text for hint in _OF_HINTS):
        regexes.append((_OF_RE, 0.8, "of"))
    for regex, score, tag in regexes:
        for m in regex.finditer(text):
            if _place_ok(m.group("place")):
                start = m.start("place")
                end = _place_end(text, start, m.end("place"))
                out.append(Detection(start, end, "LOCATION", score, f"places:{tag}"))
    if any(hint in lowered for hint in _NATION_HINTS):
        for m in _NATION_RE.finditer(text):
            if m.group("place").lower() in DEMONYMS:
                out.append(
                    Detection(*m.span("place"), "LOCATION", 0.6, "places:nation")
                )
    return out


#: What comes before an employer-then-city pair: "at Kpmg in ", "for Acme Ltd,
#: in ". The employer is one to four capitalised words.
_AT_ORG_IN = re.compile(
    r"\b(?:at|for|with|joined)[ \t]+"
    + _CAP
    + r"(?:[ \t]+(?:&[ \t]+)?"
    + _CAP
    + r"){0,3}"
    r",?[ \t]+in[ \t]+$"
)


def org_place(text: str, det: Detection) -> Detection | None:
    """A LOCATION version of an NER ORG that follows ``at <Employer> in`` ("the
    following year at Kpmg in CHISHOLM": the small model reads an upper-case
    town as an ORG), else None."""
    if det.start < 6 or "in" not in text[max(0, det.start - 4) : det.start]:
        return None
    if not _AT_ORG_IN.search(text, max(0, det.start - 120), det.start):
        return None
    value = text[det.start : det.end]
    if not _place_ok(value) or value.lower().rstrip(".") in ORG_SUFFIXES:
        return None
    if value.split()[-1].lower().rstrip(".,") in ORG_SUFFIXES:
        return None
    return Detection(det.start, det.end, "LOCATION", 0.8, "ner:ORG->LOCATION")


_LABEL_PREFIX = re.compile(r"^[^\w]*(?:(?P<label>[\w /.\-]{1,40}):)?\s*")
_NAME_LABEL = re.compile(
    r"(?i)address|ship|bill|deliver|mail|recipient|name|attn|attention|c/o|\bto\b"
)
_NAME_WORD = re.compile(r"[^\W\d_][^\W\d_'’.\-]*(?:['’\-][^\W\d_]+)*\.?")


def recipient_name(text: str, address_start: int) -> Detection | None:
    """The name line right above an address that starts a line:
    ``billing address: tracy sukhorukova`` / ``Ship to: Ana Díaz`` then
    ``23 8 wressle road``. Two to four words, no digits, not a company."""
    line_start = text.rfind("\n", 0, address_start) + 1
    if text[line_start:address_start].strip(" \t?*-•>"):
        return None  # the address does not start its line
    if line_start == 0:
        return None
    prev_start = text.rfind("\n", 0, line_start - 1) + 1
    line = text[prev_start : line_start - 1]
    m = _LABEL_PREFIX.match(line)
    if m is None:
        return None
    label = m.group("label")
    if label is not None and not _NAME_LABEL.search(label):
        return None
    rest = line[m.end() :].rstrip(" \t,")
    words = rest.split()
    if not 2 <= len(words) <= 4 or len(rest) > 60:
        return None
    if not all(_NAME_WORD.fullmatch(w) for w in words):
        return None
    lowered = [w.lower().rstrip(".") for w in words]
    if any(w in ORG_SUFFIXES for w in lowered):
        return None
    if all(w in COMMON_WORDS for w in lowered):
        return None
    start = prev_start + m.end()
    return Detection(start, start + len(rest), "PERSON", 0.7, "places:recipient")
