"""Byte-level helpers every reader shares: decoding, JSON and JSONL with limits.

They turn the classic ways input goes bad (invalid UTF-8, malformed JSON, oversize
records, empty files, duplicate keys, lone surrogates) into ``Rejected`` items with
a location, so readers only deal with well-formed values.

``decode_json`` is the one place a source record's JSON is decoded (landing
transcripts through ``iter_jsonl``/``decode_document``, and the consent and
system-record inputs of the memory stage). Two checks run there because ``json``
itself lets the values through:

* a duplicate object key, at any depth (``{"role": "user", "role": "system"}``):
  which value wins is a parser detail another tool may see differently, so the
  record is refused (``duplicate_key``) rather than read one way silently;
* a string (value or key, at any depth) holding a lone surrogate code point, from
  an escape such as ``"\\udc80"``: ``json.loads`` returns it, but every encoder
  downstream (``str.encode``, pyarrow, DuckDB, presidio) raises on it, so one such
  line would fail the whole run, and every rerun. The record becomes an
  ``invalid_text`` dead letter instead; its raw bytes are plain ASCII escapes, so
  the quarantine copy is safe to write.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from ctxledger.pipelines.ingest import reasons
from ctxledger.pipelines.ingest.drafts import Rejected, SourceFile


class RecordDecodeError(ValueError):
    """JSON that parses but cannot be used as a record (never quotes the payload).

    A ``ValueError`` like ``json.JSONDecodeError``, so ``decode_json`` can replace
    ``json.loads`` wherever JSON found inside a record is parsed (tool outputs and
    arguments): a caller that treats unparsable text as plain text does the same
    with a nested lone surrogate, instead of passing it on to an encoder.
    """

    code = reasons.INVALID_RECORD
    detail = "unusable JSON record"


class DuplicateKeyError(RecordDecodeError):
    """An object holds the same key twice."""

    code = reasons.DUPLICATE_KEY
    detail = "an object holds the same key twice"


class InvalidTextError(RecordDecodeError):
    """A string holds a lone surrogate code point (not encodable as UTF-8)."""

    code = reasons.INVALID_TEXT
    detail = "a string holds a lone surrogate code point (not valid Unicode text)"


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``object_pairs_hook``: the object as ``json`` builds it, unless a key repeats.

    Cheap on purpose (runs once per object): ``dict`` is built in C and the length
    comparison is O(1).
    """
    obj = dict(pairs)
    if len(obj) != len(pairs):
        raise DuplicateKeyError
    return obj


#: A surrogate in a decoded value can only come from a ``\uD800``-``\uDFFF``
#: escape in the JSON text, since the text itself comes from strict UTF-8 decoding.
#: One regex search over the text (measured faster than substring tests on text
#: full of backslash escapes) decides whether the decoded value has to be walked;
#: it also matches paired (valid) surrogates and ``\\ud...`` (an escaped
#: backslash), which the walk then clears.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_SURROGATE = re.compile("[\ud800-\udfff]")


#: One decoder for every record: ``json.loads`` with a hook builds a new one (and
#: its scanner) per call, which costs more than the hook on short lines.
_DECODER = json.JSONDecoder(object_pairs_hook=_unique_keys)


def has_surrogate(value: Any) -> bool:
    """Whether any string in ``value`` (keys included, any depth) has a surrogate."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if _SURROGATE.search(item):
                return True
        elif isinstance(item, dict):
            stack.extend(item)
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            stack.extend(item)
    return False


def decode_json(text: str) -> Any:
    """The JSON value of ``text``, checked for duplicate keys and lone surrogates.

    Raises ``json.JSONDecodeError`` (or ``ValueError``/``RecursionError``) for text
    that is not JSON, ``DuplicateKeyError`` or ``InvalidTextError`` for JSON that is
    not a usable record.
    """
    value = _DECODER.decode(text)
    if _SURROGATE_ESCAPE.search(text) and has_surrogate(value):
        raise InvalidTextError
    return value


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
        return JsonRecord("document", decode_json(text), data)
    except RecordDecodeError as exc:
        return Rejected(exc.code, "document", exc.detail, data)
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
            yield JsonRecord(offset, decode_json(text), body)
        except RecordDecodeError as exc:
            yield Rejected(exc.code, offset, exc.detail, body)
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
