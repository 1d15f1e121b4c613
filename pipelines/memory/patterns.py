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
* inferences in assistant text: "it seems you prefer ...", "you appear to ...";
* membership tiers ("I'm a silver member", "my Gold membership"), where the user
  lives ("I live in Princeton"), ids given as a name ("I'm omar_rossi_1241"),
  "under the name <name>", and a short reply to an agent's question for an
  attribute ("Could you provide your user ID?" -> "Sure, it's mia_li_3668").

``not_a_memory`` names what is never a memory however it is phrased: moods and
complaints ("I'm really unhappy with the service"), one-off requests ("I want to
cancel this booking") and ids of transaction objects (a reservation, order,
appointment or ticket number): they are session events, not facts about the
subject.

A sentence no rule matches goes to the prototype classifier (``classify``).
Placeholders such as ``<PERSON:ab12cd34>`` are treated as values.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: Bump when a rule changes what it extracts (part of the extractor version).
PATTERNS_VERSION = "5"

_PLACEHOLDER = r"<[A-Z][A-Z0-9_]*(?::[0-9a-f]+)?>"
_TOKEN = rf"(?:{_PLACEHOLDER}|[A-Za-z0-9$][\w.@+\-/$,]*[\w$]|[A-Za-z0-9$])"

_ATTR_NOUNS = (
    r"(?:number|no\.?|id|account|email|e-mail|address|name|username|handle|phone|"
    r"plan|timezone|time zone|language|title|role|team|manager|department|company|"
    r"employer|pronouns|login|extension|desk|office|region|currency|locale|"
    r"identifier|airport|city|country|hometown|nationality|school|university|"
    r"pronoun)"
)
_COPULA = (
    r"(?:is now|is|=|:|has changed to|has been changed to|changed to|"
    r"was changed to|is changing to|became|becomes|will be|should be|now is|"
    r"has become|moved to|is set to|, it's|, it is|, which is)"
)
_QUOTE = "[\"'\u201c\u201d\u2018\u2019]"
# "my employee number is 4417" / "my employee number changed to 4471"
_ATTR_COPULA = re.compile(
    rf"\bmy\s+(?P<slot>(?:[a-z][\w-]*\s+){{0,2}}?{_ATTR_NOUNS})\s*{_COPULA}\s+"
    rf"(?:now\s+)?{_QUOTE}?(?P<value>{_TOKEN}(?:\s+{_TOKEN}){{0,3}}?){_QUOTE}?"
    r"(?=\s*(?:[,;.!?)]|$|\s+(?:after|since|because|and|but|for|from|so|when|until|"
    r"as|on|in)\b))",
    re.IGNORECASE,
)
# "my employee number 4417" (no verb: the value must look like an identifier)
_ATTR_ID = re.compile(
    rf"\bmy\s+(?P<slot>(?:[a-z][\w-]*\s+){{0,2}}?{_ATTR_NOUNS})\s+"
    rf"(?P<value>{_PLACEHOLDER}|[A-Za-z]*\d[\w.\-/]*)",
    re.IGNORECASE,
)

# "Email is x@y" / "the user ID is 12345" at the start of a sentence or clause
_ATTR_BARE = re.compile(
    rf"^(?:the\s+)?(?P<slot>(?:user\s*)?(?:{_ATTR_NOUNS[3:-1]}))\s+(?:is|=|:)\s+"
    rf"{_QUOTE}?(?P<value>{_TOKEN}){_QUOTE}?\s*[.!]?$",
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
    r"\bI(?:\s+|(?=['\u2019]))(?:really\s+|strongly\s+|generally\s+|usually\s+|"
    r"always\s+)?(?P<verb>prefer|would prefer|['\u2019]d prefer|would rather have|"
    r"['\u2019]d rather have|"
    r"like|love|enjoy|hate|dislike|don't like|do not like|can't stand)\s+"
    r"(?!to\b|it\b|that\b|this\b|you\b|if\b|when\b)(?P<value>[^,;.!?]+)",
    re.IGNORECASE,
)
#: A preferred "value" that picks among offered options or asks for a one-off
#: outcome ("the cheapest option", "a flight that departs after 8", "not to be
#: transferred", "a full refund"): a choice in this session, not a standing
#: preference.
_ONE_OFF_VALUE = re.compile(
    r"^(?:a|an|the|this|that|these|those|not to be)\b|\b(?:option|options|one|"
    r"refund|transfer|transferred|cheapest)\b(?!-)",
    re.IGNORECASE,
)
_KEEP_PREFERENCE = re.compile(
    r"\b(?:please\s+)?keep\s+(?:your\s+|the\s+)?(?P<head>answers|replies|responses|"
    r"summaries|messages|updates|explanations)\s+(?P<value>[a-z]+(?:\s+and\s+[a-z]+)?)",
    re.IGNORECASE,
)

_IDENTITY = re.compile(
    r"(?:^|[,.;!]\s*|\b(?:hi|hello|hey)[,!]?\s+)(?:(?:I am|I'm|my name is|call me)"
    rf"\s+(?P<value>{_PLACEHOLDER}|(?:a|an|the)\s+[a-z][\w-]*(?:\s+[a-z][\w-]*){{0,3}}|"
    r"[A-Z][a-z]+(?:\s+[A-Z][a-z]+)?)"
    rf"|this is\s+(?P<value2>{_PLACEHOLDER}|[A-Z][a-z]+(?:\s+[A-Z][a-z]+)?)\b)",
)
#: "I'm omar_rossi_1241": a login-like token (letters, then ``_``/``.``/digits).
_HANDLE = re.compile(r"[A-Za-z][A-Za-z0-9]*(?:[._][A-Za-z0-9]+)*[._]?\d+[A-Za-z0-9]*")
_IDENTITY_HANDLE = re.compile(
    r"(?:^|[,.;!]\s*|\b(?:but|and|hi|hello|hey)[,!]?\s+)(?:I am|I'm|I\u2019m)\s+"
    r"(?P<value>[A-Za-z][A-Za-z0-9]*(?:[._][A-Za-z0-9]+)+)\b"
)
_MEMBERSHIP = re.compile(
    r"\b(?:(?i:I am|I'm|I\u2019m|as)\s+(?i:(?:actually|now|currently|still|also|"
    r"already|finally)\s+)*(?:a|an)\s+(?:valued\s+|loyal\s+)?"
    r"(?P<tier>{tiers})\s+(?:member|customer|tier)\b|"
    r"\b(?i:my)\s+(?P<tier2>{tiers})\s+(?:membership|status|tier|plan)\b)"
)
_TIERS = (
    r"[Gg]old|[Ss]ilver|[Bb]ronze|[Pp]latinum|[Dd]iamond|[Pp]remium|[Rr]egular|"
    r"[Bb]asic|[Pp]ro|[Pp]lus|[Ee]lite|VIP|[Ee]nterprise|[Ff]ree"
)
_MEMBERSHIP = re.compile(_MEMBERSHIP.pattern.format(tiers=_TIERS))
_LIVES = re.compile(
    r"\b(?:I|we)\s+(?:actually\s+|currently\s+|now\s+|just\s+|recently\s+)?"
    r"(?:live|reside|am based|'m based|\u2019m based|moved|relocated|have moved|"
    r"'ve moved|\u2019ve moved)\s+(?:to|in)\s+"
    r"(?P<value>[A-Z][\w-]*(?:\s+[A-Z][\w-]*){0,2})"
)
#: What the user does for a living or looks after: "I maintain the ingest
#: service", "I work at Acme", "I teach chemistry" (slot per verb, so "I work
#: on X" and "I work at Y" both hold).
_OCCUPATION = re.compile(
    r"(?:^|[,.;!]\s*|\b(?:and|but|so|btw|fyi)[,]?\s+)I\s+(?:currently\s+|mostly\s+|"
    r"still\s+|now\s+|also\s+)?(?P<verb>work\s+(?:on|at|for|in|as)|maintain|manage|"
    r"lead|teach|study\s+(?:at|in)|volunteer\s+(?:at|for|as))\s+(?!to\b|it\b|that\b)"
    r"(?P<value>[^,;.!?]+)"
)
_UNDER_NAME = re.compile(
    r"\bunder\s+(?:the\s+name(?:\s+of)?\s+"
    rf"(?P<value>{_PLACEHOLDER}|[A-Z][a-z]+(?:\s+[A-Z][a-z]+)?)"
    r"|(?P<value2>[A-Z][a-z]+\s+[A-Z][a-z]+)['\u2019]s\s+name)\b"
)
#: Never memories (see the module docstring).
_MOOD = re.compile(
    r"\bI(?:'m|\u2019m| am)\s+(?:(?:really|so|very|quite|extremely|a bit|a little|"
    r"feeling|getting|also|just)\s+)*(?:unhappy|upset|frustrated|angry|disappointed|"
    r"annoyed|furious|sorry|sick|unwell|ill|worried|concerned|confused|tired|sad|"
    r"stressed|happy|glad|pleased|grateful)\b|\bI(?:'m|\u2019m| am)\s+feeling\b",
    re.IGNORECASE,
)
_REQUEST = re.compile(
    r"^(?:(?:hi|hello|hey|sure|yes|ok|okay|well|also|and|so|actually|great)[,!.]?\s+)*"
    r"(?:I(?:'d|\u2019d| would)?\s+(?:really\s+)?(?:like|want|need|wish|hope|have)"
    r"\s+to|I(?:'ll|\u2019ll| will)|let's|please)\s+(?:cancel|change|book|modify|"
    r"upgrade|downgrade|add|remove|update|reschedule|check|know|get|make|switch|move|"
    r"delete|set|record|register|find|see|ask|speak|talk|proceed|go|use|pay|keep|"
    r"confirm|try|look|request|open|close|create|schedule|reserve|apply|query|"
    r"transfer|buy|order|sign)\b",
    re.IGNORECASE,
)
#: A time or date given for this request ("The time is 10:00 AM.", "8 am
#: tomorrow.", "Tomorrow at 2pm"): a detail of the session, never a memory.
_WHEN = re.compile(
    r"^(?:(?:the\s+)?(?:time|date|day|start time|end time|check-in|check-out)\s+"
    r"(?:is|was|will be|should be)\b|(?:on\s+|at\s+)?(?:\d{1,2}(?::\d{2})?\s*"
    r"(?:a\.?m\.?|p\.?m\.?)|tomorrow|today|tonight|next\s+\w+)\b)",
    re.IGNORECASE,
)
_TRANSACTION_ID = re.compile(
    r"\b(?:reservation|booking|order|ticket|appointment|confirmation|transaction|"
    r"case|registration|tracking|invoice|flight|verification)\s*(?:id|number|no\.?|"
    r"code|#)",
    re.IGNORECASE,
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


#: Words that say when or how firmly, not what: "window seats now" is about seats.
_NOT_HEAD = frozenset(
    """now again anymore instead actually these days nowadays please too also
    still lately generally usually mostly honestly really though then""".split()
)


def _head(value: str) -> str:
    """The head noun of a short phrase: its last content word before a
    comparison, ignoring time words ("window seats now" -> ``seats``)."""
    phrase = re.split(
        r"\b(?:over|than|instead of|rather than|to|when|if|not)\b", value
    )[0]
    words = [
        w
        for w in _WORD.findall(phrase.lower())
        if w not in _STOP and w not in _NOT_HEAD
    ]
    return words[-1] if words else normalize_slot(value)


# "my home airport is now OAK instead of SFO": any attribute, when the
# sentence names the value it replaces (a correction says what the slot is).
_ATTR_CORRECTED = re.compile(
    r"\bmy\s+(?P<slot>(?:[a-z][\w-]*\s+){0,2}?[a-z][\w-]*)\s+"
    r"(?:is now|is|are now|are|has changed to|changed to|is changing to)\s+"
    rf"(?:now\s+|actually\s+)?(?P<value>{_TOKEN}(?:\s+{_TOKEN}){{0,2}}?)"
    r"(?:\s+now)?,?\s+(?:instead of|not|rather than|no longer|replacing)\s+",
    re.IGNORECASE,
)


def attribute(text: str) -> tuple[str, str] | None:
    """``(slot, value)`` of a "my <attribute> ... <value>" statement, if any."""
    match = (
        _ATTR_COPULA.search(text)
        or _ATTR_ID.search(text)
        or _ATTR_BARE.search(text)
        or _ATTR_CORRECTED.search(text)
    )
    if not match or _TRANSACTION_ID.search(
        normalize_slot(match.group("slot")).replace("_", " ")
    ):
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
        if _ONE_OFF_VALUE.search(value):
            return None
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
    value = normalize_value(match.group("value") or match.group("value2"))
    if value.startswith("<"):
        return ("name" if value.startswith("<PERSON") else "identity"), value
    if _HANDLE.fullmatch(value):
        return "user_id", value
    if value[:1].islower():
        if _NOT_ROLE.match(value):
            return None
        return "role", value
    return "name", value


def membership(text: str) -> tuple[str, str] | None:
    """``("membership", "silver")`` of "I'm a silver member" / "my Gold membership"."""
    match = _MEMBERSHIP.search(text)
    if not match:
        return None
    return "membership", (match.group("tier") or match.group("tier2")).lower()


def residence(text: str) -> tuple[str, str] | None:
    """``("home_city", "Princeton")`` of "I live in Princeton"."""
    match = _LIVES.search(text)
    return ("home_city", match.group("value")) if match else None


def occupation(text: str) -> tuple[str, str] | None:
    """``("work_on", "the billing service")`` of "I work on the billing service"."""
    match = _OCCUPATION.search(text)
    if not match:
        return None
    value = normalize_value(match.group("value"))
    if not value or (_ONE_OFF_VALUE.search(value) and not value.startswith("the ")):
        return None
    return "_".join(match.group("verb").lower().split()), value


def named(text: str) -> tuple[str, str] | None:
    """``("name", ...)`` of "... under the name Sarah Johnson" / "I'm omar_1"."""
    match = _UNDER_NAME.search(text)
    if match:
        return "name", normalize_value(match.group("value") or match.group("value2"))
    match = _IDENTITY_HANDLE.search(text)
    if match:
        return "user_id", normalize_value(match.group("value"))
    return None


#: A statement about a credential is never a memory, whatever else it says
#: (the gate would reject a leaked value anyway; this keeps it out of the model).
_CREDENTIAL = re.compile(
    r"\b(?:password|passcode|passphrase|pin code|token|secret|verification code|"
    r"security code|api key|cvv)\b",
    re.IGNORECASE,
)


#: How the subject wants to be contacted: a contact verb aimed at them ("do not
#: email me", "call us", "never page me"), a channel ("by phone", "text
#: messages", "my work email for notifications") or "by post".
_CONTACT = re.compile(
    r"\b(?:e-?mail|call|phone|ring|text|sms|message|contact|reach|page|ping|"
    r"notify|write\s+to|mail|dm)(?:ed|ing|s)?\s+(?:me|us)\b"
    r"|\b(?:e-?mails?|phone|phones|phone\s+calls?|calls?|texts?|text\s+messages?|"
    r"sms|voicemails?|whatsapp|slack|telegram|newsletters?|notifications?)\b"
    r"|\bby\s+(?:post|mail|letter)\b",
    re.IGNORECASE,
)


def about_contact(text: str) -> bool:
    """Does a rule or preference say how (or when) to contact the subject?

    Such a statement binds every purpose that contacts the subject
    (``memory.purposes[].contacts_subject``), not just the purpose the
    message happened to be classified into."""
    return bool(_CONTACT.search(text))


def about_credential(text: str) -> bool:
    """Does the text talk about a password, token or code?"""
    return bool(_CREDENTIAL.search(text))


def not_a_memory(text: str) -> bool:
    """A mood, a one-off request or a transaction object's id (never a memory)."""
    return bool(
        _MOOD.search(text)
        or _REQUEST.search(text)
        or _TRANSACTION_ID.search(text)
        or _WHEN.search(text)
    )


#: An agent question asking for one attribute: the slot the reply fills.
_ASKED = (
    ("user_id", re.compile(r"\buser\s*id\b|\buser\s+profile\b", re.IGNORECASE)),
    ("username", re.compile(r"\buser\s*name\b|\blogin\b", re.IGNORECASE)),
    ("email", re.compile(r"\be-?mail\b", re.IGNORECASE)),
    ("name", re.compile(r"\b(?:your|my)\s+(?:full\s+)?name\b", re.IGNORECASE)),
)
#: Questions that also ask for a secret: the reply is never read as an answer.
_ASKS_SECRET = re.compile(
    r"\b(?:password|passcode|pin|token|secret|verification code|security code|"
    r"card number|cvv)\b",
    re.IGNORECASE,
)
_REPLY = re.compile(
    r"^(?i:(?:sure|yes|yeah|ok|okay|certainly|of course)[,!.]?\s+)?"
    r"(?i:(?:it's|it is|it\u2019s|that's|that is|my \w+(?:\s+\w+)? is)\s+)?"
    rf"(?P<value>{_PLACEHOLDER}|[A-Za-z0-9][\w.@+\-]*(?:\s+[A-Z][a-z]+)?)\s*[.!]?$"
)


def answer(question: str, reply: str) -> tuple[str, str] | None:
    """``(slot, value)`` when ``reply`` is a bare answer to a question for one
    attribute: "Could you provide your user ID?" -> "Sure, it's mia_li_3668".

    Only a short reply holding one value, to a question that names exactly one
    attribute and no secret (a reply to "username and password?" is never read).
    """
    if _ASKS_SECRET.search(question):
        return None
    asked = [slot for slot, pattern in _ASKED if pattern.search(question)]
    if len(asked) != 1:
        return None
    match = _REPLY.match(reply.strip())
    if not match:
        return None
    value = normalize_value(match.group("value"))
    slot = asked[0]
    if slot == "name":
        if not re.fullmatch(rf"{_PLACEHOLDER}|[A-Z][a-z]+(?:\s+[A-Z][a-z]+)+", value):
            return None
    elif slot == "email":
        if "@" not in value and not value.startswith("<"):
            return None
    elif not (any(c.isdigit() for c in value) or "_" in value or value.startswith("<")):
        if not re.fullmatch(r"[A-Za-z][A-Za-z0-9]{2,}", value) or slot != "username":
            return None
    if value.lower() in {"yes", "no", "sure", "okay", "thanks", "thank"}:
        return None
    return slot, value


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
    tier = membership(text)
    if tier:
        return PatternHit("identity", tier[0], tier[1], "membership")
    if attr:
        return PatternHit("identity", attr[0], attr[1], "attribute")
    home = residence(text)
    if home:
        return PatternHit("identity", home[0], home[1], "residence")
    name = named(text)
    if name:
        return PatternHit("identity", name[0], name[1], "identity")
    work = occupation(text)
    if work:
        return PatternHit("identity", work[0], work[1], "occupation")
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


def match_question(text: str) -> PatternHit | None:
    """Identity a request states in passing ("... under the name Sarah Johnson?",
    "As a gold member, can I ...?"); nothing else in a question is a memory."""
    found = membership(text) or named(text)
    if found:
        return PatternHit("identity", found[0], found[1], "identity")
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


_PRONOUNS = frozenset("i me you us we it them him her this that".split())
_REPLACES = re.compile(
    r"(?:,\s*|\s+-\s+|\s+)(?:not|instead of|rather than|in place of|replacing)\s+"
    r"|\bno longer\b",
    re.IGNORECASE,
)


def replaced_values(text: str) -> frozenset[str]:
    """Old values a correction explicitly replaces, whatever their slot.

    Only a sentence that is a correction ("actually", "instead of", "from now
    on", "no longer", "Correction:", or ", not X") names what it replaces;
    "I'm not sure" names nothing. ``resolve`` supersedes an earlier memory of
    the subject that states one of these values, so "use eu-central-1 from now
    on, not us-east-2" retires "Always use us-east-2" though neither has a slot.
    """
    if not (_CORRECTION.search(text) or re.search(r",\s*not\s", text)):
        return frozenset()
    found = correction(text)
    if found is None:
        return frozenset()
    return frozenset(
        n
        for n in found.names
        if len(n) > 1 and set(n.split()) - _STOP - _NOT_HEAD - _PRONOUNS
    )


_FIRST_PERSON_SUBJECT = re.compile(r"\b(?:I|we|my|our)\b", re.IGNORECASE)
_NOW = re.compile(
    r"\b(?:now|from now on|these days|nowadays|no longer|any ?more|going forward)\b",
    re.IGNORECASE,
)


def standing_change(text: str) -> bool:
    """A first-person statement that something replaced something, for good:
    "we use nextest now instead of cargo test". A memory (a ``fact``) even
    where the classifier hesitates: it names the old value and says "now"."""
    return bool(
        _FIRST_PERSON_SUBJECT.search(text)
        and _NOW.search(text)
        and replaced_values(text)
        and re.search(
            r"\b(?:instead of|rather than|in place of|replacing)\s|,\s*not\s", text
        )
        and not text.rstrip().endswith("?")
    )
