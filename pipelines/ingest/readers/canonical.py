"""ctxledger's own canonical transcript JSONL (``canonical``).

One message per line; see ``docs/canonical_jsonl.md`` for the full specification.
Lines are validated by ``CanonicalLine`` (unknown fields are refused, so a typo is
caught rather than silently dropped) and grouped by ``session_id`` in order of
first appearance. Within a session, lines are ordered by ``turn`` when every line
has one (ties keep file order), else file order is kept. A line that fails
validation is rejected on its own (``records=1``) with the reason code of
``reasons.from_validation_error``: an unknown ``role`` gives ``unknown_role``.

``session_id`` is the sender's choice, so it never merges subjects: when lines of
one ``session_id`` in a file name different subjects (metadata key
``SourceFile.subject_key``), each subject gets a session of its own lines, and a
line of that ``session_id`` naming no subject is rejected (``ambiguous_subject``).
The warehouse session id is scoped by the subject as well
(``pipelines.ingest.normalize.session_id_for``).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ctxledger.pipelines.ingest import reasons
from ctxledger.pipelines.ingest.drafts import (
    DraftMessage,
    DraftSession,
    MetaValue,
    Parsed,
    Rejected,
    SourceFile,
)
from ctxledger.pipelines.ingest.readers._common import (
    DRAFT_FIELDS,
    args_text,
    build_message,
    load_records,
    rejection,
)
from ctxledger.pipelines.ingest.sources import JsonRecord
from ctxledger.pipelines.ingest.subjects import subject_from_metadata

FORMAT = "canonical"
NAME_HINTS = ("canonical",)


class CanonicalToolCall(BaseModel):
    """A tool call on an assistant line."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(min_length=1)
    name: str = Field(min_length=1)
    arguments: str | dict[str, Any] = ""


class CanonicalLine(BaseModel):
    """One line of a canonical JSONL file."""

    model_config = ConfigDict(extra="forbid")

    session_id: str = Field(min_length=1)
    id: str | None = Field(default=None, min_length=1, max_length=256)
    role: Literal["system", "user", "assistant", "tool"]
    content: str
    turn: int | None = Field(default=None, ge=0)
    created_at: datetime | None = None
    name: str | None = None
    thinking: str | None = None
    tool_calls: list[CanonicalToolCall] = Field(default_factory=list)
    tool_call_id: str | None = None
    status: Literal["ok", "error"] | None = None
    metadata: dict[str, MetaValue] = Field(default_factory=dict)


_FIELDS = (
    DRAFT_FIELDS
    | frozenset(CanonicalLine.model_fields)
    | frozenset(CanonicalToolCall.model_fields)
)


def sniff(value: Any, kind: str) -> int:
    if isinstance(value, dict) and "session_id" in value and "role" in value:
        return 3
    return 0


def _draft(line: CanonicalLine, offset: str) -> DraftMessage:
    created = line.created_at
    if created is not None and created.tzinfo is None:
        created = created.replace(tzinfo=UTC)
    fields: dict[str, Any] = {
        "role": line.role,
        "name": line.name,
        "created_at": created,
        "source_id": line.id,
        "source_offset": offset,
    }
    if line.role == "tool":
        fields.update(
            content="",
            tool_output=line.content,
            tool_call_id=line.tool_call_id,
            tool_status=line.status or "unknown",
        )
    else:
        fields.update(
            content=line.content,
            thinking=line.thinking,
            tool_calls=[
                {
                    "call_id": call.id,
                    "tool_name": call.name,
                    "arguments": args_text(call.arguments),
                }
                for call in line.tool_calls
            ],
        )
    return build_message(fields)


class _Session:
    def __init__(self, offset: str) -> None:
        self.offset = offset
        self.items: list[tuple[int | None, DraftMessage]] = []
        self.metadata: dict[str, MetaValue] = {}


def read(source: SourceFile) -> Iterator[Parsed]:
    rejected: list[Rejected] = []
    lines: list[tuple[CanonicalLine, DraftMessage, JsonRecord, str | None]] = []
    named: dict[str, set[str]] = {}
    for record in load_records(source):
        if isinstance(record, Rejected):
            rejected.append(record)
            continue
        try:
            line = CanonicalLine.model_validate(record.value)
            draft = _draft(line, record.offset)
        except ValidationError as exc:
            rejected.append(rejection(exc, record.offset, 1, record.raw, _FIELDS))
            continue
        subject = subject_from_metadata(line.metadata, source.subject_key)
        if subject is not None:
            named.setdefault(line.session_id, set()).add(subject)
        lines.append((line, draft, record, subject))
    sessions: dict[tuple[str, str | None], _Session] = {}
    for line, draft, record, subject in lines:
        key: tuple[str, str | None] = (line.session_id, None)
        if len(named.get(line.session_id, ())) > 1:
            # Several subjects send this session id in one file: each gets a
            # session of their own lines; a line naming none cannot be placed.
            if subject is None:
                rejected.append(
                    Rejected(
                        reasons.AMBIGUOUS_SUBJECT,
                        record.offset,
                        "session_id is used by several subjects in this file "
                        "and the line names none",
                        record.raw,
                    )
                )
                continue
            key = (line.session_id, subject)
        session = sessions.setdefault(key, _Session(record.offset))
        session.items.append((line.turn, draft))
        for name, value in line.metadata.items():
            session.metadata.setdefault(name, value)
    for (session_id, _subject), session in sessions.items():
        items = session.items
        if all(turn is not None for turn, _ in items):
            items = sorted(items, key=lambda item: item[0])
        messages = [draft for _, draft in items]
        times = [m.created_at for m in messages if m.created_at is not None]
        yield DraftSession(
            external_id=session_id,
            source_format=FORMAT,
            started_at=min(times) if times else None,
            metadata=session.metadata,
            messages=messages,
            source_offset=session.offset,
            records=len(items),
        )
    yield from rejected
