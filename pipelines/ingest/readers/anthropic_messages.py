"""Anthropic Messages API transcripts (``anthropic_messages``).

Accepted records (a whole JSON document, or one per JSONL line; each is a session):

* a recorded exchange ``{"request": {system?, messages}, "response": {...}}`` (the
  pydantic-ai cassette extracts): request messages plus the response message;
* a request body ``{"system"?, "messages": [...], "model"?}``;
* a list of messages, or a single response object (``"type": "message"``).

Content blocks, in order (``BlockConverter``):

* ``text`` joins the message text: an assistant's text blocks (the model's output
  split around citations) and cited blocks are concatenated as they are, other
  roles' blocks are joined with a newline; ``image``, ``document`` and any other
  non-text block become a ``[type]`` placeholder;
* ``thinking`` goes to ``thinking``; ``redacted_thinking`` adds
  ``[redacted_thinking]`` there (its data is encrypted);
* ``tool_use``, ``server_tool_use`` and ``mcp_tool_use`` become tool calls
  (arguments: the ``input`` object dumped with sorted keys);
* ``tool_result`` and every ``*_tool_result`` block (``web_search_tool_result``,
  ``web_fetch_tool_result``, ``mcp_tool_result``, code-execution results, ...)
  end the current message and become a separate ``role:"tool"`` message with
  ``tool_call_id`` = ``tool_use_id``. Status is ``error`` when ``is_error`` is set or
  the result is an ``*_error`` object (or a non-zero ``return_code``), else ``ok``.
  Server tool results sit inside assistant messages, so an assistant turn that
  searches the web becomes: assistant (call), tool (result), assistant (answer).

The ``system`` request parameter (a string or text blocks) becomes a system message.
"""

from __future__ import annotations

from collections.abc import Iterator
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
    per_record,
    placeholder,
    unexpected_record,
)
from ctxledger.pipelines.ingest.readers.openai_chat import chat_marks, is_messages
from ctxledger.pipelines.ingest.sources import JsonRecord

FORMAT = "anthropic_messages"
NAME_HINTS = ("anthropic", "claude")

CALL_BLOCKS = {"tool_use", "server_tool_use", "mcp_tool_use"}
_HIDDEN_KEYS = {"encrypted_content", "encrypted_index", "signature"}


def is_result_block(kind: Any) -> bool:
    return isinstance(kind, str) and (
        kind == "tool_result" or kind.endswith("_tool_result")
    )


def _part_text(part: Any) -> str:
    if isinstance(part, str):
        return part
    if not isinstance(part, dict):
        return as_text(part)
    kind = part.get("type")
    if isinstance(part.get("text"), str) and kind in (None, "text", "advisor_result"):
        return part["text"]
    if kind == "web_search_result":
        return "\n".join(
            x for x in (part.get("title"), part.get("url")) if isinstance(x, str)
        )
    if kind == "web_fetch_result":
        head = part.get("url") if isinstance(part.get("url"), str) else ""
        body = result_text(part.get("content"))
        return f"{head}\n{body}" if head and body else head or body
    if kind == "document":
        source = part.get("source")
        if isinstance(source, dict) and source.get("type") == "text":
            return source.get("data") if isinstance(source.get("data"), str) else ""
        return placeholder(kind)
    if kind in ("image", "search_result_image"):
        return placeholder(kind)
    if isinstance(kind, str) and kind.endswith("_error"):
        return "\n".join(
            str(part[k]) for k in ("error_code", "error_message") if part.get(k)
        )
    if "stdout" in part or "stderr" in part:
        return "\n".join(
            part[k] for k in ("stdout", "stderr") if isinstance(part.get(k), str)
        ).strip("\n")
    return as_text({k: v for k, v in part.items() if k not in _HIDDEN_KEYS})


def result_text(content: Any) -> str:
    """A tool result's content (string, blocks or result object) as text."""
    if content is None:
        return ""
    if isinstance(content, list):
        return "\n".join(_part_text(part) for part in content)
    return _part_text(content)


def result_status(block: dict[str, Any]) -> str:
    if block.get("is_error") is True:
        return "error"
    content = block.get("content")
    if isinstance(content, dict):
        kind = content.get("type")
        if isinstance(kind, str) and kind.endswith("_error"):
            return "error"
        code = content.get("return_code")
        if isinstance(code, int) and not isinstance(code, bool) and code != 0:
            return "error"
    return "ok"


class BlockConverter:
    """Turns Anthropic messages into draft-message fields; remembers tool names."""

    def __init__(self) -> None:
        self.names: dict[str, str] = {}

    def convert(
        self, role: Any, content: Any, base: str, created_at: Any = None
    ) -> list[dict[str, Any]]:
        """Field dicts for the drafts of one message; non-object blocks raise."""
        common = {"created_at": created_at}
        if not isinstance(content, list):
            if content is not None and not isinstance(content, str):
                raise RecordError(
                    reasons.WRONG_TYPE,
                    f"content: expected string or array, got {json_type(content)}",
                )
            return [
                {
                    **common,
                    "role": role,
                    "content": content or "",
                    "source_offset": base,
                }
            ]
        out: list[dict[str, Any]] = []
        texts: list[tuple[str, bool]] = []
        thinking: list[str] = []
        calls: list[dict[str, Any]] = []
        start: int | None = None

        def flush() -> None:
            nonlocal start
            if start is None:
                return
            text = ""
            for i, (piece, cited) in enumerate(texts):
                glued = i == 0 or role == "assistant" or cited or texts[i - 1][1]
                text += ("" if glued else "\n") + piece
            out.append(
                {
                    **common,
                    "role": role,
                    "content": text,
                    "thinking": "\n\n".join(thinking) if thinking else None,
                    "tool_calls": list(calls),
                    "source_offset": f"{base}/block:{start}",
                }
            )
            texts.clear()
            thinking.clear()
            calls.clear()
            start = None

        for k, block in enumerate(content):
            if not isinstance(block, dict):
                raise RecordError(
                    reasons.WRONG_TYPE,
                    f"content.{k}: expected object, got {json_type(block)}",
                )
            kind = block.get("type")
            if is_result_block(kind):
                flush()
                call_id = block.get("tool_use_id")
                out.append(
                    {
                        **common,
                        "role": "tool",
                        "content": "",
                        "tool_call_id": call_id,
                        "tool_output": result_text(block.get("content")),
                        "tool_status": result_status(block),
                        "name": self.names.get(call_id)
                        if isinstance(call_id, str)
                        else None,
                        "source_offset": f"{base}/block:{k}",
                    }
                )
                continue
            if start is None:
                start = k
            if kind == "text":
                text = block.get("text")
                cited = bool(block.get("citations"))
                texts.append((text if isinstance(text, str) else "", cited))
            elif kind == "thinking":
                if isinstance(block.get("thinking"), str) and block["thinking"]:
                    thinking.append(block["thinking"])
            elif kind == "redacted_thinking":
                thinking.append("[redacted_thinking]")
            elif kind in CALL_BLOCKS:
                call_id, name = block.get("id"), block.get("name")
                calls.append(
                    {
                        "call_id": call_id,
                        "tool_name": name,
                        "arguments": args_text(block.get("input")),
                    }
                )
                if isinstance(call_id, str) and isinstance(name, str):
                    self.names[call_id] = name
            else:
                texts.append((placeholder(kind), False))
        flush()
        if not out:
            out.append({**common, "role": role, "content": "", "source_offset": base})
        return out


def system_text(system: Any) -> str:
    """The ``system`` request parameter (string or text blocks) as text."""
    if isinstance(system, list):
        return "\n".join(_part_text(block) for block in system)
    return as_text(system)


# --- sniffing ------------------------------------------------------------------------


def _score_messages(messages: Any, request_like: bool) -> int:
    if not is_messages(messages):
        return 0
    openai, anthropic = chat_marks(messages)
    if anthropic and not openai:
        return 3
    if request_like and not openai:
        return 2
    return 0


def _is_response(value: Any) -> bool:
    return (
        isinstance(value, dict)
        and value.get("type") == "message"
        and isinstance(value.get("content"), list)
    )


def sniff(value: Any, kind: str) -> int:
    if isinstance(value, list):
        return _score_messages(value, False)
    if not isinstance(value, dict):
        return 0
    request, response = value.get("request"), value.get("response")
    if isinstance(request, dict) or isinstance(response, dict):
        if _is_response(response):
            return 3
        if isinstance(request, dict):
            return _score_messages(
                request.get("messages"), "system" in request and "max_tokens" in request
            )
        return 0
    if "messages" in value:
        return _score_messages(
            value.get("messages"), "system" in value and "max_tokens" in value
        )
    if _is_response(value) and value.get("role") == "assistant":
        return 2
    return 0


# --- reading -------------------------------------------------------------------------


def _add_message(
    converter: BlockConverter, builder: SessionBuilder, message: Any, offset: str
) -> None:
    if not isinstance(message, dict):
        builder.reject(
            reasons.WRONG_TYPE,
            offset,
            f"message: expected object, got {json_type(message)}",
        )
        return
    try:
        drafts = converter.convert(message.get("role"), message.get("content"), offset)
    except RecordError as exc:
        builder.reject(exc.code, offset, exc.detail)
        return
    for fields in drafts:
        builder.add(fields)


def _add_system(builder: SessionBuilder, system: Any, offset: str) -> None:
    if system is None or system == "" or system == []:
        return
    builder.add(
        {"role": "system", "content": system_text(system), "source_offset": offset}
    )


def convert_record(record: JsonRecord) -> list[Parsed]:
    value, base = record.value, record.offset
    builder = SessionBuilder(FORMAT)
    converter = BlockConverter()
    metadata: dict[str, Any] = {}
    external_id = None
    if isinstance(value, list):
        for i, message in enumerate(value):
            _add_message(converter, builder, message, f"{base}/message:{i}")
    elif isinstance(value, dict) and ("request" in value or "response" in value):
        request = need(value, "request", dict, "")
        messages = need(request, "messages", list, "request.")
        response = value.get("response")
        if response is not None:
            check(response, dict, "response")
        _add_system(builder, request.get("system"), f"{base}/request/system")
        for i, message in enumerate(messages):
            _add_message(converter, builder, message, f"{base}/request/message:{i}")
        response = response or {}
        if response:
            _add_message(converter, builder, response, f"{base}/response")
        tools = request.get("tools")
        thinking = request.get("thinking")
        metadata = meta(
            model=first_str(response.get("model"), request.get("model")),
            stop_reason=first_str(response.get("stop_reason")),
            n_request_messages=len(messages),
            n_tools=len(tools) if isinstance(tools, list) else None,
            thinking=first_str(thinking.get("type"))
            if isinstance(thinking, dict)
            else None,
            source_cassette=first_str(value.get("source_cassette")),
        )
        external_id = first_str(response.get("id"))
    elif isinstance(value, dict) and "messages" in value:
        messages = need(value, "messages", list, "")
        _add_system(builder, value.get("system"), f"{base}/system")
        for i, message in enumerate(messages):
            _add_message(converter, builder, message, f"{base}/message:{i}")
        metadata = meta(model=first_str(value.get("model")))
    elif _is_response(value):
        _add_message(converter, builder, value, base)
        metadata = meta(
            model=first_str(value.get("model")),
            stop_reason=first_str(value.get("stop_reason")),
        )
        external_id = first_str(value.get("id"))
    else:
        raise unexpected_record(value)
    return builder.finish(
        offset=base, external_id=external_id, metadata=metadata, raw=record.raw
    )


def read(source: SourceFile) -> Iterator[Parsed]:
    yield from per_record(source, convert_record)
