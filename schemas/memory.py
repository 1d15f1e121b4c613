"""Memory records: scoped, consent-gated, expiring, superseding, erasable.

* ``MemoryRecord`` (table ``memories``): one remembered statement about a subject,
  kept verbatim (redacted) with where it came from (``Provenance``), the legal basis
  that allowed storing it, when it held (``valid_from``/``valid_to``), when we knew
  it (``recorded_at``/``superseded_at``) and when it must be gone (``expires_at``).
* ``MemoryRejection`` (``memory_rejections``): a candidate that was *not* stored and
  why (no live basis, no retention rule, unverified span...). It never carries the
  text: a statement without a basis must not be kept in any form.
* ``ConsentRecord`` (``consent``): one grant or withdrawal event. Events are
  append-only; whether a basis is live at a time is computed from them (a grant at
  or before the time, not withdrawn since), so a withdrawal takes effect on the
  next query without rewriting any memory.
* ``MemoryExtraction`` (``memory_extractions``) and ``MemoryInputFile``
  (``memory_inputs``): per-session and per-input-file counts the commit step uses
  for the memory stages' conservation checks; ``memory_inputs`` also tells the
  nightly job which consent / system-record files it already read.
* ``ErasureReceipt`` (``erasures``): what an erasure removed (tables and row
  counts, expired snapshots, deleted files), when and why. It names the subject
  only by a hash (``subject_hash``), never by id or text.
"""

from __future__ import annotations

from datetime import datetime
from typing import ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ctxledger.schemas.arrow import Float32
from ctxledger.schemas.base import Record, content_hash
from ctxledger.schemas.evidence import checked_embedding

MemorySource = Literal["user_stated", "system_record", "model_inferred", "unknown"]
MemoryKind = Literal["rule", "preference", "identity", "fact", "account_state"]
ConsentEvent = Literal["grant", "withdraw"]
ReadmissionState = Literal["pending", "readmitted", "closed"]

#: Sources a memory can be served from at all (``unknown`` never is).
KNOWN_SOURCES: tuple[str, ...] = ("user_stated", "system_record", "model_inferred")
UNKNOWN_SOURCE = "unknown"


def source_kind(stated: object, default: MemorySource) -> MemorySource:
    """The source an input states, as stored: ``default`` when it states none,
    the stated kind when it is one of ``KNOWN_SOURCES``, else ``unknown``.

    An unrecognised source (``"unknown"``, a typo, another system's label) is
    not a reason to drop the record: it is stored as ``unknown`` and never
    served (the query layer serves only the policy's fact and hypothesis
    sources). The stated value itself is not kept: it may be any text.
    """
    if stated is None:
        return default
    if isinstance(stated, str) and stated in KNOWN_SOURCES:
        return stated  # type: ignore[return-value]
    return UNKNOWN_SOURCE


class _Part(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Provenance(_Part):
    """Where a memory's text comes from.

    For a statement in a transcript: the session, message and turn, and the char
    span of the text in the redacted message ``field`` (``content``). For a tool
    result: the tool message and the JSON key (``json_key``) of its output. For a
    system-record input file: ``input_ref`` (``<file>#line:<n>``).
    """

    session_id: str | None = None
    message_id: str | None = None
    turn: int | None = None
    field: str = "content"
    char_start: int | None = None
    char_end: int | None = None
    json_key: str | None = None
    input_ref: str | None = None

    @property
    def known(self) -> bool:
        """True when the memory can be traced to a message or an input record."""
        return bool(self.message_id or self.input_ref)


class MemoryRecord(Record):
    """One stored memory (see the module docstring for the lifecycle columns).

    ``slot`` is the normalised key the memory is about (``employee_number``,
    ``affected_shard``, ``preference:answers``); a newer statement on the same
    tenant, subject and slot supersedes an older one. ``value`` is the slot's
    value when the extractor could isolate it. ``stated_valid_to`` is the end of
    validity the source itself gave (a system record's ``valid_to``);
    ``valid_to`` is the effective end: that, or when a newer memory on the same
    slot took over. ``conflict_with`` names a memory
    this one disagrees with where no rule decides (served as a conflict, not as a
    fact).
    """

    table: ClassVar[str | None] = "memories"
    key: ClassVar[tuple[str, ...]] = ("memory_id",)

    memory_id: str = Field(description="Content-hash id of the memory.")
    tenant_id: str = Field(description="Tenant the row belongs to.")
    subject_id: str = Field(description="Person or account the memory is about.")
    purpose: str = Field(
        description="Purpose the memory may be used for (policy-listed)."
    )
    kind: MemoryKind = Field(
        description="Kind of memory (preference, account_state, ...)."
    )
    source: MemorySource = Field(
        description="user_stated, system_record or model_inferred."
    )
    text: str = Field(description="The memory as served, redacted.")
    slot: str | None = Field(
        default=None,
        description="Normalised key the memory is about; newer ones supersede.",
    )
    value: str | None = Field(
        default=None, description="The slot's value, when the extractor isolated it."
    )
    confidence: float = Field(
        default=1.0, ge=0.0, le=1.0, description="Extractor confidence, 0 to 1."
    )
    extractor: str = Field(description="Extractor that produced the memory.")
    extractor_version: str = Field(description="Version of that extractor.")
    provenance: Provenance | None = Field(
        default=None, description="Session, message and character span it came from."
    )
    basis: str | None = Field(
        default=None,
        description="Legal basis (consent, contract, ...) it is kept under.",
    )
    consent_id: str | None = Field(
        default=None, description="Consent record that allows it, if consent-based."
    )
    created_at: datetime = Field(description="When the statement was made (UTC).")
    valid_from: datetime = Field(description="Start of validity (UTC).")
    valid_to: datetime | None = Field(
        default=None, description="Effective end of validity (UTC); NULL: open."
    )
    stated_valid_to: datetime | None = Field(
        default=None, description="End of validity the source itself gave."
    )
    recorded_at: datetime = Field(description="When the warehouse stored it (UTC).")
    superseded_at: datetime | None = Field(
        default=None, description="When a newer memory on the slot took over."
    )
    superseded_by: str | None = Field(
        default=None, description="memory_id of that newer memory."
    )
    conflict_with: str | None = Field(
        default=None, description="memory_id it disagrees with, where no rule decides."
    )
    expires_at: datetime = Field(description="Retention expiry (UTC) from the policy.")
    policy_version: str = Field(description="Policy version it was extracted under.")
    run_id: str = Field(default="", description="Run that wrote the row (see runs).")
    #: The registered source (``schemas.sources``); NULL in rows written before.
    source_id: str | None = Field(
        default=None,
        description="Registered source it came from; NULL in older rows.",
    )
    #: The text's vector, computed once when the nightly writes the memory (so
    #: ``pack`` never embeds a memory per request); NULL in rows written before,
    #: in runs with deferred embedding, or when embedding failed: readers embed
    #: those themselves. Only comparable with vectors of the same ``embed_model``.
    embedding: list[Float32] | None = Field(
        default=None,
        description="Normalised MiniLM vector of text (FLOAT[384]); NULL: none.",
    )
    embed_model: str | None = Field(
        default=None, description="Embedding model that computed embedding."
    )

    @field_validator("embedding")
    @classmethod
    def _width(cls, value: list[float] | None) -> list[float] | None:
        return checked_embedding(value)


class MemoryRejection(Record):
    """A memory candidate that was not stored, with the reason (no text kept)."""

    table: ClassVar[str | None] = "memory_rejections"
    key: ClassVar[tuple[str, ...]] = ("rejection_id",)

    rejection_id: str
    memory_id: str
    tenant_id: str
    subject_id: str
    purpose: str
    kind: MemoryKind
    source: MemorySource
    reason: str
    extractor: str
    provenance: Provenance | None = None
    recorded_at: datetime
    policy_version: str
    run_id: str = ""
    # -- re-admission pointer (text-free): a ``no_basis`` rejection of a
    # transcript span is ``pending`` until a later grant for the tenant, subject
    # and purpose re-admits it (``readmitted``) or it can no longer be
    # (``closed``, with ``readmission_reason``); None: not re-admittable.
    extractor_version: str = ""
    confidence: float | None = None
    valid_from: datetime | None = None
    readmission: ReadmissionState | None = None
    readmission_reason: str | None = None
    readmitted_at: datetime | None = None
    readmission_run_id: str | None = None


class ConsentRecord(Record):
    """One consent event: a basis granted or withdrawn for a subject and purpose.

    ``purpose`` ``"*"`` on a withdrawal withdraws every purpose; ``basis`` None on
    a withdrawal withdraws every basis of the purpose. A grant may end by itself at
    ``expires_at`` (e.g. a contract's end). ``source``: what the input stated
    (None: nothing); a grant of ``unknown`` source is stored but is no basis
    (it admits and serves nothing), a withdrawal counts whatever its source.
    """

    table: ClassVar[str | None] = "consent"
    key: ClassVar[tuple[str, ...]] = ("consent_id",)

    consent_id: str
    tenant_id: str
    subject_id: str
    purpose: str
    basis: str | None = None
    event: ConsentEvent
    effective_at: datetime
    expires_at: datetime | None = None
    source_ref: str = ""
    run_id: str = ""
    source: MemorySource | None = None

    @property
    def is_basis(self) -> bool:
        """A grant that can be a legal basis (not one of unknown source)."""
        return self.event == "grant" and self.source != UNKNOWN_SOURCE

    @staticmethod
    def id_for(
        tenant_id: str,
        subject_id: str,
        purpose: str,
        basis: str | None,
        event: str,
        effective_at: datetime,
        expires_at: datetime | None,
        source: str | None = None,
    ) -> str:
        """Content hash of the event's fields (re-reading a file adds nothing);
        ``source`` is hashed only when stated, so older ids stay the same."""
        stated = () if source is None else (source,)
        return content_hash(
            tenant_id,
            subject_id,
            purpose,
            basis,
            event,
            effective_at,
            expires_at,
            *stated,
            prefix="cns_",
        )


class MemoryExtraction(Record):
    """Extraction counts for one session of one run (conservation checks)."""

    table: ClassVar[str | None] = "memory_extractions"
    key: ClassVar[tuple[str, ...]] = ("extraction_id",)

    extraction_id: str
    run_id: str = ""
    tenant_id: str
    session_id: str
    subject_id: str
    messages_in: int = 0
    messages_scanned: int = 0
    candidates: int = 0
    extractor_version: str


class MemoryInputFile(Record):
    """A consent or system-record input file a run read, by content hash."""

    table: ClassVar[str | None] = "memory_inputs"
    key: ClassVar[tuple[str, ...]] = ("file_hash", "path", "run_id")

    file_hash: str
    path: str
    kind: Literal["consent", "system_records"]
    tenant_id: str
    size_bytes: int
    status: Literal["processed", "changed", "unreadable"] = "processed"
    records_in: int = 0
    records_out: int = 0
    dead: int = 0
    run_id: str = ""


class TableRows(_Part):
    """Rows an erasure removed from one table."""

    table: str
    rows: int


class ErasureReceipt(Record):
    """Proof of one erasure: what was removed, from where, when and why."""

    table: ClassVar[str | None] = "erasures"
    key: ClassVar[tuple[str, ...]] = ("erasure_id",)

    erasure_id: str
    tenant_id: str
    subject_hash: str | None = None
    reason: Literal["request", "consent_withdrawn", "retention"]
    requested_at: datetime
    completed_at: datetime
    rows: list[TableRows] = Field(default_factory=list)
    rows_total: int = 0
    sessions: int = 0
    snapshots_expired: list[int] = Field(default_factory=list)
    files_deleted: int = 0
    quarantine_files_deleted: int = 0
    catalog_compacted: bool = False
    history_purged: bool = False
    pseudonym_mappings: int = 0
    note: str = ""
    job_version: str = ""


def subject_hash(tenant_id: str, subject_id: str) -> str:
    """How receipts name a subject: a hash an operator can recompute, not the id."""
    return content_hash(tenant_id, subject_id, prefix="sub_")


# -- policy section ----------------------------------------------------------------

_NAME = r"^[a-z][a-z0-9_]*$"
#: Legal bases a consent event may name (GDPR art. 6(1) a-f).
LEGAL_BASES: tuple[str, ...] = (
    "consent",
    "contract",
    "legal_obligation",
    "vital_interest",
    "public_task",
    "legitimate_interest",
)
MEMORY_KINDS: tuple[str, ...] = (
    "rule",
    "preference",
    "identity",
    "fact",
    "account_state",
)


class PurposeRule(_Part):
    """One purpose memories can be scoped to, and how a message is classified to it.

    A message mentioning one of ``keywords`` (whole words, case-insensitive) gets
    this purpose; otherwise the MiniLM embedding of the message is compared with
    the ``prototypes`` sentences of every purpose. ``contacts_subject``: the
    tenant contacts the subject for this purpose (support calls, billing
    e-mails), so a contact preference ("do not email me, call ...") is stored
    under every such purpose, whatever the message is about.
    """

    name: str = Field(pattern=_NAME)
    keywords: tuple[str, ...] = ()
    prototypes: tuple[str, ...] = ()
    contacts_subject: bool = False


class SystemField(_Part):
    """A tool-result JSON key that states account state (``plan: Pro``)."""

    label: str = Field(min_length=1)
    purpose: str | None = None
    kind: MemoryKind = "account_state"
    #: Also read the key from the arguments of a tool call whose result came
    #: back without error (an API that accepted ``username: foo`` confirms it).
    arguments: bool = False


class MemorySettings(_Part):
    """The ``memory`` policy section (see docs/memory.md).

    ``retention`` is days to keep a memory per source, then per kind (``"*"``: any
    kind of that source). There is no built-in default: a memory whose source and
    kind have no retention rule is rejected (``no_retention_rule``), never kept
    forever. ``fact_sources`` are served as facts, ``hypothesis_sources`` as
    hypotheses; any other source is not served.
    """

    purposes: tuple[PurposeRule, ...] = ()
    default_purpose: str | None = None
    bases: tuple[str, ...] = LEGAL_BASES
    fact_sources: tuple[MemorySource, ...] = ("user_stated", "system_record")
    hypothesis_sources: tuple[MemorySource, ...] = ("model_inferred",)
    retention: dict[str, dict[str, int]] = Field(default_factory=dict)
    #: Labelled example sentences per kind (and ``other``) for the classifier;
    #: empty: the extractor's built-in prototypes.
    kind_prototypes: dict[str, tuple[str, ...]] = Field(default_factory=dict)
    kind_threshold: float = Field(default=0.45, ge=0.0, le=1.0)
    kind_margin: float = Field(default=0.05, ge=0.0, le=1.0)
    purpose_threshold: float = Field(default=0.3, ge=0.0, le=1.0)
    system_fields: dict[str, SystemField] = Field(default_factory=dict)
    #: Canonical session metadata key that names the subject.
    subject_metadata_key: str = "subject_id"
    #: After the nightly purge deletes memories (expired, consent withdrawn),
    #: also expire old snapshots and delete their files so history forgets too.
    purge_history: bool = True
    #: The nightly rewrites ``memories`` / ``consent`` sorted by (tenant_id,
    #: subject_id) once they are spread over more data files than this.
    compact_after_files: int = Field(default=32, ge=1)

    @model_validator(mode="after")
    def _consistent(self) -> MemorySettings:
        names = [p.name for p in self.purposes]
        if len(set(names)) != len(names):
            raise ValueError("memory.purposes lists a purpose twice")
        if self.default_purpose is not None and self.default_purpose not in names:
            raise ValueError("memory.default_purpose must be one of memory.purposes")
        for name, rule in self.system_fields.items():
            if rule.purpose is not None and rule.purpose not in names:
                raise ValueError(f"memory.system_fields[{name!r}]: unknown purpose")
        if set(self.fact_sources) & set(self.hypothesis_sources):
            raise ValueError("a source cannot be served both as fact and hypothesis")
        if "unknown" in self.fact_sources + self.hypothesis_sources:
            raise ValueError("memories of unknown source are never served")
        for basis in self.bases:
            if basis not in LEGAL_BASES:
                raise ValueError(f"memory.bases: unknown legal basis {basis!r}")
        for source, kinds in self.retention.items():
            if source not in (*KNOWN_SOURCES, UNKNOWN_SOURCE):
                raise ValueError(f"memory.retention: unknown source {source!r}")
            for kind, days in kinds.items():
                if kind != "*" and kind not in MEMORY_KINDS:
                    raise ValueError(
                        f"memory.retention.{source}: unknown kind {kind!r}"
                    )
                if days < 0:
                    raise ValueError(f"memory.retention.{source}.{kind} must be >= 0")
        for kind in self.kind_prototypes:
            if kind != "other" and kind not in MEMORY_KINDS:
                raise ValueError(f"memory.kind_prototypes: unknown kind {kind!r}")
        return self

    @property
    def purpose_names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.purposes)

    def retention_days(self, source: str, kind: str) -> int | None:
        """Days to keep a memory of ``source`` and ``kind``; None: no rule.

        A memory of ``unknown`` source (stored, never served) uses
        ``retention.unknown`` when the policy gives it, else the shortest
        retention any known source has for the kind: it is never kept longer
        than a memory we could serve.
        """
        kinds = self.retention.get(source, {})
        if kind in kinds:
            return kinds[kind]
        if "*" in kinds or source != UNKNOWN_SOURCE:
            return kinds.get("*")
        known = [
            days
            for days in (self.retention_days(s, kind) for s in KNOWN_SOURCES)
            if days is not None
        ]
        return min(known) if known else None
