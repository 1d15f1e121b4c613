"""Personal identifiers: passports, national ids and dates of birth (issue 29).

One recognizer family, rules as data:

* ``NATIONAL_ID``: ``NATIONAL_IDS`` lists one rule per national format: its
  shape and its ``python-stdnum`` validator (checksum, embedded date), or our
  own where stdnum has none (Kazakh IIN). A *distinctive* shape (letters or
  separators in fixed places: ``123.456.789-09``, ``RSSMRA85T10A562S``) counts
  anywhere once it validates; a plain run of digits (PESEL, Aadhaar, IIN) only
  near an id word ("PESEL", "Aadhaar", "national id", "personnummer" ...), since
  one random number in ten passes a mod-10/11 check. A value directly after an
  id word ("national ID number: 880412-5531") counts even when no rule knows
  its country (score 0.6).
* ``PASSPORT``: a 6-10 character number with at least two digits after
  "passport" ("passport number is K4821937", "passport no. C01X00T47").
* ``DATE_OF_BIRTH``: a date after a birth word ("born on", "DOB", "date of
  birth", "birthday"), in ISO, numeric and written forms; "born in 1987" too.

JSON keys (``dob``, ``passport_number``...) are mapped to these types by the
policy's ``pii.json_keys``. Pure ``re`` plus stdnum's validators (imported on
first use): no presidio.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache

from ctxledger.pipelines.redact.spans import Detection
from ctxledger.pipelines.redact.textkind import has_digit

IDENTIFIER_TYPES = frozenset({"NATIONAL_ID", "PASSPORT", "DATE_OF_BIRTH"})


def kz_iin_valid(value: str) -> bool:
    """Kazakh IIN (ЖСН): YYMMDD, a century/sex digit, 4 digits, a mod-11
    check digit with a second weight row when the first gives 10."""
    if not re.fullmatch(r"\d{12}", value):
        return False
    digits = [int(c) for c in value]
    month, day = int(value[2:4]), int(value[4:6])
    if not (1 <= month <= 12 and 1 <= day <= 31) or digits[6] > 6:
        return False
    check = sum(d * w for d, w in zip(digits[:11], range(1, 12), strict=True)) % 11
    if check == 10:
        weights = [3, 4, 5, 6, 7, 8, 9, 10, 11, 1, 2]
        check = sum(d * w for d, w in zip(digits[:11], weights, strict=True)) % 11
        if check == 10:
            return False
    return check == digits[11]


@dataclass(frozen=True)
class IdRule:
    """One national id format: name, shape, validator, whether it needs an id
    word nearby (plain digits) or stands on its shape (``distinctive``)."""

    name: str
    shape: str
    validator: str
    distinctive: bool = False


#: The formats we know, checked in order; ``validator`` is a stdnum module
#: (its ``is_valid``) or ``kz_iin`` (``kz_iin_valid``).
NATIONAL_IDS: tuple[IdRule, ...] = (
    IdRule("PL PESEL", r"\d{11}", "stdnum.pl.pesel"),
    IdRule("IN Aadhaar", r"[2-9]\d{3}[ -]?\d{4}[ -]?\d{4}", "stdnum.in_.aadhaar"),
    IdRule("KZ IIN", r"\d{12}", "kz_iin"),
    IdRule("TR TC Kimlik", r"[1-9]\d{10}", "stdnum.tr.tckimlik"),
    IdRule("NO fodselsnummer", r"\d{11}", "stdnum.no.fodselsnummer"),
    IdRule("RO CNP", r"[1-9]\d{12}", "stdnum.ro.cnp"),
    IdRule("ZA ID", r"\d{13}", "stdnum.za.idnr"),
    IdRule("NL BSN", r"\d{9}|\d{4}\.\d{2}\.\d{3}", "stdnum.nl.bsn"),
    IdRule("IL ID", r"\d{9}", "stdnum.il.idnr"),
    IdRule("CA SIN", r"\d{3}[ -]?\d{3}[ -]?\d{3}", "stdnum.ca.sin"),
    IdRule("DK CPR", r"\d{6}-?\d{4}", "stdnum.dk.cpr"),
    IdRule("BG EGN", r"\d{10}", "stdnum.bg.egn"),
    IdRule("EE isikukood", r"[1-6]\d{10}", "stdnum.ee.ik"),
    IdRule("CN RIC", r"\d{17}[\dXx]", "stdnum.cn.ric"),
    IdRule("BE NN", r"\d{2}\.?\d{2}\.?\d{2}-?\d{3}\.?\d{2}", "stdnum.be.nn"),
    IdRule("BR CPF", r"\d{3}\.\d{3}\.\d{3}-\d{2}", "stdnum.br.cpf", True),
    IdRule("SE personnummer", r"(?:\d{2})?\d{6}[-+]\d{4}", "stdnum.se.personnummer"),
    IdRule("FI HETU", r"\d{6}[-+A-FU-Y]\d{3}[0-9A-Y]", "stdnum.fi.hetu", True),
    IdRule("KR RRN", r"\d{6}-[1-8]\d{6}", "stdnum.kr.rrn", True),
    IdRule("ES DNI", r"\d{8}-?[A-Z]", "stdnum.es.dni", True),
    IdRule("ES NIE", r"[XYZ]-?\d{7}-?[A-Z]", "stdnum.es.nie", True),
    IdRule(
        "IT codice fiscale",
        r"[A-Z]{6}\d{2}[A-Z]\d{2}[A-Z]\d{3}[A-Z]",
        "stdnum.it.codicefiscale",
        True,
    ),
    IdRule("MX CURP", r"[A-Z]{4}\d{6}[HM][A-Z]{5}[0-9A-Z]\d", "stdnum.mx.curp", True),
    IdRule("CL RUT", r"\d{1,2}\.\d{3}\.\d{3}-[\dkK]", "stdnum.cl.rut", True),
    IdRule(
        "FR NIR",
        r"[12] ?\d{2} ?\d{2} ?(?:\d{2}|2[AB]) ?\d{3} ?\d{3} ?\d{2}",
        "stdnum.fr.nir",
        True,
    ),
)

#: Words that name a national id (case-insensitive phrases, then acronyms,
#: which must be written in capitals: "SIN", not "sin").
_ID_WORDS = re.compile(
    r"(?i:\b(?:national\s+(?:id(?:entity|entification)?|insurance|registration)"
    r"(?:\s+(?:number|no\.?|card|code))?|(?:personal|citizen|resident|identity|"
    r"civil|tax)\s+(?:id(?:entification)?\s+)?(?:number|no\.?|code|card)|id\s+"
    r"(?:number|no\.?|card|code)|identity\s+card|pesel|aadhaa?r|uidai|"
    r"personnummer|personal\s+number|f[øo]dselsnummer|henkil[öo]tunnus|"
    r"burgerservicenummer|social\s+(?:security|insurance)\s+(?:number|no\.?)|"
    r"codice\s+fiscale|tc\s+kimlik(?:\s+no)?|kimlik\s+(?:no|numaras[ıi])|"
    r"resident\s+registration\s+(?:number|no\.?)|isikukood|asmens\s+kodas|"
    r"rodn[eé]\s+[čc][ií]slo))"
    r"|\b(?:PESEL|IIN|ИИН|ЖСН|SIN|NIN|BSN|CPR|DNI|NIE|NIF|NIR|CNP|CPF|RUT|CURP|"
    r"RRN|TCKN|EGN|NINO|UID|NID)\b"
)
#: The value right after an id word ("is", ":", "#", "number" between).
_AFTER_WORD = re.compile(
    r"(?:\s*(?:number|no\.?|num|#))?(?:\s+(?:is|was|=|:)|\s*[:=#\-–])?\s*"
    r"(?P<value>[A-Z0-9](?:[A-Z0-9.\-]|(?<=\d) (?=\d)){4,22}[A-Z0-9])(?![\w])",
    re.IGNORECASE,
)
_DISTINCT = re.compile(
    "|".join(
        f"(?P<r{i}>{rule.shape})"
        for i, rule in enumerate(NATIONAL_IDS)
        if rule.distinctive
    )
)
_BOUNDED = re.compile(r"(?<![\w.\-])(?:" + _DISTINCT.pattern + r")(?![\w\-])")
_RULE_RES = tuple(re.compile(rule.shape) for rule in NATIONAL_IDS)
#: Runs of capitals, digits and id separators: where a distinctive id can be
#: (one cheap scan; ``_BOUNDED`` then runs inside the few runs with a digit).
_RUN = re.compile(r"[0-9A-Z][0-9A-Z.+\- ]{8,}[0-9A-Z]")
#: Runs of 6+ digits (separators allowed): where an id value can be.
_DIGIT_RUN = re.compile(r"\d(?:[ .\-]?\d){5,}")

_PASSPORT = re.compile(
    r"(?i)\bpassport(?:\s*(?:number|no\.?|num(?:ber)?|#|id|nr\.?))?"
    r"(?:\s+(?:is|was|reads)|\s*[:=#\-–]|,)?\s*"
    r"(?P<value>[A-Z0-9]{1,3}[ -]?[A-Z0-9]{4,9})(?![\w\-])"
)

_MONTH = (
    r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|"
    r"aug(?:ust)?|sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)\.?"
)
_DAY = r"\d{1,2}(?:st|nd|rd|th)?"
_DATE = re.compile(
    r"(?i)(?P<date>\d{4}[-/.]\d{1,2}[-/.]\d{1,2}"
    r"|\d{1,2}[-/.]\d{1,2}[-/.](?:\d{4}|\d{2})(?!\d)"
    rf"|{_DAY}\s+(?:of\s+)?{_MONTH},?\s+\d{{4}}"
    rf"|{_MONTH}\s+{_DAY},?\s+\d{{4}}"
    rf"|{_MONTH},?\s+\d{{4}})(?!\d)"
)
_BIRTH_WORDS = re.compile(
    r"(?i)\b(?:born|d\.?o\.?b\.?|date\s+of\s+birth|birth\s*date|birthday|"
    r"birth\s+day|geburtsdatum|fecha\s+de\s+nacimiento|data\s+urodzenia|"
    r"date\s+de\s+naissance|n[ée]e?\s+le)\b"
)
_BORN_IN_YEAR = re.compile(r"(?i)\bborn\s+in\s+(?P<date>(?:19|20)\d\d)\b")
#: How far after a birth word the date may start ("born in Krakow on ...").
_BIRTH_WINDOW = 40


@cache
def _validator(name: str) -> Callable[[str], bool]:
    if name == "kz_iin":
        return kz_iin_valid
    module = importlib.import_module(name)
    return module.is_valid


def _valid(index: int, value: str) -> bool:
    rule = NATIONAL_IDS[index]
    if _RULE_RES[index].fullmatch(value) is None:
        return False
    try:
        return bool(_validator(rule.validator)(value))
    except Exception:  # noqa: BLE001 - a validator that chokes is a "no"
        return False


def _distinct_matches(text: str):
    for run in _RUN.finditer(text):
        if has_digit(run.group()):
            yield from _BOUNDED.finditer(text, run.start(), run.end())


def _id_words(text: str) -> list[re.Match[str]]:
    """``_ID_WORDS`` matches that can name an id value: searched only in the
    60 characters before each run of 6+ digits (a value needs them), which
    one cheap scan finds; the regex over a whole long tool output is the cost."""
    found: dict[int, re.Match[str]] = {}
    for run in _DIGIT_RUN.finditer(text):
        for m in _ID_WORDS.finditer(text, max(0, run.start() - 60), run.start()):
            found.setdefault(m.start(), m)
    return [found[k] for k in sorted(found)]


def _national_ids(text: str) -> list[Detection]:
    out = []
    if _DISTINCT.pattern:
        for m in _distinct_matches(text):
            index = int(m.lastgroup[1:]) if m.lastgroup else -1
            if index >= 0 and _valid(index, m.group()):
                out.append(
                    Detection(
                        m.start(),
                        m.end(),
                        "NATIONAL_ID",
                        0.9,
                        f"id:{NATIONAL_IDS[index].name}",
                    )
                )
    for word in _id_words(text):
        m = _AFTER_WORD.match(text, word.end())
        if m is None:
            continue
        value = m.group("value").rstrip(" .-")
        if sum(ch.isdigit() for ch in value) < 6:
            continue
        start = m.start("value")
        known = next((i for i in range(len(NATIONAL_IDS)) if _valid(i, value)), None)
        name = NATIONAL_IDS[known].name if known is not None else "context"
        score = 0.95 if known is not None else 0.6
        out.append(
            Detection(start, start + len(value), "NATIONAL_ID", score, f"id:{name}")
        )
    return out


def _passports(text: str) -> list[Detection]:
    out = []
    for m in _PASSPORT.finditer(text):
        value = m.group("value")
        compact = value.replace(" ", "").replace("-", "")
        if not 6 <= len(compact) <= 10 or sum(ch.isdigit() for ch in compact) < 2:
            continue
        out.append(
            Detection(m.start("value"), m.end("value"), "PASSPORT", 0.9, "passport")
        )
    return out


def _birth_dates(text: str) -> list[Detection]:
    out = []
    for word in _BIRTH_WORDS.finditer(text):
        window = text[word.end() : word.end() + _BIRTH_WINDOW]
        cut = window.find("\n")
        if cut >= 0:
            window = window[:cut]
        m = _DATE.search(window)
        if m is None:
            continue
        start = word.end() + m.start("date")
        out.append(
            Detection(
                start,
                start + len(m.group("date")),
                "DATE_OF_BIRTH",
                0.9,
                "birth_date",
            )
        )
    for m in _BORN_IN_YEAR.finditer(text):
        out.append(
            Detection(m.start("date"), m.end("date"), "DATE_OF_BIRTH", 0.7, "born_in")
        )
    return out


#: Substrings (of the lower-cased text) without which a rule cannot match.
_PASSPORT_HINT = "passport"
_BIRTH_HINTS = (
    "born",
    "dob",
    "d.o.b",
    "birth",
    "geburt",
    "nacimiento",
    "urodzenia",
    "naissance",
    "née",
    "nee le",
    "ne le",
    "né le",
)


def detect(text: str, wanted: frozenset[str]) -> list[Detection]:
    """Identifier detections of the ``wanted`` types in ``text``."""
    if not has_digit(text):
        return []
    out: list[Detection] = []
    lower = text.lower()
    if "NATIONAL_ID" in wanted:
        out.extend(_national_ids(text))
    if "PASSPORT" in wanted and _PASSPORT_HINT in lower:
        out.extend(_passports(text))
    if "DATE_OF_BIRTH" in wanted and any(h in lower for h in _BIRTH_HINTS):
        out.extend(_birth_dates(text))
    return out
