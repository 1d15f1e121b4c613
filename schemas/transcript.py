"""Transcript records: sessions, messages, tool calls, tool observations, artifacts.

These are the normalised, *redacted* shapes that reach the warehouse. Readers of the
many source formats produce drafts (see ``pipelines.ingest.drafts``); the redact stage
turns drafts into these records, so no model here ever holds a raw PII value.
"""

from __future__ import annotations

from datetime import datetime
from typing import ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

from ctxledger.schemas.base import Record

Role = Literal["system", "user", "assistant", "tool"]
ToolStatus = Literal["ok", "error", "unknown"]


class _Part(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ToolCall(_Part):
    """One tool invocation requested by the assistant (arguments redacted JSON text)."""

    call_id: str
    tool_name: str
    arguments: str = ""


class PiiFinding(_Part):
    """An entity the redactor replaced: its type and the span of the placeholder in
    the redacted text. Values are never recorded."""

    entity_type: str
    field: str = "content"
    start: int
    end: int
    score: float
    recognizer: str = ""


class ToolObservation(Record):
    """What a context builder sees of a tool result: typed facts plus a pointer.

    The raw output is stored once in ``artifacts`` (content-addressed); context only
    carries this small observation and the ``artifact_ref``.
    """

    table: ClassVar[str | None] = "tool_observations"
    key: ClassVar[tuple[str, ...]] = ("observation_id",)

    observation_id: str = Field(description="Content-hash id of the observation.")
    message_id: str = Field(
        description="The tool-result message this observation summarises."
    )
    session_id: str = Field(description="Session of the message.")
    tenant_id: str = Field(description="Tenant the row belongs to.")
    tool_call_id: str | None = Field(
        default=None,
        description="Id of the tool call this result answers, when the source "
        "gave one.",
    )
    tool_name: str | None = Field(
        default=None, description="Name of the tool that produced the output."
    )
    status: ToolStatus = Field(
        default="unknown",
        description="ok, error or unknown, as read from the tool result.",
    )
    size_bytes: int = Field(
        default=0, description="Size of the redacted raw output in bytes."
    )
    line_count: int = Field(default=0, description="Lines in the raw output.")
    token_count: int = Field(
        default=0,
        description="Tokens of the raw output (what carrying it in context would "
        "cost).",
    )
    key_fields: str = Field(
        default="{}", description="Typed facts extracted from the output, as JSON."
    )
    artifact_ref: str = Field(description="Id of the stored raw output in artifacts.")


class Artifact(Record):
    """A tool output (redacted), stored once per content hash per tenant.

    ``source_id`` is the registered source of the tool that produced it
    (``schemas.sources``: tool artifacts match by tool name). One output can come
    from several tools; the row is stored once, so the smallest source id among
    the sightings that first store it wins (``dedupe_order``), whatever order
    they arrive in. A registry change rewrites no row: readers re-derive the
    source from the active registry (``warehouse.sources.source_of``).
    """

    table: ClassVar[str | None] = "artifacts"
    key: ClassVar[tuple[str, ...]] = ("artifact_id",)
    #: Of rows sharing a key in one batch, the commit keeps the one that sorts
    #: first on these columns (NULLs last), so the stamp is deterministic.
    dedupe_order: ClassVar[tuple[str, ...]] = ("source_id",)

    artifact_id: str = Field(
        description="Content-hash id of the redacted output (per tenant)."
    )
    tenant_id: str = Field(description="Tenant the row belongs to.")
    media_type: Literal["application/json", "text/plain"] = Field(
        default="text/plain", description="application/json or text/plain."
    )
    size_bytes: int = Field(description="Size of content in bytes.")
    content: str = Field(description="The redacted tool output.")
    policy_version: str = Field(
        description="Redaction policy version the content was redacted under."
    )
    source_id: str | None = Field(
        default=None,
        description="Registered source of the producing tool; NULL in older rows.",
    )


class Session(Record):
    """One conversation or agent run, as found in one source file."""

    table: ClassVar[str | None] = "sessions"
    key: ClassVar[tuple[str, ...]] = ("session_id",)

    session_id: str = Field(description="Content-hash id of the session.")
    tenant_id: str = Field(description="Tenant the row belongs to.")
    source_format: str = Field(description="Reader that parsed the source file.")
    source_file: str = Field(description="Landing file the session came from.")
    source_hash: str = Field(description="Content hash of that landing file.")
    external_id: str | None = Field(
        default=None, description="The session id the source itself used, if any."
    )
    started_at: datetime | None = Field(
        default=None, description="Time of the first message, when known (UTC)."
    )
    message_count: int = Field(default=0, description="Messages in the session.")
    metadata: str = Field(
        default="{}", description="Source metadata as JSON (redacted)."
    )
    run_id: str = Field(default="", description="Run that wrote the row (see runs).")


class Message(Record):
    """One turn of a session, redacted, with its tool calls and observation."""

    table: ClassVar[str | None] = "messages"
    key: ClassVar[tuple[str, ...]] = ("message_id",)

    message_id: str = Field(description="Content-hash id of the message.")
    session_id: str = Field(description="Session the message belongs to.")
    tenant_id: str = Field(description="Tenant the row belongs to.")
    turn: int = Field(ge=0, description="Position in the session, from 0.")
    role: Role = Field(description="system, user, assistant or tool.")
    name: str | None = Field(
        default=None, description="Speaker or tool name, when the source gave one."
    )
    content: str = Field(
        default="",
        description="Redacted text: PII and secrets replaced by placeholders.",
    )
    thinking: str | None = Field(
        default=None, description="Redacted reasoning text, when the source kept it."
    )
    content_hash: str = Field(description="Hash of the redacted content.")
    created_at: datetime | None = Field(
        default=None, description="When the message was written (UTC), when known."
    )
    token_count: int = Field(ge=0, description="Tokens of content.")
    tool_calls: list[ToolCall] = Field(
        default_factory=list,
        description="Tool calls the assistant requested (arguments redacted).",
    )
    tool_call_id: str | None = Field(
        default=None, description="For tool results: the call this answers."
    )
    artifact_ref: str | None = Field(
        default=None,
        description="For tool results: the stored raw output in artifacts.",
    )
    pii: list[PiiFinding] = Field(
        default_factory=list,
        description="Entities the redactor replaced: type, field, span, score (no"
        " values).",
    )
    policy_version: str = Field(description="Redaction policy version.")
    source_ref: str = Field(
        description="Where in the landing file the message was read."
    )
    source_id: str | None = Field(
        default=None,
        description="The source's own id for the message (canonical id, LoCoMo"
        " dia_id, Claude Code uuid), when the format has one.",
    )
    run_id: str = Field(default="", description="Run that wrote the row (see runs).")
