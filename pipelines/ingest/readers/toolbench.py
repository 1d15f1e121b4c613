"""ToolBench DFSDT answer files (``toolbench``).

A JSON document ``{answer_generation{train_messages, finish_type, ...}, tree, ...}``.
``train_messages`` is a list of training samples cut from the search: each is a
chat conversation in the legacy OpenAI ``function_call`` / ``role:"function"``
form. The last sample is the finished chain (earlier ones are prefixes or retries
of it), so it becomes the session; the number of samples goes to metadata.

A file with no ``train_messages`` (a "tree-only" answer whose search produced no
valid chain) holds no conversation: it is rejected as ``no_messages``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ctxledger.pipelines.ingest import reasons
from ctxledger.pipelines.ingest.drafts import Parsed, Rejected, SourceFile
from ctxledger.pipelines.ingest.readers._common import (
    SessionBuilder,
    check,
    first_str,
    meta,
    need,
    per_record,
)
from ctxledger.pipelines.ingest.readers.openai_chat import ChatState
from ctxledger.pipelines.ingest.sources import JsonRecord

FORMAT = "toolbench"
NAME_HINTS = ("answer", "toolbench", "dfs")


def sniff(value: Any, kind: str) -> int:
    if isinstance(value, dict) and isinstance(value.get("answer_generation"), dict):
        return 3
    return 0


def _number(value: Any) -> int | float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return value


def convert_record(record: JsonRecord) -> list[Parsed]:
    value = check(record.value, dict, "record")
    answer = need(value, "answer_generation", dict, "")
    samples = answer.get("train_messages")
    if samples is None or samples == []:
        return [
            Rejected(
                reasons.NO_MESSAGES,
                record.offset,
                "answer_generation has no train_messages (search tree only)",
                record.raw,
            )
        ]
    samples = check(samples, list, "answer_generation.train_messages")
    last = len(samples) - 1
    conversation = check(
        samples[last], list, f"answer_generation.train_messages.{last}"
    )
    builder = SessionBuilder(FORMAT)
    state = ChatState(builder)
    base = f"{record.offset}/train_messages:{last}"
    for i, message in enumerate(conversation):
        state.add(message, f"{base}/message:{i}")
    functions = answer.get("function")
    valid = answer.get("valid_data")
    win = value.get("win")
    return builder.finish(
        offset=record.offset,
        metadata=meta(
            finish_type=first_str(answer.get("finish_type")),
            query_count=_number(answer.get("query_count")),
            total_tokens=_number(answer.get("total_tokens")),
            valid_data=valid if isinstance(valid, bool) else None,
            win=win if isinstance(win, bool) else None,
            n_train_samples=len(samples),
            n_functions=len(functions) if isinstance(functions, list) else None,
        ),
        raw=record.raw,
    )


def read(source: SourceFile) -> Iterator[Parsed]:
    yield from per_record(source, convert_record)
