"""Consent re-admission: a later grant admits what ``no_basis`` rejected, no backfill.

A candidate rejected for ``no_basis`` keeps no text (``MemoryRejection``), only a
pointer to its span: tenant, subject, purpose, kind, source, session, message,
char span, extractor and its version, confidence, the message's time and the
candidate id (``memory_id``). When a grant for that tenant, subject and purpose
is live, the nightly lifecycle (``warehouse.memory_api``) re-reads the redacted
message from ``messages`` and calls ``readmit``, which

1. re-runs the rule extractor on that message and takes the draft at exactly
   that span (a classifier span, which needs the MiniLM model, is taken as the
   classifier decided it, if the extractor version is unchanged and no rule now
   claims the span);
2. checks the re-derived candidate has the pointer's id (a content hash of the
   text and provenance): a message redacted differently since gives another id,
   and the pointer is closed (``span_changed``), never admitted with other text;
3. gates it again (``gate_candidates`` with the basis checked *now*, not at the
   message's time): secret, purpose, retention and expiry as on the first run.

The memory keeps the original provenance and ``valid_from`` (the message's
time); ``created_at`` and ``recorded_at`` are the re-admission's time. Pure: no
warehouse access, so the same pointer and message always give the same answer.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from ctxledger.schemas.memory import (
    ConsentRecord,
    MemoryRecord,
    MemoryRejection,
    MemorySettings,
)

NO_BASIS = "no_basis"
#: Close reasons of a pointer that can no longer be re-admitted.
MESSAGE_GONE = "message_gone"
SPAN_CHANGED = "span_changed"
NO_CANDIDATE = "no_candidate"
EXTRACTOR_CHANGED = "extractor_changed"
#: Gate rejections that leave a pointer pending (the basis may come later).
_STILL_PENDING = frozenset({NO_BASIS, "basis_withdrawn"})


def readmittable(candidate) -> bool:
    """Can a rejected ``MemoryCandidate`` be re-derived from ``messages`` later?

    Only sentence spans of a message's ``content`` found by the rule extractor
    (``rules:*``) or its classifier: their text is the redacted message sliced
    at the span. System-record inputs and tool-output fields are not kept in
    ``messages`` as such, and an LLM's spans cannot be re-run offline.
    """
    prov = candidate.provenance
    return bool(
        prov is not None
        and prov.field == "content"
        and prov.session_id
        and prov.message_id
        and prov.char_start is not None
        and prov.char_end is not None
        and candidate.purpose
        and (
            candidate.extractor == "classifier"
            or candidate.extractor.startswith("rules:")
        )
    )


@dataclass(frozen=True)
class MessageText:
    """The redacted message a pointer names, as stored in ``messages``."""

    message_id: str
    session_id: str
    tenant_id: str
    turn: int
    role: str
    content: str
    content_hash: str
    token_count: int
    policy_version: str
    source_ref: str


@dataclass(frozen=True)
class Readmission:
    """What ``readmit`` decided for one pointer: a memory, a close reason, or
    (both None) still pending."""

    memory: MemoryRecord | None = None
    closed: str | None = None


def _candidate(pointer: MemoryRejection, message: MessageText, settings, now):
    """The candidate the extractor gives at the pointer's span, or a close reason."""
    from ctxledger.pipelines.memory.extract import (
        MemoryCandidate,
        RuleExtractor,
        SessionContext,
        memory_id_for,
    )
    from ctxledger.pipelines.memory.text import sentences
    from ctxledger.schemas import Message, Session

    prov = pointer.provenance
    extractor = RuleExtractor(settings, None)
    session = Session(
        session_id=message.session_id,
        tenant_id=message.tenant_id,
        source_format="",
        source_file="",
        source_hash="",
    )
    msg = Message(
        message_id=message.message_id,
        session_id=message.session_id,
        tenant_id=message.tenant_id,
        turn=message.turn,
        role=message.role,
        content=message.content,
        content_hash=message.content_hash,
        token_count=message.token_count,
        policy_version=message.policy_version,
        source_ref=message.source_ref,
    )
    span = (prov.char_start, prov.char_end)
    at_span = [
        d
        for d in extractor.drafts(SessionContext(session, [msg]), msg)
        if (d.provenance.char_start, d.provenance.char_end) == span
        and d.provenance.field == "content"
    ]
    draft = next(
        (d for d in at_span if d.kind == pointer.kind and d.source == pointer.source),
        None,
    )
    if draft is not None:
        text, slot, value = draft.text, draft.slot, draft.value
        confidence, name, version = draft.confidence, draft.extractor, draft.version
    elif pointer.extractor == "classifier" and not at_span:
        if pointer.extractor_version != extractor.version:
            return EXTRACTOR_CHANGED
        found = [s for s in sentences(message.content) if (s.start, s.end) == span]
        if not found:
            return SPAN_CHANGED
        text = found[0].text
        slot, value = RuleExtractor._slot(pointer.kind, text)
        confidence = pointer.confidence if pointer.confidence is not None else 1.0
        name, version = pointer.extractor, pointer.extractor_version
    elif pointer.extractor_version != extractor.version:
        # The rules changed and no longer find this statement at this span.
        return NO_CANDIDATE
    else:
        # Same extractor, other result: the stored message is not the one the
        # pointer was made from (a backfill redacted it differently).
        return SPAN_CHANGED
    memory_id = memory_id_for(
        pointer.tenant_id,
        pointer.subject_id,
        pointer.purpose,
        pointer.kind,
        pointer.source,
        text,
        prov,
    )
    if memory_id != pointer.memory_id:
        return SPAN_CHANGED
    return MemoryCandidate(
        memory_id=memory_id,
        tenant_id=pointer.tenant_id,
        subject_id=pointer.subject_id,
        purpose=pointer.purpose,
        kind=pointer.kind,
        source=pointer.source,
        text=text,
        slot=slot,
        value=value,
        confidence=confidence,
        extractor=name,
        extractor_version=version,
        provenance=prov,
        created_at=now,
        valid_from=pointer.valid_from,
    )


def readmit(
    pointer: MemoryRejection,
    message: MessageText | None,
    consent: Sequence[ConsentRecord],
    settings: MemorySettings,
    *,
    now: datetime,
    policy_version: str,
    run_id: str,
) -> Readmission:
    """Re-admit one pending pointer now, close it, or leave it pending.

    ``message``: the pointer's message row (None: it is gone); ``consent``: the
    subject's consent events. See the module docstring for the checks.
    """
    from ctxledger.pipelines.memory.gate import gate_candidates

    if message is None:
        return Readmission(closed=MESSAGE_GONE)
    if (
        message.tenant_id != pointer.tenant_id
        or pointer.provenance is None
        or message.session_id != pointer.provenance.session_id
    ):
        return Readmission(closed=SPAN_CHANGED)
    candidate = _candidate(pointer, message, settings, now)
    if isinstance(candidate, str):
        return Readmission(closed=candidate)
    result = gate_candidates(
        [candidate],
        consent,
        settings,
        now=now,
        policy_version=policy_version,
        run_id=run_id,
        basis_at=now,
    )
    if result.memories:
        return Readmission(memory=result.memories[0])
    reason = result.rejections[0].reason
    return Readmission() if reason in _STILL_PENDING else Readmission(closed=reason)
