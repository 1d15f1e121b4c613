"""Helpers every format reader shares: file layout, records, messages, sessions.

Layout. A landing file is either one JSON *document* or *JSONL* (one JSON value per
non-blank line). ``layout`` decides which without trusting the file name:

* zero or one non-blank line: a document;
* the first non-blank line parses on its own: JSONL;
* the whole file parses as one value: a document (pretty-printed JSON), also
  when that value holds a duplicate key or a lone surrogate (it is then one bad
  record, see ``pipelines.ingest.sources``);
* otherwise the file is broken; it counts as JSONL when another line holds a
  complete non-empty JSON object (a JSONL file with a bad first line), else as a
  malformed document.

``load_records`` then yields one ``JsonRecord`` (or ``Rejected``) per source record,
using ``pipelines.ingest.sources`` for every byte-level step.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from dataclasses import replace
from datetime import UTC, datetime
from functools import partial
from typing import Any

from pydantic import ValidationError

from ctxledger.pipelines.ingest import reasons
from ctxledger.pipelines.ingest.drafts import (
    DraftMessage,
    DraftSession,
    DraftToolCall,
    MetaValue,
    Parsed,
    Rejected,
    SourceFile,
)
from ctxledger.pipelines.ingest.sources import (
    JsonRecord,
    RecordDecodeError,
    decode_document,
    decode_json,
    iter_jsonl,
)

DOCUMENT = "document"
JSONL = "jsonl"


class RecordError(Exception):
    """A source record has the wrong shape. ``detail`` never quotes the payload."""

    def __init__(self, code: str, detail: str) -> None:
        super().__init__(detail)
        self.code = code
        self.detail = detail


# --- layout and records ---------------------------------------------------------


def _parse_line(line: bytes, first: bool) -> Any:
    """The JSON value on one line, or a sentinel when it does not parse."""
    try:
        return json.loads(line.decode("utf-8-sig" if first else "utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return _NOTHING


_NOTHING = object()
#: Rejections of text that is valid JSON syntax but not a usable record.
_VALID_JSON = frozenset({reasons.DUPLICATE_KEY, reasons.INVALID_TEXT})


def _layout(source: SourceFile) -> tuple[str, JsonRecord | Rejected | None]:
    """The layout, plus the decoded document when deciding needed to decode it."""
    lines = [line for line in source.data.splitlines() if line.strip()]
    if len(lines) <= 1:
        return DOCUMENT, None
    if len(lines[0]) <= source.max_record_bytes and (
        _parse_line(lines[0].strip(), True) is not _NOTHING
    ):
        return JSONL, None
    document = decode_document(source)
    if not isinstance(document, Rejected) or document.reason_code in _VALID_JSON:
        # Valid JSON as a whole (a duplicate key or a lone surrogate is a bad
        # record, not a sign of another layout).
        return DOCUMENT, document
    for line in lines[1:]:
        body = line.strip()
        if (
            body[:1] == b"{"
            and body[-1:] == b"}"
            and len(body) <= source.max_record_bytes
        ):
            value = _parse_line(body, False)
            if isinstance(value, dict) and value:
                return JSONL, None
    return DOCUMENT, document


def layout(source: SourceFile) -> str:
    """``DOCUMENT`` or ``JSONL`` for a file (see the module docstring)."""
    return _layout(source)[0]


def load_records(source: SourceFile) -> Iterator[JsonRecord | Rejected]:
    """One item per source record: the document, or each non-blank JSONL line."""
    kind, document = _layout(source)
    if kind == DOCUMENT:
        yield document if document is not None else decode_document(source)
    else:
        yield from iter_jsonl(source)


def sample_values(source: SourceFile, limit: int = 8) -> tuple[str, list[Any]]:
    """The layout plus a few decoded values for format sniffing, decoding little.

    For a document that is the whole value (it must be parsed to be recognised);
    for JSONL, the first ``limit`` lines that decode into a usable record
    (``sources.decode_json``), each within the record size cap. Lines that do
    not are skipped, however many come first: they become their own dead letters
    when the file is read, and must not turn the good lines after them into one
    ``unknown_format`` rejection.
    """
    kind, record = _layout(source)
    if kind == DOCUMENT:
        if record is None:
            record = decode_document(source)
        return kind, [] if isinstance(record, Rejected) else [record.value]
    values: list[Any] = []
    first = True
    for line in source.data.splitlines():
        body = line.strip()
        if not body:
            continue
        if len(body) <= source.max_record_bytes:
            try:
                values.append(
                    decode_json(body.decode("utf-8-sig" if first else "utf-8"))
                )
            except (UnicodeDecodeError, ValueError, RecursionError, RecordDecodeError):
                pass
            else:
                if len(values) >= limit:
                    break
        first = False
    return kind, values


# --- small value helpers ----------------------------------------------------------


def json_type(value: Any) -> str:
    """The JSON name of a value's type, for error details that quote no payload."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return "value"


_KINDS: dict[type, str] = {
    dict: "object",
    list: "array",
    str: "string",
    int: "number",
    float: "number",
    bool: "boolean",
}


def _is(value: Any, kind: type | tuple[type, ...]) -> bool:
    if isinstance(value, bool) and kind in (int, float, (int, float)):
        return False
    return isinstance(value, kind)


def need(obj: dict[str, Any], key: str, kind: type | tuple[type, ...], where: str):
    """``obj[key]``, which must exist and be of ``kind``; else a ``RecordError``."""
    if key not in obj or obj[key] is None:
        raise RecordError(reasons.MISSING_FIELD, f"missing field {where}{key}")
    return check(obj[key], kind, f"{where}{key}")


def check(value: Any, kind: type | tuple[type, ...], where: str):
    """``value`` if it is of ``kind``; else a ``RecordError`` naming the field."""
    if not _is(value, kind):
        kinds = kind if isinstance(kind, tuple) else (kind,)
        wanted = " or ".join(_KINDS.get(k, k.__name__) for k in kinds)
        raise RecordError(
            reasons.WRONG_TYPE,
            f"{where or 'record'}: expected {wanted}, got {json_type(value)}",
        )
    return value


def unexpected_record(value: Any, missing: str = "messages") -> RecordError:
    """The error for a record of no known shape: an object without the field
    that would make it one (``missing``), or not an object or array at all."""
    if isinstance(value, dict):
        return RecordError(reasons.MISSING_FIELD, f"missing field {missing}")
    return RecordError(
        reasons.WRONG_TYPE,
        f"record: expected object or array, got {json_type(value)}",
    )


def args_text(value: Any) -> str:
    """Tool-call arguments as found: raw JSON text kept, objects dumped sorted."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def parse_time(value: Any) -> datetime | None:
    """An ISO 8601 string or a Unix epoch number as an aware datetime (naive: UTC)."""
    try:
        if isinstance(value, str) and value:
            parsed = datetime.fromisoformat(value.strip())
        elif isinstance(value, int | float) and not isinstance(value, bool):
            if not 0 < value < 32503680000:  # before year 3000
                return None
            parsed = datetime.fromtimestamp(value, tz=UTC)
        else:
            return None
    except (ValueError, OverflowError, OSError):
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed


_IDENT = re.compile(r"^[A-Za-z][A-Za-z0-9_.:-]{0,63}$")


def placeholder(kind: Any) -> str:
    """``[type]`` for a non-text content part; odd type values are not echoed."""
    return f"[{kind}]" if isinstance(kind, str) and _IDENT.match(kind) else "[part]"


def meta(**values: Any) -> dict[str, MetaValue]:
    """Session metadata: scalar values only, ``None`` dropped."""
    out: dict[str, MetaValue] = {}
    for key, value in values.items():
        if value is None:
            continue
        if isinstance(value, str | int | float | bool):
            out[key] = value
    return out


def first_str(*values: Any) -> str | None:
    """The first non-empty string among ``values``."""
    for value in values:
        if isinstance(value, str) and value:
            return value
    return None


def raw_of(value: Any) -> bytes | None:
    """Quarantine bytes for one entry of a document (None if it cannot be dumped)."""
    try:
        return json.dumps(value, ensure_ascii=True).encode("ascii")
    except (TypeError, ValueError, RecursionError):
        return None


# --- messages and sessions ----------------------------------------------------------


def clean(fields: dict[str, Any]) -> dict[str, Any]:
    """Drop ``None`` entries so that absent values read as *missing* to pydantic."""
    return {k: v for k, v in fields.items() if v is not None}


def build_message(fields: dict[str, Any]) -> DraftMessage:
    """Validate one draft message (raises ``ValidationError``)."""
    return DraftMessage.model_validate(clean(fields))


DRAFT_FIELDS = frozenset(DraftMessage.model_fields) | frozenset(
    DraftToolCall.model_fields
)


def rejection(
    exc: ValidationError,
    offset: str,
    records: int,
    raw: bytes | None = None,
    fields: frozenset[str] = DRAFT_FIELDS,
) -> Rejected:
    """A ``Rejected`` for a validation error, its detail free of payload.

    Code and detail are ``reasons.from_validation_error``'s: a location part that
    is not one of our ``fields`` (an unknown key or a metadata key taken from the
    data) is written as ``*``.
    """
    code, detail = reasons.from_validation_error(exc, fields)
    return Rejected(code, offset, detail, raw=raw, records=records)


class SessionBuilder:
    """Collects one session's messages.

    A message that fails validation becomes a message-level ``Rejected`` with
    ``records=0`` (its source record is still counted by the session).
    """

    def __init__(self, fmt: str) -> None:
        self.fmt = fmt
        self.messages: list[DraftMessage] = []
        self.rejected: list[Rejected] = []

    def add(self, fields: dict[str, Any]) -> DraftMessage | None:
        try:
            message = build_message(fields)
        except ValidationError as exc:
            offset = fields.get("source_offset") or "message"
            self.rejected.append(rejection(exc, str(offset), 0))
            return None
        self.messages.append(message)
        return message

    def reject(self, code: str, offset: str, detail: str) -> None:
        self.rejected.append(Rejected(code, offset, detail, raw=None, records=0))

    def finish(
        self,
        *,
        offset: str,
        records: int = 1,
        external_id: str | None = None,
        metadata: dict[str, MetaValue] | None = None,
        raw: bytes | None = None,
    ) -> list[Parsed]:
        """The session (or a ``no_messages`` rejection) plus message rejections."""
        out: list[Parsed] = []
        if self.messages:
            times = [m.created_at for m in self.messages if m.created_at is not None]
            out.append(
                DraftSession(
                    external_id=external_id,
                    source_format=self.fmt,
                    started_at=min(times) if times else None,
                    metadata=metadata or {},
                    messages=self.messages,
                    source_offset=offset,
                    records=records,
                )
            )
        else:
            out.append(
                Rejected(
                    reasons.NO_MESSAGES,
                    offset,
                    "record holds no usable message",
                    raw=raw,
                    records=records,
                )
            )
        out.extend(self.rejected)
        return out


def per_record(source: SourceFile, convert) -> Iterator[Parsed]:
    """Drive a reader whose ``convert(record) -> list[Parsed]`` handles one record.

    ``convert`` returns a list (never a lazy generator), so a ``RecordError`` raised
    half-way cannot leave a record counted twice; it becomes one ``Rejected`` for
    the whole record.
    """
    for record in load_records(source):
        if isinstance(record, Rejected):
            yield record
            continue
        try:
            results = convert(record)
        except RecordError as exc:
            results = [Rejected(exc.code, record.offset, exc.detail, raw=record.raw)]
        yield from with_raw(results, record.raw)


def with_raw(results: list[Parsed], raw: bytes | Callable[[], bytes | None] | None):
    """``results`` with ``raw`` as the quarantine copy of every record-level
    rejection (``records >= 1``) that has none yet; ``raw`` may be a function,
    called only when a copy is needed."""
    if not any(
        isinstance(item, Rejected) and item.records and item.raw is None
        for item in results
    ):
        return results
    if callable(raw):
        raw = raw()
    return [
        replace(item, raw=raw)
        if isinstance(item, Rejected) and item.records and item.raw is None
        else item
        for item in results
    ]


def per_entry(record, convert, noun: str, plural: str) -> list[Parsed]:
    """``convert(entry, offset)`` for a record that is one entry (a JSONL line)
    or a document listing entries, each one session *and* one source record
    (``tau_bench`` entries, ``locomo`` samples; ``expected_records`` counts
    them alike). An entry that fails becomes one ``Rejected`` with its own
    bytes; the others are kept. ``noun``/``plural``: the entry's name in
    offsets and details (``entry:3``, "document holds no entries")."""
    value = record.value
    if record.offset != DOCUMENT or not isinstance(value, list):
        if isinstance(value, list):
            raise RecordError(
                reasons.WRONG_TYPE, f"line: expected one {noun} object, got array"
            )
        return convert(value, record.offset)
    if not value:
        return [
            Rejected(
                reasons.NO_MESSAGES, DOCUMENT, f"document holds no {plural}", record.raw
            )
        ]
    out: list[Parsed] = []
    for i, entry in enumerate(value):
        offset = f"{DOCUMENT}/{noun}:{i}"
        try:
            out.extend(with_raw(convert(entry, offset), partial(raw_of, entry)))
        except RecordError as exc:
            out.append(Rejected(exc.code, offset, exc.detail, raw_of(entry)))
    return out
