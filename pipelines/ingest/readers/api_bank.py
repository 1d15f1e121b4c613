"""API-Bank dialogues (``api_bank``).

JSONL, one turn per line, one session per file:

* ``{"role": "User" | "AI", "text": ...}`` become user / assistant messages;
* ``{"role": "API", "api_name", "param_dict", "result": {input, output,
  exception}}`` becomes an assistant message with one tool call (id
  ``api-<line number>``, arguments ``param_dict`` dumped with sorted keys) followed
  by its tool result (``output`` as text, or the ``exception`` text with status
  ``error`` when ``exception`` is not null).

A line that cannot be used (bad JSON, wrong shape, unknown role) is rejected on
its own (``records=1``) and the rest of the dialogue is kept. The session has no
external id (API-Bank dialogues are identified by their file name only).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pydantic import ValidationError

from ctxledger.pipelines.ingest.drafts import (
    DraftMessage,
    DraftSession,
    Parsed,
    Rejected,
    SourceFile,
    as_text,
)
from ctxledger.pipelines.ingest.readers._common import (
    RecordError,
    args_text,
    build_message,
    check,
    load_records,
    need,
    rejection,
)

FORMAT = "api_bank"
NAME_HINTS = ("api-bank", "api_bank", "level-")
ROLE_MAP = {"User": "user", "AI": "assistant"}


def sniff(value: Any, kind: str) -> int:
    if not isinstance(value, dict):
        return 0
    role = value.get("role")
    if role in ("User", "AI") and "text" in value:
        return 3
    if role == "API" and "api_name" in value:
        return 3
    return 0


def _line_number(offset: str) -> str:
    """``12`` for ``line:12:byte:345``; a one-line file is read as ``document``."""
    parts = offset.split(":")
    return parts[1] if len(parts) > 1 and parts[0] == "line" else "1"


def _convert_line(value: Any, offset: str) -> tuple[list[DraftMessage], bool]:
    """Draft messages for one line (validation errors propagate)."""
    line = check(value, dict, "record")
    role = line.get("role")
    if role != "API":
        text = need(line, "text", str, "")
        mapped = ROLE_MAP.get(role, role) if isinstance(role, str) else role
        return [
            build_message({"role": mapped, "content": text, "source_offset": offset})
        ], False
    api_name = need(line, "api_name", str, "")
    params = line.get("param_dict")
    result = need(line, "result", dict, "")
    exception = result.get("exception")
    call_id = f"api-{_line_number(offset)}"
    call = build_message(
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "call_id": call_id,
                    "tool_name": api_name,
                    "arguments": args_text(params if params is not None else {}),
                }
            ],
            "source_offset": f"{offset}/call",
        }
    )
    failed = exception is not None
    output = as_text(exception) if failed else as_text(result.get("output"))
    answer = build_message(
        {
            "role": "tool",
            "tool_call_id": call_id,
            "name": api_name,
            "tool_output": output,
            "tool_status": "error" if failed else "ok",
            "source_offset": f"{offset}/result",
        }
    )
    return [call, answer], failed


def read(source: SourceFile) -> Iterator[Parsed]:
    messages: list[DraftMessage] = []
    rejected: list[Rejected] = []
    records = calls = errors = 0
    first_offset = None
    for record in load_records(source):
        if isinstance(record, Rejected):
            rejected.append(record)
            continue
        try:
            drafts, failed = _convert_line(record.value, record.offset)
        except RecordError as exc:
            rejected.append(Rejected(exc.code, record.offset, exc.detail, record.raw))
            continue
        except ValidationError as exc:
            rejected.append(rejection(exc, record.offset, 1, record.raw))
            continue
        messages.extend(drafts)
        records += 1
        first_offset = first_offset or record.offset
        if len(drafts) == 2:
            calls += 1
            errors += failed
    if messages:
        yield DraftSession(
            source_format=FORMAT,
            metadata={"n_api_calls": calls, "n_api_errors": errors},
            messages=messages,
            source_offset=first_offset or "document",
            records=records,
        )
    yield from rejected
