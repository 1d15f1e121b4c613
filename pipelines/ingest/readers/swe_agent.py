"""SWE-agent ``.traj`` files (``swe_agent``).

A JSON document ``{environment, trajectory, history, info, replay_config}``.

* ``history`` is preferred: it is the exact message list the model saw, in chat
  form (``role``, ``content``, and for function-calling agents ``tool_calls`` on
  assistant turns and ``tool_call_ids`` on ``role:"tool"`` observations). Agents
  without function calling receive the environment's observations as ``user``
  messages; those are not user statements, so they become ``role:"tool"``
  results (no ``tool_call_id``, no tool name: no call is invented for them).
  Which ``user`` message is an observation follows from the agent loop, not
  from its text: the environment speaks right after each assistant turn, so a
  ``user`` message that directly follows an ``assistant`` message is its
  observation, unless its ``message_type`` (newer files) says it is something
  else. The task (and a demonstration) comes before the first assistant turn
  and stays a user message.
* Without a ``history``, ``trajectory`` steps are used: each step's
  ``response`` (else ``thought``) becomes an assistant message carrying one tool
  call ``bash`` whose arguments are ``{"command": <action>}`` and whose id is
  ``step-<n>``; the step's ``observation`` becomes the linked tool result.

Metadata: ``exit_status``, ``environment``, ``model`` and ``instance_id`` (from
``replay_config``), ``api_calls``, step and demonstration-message counts.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from ctxledger.pipelines.ingest import reasons
from ctxledger.pipelines.ingest.drafts import Parsed, SourceFile
from ctxledger.pipelines.ingest.readers._common import (
    RecordError,
    SessionBuilder,
    check,
    first_str,
    json_type,
    meta,
    per_record,
)
from ctxledger.pipelines.ingest.readers.openai_chat import (
    ChatState,
    content_text,
    is_messages,
)
from ctxledger.pipelines.ingest.sources import JsonRecord, decode_json

FORMAT = "swe_agent"
NAME_HINTS = (".traj",)


def sniff(value: Any, kind: str) -> int:
    if not isinstance(value, dict):
        return 0
    trajectory = value.get("trajectory")
    if isinstance(trajectory, list) and (
        not trajectory
        or (isinstance(trajectory[0], dict) and "action" in trajectory[0])
    ):
        return 3
    if is_messages(value.get("history")):
        return 3
    return 0


def _replay_config(value: dict[str, Any]) -> dict[str, Any]:
    config = value.get("replay_config")
    if isinstance(config, str):
        try:
            # Nested JSON text: decode_json refuses lone surrogates and duplicate
            # keys here too (a ValueError), so they never reach the metadata.
            config = decode_json(config)
        except (ValueError, RecursionError):
            return {}
    return config if isinstance(config, dict) else {}


def is_environment_reply(message: Any, previous: Any) -> bool:
    """Is ``message`` the environment's answer to the assistant turn before it?

    In SWE-agent and mini-swe-agent the human speaks only before the agent's
    first step (the task); afterwards every ``user`` message the model sees is
    what the environment returned for its last action (command output, a
    format error, a timeout notice). A ``message_type`` other than
    ``observation``, where recorded, overrides the position.
    """
    if not (isinstance(message, dict) and isinstance(previous, dict)):
        return False
    kind = message.get("message_type")
    return (
        message.get("role") == "user"
        and previous.get("role") == "assistant"
        and (kind is None or kind == "observation")
    )


def _get(obj: Any, *path: str) -> Any:
    for key in path:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(key)
    return obj


def _from_trajectory(steps: list[Any], base: str, builder: SessionBuilder) -> None:
    for n, step in enumerate(steps):
        offset = f"{base}/trajectory:{n}"
        if not isinstance(step, dict):
            builder.reject(
                reasons.WRONG_TYPE,
                offset,
                f"step: expected object, got {json_type(step)}",
            )
            continue
        action = step.get("action")
        call_id = f"step-{n}"
        calls = []
        if isinstance(action, str) and action.strip():
            calls.append(
                {
                    "call_id": call_id,
                    "tool_name": "bash",
                    "arguments": json.dumps({"command": action}, ensure_ascii=False),
                }
            )
        text = first_str(step.get("response"), step.get("thought")) or ""
        builder.add(
            {
                "role": "assistant",
                "content": text,
                "tool_calls": calls,
                "source_offset": f"{offset}/action",
            }
        )
        if calls and "observation" in step:
            builder.add(
                {
                    "role": "tool",
                    "tool_call_id": call_id,
                    "name": "bash",
                    "tool_output": content_text(step.get("observation")),
                    "source_offset": f"{offset}/observation",
                }
            )


def convert_record(record: JsonRecord) -> list[Parsed]:
    value = check(record.value, dict, "record")
    base = record.offset
    builder = SessionBuilder(FORMAT)
    history = value.get("history")
    trajectory = value.get("trajectory")
    demo = 0
    if isinstance(history, list) and history:
        state = ChatState(builder)
        previous = None
        for i, message in enumerate(history):
            if is_environment_reply(message, previous):
                state.add({**message, "role": "tool"}, f"{base}/history:{i}")
            else:
                state.add(message, f"{base}/history:{i}")
            previous = message
            if isinstance(message, dict) and message.get("is_demo"):
                demo += 1
    elif isinstance(trajectory, list):
        _from_trajectory(trajectory, base, builder)
    elif history is not None or trajectory is not None:
        bad = "history" if history is not None else "trajectory"
        raise RecordError(
            reasons.WRONG_TYPE,
            f"{bad}: expected non-empty array, got {json_type(history or trajectory)}",
        )
    else:
        raise RecordError(reasons.MISSING_FIELD, "missing field history")
    config = _replay_config(value)
    info = value.get("info") if isinstance(value.get("info"), dict) else {}
    environment = value.get("environment")
    return builder.finish(
        offset=base,
        external_id=first_str(_get(config, "problem_statement", "id")),
        metadata=meta(
            exit_status=first_str(info.get("exit_status")),
            environment=environment if isinstance(environment, str) else None,
            model=first_str(_get(config, "agent", "model", "name")),
            instance_id=first_str(_get(config, "problem_statement", "id")),
            api_calls=_get(info, "model_stats", "api_calls")
            if isinstance(_get(info, "model_stats", "api_calls"), int)
            else None,
            n_steps=len(trajectory) if isinstance(trajectory, list) else None,
            n_demo_messages=demo or None,
        ),
        raw=record.raw,
    )


def read(source: SourceFile) -> Iterator[Parsed]:
    yield from per_record(source, convert_record)
