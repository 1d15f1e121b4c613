"""Byte-level helpers every reader shares: decoding, JSON and JSONL with limits.

They turn the classic ways input goes bad (invalid UTF-8, malformed JSON, oversize
records, empty files) into ``Rejected`` items with a location, so readers only deal
with well-formed values.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from pipelines.ingest import reasons
from pipelines.ingest.drafts import Rejected, SourceFile


@dataclass(frozen=True)
class JsonRecord:
    """One decoded JSON value and where it came from (``line:N`` or ``document``)."""

    offset: str
    value: Any
    raw: bytes


def decode_document(source: SourceFile) -> JsonRecord | Rejected:
    """Decode a whole file as one JSON document."""
    data = source.data
    if not data.strip():
        return Rejected(reasons.EMPTY_FILE, "document", "file is empty")
    if len(data) > source.max_record_bytes:
        return Rejected(
            reasons.OVERSIZE,
            "document",
            f"document is {len(data)} bytes, cap is {source.max_record_bytes}",
            raw=data,
        )
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        return Rejected(
            reasons.INVALID_UTF8, f"byte:{exc.start}", "invalid UTF-8 sequence", data
        )
    try:
        return JsonRecord("document", json.loads(text), data)
    except json.JSONDecodeError as exc:
        return Rejected(
            reasons.MALFORMED_JSON,
            f"line:{exc.lineno}:col:{exc.colno}",
            f"malformed JSON: {exc.msg}",
            data,
        )
    except (ValueError, RecursionError) as exc:
        # Over-deep nesting or an integer past Python's digit limit.
        return Rejected(
            reasons.MALFORMED_JSON,
            "document",
            f"unparseable JSON ({type(exc).__name__})",
            data,
        )


def iter_jsonl(source: SourceFile) -> Iterator[JsonRecord | Rejected]:
    """Yield one item per non-blank line: a decoded value or a rejection.

    Offsets are 1-based line numbers plus the byte offset of the line start.
    """
    data = source.data
    if not data.strip():
        yield Rejected(reasons.EMPTY_FILE, "document", "file is empty")
        return
    position = 0
    for number, line in enumerate(data.splitlines(keepends=True), start=1):
        start = position
        position += len(line)
        body = line.strip()
        if not body:
            continue
        offset = f"line:{number}:byte:{start}"
        if len(body) > source.max_record_bytes:
            yield Rejected(
                reasons.OVERSIZE,
                offset,
                f"record is {len(body)} bytes, cap is {source.max_record_bytes}",
                raw=body,
            )
            continue
        try:
            text = body.decode("utf-8-sig" if number == 1 else "utf-8")
        except UnicodeDecodeError as exc:
            yield Rejected(
                reasons.INVALID_UTF8,
                f"{offset}+{exc.start}",
                "invalid UTF-8 sequence",
                body,
            )
            continue
        try:
            yield JsonRecord(offset, json.loads(text), body)
        except json.JSONDecodeError as exc:
            yield Rejected(
                reasons.MALFORMED_JSON,
                offset,
                f"malformed JSON at column {exc.colno}: {exc.msg}",
                body,
            )
        except (ValueError, RecursionError) as exc:
            # Over-deep nesting or an integer past Python's digit limit.
            yield Rejected(
                reasons.MALFORMED_JSON,
                offset,
                f"unparseable JSON ({type(exc).__name__})",
                body,
            )


def count_records(source: SourceFile, jsonl: bool) -> int:
    """How many source records a file holds: non-blank lines, or 1 for a document."""
    if not jsonl:
        return 1
    return sum(1 for line in source.data.splitlines() if line.strip()) or 1
