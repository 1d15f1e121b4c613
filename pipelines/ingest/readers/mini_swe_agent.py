"""mini-swe-agent trajectories (``mini_swe_agent``).

Either a JSON list of chat messages ``{role, content}`` (``*.traj.json`` of older
releases) or ``{"trajectory_format": "mini-swe-agent-1", "messages": [...],
"info": {...}}``. The agent's bash actions sit inside the assistant text (fenced
``mswea_bash_command`` blocks) and their output comes back as a ``user`` message.
That output is an observation, not a user statement: a ``user`` message that
directly follows an assistant turn is the environment's reply to it (the agent
loop's structure, ``swe_agent.is_environment_reply``) and becomes a
``role:"tool"`` result without a ``tool_call_id`` (no tool call is invented).
The task, the first ``user`` message before any assistant turn, stays a user
message.

Detection: a ``trajectory_format`` naming mini-swe-agent is certain; a plain message
list is recognised by mini-swe-agent's action fences or ``<returncode>`` output
tags, and otherwise only by a ``.traj.json`` file name (a tie with
``openai_chat``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ctxledger.pipelines.ingest import reasons
from ctxledger.pipelines.ingest.drafts import Parsed, SourceFile
from ctxledger.pipelines.ingest.readers._common import (
    RecordError,
    SessionBuilder,
    first_str,
    json_type,
    meta,
    need,
    per_record,
)
from ctxledger.pipelines.ingest.readers.openai_chat import (
    ChatState,
    chat_marks,
    is_messages,
)
from ctxledger.pipelines.ingest.readers.swe_agent import is_environment_reply
from ctxledger.pipelines.ingest.sources import JsonRecord

FORMAT = "mini_swe_agent"
NAME_HINTS = (".traj.json", "mini")
MARKERS = ("```mswea_bash_command", "<returncode>")


def sniff(value: Any, kind: str) -> int:
    if isinstance(value, dict):
        version = value.get("trajectory_format")
        if isinstance(version, str) and version.startswith("mini-swe-agent"):
            return 3
        return 0
    if not is_messages(value) or any(chat_marks(value)):
        return 0
    for message in value[:50]:
        content = message.get("content")
        if isinstance(content, str) and any(m in content for m in MARKERS):
            return 2
    return 1


def _get(obj: Any, *path: str) -> Any:
    for key in path:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(key)
    return obj


def convert_record(record: JsonRecord) -> list[Parsed]:
    value, base = record.value, record.offset
    info: Any = {}
    if isinstance(value, dict):
        messages = need(value, "messages", list, "")
        info = value.get("info")
        version = first_str(value.get("trajectory_format"))
    elif isinstance(value, list):
        messages, version = value, None
    else:
        raise RecordError(
            reasons.WRONG_TYPE,
            f"record: expected object or array, got {json_type(value)}",
        )
    builder = SessionBuilder(FORMAT)
    state = ChatState(builder)
    previous = None
    for i, message in enumerate(messages):
        if is_environment_reply(message, previous):
            message = {**message, "role": "tool"}
        state.add(message, f"{base}/message:{i}")
        previous = message
    api_calls = _get(info, "model_stats", "api_calls")
    return builder.finish(
        offset=base,
        external_id=first_str(_get(info, "instance_id")),
        metadata=meta(
            trajectory_format=version,
            exit_status=first_str(_get(info, "exit_status")),
            model=first_str(_get(info, "config", "model", "model_name")),
            api_calls=api_calls
            if isinstance(api_calls, int) and not isinstance(api_calls, bool)
            else None,
        ),
        raw=record.raw,
    )


def read(source: SourceFile) -> Iterator[Parsed]:
    yield from per_record(source, convert_record)
