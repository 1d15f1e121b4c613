"""Pattern rules for memory statements in redacted sentences.

High-precision rules that decide a sentence's memory ``kind`` and, where they can,
its ``slot`` (what it is about) and ``value``:

* standing rules: "any ticket you open ...", "from now on ...", "never ...",
  "... without my approval", "... every 30 minutes";
* attributes of the user: "my employee number 4417", "my account is A-123",
  "my employee number changed to 4471" (slot ``employee_number``);
* preferences: "I prefer short answers" (slot ``preference:answers``);
* identity: "I'm <PERSON:ab12cd34>", "I am the account owner";
* facts: "the affected shard is pay-shard-7" (slot ``affected_shard``);
* inferences in assistant text: "it seems you prefer ...", "you appear to ...".

A sentence no rule matches goes to the prototype classifier (``classify``).
Placeholders such as ``<PERSON:ab12cd34>`` are treated as values.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: Bump when a rule changes what it extracts (part of the extractor version).
PATTERNS_VERSION = "3"

_PLACEHOLDER = r"<[A-Z][A-Z0-9_]*(?::[0-9a-f]+)?>"
_TOKEN = rf"(?:{_PLACEHOLDER}|[A-Za-z0-9$][\w.@+\-/$,]*[\w$]|[A-Za-z0-9$])"

_ATTR_NOUNS = (
    r"(?:number|no\.?|id|account|email|e-mail|address|name|username|handle|phone|"
    r"plan|timezone|time zone|language|title|role|team|manager|department|company|"
    r"employer|pronouns|login|extension|desk|office|region|currency|locale)"
)
_COPULA = (
    r"(?:is now|is|=|:|has changed to|has been changed to|changed to|"
    r"was changed to|is changing to|became|becomes|will be|should be|now is|"
    r"has become|moved to|is set to)"
)
# "my employee number is 4417" / "my employee number changed to 4471"
_ATTR_COPULA = re.compile(
    rf"\bmy\s+(?P<slot>(?:[a-z][\w-]*\s+){{0,2}}?{_ATTR_NOUNS})\s*{_COPULA}\s+"
    rf"(?:now\s+)?(?P<value>{_TOKEN}(?:\s+{_TOKEN}){{0,3}}?)(?=\s*(?:[,;.!?)]|$|\s+"
    r"(?:after|since|because|and|but|for|from|so|when|until|as|on|in)\b))",
    re.IGNORECASE,
)
# "my employee number 4417" (no verb: the value must look like an identifier)
_ATTR_ID = re.compile(
    rf"\bmy\s+(?P<slot>(?:[a-z][\w-]*\s+){{0,2}}?{_ATTR_NOUNS})\s+"
    rf"(?P<value>{_PLACEHOLDER}|[A-Za-z]*\d[\w.\-/]*)",
    re.IGNORECASE,
)

_RULE_START = re.compile(
    r"^(?:(?:also|and|so|meanwhile|ok|okay|please|remember)[,:]?\s+)*"
    r"(?:do not|don't|never|always|make sure|only ever|be sure to|remember to)\b",
    re.IGNORECASE,
)
_RULE_ANYWHERE = re.compile(
    r"\b(?:from now on|going forward|standing rule|standing instruction|by default|"
    r"every time|whenever|each time|at all times|in (?:the )?future|as a rule|"
    r"for all future|without (?:my|our) (?:approval|permission|sign-off|consent|ok)|"
    r"(?:any|every|all)\s+(?:[a-z][\w-]*\s+){1,2}(?:you|we)\s+(?:open|send|file|"
    r"create|make|write|book|raise|submit|issue)|"
    r"every\s+\d+\s+(?:seconds|minutes|hours|days|weeks)|"
    r"(?:any|every|all)\s+(?:[a-z][\w-]*\s+){0,2}(?:ticket|tickets|request|requests|"
    r"report|reports|invoice|invoices|order|orders|message|messages|email|emails)\b)",
    re.IGNORECASE,
)

_PREFERENCE = re.compile(
    r"\bI\s+(?:really\s+|strongly\s+|generally\s+|usually\s+|always\s+)?"
    r"(?P<verb>prefer|would prefer|'d prefer|would rather have|'d rather have|"
    r"like|love|enjoy|hate|dislike|don't like|do not like|can't stand)\s+"
    r"(?!to\b|it\b|that\b|this\b|you\b|if\b|when\b)(?P<value>[^,;.!?]+)",
    re.IGNORECASE,
)
_KEEP_PREFERENCE = re.compile(
    r"\b(?:please\s+)?keep\s+(?:your\s+|the\s+)?(?P<head>answers|replies|responses|"
    r"summaries|messages|updates|explanations)\s+(?P<value>[a-z]+(?:\s+and\s+[a-z]+)?)",
    re.IGNORECASE,
)

_IDENTITY = re.compile(
    r"(?:^|[,.;!]\s*|\b(?:hi|hello|hey)[,!]?\s+)(?:I am|I'm|my name is|this is|call me)"
    rf"\s+(?P<value>{_PLACEHOLDER}|(?:a|an|the)\s+[a-z][\w-]*(?:\s+[a-z][\w-]*){{0,3}}|"
    r"[A-Z][a-z]+(?:\s+[A-Z][a-z]+)?)",
)
_NOT_ROLE = re.compile(r"^(?:a|an|the)\s+(?:bit|little|lot|few|moment|second)\b")

_DEFINITION = re.compile(
    r"\b(?:the|our|my)\s+(?P<slot>[a-z][\w-]*(?:\s+[a-z][\w-]*){0,2}?)\s+"
    r"(?:is|was|are|were)\s+(?P<value>(?:not\s+)?[^,;.!?]+?)\s*(?:[,;.!?]|$)",
    re.IGNORECASE,
)
_CONFIRMED = re.compile(
    r"\b(?:confirmed|verified|it turns out|turns out|we found|found that|"
    r"we decided|decided|agreed)\b",
    re.IGNORECASE,
)

_INFERENCE = re.compile(
    r"\b(?:it (?:seems|sounds|looks|appears)(?: like| as if| as though)?(?: that)?|"
    r"you (?:seem|appear)(?: to be)?|I (?:assume|guess|infer|gather|suspect|take it)"
    r"(?: that)?|(?:apparently|presumably|probably|perhaps|maybe),?)\s+"
    r"(?P<clause>you(?:r|'re)?\b[^.!?]*)",
    re.IGNORECASE,
)
_YOU_SEEM = re.compile(
    r"\byou (?:seem|appear)(?P<clause>(?: to be| to| like)?\s+[^.!?]+)", re.IGNORECASE
)

# Explicit corrections: "Correction: ... 4471, not 4417", "use 4471 instead of
# 4417", "actually ...", "from now on ...". ``_NAMED_OLD`` finds the value a
# correction names as wrong (the phrase after "not" / "instead of" ...).
_CORRECTION = re.compile(
    r"\b(?:correction|corrected|correcting|actually|instead|from now on|"
    r"going forward|no longer|rather than)\b",
    re.IGNORECASE,
)
_NAMED_OLD = re.compile(
    r"\b(?:not|instead of|rather than|no longer|in place of|replacing)\s+"
    rf"(?:(?:the|my|an?|our)\s+)?(?P<old>{_TOKEN}(?:\s+{_TOKEN}){{0,3}})",
    re.IGNORECASE,
)

_WORD = re.compile(r"[a-z][a-z0-9]*")
_STOP = frozenset(
    """a an the my our your to for of over than instead and or with in on at by
    very really more less much some any""".split()
)


@dataclass(frozen=True)
class PatternHit:
    """What a rule found: the kind, slot and value (either may be None)."""

    kind: str
    slot: str | None
    value: str | None
    rule: str
    confidence: float = 1.0


def normalize_slot(text: str) -> str:
    """``"Employee  Number"`` -> ``employee_number`` (stable supersession keys)."""
    words = [w for w in _WORD.findall(text.lower().replace("e-mail", "email"))]
    words = [w for w in words if w not in _STOP] or words
    slot = "_".join(words)
    return {"no": "number"}.get(slot, slot.replace("_no", "_number"))


def normalize_value(value: str) -> str:
    """Trimmed value, trailing punctuation dropped (kept case: ids are exact)."""
    return value.strip().rstrip(".,;:!?)").strip()


def _head(value: str) -> str:
    """The head noun of a short phrase: its last content word before a comparison."""
    phrase = re.split(r"\b(?:over|than|instead of|rather than|to|when|if)\b", value)[0]
    words = [w for w in _WORD.findall(phrase.lower()) if w not in _STOP]
    return words[-1] if words else normalize_slot(value)


def attribute(text: str) -> tuple[str, str] | None:
    """``(slot, value)`` of a "my <attribute> ... <value>" statement, if any."""
    match = _ATTR_COPULA.search(text) or _ATTR_ID.search(text)
    if not match:
        return None
    value = normalize_value(match.group("value"))
    if not value:
        return None
    return normalize_slot(match.group("slot")), value


def is_rule(text: str) -> bool:
    """Does the sentence state a standing rule (an instruction that persists)?"""
    return bool(_RULE_START.search(text) or _RULE_ANYWHERE.search(text))


def preference(text: str) -> tuple[str, str] | None:
    """``(slot, value)`` of "I prefer short answers" / "keep answers short"."""
    match = _PREFERENCE.search(text)
    if match:
        value = normalize_value(match.group("value"))
        verb = match.group("verb").lower()
        if any(neg in verb for neg in ("hate", "dislike", "don't", "do not", "can't")):
            value = f"not {value}"
        return f"preference:{_head(match.group('value'))}", value
    match = _KEEP_PREFERENCE.search(text)
    if match:
        return f"preference:{match.group('head').lower()}", match.group("value")
    return None


def identity(text: str) -> tuple[str, str] | None:
    """``(slot, value)`` of "I'm <PERSON:..>" (name) or "I am the owner" (role)."""
    match = _IDENTITY.search(text)
    if not match:
        return None
    value = normalize_value(match.group("value"))
    if value.startswith("<"):
        return ("name" if value.startswith("<PERSON") else "identity"), value
    if value[:1].islower():
        if _NOT_ROLE.match(value):
            return None
        return "role", value
    return "name", value


def definition(text: str) -> tuple[str, str] | None:
    """``(slot, value)`` of "the affected shard is pay-shard-7"."""
    match = _DEFINITION.search(text)
    if not match:
        return None
    slot = normalize_slot(match.group("slot"))
    value = normalize_value(match.group("value"))
    if not slot or not value or len(value.split()) > 8:
        return None
    return slot, value


def match_user_sentence(text: str) -> PatternHit | None:
    """The memory a user's sentence states, by rule; None: leave it to the model."""
    if text.rstrip().endswith("?"):
        return None
    attr = attribute(text)
    if is_rule(text):
        slot, value = attr if attr else (None, None)
        return PatternHit("rule", slot, value, "rule")
    if attr:
        return PatternHit("identity", attr[0], attr[1], "attribute")
    pref = preference(text)
    if pref:
        return PatternHit("preference", pref[0], pref[1], "preference")
    ident = identity(text)
    if ident:
        return PatternHit("identity", ident[0], ident[1], "identity")
    if _CONFIRMED.search(text):
        found = definition(text)
        slot, value = found if found else (None, None)
        return PatternHit("fact", slot, value, "confirmed")
    return None


def slot_for_fact(text: str) -> tuple[str | None, str | None]:
    """Best-effort slot and value of a fact-like sentence the classifier accepted."""
    found = attribute(text) or definition(text)
    return found if found else (None, None)


_SECOND_TO_FIRST = (
    (re.compile(r"\byou're\b", re.IGNORECASE), "I'm"),
    (re.compile(r"\byou are\b", re.IGNORECASE), "I am"),
    (re.compile(r"\byour\b", re.IGNORECASE), "my"),
    (re.compile(r"\byou\b", re.IGNORECASE), "I"),
)


def _first_person(clause: str) -> str:
    for pattern, replacement in _SECOND_TO_FIRST:
        clause = pattern.sub(replacement, clause)
    return clause


def match_inference(text: str) -> PatternHit | None:
    """An assistant sentence that concludes something about the user.

    The kind and slot come from the user rules applied to the clause in the first
    person ("you prefer short answers" -> "I prefer short answers").
    """
    if text.rstrip().endswith("?"):
        return None
    match = _INFERENCE.search(text)
    if match:
        clause = _first_person(match.group("clause"))
    else:
        seem = _YOU_SEEM.search(text)
        if not seem:
            return None
        rest = seem.group("clause")
        if rest.startswith(" to be "):
            clause = "I am " + rest[len(" to be ") :]
        elif rest.startswith(" to "):
            clause = "I " + rest[len(" to ") :]
        else:
            clause = "I am " + rest.lstrip()
    pref = preference(clause)
    if pref:
        return PatternHit("preference", pref[0], pref[1], "inference", 0.5)
    attr = attribute(clause)
    if attr:
        return PatternHit("identity", attr[0], attr[1], "inference", 0.5)
    ident = identity(clause)
    if ident:
        return PatternHit("identity", ident[0], ident[1], "inference", 0.5)
    if re.search(r"\b(?:prefer|like|rather|want)\b", clause, re.IGNORECASE):
        return PatternHit("preference", None, None, "inference", 0.5)
    return PatternHit("fact", None, None, "inference", 0.5)


@dataclass(frozen=True)
class Correction:
    """An explicit correction and the old values it names (maybe none).

    ``names`` holds every leading run of one to four words after "not" /
    "instead of" / "rather than" ... (casefolded), so "not 4417 any more"
    names ``4417`` as well as ``4417 any``: a correction names a value when
    one of these equals it.
    """

    names: frozenset[str]

    def names_value(self, value: str) -> bool:
        return " ".join(value.casefold().split()) in self.names


def correction(text: str) -> Correction | None:
    """The explicit correction a sentence makes, if any.

    A sentence is a correction when it says so ("Correction:", "actually",
    "instead", "from now on", "no longer", "rather than") or names an old
    value ("..., not 4417"). Supersession (``resolve``) uses it only where
    order cannot decide: two statements at the same time in different
    sessions, or in one message.
    """
    names: set[str] = set()
    for match in _NAMED_OLD.finditer(text):
        words = match.group("old").split()
        for n in range(1, len(words) + 1):
            names.add(normalize_value(" ".join(words[:n])).casefold())
    names.discard("")
    if not names and not _CORRECTION.search(text):
        return None
    return Correction(frozenset(names))
