"""Bad input: each case gives the right reason codes and offsets, conserves records,
and never quotes the payload in ``Rejected.detail`` (a planted marker must not
appear there)."""

from __future__ import annotations

import json

import pytest

from ctxledger.pipelines.ingest import reasons
from ctxledger.pipelines.ingest.drafts import DraftSession, Rejected, SourceFile
from ctxledger.pipelines.ingest.readers import (
    FORMATS,
    detect_format,
    expected_records,
    read_source,
)

MARKER = "SECRET-MARKER-7731"


def _jsonl(*values) -> bytes:
    return b"".join(
        (v if isinstance(v, bytes) else json.dumps(v).encode()) + b"\n" for v in values
    )


def _canonical(**extra):
    return {"session_id": "s1", "role": "user", "content": MARKER, **extra}


def _claude(uuid: str, text: str = MARKER, **extra):
    return {
        "type": "user",
        "uuid": uuid,
        "sessionId": "sess",
        "timestamp": "2025-01-01T00:00:00Z",
        "message": {"role": "user", "content": text},
        **extra,
    }


GOOD_LINE = json.dumps(_canonical()).encode()

# (case id, format or None to detect, bytes, max_record_bytes,
#  expected rejections as (reason, offset prefix, records), sessions expected)
CASES = [
    (
        "malformed_json_line",
        None,
        _jsonl(
            _canonical(),
            b'{"session_id": "s1", "role": "user", "content": "' + MARKER.encode(),
        ),
        None,
        [(reasons.MALFORMED_JSON, f"line:2:byte:{len(GOOD_LINE) + 1}", 1)],
        1,
    ),
    (
        "invalid_utf8_line",
        None,
        _jsonl(
            {"role": "User", "text": "hi"},
            b'{"role": "AI", "text": "' + MARKER.encode() + b'\xff\xfe"}',
        ),
        None,
        [(reasons.INVALID_UTF8, "line:2:byte:31+", 1)],
        1,
    ),
    (
        "missing_required_field",
        "canonical",
        _jsonl(_canonical(), {"session_id": "s1", "role": "user"}),
        None,
        [(reasons.MISSING_FIELD, "line:2:", 1)],
        1,
    ),
    (
        "missing_api_field",
        "api_bank",
        _jsonl({"role": "User", "text": MARKER}, {"role": "API", "param_dict": {}}),
        None,
        [(reasons.MISSING_FIELD, "line:2:", 1)],
        1,
    ),
    (
        "wrong_type_content",
        "canonical",
        _jsonl(_canonical(), _canonical(content=7, turn=1)),
        None,
        [(reasons.WRONG_TYPE, "line:2:", 1)],
        1,
    ),
    (
        "wrong_type_claude_message",
        None,
        _jsonl(_claude("u1"), {**_claude("u2"), "message": MARKER}),
        None,
        [(reasons.WRONG_TYPE, "line:2:", 1)],
        1,
    ),
    (
        "wrong_type_tau_entry",
        "tau_bench",
        json.dumps(
            [
                {
                    "task_id": 1,
                    "reward": 0.0,
                    "traj": [{"role": "user", "content": "x"}],
                },
                {"task_id": 2, "reward": 1.0, "traj": MARKER},
            ],
            indent=1,
        ).encode(),
        None,
        [(reasons.WRONG_TYPE, "document/entry:1", 1)],
        1,
    ),
    (
        "unknown_field_named_by_payload",
        "canonical",
        _jsonl(_canonical(), {**_canonical(), MARKER: 1}),
        None,
        [(reasons.INVALID_RECORD, "line:2:", 1)],
        1,
    ),
    (
        "metadata_key_from_payload",
        "canonical",
        _jsonl(_canonical(), _canonical(metadata={MARKER: {"nested": True}})),
        None,
        [(reasons.WRONG_TYPE, "line:2:", 1)],
        1,
    ),
    (
        "unknown_role_canonical",
        None,
        _jsonl(_canonical(), _canonical(role="narrator")),
        None,
        [(reasons.UNKNOWN_ROLE, "line:2:", 1)],
        1,
    ),
    (
        "unknown_role_api_bank",
        None,
        _jsonl({"role": "User", "text": "hi"}, {"role": "Narrator", "text": MARKER}),
        None,
        [(reasons.UNKNOWN_ROLE, "line:2:", 1)],
        1,
    ),
    (
        "unknown_role_inside_document",
        None,
        json.dumps(
            {
                "messages": [
                    {"role": "user", "content": "hi"},
                    {"role": "narrator", "content": MARKER},
                    {"role": "assistant", "content": "ok"},
                ]
            }
        ).encode(),
        None,
        [(reasons.UNKNOWN_ROLE, "document/message:1", 0)],
        1,
    ),
    (
        "oversize_jsonl_line",
        None,
        _jsonl(_canonical(), _canonical(content=MARKER * 20)),
        200,
        [(reasons.OVERSIZE, "line:2:", 1)],
        1,
    ),
    (
        "oversize_document",
        "swe_agent",
        json.dumps(
            {"history": [{"role": "user", "content": MARKER * 20}]}, indent=1
        ).encode(),
        200,
        [(reasons.OVERSIZE, "document", 1)],
        0,
    ),
    ("empty_file", None, b"", None, [(reasons.EMPTY_FILE, "document", 1)], 0),
    (
        "blank_file_with_format",
        "claude_code",
        b"\n  \n\t\n",
        None,
        [(reasons.EMPTY_FILE, "document", 1)],
        0,
    ),
    (
        "garbage_binary",
        None,
        b"\x89PNG\r\n\x1a\n\x00\xff\xfe" + MARKER.encode() + b"\x80\x81",
        None,
        [(reasons.INVALID_UTF8, "byte:", 1)],
        0,
    ),
    (
        "not_json_text",
        None,
        b"history:\n  - role: user\n    content: " + MARKER.encode() + b"\n",
        None,
        [(reasons.MALFORMED_JSON, "line:1:col:1", 1)],
        0,
    ),
    (
        "unknown_json_document",
        None,
        json.dumps({"foo": MARKER}).encode(),
        None,
        [(reasons.UNKNOWN_FORMAT, "document", 1)],
        0,
    ),
    (
        "unknown_jsonl",
        None,
        _jsonl({"a": MARKER}, {"b": 1}, [1, 2]),
        None,
        [(reasons.UNKNOWN_FORMAT, "document", 3)],
        0,
    ),
    (
        "unregistered_format",
        "no_such_format",
        _jsonl(_canonical(), _canonical()),
        None,
        [(reasons.UNKNOWN_FORMAT, "document", 2)],
        0,
    ),
    (
        "bookkeeping_only_claude_code",
        "claude_code",
        _jsonl(
            {"type": "summary", "summary": MARKER, "leafUuid": "x"},
            {"type": "summary", "summary": MARKER, "leafUuid": "y"},
        ),
        None,
        [(reasons.NO_MESSAGES, "line:1:", 2)],
        0,
    ),
    (
        "deeply_nested_json",
        None,
        b"[" * 100_000 + MARKER.encode(),
        None,
        [(reasons.MALFORMED_JSON, "document", 1)],
        0,
    ),
    (
        "bad_first_line_then_claude_code",
        None,
        _jsonl(b'{"type": "user", "mess', _claude("u1"), _claude("u2")),
        None,
        [(reasons.MALFORMED_JSON, "line:1:byte:0", 1)],
        1,
    ),
    (
        "openhands_event_not_object",
        None,
        json.dumps(
            {
                "history": [
                    {
                        "id": 0,
                        "source": "user",
                        "action": "message",
                        "args": {"content": "x"},
                    },
                    MARKER,
                ]
            }
        ).encode(),
        None,
        [(reasons.WRONG_TYPE, "document/event:1", 0)],
        1,
    ),
    (
        "lone_surrogate_in_a_value",
        None,
        _jsonl(
            _canonical(),
            b'{"session_id": "s1", "role": "user", "content": "'
            + MARKER.encode()
            + b'\\udc80"}',
        ),
        None,
        [(reasons.INVALID_TEXT, "line:2:", 1)],
        1,
    ),
    (
        "lone_surrogate_in_a_nested_key",
        "canonical",
        _jsonl(
            _canonical(),
            b'{"session_id": "s1", "role": "user", "content": "x",'
            b' "metadata": {"k\\ud800": 1}}',
        ),
        None,
        [(reasons.INVALID_TEXT, "line:2:", 1)],
        1,
    ),
    (
        "lone_surrogate_in_a_document",
        None,
        b'{"history": [{"role": "user", "content": "\\udfff '
        + MARKER.encode()
        + b'"}], "info": {}}',
        None,
        [(reasons.INVALID_TEXT, "document", 1)],
        0,
    ),
    (
        "lone_surrogate_in_a_pretty_document",
        "swe_agent",
        b'{\n "history": [\n  {"role": "user", "content": "\\ud83d"}\n ]\n}',
        None,
        [(reasons.INVALID_TEXT, "document", 1)],
        0,
    ),
    (
        "duplicate_key",
        None,
        _jsonl(
            _canonical(),
            b'{"session_id": "s1", "role": "user", "role": "system",'
            b' "content": "' + MARKER.encode() + b'"}',
        ),
        None,
        [(reasons.DUPLICATE_KEY, "line:2:", 1)],
        1,
    ),
    (
        "duplicate_nested_key",
        None,
        _jsonl(
            _claude("u1"),
            b'{"type": "user", "uuid": "u2", "sessionId": "sess",'
            b' "message": {"role": "user", "content": "a", "content": "b"}}',
        ),
        None,
        [(reasons.DUPLICATE_KEY, "line:2:", 1)],
        1,
    ),
    (
        "duplicate_key_in_a_document",
        None,
        b'{"messages": [{"role": "user", "content": "hi", "role": "system"}]}',
        None,
        [(reasons.DUPLICATE_KEY, "document", 1)],
        0,
    ),
    (
        "eight_bad_lines_then_good_ones",
        None,
        _jsonl(
            *[b'{"session_id": "s1", "role": "user", "content": "' + MARKER.encode()]
            * 4,
            *[b'{"session_id": "s1", "role": "user", "content": "\\udc80"}'] * 2,
            *[b'{"session_id": "s1", "role": "user", "role": "user", "content": ""}']
            * 2,
            *[_canonical(turn=i) for i in range(10)],
        ),
        None,
        [(reasons.MALFORMED_JSON, "line:", 1)] * 4
        + [(reasons.INVALID_TEXT, "line:", 1)] * 2
        + [(reasons.DUPLICATE_KEY, "line:", 1)] * 2,
        1,
    ),
    (
        "unknown_jsonl_with_bad_lines",
        None,
        _jsonl(b"{not json", {"a": MARKER}, b'{"a": "\\udc80"}', {"b": 1}),
        None,
        [
            (reasons.MALFORMED_JSON, "line:1:", 1),
            (reasons.INVALID_TEXT, "line:3:", 1),
            (reasons.UNKNOWN_FORMAT, "document", 2),
        ],
        0,
    ),
]


@pytest.mark.parametrize(
    "fmt, data, cap, expected, n_sessions",
    [case[1:] for case in CASES],
    ids=[case[0] for case in CASES],
)
def test_bad_input(fmt, data, cap, expected, n_sessions):
    source = SourceFile(
        path="landing/file.jsonl",
        data=data,
        **({"max_record_bytes": cap} if cap else {}),
    )
    detected = detect_format(source)
    items = list(read_source(source, fmt))
    sessions = [i for i in items if isinstance(i, DraftSession)]
    rejected = [i for i in items if isinstance(i, Rejected)]
    assert len(sessions) == n_sessions
    got = [(r.reason_code, r.source_offset, r.records) for r in rejected]
    assert len(got) == len(expected), got
    for (code, offset, records), (want_code, want_offset, want_records) in zip(
        got, expected, strict=True
    ):
        assert code == want_code
        assert offset.startswith(want_offset), (offset, want_offset)
        assert records == want_records
    total = sum(i.records for i in items)
    assert total == expected_records(source, fmt or detected)
    for r in rejected:
        assert r.reason_code in reasons.ALL
        assert MARKER not in r.detail
        assert MARKER not in r.source_offset
        if r.records and r.reason_code != reasons.EMPTY_FILE:
            assert r.raw, f"{r.reason_code} has no quarantine copy"
    for session in sessions:
        # Whatever a reader lets through can be encoded downstream.
        session.model_dump_json().encode("utf-8")


def test_record_level_rejections_keep_raw_bytes_for_quarantine():
    data = _jsonl(_canonical(), _canonical(role="narrator"))
    [_, rejected] = list(read_source(SourceFile("c.jsonl", data)))
    assert rejected.raw is not None and MARKER.encode() in rejected.raw


def test_format_override_wins_over_detection():
    data = _jsonl(_canonical(), _canonical())
    source = SourceFile("c.jsonl", data)
    assert detect_format(source) == "canonical"
    items = list(read_source(source, "api_bank"))
    assert all(isinstance(i, Rejected) for i in items)
    assert sum(i.records for i in items) == 2


@pytest.mark.parametrize("fmt", FORMATS)
def test_every_reader_survives_every_fixture_shape(fmt):
    """Any reader on any other format's data: no crash, records conserved."""
    samples = [
        _jsonl(_canonical(), _claude("u")),
        json.dumps([{"role": "user", "content": MARKER}]).encode(),
        json.dumps({"history": [{"action": "run"}], "trajectory": [1]}).encode(),
        json.dumps([{"traj": 1}, 2, "x", None]).encode(),
        json.dumps({"loglines": [{"type": "user", "message": {}}]}).encode(),
    ]
    for data in samples:
        source = SourceFile("x.json", data)
        items = list(read_source(source, fmt))
        assert sum(i.records for i in items) == expected_records(source, fmt)
        for item in items:
            if isinstance(item, Rejected):
                assert "internal reader error" not in item.detail
                assert MARKER not in item.detail


def test_one_poison_line_is_one_dead_letter_and_the_good_lines_land():
    """Issue 12: a lone surrogate escape used to fail the whole run, every rerun."""
    good = [_canonical(turn=i, content=f"message {i}") for i in range(51)]
    poison = b'{"session_id": "s1", "role": "user", "content": "bad \\udc80 text"}'
    data = _jsonl(*good[:20], poison, *good[20:])
    items = list(read_source(SourceFile("landing/chat.jsonl", data)))
    (session,) = [i for i in items if isinstance(i, DraftSession)]
    (rejected,) = [i for i in items if isinstance(i, Rejected)]
    assert len(session.messages) == 51
    assert rejected.reason_code == reasons.INVALID_TEXT
    assert rejected.source_offset.startswith("line:21:")
    # The quarantine copy is the line's own bytes: ASCII escapes, safe to write.
    assert rejected.raw == poison and rejected.raw.decode("ascii")
    session.model_dump_json().encode("utf-8")


@pytest.mark.parametrize(
    "text",
    [
        '"\\ud83d\\ude00"',  # a valid pair: one emoji
        '"\\\\udc80"',  # an escaped backslash, then plain letters
        '"\\u00e9t\\u00e9"',
    ],
)
def test_valid_escapes_are_not_invalid_text(text):
    line = b'{"session_id": "s1", "role": "user", "content": ' + text.encode() + b"}"
    items = list(read_source(SourceFile("c.jsonl", _jsonl(_canonical(), line))))
    assert [type(i) for i in items] == [DraftSession]
    assert len(items[0].messages) == 2


def test_detection_skips_undecodable_lines_however_many():
    bad = [b'{"type": "user", "mess'] * 30
    data = _jsonl(*bad, _claude("u1"), _claude("u2"))
    source = SourceFile("x.jsonl", data)
    assert detect_format(source) == "claude_code"
    items = list(read_source(source))
    assert sum(isinstance(i, DraftSession) for i in items) == 1
    assert [i.reason_code for i in items if isinstance(i, Rejected)] == [
        reasons.MALFORMED_JSON
    ] * 30
