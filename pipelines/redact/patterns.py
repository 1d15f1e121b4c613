"""Pattern PII detectors: e-mail, phone, card, IBAN, SSN, IP, URL, street address.

Each detector is a compiled regex that finds *candidates* plus a validator
(Luhn, IBAN mod-97, SSN area rules, ``ipaddress``, a public-suffix check,
``phonenumbers``) that confirms them, so the expensive checks only ever see the few
substrings that can match. Scores follow presidio's conventions (validated pattern:
high; phone: 0.4 raised by a context word; weak patterns: low).

No presidio import here: ``pipelines.redact.recognizers`` wraps these as presidio
recognizers, and the engine calls them directly (the fast path).
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable, Iterable

from ctxledger.pipelines.redact.lexicon import COMMON_WORDS as _COMMON_WORDS
from ctxledger.pipelines.redact.lexicon import FIRST_NAMES, zipf_en
from ctxledger.pipelines.redact.spans import Detection
from ctxledger.pipelines.redact.textkind import has_digit

# ------------------------------------------------------------------------ e-mail

_EMAIL_RE = re.compile(
    r"(?<![\w.%+\-])[\w][\w.%+\-']{0,63}@(?:[^\W_](?:[\w\-]{0,61}[^\W_])?\.)+"
    r"[^\W\d_]{2,24}(?![\w\-])"
)
_NOT_PERSONAL_LOCAL = frozenset({"git"})
#: File extensions that are not country codes: ``icon@2x.png``, ``x@y.json``.
_FILE_SUFFIXES = frozenset(
    """
    png jpg jpeg gif svg webp bmp ico json yaml yml txt html htm css scss log lock
    tar gz tgz bz2 xz zip whl exe dll dylib java kt js mjs cjs ts tsx jsx py pyc
    pyi rs rb go sh bash toml ini cfg conf xml csv tsv pdf md rst lua php swift
    sql proto parquet bin dat tmp bak orig patch diff
    """.split()
)


def _trim_domain(domain: str) -> str:
    """Drop labels glued on after the address (``a@example.org.Next``: no space
    after the sentence): a capitalised last label after lower-case ones."""
    while domain.count(".") > 1:
        head, _, last = domain.rpartition(".")
        if last[:1].isupper() and not last.isupper() and head == head.lower():
            domain = head
            continue
        break
    return domain


def find_emails(text: str) -> list[Detection]:
    """Syntactically valid e-mail addresses, public suffix or not.

    ``someone@company.internal``, ``.local``, ``.corp`` and ``.example`` are
    personal data like ``@gmail.com`` (issue 11: they were kept because the
    public suffix list does not know them). The domain needs a dot and an
    alphabetic last label that is not a file extension (``icon@2x.png``);
    ``git@host:org/repo`` is a remote, not a person.
    """
    if "@" not in text:
        return []
    out = []
    for m in _EMAIL_RE.finditer(text):
        value = m.group(0).rstrip(".")
        local, _, domain = value.rpartition("@")
        if local.lower() in _NOT_PERSONAL_LOCAL or local.startswith("."):
            continue
        domain = _trim_domain(domain)
        if domain.rsplit(".", 1)[-1].lower() in _FILE_SUFFIXES:
            continue
        value = f"{local}@{domain}"
        out.append(
            Detection(
                m.start(), m.start() + len(value), "EMAIL_ADDRESS", 1.0, "pattern:email"
            )
        )
    return out


# ------------------------------------------------------------------------- phone

PHONE_CONTEXT = (
    "phone",
    "telephone",
    "tel",
    "cell",
    "mobile",
    "call",
    "fax",
    "desk",
    "office",
    "contact",
    "whatsapp",
    "sms",
    "text me",
    "reach me",
    "dial",
    "landline",
    "hotline",
)
_PHONE_CONTEXT_RE = re.compile(
    r"(?i)\b(?:" + "|".join(re.escape(w) for w in PHONE_CONTEXT) + r")\b"
    r"|\b(?i:call(?:ed|ing|s)|rang|texted|phoned)\b"
)
#: How far before a candidate a context word may stand ("Reach me at
#: someone@example.org or +55 51 8222-2578": the e-mail sits in between).
_PHONE_CONTEXT_WINDOW = 64
#: A run of digits with phone-like separators; at least 7 digits overall.
_PHONE_CAND_RE = re.compile(
    r"(?<![\w.\-+/:#=@$])(?:\+|00)?\(?\d{1,4}\)?(?:[ .\-/\u00a0]?\(?\d{1,10}\)?){1,6}"
    r"(?:\s{0,2}(?:x|ext\.?|extension)\s{0,2}\d{1,6})?(?![\w\-/:@]|\.\d)"
)
#: A date or a time; only a whole one ("+61-3-6716-1247" holds "61-3-6716").
#: Digit runs no phone candidate can enter: 67+ digits (a path through
#: ``_PHONE_CAND_RE`` holds at most 2+4+6*10 = 66 digits without a separator) or
#: 16+ digits glued to a letter, ``_``, ``:`` or ``@`` (every end inside the run
#: or right after it fails the final lookahead, and the run cannot be left). The
#: regex would still try every split of such a run into groups before giving up:
#: seconds on one long binary or big-integer string (CTF tool outputs).
_DEAD_DIGITS = re.compile(r"\d(?<!\d\d)(?:\d{66,}|\d{15,}(?=[^\W\dxe]|[:@]))")
_DATE_LIKE = re.compile(
    r"(?<![\d+\-/.])(?:\d{4}[-/.]\d{1,2}[-/.]\d{1,2}|\d{1,2}[-/.]\d{1,2}[-/.]\d{4})"
    r"(?![-/.]?\d)|\d{1,2}:\d{2}|^\d{2,4}[-/.]\d{1,2}[-/.]\d{1,2}$"
)
_GROUPED = re.compile(r"\d[ .\-/\u00a0]\(?\d|\)\s?\d")
_DEFAULT_REGIONS = ("US", "GB", "DE", "FR", "IL", "IN", "CA", "BR", "AU", "NL")


def _mask_dead_digits(text: str) -> str:
    """``text`` with each ``_DEAD_DIGITS`` run but its first digit turned into
    ``a``: same length, and ``_PHONE_CAND_RE`` finds exactly the same matches.

    ``a`` is a word character like a digit (lookbehinds and lookaheads at the
    run's edges see the same class) but no path consumes it; the first digit
    stays so ``.`` before the run still reads as a decimal point (``\\.\\d``).
    """
    if not _DEAD_DIGITS.search(text):
        return text
    return _DEAD_DIGITS.sub(lambda m: m.group(0)[0] + "a" * (len(m.group(0)) - 1), text)


class PhoneFinder:
    """Phone numbers: ``phonenumbers`` validation of regex candidates + context.

    ``phonenumbers.PhoneNumberMatcher`` is only run on candidate substrings that
    hold 7..15 digits, never on whole texts (it is the slowest part of presidio's
    default pipeline on digit-rich agent text). A candidate that no region
    validates still counts when a phone context word precedes it closely and it
    has phone-like grouping.
    """

    base_score = 0.4
    context_score = 0.7

    def __init__(self, regions: Iterable[str] = _DEFAULT_REGIONS) -> None:
        self.regions = tuple(regions)
        self._pn = None

    def _phonenumbers(self):  # noqa: ANN202
        if self._pn is None:
            import phonenumbers  # noqa: PLC0415

            self._pn = phonenumbers
        return self._pn

    def warm(self) -> None:
        """Load every region's metadata now (``phonenumbers`` loads each on first
        use, a second in all, else spent inside the first batches)."""
        pn = self._phonenumbers()
        for region in pn.SUPPORTED_REGIONS:
            pn.PhoneMetadata.metadata_for_region(region)
        for code in pn.COUNTRY_CODES_FOR_NON_GEO_REGIONS:
            pn.PhoneMetadata.metadata_for_nongeo_region(code)

    def _valid(self, candidate: str, any_region: bool = False) -> bool:
        """Valid in one of ``regions`` (or, ``any_region``, in any region at all:
        only asked for the few candidates a phone cue already points at, as
        "called from 19810164" is a Norwegian number no default region knows)."""
        pn = self._phonenumbers()
        regions = self.regions
        if any_region:
            regions = (*self.regions, *sorted(pn.SUPPORTED_REGIONS))
        for region in regions:
            try:
                number = pn.parse(candidate, region)
            except pn.NumberParseException:
                continue
            if pn.is_valid_number(number):
                return True
        return False

    def find(self, text: str) -> list[Detection]:
        """Phone detections in ``text``."""
        out = []
        for m in _PHONE_CAND_RE.finditer(_mask_dead_digits(text)):
            cand = text[m.start() : m.end()]
            digits = sum(ch.isdigit() for ch in cand)
            if digits < 7 or digits > 18:
                continue
            core = cand.split("x")[0].split("ext")[0]
            core_digits = sum(ch.isdigit() for ch in core)
            if core_digits > 15 or _DATE_LIKE.search(cand):
                continue
            separated = _GROUPED.search(core) is not None or cand.startswith(
                ("+", "00", "(")
            )
            left = text[max(0, m.start() - _PHONE_CONTEXT_WINDOW) : m.start()]
            context = _PHONE_CONTEXT_RE.search(left) is not None
            if not separated and not context:
                continue  # a bare digit run: an id, a count, an epoch
            if self._valid(core.strip()):
                score = self.context_score if context else self.base_score
            elif context and separated and core_digits >= 7:
                score = self.base_score
            elif context and 8 <= core_digits <= 13 and self._valid(core.strip(), True):
                score = self.base_score
            else:
                continue
            start, end = m.start(), m.end()
            while end > start and text[end - 1] in " .-":
                end -= 1
            if text[end - 1] == ")" and "(" not in text[start:end]:
                end -= 1
            out.append(Detection(start, end, "PHONE_NUMBER", score, "pattern:phone"))
        return out


# ------------------------------------------------------------------ credit cards

# The left-boundary lookbehinds sit after the first digit (``\d(?<!x\d)``) so the
# regex starts with a character class, which ``re`` scans for quickly; the matches
# are the same as with the lookbehind first.
_CARD_RE = re.compile(r"\d(?<![\w\-.]\d)(?:[ \-]?\d){11,18}(?![\w\-]|\.\d)")
#: Issuer prefixes by length (IIN ranges of Visa, Mastercard, Amex, Discover,
#: JCB, Diners, Maestro, UnionPay, Mir): 12-digit Maestro, 15-digit JCB
#: ``1800``/``2131``, 19-digit Visa... A Luhn-valid number of another prefix
#: counts only next to a card word (``card``, ``visa``, ``cc``).
_CARD_PREFIX_BY_LEN = {
    12: re.compile(r"0604|5018|5020|5038|5[6-8]|6304|6390|6759|676[1-3]"),
    13: re.compile(r"4"),
    14: re.compile(r"30[0-5]|3[689]"),
    15: re.compile(r"3[47]|1800|2131"),
    16: re.compile(r"4|5[1-5]|2[2-7]|220[0-4]|35|6011|6[0245]|64[4-9]"),
    17: re.compile(r"5[06-8]|6"),
    18: re.compile(r"5[06-8]|6"),
    19: re.compile(r"4|5[06-8]|6|35"),
}
_CARD_CONTEXT = re.compile(
    r"(?i)\b(?:card|cards|visa|master\s?card|amex|american express|maestro|discover|"
    r"jcb|diners|unionpay|credit|debit|cc|ccn|pan|payment)\b"
)


def luhn_ok(digits: str) -> bool:
    """Luhn checksum of a digit string."""
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = ord(ch) - 48
        if i % 2 == 1:
            d *= 2
            if d > 9:
                d -= 9
        total += d
    return total % 10 == 0


def find_cards(text: str) -> list[Detection]:
    """Payment card numbers: 12-19 digits, one kind of separator, Luhn.

    With an issuer prefix of its length the number is a card (score 1.0);
    any other Luhn-valid number starting 2-6 only with a card word in the 40
    characters before it (0.9): 12-digit AWS account ids and 13-digit
    millisecond timestamps stay.
    """
    out = []
    for m in _CARD_RE.finditer(text):
        raw = m.group(0)
        digits = raw.replace(" ", "").replace("-", "")
        if len(set(digits)) < 3 or len({ch for ch in raw if not ch.isdigit()}) > 1:
            continue
        if not luhn_ok(digits):
            continue
        prefix = _CARD_PREFIX_BY_LEN[len(digits)]
        if prefix.match(digits):
            score = 1.0
        elif digits[0] in "23456" and _CARD_CONTEXT.search(
            text, max(0, m.start() - 40), m.start()
        ):
            score = 0.9
        else:
            continue
        out.append(Detection(m.start(), m.end(), "CREDIT_CARD", score, "pattern:card"))
    return out


# -------------------------------------------------------------------------- IBAN

_IBAN_RE = re.compile(
    r"(?<![A-Za-z0-9])[A-Z]{2}\d{2}[ ]?(?:[A-Z0-9]{4}[ ]?){2,7}[A-Z0-9]{1,4}"
    r"(?![A-Za-z0-9])"
)


def iban_ok(value: str) -> bool:
    """ISO 13616 mod-97 check of an IBAN (spaces ignored)."""
    compact = value.replace(" ", "").upper()
    if not 15 <= len(compact) <= 34:
        return False
    rearranged = compact[4:] + compact[:4]
    try:
        number = int("".join(str(int(ch, 36)) for ch in rearranged))
    except ValueError:
        return False
    return number % 97 == 1


def find_ibans(text: str) -> list[Detection]:
    """IBANs that pass the mod-97 check."""
    out = []
    for m in _IBAN_RE.finditer(text):
        value = m.group(0).rstrip()
        if iban_ok(value):
            out.append(
                Detection(
                    m.start(), m.start() + len(value), "IBAN_CODE", 1.0, "pattern:iban"
                )
            )
    return out


# --------------------------------------------------------------------------- SSN

_SSN_RE = re.compile(r"(\d(?<![\w\-.]\d)\d{2})([\- .]?)(\d{2})\2(\d{4})(?![\w\-]|\.\d)")
_SSN_CONTEXT = re.compile(r"(?i)\b(?:ssn|social security|social sec|ss#|ss no)\b")


def ssn_ok(area: str, group: str, serial: str) -> bool:
    """SSA validity rules (area not 000/666/9xx, group and serial non-zero)."""
    if area in ("000", "666") or area[0] == "9":
        return False
    if group == "00" or serial == "0000":
        return False
    return len(set(area + group + serial)) > 1


def find_ssns(text: str) -> list[Detection]:
    """US social security numbers; undelimited ones need a context word."""
    out = []
    for m in _SSN_RE.finditer(text):
        area, sep, group, serial = m.groups()
        if not ssn_ok(area, group, serial):
            continue
        left = text[max(0, m.start() - 40) : m.start()]
        context = _SSN_CONTEXT.search(left) is not None
        if sep:
            score = 0.85 if context else 0.5
        else:
            if not context:
                continue
            score = 0.6
        out.append(Detection(m.start(), m.end(), "US_SSN", score, "pattern:ssn"))
    return out


# ---------------------------------------------------------------------------- IP

_IPV4_RE = re.compile(r"\d(?<![\w.]\d)\d{0,2}\.(?:\d{1,3}\.){2}\d{1,3}(?![\w]|\.\d)")
_IPV6_RE = re.compile(
    r"(?<![\w:.])(?:[0-9A-Fa-f]{1,4}:){2,7}(?::|[0-9A-Fa-f]{1,4})"
    r"(?:(?<=:)[0-9A-Fa-f]{1,4})?(?::[0-9A-Fa-f]{1,4}){0,6}(?![\w:])"
    r"|(?<![\w:.])::(?:[0-9A-Fa-f]{1,4}:){0,6}[0-9A-Fa-f]{1,4}(?![\w:])"
)
_VERSION_LEFT = re.compile(r"(?i)(?:\bv|version\s*|ver\s*|release\s*)$")


def _ip_ok(value: str) -> bool:
    try:
        ip = ipaddress.ip_address(value)
    except ValueError:
        return False
    return not (ip.is_loopback or ip.is_unspecified or ip.is_multicast)


def find_ips(text: str) -> list[Detection]:
    """IPv4 and IPv6 addresses (loopback/unspecified/multicast skipped)."""
    out = []
    if "." in text:
        for m in _IPV4_RE.finditer(text):
            if _VERSION_LEFT.search(text, max(0, m.start() - 10), m.start()):
                continue
            if _ip_ok(m.group(0)):
                out.append(
                    Detection(m.start(), m.end(), "IP_ADDRESS", 0.6, "pattern:ip")
                )
    if "::" in text or text.count(":") >= 5:
        for m in _IPV6_RE.finditer(text):
            value = m.group(0)
            if value.count(":") < 2 or sum(ch.isalnum() for ch in value) < 3:
                continue
            if value.count(":") < 4 and _DATE_LIKE.search(value) and "::" not in value:
                continue
            if _ip_ok(value):
                out.append(
                    Detection(m.start(), m.end(), "IP_ADDRESS", 0.6, "pattern:ip")
                )
    return out


# --------------------------------------------------------------------------- URL

_URL_RE = re.compile(r"\b(?:https?|ftp)://[^\s<>\"'`]+[^\s<>\"'`.,;:!?)\]}]")


def find_urls(text: str) -> list[Detection]:
    """URLs (only used when a policy enables ``URL``)."""
    if "://" not in text:
        return []
    return [
        Detection(m.start(), m.end(), "URL", 0.6, "pattern:url")
        for m in _URL_RE.finditer(text)
    ]


# ---------------------------------------------------------------- street address

_STREET_TYPES = (
    r"street|st|road|rd|avenue|ave|boulevard|blvd|drive|dr|lane|ln|way|court|ct|"
    r"place|pl|square|sq|terrace|parkway|pkwy|highway|hwy|circle|crescent|close|"
    r"grove|gardens|row|alley|trail|plaza|mews|quay|wharf"
)
_STREET_SUFFIXES = (
    r"straat|strasse|straße|gasse|steeg|laan|plein|gracht|kade|gürtel|platz|"
    r"allee|gade|vej|vägen|gatan|katu|utca|útja|ulica|ulice|náměstí|namesti|"
    r"stræde|damm|ufer|chaussee|gata|veien|vegen|kuja|polku|bulevardi|väylä|"
    r"gränd|torget|singel|dreef|sokak|sokağı|caddesi|bulvarı"
)
_STREET_SUFFIXES_2 = r"weg|tie|vei|väg|kaari|rinne|ranta"
#: Street words of many languages, as a separate word ("rue", "ul.", "Jalan",
#: "tér") or the end of a compound ("Nassaustraat", "Neonkuja", "Schlossweg").
_STREET_SEPARATE = (
    r"rue|calle|avenida|rua|piazza|plac|stadion|chemin|allée|impasse|quai|cours|"
    r"boulevard|viale|vicolo|largo|corso|piazzale|paseo|camino|carrera|cuesta|"
    r"ronda|travesía|travessa|praça|estrada|alameda|jalan|gang|drumul|strada|"
    r"bulevardul|aleea|calea|splaiul|aleja|tér|út|körút|köz|nábřeží|třída|phố|"
    r"đường|ul\.|al\.|jl\.|gg\.|str\.|av\."
)
_STREET_WORDS = (
    r"[\w'\-]*(?:" + _STREET_SUFFIXES + r")|[\w'\-]+(?:" + _STREET_SUFFIXES_2 + r")"
    r"|(?:" + _STREET_SEPARATE + r")|(?-i:Via|Viale)"
)
_UNIT = r"(?:apt|apartment|suite|ste|unit|flat|floor|fl|room|rm|bldg|building)\.?"
_WORD = r"[^\W\d_][\w'.\-]*"
_CWORD = r"(?:[A-Z]|[^\W\d_a-z])[\w'.\-]*"
_NUM = r"\d{1,5}[a-zA-Z]?"
#: "975 Sunset Drive", "23 8 wressle road", "1755 Nelson Mandela Drive"
_STREET_A = (
    r"\b" + _NUM + r"(?:[ \t]+" + _NUM + r")?[ \t]+(?:" + _WORD + r"[ \t]+){0,4}"
    r"(?:" + _STREET_TYPES + r")\b\.?"
)
#: "Nassaustraat 123", "48 107 Rue Abdelaziz Thâalbi", "Weblinger Gürtel 92"
_STREET_B = (
    r"(?:\b"
    + _NUM
    + r",?[ \t]+){0,2}(?-i:(?:"
    + _CWORD
    + r"[ \t]+){0,2})\b(?:"
    + _STREET_WORDS
    + r")(?:(?<=\.)|\b)(?:[ \t]+"
    + _WORD
    + r"){0,3}(?:[ \t]+(?:No\.?[ \t]*)?"
    + _NUM
    + r"(?:/\d{1,5})?\b\.?)?"
)
#: "87 Jakobi 69", "03 Πλατεία Μαβίλη 170": building, street name, number; only
#: with an address cue nearby or a unit right after, and followed by a comma, a
#: line end or a unit.
_STREET_C = (
    r"\b"
    + _NUM
    + r"[ \t]+(?:"
    + _NUM
    + r"[ \t]+)?"
    + _WORD
    + r"(?:[ \t]+"
    + _WORD
    + r"){0,3}[ \t]+"
    + _NUM
    + r"\b\.?(?=[ \t]*(?:,|\n|$|(?i:"
    + _UNIT
    + r")))"
)
_STRONG_RE = re.compile(r"(?i)" + _STREET_A + "|" + _STREET_B)
_WEAK_RE = re.compile(_STREET_C, re.M)
_HINT_RE = re.compile(
    r"(?i)\b(?:" + _STREET_TYPES + r"|via|" + _STREET_SEPARATE + r")(?!\w)"
    r"|(?:" + _STREET_SUFFIXES + r"|" + _STREET_SUFFIXES_2 + r")\b"
    r"|\b" + _UNIT + r"\s*\d"
)
#: ``_HINT_RE`` split in three case-sensitive parts for lower-cased text: the
#: same test at a quarter of the cost (a case-insensitive alternation without a
#: leading ``\b`` is tried at every position of every text that has a digit).
_HINT_PARTS = (
    re.compile(r"\b(?:" + _STREET_TYPES + r"|via|" + _STREET_SEPARATE + r")(?!\w)"),
    re.compile(r"(?:" + _STREET_SUFFIXES + r"|" + _STREET_SUFFIXES_2 + r")\b"),
    re.compile(r"\b" + _UNIT + r"\s*\d"),
)


def _hint_spans(text: str) -> list[tuple[int, int]]:
    """Spans of ``_HINT_RE`` matches (leftmost, non-overlapping), faster."""
    lowered = text.lower()
    if len(lowered) != len(text):
        return [m.span() for m in _HINT_RE.finditer(text)]
    spans = sorted(m.span() for part in _HINT_PARTS for m in part.finditer(lowered))
    out: list[tuple[int, int]] = []
    for span in spans:
        if not out or span[0] >= out[-1][1]:
            out.append(span)
    return out


def _has_hint(text: str) -> bool:
    """``_HINT_RE.search(text) is not None``, faster."""
    lowered = text.lower()
    if len(lowered) != len(text):  # a few letters lower-case to two characters
        return _HINT_RE.search(text) is not None
    return any(part.search(lowered) is not None for part in _HINT_PARTS)


_UNIT_RE = re.compile(r"(?i)\b" + _UNIT + r"[ \t]*\d{1,5}[a-z]?\b")
_NEXT_UNIT_RE = re.compile(r"(?i)[\s,.]*" + _UNIT + r"[ \t]*\d")
#: Postcode shapes of many countries: 12345, 12345-6789, 74-730, 541 28, H-8523,
#: 1234 AB, SW1A 1AA, K1A 0B1.
POSTCODE = (
    r"(?:[A-Z]{1,2}-)?\d{4,6}(?:-\d{4})?|\d{2,3}[ \-]\d{2,3}|\d{4}[ \t]?[A-Z]{2}"
    r"|[A-Z]{1,2}\d[A-Z\d]?[ \t]?\d[A-Z]{2}|[A-Z]\d[A-Z][ \t]?\d[A-Z]\d"
)
_ZIP_CONTEXT_RE = re.compile(
    r"(?i)(?<![.\-/])\b(?:zip|zip code|zipcode|postal code|postcode|post code|plz"
    r"|cep)\b"
    r"(?:[^\n\d:]{0,30}?\b(?:is|was)\b)?\s*[:#]?\s*"
    r"(?P<zip>(?-i:" + POSTCODE + r"))(?![\w\-])"
)
_ADDRESS_CUE = re.compile(
    r"(?i)\b(?:address|addresses|lives? (?:at|on|in)|lived (?:at|on|in)|located at|"
    r"moved to|return to|ship to|deliver to|mail to|billing|shipping|residence|"
    r"postal|grew up (?:on|at)|resides? (?:at|on)|living (?:at|on))\b"
)
#: Right after a cue: "<words> <number>" ("Nad Mostem 68", "Trytova 2/4"),
#: the house number last, as most of Europe writes it; the street has no
#: street word, so only a cue makes it an address.
_CUE_STREET_RE = re.compile(
    r"(?:[ \t]*(?:is|to|at|on|:)(?![\w]))*[ \t]*"
    r"(?P<street>(?-i:[A-Z]|[^\W\d_a-z])[\w'.\-]*(?:[ \t]+[^\W\d_][\w'.\-]*){0,3}"
    r"[ \t]+(?:No\.?[ \t]*)?\d{1,5}[a-zA-Z]?(?:/\d{1,5})?)"
    r"(?=[ \t]*(?:[,;\n)]|\.(?!\d)|$))",
    re.M,
)
_TAIL_TOKEN = re.compile(
    r"[ \t]*[,.]?[ \t]*(?P<tok>(?i:" + _UNIT + r")[ \t]*\d{1,5}[a-zA-Z]?\b|"
    r"[^\W\d_][\w'\-]*\.?|\d{1,6}(?:-\d{4})?\b|\([^()\n]{1,40}\))"
)
_UNIT_START = re.compile(r"(?i)" + _UNIT + r"[ \t]*\d")
_LINE_PREFIX = re.compile(r"[^\S\n]*(?:[?*\-•>]+[^\S\n]+)?")
_MAX_ADDRESS = 240
_FUNCTION_WORD = re.compile(
    r"(?i)\b(?:with|the|a|an|on|in|at|to|for|from|of|and|or|by|is|are|was|were|"
    r"this|that|my|your|his|her|our|their|it|we|you|he|she|they)\b"
)


#: Cues after which the whole rest of the clause is where someone lives or
#: where a thing goes: "shipped to <address>.", "still living at <address>?".
_CLAUSE_CUE = re.compile(
    r"(?i)\b(?:(?:ship|shipped|deliver|delivered|forward|forwarded|mail|mailed)"
    r"\b[^.?!\n]{0,24}?\bto|(?:living|lives|lived|"
    r"reside|resides|resided|located|based) at|address (?:is|to|:)|grew up (?:on|at))"
    r"[ \t]*:?[ \t]+"
)
#: Lower-case words an address line holds in many languages (street words are
#: matched separately): particles of names ("de", "van", "los") and a few
#: building words.
_ADDRESS_PARTICLES = frozenset(
    "de da do dos das del della di du des la le les el los las van von der den "
    "y e i of the and sur la on am an im auf bei v u na ve nad pod und die et".split()
)
_CLAUSE_TOKEN = re.compile(r"[ \t]*(?:[,/][ \t]*)?(?P<tok>[^\s,.?!;:()]+\.?)")


def _cue_clause(text: str, pos: int) -> int:
    """End of an address clause that starts at ``pos``, or ``pos`` if there is none.

    The clause must run to a sentence end (".", "?", "!", ";", a line end) and
    every token of it must read as part of an address: a number, a word that
    starts upper-case or with a non-ASCII letter, a street or unit word, a name
    particle. It must hold a digit (house number or postcode) or a street word,
    and it is at most 12 tokens long: "shipped to Femkeboulevard 872, Brunei
    5274WE." is an address, "sent to Slack 2 alerts" is not.
    """
    end = last = pos
    count = 0
    evidence = named = False
    while count <= 12:
        m = _CLAUSE_TOKEN.match(text, end)
        if m is None:
            break
        tok = m.group("tok")
        word = tok.rstrip(".")
        low = word.lower()
        if any(c.isdigit() for c in word):
            evidence = True
        elif _HINT_RE.fullmatch(word) or _UNIT_START.match(word + " 1"):
            evidence = True
        elif not word or not (
            word[0].isupper() or not word[0].isascii() or low in _ADDRESS_PARTICLES
        ):
            return pos
        elif any(c.isupper() for c in word[1:]) and not word.isupper():
            return pos  # CamelCase: a product or an identifier ("PyPI 2")
        elif not word.isupper() and zipf_en(low) < 4.0:
            named = True  # a proper name, not "PR 1234" or "Staging 2"
        count += 1
        end = m.end()
        last = m.start("tok") + len(word)
        if text[end : end + 1].isdigit():
            return pos  # "2.1": a version, not a house number
        if tok.endswith(".") and (len(word) > 4 or word.isdigit()):
            break  # "Quadrant." ends the sentence; "Apt." and "Edif." do not
    if not (evidence and named) or count > 12:
        return pos
    end = last
    rest = text[end : end + 2]
    if rest[:1] not in ("", ".", "?", "!", ";", "\n") and not rest.startswith(
        (" \n", ". ")
    ):
        return pos
    return end


def _walk_line(text: str, pos: int, lower_ok: bool = False) -> tuple[int, bool]:
    """Consume address-like tokens from ``pos`` on one line.

    Returns ``(end, reached_line_end)``. Tokens: a unit with its number, a word
    that starts upper-case or with a non-ASCII letter, a 3-6 digit code, a short
    parenthesis. A lower-case ASCII word (except ``nan``; any non-common word when
    ``lower_ok``, i.e. the street itself was written in lower case) or a common
    English word ends the walk.
    """
    end = pos
    while True:
        m = _TAIL_TOKEN.match(text, end)
        if not m:
            break
        tok = m.group("tok")
        if tok[0].isalpha() and not _UNIT_START.match(tok) and tok.lower() != "nan":
            if tok[0].isascii() and tok[0].islower() and not lower_ok:
                break
            if tok.rstrip(".").lower() in _COMMON_WORDS:
                break
        end = m.end()
    line_end = text.find("\n", end)
    rest = text[end : line_end if line_end >= 0 else len(text)]
    return end, not rest.strip(" \t.,;")


def _address_tail(text: str, start: int, end: int) -> int:
    """Extend an address over the rest of its line and following address lines."""
    origin = end
    lower_ok = not any(ch.isupper() for ch in text[start:end])
    end, at_eol = _walk_line(text, end, lower_ok)
    lines = 0
    blank_used = False
    while at_eol and lines < 5 and end - origin < _MAX_ADDRESS:
        nl = text.find("\n", end)
        if nl < 0:
            break
        pos = nl + 1
        line_end = text.find("\n", pos)
        line = text[pos : line_end if line_end >= 0 else len(text)]
        if not line.strip():
            if blank_used or line_end < 0:
                break
            blank_used = True
            pos = line_end + 1
            line_end = text.find("\n", pos)
            line = text[pos : line_end if line_end >= 0 else len(text)]
        if ":" in line or "@" in line or "=" in line or len(line.strip()) > 60:
            break
        if sum(ch.isdigit() for ch in line) > 6:
            break  # a phone or an id line, not a postcode
        first = _LINE_PREFIX.match(text, pos).end()
        new_end, at_eol = _walk_line(text, first, lower_ok)
        if new_end <= first:
            break
        end = new_end
        lines += 1
    return end


def _strong_matches(text: str) -> list[re.Match[str]]:
    """Street matches, searched only in small windows around street-word hits
    (the street-word alternative is slow to scan over long texts)."""
    matches: list[re.Match[str]] = []
    last_end = -1
    for hit_start, hit_end in _hint_spans(text):
        lo = max(0, hit_start - 80, last_end)
        line_start = text.rfind("\n", lo, hit_start)
        if line_start >= 0:
            lo = line_start + 1
        hi = min(len(text), hit_end + 80)
        line_end = text.find("\n", hit_end, hi)
        if line_end >= 0:
            hi = line_end
        for m in _STRONG_RE.finditer(text, lo, hi):
            if m.end() > last_end:
                matches.append(m)
                last_end = m.end()
    return matches


#: A number that a tab or a column gap follows: the line number of a ``cat -n``
#: or editor listing ("   191\tdef close(self)", "113\t  row = ..."), a table
#: cell, never a house number, which one space separates from its street.
_LISTING_NUMBER_RE = re.compile(r"\d{1,6}[a-zA-Z]?(?:\t| {2,})")


def _not_house_number(text: str, start: int) -> bool:
    """Whether the number at ``start`` is a listing line number or the decimals
    of a measure ("891.82 square kilometers"), so no street starts there."""
    if _LISTING_NUMBER_RE.match(text, start):
        return True
    return start >= 2 and text[start - 1] in ".," and text[start - 2].isdigit()


def find_addresses(text: str) -> list[Detection]:
    """Postal addresses (street, unit, city lines, zip) typed LOCATION.

    A street type or street word ("Road", "-straat", "rue") scores 0.9; a bare
    "building name number" needs an address cue nearby ("address", "lives at",
    "billing") or a unit right after, and scores 0.86 (above NER's 0.85, so a
    street named after a person stays one address). Both extend over the rest of
    the line and following short address lines (city, region, zip).
    """
    if not has_digit(text):
        return []
    hint = _has_hint(text)
    cue = _ADDRESS_CUE.search(text) is not None
    out: list[Detection] = []
    if hint:
        for m in _strong_matches(text):
            value = m.group(0).rstrip(" .")
            start, end = m.start(), m.start() + len(value)
            if _FUNCTION_WORD.search(value):
                continue  # "2023 with Dr. Kim": prose, not a street
            if value[:1].isdigit() and _not_house_number(text, start):
                continue  # "  47\t    st.text(": a listing, not a street
            if not any(ch.isdigit() for ch in value) and not re.match(
                r"[ \t,]*\d", text[end : end + 8]
            ):
                continue  # "rue Descartes" alone is not an address
            end = _address_tail(text, start, end)
            out.append(Detection(start, end, "LOCATION", 0.9, "pattern:address"))
    if cue or hint:
        for m in _WEAK_RE.finditer(text):
            value = m.group(0).rstrip(" .")
            start, end = m.start(), m.start() + len(value)
            if _not_house_number(text, start):
                continue
            words = re.findall(_WORD, value)
            if not any(w[0].isupper() or not w.isascii() for w in words if len(w) >= 3):
                continue
            near_cue = _ADDRESS_CUE.search(text, max(0, start - 80), start)
            if not near_cue and not _NEXT_UNIT_RE.match(text, end):
                continue
            end = _address_tail(text, start, end)
            out.append(Detection(start, end, "LOCATION", 0.86, "pattern:address"))
    if cue:
        for c in _ADDRESS_CUE.finditer(text):
            m = _CUE_STREET_RE.match(text, c.end())
            if m is None or _FUNCTION_WORD.search(m.group("street")):
                continue
            start = m.start("street")
            end = _address_tail(text, start, m.end("street"))
            out.append(Detection(start, end, "LOCATION", 0.86, "pattern:address"))
    for c in _CLAUSE_CUE.finditer(text):
        end = _cue_clause(text, c.end())
        if end > c.end():
            out.append(Detection(c.end(), end, "LOCATION", 0.86, "pattern:address"))
    if hint and (cue or out):
        for m in _UNIT_RE.finditer(text):
            out.append(Detection(m.start(), m.end(), "LOCATION", 0.6, "pattern:unit"))
    out.extend(find_us_streets(text))
    lowered = text.lower()
    if "zip" in lowered or "post" in lowered or "plz" in lowered:
        for m in _ZIP_CONTEXT_RE.finditer(text):
            out.append(
                Detection(m.start("zip"), m.end("zip"), "LOCATION", 0.6, "pattern:zip")
            )
    return out


# ------------------------------------------------- US streets (usaddress's CRF)

#: "56366 Meyer Pine", "825 Garrett Circles Apt. 290", "10 N. Oak Skyway": a
#: house number and 1-4 capitalised words; ``usaddress`` then decides whether
#: the words end in a street type (its CRF knows every USPS suffix, so no list
#: here) and where the street ends.
_US_CAND_RE = re.compile(
    r"\d(?<![\w\-.,/:]\d)\d{0,5}[A-Za-z]?(?:[ \t]+(?:[NSEW]|North|South|East|West)\.?)?"
    r"(?:[ \t]+[A-Z][A-Za-z'\-]*\.?){1,4}"
    r"(?:,?[ \t]+(?:Apt|Suite|Unit|Ste|Fl|Floor|Room|Rm|Bldg|#)\.?[ \t]*#?"
    r"[A-Za-z0-9\-]{1,6})?"
)
_US_HINT_RE = re.compile(r"\d[ \t]+(?:[NSEW]\.?[ \t]+)?[A-Z][a-z]")
_US_STREET_LABELS = frozenset(
    {
        "AddressNumber",
        "AddressNumberSuffix",
        "StreetNamePreDirectional",
        "StreetNamePreModifier",
        "StreetNamePreType",
        "StreetName",
        "StreetNamePostType",
        "StreetNamePostDirectional",
        "OccupancyType",
        "OccupancyIdentifier",
        "SubaddressType",
        "SubaddressIdentifier",
    }
)
_usaddress_parse: Callable[[str], list[tuple[str, str]]] | None = None
_usaddress_missing = False


def _us_parser() -> Callable[[str], list[tuple[str, str]]] | None:
    global _usaddress_parse, _usaddress_missing  # noqa: PLW0603 - lazy import
    if _usaddress_parse is None and not _usaddress_missing:
        try:
            import usaddress  # noqa: PLC0415
        except ImportError:  # pragma: no cover - usaddress is a pinned dependency
            _usaddress_missing = True
        else:
            _usaddress_parse = usaddress.parse
    return _usaddress_parse


def _everyday(word: str) -> bool:
    word = word.strip(".,")
    return word.lower() not in FIRST_NAMES and zipf_en(word) >= 4.5


def find_us_streets(text: str) -> list[Detection]:
    """US-style street addresses confirmed by ``usaddress`` (score 0.88).

    The candidate must parse as house number, street name and a street type
    (``StreetNamePostType``/``StreetNamePreType``), in that order from its
    first token, so "404 Not Found" and "3 Failed Checks" are not streets.
    """
    if _US_HINT_RE.search(text) is None:
        return []
    parse = _us_parser()
    if parse is None:
        return []
    out = []
    for m in _US_CAND_RE.finditer(text):
        cand = m.group(0)
        if cand[0] == "0" or _not_house_number(text, m.start()):
            continue  # "0005 Extract OS": a hex dump offset, not a house number
        try:
            tokens = parse(cand)
        except Exception:  # noqa: BLE001 - the CRF may choke on odd input
            continue
        labels = [label for _, label in tokens]
        if not labels or labels[0] != "AddressNumber" or "StreetName" not in labels:
            continue
        if not ({"StreetNamePostType", "StreetNamePreType"} & set(labels)):
            continue
        pos = 0
        end = 0
        for token, label in tokens:
            at = cand.find(token, pos)
            if at < 0 or label not in _US_STREET_LABELS:
                break
            pos = end = at + len(token)
        value = cand[:end].rstrip(" ,")
        if _FUNCTION_WORD.search(value):
            continue
        start = m.start()
        stop = _address_tail(text, start, start + len(value))
        names = [t for t, label in tokens if label == "StreetName"]
        if stop == start + len(value) and all(_everyday(w) for w in names):
            # "2 Data Points", "3 Main Street": everyday words need a unit, a
            # city/zip after them or an address cue before them
            if "Occupancy" not in " ".join(labels) and not _ADDRESS_CUE.search(
                text, max(0, start - 80), start
            ):
                continue
        out.append(Detection(start, stop, "LOCATION", 0.88, "pattern:us_street"))
    return out


#: Entity type -> detector function over a whole text.
PATTERN_DETECTORS: dict[str, Callable[[str], list[Detection]]] = {
    "EMAIL_ADDRESS": find_emails,
    "CREDIT_CARD": find_cards,
    "IBAN_CODE": find_ibans,
    "US_SSN": find_ssns,
    "IP_ADDRESS": find_ips,
    "URL": find_urls,
}
