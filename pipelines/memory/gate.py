"""The gate: a candidate becomes a memory only with a live basis and a retention.

For each candidate, in order (the first failing check is the rejection reason):

1. an extractor already rejected it (``reject_reason``, e.g. ``unverified_span``);
1a. ``secret_in_text``: its text (or value) still matches a secret rule after
   redaction (``pipelines.redact.residual``): defense in depth, a secret the
   redactor missed is never stored as a memory, whatever its basis;
   ``secret_value``: its value is a secret, redacted ("always use my account
   pin <SECRET:..>"): a credential is never a memory; ``identifier_in_text``:
   a passport number, national id or birth date the redactor missed;
2. (no check) a candidate of ``unknown`` source (an input stated a source
   that is not ``user_stated | system_record | model_inferred``) is gated like
   any other and stored as ``unknown``: the query layer never serves it
   (``memories_served``, the serving replica, ``pack``), but it is counted;
3. ``no_purpose``: the policy lists no purpose it could be scoped to;
4. ``no_retention_rule``: the policy gives no retention for its source and kind
   (there is no built-in default);
5. ``expired``: its time plus retention is already past;
6. ``no_basis`` / ``basis_withdrawn``: no consent grant for the tenant, subject
   and purpose is live at the memory's time (``basis_withdrawn`` when one was
   given before that time and then withdrawn or ended).

Rejections are records too (``MemoryRejection``): never silently dropped, and they
never carry the text. A ``no_basis`` rejection of a transcript span is also a
re-admission pointer (``readmission = "pending"``, ``pipelines.memory.readmit``):
a later grant for its tenant, subject and purpose re-admits it on the next
nightly, re-read from the redacted ``messages`` row, with no backfill.

A memory's time is ``valid_from`` (the message's time), or the run's time when
the source has none.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from ctxledger.pipelines.memory.consent import had_grant, live_basis
from ctxledger.pipelines.memory.extract import MemoryCandidate
from ctxledger.pipelines.memory.readmit import NO_BASIS, readmittable
from ctxledger.pipelines.redact.residual import (
    identifier_in_text,
    secret_in_text,
    secret_placeholder,
)
from ctxledger.schemas import content_hash
from ctxledger.schemas.memory import (
    ConsentRecord,
    MemoryRecord,
    MemoryRejection,
    MemorySettings,
)

#: Rejection reason of a candidate whose text still holds a secret.
SECRET_IN_TEXT = "secret_in_text"
#: Rejection reason of a candidate whose value is a (redacted) secret.
SECRET_VALUE = "secret_value"
#: Rejection reason of a candidate that still holds a personal identifier.
IDENTIFIER_IN_TEXT = "identifier_in_text"


@dataclass
class GateResult:
    """Memories to store and candidates rejected, with reasons."""

    memories: list[MemoryRecord] = field(default_factory=list)
    rejections: list[MemoryRejection] = field(default_factory=list)


def rejection(
    candidate: MemoryCandidate,
    reason: str,
    recorded_at: datetime,
    policy_version: str,
    run_id: str,
) -> MemoryRejection:
    """The rejection record of a candidate (no text kept); a ``no_basis`` one
    of a re-derivable span is a pending re-admission pointer."""
    pending = reason == NO_BASIS and readmittable(candidate)
    return MemoryRejection(
        rejection_id=content_hash(candidate.memory_id, reason, prefix="rej_"),
        memory_id=candidate.memory_id,
        tenant_id=candidate.tenant_id,
        subject_id=candidate.subject_id,
        purpose=candidate.purpose or "",
        kind=candidate.kind,
        source=candidate.source,
        reason=reason,
        extractor=candidate.extractor,
        provenance=candidate.provenance,
        recorded_at=recorded_at,
        policy_version=policy_version,
        run_id=run_id,
        extractor_version=candidate.extractor_version,
        confidence=candidate.confidence,
        valid_from=candidate.valid_from,
        readmission="pending" if pending else None,
    )


def gate_candidates(
    candidates: Sequence[MemoryCandidate],
    consent: Sequence[ConsentRecord],
    settings: MemorySettings,
    *,
    now: datetime,
    policy_version: str,
    run_id: str,
    basis_at: datetime | None = None,
    received_at: datetime | None = None,
) -> GateResult:
    """Decide every candidate (see the module docstring).

    ``basis_at``: when the basis must be live (default: each memory's own
    time); re-admission (``pipelines.memory.readmit``) checks it *now*, since
    the grant that admits a statement may postdate it. ``received_at``: the
    time of an undated candidate (the run's logical time, ``JobConfig``;
    ``now`` when None), so a rerun over the same input derives the same rows.
    """
    result = GateResult()
    for candidate in candidates:
        when = candidate.valid_from or received_at or now
        basis_time = basis_at or when
        reason: str | None = candidate.reject_reason
        days = settings.retention_days(candidate.source, candidate.kind)
        grant = None
        if reason is None and (
            secret_in_text(candidate.text) or secret_in_text(candidate.value or "")
        ):
            reason = SECRET_IN_TEXT
        if reason is None and (
            secret_placeholder(candidate.text)
            or secret_placeholder(candidate.value or "")
        ):
            reason = SECRET_VALUE
        if reason is None and (
            identifier_in_text(candidate.text)
            or identifier_in_text(candidate.value or "")
        ):
            reason = IDENTIFIER_IN_TEXT
        if reason is None and (
            candidate.purpose is None or candidate.purpose not in settings.purpose_names
        ):
            reason = "no_purpose"
        if reason is None and days is None:
            reason = "no_retention_rule"
        expires_at = when + timedelta(days=days or 0)
        if reason is None and expires_at <= now:
            reason = "expired"
        if reason is None:
            grant = live_basis(
                consent,
                candidate.tenant_id,
                candidate.subject_id,
                candidate.purpose,
                basis_time,
                settings.bases,
            )
            if grant is None:
                reason = (
                    "basis_withdrawn"
                    if had_grant(
                        consent,
                        candidate.tenant_id,
                        candidate.subject_id,
                        candidate.purpose,
                        basis_time,
                    )
                    else NO_BASIS
                )
        if reason is not None:
            result.rejections.append(
                rejection(candidate, reason, now, policy_version, run_id)
            )
            continue
        result.memories.append(
            MemoryRecord(
                memory_id=candidate.memory_id,
                tenant_id=candidate.tenant_id,
                subject_id=candidate.subject_id,
                purpose=candidate.purpose,
                kind=candidate.kind,
                source=candidate.source,
                text=candidate.text,
                slot=candidate.slot,
                value=candidate.value,
                confidence=candidate.confidence,
                extractor=candidate.extractor,
                extractor_version=candidate.extractor_version,
                provenance=candidate.provenance,
                basis=grant.basis,
                consent_id=grant.consent_id,
                created_at=candidate.created_at or when,
                valid_from=when,
                valid_to=candidate.valid_to,
                stated_valid_to=candidate.valid_to,
                recorded_at=now,
                expires_at=expires_at,
                policy_version=policy_version,
                run_id=run_id,
            )
        )
    return result
