"""What a user sentence does besides stating something: control and chatter.

Three decisions the extractor takes before (and over) any memory rule:

* **control phrases** (``control``): the user tells the assistant what to keep.
  ``decline`` ("please don't remember this: ...", "off the record", "don't keep
  this on file"): nothing in that message is stored, and a bare "don't remember
  that" also covers the user's previous message; ``withdraw`` ("forget that",
  "don't store my address", "stop remembering my phone number"): the named
  memory (by slot or words), or, naming none, what the user said just before,
  is withdrawn in this turn and for the rest of the session; ``allow`` ("you can
  remember that I'm vegetarian"): the rest of the sentence is a memory even where
  no rule or prototype would take it. Refusals are recorded as rejections with
  the reason (``user_declined`` / ``user_withdrawn``) and the statement's
  provenance, never silently dropped.
* **chatter** (``ChatterModel``): venting, moods, greetings, encouragement,
  thanks and small talk are never rules, roles or facts, however they are
  phrased ("Ugh, third outage this week, I'm so fed up", "Don't give up,
  buddy!"). A MiniLM prototype decision: a sentence nearer to the chatter
  prototypes than to any memory prototype (``classify``'s kind prototypes) is
  chatter. Rules match words ("don't" starts a rule), the model matches what
  the sentence is for, so it generalizes across authors and phrasings.
* **someone else** (``about_other``): "my colleague Tom is a vegetarian", "my
  mum's on warfarin": a statement about another person is not the user's memory
  ("my manager is Luis Ortega" is: a relation named as the user's attribute).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ctxledger.pipelines.memory.classify import Encoder

#: Rejection reasons of refused candidates.
USER_DECLINED = "user_declined"
USER_WITHDRAWN = "user_withdrawn"
CHATTER = "chatter"
ABOUT_OTHER = "about_someone_else"

_KEEP_VERB = r"(?:remember|store|save|keep|record|log|note|memori[sz]e|retain|file)"
#: An instruction, not a report: "I don't remember the reservation ID" is the
#: user not recalling something, "don't remember this" is a wish.
_NOT_ME = r"(?<!\bi )(?<!\bwe )(?<!\byou )(?<!\bthey )(?<!\bi just )(?<!\bi really )"
_DONT = rf"{_NOT_ME}(?:don['\u2019]?t|do not|never|no need to)"
_DECLINE = re.compile(
    rf"\b{_DONT}\s+{_KEEP_VERB}\s+(?P<ref>this|that|it|any of this|any of that)\b"
    r"|\boff the record\b|\bkeep (?:this|that|it) (?:between us|to yourself|off)\b"
    r"|\bnot for the record\b",
    re.IGNORECASE,
)
_WITHDRAW = re.compile(
    rf"{_NOT_ME}(?<!\bi'll )(?<!\bdon't )(?<!\bnot )(?<!\bnever )\bforget\s+"
    r"(?:about\s+)?(?:(?:that|it|this|what i (?:just )?said)"
    r"(?=\s*(?:[,.;:!?]|$|please\b|too\b|as well\b))|"
    r"(?:my|the)\s+(?P<what>[a-z][\w-]*(?:\s+[a-z][\w-]*){0,2}?)(?=\s*(?:[,.;:!?]|$)))"
    rf"|\b{_DONT}\s+{_KEEP_VERB}\s+(?:my|the)\s+"
    r"(?P<what2>[a-z][\w-]*(?:\s+[a-z][\w-]*){0,2}?)(?=\s*(?:[,.;!?]|$|\s+(?:either|"
    r"anywhere|please|any\s?more)\b))"
    r"|\bstop\s+(?:remembering|storing|keeping)\s+(?:my|the)\s+"
    r"(?P<what3>[a-z][\w-]*(?:\s+[a-z][\w-]*){0,2}?)(?=\s*(?:[,.;!?]|$))",
    re.IGNORECASE,
)
_ALLOW = re.compile(
    r"^(?:(?:ok|okay|also|and|btw|fyi)[,:]?\s+)*(?:you can|feel free to|please|do)?\s*"
    r"(?:remember|note|keep in mind|store|save)\s+(?:that\s+)?(?=[a-z<])",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Control:
    """A control phrase: ``decline``, ``withdraw`` (``target``: the named
    memory's words, or None for "what I just said") or ``allow`` (``start``:
    where the allowed statement begins in the sentence)."""

    action: str
    target: str | None = None
    start: int = 0


_LOWER_I = re.compile(r"(?<![\w'\u2019-])i(?=(?:['\u2019](?:m|d|ve|ll)\b|\s))")


def first_person(text: str) -> str:
    """``"i'm a teacher"`` -> ``"I'm a teacher"``: casual writing's lowercase
    pronoun, capitalized for rules written for "I" (same length)."""
    return _LOWER_I.sub("I", text)


def control(text: str) -> Control | None:
    """The control phrase a user sentence holds, if any (see the module doc)."""
    targets = [
        m.group("what") or m.group("what2") or m.group("what3")
        for m in _WITHDRAW.finditer(text)
    ]
    if targets:
        named = [t for t in targets if t]
        return Control("withdraw", named[0].lower() if named else None)
    if _DECLINE.search(text):
        return Control("decline")
    allow = _ALLOW.match(text)
    if allow and len(text) - allow.end() > 3:
        return Control("allow", start=allow.end())
    return None


def bare_decline(text: str) -> bool:
    """A message that only declines ("Please don't remember that."): it
    refers back to the previous message, not to anything after it."""
    match = _DECLINE.search(text)
    if match is None:
        return False
    rest = re.sub(r"[^\w\s]", " ", text[: match.start()] + text[match.end() :])
    return len(rest.split()) <= 3


_HEAD_STOP = frozenset({"home", "work", "personal", "new", "old", "current", "own"})


def target_words(target: str) -> set[str]:
    """The words of a withdrawal target that name a slot ("home address" ->
    {"address"}; "number" -> also phone words)."""
    words = {w for w in re.findall(r"[a-z]+", target.lower())} - _HEAD_STOP
    words |= {w.rstrip("s") for w in words}
    if words & {"number", "phone", "mobile", "cell"}:
        words |= {"phone", "mobile", "cell", "number"}
    return words


def names_memory(target: str, slot: str | None, text: str) -> bool:
    """Does a withdrawal target name this memory (its slot or its words)?"""
    words = target_words(target)
    if not words:
        return False
    slot_words = set(re.split(r"[^a-z]+", (slot or "").lower())) - {"", "preference"}
    if words & (slot_words | {w.rstrip("s") for w in slot_words}):
        return True
    text_words = set(re.findall(r"[a-z]+", text.lower()))
    return bool(words & text_words)


#: Relations: a statement whose subject is one of these is about someone else,
#: unless it names who they are ("my manager is Luis Ortega": the user's).
_RELATION = (
    r"(?:colleague|co-?worker|teammate|mum|mom|mother|dad|father|parents?|wife|"
    r"husband|partner|spouse|boyfriend|girlfriend|son|daughter|kids?|child|"
    r"children|baby|brother|sister|siblings?|friend|friends|neighbou?r|roommate|"
    r"flatmate|grandma|grandmother|grandpa|grandfather|aunt|uncle|cousin|niece|"
    r"nephew|patient|client|guest|dog|cat)"
)
_ABOUT_OTHER = re.compile(
    rf"(?:^|[,;:]\s*|\b(?:and|but|btw|also)\s+)(?:my|our)\s+{_RELATION}"
    r"(?:\s+[A-Z<][\w:>]*)?(?:['\u2019]s\b|\s+(?:is|was|are|were|has|had|lives|"
    r"works|likes|loves|prefers|needs|uses|takes|gets|can['\u2019]?t|cannot|"
    r"doesn['\u2019]?t|does)\b)(?P<rest>.*)"
    r"|^(?:he|she|they)(?:['\u2019]s|['\u2019]re|\s+(?:is|are|was|has|lives|works))\b",
    re.IGNORECASE,
)
_NAMES_WHO = re.compile(
    r"^\s*(?:now\s+)?(?:<PERSON[^>]*>|[A-Z][a-z]+(?:\s+[A-Z][a-z]+)*)\s*[.!]?\s*$"
)


def about_other(text: str) -> bool:
    """Is the sentence about another person (see the module docstring)?"""
    match = _ABOUT_OTHER.search(text.strip())
    if not match:
        return False
    rest = match.group("rest")
    return not (rest is not None and _NAMES_WHO.match(rest))


#: Prototype sentences of chatter: venting, moods, greetings, encouragement,
#: thanks, reactions and small talk (never memories).
CHATTER_PROTOTYPES: tuple[str, ...] = (
    "Ugh, I'm so sick of this.",
    "This is driving me crazy.",
    "What a terrible day, I'm exhausted.",
    "Another failure, I can't take this anymore.",
    "What a nightmare this has been.",
    "I'm so frustrated with all of this.",
    "I'm stressed and overwhelmed right now.",
    "I feel awful today.",
    "Not again, it keeps breaking and I'm sick of it.",
    "I've had enough of these problems.",
    "Sigh, what a week.",
    "You can do it!",
    "Hang in there, it will get better.",
    "Keep it up, you're doing great.",
    "I'm so proud of you.",
    "Hey, nice to see you!",
    "Hi, how are you doing?",
    "Long time no see!",
    "Have a great weekend!",
    "Thanks so much, you're the best.",
    "You are the most helpful agent I've ever talked to.",
    "Wow, that's amazing!",
    "Haha, that's so funny.",
    "Congratulations on the promotion!",
    "The weather is lovely today.",
    "That sounds like so much fun.",
    "I'm so happy for you.",
)


class ChatterModel:
    """Chatter vs memory by nearest prototype (MiniLM, cached embeddings).

    ``memory_prototypes``: the kind prototypes of the memory kinds; a sentence
    is chatter when its best chatter score beats its best memory score by
    ``margin`` and reaches ``threshold``."""

    def __init__(
        self,
        encode: Encoder,
        memory_prototypes: Mapping[str, Sequence[str]],
        threshold: float = 0.35,
        margin: float = 0.0,
    ):
        self.encode = encode
        self.memory = [
            t for k, ts in memory_prototypes.items() if k != "other" for t in ts
        ]
        self.threshold = threshold
        self.margin = margin
        self._chatter: np.ndarray | None = None
        self._memory: np.ndarray | None = None

    def _matrices(self) -> tuple[np.ndarray, np.ndarray]:
        if self._chatter is None:
            self._chatter = _unit(self.encode(list(CHATTER_PROTOTYPES)))
            self._memory = _unit(self.encode(self.memory))
        return self._chatter, self._memory

    def scores(self, texts: Sequence[str]) -> list[tuple[float, float]]:
        """``(chatter, memory)`` best cosine per text."""
        if not texts:
            return []
        chatter, memory = self._matrices()
        rows = _unit(self.encode(list(texts)))
        return [
            (float(c), float(m))
            for c, m in zip(
                (rows @ chatter.T).max(axis=1),
                (rows @ memory.T).max(axis=1),
                strict=True,
            )
        ]

    def is_chatter(self, texts: Sequence[str]) -> list[bool]:
        """Chatter per text, judged on its core: a polite tail ("..., thanks!")
        does not make an instruction chatter."""
        cores = [_core(t) for t in texts]
        return [
            bool(core) and c >= self.threshold and c - m > self.margin
            for core, (c, m) in zip(cores, self.scores(cores), strict=True)
        ]


_POLITE_TAIL = re.compile(
    r"(?:[,;:.!\s-]+(?:thanks|thank you|thx|ty|cheers|please|pls|much appreciated)"
    r"(?:\s+(?:so much|a lot|again|mate|buddy))?)+[\s.!]*$",
    re.IGNORECASE,
)


def _core(text: str) -> str:
    """The text without a trailing "thanks" / "please" (what is scored)."""
    core = _POLITE_TAIL.sub("", text).strip()
    return core or text


def _unit(matrix) -> np.ndarray:
    array = np.asarray(matrix, dtype=np.float32)
    norms = np.linalg.norm(array, axis=1, keepdims=True)
    return array / np.where(norms == 0, 1.0, norms)
