"""Protected fields: the values a summary must never lose or alter.

Extracted from the (redacted) source messages, normalised, deduplicated on
``(kind, value)`` (the first occurrence keeps its label and source message) and
checksummed:

* ``amount``: ``$1,249.00``, ``EUR 12``, ``300 dollars`` -> ``USD 1249.00``;
* ``date``: ``2026-03-14``, ``14 March 2026``, ``March 14, 2026``, ``3/14/2026`` ->
  ISO ``2026-03-14`` (slashed dates are month/day/year unless the first number
  is over 12);
* ``identifier``: pseudonym tokens (``<PERSON:3f9a1c2b>``), employee numbers,
  shard names (``pay-shard-7``), ids introduced by a noun (``order A1B2C3``,
  ``account 123456``: labelled by the noun), ticket-style references
  (``INC-5512``, ``R-20931``), commit hashes (``9f3c2ab``: label ``commit``),
  versions (``1.4.4``, ``v2.3``: ``version``), sizes and limits by their noun
  (``pool size 256``: ``pool_size``; ``DB cap 300``: ``cap``; ``timeout
  30s``; ``256 -> 128`` after such a noun gives both) and test counts
  (``48 passed, 0 failed``: ``tests_passed`` / ``tests_failed``): the numbers
  a continuation depends on, so ``verify`` names the field when one changes;
* ``negation``: clauses with "do not", "never", "must not", "decided against",
  "is not"...; ``approval``: pending approvals and sign-offs; ``pending_action``:
  next steps, to-dos, follow-ups. These three are lower-cased clauses, taken only
  from the roles in ``LedgerSettings.rule_roles`` (the user's standing rules).

``find_fields`` is the matching side: does a text carry a field (``present``),
not at all (``missing``), or with another value of the same label, or a negation
without its negation (``altered``)? Extraction and matching share the same
patterns, so a message always carries every field extracted from it.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import date
from decimal import Decimal, InvalidOperation
from difflib import SequenceMatcher
from functools import cached_property, lru_cache
from typing import Literal

from ctxledger.pipelines.ledger.text import (
    clauses,
    content_words,
    coverage,
    normalize_clause,
    sentences,
    strip_observation,
)
from ctxledger.schemas.base import canonical_json
from ctxledger.schemas.ledger import PROTECTED_KINDS, ProtectedField
from ctxledger.schemas.transcript import Message

FACT_KINDS = ("amount", "date", "identifier")
RULE_KINDS = ("negation", "pending_action", "approval")
#: Share of a clause's content words a paraphrase must keep to carry it.
CLAUSE_COVERAGE = 0.6

# -- amounts -------------------------------------------------------------------
_NUM = r"\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?"
_MULT = r"(?:\s?(?P<mult>k|m|bn|thousand|million|billion)\b)?"
_SYMBOLS = {"$": "USD", "€": "EUR", "£": "GBP", "¥": "JPY"}
_CODES = "USD|EUR|GBP|JPY|CHF|CAD|AUD|INR|CNY"
_WORDS = {"dollars": "USD", "euros": "EUR", "pounds": "GBP"}
_AMOUNT_SYMBOL = re.compile(rf"(?<![\w$€£¥])(?P<cur>[$€£¥])\s?(?P<num>{_NUM}){_MULT}")
_AMOUNT_CODE_FIRST = re.compile(rf"\b(?P<cur>{_CODES})\s?(?P<num>{_NUM}){_MULT}")
_AMOUNT_CODE_AFTER = re.compile(
    rf"(?<![\w.,$€£¥])(?P<num>{_NUM}){_MULT}\s?(?P<cur>{_CODES}|dollars|euros|pounds)\b"
)
_MULTIPLIERS = {
    "k": 1_000,
    "thousand": 1_000,
    "m": 1_000_000,
    "million": 1_000_000,
    "bn": 1_000_000_000,
    "billion": 1_000_000_000,
}

# -- dates ---------------------------------------------------------------------
_MONTHS = {
    m: i + 1
    for i, names in enumerate(
        [
            ("jan", "january"),
            ("feb", "february"),
            ("mar", "march"),
            ("apr", "april"),
            ("may",),
            ("jun", "june"),
            ("jul", "july"),
            ("aug", "august"),
            ("sep", "sept", "september"),
            ("oct", "october"),
            ("nov", "november"),
            ("dec", "december"),
        ]
    )
    for m in names
}
_MONTH = "|".join(sorted(_MONTHS, key=len, reverse=True))
_ISO_DATE = re.compile(r"(?<![\d-])(?P<y>\d{4})-(?P<m>\d{2})-(?P<d>\d{2})(?![\d])")
_DAY_MONTH = re.compile(
    rf"\b(?P<d>\d{{1,2}})(?:st|nd|rd|th)?\s+(?P<mon>{_MONTH})\.?,?\s+(?P<y>\d{{4}})\b",
    re.IGNORECASE,
)
_MONTH_DAY = re.compile(
    rf"\b(?P<mon>{_MONTH})\.?\s+(?P<d>\d{{1,2}})(?:st|nd|rd|th)?,?\s+(?P<y>\d{{4}})\b",
    re.IGNORECASE,
)
_YEAR = re.compile(r"\d{4}")
_SLASHED = re.compile(r"(?<![\d/])(?P<a>\d{1,2})/(?P<b>\d{1,2})/(?P<y>\d{4})(?![\d/])")

# -- identifiers ---------------------------------------------------------------
_PSEUDONYM = re.compile(r"<[A-Z][A-Z0-9_]*:[0-9a-f]{4,64}>")
_EMPLOYEE = re.compile(
    r"\b(?:employee|emp\.?|staff)\s*(?:number|no\.?|num|id|#)\s*[^\w\n]{0,3}"
    r"(?:(?:is|was|now|changed|becomes?|to|of|=)\s+){0,3}#?(?P<v>\d{3,12})\b",
    re.IGNORECASE,
)
_SHARD = re.compile(
    r"(?<![\w-])(?:[a-z0-9]+[-_])*shard[-_]?\d+(?![\w-])", re.IGNORECASE
)
_KEYWORDS = {
    "account": "account",
    "acct": "account",
    "order": "order",
    "invoice": "invoice",
    "reservation": "reservation",
    "booking": "booking",
    "case": "case",
    "ticket": "ticket",
    "request": "request",
    "customer": "customer",
    "transaction": "transaction",
    "payment": "payment",
    "incident": "incident",
    "refund": "refund",
    "confirmation": "confirmation",
    "tracking": "tracking",
}
_KEYWORD_ID = re.compile(
    r"\b(?P<kw>" + "|".join(_KEYWORDS) + r")s?\s*(?:id|number|no\.?|code|#)?\s*[:#]?\s*"
    r"(?P<v>(?=[A-Za-z0-9_-]*\d)[A-Za-z0-9][A-Za-z0-9_-]{2,})(?![\w-])",
    re.IGNORECASE,
)
_REF = re.compile(r"(?<![\w-])(?P<v>[A-Z][A-Z0-9]{0,9}-\d{2,}(?:-\d+)*)(?![\w-])")
_NOT_REFS = frozenset({"SHA", "ISO", "UTF", "RFC", "PEP", "HTTP", "TLS", "AES", "MD"})
#: A commit hash: 7-40 lower-case hex digits with a letter and a digit, not
#: part of a path, a pseudonym token or an artifact id.
_COMMIT = re.compile(
    r"(?<![\w:/.#<-])(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{7,40}(?![\w/-])"
)
#: A version: three numeric parts (``1.4.4``, ``2.77.0rc1``) or ``v`` and two
#: or more (``v2.3``); not a four-part address or a file name.
_VERSION = re.compile(
    r"(?<![\w.])(?:v\d+(?:\.\d+){1,2}|\d+\.\d+\.\d+)(?:(?:rc|a|b|dev)\d+)?"
    r"(?![\w]|\.\w)"
)
#: Sizes, limits and counts a setting is made of, named by their noun.
_QUANTITY_NOUNS = (
    r"pool[ _]size|pool|max[ _]connections|connections|batch[ _]size|page[ _]size|"
    r"chunk[ _]size|buffer[ _]size|cache[ _]size|heap[ _]size|max[ _]size|"
    r"rate[ _]limit|retry[ _]limit|retries|replicas|workers|threads|partitions|"
    r"concurrency|capacity|quota|timeout|ttl|limit|cap|peak|budget|port"
)
_QUANTITY_VALUE = (
    r"(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?"
    r"(?:\s?(?:[KMGT]i?B|[kmg]b|ms|s|min|h|%)(?![\w]))?"
)
_QUANTITY = re.compile(
    rf"\b(?P<noun>{_QUANTITY_NOUNS})\b(?:\s+(?:is|was|of|at|to|from|set|now|"
    rf"currently|about|around|the|a|size|count))*\s*(?:[:=~]|->|\u2192)?\s*~?"
    rf"(?P<v>{_QUANTITY_VALUE})(?![-/:]?\w)(?![.,]\d)",
    re.IGNORECASE,
)
#: ``-> 128`` / ``to 128`` right after a quantity: the value it changes to.
_QUANTITY_NEXT = re.compile(
    rf"\s*(?:->|=>|\u2192|\bto\b)\s*~?(?P<v>{_QUANTITY_VALUE})(?![-/:]?\w)(?![.,]\d)",
    re.IGNORECASE,
)
#: A test runner's counts: ``48 passed, 0 failed``, ``Ran 12 tests``.
_TEST_COUNT = re.compile(
    r"(?<![\w.,])(?P<v>\d+)\s+(?P<what>passed|failed|errors?|skipped|tests?)\b"
    r"|\bran\s+(?P<ran>\d+)\s+tests?\b",
    re.IGNORECASE,
)
_TEST_LABELS = {
    "passed": "tests_passed",
    "failed": "tests_failed",
    "error": "tests_errors",
    "errors": "tests_errors",
    "skipped": "tests_skipped",
    "test": "tests",
    "tests": "tests",
}

# -- rules ---------------------------------------------------------------------
_NEGATION = re.compile(
    r"\b(?:do not|don't|does not|doesn't|did not|didn't|never|must not|mustn't|"
    r"should not|shouldn't|shall not|cannot|can't|can not|may not|will not|won't|"
    r"no longer|not allowed|decided against|is not|are not|was not|were not|"
    r"isn't|aren't|wasn't|weren't|not to)\b",
    re.IGNORECASE,
)
_APPROVAL = re.compile(
    r"\b(?:pending|awaiting|awaits|await|waiting (?:for|on)|needs?|requires?|"
    r"required|requests?|requesting)\b.{0,80}?\b(?:approv\w*|sign[- ]?offs?)\b"
    r"|\b(?:approv\w*|sign[- ]?offs?)\b.{0,60}?\b(?:pending|required|needed|"
    r"outstanding)\b",
    re.IGNORECASE,
)
_APPROVAL_WORD = re.compile(r"\b(?:approv\w*|sign[- ]?offs?|signoff)\b", re.IGNORECASE)
_PENDING = re.compile(
    r"\b(?:next steps?|todo|to-do|follow[- ]ups?|action items?|remember to|"
    r"still needs? to|don't forget to|pending|outstanding)\b",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Found:
    """A protected value found in a text (before it is tied to a message)."""

    kind: str
    label: str
    value: str

    @property
    def canonical(self) -> str:
        if self.label == self.kind:
            return f"{self.kind}:{self.value}"
        return f"{self.kind}:{self.label}:{self.value}"


def _amount(cur: str, num: str, mult: str | None) -> str | None:
    code = _SYMBOLS.get(cur) or _WORDS.get(cur.lower()) or cur.upper()
    try:
        value = Decimal(num.replace(",", ""))
    except InvalidOperation:
        return None
    if mult:
        value *= _MULTIPLIERS[mult.lower()]
    return f"{code} {value:.2f}"


def find_amounts(text: str) -> list[Found]:
    """Currency amounts in ``text``, normalised to ``CODE 1234.00``."""
    out = []
    for pattern in (_AMOUNT_SYMBOL, _AMOUNT_CODE_FIRST, _AMOUNT_CODE_AFTER):
        for match in pattern.finditer(text):
            value = _amount(match["cur"], match["num"], match["mult"])
            if value is not None:
                out.append((match.start(), Found("amount", "amount", value)))
    return [f for _, f in sorted(out, key=lambda item: item[0])]


def _iso(year: int, month: int, day: int) -> str | None:
    try:
        return date(year, month, day).isoformat()
    except ValueError:
        return None


def find_dates(text: str) -> list[Found]:
    """Calendar dates in ``text``, normalised to ISO ``YYYY-MM-DD``."""
    out: list[tuple[int, Found]] = []
    if not _YEAR.search(text):  # every date form has a four-digit year
        return []
    for match in _ISO_DATE.finditer(text):
        value = _iso(int(match["y"]), int(match["m"]), int(match["d"]))
        if value:
            out.append((match.start(), Found("date", "date", value)))
    for pattern in (_DAY_MONTH, _MONTH_DAY):
        for match in pattern.finditer(text):
            month = _MONTHS[match["mon"].lower()]
            value = _iso(int(match["y"]), month, int(match["d"]))
            if value:
                out.append((match.start(), Found("date", "date", value)))
    for match in _SLASHED.finditer(text):
        a, b = int(match["a"]), int(match["b"])
        month, day = (b, a) if a > 12 else (a, b)
        value = _iso(int(match["y"]), month, day)
        if value:
            out.append((match.start(), Found("date", "date", value)))
    return [f for _, f in sorted(out, key=lambda item: item[0])]


def find_identifiers(text: str) -> list[Found]:
    """Identifiers in ``text``; one per value, the most specific label first."""
    found: list[tuple[int, int, Found]] = []
    for match in _PSEUDONYM.finditer(text):
        found.append((0, match.start(), Found("identifier", "pseudonym", match[0])))
    for match in _EMPLOYEE.finditer(text):
        found.append(
            (1, match.start("v"), Found("identifier", "employee_number", match["v"]))
        )
    for match in _SHARD.finditer(text):
        found.append((2, match.start(), Found("identifier", "shard", match[0].lower())))
    for match in _KEYWORD_ID.finditer(text):
        label = _KEYWORDS[match["kw"].lower()]
        found.append((3, match.start("v"), Found("identifier", label, match["v"])))
    for match in _REF.finditer(text):
        if match["v"].split("-", 1)[0] not in _NOT_REFS:
            found.append((4, match.start(), Found("identifier", "ref", match["v"])))
    found += _numbers(text)
    best: dict[str, tuple[int, int, Found]] = {}
    for item in found:
        key = item[2].value.lower()
        if key not in best or item[0] < best[key][0]:
            best[key] = item
    return [f for _, _, f in sorted(best.values(), key=lambda item: item[1])]


def _quantity(value: str) -> str:
    """A size or a limit as written (``1,024``, ``512 MB``), so the text it
    came from always carries it."""
    return value.strip()


def _numbers(text: str) -> list[tuple[int, int, Found]]:
    """Commit hashes, versions, labelled sizes and limits, and test counts
    (``find_identifiers``' candidates, after the more specific labels)."""
    out: list[tuple[int, int, Found]] = []
    if not _DIGIT.search(text):
        return out
    for match in _COMMIT.finditer(text):
        out.append((5, match.start(), Found("identifier", "commit", match[0])))
    for match in _VERSION.finditer(text):
        version = match[0].lower()
        out.append((6, match.start(), Found("identifier", "version", version)))
    for match in _TEST_COUNT.finditer(text):
        if match["ran"]:
            label, value = "tests", match["ran"]
        else:
            label, value = _TEST_LABELS[match["what"].lower()], match["v"]
        out.append((7, match.start(), Found("identifier", label, value)))
    for match in _QUANTITY.finditer(text):
        label = re.sub(r"[ _]+", "_", match["noun"].lower())
        out.append(
            (8, match.start("v"), Found("identifier", label, _quantity(match["v"])))
        )
        after = _QUANTITY_NEXT.match(text, match.end())
        if after:
            value = _quantity(after["v"])
            out.append((8, after.start("v"), Found("identifier", label, value)))
    return out


@lru_cache(maxsize=65_536)
def find_rules(text: str, limit: int = 400) -> tuple[Found, ...]:
    """Negations, pending approvals and pending actions, one per clause."""
    out = []
    for sentence in sentences(text):
        for clause in clauses(sentence):
            if _APPROVAL.search(clause):
                kind = "approval"
            elif _NEGATION.search(clause):
                kind = "negation"
            elif _PENDING.search(clause):
                kind = "pending_action"
            else:
                continue
            value = normalize_clause(clause, limit)
            if value:
                out.append(Found(kind, kind, value))
    return tuple(out)


_DIGIT = re.compile(r"\d")


@lru_cache(maxsize=65_536)
def find_facts(text: str) -> tuple[Found, ...]:
    """Amounts, dates and identifiers of the natural-language part of ``text``."""
    # Every fact pattern needs a digit, except pseudonym tokens (``<TYPE:hex>``).
    if "<" not in text and not _DIGIT.search(text):
        return ()
    prose = "\n".join(sentences(text))
    return tuple(find_amounts(prose) + find_dates(prose) + find_identifiers(prose))


def extract_fields(
    messages: Sequence[Message],
    kinds: Iterable[str] = PROTECTED_KINDS,
    fact_roles: Iterable[str] = ("user", "assistant"),
    rule_roles: Iterable[str] = ("user",),
    limit: int = 400,
) -> list[ProtectedField]:
    """Protected fields of ``messages`` in turn order, deduplicated on value."""
    wanted = frozenset(kinds)
    facts, rules = frozenset(fact_roles), frozenset(rule_roles)
    seen: set[tuple[str, str]] = set()
    out: list[ProtectedField] = []
    for message in sorted(messages, key=lambda m: (m.turn, m.message_id)):
        text = strip_observation(message.content)
        if not text:
            continue
        found: list[Found] = []
        if message.role in facts:
            found.extend(f for f in find_facts(text) if f.kind in wanted)
        if message.role in rules:
            found.extend(f for f in find_rules(text, limit) if f.kind in wanted)
        for item in found:
            dedupe = (item.kind, item.value.lower())
            if dedupe in seen:
                continue
            seen.add(dedupe)
            out.append(
                ProtectedField(
                    kind=item.kind,  # type: ignore[arg-type]
                    label=item.label,
                    value=item.value,
                    source_message_id=message.message_id,
                    turn=message.turn,
                )
            )
    return out


def merge_fields(
    old: Sequence[ProtectedField], new: Sequence[ProtectedField]
) -> list[ProtectedField]:
    """Union of two field lists; an older occurrence of a value wins."""
    seen = {(f.kind, f.value.lower()) for f in old}
    merged = list(old)
    for item in new:
        key = (item.kind, item.value.lower())
        if key not in seen:
            seen.add(key)
            merged.append(item)
    return merged


def checksum(fields: Iterable[ProtectedField]) -> str:
    """``sha256:<hex>`` over the sorted, unique canonical values of ``fields``."""
    values = sorted({f.canonical for f in fields})
    digest = hashlib.sha256(canonical_json(values).encode("utf-8")).hexdigest()
    return f"sha256:{digest}"


# -- matching ------------------------------------------------------------------
Status = Literal["present", "missing", "altered"]


@dataclass(frozen=True)
class FieldCheck:
    """Whether a text carries one protected field (``found``: what it has instead)."""

    field: ProtectedField
    status: Status
    found: str | None = None


class TextIndex:
    """A text prepared once for checking many fields against it."""

    def __init__(self, text: str):
        self.text = text
        self.lower = text.lower()

    @cached_property
    def amounts(self) -> set[str]:
        return {f.value for f in find_amounts(self.text)}

    @cached_property
    def dates(self) -> set[str]:
        return {f.value for f in find_dates(self.text)}

    @cached_property
    def identifiers(self) -> list[Found]:
        return find_identifiers(self.text)

    @cached_property
    def clause_words(self) -> list[tuple[frozenset[str], bool]]:
        return [
            (content_words(clause), bool(_NEGATION.search(clause)))
            for sentence in sentences(self.text)
            for clause in clauses(sentence)
        ]

    def has_token(self, value: str) -> bool:
        pattern = r"(?<![\w-])" + re.escape(value.lower()) + r"(?![\w-])"
        return re.search(pattern, self.lower) is not None


def _closest(value: str, candidates: Iterable[str]) -> str | None:
    best, score = None, 0.0
    for candidate in sorted(candidates):
        ratio = SequenceMatcher(None, value.lower(), candidate.lower()).ratio()
        if ratio > score:
            best, score = candidate, ratio
    return best


def check_field(
    item: ProtectedField, index: TextIndex, source_values: frozenset[str]
) -> FieldCheck:
    """Check one field; ``source_values`` are all lower-cased source values (a
    different value the sources also hold is not an alteration)."""
    if item.kind in RULE_KINDS:
        needed = content_words(item.value)
        negated = item.kind == "negation"
        best_plain = 0.0
        for words, has_negation in index.clause_words:
            share = coverage(needed, words)
            if share >= CLAUSE_COVERAGE and (has_negation or not negated):
                return FieldCheck(item, "present")
            best_plain = max(best_plain, share)
        if negated and best_plain >= CLAUSE_COVERAGE:
            return FieldCheck(item, "altered", "negation dropped")
        return FieldCheck(item, "missing")
    if item.kind == "amount":
        if item.value in index.amounts:
            return FieldCheck(item, "present")
        others = {v for v in index.amounts if v.lower() not in source_values}
    elif item.kind == "date":
        if item.value in index.dates:
            return FieldCheck(item, "present")
        others = {v for v in index.dates if v.lower() not in source_values}
    else:
        if index.has_token(item.value):
            return FieldCheck(item, "present")
        others = {
            f.value
            for f in index.identifiers
            if f.label == item.label and f.value.lower() not in source_values
        }
    if others:
        return FieldCheck(item, "altered", _closest(item.value, others))
    return FieldCheck(item, "missing")


def check_fields(text: str, fields: Sequence[ProtectedField]) -> list[FieldCheck]:
    """Check every field against ``text`` (see the module docstring)."""
    index = TextIndex(text)
    values = frozenset(f.value.lower() for f in fields)
    return [check_field(item, index, values) for item in fields]
