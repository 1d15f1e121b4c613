"""Consent events and whether a legal basis is live at a time.

A consent input is JSONL, one event per line (docs/memory.md)::

    {"event": "grant", "tenant_id": "acme", "subject_id": "u-1", "purpose": "support",
     "basis": "contract", "at": "2026-01-01T00:00:00Z"}
    {"event": "withdraw", "tenant_id": "acme", "subject_id": "u-1",
     "purpose": "support", "basis": "consent", "at": "2026-05-01T00:00:00Z"}

A line may state a ``source`` (``user_stated | system_record | model_inferred``;
any other value is stored as ``unknown``, not dead-lettered). A grant of
``unknown`` source is stored but never a basis: it admits nothing and serves
nothing (a withdrawal counts whatever its source, the safe side).

A grant is live at ``t`` when its ``effective_at <= t``, it has not ended by itself
(``expires_at``), and no withdrawal of the same tenant, subject, purpose (or
``"*"``) and basis (or any basis, when the withdrawal names none) happened at or
after the grant and at or before ``t``. The same rule is the SQL macro
``memory_live_basis`` the query API uses (warehouse/sql/memory.sql).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from ctxledger.schemas.memory import ConsentRecord, MemorySettings, source_kind


class ConsentLine(BaseModel):
    """One line of a consent input file."""

    model_config = ConfigDict(extra="forbid")

    event: Literal["grant", "withdraw"]
    tenant_id: str | None = Field(default=None, min_length=1)
    subject_id: str = Field(min_length=1)
    purpose: str = Field(min_length=1)
    basis: str | None = None
    at: datetime
    expires_at: datetime | None = None
    #: Any JSON value: an unrecognised one is stored as ``unknown``.
    source: Any = None

    @field_validator("at", "expires_at")
    @classmethod
    def _utc(cls, value: datetime | None) -> datetime | None:
        if value is not None and value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value


class ConsentError(ValueError):
    """A consent line that is well-formed JSON but not a usable event."""

    def __init__(self, reason: str, detail: str):
        super().__init__(detail)
        self.reason = reason


def consent_record(
    line: ConsentLine,
    settings: MemorySettings,
    default_tenant: str,
    source_ref: str,
    run_id: str,
) -> ConsentRecord:
    """Validate a parsed line against the policy and build its record."""
    purposes = settings.purpose_names
    if line.purpose != "*" and line.purpose not in purposes:
        raise ConsentError("unknown_purpose", "purpose is not listed in the policy")
    if line.purpose == "*" and line.event == "grant":
        raise ConsentError("invalid_record", "a grant must name one purpose")
    if line.event == "grant" and line.basis is None:
        raise ConsentError("missing_field", "a grant must name its basis")
    if line.basis is not None and line.basis not in settings.bases:
        raise ConsentError("unknown_basis", "basis is not listed in the policy")
    tenant = line.tenant_id or default_tenant
    source = None if line.source is None else source_kind(line.source, "unknown")
    return ConsentRecord(
        consent_id=ConsentRecord.id_for(
            tenant,
            line.subject_id,
            line.purpose,
            line.basis,
            line.event,
            line.at,
            line.expires_at,
            source,
        ),
        source=source,
        tenant_id=tenant,
        subject_id=line.subject_id,
        purpose=line.purpose,
        basis=line.basis,
        event=line.event,
        effective_at=line.at,
        expires_at=line.expires_at,
        source_ref=source_ref,
        run_id=run_id,
    )


def _withdraws(withdrawal: ConsentRecord, grant: ConsentRecord) -> bool:
    return (
        withdrawal.event == "withdraw"
        and withdrawal.tenant_id == grant.tenant_id
        and withdrawal.subject_id == grant.subject_id
        and withdrawal.purpose in (grant.purpose, "*")
        and (withdrawal.basis is None or withdrawal.basis == grant.basis)
    )


def live_grants(
    events: Iterable[ConsentRecord],
    tenant_id: str,
    subject_id: str,
    purpose: str,
    at: datetime,
) -> list[ConsentRecord]:
    """Grants covering ``purpose`` that are live at ``at`` (see module docstring)."""
    relevant = [
        e for e in events if e.tenant_id == tenant_id and e.subject_id == subject_id
    ]
    withdrawals = [e for e in relevant if e.event == "withdraw"]
    live = []
    for grant in relevant:
        if not grant.is_basis or grant.purpose != purpose or grant.effective_at > at:
            continue
        if grant.expires_at is not None and grant.expires_at <= at:
            continue
        if any(
            _withdraws(w, grant) and grant.effective_at <= w.effective_at <= at
            for w in withdrawals
        ):
            continue
        live.append(grant)
    return live


def live_basis(
    events: Sequence[ConsentRecord],
    tenant_id: str,
    subject_id: str,
    purpose: str,
    at: datetime,
    bases: Sequence[str],
) -> ConsentRecord | None:
    """The live grant to cite, preferring bases in the policy's order."""
    grants = live_grants(events, tenant_id, subject_id, purpose, at)
    if not grants:
        return None
    rank = {basis: i for i, basis in enumerate(bases)}
    return min(
        grants,
        key=lambda g: (
            rank.get(g.basis or "", len(rank)),
            g.effective_at,
            g.consent_id,
        ),
    )


def had_grant(
    events: Iterable[ConsentRecord],
    tenant_id: str,
    subject_id: str,
    purpose: str,
    at: datetime,
) -> bool:
    """Was any grant for the purpose given at or before ``at`` (live or not)?"""
    return any(
        e.is_basis
        and e.tenant_id == tenant_id
        and e.subject_id == subject_id
        and e.purpose == purpose
        and e.effective_at <= at
        for e in events
    )
