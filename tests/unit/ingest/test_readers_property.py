"""Property tests: arbitrary input never makes detection or reading raise, and the
records of a file are always fully accounted for, whatever format is forced."""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxledger.pipelines.ingest import reasons
from ctxledger.pipelines.ingest.drafts import DraftSession, Rejected, SourceFile
from ctxledger.pipelines.ingest.readers import (
    FORMATS,
    detect_format,
    expected_records,
    read_source,
)

# Keys and values the readers look at, so generated JSON reaches deep code paths.
KEYS = st.sampled_from(
    [
        "role",
        "content",
        "messages",
        "request",
        "response",
        "choices",
        "message",
        "history",
        "trajectory",
        "traj",
        "task_id",
        "reward",
        "trial",
        "action",
        "observation",
        "args",
        "cause",
        "id",
        "source",
        "tool_call_metadata",
        "type",
        "sessionId",
        "uuid",
        "leafUuid",
        "loglines",
        "session_id",
        "turn",
        "tool_calls",
        "tool_call_id",
        "tool_call_ids",
        "function_call",
        "name",
        "text",
        "api_name",
        "param_dict",
        "result",
        "exception",
        "answer_generation",
        "train_messages",
        "system",
        "max_tokens",
        "tool_use_id",
        "input",
        "is_error",
        "thinking",
        "timestamp",
        "created_at",
        "status",
        "metadata",
        "function",
        "arguments",
        "trajectory_format",
        "info",
        "extras",
    ]
)
WORDS = st.sampled_from(
    [
        "user",
        "assistant",
        "system",
        "tool",
        "function",
        "developer",
        "narrator",
        "User",
        "AI",
        "API",
        "message",
        "run",
        "finish",
        "think",
        "error",
        "null",
        "text",
        "tool_use",
        "tool_result",
        "thinking",
        "redacted_thinking",
        "server_tool_use",
        "web_search_tool_result",
        "summary",
        "agent",
        "environment",
        "mini-swe-agent-1",
        "2025-01-01T00:00:00Z",
        "",
    ]
)
SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**40), max_value=2**40)
    | st.floats(allow_nan=False, allow_infinity=False)
    | WORDS
    | st.text(max_size=12)
)
VALUES = st.recursive(
    SCALARS,
    lambda children: (
        st.lists(children, max_size=5) | st.dictionaries(KEYS, children, max_size=6)
    ),
    max_leaves=40,
)


def _check(source: SourceFile) -> None:
    detected = detect_format(source)
    assert detected is None or detected in FORMATS
    for fmt in (None, *FORMATS):
        items = list(read_source(source, fmt))
        assert items, "every file yields at least one item"
        for item in items:
            assert isinstance(item, DraftSession | Rejected)
            if isinstance(item, Rejected):
                assert item.records >= 0
                assert "internal reader error" not in item.detail, item
                if item.records and item.reason_code != reasons.EMPTY_FILE:
                    assert item.raw, ("no quarantine copy", fmt, item)
        wanted = expected_records(source, fmt or detected)
        assert sum(item.records for item in items) == wanted, (fmt, items)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=600))
def test_arbitrary_bytes(data):
    _check(SourceFile("any.bin", data))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(VALUES, st.booleans())
def test_arbitrary_json_documents(value, pretty):
    data = json.dumps(value, indent=1 if pretty else None).encode()
    _check(SourceFile("doc.json", data))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(VALUES | st.binary(max_size=20), min_size=1, max_size=6),
    st.integers(min_value=40, max_value=4000),
)
def test_arbitrary_jsonl(lines, cap):
    data = b"\n".join(
        line if isinstance(line, bytes) else json.dumps(line).encode() for line in lines
    )
    _check(SourceFile("lines.jsonl", data, max_record_bytes=cap))


# Strings with lone surrogates and valid pairs; ``json.dumps`` writes them as
# ``\udXXX`` escapes, which ``json.loads`` turns back into the same code points.
SURROGATE_TEXT = st.text(
    alphabet=st.characters(min_codepoint=0xD7FF, max_codepoint=0xE000)
    | st.sampled_from("a\\\U0001f600"),
    max_size=6,
)
POISONED = st.one_of(
    st.builds(
        lambda text, meta: {"session_id": "s", "role": "user", "content": text,
                            "metadata": meta},
        SURROGATE_TEXT,
        st.dictionaries(SURROGATE_TEXT, SURROGATE_TEXT, max_size=2),
    ),
    st.builds(
        lambda text, sid: {"type": "user", "uuid": "u", "sessionId": sid,
                           "message": {"role": "user", "content": text}},
        SURROGATE_TEXT,
        SURROGATE_TEXT,
    ),
    st.builds(
        lambda text, name: {"messages": [{"role": "user", "content": text},
                                         {"role": "tool", "name": name,
                                          "content": text}]},
        SURROGATE_TEXT,
        SURROGATE_TEXT,
    ),
    st.builds(
        lambda text: {"role": "User", "text": text},
        SURROGATE_TEXT,
    ),
    VALUES,
)  # fmt: skip


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(POISONED, min_size=1, max_size=5), st.booleans())
def test_no_lone_surrogate_gets_past_the_readers(values, as_document):
    """Issue 12: whatever a reader lets through must encode as UTF-8 downstream;
    a record holding a lone surrogate becomes one ``invalid_text`` rejection."""
    if as_document:
        data = json.dumps(values, indent=1).encode()
    else:
        data = b"\n".join(json.dumps(v).encode() for v in values)
    source = SourceFile("mixed.jsonl", data)
    _check(source)
    for fmt in (None, *FORMATS):
        for item in read_source(source, fmt):
            if isinstance(item, DraftSession):
                item.model_dump_json().encode("utf-8")
            else:
                assert item.detail.encode("utf-8")
