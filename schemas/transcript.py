"""Transcript records: sessions, messages, tool calls, tool observations, artifacts.

These are the normalised, *redacted* shapes that reach the warehouse. Readers of the
many source formats produce drafts (see ``pipelines.ingest.drafts``); the redact stage
turns drafts into these records, so no model here ever holds a raw PII value.
"""

from __future__ import annotations

from datetime import datetime
from typing import ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

from schemas.base import Record

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

    observation_id: str
    message_id: str
    session_id: str
    tenant_id: str
    tool_call_id: str | None = None
    tool_name: str | None = None
    status: ToolStatus = "unknown"
    size_bytes: int = 0
    line_count: int = 0
    token_count: int = 0
    key_fields: str = "{}"
    artifact_ref: str


class Artifact(Record):
    """A tool output (redacted), stored once per content hash per tenant."""

    table: ClassVar[str | None] = "artifacts"
    key: ClassVar[tuple[str, ...]] = ("artifact_id",)

    artifact_id: str
    tenant_id: str
    media_type: Literal["application/json", "text/plain"] = "text/plain"
    size_bytes: int
    content: str
    policy_version: str


class Session(Record):
    """One conversation or agent run, as found in one source file."""

    table: ClassVar[str | None] = "sessions"
    key: ClassVar[tuple[str, ...]] = ("session_id",)

    session_id: str
    tenant_id: str
    source_format: str
    source_file: str
    source_hash: str
    external_id: str | None = None
    started_at: datetime | None = None
    message_count: int = 0
    metadata: str = "{}"
    run_id: str = ""


class Message(Record):
    """One turn of a session, redacted, with its tool calls and observation."""

    table: ClassVar[str | None] = "messages"
    key: ClassVar[tuple[str, ...]] = ("message_id",)

    message_id: str
    session_id: str
    tenant_id: str
    turn: int = Field(ge=0)
    role: Role
    name: str | None = None
    content: str = ""
    thinking: str | None = None
    content_hash: str
    created_at: datetime | None = None
    token_count: int = Field(ge=0)
    tool_calls: list[ToolCall] = Field(default_factory=list)
    tool_call_id: str | None = None
    artifact_ref: str | None = None
    pii: list[PiiFinding] = Field(default_factory=list)
    policy_version: str
    source_ref: str
    run_id: str = ""
