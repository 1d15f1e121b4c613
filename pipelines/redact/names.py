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

* multinational names (``namebank``: names-dataset's top names of 105
  countries): a given name followed by capitalised words that are surnames or
  no everyday English word ("Şadıman Kısakürek", "Trini Baró Antón", "Maja van
  Buuren"), or a single bank name that is no everyday word ("Zahra", not
  "Will", "Rose", "Page": ``lexicon.zipf_en``). CamelCase identifiers and
  all-caps words are never names here.

Also ``relabel_org``: an NER ``ORG`` whose first word is a known given name and
whose last word is no company suffix is taken as a PERSON ("Megan Payne").
"""

from __future__ import annotations

import re
from functools import lru_cache

from ctxledger.pipelines.redact.lexicon import (
    COMMON_WORDS,
    FIRST_NAMES,
    ORG_SUFFIXES,
    zipf_en,
)
from ctxledger.pipelines.redact.namebank import load_bank
from ctxledger.pipelines.redact.spans import Detection

_CAP = r"[A-Z\u00c0-\u00de][\w'’\-]*[^\W\d_]"
_NAME = _CAP + r"(?:[ \t]+" + _CAP + r"){0,2}"
_TITLE_RE = re.compile(  # not after a number: "3.6 ms. Sort" is milliseconds
    r"(?<!\d)(?<!\d[ \t])\b"
    r"(?i:mr|mrs|ms|miss|mx|dr|prof|sir|madam|mister|dame|mme|herr|frau)\.?[ \t]+"
    r"(?P<name>" + _NAME + r")"
)
_PHRASE_RE = re.compile(
    r"(?i:\bmy name is|\bname is|\bcall me|\bcalls me|\bmaiden name is|"
    r"\blast name(?: is|\?|:)|\bfirst name(?: is|\?|:)|\bsurname(?: is|:)|"
    r"(?m:^(?:full )?name:)|"
    r"\bregards,|\bsincerely,|\bcheers,|\bthanks,|\bdirected by|\bwritten by|"
    r"\bstarring|\bsaid|\bsays|\bfan of|\bmy (?:partner|wife|husband|son|daughter|"
    r"kid|friend|colleague|manager|boss)(?:'s name is|,)?)"
    r"[ \t]+(?P<name>" + _NAME + r")"
)
#: Substrings (lower case) of which every ``_PHRASE_RE`` match holds one.
_PHRASE_LITERALS = (
    "name",
    "call",
    "regards,",
    "sincerely,",
    "cheers,",
    "thanks,",
    "directed by",
    "written by",
    "starring",
    "said",
    "says",
    "fan of",
    "my partner",
    "my wife",
    "my husband",
    "my son",
    "my daughter",
    "my kid",
    "my friend",
    "my colleague",
    "my manager",
    "my boss",
)


def _may_hold_phrase(text: str) -> bool:
    """False only when ``_PHRASE_RE`` cannot match ``text``: its case-blind
    alternation is the slowest scan of ``find_names``, while substring tests
    are nearly free. Only ASCII text is judged (there ``lower()`` is exactly
    the regex's case folding; ``ſ`` or the Kelvin sign fold differently)."""
    if not text.isascii():
        return True
    lowered = text.lower()
    return any(word in lowered for word in _PHRASE_LITERALS)


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


#: A capitalised word (any script with case), with inner hyphen or apostrophe.
_BANK_CAP = r"(?:[^\W\d_a-z\u00df-\u00ff])[^\W\d_]*(?:['’\-][^\W\d_]+)*"
#: Lower-case particles inside family names ("van", "de la", "bin", "ter").
_PARTICLE = (
    r"(?:van|von|de|der|den|del|della|degli|di|da|das|do|dos|du|la|le|ter|ten|"
    r"bin|binti|ibn|al|el|y|zu|vom|af|av)"
)
_BANK_SEQ_RE = re.compile(
    r"(?<![\w@/\\.\-])(?P<name>" + _BANK_CAP + r"(?:(?:[ \t]+" + _PARTICLE + r")*"
    r"[ \t]+" + _BANK_CAP + r"){0,4})(?![\w@/\\]|\.\w)"
)
_BANK_LOW_RE = re.compile(
    r"(?<![\w@/\\.\-])(?P<a>[^\W\d_A-Z]{3,15})[ \t]+(?P<b>[^\W\d_A-Z]{3,20})"
    r"(?![\w@/\\]|\.\w)"
)
_NAME_PREFIXES = ("Mc", "Mac", "O'", "O’", "De", "Di", "Da", "La", "Le", "Van")
#: Everyday-word floors (Zipf): a bank name at or above is taken only next to
#: another name ("Will Jones"), never alone ("Will", "Rose", "Page").
_ALONE_MAX_ZIPF = 3.0
_PAIR_MAX_ZIPF = 4.5


def _cased_ok(word: str) -> bool:
    """Capitalised like a name: no inner capitals (``DeepSeek``, ``GitHub``)
    except after a hyphen/apostrophe or a Mc/O'/De prefix; not ALL CAPS."""
    core = word.rstrip("'’")
    if len(core) < 2 or core.isupper():
        return False
    inner = core[1:]
    if not any(ch.isupper() for ch in inner):
        return True
    for piece in re.split(r"['’\-]", core):
        if (
            piece
            and any(ch.isupper() for ch in piece[1:])
            and not (piece.startswith(_NAME_PREFIXES) and len(piece) > 3)
        ):
            return False
    return True


@lru_cache(maxsize=1 << 16)
def _word_kind(word: str) -> tuple[bool, bool, float]:
    """(given name, family name, English Zipf) of one capitalised word."""
    bank = load_bank()
    low = word.lower()
    first = low in FIRST_NAMES or bank.in_first(word)
    last = bank.in_last(word)
    if "-" in word and not (first or last):
        parts = [p for p in word.split("-") if p]
        first = all(bank.in_first(p) or bank.in_last(p) for p in parts)
        last = first
    return first, last, zipf_en(low)


def bank_names(text: str) -> list[Detection]:
    """PERSON spans from the multinational name bank and capitalisation.

    A run of capitalised words is trimmed to its name-like core (bank names or
    words rare in English); two or more words starting with a given name
    (or ending in a family name after a rare word) are a name; one word alone
    must be a bank name and rare in English (Zipf < 3). Lower case needs a
    given name followed by a family name, both rare in English.
    """
    bank = load_bank()
    if not bank:
        return []
    out: list[Detection] = []
    for m in _BANK_SEQ_RE.finditer(text):
        name = m.group("name")
        if " " not in name and (name.lower() in COMMON_WORDS or name.isupper()):
            continue  # "The", "Error", "HTTP": the common case, decided cheaply
        words = [
            (w.start() + m.start(), w.end() + m.start(), w.group(0))
            for w in re.finditer(r"\S+", m.group("name"))
        ]
        kinds = []
        for _, _, word in words:
            if word[:1].islower():  # a particle: "van", "de la"
                kinds.append((False, False, 0.0, True))
                continue
            if not _cased_ok(word):
                kinds.append(None)
                continue
            first, last, zipf = _word_kind(_POSSESSIVE.sub("", word))
            kinds.append((first, last, zipf, False))
        det = _bank_span(words, kinds)
        if det is None:
            for word, kind in zip(words, kinds, strict=True):
                if kind is not None:
                    det = _addressed(text, word[0], word, kind) or _subject(
                        text, word, kind
                    )
                    if det is not None:
                        break
        if det is not None:
            out.append(det)
    if not text.isupper() and " " in text:
        for m in _BANK_LOW_RE.finditer(text):
            a, b = m.group("a"), m.group("b")
            if a in COMMON_WORDS or b in COMMON_WORDS or b in _CHAT_WORDS:
                continue
            if not (bank.in_first(a) and bank.in_last(b)):
                continue
            if zipf_en(a) >= 4.0 or zipf_en(b) >= _ALONE_MAX_ZIPF:
                continue
            out.append(
                Detection(m.start(), m.end(), "PERSON", 0.55, "names:bank_lower")
            )
    return out


#: Words after which a lone given name is someone addressed or met ("Hi
#: Marissa", "cc Jenny", "met Liliana"), even when it is also an English word
#: of middling frequency (Zipf < 4.5).
_ADDRESS_WORDS = frozenset(
    """hi hello hey dear thanks thank cc ask asked tell told met meet contact
    contacted call called email emailed ping pinged dm""".split()
)
_PREV_TOKEN = re.compile(r"([A-Za-z]+)[ \t,]*$")


def _addressed(
    text: str,
    start: int,
    word: tuple[int, int, str],
    kind: tuple[bool, bool, float, bool],
) -> Detection | None:
    first, _, zipf, particle = kind
    if particle or not first or zipf >= _PAIR_MAX_ZIPF or len(word[2]) < 3:
        return None
    prev = _PREV_TOKEN.search(text, max(0, start - 16), start)
    if prev is None or prev.group(1).lower() not in _ADDRESS_WORDS:
        return None
    end = word[1]
    tail = _POSSESSIVE.search(word[2])
    if tail is not None:
        end -= len(tail.group(0))
    return Detection(word[0], end, "PERSON", 0.6, "names:bank_addressed")


#: Verbs after which a lone capitalised name is the subject ("Jeffery works
#: remotely", "Perez (x@y.z) reported the bug", "Sanchez's new address").
_SUBJECT_VERBS = frozenset(
    """called calls said says works worked lives lived visited visits reported
    reports wrote writes asked asks told tells knows knew loved loves paid pays
    sent sends emailed replied joined left met thinks wants needs booked
    bought signed approved shouted yelled whispered answered""".split()
)
#: A word English text practically never holds (Zipf below this: "Duqyaha")
#: is a subject without a name-bank entry, but only of verbs that tools and
#: programs do not take ("kubectl said", "Grafana reports" are common).
_UNKNOWN_ZIPF = 1.0
_HUMAN_VERBS = frozenset(
    "shouted yelled whispered answered replied told asked met loved".split()
)
_NEXT_TOKEN = re.compile(r"(?:['’]s\b|[ \t]*(?:\([^()\n]{1,60}\))?[ \t]+([a-z]+)\b)")


def _subject(
    text: str,
    word: tuple[int, int, str],
    kind: tuple[bool, bool, float, bool],
) -> Detection | None:
    first, last, zipf, particle = kind
    if particle or len(word[2]) < 3:
        return None
    unknown = not (first or last)
    if unknown and zipf >= _UNKNOWN_ZIPF:
        return None  # neither a bank name nor a word unknown to English
    if zipf >= (4.0 if first else 3.5):  # "Alpha works", "Echo said": words
        return None
    m = _NEXT_TOKEN.match(text, word[1])
    if m is None or (m.group(1) is not None and m.group(1) not in _SUBJECT_VERBS):
        return None
    if unknown and m.group(1) not in _HUMAN_VERBS:
        return None  # also no possessive: "Kubectl's output"
    return Detection(word[0], word[1], "PERSON", 0.6, "names:bank_subject")


def _bank_span(
    words: list[tuple[int, int, str]],
    kinds: list[tuple[bool, bool, float, bool] | None],
) -> Detection | None:
    """The name inside one run of capitalised words, if any."""

    def name_like(k: tuple[bool, bool, float, bool] | None) -> bool:
        if k is None or k[3]:
            return False
        first, last, zipf, _ = k
        return first or last or zipf < _ALONE_MAX_ZIPF

    lo, hi = 0, len(words)
    # leading/trailing words that are everyday words and no names ("Dear", "Thanks")
    while lo < hi and (
        not name_like(kinds[lo])
        or (
            kinds[lo][2] >= _PAIR_MAX_ZIPF  # type: ignore[index]
            and words[lo][2].lower() not in FIRST_NAMES
        )
    ):
        lo += 1  # "Dear", "Ask", "Will": an everyday word before the name
    while hi > lo and not name_like(kinds[hi - 1]):
        hi -= 1
    if lo >= hi:
        return None
    core = kinds[lo:hi]
    if any(k is None for k in core):
        return None
    start, end = words[lo][0], words[hi - 1][1]
    tail = _POSSESSIVE.search(words[hi - 1][2])
    if tail is not None:
        end -= len(tail.group(0))
    real = [k for k in core if k is not None and not k[3]]
    if len(real) >= 2:
        first = real[0]
        rest = real[1:]
        everyday = all(k[2] >= _PAIR_MAX_ZIPF for k in real)
        if everyday and words[lo][2].lower() not in FIRST_NAMES:
            return None  # "Mark Page", "Will Rate": words, unless NER agrees
        if first[0] and any(k[1] or k[2] < _ALONE_MAX_ZIPF for k in rest):
            return Detection(start, end, "PERSON", 0.75, "names:bank")
        if real[-1][1] and first[2] < _ALONE_MAX_ZIPF:
            return Detection(start, end, "PERSON", 0.7, "names:bank")
        return None
    first, last, zipf, _ = real[0]
    if first and zipf < _ALONE_MAX_ZIPF and len(words[lo][2]) >= 3:
        return Detection(start, end, "PERSON", 0.55, "names:bank_single")
    return None


def _everyday_opener(word: str) -> bool:
    """A sentence adverb or other everyday word before a comma, not a name.

    Given names that are also words ("Will, can you ...") stay names.
    """
    low = word.lower()
    if low in FIRST_NAMES or load_bank().in_first(word):
        return False
    return zipf_en(low) >= 3.0


def _product_after_title(m: re.Match[str]) -> bool:
    """A title-like abbreviation that names a vendor or a country, not a person.

    "MS Windows", "MS Teams", "DR Congo": an upper-case title without a period
    before a word that is not upper case too is an acronym (a shouted "MS JANE
    DOE" stays a title), and a product word after any title is a product.
    """
    title = m.group(0)[: m.start("name") - m.start()].strip()
    first = m.group("name").split()[0]
    if first.lower() in _NOT_NAMES_AFTER_TITLE:
        return True
    return title.isupper() and not title.endswith(".") and not first.isupper()


def find_names(text: str) -> list[Detection]:
    """PERSON detections from cues and the given-name lexicon."""
    out: list[Detection] = []
    # explicit cues outrank NER's label for the same words (0.9 > 0.85)
    for regex, score, tag in (
        (_TITLE_RE, 0.9, "title"),
        (_PHRASE_RE if _may_hold_phrase(text) else None, 0.9, "phrase"),
        (_VOCATIVE_RE, 0.6, "vocative"),
    ):
        if regex is None:
            continue
        for m in regex.finditer(text):
            if tag == "vocative" and _everyday_opener(m.group("name")):
                continue  # "Conversely, you can ...", "Otherwise, I ..."
            if tag == "title" and _product_after_title(m):
                continue  # "MS Windows", "Ms. Office": a vendor, not a title
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
    out.extend(bank_names(text))
    return out


def relabel_org(text: str, det: Detection) -> Detection | None:
    """A PERSON version of an NER ORG that is really a name, else None."""
    words = text[det.start : det.end].split()
    if not words or len(words) > 3:
        return None
    first = words[0].strip(".,")
    if first.lower() not in FIRST_NAMES and not (
        not first.isupper()
        and load_bank().in_first(first)
        and zipf_en(first) < _ALONE_MAX_ZIPF
    ):
        return None
    if words[-1].lower().rstrip(".,") in ORG_SUFFIXES:
        return None
    return Detection(det.start, det.end, "PERSON", 0.7, "ner:ORG->PERSON")
