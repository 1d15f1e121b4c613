"""Memory candidates from one redacted session (no LLM required).

``RuleExtractor`` reads a session's redacted messages and tool observations:

* ``user_stated``: a user's sentence that a pattern rule (``patterns``) or the
  MiniLM prototype classifier (``classify``) takes as a standing rule, a
  preference, an identity or a fact. The memory text is the sentence verbatim,
  with its char span in the redacted message.
* ``model_inferred``: an assistant sentence that concludes something about the
  user ("it seems you prefer ..."); stored, served only as a hypothesis.
* ``system_record``: a tool result's top-level JSON key listed in the policy's
  ``memory.system_fields`` (``plan: Pro``), with the tool message as provenance;
  for a rule with ``arguments: true`` also the key in the arguments of a call
  whose result did not fail (``username`` of an accepted login), with the
  calling message and ``field="tool_arguments"`` as provenance.

A user sentence is split into clauses ("my username is foo, and my password is
bar"); a clause about a credential, a mood, a one-off request or a transaction
object's id (``patterns.not_a_memory``) is never a candidate. A bare reply to
the agent's question for one attribute ("your user ID?" -> "it's mia_li_3668")
fills that attribute (``patterns.answer``).

Every candidate gets the message's purpose (``PurposeClassifier``), the session's
subject (``subjects``) and a content-hash id. Candidates are not yet memories:
``gate`` decides, per candidate, whether a live basis and a retention rule allow
storing it. ``Extractor`` is the interface an optional extractor (``llm``) plugs
into.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol

from pydantic import BaseModel, ConfigDict

from ctxledger.pipelines.memory import cues, intent, patterns
from ctxledger.pipelines.memory.classify import (
    Encoder,
    Label,
    PrototypeClassifier,
    PurposeClassifier,
    classifier_version,
    kind_prototypes,
)
from ctxledger.pipelines.memory.subjects import subject_for
from ctxledger.pipelines.memory.text import Sentence, sentences
from ctxledger.schemas import Message, Session, ToolCall, ToolObservation, content_hash
from ctxledger.schemas.memory import (
    MemoryKind,
    MemorySettings,
    MemorySource,
    Provenance,
)

#: Bump when extraction logic changes; part of every candidate's extractor_version.
EXTRACTOR_VERSION = "5"
MIN_WORDS = 3
MAX_SENTENCE_CHARS = 600
#: Pleasantries and one-off requests: never memories, so never sent to the model
#: (the classifier is most of the extraction cost).
_NOT_A_STATEMENT = re.compile(
    r"^(?:(?:ok|okay|great|thanks|thank you|sure|hi|hello|hey)\b"
    r"|(?:let me|let's|can you|could you|would you|will you|please (?:check|look|"
    r"run|open|send|tell|show|find|help|fix|try|see|confirm|update|share))\b)",
    re.IGNORECASE,
)


#: Where one statement ends and the next begins inside a sentence: "my username
#: is foo, and my password is bar" states two things (one of them never kept).
_CLAUSE = re.compile(
    r"(?:\s*[,;]\s*(?:and\s+)?|\s+and\s+)(?=my\s|I['\u2019]m\s|I am\s|"
    r"(?:the\s+)?(?:password|passcode|"
    r"token|email|e-mail|username|user\s*id|phone)\s+(?:is|was)\b)",
    re.IGNORECASE,
)


def _user_clauses(content: str) -> list[Sentence]:
    """A user message's clauses, written with a capital first-person "I"
    (``intent.first_person``: same length, so spans stay verbatim) for the
    rules; a draft's text is always cut from the message itself."""
    return [
        Sentence(intent.first_person(c.text), c.start, c.end)
        for s in sentences(content)
        for c in clauses(s)
    ]


def clauses(sentence: Sentence) -> list[Sentence]:
    """A statement sentence split before each "..., and my <x>" (spans kept)."""
    if sentence.is_question:
        return [sentence]
    out = []
    position = 0
    for match in [*_CLAUSE.finditer(sentence.text), None]:
        end = match.start() if match else len(sentence.text)
        chunk = sentence.text[position:end]
        stripped = chunk.strip()
        if stripped:
            start = sentence.start + position + (len(chunk) - len(chunk.lstrip()))
            out.append(Sentence(stripped, start, start + len(stripped)))
        if match:
            position = match.end()
    return out


class TransientError(RuntimeError):
    """A retryable extractor failure (network, rate limit): re-raised, so the
    runner retries, instead of turning messages into dead letters."""


class MemoryCandidate(BaseModel):
    """A statement that may become a memory (not stored as such).

    ``reject_reason`` set by an extractor means the candidate is already known
    to be unusable (e.g. an LLM span not found verbatim); the gate records it as
    a rejection with that reason.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    memory_id: str
    tenant_id: str
    subject_id: str
    purpose: str | None
    kind: MemoryKind
    source: MemorySource
    text: str
    slot: str | None = None
    value: str | None = None
    confidence: float = 1.0
    extractor: str
    extractor_version: str
    provenance: Provenance
    created_at: datetime | None = None
    valid_from: datetime | None = None
    valid_to: datetime | None = None
    reject_reason: str | None = None
    source_file: str = ""
    source_offset: str = ""


def memory_id_for(
    tenant_id: str,
    subject_id: str,
    purpose: str | None,
    kind: str,
    source: str,
    text: str,
    provenance: Provenance,
) -> str:
    """Content hash of what makes a memory the same memory on a re-run."""
    return content_hash(
        tenant_id,
        subject_id,
        purpose,
        kind,
        source,
        text,
        provenance.model_dump(mode="json"),
        prefix="mem_",
    )


@dataclass
class SessionContext:
    """One redacted session with its messages (by turn) and tool observations."""

    session: Session
    messages: list[Message]
    observations: list[ToolObservation] = field(default_factory=list)
    subject_id: str = ""
    _calls: dict[str, tuple[Message, ToolCall]] | None = field(default=None, repr=False)
    _positions: dict[str, int] | None = field(default=None, repr=False)

    @classmethod
    def build(
        cls,
        session: Session,
        messages: Sequence[Message],
        observations: Sequence[ToolObservation] = (),
        metadata_key: str = "subject_id",
    ) -> SessionContext:
        subject = subject_for(
            session.session_id, session.source_file, session.metadata, metadata_key
        )
        return cls(
            session=session,
            messages=sorted(messages, key=lambda m: (m.turn, m.message_id)),
            observations=list(observations),
            subject_id=subject,
        )

    def time_of(self, message: Message) -> datetime | None:
        return message.created_at or self.session.started_at

    def question_before(self, message: Message) -> str | None:
        """The assistant's text just before a user message (what it answers)."""
        if self._positions is None:
            self._positions = {m.message_id: i for i, m in enumerate(self.messages)}
        index = self._positions.get(message.message_id, 0)
        for earlier in reversed(self.messages[:index]):
            if earlier.role == "user":
                return None
            if earlier.role == "assistant" and earlier.content.strip():
                return earlier.content
        return None

    def call(self, call_id: str) -> tuple[Message, ToolCall] | None:
        """The assistant message and tool call a result answers (by call id)."""
        if self._calls is None:
            self._calls = {
                c.call_id: (m, c)
                for m in self.messages
                if m.role == "assistant"
                for c in m.tool_calls
            }
        return self._calls.get(call_id)


@dataclass
class Draft:
    """A statement found in a message, before purpose and id are attached."""

    message: Message
    kind: str
    source: str
    text: str
    slot: str | None
    value: str | None
    confidence: float
    extractor: str
    provenance: Provenance
    purpose: str | None = None
    reject_reason: str | None = None
    version: str = EXTRACTOR_VERSION


@dataclass
class ExtractionResult:
    """Candidates of a session, and the messages an extractor could not read."""

    candidates: list[MemoryCandidate] = field(default_factory=list)
    failed: list[tuple[Message, str, str]] = field(default_factory=list)
    scanned: int = 0
    #: Texts handed to MiniLM: user sentences for the kind classifier, message
    #: texts for the purpose classifier (the memory stage's model cost).
    classified: int = 0
    purpose_texts: int = 0


class Extractor(Protocol):
    """What every extractor provides (rules + classifier, LLM...)."""

    name: str
    version: str

    def drafts(self, ctx: SessionContext, message: Message) -> list[Draft]:
        """Statements of one message (raise: the message becomes a dead letter)."""


def message_provenance(
    ctx: SessionContext, message: Message, start: int | None, end: int | None
) -> Provenance:
    return Provenance(
        session_id=ctx.session.session_id,
        message_id=message.message_id,
        turn=message.turn,
        field="content",
        char_start=start,
        char_end=end,
    )


class RuleExtractor:
    """Pattern rules, the MiniLM kind classifier and tool-result system fields."""

    name = "rules"

    def __init__(self, settings: MemorySettings, encode: Encoder | None = None):
        self.settings = settings
        self.encode = encode
        self.version = (
            f"rules-{EXTRACTOR_VERSION}.{patterns.PATTERNS_VERSION}"
            f"+{classifier_version(settings)}"
        )
        self._kinds: PrototypeClassifier | None = None
        self._chatter: intent.ChatterModel | None = None
        #: Sentences sent to the kind classifier so far (cost instrumentation).
        self.classified = 0

    @property
    def kinds(self) -> PrototypeClassifier | None:
        if self._kinds is None and self.encode is not None:
            self._kinds = PrototypeClassifier(
                self.encode,
                kind_prototypes(self.settings),
                self.settings.kind_threshold,
                self.settings.kind_margin,
                reject="other",
            )
        return self._kinds

    @property
    def chatter(self) -> intent.ChatterModel | None:
        if self._chatter is None and self.encode is not None:
            self._chatter = intent.ChatterModel(
                self.encode, kind_prototypes(self.settings)
            )
        return self._chatter

    def prepare(self, ctx: SessionContext) -> None:
        """Embed the session's unmatched user sentences in one batch (cached)."""
        if self.encode is None:
            return
        pending = [
            c.text
            for m in ctx.messages
            if m.role == "user"
            for c in _user_clauses(m.content)
            if self._wants_classifier(c)
        ]
        if pending:
            self.encode(pending)

    @staticmethod
    def _classifiable(sentence) -> bool:
        """May this user sentence (no rule matched it) still be a memory? Not
        a question, pleasantry, mood, one-off request or credential, and it
        carries a memory cue (``cues``: first person, an instruction, contact,
        preference or attribute words) in prose, not code or logs. Nothing
        else reaches the model, which is most of the memory stage's cost."""
        return (
            not sentence.is_question
            and len(sentence.text) <= MAX_SENTENCE_CHARS
            and len(sentence.text.split()) >= MIN_WORDS
            and not _NOT_A_STATEMENT.match(sentence.text)
            and not patterns.not_a_memory(sentence.text)
            and not patterns.about_credential(sentence.text)
            and cues.worth_classifying(sentence.text)
        )

    @classmethod
    def _wants_classifier(cls, sentence) -> bool:
        return (
            cls._classifiable(sentence)
            and patterns.match_user_sentence(sentence.text) is None
        )

    def drafts(self, ctx: SessionContext, message: Message) -> list[Draft]:
        if message.role == "user":
            return self._user(ctx, message)
        if message.role == "assistant":
            return self._assistant(ctx, message)
        if message.role == "tool":
            return self._tool(ctx, message)
        return []

    def _user(self, ctx: SessionContext, message: Message) -> list[Draft]:
        out: list[Draft] = []
        pending = []
        found = _user_clauses(message.content)
        for index, sentence in enumerate(found):
            if len(sentence.text) > MAX_SENTENCE_CHARS or patterns.about_credential(
                sentence.text
            ):
                continue
            said = intent.control(sentence.text)
            if said is not None and said.action == "decline":
                if not intent.bare_decline(sentence.text):
                    out.append(self._declined(ctx, message, sentence))
                continue
            if said is not None and said.action != "allow":
                continue  # the control phrase itself is no memory
            if said is not None:
                out.append(self._allowed(ctx, message, sentence, said.start))
                continue
            if sentence.is_question:
                hit = patterns.match_question(sentence.text)
            else:
                hit = patterns.match_user_sentence(sentence.text)
                if hit is None:
                    hit = self._answer(ctx, message, found, index)
            if hit is None and not self._classifiable(sentence):
                continue
            if hit is not None:
                out.append(
                    Draft(
                        message,
                        hit.kind,
                        "user_stated",
                        message.content[sentence.start : sentence.end],
                        hit.slot,
                        hit.value,
                        hit.confidence,
                        f"rules:{hit.rule}",
                        message_provenance(ctx, message, sentence.start, sentence.end),
                        version=self.version,
                    )
                )
            else:
                pending.append(sentence)
        if pending and self.kinds is not None:
            self.classified += len(pending)
            labels = self.kinds.classify([s.text for s in pending])
            for sentence, label in zip(pending, labels, strict=True):
                if label is None and patterns.standing_change(sentence.text):
                    label = Label("fact", 1.0, 1.0)
                if label is None or label.name == "account_state":
                    continue
                slot, value = self._slot(label.name, sentence.text)
                out.append(
                    Draft(
                        message,
                        label.name,
                        "user_stated",
                        message.content[sentence.start : sentence.end],
                        slot,
                        value,
                        round(min(1.0, max(0.0, label.score)), 4),
                        "classifier",
                        message_provenance(ctx, message, sentence.start, sentence.end),
                        version=self.version,
                    )
                )
        return self._screen(out)

    def _allowed(self, ctx, message, sentence, start: int) -> Draft:
        """What the user allowed ("you can remember that I'm vegetarian"):
        the rest of the sentence, by rule where one matches, else a fact."""
        text = sentence.text[start:].strip()
        begin = sentence.start + sentence.text.index(text)
        hit = patterns.match_user_sentence(text)
        text = message.content[begin : begin + len(text)]
        if hit is not None:
            kind, slot, value = hit.kind, hit.slot, hit.value
        else:
            slot, value = self._slot("identity", text)
            kind = "identity" if slot else "fact"
        return Draft(
            message,
            kind,
            "user_stated",
            text,
            slot,
            value,
            1.0,
            "rules:allow",
            message_provenance(ctx, message, begin, begin + len(text)),
            version=self.version,
        )

    def _declined(self, ctx, message, sentence) -> Draft:
        """What the user declined to have remembered, in the same sentence
        ("Please don't remember this: ..."): refused, so its rejection (no
        text kept) records the wish with the statement's provenance."""
        return Draft(
            message,
            "fact",
            "user_stated",
            sentence.text,
            None,
            None,
            1.0,
            "rules:declined",
            message_provenance(ctx, message, sentence.start, sentence.end),
            reject_reason=intent.USER_DECLINED,
            version=self.version,
        )

    #: Rule hits whose shape is a structured attribute: never chatter.
    _STRUCTURED = frozenset(
        {"rules:attribute", "rules:membership", "rules:residence", "rules:answer"}
    )

    def _screen(self, drafts: list[Draft]) -> list[Draft]:
        """Refuse (with a reason) what is about someone else or is chatter."""
        for draft in drafts:
            if draft.extractor != "rules:allow" and intent.about_other(draft.text):
                draft.reject_reason = intent.ABOUT_OTHER
        open_ = [
            d
            for d in drafts
            if d.reject_reason is None
            and d.extractor not in self._STRUCTURED
            and d.extractor != "rules:allow"
        ]
        if open_ and self.chatter is not None:
            flags = self.chatter.is_chatter([d.text for d in open_])
            for draft, flag in zip(open_, flags, strict=True):
                if flag:
                    draft.reject_reason = intent.CHATTER
        return drafts

    @staticmethod
    def _answer(ctx: SessionContext, message: Message, found, index: int):
        """A bare reply to a question for one attribute: the user's own question
        just before it in the message, or the agent's last message."""
        if index > 0 and found[index - 1].is_question:
            question = found[index - 1].text
        elif index == 0:
            question = ctx.question_before(message)
        else:
            question = None
        if not question:
            return None
        if index == 0 and not any(s.is_question for s in sentences(question)):
            return None  # the agent asked nothing: the reply answers nothing
        answered = patterns.answer(question, found[index].text) if question else None
        if answered is None:
            return None
        return patterns.PatternHit("identity", answered[0], answered[1], "answer")

    @staticmethod
    def _slot(kind: str, text: str) -> tuple[str | None, str | None]:
        if kind == "preference":
            return patterns.preference(text) or (None, None)
        if kind == "identity":
            return patterns.attribute(text) or patterns.identity(text) or (None, None)
        return patterns.slot_for_fact(text)

    def _assistant(self, ctx: SessionContext, message: Message) -> list[Draft]:
        out = []
        for sentence in sentences(message.content):
            if len(sentence.text) > MAX_SENTENCE_CHARS:
                continue
            hit = patterns.match_inference(sentence.text)
            if hit is None:
                continue
            out.append(
                Draft(
                    message,
                    hit.kind,
                    "model_inferred",
                    sentence.text,
                    hit.slot,
                    hit.value,
                    hit.confidence,
                    "rules:inference",
                    message_provenance(ctx, message, sentence.start, sentence.end),
                    version=self.version,
                )
            )
        return out

    def _tool(self, ctx: SessionContext, message: Message) -> list[Draft]:
        fields = self.settings.system_fields
        if not fields:
            return []
        out = []
        for observation in ctx.observations:
            if observation.message_id != message.message_id:
                continue
            facts = json.loads(observation.key_fields or "{}")
            for key in sorted(facts):
                rule = fields.get(key.lower())
                draft = self._system_draft(
                    ctx,
                    message,
                    observation,
                    rule,
                    key,
                    facts[key],
                    message,
                    "tool_output",
                )
                if draft is not None:
                    out.append(draft)
            out.extend(self._argument_drafts(ctx, message, observation))
        return out

    def _argument_drafts(
        self, ctx: SessionContext, message: Message, observation: ToolObservation
    ) -> list[Draft]:
        """System records from the arguments of a call that did not fail.

        Only keys whose policy rule says ``arguments: true``. A call succeeded
        when its result says ``ok``, or, where the format gives no status, when
        the result is structured JSON (an ``Error: ...`` text is not).
        """
        if observation.status == "error" or not observation.tool_call_id:
            return []
        if observation.status != "ok" and observation.key_fields in ("", "{}"):
            return []
        found = ctx.call(observation.tool_call_id)
        if found is None:
            return []
        caller, call = found
        try:
            arguments = json.loads(call.arguments or "{}")
        except ValueError:
            return []
        if not isinstance(arguments, dict):
            return []
        out = []
        for key in sorted(arguments):
            rule = self.settings.system_fields.get(key.lower())
            if rule is None or not rule.arguments:
                continue
            draft = self._system_draft(
                ctx,
                message,
                observation,
                rule,
                key,
                arguments[key],
                caller,
                "tool_arguments",
            )
            if draft is not None:
                out.append(draft)
        return out

    def _system_draft(
        self,
        ctx: SessionContext,
        message: Message,
        observation: ToolObservation,
        rule,
        key: str,
        value,
        where: Message,
        field_name: str,
    ) -> Draft | None:
        """``<label>: <value>`` of one policy-listed key (None: not a fact)."""
        if rule is None or isinstance(value, dict | list) or value is None:
            return None
        if isinstance(value, bool) or str(value).strip() == "":
            return None
        if isinstance(value, str) and value.startswith("<list of"):
            return None
        return Draft(
            message,
            rule.kind,
            "system_record",
            f"{rule.label}: {value}",
            key.lower(),
            str(value),
            1.0,
            f"tool:{observation.tool_name or 'unknown'}",
            Provenance(
                session_id=ctx.session.session_id,
                message_id=where.message_id,
                turn=where.turn,
                field=field_name,
                json_key=key,
            ),
            purpose=rule.purpose,
            version=self.version,
        )


_NAME_SEPARATORS = re.compile(r"[_\-.:/]+")


def purpose_inputs(
    ctx: SessionContext, messages: Sequence[Message]
) -> tuple[list[str], list[bool]]:
    """What the purpose classifier reads per message, and whether it is prose.

    A tool message's content is a stub (``[tool_result tool=... status=...
    artifact=...]``) that no purpose prototype resembles: it is read by its
    tools' names as words (``get_invoice`` -> "get invoice", so keywords still
    apply) and never embedded.
    """
    texts, prose = [], []
    for message in messages:
        if message.role == "tool":
            names = [
                _NAME_SEPARATORS.sub(" ", o.tool_name or "")
                for o in ctx.observations
                if o.message_id == message.message_id
            ]
            texts.append(" ".join(n for n in names if n.strip()) or message.content)
            prose.append(False)
        else:
            texts.append(message.content)
            prose.append(True)
    return texts, prose


def _contact_purposes(draft: Draft, purposes: PurposeClassifier) -> tuple[str, ...]:
    """The purposes a statement about contacting the subject binds (or none)."""
    contact = getattr(purposes, "contact_purposes", ())
    if (
        contact
        and draft.purpose is None
        and draft.source in ("user_stated", "model_inferred")
        and draft.kind in ("rule", "preference")
        and patterns.about_contact(draft.text)
    ):
        return contact
    return ()


def _classify_purposes(purposes, texts: list[str], prose: list[bool]):
    """``purposes.classify``; ``prose`` only where some text is not prose (a
    classifier made for tests may take texts alone)."""
    if all(prose):
        return purposes.classify(texts)
    return purposes.classify(texts, prose)


def _with_purposes(drafts, purpose_of, purposes: PurposeClassifier):
    """``(draft, purpose)`` pairs: one per draft, or one per contacting
    purpose for a statement about contacting the subject."""
    for draft in drafts:
        contact = _contact_purposes(draft, purposes)
        if contact:
            for purpose in contact:
                yield draft, purpose
        else:
            yield draft, draft.purpose or purpose_of.get(draft.message.message_id)


def honour_controls(ctx: SessionContext, drafts: Sequence[Draft]) -> None:
    """Refuse what the user's control phrases decline or withdraw (in place).

    ``decline`` refuses every user statement of its message, and a bare one
    ("Please don't remember that.") also the user's previous message;
    ``withdraw`` refuses the earlier statements of the session it names (by
    slot or words), or, naming none, the statements before it in its message,
    else the user's previous message. The refused drafts keep their
    provenance and get ``user_declined`` / ``user_withdrawn`` as the reason,
    so the gate records them as rejections.
    """
    users = [m for m in ctx.messages if m.role == "user"]
    stated = [d for d in drafts if d.source == "user_stated"]

    def of(message: Message) -> list[Draft]:
        return [d for d in stated if d.message.message_id == message.message_id]

    def refuse(found: Sequence[Draft], reason: str) -> None:
        for draft in found:
            if draft.reject_reason is None or draft.reject_reason == intent.CHATTER:
                draft.reject_reason = reason

    for index, message in enumerate(users):
        for sentence in sentences(message.content):
            said = intent.control(sentence.text)
            if said is None or said.action == "allow":
                continue
            previous = of(users[index - 1]) if index else []
            own = of(message)
            if said.action == "decline":
                refuse(own, intent.USER_DECLINED)
                if not own and intent.bare_decline(message.content):
                    refuse(previous, intent.USER_DECLINED)
            elif said.target:
                earlier = [
                    d
                    for d in stated
                    if d.message.turn < message.turn
                    or (
                        d.message.message_id == message.message_id
                        and (d.provenance.char_start or 0) < sentence.start
                    )
                ]
                refuse(
                    [
                        d
                        for d in earlier
                        if intent.names_memory(said.target, d.slot, d.text)
                    ],
                    intent.USER_WITHDRAWN,
                )
            else:
                before = [
                    d for d in own if (d.provenance.char_start or 0) < sentence.start
                ]
                refuse(before or previous, intent.USER_WITHDRAWN)


def extract_session(
    ctx: SessionContext,
    extractors: Sequence[Extractor],
    purposes: PurposeClassifier,
) -> ExtractionResult:
    """Run every extractor over every message; attach purpose, subject and ids.

    A message an extractor raises on is reported in ``failed`` (the caller makes
    it a dead letter) and contributes no candidate; the others are scanned.
    Candidates from several extractors for the same span keep the first.

    Purposes: a draft's own (a system field's policy purpose), else its
    message's (``purpose_inputs``). A rule or preference about contacting the
    subject (``patterns.about_contact``: "do not email me, call ...") is filed
    under every purpose that contacts the subject (``contacts_subject``), one
    candidate each, so a lookup for any of them honours it; a policy that
    marks none keeps the message's purpose.
    """
    result = ExtractionResult()
    drafts: list[Draft] = []
    classified = sum(getattr(e, "classified", 0) for e in extractors)
    embedded = getattr(purposes, "embedded", 0)
    for extractor in extractors:
        prepare = getattr(extractor, "prepare", None)
        if prepare is not None:
            prepare(ctx)
    for message in ctx.messages:
        try:
            found = [
                d for extractor in extractors for d in extractor.drafts(ctx, message)
            ]
        except TransientError:
            raise
        except Exception as exc:  # noqa: BLE001 - terminal for this message
            result.failed.append(
                (
                    message,
                    "memory_extraction_failed",
                    f"extractor raised {type(exc).__name__}",
                )
            )
            continue
        result.scanned += 1
        drafts.extend(found)
    honour_controls(ctx, drafts)
    need = sorted(
        {
            d.message.message_id: d.message
            for d in drafts
            if d.purpose is None and not _contact_purposes(d, purposes)
        }.values(),
        key=lambda m: m.turn,
    )
    texts, prose = purpose_inputs(ctx, need)
    purpose_of = dict(
        zip(
            [m.message_id for m in need],
            _classify_purposes(purposes, texts, prose) if need else [],
            strict=True,
        )
    )
    result.classified = sum(getattr(e, "classified", 0) for e in extractors)
    result.classified -= classified
    result.purpose_texts = getattr(purposes, "embedded", 0) - embedded
    first: dict[tuple, int] = {}  # span -> the draft that claimed it
    for draft, purpose in _with_purposes(drafts, purpose_of, purposes):
        span = (
            draft.provenance.message_id,
            draft.provenance.field,
            draft.provenance.char_start,
            draft.provenance.char_end,
            draft.provenance.json_key,
        )
        if first.setdefault(span, id(draft)) != id(draft):
            continue
        when = ctx.time_of(draft.message)
        result.candidates.append(
            MemoryCandidate(
                memory_id=memory_id_for(
                    ctx.session.tenant_id,
                    ctx.subject_id,
                    purpose,
                    draft.kind,
                    draft.source,
                    draft.text,
                    draft.provenance,
                ),
                tenant_id=ctx.session.tenant_id,
                subject_id=ctx.subject_id,
                purpose=purpose,
                kind=draft.kind,
                source=draft.source,
                text=draft.text,
                slot=draft.slot,
                value=draft.value,
                confidence=draft.confidence,
                extractor=draft.extractor,
                extractor_version=draft.version,
                provenance=draft.provenance,
                created_at=when,
                valid_from=when,
                reject_reason=draft.reject_reason,
                source_file=ctx.session.source_file,
                source_offset=draft.message.source_ref.rsplit("#", 1)[-1],
            )
        )
    return result
