"""Person-name cues the small NER model misses, as cheap regexes.

* titles: ``Mr./Mrs./Ms./Dr./Prof. Name`` (the title is not part of the span);
* phrases: ``my name is X``, ``call me X``, ``maiden name is X``, ``last name? X``,
  ``regards, X``, ``directed by X``;
* vocatives at the start of a sentence: ``Marisca, can I ...``;
* a known given name (``lexicon.FIRST_NAMES``) followed by capitalised surnames, or
  alone;
* lower case: after ``ms.``/``dr.``/``my name is``/``call me`` (``ms. wijtze``,
  ``my name is tracy sukhorukova``, up to the first ordinary word), and known given
  names that are no everyday word, language or product (``john``; not ``julia``,
  ``ada``, ``hugo``), never inside a path, an e-mail or an identifier;
* possessors of relatives: ``Sumaya's kid``, ``Oyelaran's wife``;
* roles the syntax gives away: ``ex-Marine X``, the recipient in ``gave x his
  ...``/``told X her ...``, an artist's period ``(than) early X.`` or ``the late
  X.`` at the end of a phrase (not ``in early March``, not ``early React builds``).

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
#: A lower-case name word: letters (any script), apostrophes and hyphens inside.
_LOW = r"[^\W\d_A-Z][^\W\d_]*(?:['’\-][^\W\d_]+)*"
_NOT_AFTER = r"(?![\w@/\\]|\.\w)"
#: Lower-case names after an explicit cue: "ms. wijtze", "my name is tracy
#: sukhorukova", "her maiden name is kowalski".
_LOW_TITLE_RE = re.compile(
    r"(?<![\w.])(?i:mr|mrs|ms|dr|prof)\.[ \t]*(?P<name>"
    + _LOW
    + r"(?:[ \t]+"
    + _LOW
    + r")?)"
    + _NOT_AFTER
)
_LOW_PHRASE_RE = re.compile(
    r"(?i:\b(?:my|his|her|their|your|our|first|last|full|maiden|middle|legal|real|"
    r"nick)[ \t]?name(?:'s|[ \t]+is|[ \t]*:)|\bcall me|\bi am called|\bi'm called)"
    r"[ \t]+(?P<name>" + _LOW + r"(?:[ \t]+" + _LOW + r"){0,2})" + _NOT_AFTER
)
#: A known given name written in lower case ("john had given ...").
_LOW_GIVEN_RE = re.compile(r"(?<![\w@/\\.\-])(?P<first>[a-z]{3,12})" + _NOT_AFTER)
#: Given names that are also words, products or places, never taken lower case.
_LOWER_AMBIGUOUS = frozenset(
    """ada amber aurora ava ben carol chen eli eva frank hans hugo ian jack jasmine
    jean jesus julia kay kim leo lily lina mario mia milan nils nora robin rosa ruth
    victor victoria wei yan tom bruno magnus hannah""".split()
)
#: Lower-case words after "ms." that name products, not people ("ms. office").
_NOT_NAMES_AFTER_TITLE = frozenset(
    "office word excel teams access edge dos windows outlook project paint store "
    "visio azure sql".split()
)
#: Chat words that end a lower-case name ("call me katy but u ...").
_CHAT_WORDS = frozenset(
    "u ur lol pls plz thx btw im its ok idk tbh asap and or but so".split()
)
_LOWER_GIVEN = FIRST_NAMES - _LOWER_AMBIGUOUS
_TITLE_HINTS = ("mr.", "ms.", "mrs.", "dr.", "prof.")
_LOWER_WORD = re.compile(r"\b[a-z]{3,12}\b")
#: "Sumaya's kid": a capitalised word owning a relative is a person.
_KIN_RE = re.compile(
    r"\b(?P<name>" + _CAP + r")['’]s[ \t]+(?=(?:kids?|sons?|daughters?|wife|husband|"
    r"mom|mum|mother|dad|father|brothers?|sisters?|boyfriend|girlfriend|fianc[ée]e?|"
    r"grandma|grandmother|grandpa|grandfather|aunt|uncle|cousins?|nephews?|nieces?|"
    r"parents|children|child|baby|funeral|wedding|birthday)\b)"
)


#: "ex-Zombie Fukunaga", "ex-Marine Ana Ruiz": a former member or holder of a
#: role, named right after it.
_EX_RE = re.compile(r"\bex-" + _CAP + r"[ \t]+(?P<name>" + _NAME + r")")
#: "gave shamir his keys", "told Ana her flight": the indirect object of a verb
#: of giving or telling, followed by a possessive, is a person (any case).
_GIVE_RE = re.compile(
    r"\b(?i:gave|given|give|gives|giving|told|tell|tells|telling|sent|send|sends|"
    r"showed|shown|show|shows|offered|offer|offers|handed|hand|hands|lent|lend|"
    r"owe|owes|owed|emailed|texted|promised|paid|bought|asked|ask|asks)[ \t]+"
    r"(?P<name>[^\W\d_][^\W\d_'’\-]*[^\W\d_])[ \t]+(?=(?i:his|her)\b)"
)
#: Words that are no names in that slot: pronouns, relatives, roles.
_NOT_RECIPIENTS = frozenset(
    """him her them us me you it one everyone everybody someone somebody anyone
    anybody nobody noone each all both either neither others people folks guys
    mom mum mother dad father brother sister wife husband son daughter kid kids
    child baby boyfriend girlfriend friend uncle aunt cousin nephew niece grandma
    grandpa grandmother grandfather customer client patient student teacher
    doctor nurse boss manager team staff guest driver owner caller buyer seller
    tenant landlord neighbor neighbour colleague coworker partner lawyer agent bot
    assistant user users visitor member employee officer clerk pilot passenger
    mister madam sir""".split()
)
#: "than early Kasparian?", "the late Okafor.": an artist's period or a person
#: who died, as the last word of a phrase; not after a preposition of time
#: ("in early March", "since late Friday") and not before a noun ("early React
#: versions").
_PERIOD_RE = re.compile(
    r"\b(?i:early|late)[ \t]+(?P<name>" + _CAP + r")(?=[ \t]*(?:[?!.,;:)]|$))",
    re.M,
)
_PREV_WORD = re.compile(r"([A-Za-z]+)[ \t]+$")
_TIME_PREPOSITIONS = frozenset(
    """in since until till by from during before after through around of for as
    at on to into""".split()
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
    words = [
        (m.start() + start, m.end() + start)
        for m in re.finditer(r"\S+", text[start:end])
    ]
    while words and not _is_name_word(text[words[-1][0] : words[-1][1]]):
        words.pop()
    if not words:
        return None
    first = text[words[0][0] : words[0][1]]
    if not _is_name_word(first):
        return None
    return words[0][0], words[-1][1]


def _lower_name_end(text: str, start: int, end: int) -> int | None:
    """End of a lower-case name: its words up to the first ordinary word ("katy
    but u" -> "katy"); None when the first word is ordinary or a product."""
    stop = start
    for m in re.finditer(r"\S+", text[start:end]):
        word = m.group(0).lower()
        if (
            word in COMMON_WORDS
            or word in _CHAT_WORDS
            or word in _TITLES
            or word in _NOT_NAMES_AFTER_TITLE
            or len(word) < 2
        ):
            break
        stop = start + m.end()
    return stop if stop > start else None


def _lower_case_names(text: str) -> list[Detection]:
    """Names written in lower case (after cues, or known given names) and
    possessors of relatives; each regex runs only when a cheap substring test
    says it can match."""
    out: list[Detection] = []
    lowered = text.lower()
    cues = []
    if "." in text and any(t in lowered for t in _TITLE_HINTS):
        cues.append((_LOW_TITLE_RE, "title"))
    if "name" in lowered or "call" in lowered:
        cues.append((_LOW_PHRASE_RE, "phrase"))
    for regex, tag in cues:
        for m in regex.finditer(text):
            end = _lower_name_end(text, m.start("name"), m.end("name"))
            if end is not None:
                out.append(
                    Detection(m.start("name"), end, "PERSON", 0.85, f"names:{tag}")
                )
    if "'s " in text or "’s " in text:
        for m in _KIN_RE.finditer(text):
            if _is_name_word(m.group("name")):
                out.append(Detection(*m.span("name"), "PERSON", 0.7, "names:kin"))
    if not text.isupper() and not _LOWER_GIVEN.isdisjoint(_LOWER_WORD.findall(text)):
        for m in _LOW_GIVEN_RE.finditer(text):
            if m.group("first") in _LOWER_GIVEN:
                out.append(Detection(*m.span(), "PERSON", 0.55, "names:given_lower"))
    return out


def _recipient_ok(word: str) -> bool:
    low = word.lower()
    return (
        low not in COMMON_WORDS
        and low not in _NOT_RECIPIENTS
        and low not in _CHAT_WORDS
        and not (word.isupper() and len(word) <= 4)
    )


def _role_cue_names(text: str) -> list[Detection]:
    """Names the syntax gives away: ``ex-<Role> Name``, the recipient of ``gave
    X his ...``, an artist's ``early X``; each regex behind a substring test."""
    out: list[Detection] = []
    if "ex-" in text:
        for m in _EX_RE.finditer(text):
            span = _trim_name(text, m.start("name"), m.end("name"))
            if span:
                out.append(Detection(*span, "PERSON", 0.7, "names:ex"))
    lowered = text.lower()
    if " his " in lowered or " her " in lowered:
        for m in _GIVE_RE.finditer(text):
            if _recipient_ok(m.group("name")):
                out.append(Detection(*m.span("name"), "PERSON", 0.6, "names:given_to"))
    if "early " in lowered or "late " in lowered:
        for m in _PERIOD_RE.finditer(text):
            name = m.group("name")
            if name.lower() in COMMON_WORDS or not _is_name_word(name):
                continue
            prev = _PREV_WORD.search(text, max(0, m.start() - 20), m.start())
            if prev is not None and prev.group(1).lower() in _TIME_PREPOSITIONS:
                continue
            out.append(Detection(*m.span("name"), "PERSON", 0.6, "names:period"))
    return out


def find_names(text: str) -> list[Detection]:
    """PERSON detections from cues and the given-name lexicon."""
    out: list[Detection] = []
    # explicit cues outrank NER's label for the same words (0.9 > 0.85)
    for regex, score, tag in (
        (_TITLE_RE, 0.9, "title"),
        (_PHRASE_RE, 0.9, "phrase"),
        (_VOCATIVE_RE, 0.6, "vocative"),
    ):
        for m in regex.finditer(text):
            span = _trim_name(text, m.start("name"), m.end("name"))
            if span:
                out.append(Detection(*span, "PERSON", score, f"names:{tag}"))
    out.extend(_lower_case_names(text))
    out.extend(_role_cue_names(text))
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
