"""Small builders of memory records for the memory unit tests."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from ctxledger.pipelines.memory.extract import MemoryCandidate, memory_id_for
from ctxledger.schemas.memory import ConsentRecord, MemoryRecord, Provenance

T0 = datetime(2026, 3, 14, 10, 0, tzinfo=UTC)


def at(minutes: float = 0, days: float = 0) -> datetime:
    return T0 + timedelta(minutes=minutes, days=days)


def provenance(
    turn: int = 1, message: str | None = None, session: str = "ses_1"
) -> Provenance:
    return Provenance(
        session_id=session,
        message_id=message or f"msg_{turn}",
        turn=turn,
        char_start=0,
        char_end=10,
    )


def candidate(
    text: str = "I prefer short answers.",
    *,
    tenant: str = "acme",
    subject: str = "u-1",
    purpose: str | None = "support",
    kind: str = "preference",
    source: str = "user_stated",
    slot: str | None = None,
    value: str | None = None,
    when: datetime | None = None,
    turn: int = 1,
    reject_reason: str | None = None,
) -> MemoryCandidate:
    prov = provenance(turn)
    return MemoryCandidate(
        memory_id=memory_id_for(tenant, subject, purpose, kind, source, text, prov),
        tenant_id=tenant,
        subject_id=subject,
        purpose=purpose,
        kind=kind,
        source=source,
        text=text,
        slot=slot,
        value=value,
        extractor="test",
        extractor_version="test-1",
        provenance=prov,
        created_at=when or at(turn),
        valid_from=when or at(turn),
        reject_reason=reject_reason,
    )


def memory(
    text: str,
    *,
    source: str = "user_stated",
    kind: str = "fact",
    slot: str | None = "slot",
    value: str | None = None,
    when: datetime | None = None,
    recorded: datetime | None = None,
    turn: int = 1,
    subject: str = "u-1",
    tenant: str = "acme",
    purpose: str = "support",
    expires: datetime | None = None,
    prov: Provenance | None | str = "default",
    stated_valid_to: datetime | None = None,
    session: str = "ses_1",
) -> MemoryRecord:
    p = provenance(turn, session=session) if prov == "default" else prov
    return MemoryRecord(
        memory_id=memory_id_for(
            tenant, subject, purpose, kind, source, text, p or Provenance()
        ),
        tenant_id=tenant,
        subject_id=subject,
        purpose=purpose,
        kind=kind,
        source=source,
        text=text,
        slot=slot,
        value=value,
        extractor="test",
        extractor_version="test-1",
        provenance=p,
        basis="contract",
        created_at=when or at(turn),
        valid_from=when or at(turn),
        valid_to=stated_valid_to,
        stated_valid_to=stated_valid_to,
        recorded_at=recorded or at(days=1),
        expires_at=expires or at(days=3650),
        policy_version="test",
    )


def grant(
    subject: str = "u-1",
    purpose: str = "support",
    basis: str = "contract",
    when: datetime | None = None,
    tenant: str = "acme",
    expires: datetime | None = None,
) -> ConsentRecord:
    when = when or at(days=-30)
    return ConsentRecord(
        consent_id=ConsentRecord.id_for(
            tenant, subject, purpose, basis, "grant", when, expires
        ),
        tenant_id=tenant,
        subject_id=subject,
        purpose=purpose,
        basis=basis,
        event="grant",
        effective_at=when,
        expires_at=expires,
    )


def withdraw(
    subject: str = "u-1",
    purpose: str = "support",
    basis: str | None = None,
    when: datetime | None = None,
    tenant: str = "acme",
) -> ConsentRecord:
    when = when or at(days=1)
    return ConsentRecord(
        consent_id=ConsentRecord.id_for(
            tenant, subject, purpose, basis, "withdraw", when, None
        ),
        tenant_id=tenant,
        subject_id=subject,
        purpose=purpose,
        basis=basis,
        event="withdraw",
        effective_at=when,
    )
