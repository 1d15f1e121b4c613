"""Precision filter for technical text: NER names that are headings, code or terms.

The small spaCy model reads any capitalised word as a name. In runbooks, docs and
tool outputs that turns headings, role titles, types and products into
placeholders (``## Rate limits`` -> ``## <PERSON:...> limits``, ``Steps for
Customer Liaison`` -> ``<PERSON:...>``), and evidence that cannot be read is
worthless. ``drop_technical`` removes such PERSON/LOCATION candidates. It only
judges *NER* candidates (recognizer ``ner:*``): the cue rules (titles, "my name
is", "said X", JSON keys, addresses) carry their own evidence and always stay.

A candidate is dropped when the context says capitalisation carries no name
evidence, and no token of it is a known given name (``lexicon.FIRST_NAMES``) or
shares a token with a well-evidenced name elsewhere in the same text:

* **code**: inside backticks or a fenced code block, or an identifier (snake_case,
  camelCase, CamelCase type, dotted path, ``Name(``/``Name[``), or a bare word on
  a code line (numbered listing, code punctuation) outside a string literal;
* **heading**: a Markdown heading, a front-matter ``title:``, an admonition title,
  a table header row, or a run of three or more capitalised ordinary words
  ("Subject Matter Expert", "Container Network Interface");
* **not a place**: a one-word LOCATION that is a common English word and not in
  the GeoNames gazetteer nor an ISO 3166-2 region (``gazetteer``, when
  installed): "in Slack" goes, "in Scotland" and "in Yorkshire" stay (round 5);
* **ordinary words** (PERSON only: place names are frequent words too): every
  token is an ALL-CAPS acronym (``IC``, ``MIT``) or a common English word
  (``wordfreq`` Zipf frequency >= ``COMMON_ZIPF``), the first is no given name
  in the name bank (``namebank``, so "Bob is..." and "Sherlock Holmes" stay), it
  is no initials-and-name shape ("J.R. Smith", round 5), and the span is a
  phrase ("Customer Liaison", "Dark Mode"), sentence-initial ("Keys are
  revoked", "Etiquette dictates") or lower case;
* **technology name**: the word also occurs lower case inside an identifier, path
  or URL of the same text (``Prometheus`` beside ``kube-prometheus``, ``Clang``
  beside ``libclang``), which people's names practically never do, or stands
  before a release number ("Git 2.37.2"), or sits in a list with identifiers
  ("TensorFlow, Theano, Caffe");
* **words, not names** (round 3): a capitalised everyday word the same text also
  writes in lower case ("this License" beside "licenses"), a lower-case NER
  PERSON with no name-bank hit, a lower-case NER LOCATION of English words that
  no gazetteer entry matches ("the moor").

Pure functions over the text and the candidates; the word frequencies
(``lexicon.zipf_en``), the name bank and the gazetteer load on the first
candidate that needs them, and each rule degrades to "keep" without them.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterable, Iterator, Sequence
from functools import lru_cache

from ctxledger.pipelines.redact.lexicon import FIRST_NAMES, zipf_en
from ctxledger.pipelines.redact.spans import Detection

#: Recognizers whose candidates are judged (no context cue of their own).
_JUDGED_PREFIXES = (
    "ner:",
    "names:bank",
    "names:given",
    "places:gazetteer",
    "places:move",
    "names:script",
)
#: Entity types this filter judges.
NAME_TYPES = frozenset({"PERSON", "LOCATION"})
#: wordfreq Zipf value from which a word is "common English" (3 = once per
#: million words: "etiquette" 3.4, "liaison" 3.6, "customer" 4.6).
COMMON_ZIPF = 3.0
#: Small words allowed inside title-case phrases ("Steps for Customer Liaison").
_CONNECTORS = frozenset(
    "a an and at by de del der for in of on or the to van von with".split()
)
#: A bank given name at least this frequent in English is no name evidence in
#: technical text ("display" 4.6, "pony" 3.8 stay names; "kafka" 3.0 does).
_STRONG_ZIPF = 4.0
#: Function words that a title capitalises and a name never holds.
_TITLE_CONNECTORS = frozenset(
    "a an and at by for in of on or the to with from into over under".split()
)
_TOKEN_RE = re.compile(r"[^\W\d_][\w'’\-]*")
_HEADING_RE = re.compile(
    r"^(?:\s{0,3}#{1,6}\s|\s*(?:title|linkTitle|description)\s*:|\s*[!?]{3}\+?\s*\w+)",
    re.I,
)
_TABLE_SEP_RE = re.compile(r"^\s*\|?\s*:?-{3,}:?\s*(?:\|\s*:?-{3,}:?\s*)*\|?\s*$")
_NUMBERED_LINE_RE = re.compile(r"^\s*\d+(?:\t|[|:]\s)")
_CODE_PUNCT_RE = re.compile(
    r"[{}]|;\s*$|=>|==|!=|->|::|\)\s*:\s*$"
    r"|^\s*(?:def|class|import|fn|let|const|var|return)\b"
)
_COLUMN_GAP_RE = re.compile(r"\S {2,}(?=\S)")
_IDENT_BEFORE = frozenset("._$@/\\")
_SENTENCE_END = frozenset(".!?:;")
#: A line start, after a list marker or a code comment marker ("# Display").
_LIST_MARKER_RE = re.compile(
    r"(?:^|\n)[ \t]*(?:[*+>\-]|\d+[.)]|#+|//|--|;+)?[ \t]*[\"'(\[]?$"
)
#: Head nouns that make the capitalised word before them a product or tool
#: ("Grafana dashboard", "Slack channel", "Loki query", "Kubernetes cluster"):
#: one sense per text, so every occurrence of that word is a product there.
_TECH_HEAD = (
    r"(?:'s)?[ \t]+(?i:dashboards?|query|queries|clusters?|graphs?|library|"
    r"libraries|api|apis|servers?|channels?|rooms?|bots?|instances?|plugins?|"
    r"packages?|modules?|sdk|cli|integrations?|workspaces?|alerts?|metrics?|"
    r"logs?|console|ui|app|apps|operator|pods?|nodes?|namespaces?|containers?|"
    r"images?|repository|repo|docs|documentation|account|tokens?|webhooks?|"
    r"search|database|service|stack|version|release|config|configuration|"
    r"scripts?|compilers?|language|files?|formats?|runtime|interpreter|"
    r"frameworks?|engine|backends?|drivers?|clients?|extensions?|commands?|"
    r"syntax|functions?|tools?|pipelines?|workers?|jobs?|tables?|schemas?|"
    r"commits?|branch|builds?|runners?|sql|syntax|support|users?|projects?)\b"
)
_TECH_HEAD_RE = re.compile(_TECH_HEAD)
#: Someone addressed by name: "Bob, please investigate", "Anne, can you".
_VOCATIVE_AFTER_RE = re.compile(
    r",[ \t]+(?i:please|can|could|would|will|i|you|do|did|are|have|thanks|"
    r"thank|we|let's|go|take)\b"
)
_POSSESSIVE_RE = re.compile(r"['’]s?$")
_NAME_PREFIX_RE = re.compile(r"^(?:Mc|Mac|O'|O’|De|Di|Da|La|Le|Van|Von)[A-Z]")


@lru_cache(maxsize=65536)
def is_common_word(word: str) -> bool:
    """Whether ``word`` (any case) is an ordinary English word, not a given name."""
    low = _POSSESSIVE_RE.sub("", word.lower())
    return low not in FIRST_NAMES and zipf_en(low) >= COMMON_ZIPF


def _is_acronym(word: str) -> bool:
    letters = [c for c in word if c.isalpha()]
    return len(letters) >= 2 and all(c.isupper() for c in letters)


def is_identifier(word: str) -> bool:
    """snake_case, camelCase / CamelCase types, dotted paths; not McDonald."""
    if "_" in word or "." in word.strip("."):
        return True
    if "-" in word or "'" in word or "’" in word:  # ex-Zombie, O'Neil: per piece
        return any(is_identifier(p) for p in re.split(r"[-'’]", word) if p)
    inner = word[1:]
    if any(c.isupper() for c in inner) and any(c.islower() for c in word):
        return not _NAME_PREFIX_RE.match(word) or sum(c.isupper() for c in inner) > 1
    return False


#: A lower-case word on its own: not part of a path, identifier or URL.
_LOWER_WORD_RE = re.compile(r"(?<![\w./\\\-@#$])[a-z][a-z'’]+(?![\w/\\\-@(]|\.\w)")


class _Context:
    """Per-text facts the rules share, built lazily once per text."""

    def __init__(self, text: str) -> None:
        self.text = text
        self._line_starts: list[int] | None = None
        self._fences: list[int] | None = None
        self._technical: bool | None = None
        self._lower_words: frozenset[str] | None = None

    def lower_words(self) -> frozenset[str]:
        """Lower-case words standing alone in the text (not in paths/identifiers)."""
        if self._lower_words is None:
            self._lower_words = frozenset(_LOWER_WORD_RE.findall(self.text))
        return self._lower_words

    def technical(self) -> bool:
        """Whether the whole text is technical (see ``_is_technical_text``)."""
        if self._technical is None:
            self._technical = _is_technical_text(self.text)
        return self._technical

    def line_bounds(self, pos: int) -> tuple[int, int]:
        if self._line_starts is None:
            self._line_starts = [0] + [m.end() for m in re.finditer(r"\n", self.text)]
        i = bisect.bisect_right(self._line_starts, pos) - 1
        start = self._line_starts[i]
        end = self.text.find("\n", start)
        return start, len(self.text) if end < 0 else end

    def in_fence(self, pos: int) -> bool:
        if self._fences is None:
            self._fences = [
                m.start() for m in re.finditer(r"^\s*(?:```|~~~)", self.text, re.M)
            ]
        return bisect.bisect_right(self._fences, pos) % 2 == 1

    def next_line(self, line_end: int) -> str:
        if line_end >= len(self.text):
            return ""
        end = self.text.find("\n", line_end + 1)
        return self.text[line_end + 1 : len(self.text) if end < 0 else end]


def _in_backticks(line: str, offset: int) -> bool:
    return line.count("`", 0, offset) % 2 == 1


def _in_string_literal(line: str, offset: int) -> bool:
    before = line[:offset]
    return before.count('"') % 2 == 1 or before.count("'") % 2 == 1


def _code_context(ctx: _Context, det: Detection, words: list[str]) -> bool:
    text = ctx.text
    if any(is_identifier(w) for w in words):
        return True
    value = text[det.start : det.end]
    if "." in value and not any(c.isspace() for c in value) and _code_name(value):
        return True  # "Node.js", "socket.io": the token splits them in two words
    before = text[det.start - 1] if det.start else ""
    after = text[det.end : det.end + 2]
    if (
        before in _IDENT_BEFORE
        or after[:1] in ("(", "[", "_", "<")
        or (after[:1] == "." and after[1:2].isalnum())
    ):
        return True
    if ctx.in_fence(det.start):
        return True
    line_start, line_end = ctx.line_bounds(det.start)
    line = text[line_start:line_end]
    offset = det.start - line_start
    if _in_backticks(line, offset):
        return True
    code_line = _NUMBERED_LINE_RE.match(line) or _CODE_PUNCT_RE.search(line)
    return bool(code_line) and not _in_string_literal(line, offset)


def _heading_context(ctx: _Context, det: Detection) -> bool:
    line_start, line_end = ctx.line_bounds(det.start)
    line = ctx.text[line_start:line_end]
    if _HEADING_RE.match(line):
        return True
    if line.count("|") >= 2 and _TABLE_SEP_RE.match(ctx.next_line(line_end)):
        return True
    if len(_COLUMN_GAP_RE.findall(line)) >= 3:  # aligned columns: a header row
        return True
    return _title_case_run(ctx.text, det, line_start, line_end)


def _title_case_run(text: str, det: Detection, line_start: int, line_end: int) -> bool:
    """The span sits in 3+ capitalised words, mostly ordinary ones: a term/title."""
    run: list[str] = []
    found = False
    last_end = -1
    for m in _TOKEN_RE.finditer(text, line_start, line_end):
        word = m.group(0)
        if run and text[last_end : m.start()].strip(" \t"):  # punctuation: new run
            if found:
                break
            run = []
        last_end = m.end()
        if word[0].isupper():
            run.append(word)
            if m.start() < det.end and det.start < m.end():
                found = True
            continue
        if word.lower() in _CONNECTORS and run:
            continue
        if found:
            break
        run = []
    if not found or len(run) < 3:
        return False
    return all(
        _is_acronym(w)
        or is_common_word(w)
        and not _given_name(w)
        and not (_places_known() and _is_place(w))
        for w in run
    )  # "New Orleans Square", "Lil Sly": a place or a name is in the run


def _sentence_initial(text: str, start: int) -> bool:
    head = text[max(0, start - 12) : start]
    stripped = head.rstrip(" \t\"'(“[*_")
    if not stripped:
        return start < 12 or head == text[:start]
    if stripped[-1] in _SENTENCE_END:
        return True
    return bool(_LIST_MARKER_RE.search(head))


def _ordinary_words(text: str, det: Detection, words: list[str]) -> bool:
    if det.entity_type != "PERSON":  # place names are frequent words too, so:
        if all(_is_acronym(w) and len(w) >= 3 and is_common_word(w) for w in words):
            return True  # shouted stop words ("THE")
        return (  # a one-word "place" that is an English word and no known place
            len(words) == 1
            and is_common_word(words[0])
            and not _given_name(words[0])  # NER calls "Nick", "Percy" GPE too
            and _places_known()
            and not _known_place(words[0])  # "Scotland", "Bavaria": regions
        )
    content = [w for w in words if w.lower() not in _CONNECTORS]
    if not content:
        return True
    if not all(_is_acronym(w) or is_common_word(w) for w in content):
        return False
    if all(_is_acronym(w) for w in content):
        return not _relabelled(det)
    if _initials_name(text[det.start : det.end]):
        return False  # "J.R. Smith": initials are single letters, common "words"
    if not _is_acronym(content[0]) and _given_name(content[0]):
        return False  # "Bob is...", "Sherlock Holmes", "dana"
    if len(content) > 1 and _hyphen_given(content[0]):
        return False  # "Sung-min Cho", "Jean-Luc Picard": wordfreq splits them
    if len(content) > 1 or not content[0][0].isupper():
        return True
    return _sentence_initial(text, det.start) or _no_bank_word(content[0])


def _no_bank_word(word: str) -> bool:
    """An everyday English word (Zipf >= 4) that no country's name bank holds
    as a given or family name ("Understood", "Optional"): a capital mid-line
    (text without punctuation, "Anne Understood") is no name evidence."""
    bank = _bank()
    if bank is None:
        return False
    core = _POSSESSIVE_RE.sub("", word)
    return (
        zipf_en(core.lower()) >= _STRONG_ZIPF
        and not bank.in_first(core)
        and not bank.in_last(core)
    )


def _lower_case_twin(ctx: _Context, det: Detection, words: list[str]) -> bool:
    """One capitalised common word that the same text also writes lower case.

    Licences, manuals and books capitalise defined terms and nouns mid-sentence
    ("this License", "the Document", "in Normal mode") and NER reads them as
    names; when the text also uses the word in lower case ("a license", "normal
    text") it is a word there, not a name. Words that are given names somewhere
    (lexicon or name bank: "Pearl", "Grace", "Rich") stay, and a LOCATION is
    judged so only in technical text ("Nice" the city beside "nice").
    """
    if len(words) != 1 or not words[0][:1].isupper() or words[0].isupper():
        return False
    if det.entity_type != "PERSON" and not ctx.technical():
        return False
    word = _POSSESSIVE_RE.sub("", words[0])
    low = word.lower()
    if not is_common_word(word) or _given_name(word):
        return False
    lower = ctx.lower_words()  # built once per text, only when needed
    return any(low + end in lower for end in _INFLECTIONS)


#: Endings under which a lower-case twin counts ("License" beside "licenses").
_INFLECTIONS = ("", "s", "es", "d", "ed", "ing")


def _no_name_word(det: Detection, words: list[str]) -> bool:
    """An NER PERSON in lower case that no country uses as a name.

    Without capitals NER's guess rests on nothing but the word's position ("the
    lantern", a Latin phrase). Such a candidate goes when none of its words is a
    given name (lexicon or name bank) or a family name (name bank) anywhere: the
    bank holds about a million names of 105 countries, so a real name nearly
    always has a hit ("justin bieber", "okafor"). Capitalised words are not
    judged so: famous surnames are frequent English words too ("Hitler").
    """
    if det.entity_type != "PERSON":
        return False
    if not det.recognizer.removeprefix("repeat:").startswith("ner:PERSON"):
        return False
    content = [w for w in words if w.lower() not in _CONNECTORS]
    if not content:
        return False
    if not all(w.islower() for w in content):
        return False
    bank = _bank()
    if bank is None:
        return False
    return not any(
        w.lower() in FIRST_NAMES
        or bank.in_first(_POSSESSIVE_RE.sub("", w))
        or bank.in_last(_POSSESSIVE_RE.sub("", w))
        for w in content
    )


def _no_place_word(det: Detection, words: list[str]) -> bool:
    """An NER LOCATION in lower case that no gazetteer knows as a place.

    The LOCATION twin of ``_no_name_word``. Without capitals NER's GPE/LOC
    guess rests on the word's position alone, and old or literary prose (a book
    grepped in a CTF tool output, a lower-case tweet) is full of positions
    where places stand ("over the moor", "across the heath"). Such a candidate
    goes when every word of it is an English word (``wordfreq`` knows it, at
    any frequency: a misspelt or foreign token is no evidence either way) and
    neither the span nor any run of its words is a GeoNames city, country,
    capital, US state or continent: real places written in lower case are
    nearly always there ("london", "new york", "abq new mexico"). Words of the
    given-name lexicon never reach this rule (``is_technical`` keeps them), and
    capitalised words are not judged so: the gazetteer lacks regions, streets
    and buildings that are real places ("Bavaria", "Main Street").
    """
    if det.entity_type != "LOCATION":
        return False
    if not det.recognizer.removeprefix("repeat:").startswith("ner:"):
        return False
    bare = [_POSSESSIVE_RE.sub("", w) for w in words]
    content = [w for w in bare if w.lower() not in _CONNECTORS]
    if not content or not all(w.islower() for w in content):
        return False
    if not _places_known() or not all(zipf_en(w) > 0 for w in content):
        return False
    edges = [w.lower() not in _CONNECTORS for w in bare]  # "and" is a town too
    return not any(
        _known_place(" ".join(bare[i:j]))
        for i in range(len(bare))
        if edges[i]
        for j in range(i + 1, len(bare) + 1)
        if edges[j - 1]
    )


def _given_name(word: str) -> bool:
    """A given name somewhere (name bank when installed, else the lexicon)."""
    if word.lower() in FIRST_NAMES:
        return True
    bank = _bank()
    return bank is not None and bank.in_first(word)


#: Words that open the object of an imperative ("Bill the customer", "Mark
#: this as done", "Sue them"), after which a name rarely stands.
_OBJECT_OPENERS = frozenset(
    "the a an this that these those our their your my his her its them him it "
    "me us all every each".split()
)
_NEXT_WORD_RE = re.compile(r"[ \t]+([A-Za-z]+)\b")


def _imperative(text: str, det: Detection, words: list[str]) -> bool:
    """A one-word PERSON that opens a sentence, is an everyday English verb
    or noun (Zipf >= 4: "bill", "mark", "sue") and is followed by an object
    ("the", "this", "them"): an imperative, not someone's name."""
    if det.entity_type != "PERSON" or len(words) != 1:
        return False
    nxt = _NEXT_WORD_RE.match(text, det.end)
    return (
        nxt is not None
        and nxt.group(1) in _OBJECT_OPENERS
        and _sentence_initial(text, det.start)
        and zipf_en(words[0].lower()) >= _STRONG_ZIPF
    )


def _hyphen_given(word: str) -> bool:
    """A hyphenated given name: every part a given name ("Sung-min", "Ji-hoon",
    "Jean-Luc"). wordfreq scores such a word by its parts, so "Sung-min" reads
    as common English although no English text writes it."""
    parts = word.split("-")
    return (
        len(parts) == 2
        and all(p.isalpha() and len(p) >= 2 for p in parts)
        and word[0].isupper()
        and all(_given_name(p) for p in parts)
    )


@lru_cache(maxsize=1)
def _places_known() -> bool:
    """Whether the GeoNames gazetteer is available (else never judge by it)."""
    try:
        from ctxledger.pipelines.redact.gazetteer import load_places  # noqa: PLC0415
    except ImportError:
        return False
    return bool(load_places())


def _is_place(word: str) -> bool:
    """A GeoNames place, possessive or not ("London's" is London)."""
    from ctxledger.pipelines.redact.gazetteer import is_place  # noqa: PLC0415

    return is_place(word) or is_place(_POSSESSIVE_RE.sub("", word))


def _is_region(word: str) -> bool:
    """An ISO 3166-2 region ("Scotland", "Bavaria", "Yorkshire"), see
    ``gazetteer.region_names``; possessive or not."""
    from ctxledger.pipelines.redact.gazetteer import is_region  # noqa: PLC0415

    return is_region(word) or is_region(_POSSESSIVE_RE.sub("", word))


def _known_place(word: str) -> bool:
    """A GeoNames place or an ISO 3166-2 region."""
    return _is_place(word) or _is_region(word)


#: Initials before a capitalised name: "J.R. Smith", "J. R. R. Tolkien",
#: "T.S. Eliot", "A. Okafor"; each initial is one capital letter with a dot.
_INITIALS_NAME_RE = re.compile(
    r"(?:[A-Z]\.[ \t]?){1,3}[ \t]*[A-Z][a-z][a-z'’\-]*(?:[ \t]+[A-Z][a-z][a-z'’\-]*)?"
)


def _initials_name(value: str) -> bool:
    """Whether ``value`` is initials + a capitalised word: a name's shape.

    The word tokens of "J.R. Smith" are "J", "R" and "Smith", all frequent
    English "words" for ``wordfreq``, so the ordinary-words rule took the span
    for a phrase. Nothing but a person is written so (an acronym such as "U.S."
    before a word is an organisation or a place for NER, and only NER PERSON
    spans reach this test).
    """
    return _INITIALS_NAME_RE.fullmatch(value.strip()) is not None


@lru_cache(maxsize=1)
def _bank():  # noqa: ANN202 - a NameBank or None
    try:
        from ctxledger.pipelines.redact.namebank import load_bank  # noqa: PLC0415
    except ImportError:
        return None
    return load_bank() or None


def _technology_name(text: str, words: list[str]) -> bool:
    """A word of the span is a product/tool name in this text (see module doc)."""
    others = {w.lower() for w in words}
    return any(_technology_word(text, w, others - {w.lower()}) for w in words)


def _followed_by_tech_head(text: str, word: str) -> bool:
    """``re.search(re.escape(word) + _TECH_HEAD, text)`` without compiling a
    pattern per word (each word missed ``re``'s cache and paid a compile of the
    long head alternation): try the head after every occurrence, overlapping
    ones included, as the search would."""
    pos = text.find(word)
    while pos >= 0:
        if _TECH_HEAD_RE.match(text, pos + len(word)):
            return True
        pos = text.find(word, pos + 1)
    return False


def _occurrences(text: str, word: str) -> Iterator[tuple[int, int]]:
    """Non-overlapping ``(start, end)`` of ``word`` in ``text``, left to right
    (what ``re.finditer(re.escape(word), text)`` yields)."""
    pos = text.find(word)
    while pos >= 0:
        yield pos, pos + len(word)
        pos = text.find(word, pos + len(word))


def _technology_word(text: str, word: str, others: set[str]) -> bool:
    if len(word) < 3:
        return False
    if _followed_by_tech_head(text, word):  # "Grafana dashboard"
        return True
    if _versioned(text, word):  # "Git 2.37.2", "Python 3.11": a release
        return True
    if len(word) < 4:  # "git" is inside too many other tokens
        return False
    low = word.lower()
    for start, end in _occurrences(text, low):  # "kube-prometheus", "libclang"
        s, e = start, end
        while s > 0 and not text[s - 1].isspace() and text[s - 1] not in "\"'`(<[":
            s -= 1
        while e < len(text) and not text[e].isspace() and text[e] not in "\"'`)>],":
            e += 1
        token = text[s:e]
        if "@" in token or token == low:  # e-mail local parts are people's
            continue
        if any(o in token.lower() for o in others):  # a slug of the name itself
            continue
        if end < len(text) and text[end].isalpha():  # "gene" in "general"
            continue
        if any(c in token for c in "-_./:") or any(c.isdigit() for c in token):
            return True
    return False


#: A release number after a word: "Git 2.0", "Windows 10.1", "Pony v0.38".
_VERSION_AFTER_RE = re.compile(
    r"[ \t]+v?\d+(?:\.\d+)+(?![\d.]*[ \t]*(?:%|[kKmMgGtT]?i?[bB]\b|m?s\b|x\b))"
)


def _versioned(text: str, word: str) -> bool:
    """The word stands before a dotted version number somewhere in the text.

    Software is named with its release ("Git 2.0", "Python 3.11.4"); a person
    or a place is not followed by one (a measure such as "Tom 2.5 GB" is not a
    release either). A plain ``str.find`` walk: no regex compiled per word.
    """
    pos = text.find(word)
    while pos >= 0:
        end = pos + len(word)
        if (pos == 0 or not text[pos - 1].isalnum()) and _VERSION_AFTER_RE.match(
            text, end
        ):
            return True
        pos = text.find(word, end)
    return False


_LIST_SPLIT_RE = re.compile(
    r"[ \t]*(?:,|;|/)[ \t]*(?:(?:and|or)[ \t]+)?|[ \t]+(?:and|or)[ \t]+"
)


def _code_name(word: str) -> bool:
    """An identifier-shaped word: "TensorFlow", "numpy.ndarray", "snake_case";
    not a degree or initials ("M.Pd", "Ph.D", "e.g.") nor a number ("3.11")."""
    if len(word) <= 3 or not word[0].isalpha():
        return False
    if "." in word:  # a dotted path has a lower-case segment of 2+ letters
        parts = word.split(".")
        return all(len(p) >= 2 for p in parts) and any(
            p.isalpha() and p.islower() for p in parts
        )
    return is_identifier(word)


def _listed_with_identifiers(ctx: _Context, det: Detection) -> bool:
    """The span is an item of an enumeration that also lists identifiers.

    "TensorFlow, Theano, Caffe, and CNTK", "Django, Flask or FastAPI": a list
    whose other items are CamelCase, snake_case or dotted names enumerates
    software, so a capitalised item in it is software too. People are listed
    with people, and their lists hold no ``NumPy``.
    """
    if not ctx.technical():
        return False
    line_start, line_end = ctx.line_bounds(det.start)
    line = ctx.text[line_start:line_end]
    if line.count(",") + line.count(" and ") + line.count(" or ") < 2:
        return False
    value = ctx.text[det.start : det.end]
    items: list[tuple[int, str]] = []
    pos = 0
    for m in _LIST_SPLIT_RE.finditer(line):
        items.append((line_start + pos, line[pos : m.start()]))
        pos = m.end()
    items.append((line_start + pos, line[pos:]))
    for i, (start, item) in enumerate(items):
        if not start <= det.start < start + len(item) + 1:
            continue
        if not item.rstrip(" .)").endswith(value):
            return False  # the span is part of a longer phrase
        # the word next to each separator: "such as TensorFlow, Theano"
        before = [n.split()[-1] for _, n in items[max(0, i - 2) : i] if n.split()]
        after = [n.split()[0] for _, n in items[i + 1 : i + 3] if n.split()]
        return any(_code_name(w.strip(".,()`'\"")) for w in before + after)
    return False


def _evidenced_tokens(text: str, dets: Iterable[Detection]) -> frozenset[str]:
    """Tokens of names with evidence of their own (cue rules, given names)."""
    out: set[str] = set()
    for det in dets:
        if det.entity_type != "PERSON":
            continue
        words = _TOKEN_RE.findall(text[det.start : det.end])
        if len(words) > 1 and _is_acronym(words[-1]):
            continue  # "Travis CI" is no evidence for "Travis"
        if is_judged(det) and all(w[0].islower() for w in words):
            continue  # "travis" in a badge list is no evidence either
        if not is_judged(det) or any(w.lower() in FIRST_NAMES for w in words):
            out.update(words)
    return frozenset(out)


def is_technical(text: str, det: Detection, ctx: _Context | None = None) -> str | None:
    """Why ``det`` is not a name (``code``, ``heading``, ``ordinary``, ``tech``,
    ``techtext``)."""
    words = _TOKEN_RE.findall(text[det.start : det.end])
    if not words:
        return None
    ctx = ctx or _Context(text)
    if _product_with_acronym(ctx, det, words):
        return "techtext"
    if all(w[0].islower() for w in words) and ctx.technical():
        return "techtext"  # "|travis| build status", "julian day number"
    if _imperative(text, det, words):
        return "ordinary"
    if any(w.lower() in FIRST_NAMES for w in words):
        return None
    if _code_context(ctx, det, words):
        return "code"
    if _heading_context(ctx, det):
        return "heading"
    if _ordinary_words(text, det, words):
        return "ordinary"
    if _lower_case_twin(ctx, det, words):
        return "ordinary"
    if _no_name_word(det, words) or _no_place_word(det, words):
        return "ordinary"
    if _technology_name(text, words):
        return "tech"
    if _listed_with_identifiers(ctx, det):
        return "tech"
    if ctx.technical() and _unsupported_in_technical_text(
        det, words, text[det.start : det.end]
    ):
        return "techtext"
    return None


#: Code evidence that makes a whole text technical: a fence, inline code, a
#: Markdown/RST heading or directive, a shell prompt, a traceback line, a
#: coding agent's file view or listing frame, a diff, ``ls -l`` or shell error.
_TECH_TEXT_RE = re.compile(
    r"^\s*(?:```|~~~|#{1,6}\s|\.\. \w|\$ \S|>>> |Traceback |File \"|[=\-]{4,}\s*$)"
    r"|^[\w./\-]+\.\w{1,5}:\d+:"  # grep -n / compiler output: "src/a.py:12:"
    r"|`[^`\n]+`"
    # coding-agent tool frames (SWE-agent, OpenHands): "[File: x.py (9 lines
    # total)]", "(Open file: ...)", "bash-$", "Here's the result of running"
    r"|^(?:\[File: |\(Open file: |\(Current directory: |bash-\$"
    r"|Here's the (?:result of running|files and directories))"
    r"|^(?:diff --git |@@ -\d|[+\-]{3} [ab]/|index [0-9a-f]{7,}\.\.)"  # a diff
    r"|^[dlcb\-][rwxsStT\-]{9}[.+@]?\s+\d"  # ls -l
    r"|^[ \t]*\d+(?:\t|\|)|^\d+:(?![\d ])"  # numbered listing: "  12\t", "12:x"
    r"|^(?:bash|sh|zsh|/bin/sh): |^make(?:\[\d+\])?: \*\*\*",  # shell errors
    re.M,
)
#: Identifier tokens (snake_case, dotted.path, CamelCase); not URLs, e-mails,
#: @mentions or #hashtags, which tweets and chats are full of.
_IDENT_TOKEN_RE = re.compile(
    r"(?<![\w@#/:.])(?:[A-Za-z]\w*_\w+|[A-Za-z]\w*\.[a-z]\w*\.?\w*\(?"
    r"|[a-z]+[A-Z]\w*|[A-Z][a-z]+[A-Z]\w*)(?![\w@])"
)


def _is_technical_text(text: str) -> bool:
    """Whether ``text`` is technical: code markers, or 3+ identifiers."""
    if _TECH_TEXT_RE.search(text):
        return True
    count = 0
    for _ in _IDENT_TOKEN_RE.finditer(text):
        count += 1
        if count >= 3:
            return True
    return False


def _unsupported_in_technical_text(
    det: Detection, words: list[str], value: str
) -> bool:
    """In technical text, a bare capitalised word is a product or a term.

    Runbooks, READMEs and tool outputs capitalise tools and concepts
    ("Parquet files", "on Dataflow", "Use Push Notification and Email"). There
    a one-word candidate needs a look-up of its own: a given name for a PERSON
    ("Bob", "Charlie"), a GeoNames place or an ISO 3166-2 region for a LOCATION
    ("Tokyo", "Scotland"; never a descriptor such as "Central"). A bank
    given name is no evidence for a LOCATION there (round 4): the bank lists
    "Lua", "Node", "Duplex" and "CI", which NER reads as GPEs in manuals, and a
    person NER misreads as a place still has the lexicon (``is_technical``
    keeps those before this rule). A multi-word PERSON with an acronym in it
    ("Cloud SQL", "Git LFS") is a product too; initials before a word ("patch by
    H.J. Lu") are a name's shape and stay.
    """
    if len(words) == 1:
        word = _POSSESSIVE_RE.sub("", words[0])
        if det.entity_type == "PERSON" and "ORG->" in det.recognizer:
            # NER read an organisation and only the name bank made it a
            # person ("the Perl implementation", "Theano"): a lexicon name only
            return word.lower() not in FIRST_NAMES
        if det.entity_type == "PERSON":
            return not _strong_given(word)
        return _places_known() and not _known_place(word)
    if det.entity_type != "PERSON":
        return False
    if _initials_name(value):
        return False  # "patch by J.R. Smith": a name's shape
    if any(_is_acronym(w) for w in words):
        return True  # "Cloud SQL", "Git LFS", "Travis CI"
    # a capitalised function word makes a title: "Hourglass With Flowing Sand"
    if any(w[0].isupper() and w.lower() in _TITLE_CONNECTORS for w in words[1:]):
        return True
    # "Todo List", "Kangxi Radical", "Multipart File": a term ends in a noun
    last = _POSSESSIVE_RE.sub("", words[-1]).lower()
    return zipf_en(last) >= COMMON_ZIPF and not _strong_given(words[0])


def _strong_given(word: str) -> bool:
    """A given name that is no everyday English word (or a lexicon name).

    The name bank holds every word some country uses as a given name, and so
    "Display", "Logo" and "Plain"; in technical text only a lexicon name
    ("Anne") or a bank name rarer than everyday words ("Zahra") counts.
    """
    low = _POSSESSIVE_RE.sub("", word).lower()
    if low in FIRST_NAMES:
        return True
    bank = _bank()
    return bank is not None and bank.in_first(word) and zipf_en(low) < _STRONG_ZIPF


def is_judged(det: Detection) -> bool:
    """Whether the filter may drop ``det``: a PERSON/LOCATION without a cue.

    NER, name-bank look-ups and their repeats are judged; context cues
    (``names:title``, ``names:phrase``, ``places:*``, ``json_key:*``...) are not.
    """
    if det.entity_type not in NAME_TYPES:
        return False
    recognizer = det.recognizer.removeprefix("repeat:")
    return recognizer.startswith(_JUDGED_PREFIXES)


def _relabelled(det: Detection) -> bool:
    """An NER ORG that a cue turned into a name or place ("DMX", "in CHISHOLM")."""
    return "->" in det.recognizer


def _product_with_acronym(ctx: _Context, det: Detection, words: list[str]) -> bool:
    """A product in technical text ("Travis CI", "Git LFS"), even after a given name."""
    return (
        det.entity_type == "PERSON"
        and len(words) > 1
        and _is_acronym(words[-1])
        and ctx.technical()
    )


def _addressed(text: str, det: Detection) -> bool:
    """Someone addressed at a sentence start: "IC: Bob, please investigate".

    Not "On Windows, you might" (no person) nor "Java, Scala, Go" (a list).
    """
    return (
        det.entity_type == "PERSON"
        and _VOCATIVE_AFTER_RE.match(text, det.end) is not None
        and _sentence_initial(text, det.start)
    )


def drop_technical(text: str, dets: Sequence[Detection]) -> list[Detection]:
    """``dets`` without the PERSON/LOCATION candidates that are no names here."""
    judged = [d for d in dets if is_judged(d)]
    if not judged:
        return list(dets)
    ctx = _Context(text)
    evidenced = _evidenced_tokens(text, dets)
    # someone addressed ("Bob, please ...") is a person in the whole text
    evidenced |= {
        w
        for d in judged
        if _addressed(text, d)
        for w in _TOKEN_RE.findall(text[d.start : d.end])
    }
    drop = set()
    for det in judged:
        words = _TOKEN_RE.findall(text[det.start : det.end])
        if _product_with_acronym(ctx, det, words):
            drop.add(det)
            continue
        if evidenced.intersection(words) or _addressed(text, det):
            continue
        if is_technical(text, det, ctx) is not None:
            drop.add(det)
    if drop:  # one sense per text: repeats of a dropped value (or word) go too
        values = {text[d.start : d.end] for d in drop}
        words = {w for v in values for w in _TOKEN_RE.findall(v)}
        drop.update(
            d
            for d in judged
            if text[d.start : d.end] in values
            or d.recognizer.startswith("repeat:")
            and set(_TOKEN_RE.findall(text[d.start : d.end])) <= words
        )
    return [d for d in dets if d not in drop]
