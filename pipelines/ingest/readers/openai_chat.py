"""OpenAI chat-completions transcripts (``openai_chat``).

Accepted records (a whole JSON document, or one per JSONL line; each is a session):

* a list of chat messages;
* ``{"messages": [...], "model"?: ...}`` (a request body or a saved conversation);
* a recorded exchange ``{"request": {"messages": [...]}, "response": {...}}`` (the
  pydantic-ai cassette extracts): the request messages plus the response's
  ``choices[0].message``;
* a bare response ``{"choices": [{"message": ...}]}``.

Messages: ``system`` and ``developer`` map to system; ``tool`` and the legacy
``function`` role to tool. Assistant ``tool_calls`` keep their ids and raw argument
text; a legacy ``function_call`` gets a generated id (``function_call_<n>``) that
the next ``role:"function"`` result with the same name (else the oldest pending
call) links to. Content parts: text parts are joined with newlines; other parts
(images, files, audio) become a ``[type]`` placeholder, so no base64 payload is
copied. ``name`` is kept only on tool results (it is a tool name there; on user
messages it can be a person's name).

``ChatState`` and ``content_text`` are shared with the readers of formats built on
chat messages (tau-bench, ToolBench, SWE-agent, mini-swe-agent).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Any

from ctxledger.pipelines.ingest import reasons
from ctxledger.pipelines.ingest.drafts import Parsed, SourceFile, as_text
from ctxledger.pipelines.ingest.readers._common import (
    RecordError,
    SessionBuilder,
    args_text,
    check,
    first_str,
    json_type,
    meta,
    need,
    parse_time,
    per_record,
    placeholder,
    unexpected_record,
)
from ctxledger.pipelines.ingest.sources import JsonRecord

FORMAT = "openai_chat"
NAME_HINTS = ("openai", "chat")

ROLE_MAP = {
    "system": "system",
    "developer": "system",
    "user": "user",
    "assistant": "assistant",
    "tool": "tool",
    "function": "tool",
}
TEXT_PART_TYPES = {"text", "input_text", "output_text"}
OPENAI_PART_TYPES = {"image_url", "input_audio", "file", "refusal", "input_image"}
ANTHROPIC_BLOCK_TYPES = {
    "tool_use",
    "tool_result",
    "thinking",
    "redacted_thinking",
    "server_tool_use",
    "mcp_tool_use",
    "mcp_tool_result",
    "web_search_tool_result",
    "web_fetch_tool_result",
    "image",
    "document",
}


def content_text(content: Any) -> str:
    """Message content (string, list of parts, or other) as plain text."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        pieces = []
        for part in content:
            if isinstance(part, str):
                pieces.append(part)
            elif isinstance(part, dict):
                kind = part.get("type")
                text = part.get("text")
                if isinstance(text, str) and (kind is None or kind in TEXT_PART_TYPES):
                    pieces.append(text)
                elif kind == "refusal" and isinstance(part.get("refusal"), str):
                    pieces.append(part["refusal"])
                else:
                    pieces.append(placeholder(kind))
            else:
                pieces.append(as_text(part))
        return "\n".join(pieces)
    if isinstance(content, dict) and isinstance(content.get("text"), str):
        return content["text"]
    return as_text(content)


class ChatState:
    """Conversion state of one conversation: tool names by call id, pending calls."""

    def __init__(self, builder: SessionBuilder) -> None:
        self.builder = builder
        self.names: dict[str, str] = {}
        self.pending: list[tuple[str, str | None]] = []
        self.count = 0

    def add(
        self, message: Any, offset: str, created_at: datetime | None = None
    ) -> None:
        """Convert one chat message (bad ones become message-level rejections)."""
        index = self.count
        self.count += 1
        if not isinstance(message, dict):
            self.builder.reject(
                reasons.WRONG_TYPE,
                offset,
                f"message: expected object, got {json_type(message)}",
            )
            return
        raw_role = message.get("role")
        role = (
            ROLE_MAP.get(raw_role, raw_role) if isinstance(raw_role, str) else raw_role
        )
        fields: dict[str, Any] = {
            "role": role,
            "source_offset": offset,
            "created_at": created_at or parse_time(message.get("created_at")),
        }
        text = content_text(message.get("content"))
        if role == "tool":
            fields.update(self._result(message, raw_role, text))
        else:
            fields["content"] = text
            fields["thinking"] = first_str(
                message.get("reasoning_content"), message.get("reasoning")
            )
            if role == "assistant":
                fields["tool_calls"] = self._calls(message, index)
        self.builder.add(fields)

    def _calls(self, message: dict[str, Any], index: int) -> Any:
        raw_calls = message.get("tool_calls")
        calls: list[Any] = []
        if raw_calls is not None and not isinstance(raw_calls, list):
            return raw_calls  # fails validation: wrong type
        for j, call in enumerate(raw_calls or []):
            if not isinstance(call, dict):
                calls.append(call)
                continue
            function = call.get("function")
            function = function if isinstance(function, dict) else {}
            call_id = call.get("id")
            if not isinstance(call_id, str) or not call_id:
                call_id = f"call_{index}_{j}"
            name = function.get("name")
            calls.append(
                {
                    "call_id": call_id,
                    "tool_name": name,
                    "arguments": args_text(function.get("arguments")),
                }
            )
            if isinstance(name, str):
                self.names[call_id] = name
        legacy = message.get("function_call")
        if isinstance(legacy, dict):
            call_id = f"function_call_{index}"
            name = legacy.get("name")
            calls.append(
                {
                    "call_id": call_id,
                    "tool_name": name,
                    "arguments": args_text(legacy.get("arguments")),
                }
            )
            if isinstance(name, str):
                self.names[call_id] = name
            self.pending.append((call_id, name if isinstance(name, str) else None))
        return calls

    def _result(
        self, message: dict[str, Any], raw_role: Any, text: str
    ) -> dict[str, Any]:
        name = message.get("name") if isinstance(message.get("name"), str) else None
        call_id = message.get("tool_call_id")
        if call_id is None:
            ids = message.get("tool_call_ids")
            if isinstance(ids, list) and ids and isinstance(ids[0], str):
                call_id = ids[0]
        if call_id is None and self.pending:
            call_id = self._pop_pending(name)
        elif isinstance(call_id, str):
            self.pending = [p for p in self.pending if p[0] != call_id]
        if name is None and isinstance(call_id, str):
            name = self.names.get(call_id)
        return {
            "content": "",
            "tool_call_id": call_id,
            "tool_output": text,
            "name": name,
        }

    def _pop_pending(self, name: str | None) -> str:
        for i, (_, call_name) in enumerate(self.pending):
            if name is not None and call_name == name:
                return self.pending.pop(i)[0]
        return self.pending.pop(0)[0]


# --- sniffing ------------------------------------------------------------------------


def is_messages(value: Any) -> bool:
    """A non-empty list whose first items are objects with a ``role``."""
    if not isinstance(value, list) or not value:
        return False
    head = value[:20]
    return all(isinstance(m, dict) and "role" in m for m in head)


def chat_marks(messages: list[Any]) -> tuple[int, int]:
    """Counts of OpenAI-only and Anthropic-only features in a message list."""
    openai = anthropic = 0
    for message in messages[:200]:
        if not isinstance(message, dict):
            continue
        if message.get("role") in ("tool", "function", "developer"):
            openai += 1
        if any(k in message for k in ("tool_calls", "function_call", "tool_call_id")):
            openai += 1
        content = message.get("content")
        if isinstance(content, list):
            for part in content[:50]:
                if isinstance(part, dict):
                    kind = part.get("type")
                    if kind in ANTHROPIC_BLOCK_TYPES:
                        anthropic += 1
                    elif kind in OPENAI_PART_TYPES:
                        openai += 1
    return openai, anthropic


def _score_messages(messages: Any, anthropic_request: bool = False) -> int:
    if not is_messages(messages):
        return 0
    openai, anthropic = chat_marks(messages)
    if openai:
        return 3 if not anthropic else 1
    if anthropic or anthropic_request:
        return 0
    return 1


def sniff(value: Any, kind: str) -> int:
    """How surely ``value`` (a document or a JSONL line) is OpenAI chat: 0 to 3."""
    if isinstance(value, list):
        return _score_messages(value)
    if not isinstance(value, dict):
        return 0
    request, response = value.get("request"), value.get("response")
    if isinstance(request, dict) or isinstance(response, dict):
        if isinstance(response, dict):
            if isinstance(response.get("choices"), list):
                return 3
            if response.get("type") == "message":
                return 0
        return (
            _score_messages(request.get("messages")) if isinstance(request, dict) else 0
        )
    if "trajectory_format" in value:
        return 0
    if "messages" in value:
        anthropic_request = "max_tokens" in value and "system" in value
        return _score_messages(value.get("messages"), anthropic_request)
    choices = value.get("choices")
    if isinstance(choices, list) and choices and isinstance(choices[0], dict):
        return 2 if isinstance(choices[0].get("message"), dict) else 0
    return 0


# --- reading -------------------------------------------------------------------------


def _response_message(response: dict[str, Any]) -> Any:
    choices = need(response, "choices", list, "response.")
    if not choices:
        raise RecordError(reasons.MISSING_FIELD, "missing field response.choices.0")
    choice = check(choices[0], dict, "response.choices.0")
    return need(choice, "message", dict, "response.choices.0.")


def convert_record(record: JsonRecord) -> list[Parsed]:
    """One session from one record (see the module docstring for the shapes)."""
    value, base = record.value, record.offset
    builder = SessionBuilder(FORMAT)
    state = ChatState(builder)
    metadata: dict[str, Any] = {}
    external_id = None
    if isinstance(value, list):
        for i, message in enumerate(value):
            state.add(message, f"{base}/message:{i}")
    elif isinstance(value, dict) and ("request" in value or "response" in value):
        request = need(value, "request", dict, "")
        messages = need(request, "messages", list, "request.")
        response = value.get("response")
        reply = None
        if response is not None:
            check(response, dict, "response")
            reply = _response_message(response)
        for i, message in enumerate(messages):
            state.add(message, f"{base}/request/message:{i}")
        response = response or {}
        if reply is not None:
            state.add(
                reply, f"{base}/response/choice:0", parse_time(response.get("created"))
            )
        choice = (response.get("choices") or [{}])[0]
        tools = request.get("tools")
        metadata = meta(
            model=first_str(response.get("model"), request.get("model")),
            finish_reason=first_str(choice.get("finish_reason")),
            n_request_messages=len(messages),
            n_tools=len(tools) if isinstance(tools, list) else None,
            source_cassette=first_str(value.get("source_cassette")),
        )
        external_id = first_str(response.get("id"))
    elif isinstance(value, dict) and "messages" in value:
        messages = need(value, "messages", list, "")
        for i, message in enumerate(messages):
            state.add(message, f"{base}/message:{i}")
        metadata = meta(model=first_str(value.get("model")))
        external_id = first_str(
            value.get("id"), value.get("conversation_id"), value.get("session_id")
        )
    elif isinstance(value, dict) and "choices" in value:
        state.add(
            _response_message({"choices": value.get("choices")}),
            f"{base}/choice:0",
            parse_time(value.get("created")),
        )
        metadata = meta(model=first_str(value.get("model")))
        external_id = first_str(value.get("id"))
    else:
        raise unexpected_record(value)
    return builder.finish(
        offset=base,
        external_id=external_id,
        metadata=metadata,
        raw=record.raw,
    )


def read(source: SourceFile) -> Iterator[Parsed]:
    yield from per_record(source, convert_record)
