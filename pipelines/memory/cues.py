"""Cheap cues that decide which user sentences the MiniLM kind classifier sees.

The prototype classifier (``classify``) is most of the memory stage's cost (a
MiniLM forward pass per sentence), yet on real transcripts it accepts fewer than
one sentence in a hundred: most user text is requests, chatter, task statements
pasted by an agent harness, code, logs and file listings. A memory the
classifier can accept states something *about the subject or how to treat
them*, and such a sentence carries at least one of these cues:

* **first person**: "I", "me", "my", "we", "our", "us" ("Brief replies suit me
  best", "Our office is in Lisbon");
* **a standing-instruction verb at the start**, addressed to the agent: "Send
  receipts to accounts payable", "Keep your answer short", "Copy my assistant
  on ..." (routing, contact and format verbs; not "Run the tests");
* **standing-rule words**: always, never, whenever, from now on, by default;
* **preference words**: prefer, rather, favourite, suits, works best;
* **contact channels**: calls, email, text, Slack, reach, contact ("No calls
  after 6pm");
* **attributes of a person or account**: name, account, identifier, username,
  membership, role, team, timezone, language ("Account identifier is user2");
* **a definite statement**: "The outage was caused by ...", "The staging
  cluster is shared with ..." (the ``fact`` kind's shape).

And it is prose: a sentence that looks like code, a log line, a path, a numbered
listing line or a shell prompt (``looks_like_code``) is never a memory.
Leading acknowledgements ("I appreciate that", "I understand", "I see") are
chatter, whatever follows in the same sentence, and "I'd like to / I want to /
I'm looking to <do something>" asks for an action now (``patterns`` already
keeps the common one-off requests out; this catches the rest cheaply).

``worth_classifying`` is the filter; ``tests/unit/memory/test_memory_cues.py``
holds the recall check: every sentence the classifier accepts from a set of
paraphrases the rules miss, and every memory prototype, passes it.
"""

from __future__ import annotations

import re

#: Placeholders the redactor leaves (``<PERSON:ab12cd34>``) are values, not code.
_PLACEHOLDER = re.compile(r"<[A-Z][A-Z0-9_]*(?::[0-9a-f]+)?>")

_FIRST_PERSON = re.compile(
    r"(?<![\w'\u2019-])(?:i|i['\u2019](?:m|ve|d|ll)|me|my|mine|myself|we|"
    r"we['\u2019](?:re|ve|d|ll)|our|ours|ourselves|us)(?![\w'\u2019-])",
    re.IGNORECASE,
)
#: Verbs that start a standing instruction about routing, contact or format.
_INSTRUCTION = re.compile(
    r"^(?:(?:also|and|so|please|kindly|just)[,]?\s+)*(?:send|copy|cc|bcc|forward|"
    r"route|file|bill|charge|invoice|ship|deliver|address|notify|alert|inform|"
    r"call|phone|email|e-mail|text|message|contact|reach|ping|page|reply|respond|"
    r"answer|write|keep|use|book|assign|escalate|schedule|format|list|summari[sz]e|"
    r"explain|speak|talk|avoid|stop|skip|include|exclude)\b",
    re.IGNORECASE,
)
_RULE_WORDS = re.compile(
    r"\b(?:always|never|whenever|every time|each time|from now on|going forward|"
    r"by default|in (?:the )?future|as a rule|don't|do not|make sure|be sure|"
    r"no longer|only ever)\b",
    re.IGNORECASE,
)
_PREFERENCE_WORDS = re.compile(
    r"\b(?:prefer|prefers|preferred|preference|preferences|preferably|rather|"
    r"favou?rite|suits?|works? (?:best|better|well)|like|likes|love|loves|hate|"
    r"hates|dislike|dislikes|enjoy)\b",
    re.IGNORECASE,
)
_CONTACT_WORDS = re.compile(
    r"\b(?:calls?|called|calling|phone|phones|e-?mails?|texts?|sms|slack|"
    r"whatsapp|telegram|voicemail|contact|contacted|reach|reached|notif(?:y|ied|"
    r"ication|ications)|pager|paged|post|mail|letters?)\b",
    re.IGNORECASE,
)
_ATTRIBUTE_WORDS = re.compile(
    r"\b(?:name|named|account|accounts|identifier|id|ids|username|user\s*name|"
    r"login|handle|member|membership|plan|tier|subscription|role|title|team|"
    r"department|manager|company|employer|office|timezone|time zone|language|"
    r"pronouns|address|birthday|number|customer|owner|admin|administrator)\b",
    re.IGNORECASE,
)
#: "The outage was caused by ...": a definite subject, then a verb of being.
_DEFINITE_STATEMENT = re.compile(
    r"^(?:the|this|that|these|those)\s+(?:[\w-]+\s+){0,3}?(?:is|was|are|were|"
    r"has been|have been|had been|will be|remains|stays)\b",
    re.IGNORECASE,
)
_CHATTER = re.compile(
    r"^(?:(?:oh|ah|well|yes|yeah|no|ok|okay|alright|sure|actually|and|but|hmm)"
    r"[,!.]?\s+)*(?:i(?:['\u2019]m| am)?\s+(?:really\s+|totally\s+|completely\s+)?"
    r"(?:appreciate|understand|see|apologi[sz]e|get it|agree|not sure|unsure|"
    r"afraid|sorry)\b|(?:that|it)(?:['\u2019]s| is)\s+(?:unfortunate|fine|great|"
    r"good|okay|ok|alright|perfect|helpful|frustrating)\b|got it\b|no worries\b|"
    r"understood\b|i see\b)",
    re.IGNORECASE,
)
#: "I'd like to change ...", "I'm looking to book ...": an action wanted now.
#: "I want to be called Sam" (a passive: how to be treated) stays a candidate.
_WANTS_ACTION = re.compile(
    r"^(?:(?:oh|well|yes|yeah|no|ok|okay|alright|sure|actually|also|and|but|so|"
    r"hi|hello|hey|now|then|additionally)[,!.]?\s+)*"
    r"i(?:['\u2019]m\s+|\s+am\s+|\s+was\s+|\s+|(?=['\u2019]d\s))"
    r"(?:really\s+|also\s+|just\s+|now\s+)?(?:would like|['\u2019]d like|want|wanted|"
    r"looking|hoping|trying|planning|thinking of|going)\s+to\s+(?!be\b)",
    re.IGNORECASE,
)
#: A list marker a user may put before a statement ("- ", "* ", "2) ").
_BULLET = re.compile(r"^\s*(?:[-*\u2022]|\d{1,2}[.)])\s+(?=[A-Za-z\"'])")
#: Code, logs, paths, listings, prompts: markers prose does not have.
_CODE = re.compile(
    r"^\s*(?:\d+\s*[:|]|[-+*#>|$%@~/\\\[({}]|\.\w)"  # numbered line, prompt
    r"|[{}=`\\]|::|->|=>|\+\+|&&|\|\|"  # code punctuation
    r"|[A-Za-z_]\(|\w\.\w+\("  # calls
    r"|(?:^|\s)[\w.-]*/[\w.-]+/"  # paths
    r"|\.(?:py|js|ts|json|yaml|yml|toml|txt|md|sh|cfg|ini|log|html|css|go|rs|java)"
    r"\b"
)
#: At least this share of a sentence's characters are letters or spaces in prose.
_MIN_PROSE_SHARE = 0.75
MAX_WORDS = 40


def looks_like_code(text: str) -> bool:
    """Code, a log line, a path or a listing rather than prose."""
    plain = _PLACEHOLDER.sub("x", text)
    if _CODE.search(plain):
        return True
    letters = sum(c.isalpha() or c.isspace() for c in plain)
    return letters < _MIN_PROSE_SHARE * max(1, len(plain))


def has_cue(text: str) -> bool:
    """Does the sentence carry any cue of a memory (see the module docstring)?"""
    return bool(
        _FIRST_PERSON.search(text)
        or _INSTRUCTION.search(text)
        or _RULE_WORDS.search(text)
        or _PREFERENCE_WORDS.search(text)
        or _CONTACT_WORDS.search(text)
        or _ATTRIBUTE_WORDS.search(text)
        or _DEFINITE_STATEMENT.search(text)
    )


def is_chatter(text: str) -> bool:
    """An acknowledgement or apology ("I understand, but ...", "I see"), or an
    action wanted now ("I'd like to change my flight")."""
    return bool(_CHATTER.search(text) or _WANTS_ACTION.search(text))


def worth_classifying(text: str) -> bool:
    """Should the kind classifier embed this (already rule-unmatched) sentence?"""
    body = _BULLET.sub("", text)
    return (
        len(body.split()) <= MAX_WORDS
        and not looks_like_code(body)
        and not is_chatter(body)
        and has_cue(body)
    )
