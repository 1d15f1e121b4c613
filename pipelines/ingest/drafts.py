"""What readers produce: unredacted drafts of sessions and messages, or rejections.

Drafts still hold raw text; they never leave the pipeline. The redact stage turns
them into ``schemas.Message`` records. A ``Rejected`` is one source record a reader
could not use: it carries a reason code, a location and (for quarantine only) the
raw bytes, never a message built from the payload.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

Role = Literal["system", "user", "assistant", "tool"]
ToolStatus = Literal["ok", "error", "unknown"]
MetaValue = str | int | float | bool | None


class _Draft(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", strict=False)


class DraftToolCall(_Draft):
    """A tool call as found in the source; ``arguments`` is raw JSON or text."""

    call_id: str
    tool_name: str
    arguments: str = ""


class DraftMessage(_Draft):
    """One turn before redaction.

    ``role`` is already mapped to our four canonical roles by the reader (an unmapped
    role fails validation and becomes a dead letter). A tool result is a message with
    role ``tool``, the raw output in ``tool_output`` and ``tool_call_id`` linking it to
    the call. ``source_offset`` says where in the file it came from (``line:12``,
    ``entry:3/traj:7``); ``source_id`` is the source's own id for the message
    when the format has one (a canonical ``id``, a LoCoMo ``dia_id``, a Claude
    Code ``uuid``), kept so a search hit can be traced back to the turn.
    """

    role: Role
    content: str = ""
    thinking: str | None = None
    name: str | None = None
    created_at: datetime | None = None
    tool_calls: list[DraftToolCall] = Field(default_factory=list)
    tool_call_id: str | None = None
    tool_output: str | None = None
    tool_status: ToolStatus = "unknown"
    source_offset: str
    source_id: str | None = Field(default=None, min_length=1, max_length=256)


class DraftSession(_Draft):
    """A session as parsed from a source, plus how many source records built it.

    ``metadata`` holds structural facts only (model name, task id, reward, counts),
    never free text from the conversation. ``records`` is the number of source
    records (JSONL lines, or 1 for a whole JSON document) folded into this session,
    including ones that carried no message (e.g. bookkeeping lines).
    """

    external_id: str | None = None
    source_format: str
    started_at: datetime | None = None
    metadata: dict[str, MetaValue] = Field(default_factory=dict)
    messages: list[DraftMessage]
    source_offset: str
    records: int = Field(default=1, ge=1)


@dataclass(frozen=True)
class Rejected:
    """One source record (or draft message) that cannot be used.

    ``reason_code`` is a stable snake_case code (see ``pipelines.ingest.reasons``);
    ``detail`` is written by our code and must not quote the payload.
    """

    reason_code: str
    source_offset: str
    detail: str
    raw: bytes | None = None
    records: int = 1


@dataclass(frozen=True)
class SourceFile:
    """A landing file handed to a reader."""

    path: str
    data: bytes
    tenant_id: str = "default"
    max_record_bytes: int = 8 * 1024 * 1024
    #: Session metadata key naming the subject (policy
    #: ``memory.subject_metadata_key``); readers that group lines by a session id
    #: of the data also split by it (see ``readers.canonical``).
    subject_key: str = "subject_id"


Parsed = DraftSession | Rejected


def as_text(value: Any) -> str:
    """Render a source value (str, list of blocks, dict, number) as text."""
    import json

    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, sort_keys=True)
