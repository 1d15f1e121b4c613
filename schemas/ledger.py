"""Compression-ledger records: accountable summaries and the artifact trail.

A ``LedgerEntry`` (table ``compression_ledger``) is one anchored, structured summary
of a session or of a compaction window, plus everything needed to audit it: which
messages it was built from (ids and content hashes), how (strategy and generator,
each with a version), the protected fields it must carry (normalised, each with its
source message) and their checksum, whether the rendered summary was verified to
carry them, and whether the next summary must be rebuilt from the raw messages.

An ``ArtifactTrailEntry`` (table ``artifact_trail``) is one read, write, create,
delete or test run that a tool call performed, derived from the redacted tool calls
and their results.

Like every record here these are built from *redacted* messages only: a protected
value is whatever the redactor left (a pseudonym token stands for a personal value).
"""

from __future__ import annotations

from datetime import datetime
from typing import ClassVar, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field

from ctxledger.schemas.base import Record

ProtectedKind = Literal[
    "amount", "date", "identifier", "negation", "pending_action", "approval"
]
#: Every protected kind, in the order summaries list them.
PROTECTED_KINDS: tuple[ProtectedKind, ...] = get_args(ProtectedKind)
TrailOperation = Literal["read", "write", "create", "delete", "test"]
TrailOutcome = Literal["ok", "error", "unknown", "passed", "failed"]
LedgerScope = Literal["session", "window"]


class _Part(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ProtectedField(_Part):
    """A value a summary must never lose, normalised, with the message it came from.

    ``kind`` is the broad class; ``label`` the finer one for identifiers
    (``employee_number``, ``shard``, ``ref``, ``pseudonym``...; other kinds use
    the kind itself). ``value`` is the
    normalised form (``USD 1249.00``, ``2026-03-14``, ``pay-shard-7``, a
    lower-cased clause for negations, pending actions and approvals).
    """

    kind: ProtectedKind
    label: str
    value: str
    source_message_id: str
    turn: int

    @property
    def canonical(self) -> str:
        """``kind:label:value`` (``kind:value`` when the label is the kind): the
        string the checksum and reports use."""
        if self.label == self.kind:
            return f"{self.kind}:{self.value}"
        return f"{self.kind}:{self.label}:{self.value}"


class SectionItem(_Part):
    """One line of a summary section, traceable to the message it came from."""

    text: str
    turn: int
    source_message_id: str


class ChangedArtifact(_Part):
    """A resource the session changed, with what happened to it (from the trail)."""

    resource: str
    operations: list[str] = Field(default_factory=list)
    turns: list[int] = Field(default_factory=list)
    outcome: str = "unknown"
    content_hash: str | None = None
    change: str = ""


class ToolResultRef(_Part):
    """A tool result as the summary carries it: typed facts plus ``artifact_ref``."""

    turn: int
    tool_name: str
    status: str
    artifact_ref: str
    facts: str = ""


class SummarySections(_Part):
    """The fixed sections every anchored summary fills (empty ones say so)."""

    goal: list[SectionItem] = Field(default_factory=list)
    #: Assistant conclusions ("the script raised AttributeError ...").
    findings: list[SectionItem] = Field(default_factory=list)
    decisions: list[SectionItem] = Field(default_factory=list)
    rejected_options: list[SectionItem] = Field(default_factory=list)
    open_questions: list[SectionItem] = Field(default_factory=list)
    pending_approvals: list[SectionItem] = Field(default_factory=list)
    changed_artifacts: list[ChangedArtifact] = Field(default_factory=list)
    #: Resources the session's tools read (from the artifact trail), latest last.
    sources_read: list[SectionItem] = Field(default_factory=list)
    test_status: list[SectionItem] = Field(default_factory=list)
    next_steps: list[SectionItem] = Field(default_factory=list)
    pinned_user_statements: list[SectionItem] = Field(default_factory=list)
    tool_results: list[ToolResultRef] = Field(default_factory=list)
    protected_facts: list[SectionItem] = Field(default_factory=list)


class LedgerEntry(Record):
    """One summary and its audit trail (table ``compression_ledger``).

    ``scope`` is ``session`` (the whole session, always built from raw messages) or
    ``window`` (a cumulative summary up to the end of compaction window
    ``window_index``, made by merging that window into the previous window's
    summary, or rebuilt from raw when a rebuild rule fired). ``source_ids`` and
    ``source_hashes`` list the messages this entry read itself (the window for a
    merge, everything covered for a rebuild); ``sources_digest`` is a hash over
    all covered messages, so an audit can tell when any of them changed.
    """

    table: ClassVar[str | None] = "compression_ledger"
    key: ClassVar[tuple[str, ...]] = ("summary_id",)

    summary_id: str = Field(description="Content-hash id of the summary.")
    tenant_id: str = Field(description="Tenant the row belongs to.")
    session_id: str = Field(description="Session summarised.")
    scope: LedgerScope = Field(
        description="session (whole session) or window (cumulative up to a window)."
    )
    window_index: int | None = Field(
        default=None, description="Compaction window index (window scope)."
    )
    window_start_turn: int = Field(description="First turn of the window.")
    window_end_turn: int = Field(description="Last turn of the window.")
    covered_from_turn: int = Field(description="First turn the summary covers.")
    covered_to_turn: int = Field(description="Last turn the summary covers.")
    strategy: str = Field(description="Compression strategy.")
    strategy_version: str = Field(description="Version of the strategy.")
    generator: str = Field(description="What wrote the summary.")
    generator_version: str = Field(description="Version of the generator.")
    created_at: datetime = Field(description="When the summary was made (UTC).")
    source_ids: list[str] = Field(
        default_factory=list, description="Messages this entry read itself."
    )
    source_hashes: list[str] = Field(
        default_factory=list, description="Content hashes of those messages."
    )
    sources_digest: str = Field(
        description="Hash over all covered messages (detects changes)."
    )
    parent_summary_id: str | None = Field(
        default=None, description="Previous window's summary it was merged into."
    )
    sections: SummarySections = Field(
        description="Goal, decisions, open questions, artifacts, tests, next steps."
    )
    summary_text: str = Field(description="The summary as text.")
    summary_tokens: int = Field(default=0, description="Tokens of summary_text.")
    source_tokens: int = Field(default=0, description="Tokens of the covered messages.")
    protected_fields: list[ProtectedField] = Field(
        default_factory=list,
        description="Fields that must survive compression, with sources.",
    )
    protected_checksum: str = Field(description="Checksum over the protected fields.")
    verified: bool = Field(
        description="Every protected field is present and unaltered."
    )
    missing_fields: list[str] = Field(
        default_factory=list, description="Protected fields the summary lost."
    )
    altered_fields: list[str] = Field(
        default_factory=list, description="Protected fields the summary changed."
    )
    roll_depth: int = Field(
        default=0, ge=0, description="Merges since the last rebuild from raw messages."
    )
    rebuilt_from_raw: bool = Field(
        default=True, description="Built from raw messages rather than merged."
    )
    rebuild_reason: str | None = Field(
        default=None, description="Why it was rebuilt from raw."
    )
    rebuild_required: bool = Field(
        default=False, description="A rebuild rule fired: the next run rebuilds it."
    )
    rebuild_required_reasons: list[str] = Field(
        default_factory=list, description="Which rules fired."
    )
    settings_digest: str = Field(
        default="", description="Hash of the ledger settings used."
    )
    policy_version: str = Field(
        default="", description="Policy version it was built under."
    )
    run_id: str = Field(default="", description="Run that wrote the row (see runs).")


class ArtifactTrailEntry(Record):
    """One artifact operation a tool call performed (table ``artifact_trail``).

    ``resource`` is a file path (made absolute when the working directory is
    known), ``api:<tool>`` plus identifying arguments for API calls, or the test
    command for test runs. ``content_hash`` is ``sha256:<hex>`` of the content a
    call wrote in full (known for creates and whole-file writes only);
    ``artifact_ref`` points at the stored result (for reads: what was read).
    ``outcome`` comes from the tool result (``passed``/``failed`` for test runs
    whose output says so).
    """

    table: ClassVar[str | None] = "artifact_trail"
    key: ClassVar[tuple[str, ...]] = ("trail_id",)

    trail_id: str
    tenant_id: str
    session_id: str
    turn: int
    message_id: str
    tool_call_id: str | None = None
    tool_name: str
    operation: TrailOperation
    resource: str
    content_hash: str | None = None
    outcome: TrailOutcome = "unknown"
    result_turn: int | None = None
    artifact_ref: str | None = None
    detail: str = ""
    source: Literal["tool_call", "text_action"] = "tool_call"
    run_id: str = ""
