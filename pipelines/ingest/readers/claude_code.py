"""Claude Code session logs (``claude_code``).

JSONL, one event per line: ``{type, uuid, parentUuid, sessionId, timestamp,
message{role, content}}``. Also the exported document form
``{"loglines": [...]}`` (the same events in a list, one record, one session).

* ``user`` and ``assistant`` lines carry an Anthropic message; its content blocks
  are converted as in ``anthropic_messages`` (``tool_result`` blocks become
  ``role:"tool"`` messages linked by ``tool_use_id``; ``thinking`` goes to
  ``thinking``). ``timestamp`` becomes ``created_at``.
* Lines are grouped by ``sessionId``, one session each, in order of first
  appearance; ``external_id`` is the ``sessionId``. ``records`` counts the lines
  folded into the session, including bookkeeping lines.
* Bookkeeping lines (``summary``, ``system``, ``file-history-snapshot``, and any
  other type without a message) are folded: into their own session when it has
  messages, else into the session holding their ``leafUuid``, else into the
  first session of the file. When the file has no message at all they are
  rejected together as ``no_messages``.
* A line that is not a usable event (not an object, no ``type``, a message without
  ``content``, a content block that is not an object, a draft failing
  validation) is rejected on its own; the rest of the session is kept.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pydantic import ValidationError

from ctxledger.pipelines.ingest import reasons
from ctxledger.pipelines.ingest.drafts import (
    DraftMessage,
    DraftSession,
    Parsed,
    Rejected,
    SourceFile,
)
from ctxledger.pipelines.ingest.readers._common import (
    DOCUMENT,
    RecordError,
    build_message,
    check,
    first_str,
    load_records,
    meta,
    need,
    parse_time,
    rejection,
)
from ctxledger.pipelines.ingest.readers.anthropic_messages import BlockConverter

FORMAT = "claude_code"
NAME_HINTS = ("claude",)
MESSAGE_TYPES = {"user", "assistant"}
KNOWN_TYPES = MESSAGE_TYPES | {
    "summary",
    "system",
    "file-history-snapshot",
    "queue-operation",
}


def _is_line(value: Any) -> bool:
    if not isinstance(value, dict) or not isinstance(value.get("type"), str):
        return False
    if "sessionId" in value or "leafUuid" in value:
        return True
    return value["type"] in KNOWN_TYPES and ("uuid" in value or "message" in value)


def sniff(value: Any, kind: str) -> int:
    if isinstance(value, dict) and isinstance(value.get("loglines"), list):
        return 3
    return 3 if _is_line(value) else 0


class _Group:
    def __init__(self, key: str | None, offset: str) -> None:
        self.key = key
        self.offset = offset
        self.messages: list[DraftMessage] = []
        self.records = 0
        self.folded = 0
        self.sidechain = 0
        self.model: str | None = None
        self.version: str | None = None


class _Reader:
    def __init__(self) -> None:
        self.converter = BlockConverter()
        self.groups: dict[str | None, _Group] = {}
        self.by_uuid: dict[str, str | None] = {}
        self.bookkeeping: list[tuple[dict[str, Any], str]] = []
        # Raw bytes of the bookkeeping lines (or of the ``loglines`` document), the
        # quarantine copy when the file turns out to hold no message at all.
        self.bookkeeping_raw: list[bytes] = []
        self.rejected: list[Rejected] = []
        # A ``loglines`` document is one record, hence one session in file order.
        self.document = False
        self.session_ids: set[str] = set()

    def group(self, key: str | None, offset: str) -> _Group:
        if key not in self.groups:
            self.groups[key] = _Group(key, offset)
        return self.groups[key]

    def line(
        self, value: Any, offset: str, raw: bytes | None, records: int = 1
    ) -> None:
        """Take one event; ``records=0`` for events inside a ``loglines`` document."""
        try:
            self._line(value, offset, raw)
        except RecordError as exc:
            self.rejected.append(
                Rejected(exc.code, offset, exc.detail, raw, records=records)
            )
        except ValidationError as exc:
            self.rejected.append(rejection(exc, offset, records, raw))

    def _line(self, value: Any, offset: str, raw: bytes | None) -> None:
        line = check(value, dict, "record")
        kind = need(line, "type", str, "")
        session = first_str(line.get("sessionId"))
        if kind not in MESSAGE_TYPES or "message" not in line:
            self.bookkeeping.append((line, offset))
            if raw is not None:
                self.bookkeeping_raw.append(raw)
            return
        message = need(line, "message", dict, "")
        content = need(message, "content", (str, list), "message.")
        role = message.get("role", kind)
        drafts = [
            build_message(fields)
            for fields in self.converter.convert(
                role, content, offset, parse_time(line.get("timestamp"))
            )
        ]
        if session is not None:
            self.session_ids.add(session)
        if self.document:
            group = self.group(None, DOCUMENT)
        else:
            group = self.group(session, offset)
        group.messages.extend(drafts)
        group.records += 1
        if line.get("isSidechain") is True:
            group.sidechain += 1
        if group.model is None and role == "assistant":
            group.model = first_str(message.get("model"))
        if group.version is None:
            group.version = first_str(line.get("version"))
        uuid = first_str(line.get("uuid"))
        if uuid is not None:
            self.by_uuid.setdefault(uuid, session)

    def finish(self) -> Iterator[Parsed]:
        document = self.document
        groups = [g for g in self.groups.values() if g.messages]
        if document and groups and len(self.session_ids) == 1:
            groups[0].key = next(iter(self.session_ids))
        if not groups:
            if self.bookkeeping or document:
                first = self.bookkeeping[0][1] if self.bookkeeping else DOCUMENT
                yield Rejected(
                    reasons.NO_MESSAGES,
                    DOCUMENT if document else first,
                    "no user or assistant message in the file",
                    raw=b"\n".join(self.bookkeeping_raw) or None,
                    records=1 if document else len(self.bookkeeping),
                )
            yield from self.rejected
            return
        keyed = {g.key: g for g in groups}
        for line, _offset in self.bookkeeping:
            target = keyed.get(first_str(line.get("sessionId")))
            leaf = first_str(line.get("leafUuid"))
            if target is None and leaf is not None and leaf in self.by_uuid:
                target = keyed.get(self.by_uuid[leaf])
            target = target or groups[0]
            target.records += 1
            target.folded += 1
        for group in groups:
            yield DraftSession(
                external_id=group.key,
                source_format=FORMAT,
                started_at=min(
                    (m.created_at for m in group.messages if m.created_at), default=None
                ),
                metadata=meta(
                    model=group.model,
                    claude_code_version=group.version,
                    n_bookkeeping_lines=group.folded,
                    n_sidechain_lines=group.sidechain or None,
                ),
                messages=group.messages,
                source_offset=group.offset,
                records=1 if document else group.records,
            )
        yield from self.rejected


def read(source: SourceFile) -> Iterator[Parsed]:
    reader = _Reader()
    for record in load_records(source):
        if isinstance(record, Rejected):
            reader.rejected.append(record)
            continue
        value = record.value
        if (
            record.offset == DOCUMENT
            and isinstance(value, dict)
            and "loglines" in value
        ):
            try:
                lines = need(value, "loglines", list, "")
            except RecordError as exc:
                reader.rejected.append(
                    Rejected(exc.code, record.offset, exc.detail, record.raw)
                )
                continue
            reader.document = True
            reader.bookkeeping_raw = [record.raw]
            for i, line in enumerate(lines):
                reader.line(line, f"{DOCUMENT}/logline:{i}", None, records=0)
            continue
        reader.line(value, record.offset, record.raw)
    yield from reader.finish()
