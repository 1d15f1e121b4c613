"""Format readers (one module per source format) and auto-detection.

``read_source(source, fmt=None)`` turns one landing file into ``DraftSession`` and
``Rejected`` items; ``detect_format`` sniffs the format from the content (the file
name only breaks ties); ``expected_records`` says how many source records the file
holds, independently of any reader.

Records and conservation
------------------------
A *source record* is one non-blank JSONL line, or one whole JSON document (see
``_common.layout`` for how a file's layout is decided). The one exception: a
``tau_bench`` or ``locomo`` document whose top level is a list of entries counts
one record per entry, because each entry is a session. For every file and format::

    sum(s.records for s in sessions) + sum(r.records for r in rejected)
        == expected_records(source, fmt)

``DraftSession.records`` counts the records folded into a session (bookkeeping
lines included). ``Rejected.records`` is 1 for a rejected source record, and **0
for a message-level rejection**: a message inside an otherwise usable record that
failed ``DraftMessage`` validation (an unknown role such as ``narrator``, a missing
tool name, a message that is not an object...). Its record still counts in its
session; the ``Rejected`` says which message was dropped (``source_offset``) and
why (``reason_code``), with ``raw=None``. Line-per-message formats (``api_bank``,
``claude_code``, ``canonical``) reject the whole line instead (``records=1``).

Failures never raise: empty files give ``empty_file``; a record that does not
decode gives its decoding reason (``malformed_json``, ``invalid_utf8``,
``oversize_record``, ``duplicate_key``, ``invalid_text``: see
``pipelines.ingest.sources``) on its own, whatever the format. The format is
detected on the records that decode, so bad lines at the top of a JSONL file
never hide the good ones after them. A file whose format cannot be recognised
gives one ``unknown_format`` covering its decodable records (the bad ones keep
their own reasons). A reader bug is caught too and reported as
``invalid_record`` for the records not yet accounted for. ``Rejected.detail``
never quotes the payload. Every rejection that stands for source records
(``records >= 1``) carries their raw bytes for the quarantine copy, except
``empty_file`` (nothing to keep).

Output is deterministic: the same bytes give the same drafts in the same order.
Offsets look like ``line:12:byte:345``, ``document/entry:3/traj:7`` or
``line:2:byte:80/request/message:1/block:0``.
"""

from __future__ import annotations

from collections.abc import Iterator
from types import ModuleType
from typing import Any

from ctxledger.pipelines.ingest import reasons
from ctxledger.pipelines.ingest.drafts import Parsed, Rejected, SourceFile
from ctxledger.pipelines.ingest.readers import (
    anthropic_messages,
    api_bank,
    canonical,
    claude_code,
    locomo,
    mini_swe_agent,
    openai_chat,
    openhands,
    swe_agent,
    tau_bench,
    toolbench,
)
from ctxledger.pipelines.ingest.readers._common import DOCUMENT, layout, sample_values
from ctxledger.pipelines.ingest.sources import (
    count_records,
    decode_document,
    iter_jsonl,
)

# Registry order is the last tie-breaker of detection.
_READERS: dict[str, ModuleType] = {
    module.FORMAT: module
    for module in (
        canonical,
        claude_code,
        api_bank,
        tau_bench,
        locomo,
        toolbench,
        swe_agent,
        openhands,
        anthropic_messages,
        openai_chat,
        mini_swe_agent,
    )
}

FORMATS: tuple[str, ...] = tuple(_READERS)

__all__ = ["FORMATS", "detect_format", "expected_records", "read_source"]


def _classify(value: Any, kind: str, path: str) -> str | None:
    scores = {fmt: module.sniff(value, kind) for fmt, module in _READERS.items()}
    best = max(scores.values())
    if best <= 0:
        return None
    tied = [fmt for fmt, score in scores.items() if score == best]
    if len(tied) > 1:
        name = path.lower()
        hinted = [
            fmt
            for fmt in tied
            if any(hint in name for hint in _READERS[fmt].NAME_HINTS)
        ]
        if hinted:
            # The most specific hint wins (".traj.json" over ".traj").
            hinted.sort(
                key=lambda fmt: (
                    -max(len(h) for h in _READERS[fmt].NAME_HINTS if h in name)
                )
            )
            return hinted[0]
    return tied[0]


def detect_format(source: SourceFile) -> str | None:
    """The format of a file, sniffed from its content; None when unknown.

    A JSONL file is recognised from its first eight lines that decode into a
    usable record (undecodable lines are skipped, however many); a document has to
    be parsed once. Never raises.
    """
    try:
        if not source.data.strip():
            return None
        kind, values = sample_values(source)
        for value in values:
            fmt = _classify(value, kind, source.path)
            if fmt is not None:
                return fmt
        return None
    except Exception:  # detection must never fail a file
        return None


def expected_records(source: SourceFile, fmt: str | None = None) -> int:
    """How many source records the file holds, computed without any reader.

    ``fmt`` is the format the file is read as (None: undetected). Non-blank lines
    for JSONL; 1 for a document, except a ``tau_bench`` or ``locomo`` document
    whose top level is a non-empty list (one record per entry). An empty file is
    one record (it yields one ``empty_file`` rejection).
    """
    if not source.data.strip():
        return 1
    if layout(source) != DOCUMENT:
        return count_records(source, jsonl=True)
    if fmt in (tau_bench.FORMAT, locomo.FORMAT):
        record = decode_document(source)
        if not isinstance(record, Rejected) and isinstance(record.value, list):
            return max(len(record.value), 1)
    return 1


def read_source(source: SourceFile, fmt: str | None = None) -> Iterator[Parsed]:
    """Sessions and rejections from one file; ``fmt`` overrides detection."""
    if not source.data.strip():
        yield Rejected(reasons.EMPTY_FILE, "document", "file is empty")
        return
    if fmt is None:
        fmt = detect_format(source)
        if fmt is None:
            yield from _undetected(source)
            return
    module = _READERS.get(fmt)
    if module is None:
        yield Rejected(
            reasons.UNKNOWN_FORMAT,
            "document",
            "no reader for the requested format",
            raw=source.data,
            records=expected_records(source, None),
        )
        return
    yield from _guarded(module, source, fmt)


def _undetected(source: SourceFile) -> Iterator[Rejected]:
    """Rejections for a file of no known format, each with its raw bytes.

    Records that do not decode keep their own reason; the decodable ones share
    one ``unknown_format`` rejection whose quarantine copy is those records.
    """
    if layout(source) == DOCUMENT:
        record = decode_document(source)
        if isinstance(record, Rejected):
            yield record
            return
        raws = [record.raw]
    else:
        raws = []
        for record in iter_jsonl(source):
            if isinstance(record, Rejected):
                yield record
            else:
                raws.append(record.raw)
        if not raws:
            return
    yield Rejected(
        reasons.UNKNOWN_FORMAT,
        "document",
        "content matches no known transcript format",
        raw=b"\n".join(raws),
        records=len(raws),
    )


def _guarded(module: ModuleType, source: SourceFile, fmt: str) -> Iterator[Parsed]:
    """Run a reader; an unexpected error becomes one rejection for the rest."""
    counted = 0
    try:
        for item in module.read(source):
            counted += item.records
            yield item
    except Exception as exc:  # a reader bug must not stop the run
        missing = expected_records(source, fmt) - counted
        yield Rejected(
            reasons.INVALID_RECORD,
            "document",
            f"internal reader error ({type(exc).__name__})",
            raw=source.data if missing > 0 else None,
            records=max(missing, 0),
        )
