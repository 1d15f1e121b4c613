"""OpenHands event streams (``openhands``).

Accepted records (a whole JSON document, or one per JSONL line; each is a session):
a JSON list of events, or an object with a ``history`` list of events (the lines of
evaluation ``output.jsonl`` and resolver ``output.jsonl`` files).

Events are actions (``action`` key) or observations (``observation`` key):

* ``system`` actions become system messages; ``message`` actions become user or
  assistant text by ``source`` (an event without ``source``, as in older files,
  counts as the user until the agent has acted);
* every other agent action (``run``, ``run_ipython``, ``read``, ``edit``,
  ``write``, ``browse``, ``think``, ``finish``, ...) becomes an assistant message
  whose text is the action's ``thought`` and which carries one tool call: id from
  ``tool_call_metadata.tool_call_id``, else ``event-<id>``; name from
  ``tool_call_metadata.function_name``, else the action type; arguments the raw
  JSON the model sent (from the recorded model response), else the action's
  ``args`` without ``thought`` (already the message text). ``finish`` without
  tool-call metadata is plain assistant text;
* observations become ``role:"tool"`` messages linked to the action that caused
  them (``cause``, else ``tool_call_metadata``, else, in old files without event
  ids, the oldest unanswered action). ``tool_output`` is the observation content;
  status is ``error`` for ``error`` observations, a non-zero exit code or
  ``success: false``, else ``ok``. An error observation that answers no action
  (OpenHands reports a malformed tool call this way) has no ``tool_call_id``;
* bookkeeping events (agent state changes, ``recall`` context retrieval, ``null``
  observations, condensation) are folded: counted in ``n_folded_events`` only.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator
from typing import Any

from ctxledger.pipelines.ingest import reasons
from ctxledger.pipelines.ingest.drafts import Parsed, SourceFile, as_text
from ctxledger.pipelines.ingest.readers._common import (
    SessionBuilder,
    args_text,
    first_str,
    json_type,
    meta,
    need,
    parse_time,
    per_record,
    unexpected_record,
)
from ctxledger.pipelines.ingest.sources import JsonRecord

FORMAT = "openhands"
NAME_HINTS = ("openhands", "output.jsonl", "traj")

FOLD_ACTIONS = {
    "change_agent_state",
    "recall",
    "null",
    "condensation",
    "condensation_request",
}
FOLD_OBSERVATIONS = {
    "agent_state_changed",
    "null",
    "recall",
    "condensation",
    "agent_condensation",
}
ERROR_OBSERVATIONS = {"error", "user_rejected"}
_EVENT_KEYS = {
    "action",
    "id",
    "timestamp",
    "source",
    "cause",
    "message",
    "tool_call_metadata",
    "llm_metrics",
    "timeout",
}


def _is_event(value: Any) -> bool:
    # SWE-agent history entries also carry an "action", but always with a "role".
    return (
        isinstance(value, dict)
        and ("action" in value or "observation" in value)
        and "role" not in value
    )


def _is_stream(value: Any) -> bool:
    return isinstance(value, list) and any(_is_event(e) for e in value[:5])


def sniff(value: Any, kind: str) -> int:
    if _is_stream(value):
        return 3
    if isinstance(value, dict) and _is_stream(value.get("history")):
        return 3
    return 0


def _get(obj: Any, *path: str) -> Any:
    for key in path:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(key)
    return obj


def _raw_arguments(metadata: dict[str, Any], call_id: str) -> str | None:
    choices = _get(metadata, "model_response", "choices")
    if not isinstance(choices, list):
        return None
    for choice in choices:
        calls = _get(choice, "message", "tool_calls")
        for call in calls if isinstance(calls, list) else []:
            if isinstance(call, dict) and call.get("id") == call_id:
                arguments = _get(call, "function", "arguments")
                return args_text(arguments) if arguments is not None else None
    return None


def _exit_code(event: dict[str, Any]) -> Any:
    for code in (
        _get(event, "extras", "metadata", "exit_code"),
        _get(event, "extras", "exit_code"),
        event.get("exit_code"),
    ):
        if code is not None:
            return code
    return None


def _status(event: dict[str, Any], kind: str) -> str:
    if kind in ERROR_OBSERVATIONS or event.get("success") is False:
        return "error"
    code = _exit_code(event)
    if isinstance(code, int) and not isinstance(code, bool) and code != 0:
        return "error"
    return "ok"


class _Stream:
    """Conversion state of one event stream."""

    def __init__(self, builder: SessionBuilder) -> None:
        self.builder = builder
        self.calls: dict[Hashable, tuple[str, str]] = {}
        self.other_ids: set[Hashable] = set()
        self.pending: list[tuple[str, str]] = []
        self.agent_acted = False
        self.folded = 0
        self.agent_class: str | None = None
        self.version: str | None = None

    def add(self, index: int, event: Any, offset: str) -> None:
        if not isinstance(event, dict):
            self.builder.reject(
                reasons.WRONG_TYPE,
                offset,
                f"event: expected object, got {json_type(event)}",
            )
            return
        event_id = event.get("id")
        key = event_id if isinstance(event_id, int | str) else None
        if "action" in event:
            self._action(index, event, key, offset)
        elif "observation" in event:
            self._observation(event, offset)
        else:
            self.folded += 1
            if key is not None:
                self.other_ids.add(key)

    def _action(
        self, index: int, event: dict[str, Any], key: Hashable | None, offset: str
    ) -> None:
        action, source = event.get("action"), event.get("source")
        if not isinstance(action, str):
            self.builder.reject(
                reasons.WRONG_TYPE,
                offset,
                f"action: expected string, got {json_type(action)}",
            )
            return
        args = event.get("args")
        if not isinstance(args, dict):
            args = {k: v for k, v in event.items() if k not in _EVENT_KEYS}
        created = parse_time(event.get("timestamp"))
        base = {"source_offset": offset, "created_at": created}
        if action in FOLD_ACTIONS or source == "environment":
            self.folded += 1
            if key is not None:
                self.other_ids.add(key)
            return
        if action in ("system", "message"):
            if key is not None:
                self.other_ids.add(key)
            text = first_str(args.get("content"), event.get("message")) or ""
            if action == "system":
                role = "system"
                self.agent_class = first_str(args.get("agent_class"))
                self.version = first_str(args.get("openhands_version"))
            elif source in ("user", "agent"):
                role = "user" if source == "user" else "assistant"
            else:
                role = "assistant" if self.agent_acted else "user"
            if role == "assistant":
                self.agent_acted = True
            self.builder.add({**base, "role": role, "content": text})
            return
        self.agent_acted = True
        metadata = event.get("tool_call_metadata")
        metadata = metadata if isinstance(metadata, dict) else {}
        call_id = first_str(metadata.get("tool_call_id"))
        if call_id is None:
            call_id = f"event-{key}" if key is not None else f"event-index-{index}"
        name = first_str(metadata.get("function_name")) or action
        if action == "finish":
            text = first_str(
                args.get("thought"), args.get("final_thought"), event.get("message")
            )
        else:
            text = first_str(args.get("thought"))
        calls = []
        if action != "finish" or metadata:
            arguments = _raw_arguments(metadata, call_id)
            if arguments is None:
                # The thought is the message text already (except for ``think``).
                kept = (
                    args
                    if action == "think"
                    else {k: v for k, v in args.items() if k != "thought"}
                )
                arguments = args_text(kept)
            calls.append(
                {"call_id": call_id, "tool_name": name, "arguments": arguments}
            )
            if key is not None:
                self.calls[key] = (call_id, name)
            if action != "finish":
                self.pending.append((call_id, name))
        self.builder.add(
            {**base, "role": "assistant", "content": text or "", "tool_calls": calls}
        )

    def _observation(self, event: dict[str, Any], offset: str) -> None:
        kind = event.get("observation")
        if not isinstance(kind, str):
            self.builder.reject(
                reasons.WRONG_TYPE,
                offset,
                f"observation: expected string, got {json_type(kind)}",
            )
            return
        cause = event.get("cause")
        cause = cause if isinstance(cause, int | str) else None
        if kind in FOLD_OBSERVATIONS or (cause is not None and cause in self.other_ids):
            self.folded += 1
            return
        link = self.calls.get(cause) if cause is not None else None
        metadata = event.get("tool_call_metadata")
        if link is None and isinstance(metadata, dict):
            call_id = first_str(metadata.get("tool_call_id"))
            if call_id is not None:
                link = (call_id, first_str(metadata.get("function_name")) or kind)
        if link is None and self.pending and not ({"id", "cause"} & event.keys()):
            link = self.pending[0]
        if link is not None:
            self.pending = [p for p in self.pending if p[0] != link[0]]
        content = event.get("content")
        if content is None:
            content = event.get("message")
        self.builder.add(
            {
                "role": "tool",
                "source_offset": offset,
                "created_at": parse_time(event.get("timestamp")),
                "tool_call_id": link[0] if link else None,
                "name": link[1] if link else kind,
                "tool_output": content
                if isinstance(content, str)
                else as_text(content),
                "tool_status": _status(event, kind),
            }
        )


def convert_record(record: JsonRecord) -> list[Parsed]:
    value, base = record.value, record.offset
    if isinstance(value, list):
        events, outer = value, {}
    elif isinstance(value, dict):
        events, outer = need(value, "history", list, ""), value
    else:
        raise unexpected_record(value)
    builder = SessionBuilder(FORMAT)
    stream = _Stream(builder)
    for i, event in enumerate(events):
        stream.add(i, event, f"{base}/event:{i}")
    instance_id = first_str(outer.get("instance_id"))
    success = outer.get("success")
    issue_number = _get(outer, "issue", "number")
    iterations = _get(outer, "metadata", "max_iterations")
    return builder.finish(
        offset=base,
        external_id=instance_id,
        metadata=meta(
            instance_id=instance_id,
            agent_class=first_str(_get(outer, "metadata", "agent_class"))
            or stream.agent_class,
            model=first_str(_get(outer, "metadata", "llm_config", "model")),
            openhands_version=stream.version,
            max_iterations=iterations
            if isinstance(iterations, int) and not isinstance(iterations, bool)
            else None,
            issue_type=first_str(outer.get("issue_type")),
            issue_number=issue_number
            if isinstance(issue_number, int) and not isinstance(issue_number, bool)
            else None,
            success=success if isinstance(success, bool) else None,
            n_events=len(events),
            n_folded_events=stream.folded,
        ),
        raw=record.raw,
    )


def read(source: SourceFile) -> Iterator[Parsed]:
    yield from per_record(source, convert_record)
