"""Readers on the small in-repo fixtures (no external corpora needed).

The fixtures are trimmed copies of the corpora; see
``tests/fixtures/transcripts/README.md`` for origins and licences.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from ctxledger.pipelines.ingest.drafts import DraftSession, Rejected, SourceFile
from ctxledger.pipelines.ingest.readers import (
    FORMATS,
    detect_format,
    expected_records,
    read_source,
)

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "transcripts"

DETECTED = {
    "tau_bench_airline.json": "tau_bench",
    "swe_agent_function_calling.traj": "swe_agent",
    "swe_agent_trajectory_only.traj": "swe_agent",
    "mini_swe_agent_local.traj.json": "mini_swe_agent",
    "openhands_runtime_gui_mode.json": "openhands",
    "openhands_resolver_output.jsonl": "openhands",
    "toolbench_G1_answer.json": "toolbench",
    "toolbench_tree_only.json": "toolbench",
    "openai_chat_legacy_functions.json": "openai_chat",
    "pydantic_ai_openai_chat.jsonl": "openai_chat",
    "pydantic_ai_anthropic_messages.jsonl": "anthropic_messages",
    "api_bank_add_agenda.jsonl": "api_bank",
    "claude_code_sample_session.jsonl": "claude_code",
    "claude_code_loglines.json": "claude_code",
    "claude_code_edge_cases.jsonl": "claude_code",
    "canonical_example.jsonl": "canonical",
    "locomo_conv30_trimmed.json": "locomo",
}


def _source(name: str, path: str | None = None) -> SourceFile:
    return SourceFile(path=path or name, data=(FIXTURES / name).read_bytes())


def _read(name: str, fmt: str | None = None):
    source = _source(name)
    items = list(read_source(source, fmt))
    assert sum(i.records for i in items) == expected_records(
        source, fmt or detect_format(source)
    )
    sessions = [i for i in items if isinstance(i, DraftSession)]
    rejected = [i for i in items if isinstance(i, Rejected)]
    return sessions, rejected


def _linked(session: DraftSession) -> None:
    calls: set[str] = set()
    for message in session.messages:
        calls.update(call.call_id for call in message.tool_calls)
        if message.role == "tool":
            assert message.tool_call_id in calls, message.source_offset


def test_fixtures_are_small_and_all_listed():
    files = {p.name for p in FIXTURES.iterdir() if p.name != "README.md"}
    assert files == set(DETECTED)
    assert all((FIXTURES / name).stat().st_size < 30_000 for name in files)
    readme = (FIXTURES / "README.md").read_text()
    assert all(f"`{name}`" in readme for name in files)


def test_every_format_has_a_fixture():
    assert set(DETECTED.values()) == set(FORMATS)


@pytest.mark.parametrize("name", sorted(DETECTED))
def test_detection(name):
    assert detect_format(_source(name)) == DETECTED[name]


@pytest.mark.parametrize("name", sorted(DETECTED))
def test_deterministic(name):
    first = list(read_source(_source(name)))
    again = list(read_source(_source(name)))
    assert first == again


def test_file_name_only_breaks_ties():
    plain = json.dumps([{"role": "user", "content": "hi"}]).encode()
    assert detect_format(SourceFile("run.json", plain)) == "openai_chat"
    assert detect_format(SourceFile("run.traj.json", plain)) == "mini_swe_agent"
    # Content wins over the name: a tau-bench list stays tau-bench.
    tau = _source("tau_bench_airline.json", path="claude_session.traj.json")
    assert detect_format(tau) == "tau_bench"


def test_tau_bench_entries_are_sessions():
    sessions, rejected = _read("tau_bench_airline.json")
    assert rejected == []
    assert [s.external_id for s in sessions] == ["task:0/trial:0", "task:6/trial:0"]
    assert [s.records for s in sessions] == [1, 1]
    assert sessions[1].metadata["reward"] == 1.0
    assert "user_cost" in sessions[1].metadata
    first = sessions[0].messages
    assert first[0].role == "system"
    assert first[2].source_offset == "document/entry:0/traj:2"
    tool = next(m for m in first if m.role == "tool")
    assert tool.name == "get_user_details" and tool.content == ""
    assert tool.tool_output.startswith("{")
    for session in sessions:
        _linked(session)


def test_openai_legacy_function_call_links_results():
    [session], rejected = _read("openai_chat_legacy_functions.json")
    assert rejected == []
    roles = [m.role for m in session.messages]
    assert roles == ["system", "user", "assistant", "tool", "assistant", "tool"] + [
        "assistant"
    ]
    call = session.messages[2].tool_calls[0]
    assert call.call_id == "function_call_2"
    assert call.tool_name == "transitaires_for_transitaires"
    assert call.arguments == "{}"
    result = session.messages[3]
    assert result.tool_call_id == "function_call_2"
    assert result.name == "transitaires_for_transitaires"
    # Raw argument text is kept byte for byte (newlines and indentation included).
    assert session.messages[4].tool_calls[0].arguments.startswith('{\n  "is_id"')
    _linked(session)


def test_openai_legacy_function_result_matches_by_name():
    messages = [
        {"role": "user", "content": "q"},
        {"role": "assistant", "function_call": {"name": "a", "arguments": "{}"}},
        {"role": "assistant", "function_call": {"name": "b", "arguments": "{}"}},
        {"role": "function", "name": "b", "content": "B"},
        {"role": "function", "name": "a", "content": "A"},
    ]
    [session] = read_source(SourceFile("x.json", json.dumps(messages).encode()))
    tools = [m for m in session.messages if m.role == "tool"]
    assert [(m.name, m.tool_call_id) for m in tools] == [
        ("b", "function_call_2"),
        ("a", "function_call_1"),
    ]


def test_openai_cassettes_append_the_response():
    sessions, rejected = _read("pydantic_ai_openai_chat.jsonl")
    assert rejected == []
    first = sessions[0]
    assert first.external_id == "chatcmpl-C7GRg2vXs2wpdpyTTmmgVXZP4SiAP"
    assert first.metadata["model"] == "gpt-4o-2024-08-06"
    assert first.metadata["finish_reason"] == "stop"
    user, call, result, reply = first.messages
    # The PDF part is a placeholder: no base64 payload in the content.
    assert user.content.endswith("\n[file]") and "base64" not in user.content
    assert call.tool_calls[0].call_id == result.tool_call_id
    assert reply.source_offset == "line:1:byte:0/response/choice:0"
    assert reply.created_at == datetime.fromtimestamp(1755847548, tz=UTC)
    assert first.started_at == reply.created_at
    for session in sessions:
        _linked(session)


def test_openai_roles_developer_and_unknown():
    messages = [
        {"role": "developer", "content": "rules"},
        {"role": "narrator", "content": "Once upon a time SECRET-MARKER"},
        {"role": "user", "content": "hi", "name": "Alice Example"},
    ]
    source = SourceFile("x.json", json.dumps(messages).encode())
    session, rejected = list(read_source(source))
    assert [m.role for m in session.messages] == ["system", "user"]
    # A participant name on a user message is not kept (it can be a person's).
    assert session.messages[1].name is None
    assert rejected.reason_code == "unknown_role"
    assert rejected.records == 0 and rejected.raw is None
    assert rejected.source_offset == "document/message:1"
    assert "SECRET-MARKER" not in rejected.detail


def test_openai_jsonl_of_conversations():
    lines = [
        json.dumps({"messages": [{"role": "user", "content": "a"}], "model": "m"}),
        json.dumps(
            [{"role": "user", "content": "b"}, {"role": "tool", "content": "x"}]
        ),
    ]
    source = SourceFile("c.jsonl", "\n".join(lines).encode())
    assert detect_format(source) == "openai_chat"
    sessions = list(read_source(source))
    assert [len(s.messages) for s in sessions] == [1, 2]
    assert sessions[0].metadata == {"model": "m"}


def test_toolbench_last_sample_and_tree_only():
    [session], rejected = _read("toolbench_G1_answer.json")
    assert rejected == []
    assert session.metadata["n_train_samples"] == 2
    assert session.metadata["finish_type"] == "give_answer"
    assert session.messages[0].source_offset.startswith("document/train_messages:1/")
    _linked(session)
    sessions, [rejected] = _read("toolbench_tree_only.json")
    assert sessions == []
    assert (rejected.reason_code, rejected.records) == ("no_messages", 1)


def test_anthropic_blocks():
    sessions, rejected = _read("pydantic_ai_anthropic_messages.jsonl")
    assert rejected == []
    by_cassette = {s.metadata["source_cassette"].rsplit("/", 1)[1]: s for s in sessions}
    thinking = by_cassette["test_anthropic_tool_with_thinking.yaml"]
    assistant = thinking.messages[1]
    assert assistant.thinking and assistant.content
    assert assistant.tool_calls[0].tool_name == "get_user_country"
    result = thinking.messages[2]
    assert result.role == "tool" and result.tool_output == "Mexico"
    assert result.tool_status == "ok" and result.name == "get_user_country"
    # Server tools: call, linked result, then the text after it.
    search = by_cassette["test_anthropic_web_search_tool.yaml"]
    roles = [m.role for m in search.messages]
    assert roles[:4] == ["user", "assistant", "tool", "assistant"]
    assert search.messages[2].name == "web_search"
    assert "https://" in search.messages[2].tool_output
    assert "<trimmed>" not in search.messages[2].tool_output  # encrypted_content
    mcp = by_cassette["test_anthropic_mcp_servers.yaml"]
    assert mcp.messages[2].tool_call_id.startswith("mcptoolu_")
    editor = by_cassette["test_anthropic_text_editor_code_execution_tool.yaml"]
    assert editor.messages[0].role == "system"
    assert editor.messages[0].source_offset.endswith("/request/system")
    assert [m.tool_status for m in editor.messages if m.role == "tool"] == [
        "error",
        "error",
        "ok",
        "ok",
    ]
    for session in sessions:
        _linked(session)
        assert session.external_id.startswith("msg_")


def test_anthropic_redacted_thinking_and_error_result():
    request = {
        "system": [{"type": "text", "text": "Be brief."}],
        "max_tokens": 100,
        "messages": [
            {"role": "user", "content": "go"},
            {
                "role": "assistant",
                "content": [
                    {"type": "redacted_thinking", "data": "xyz"},
                    {
                        "type": "tool_use",
                        "id": "t1",
                        "name": "f",
                        "input": {"b": 1, "a": 2},
                    },
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "t1",
                        "is_error": True,
                        "content": [{"type": "text", "text": "boom"}],
                    },
                    {"type": "text", "text": "and?"},
                ],
            },
        ],
    }
    source = SourceFile("req.json", json.dumps(request).encode())
    assert detect_format(source) == "anthropic_messages"
    [session] = read_source(source)
    system, user, assistant, tool, follow_up = session.messages
    assert system.content == "Be brief."
    assert assistant.thinking == "[redacted_thinking]"
    assert assistant.tool_calls[0].arguments == '{"a": 2, "b": 1}'
    assert (tool.tool_call_id, tool.tool_status, tool.tool_output) == (
        "t1",
        "error",
        "boom",
    )
    assert (follow_up.role, follow_up.content) == ("user", "and?")


def test_swe_agent_history_and_trajectory():
    [session], _ = _read("swe_agent_function_calling.traj")
    assert len(session.messages) == 12
    assert sum(m.role == "tool" for m in session.messages) == 5
    _linked(session)
    [steps], _ = _read("swe_agent_trajectory_only.traj")
    assert [m.role for m in steps.messages] == ["assistant", "tool"] * 3
    call = steps.messages[0].tool_calls[0]
    assert (call.call_id, call.tool_name) == ("step-0", "bash")
    assert json.loads(call.arguments)["command"].startswith("file ")
    assert steps.metadata["exit_status"] == "submitted"
    _linked(steps)


def test_swe_agent_environment_reply_by_position_and_message_type():
    from ctxledger.pipelines.ingest.readers.swe_agent import is_environment_reply

    act = {"role": "assistant", "content": "ls", "action": "ls"}
    out = {"role": "user", "content": "a.py"}
    assert is_environment_reply(out, act)
    assert is_environment_reply({**out, "message_type": "observation"}, act)
    # the task before the first step, a second user line, or a message the
    # file itself types as something else stay user messages
    assert not is_environment_reply(out, {"role": "system", "content": "x"})
    assert not is_environment_reply(out, None)
    assert not is_environment_reply(out, {"role": "user", "content": "x"})
    assert not is_environment_reply({**out, "message_type": "user"}, act)


def test_mini_swe_agent_observations_are_tool_results():
    [session], _ = _read("mini_swe_agent_local.traj.json")
    # The task stays the user's; the environment's replies to each assistant
    # turn are observations (unlinked tool results), never user statements.
    assert [m.role for m in session.messages] == [
        "system",
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",
    ]
    assert not any(m.tool_calls for m in session.messages)
    task, first = session.messages[1], session.messages[3]
    assert task.content.startswith("Please solve this issue")
    assert first.tool_call_id is None and first.content == ""
    assert first.tool_output.startswith("<returncode>0</returncode>")


def test_openhands_events():
    [session], _ = _read("openhands_runtime_gui_mode.json")
    assert session.metadata["n_events"] == 18
    assert session.metadata["n_folded_events"] == 8
    roles = [m.role for m in session.messages]
    assert roles == ["user"] + ["assistant", "tool"] * 4 + ["assistant"]
    run = session.messages[1].tool_calls[0]
    assert run.call_id == "toolu_01W9Z8jBctr8X2frZV9p1RYs"
    assert run.tool_name == "execute_bash"
    assert json.loads(run.arguments) == {"command": "mkdir -p /workspace/todo-app"}
    statuses = [m.tool_status for m in session.messages if m.role == "tool"]
    assert statuses == ["ok", "ok", "ok", "error"]  # exit code -1 on the last run
    assert session.messages[0].created_at == datetime(
        2025, 1, 20, 20, 29, 32, 262843, tzinfo=UTC
    )
    _linked(session)
    [old], _ = _read("openhands_resolver_output.jsonl")
    assert old.metadata["issue_number"] == 5 and old.metadata["success"] is True
    assert [m.tool_call_id for m in old.messages if m.role == "tool"] == [
        "event-index-1",
        "event-index-3",
        "event-index-5",
    ]
    _linked(old)


def test_api_bank_dialogue():
    [session], rejected = _read("api_bank_add_agenda.jsonl")
    assert rejected == [] and session.records == 12
    call = session.messages[6]
    assert call.role == "assistant" and call.tool_calls[0].call_id == "api-7"
    assert call.tool_calls[0].tool_name == "GetUserToken"
    assert json.loads(call.tool_calls[0].arguments) == {
        "password": "password",
        "username": "JaneSmith",
    }
    result = session.messages[7]
    assert (result.tool_call_id, result.tool_status) == ("api-7", "ok")
    assert json.loads(result.tool_output) == {"token": "o8i7u6y5t4r3e2w1q0"}
    assert session.metadata == {"n_api_calls": 3, "n_api_errors": 0}
    _linked(session)


def test_claude_code_sessions():
    [session], rejected = _read("claude_code_sample_session.jsonl")
    assert rejected == []
    assert session.external_id == "test-session-id"
    assert session.records == 8  # 7 message lines + the summary line
    assert session.metadata["n_bookkeeping_lines"] == 1
    assert session.started_at == datetime(2025, 12, 24, 10, 0, tzinfo=UTC)
    roles = [m.role for m in session.messages]
    assert roles == ["user", "assistant", "tool", "assistant", "tool", "user"] + [
        "assistant"
    ]
    _linked(session)
    [doc], _ = _read("claude_code_loglines.json")
    assert doc.records == 1 and doc.external_id is None
    assert doc.messages[1].thinking.startswith("The user wants")
    assert doc.messages[1].tool_calls[0].call_id == "toolu_write_001"
    _linked(doc)


def test_claude_code_edge_cases():
    sessions, rejected = _read("claude_code_edge_cases.jsonl")
    edge, todo = sessions
    assert (edge.external_id, todo.external_id) == ("edge_cases", "todowrite_session")
    # 11 valid lines (10 in edge_cases, 1 in todowrite_session) + the summary.
    assert (edge.records, todo.records) == (11, 1)
    failed = next(m for m in edge.messages if m.role == "tool")
    assert failed.tool_status == "error" and failed.tool_call_id == "tool_edge_001"
    assert len(rejected) == 7 and all(r.records == 1 for r in rejected)


def test_canonical_example():
    sessions, rejected = _read("canonical_example.jsonl")
    assert rejected == []
    first, second = sessions
    assert (first.external_id, first.records) == ("s-001", 5)
    assert [m.role for m in first.messages] == [
        "system",
        "user",
        "assistant",
        "tool",
        "assistant",
    ]
    assert first.metadata == {"model": "example-model-1", "channel": "chat"}
    assistant, tool = first.messages[2], first.messages[3]
    assert assistant.thinking.startswith("The user gave")
    assert assistant.tool_calls[0].arguments == '{"code": "ABC123"}'
    assert (tool.tool_call_id, tool.name, tool.tool_status) == (
        "call-1",
        "get_booking",
        "ok",
    )
    assert tool.content == "" and tool.tool_output.startswith('{"booking"')
    assert first.started_at == datetime(2025, 3, 1, 9, 0, tzinfo=UTC)
    assert (second.external_id, second.records) == ("s-002", 2)
    assert second.messages[0].created_at == datetime(2025, 3, 2, 9, 0, tzinfo=UTC)
    _linked(first)


def test_canonical_naive_time_is_utc_and_file_order_without_turns():
    lines = [
        {
            "session_id": "a",
            "role": "user",
            "content": "1",
            "created_at": "2025-01-01T00:00:00",
        },
        {"session_id": "a", "turn": 0, "role": "assistant", "content": "2"},
    ]
    data = "\n".join(json.dumps(line) for line in lines).encode()
    [session] = read_source(SourceFile("c.jsonl", data))
    assert [m.content for m in session.messages] == ["1", "2"]
    assert session.messages[0].created_at.tzinfo is not None


def test_canonical_doc_example_is_the_fixture():
    doc = (
        Path(__file__).resolve().parents[3] / "docs" / "canonical_jsonl.md"
    ).read_text()
    example = doc.split("```jsonl\n", 1)[1].split("```", 1)[0]
    assert example == (FIXTURES / "canonical_example.jsonl").read_text()


def test_locomo_turns_keep_ids_speakers_and_session_dates():
    sessions, rejected = _read("locomo_conv30_trimmed.json")
    assert not rejected and len(sessions) == 1
    session = sessions[0]
    assert session.external_id == "conv-30"
    assert session.metadata == {"locomo_sessions": 2}
    ids = [m.source_id for m in session.messages]
    assert ids == [
        "D1:1",
        "D1:2",
        "D1:3",
        "D1:4",
        "D1:14",
        "D2:1",
        "D2:2",
        "D2:3",
        "D2:4",
    ]
    first = session.messages[0]
    assert (first.name, first.role) == ("Gina", "assistant")  # speaker_b
    assert session.messages[1].role == "user"  # speaker_a: Jon
    assert first.created_at == datetime(2023, 1, 20, 16, 4, tzinfo=UTC)
    assert session.messages[5].created_at.date().isoformat() == "2023-01-29"
    photo = session.messages[4]
    assert photo.content.endswith(
        "[image: a photography of a man in a suit is performing a dance]"
    )
    assert "upload.wikimedia" not in photo.content


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1:56 pm on 8 May, 2023", datetime(2023, 5, 8, 13, 56, tzinfo=UTC)),
        ("12:09 am on 13 September, 2023", datetime(2023, 9, 13, 0, 9, tzinfo=UTC)),
        ("12:30 PM on 1 Jan 2024", datetime(2024, 1, 1, 12, 30, tzinfo=UTC)),
        ("9:00 am on 31 February, 2023", None),
        ("yesterday", None),
        (20230508, None),
    ],
)
def test_locomo_session_dates(text, expected):
    from ctxledger.pipelines.ingest.readers.locomo import parse_session_date

    assert parse_session_date(text) == expected
