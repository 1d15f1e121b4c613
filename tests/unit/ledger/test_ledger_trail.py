"""The artifact trail: tool calls of every transcript format -> operations."""

from __future__ import annotations

import json

import pytest

from ctxledger.pipelines.ledger.trail import (
    TrailInput,
    TrailState,
    call_ops,
    derive_trail,
    net_changes,
    parse_test_outcome,
    sha256_text,
    shell_ops,
    text_action,
)
from ctxledger.schemas.transcript import Message, ToolCall, ToolObservation

ROOT_TRANSCRIPTS = "tests/fixtures/transcripts"


def _ops(tool: str, args: dict | str, state: TrailState | None = None):
    arguments = args if isinstance(args, str) else json.dumps(args)
    return [
        (op.operation, op.resource, op.detail)
        for op in call_ops(tool, arguments, state or TrailState())
    ]


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("rm -f a.txt b.txt", [("delete", "a.txt"), ("delete", "b.txt")]),
        ("touch new.py", [("create", "new.py")]),
        ("mv old.py new.py", [("delete", "old.py"), ("create", "new.py")]),
        ("sed -i 's/a/b/' src/x.py", [("write", "src/x.py")]),
        ("sed -n '1,5p' src/x.py", [("read", "src/x.py")]),
        ("echo hi > out.txt 2>&1", [("write", "out.txt")]),
        ("cat a.py | grep x >> log.txt", [("read", "a.py"), ("write", "log.txt")]),
        ("cd /repo && rm build.log", [("delete", "/repo/build.log")]),
        ("python -m pytest tests/ -q", [("test", "python -m pytest tests/ -q")]),
        ("npm test", [("test", "npm test")]),
        ("go test ./...", [("test", "go test ./...")]),
        ("git checkout -- a.py", [("write", "a.py")]),
        ("ls -la && grep -r foo .", [("read", "."), ("read", ".")]),
        (
            "grep -n 'def x' src/a.py src/b.py",
            [("read", "src/a.py"), ("read", "src/b.py")],
        ),
        ("find src -name '*.py'", [("read", "src")]),
        (
            "curl -s http://web.example:8000/cgi-bin/file.pl",
            [("read", "http://web.example:8000/cgi-bin/file.pl")],
        ),
        ("python reproduce.py", []),
    ],
)
def test_shell_commands(command, expected):
    ops = shell_ops(command, TrailState())
    assert [(o.operation, o.resource) for o in ops] == expected


def test_heredoc_write_knows_its_content_hash_and_cd_persists():
    state = TrailState()
    ops = shell_ops("cd /w\ncat > app.py << 'EOF'\nprint(1)\nEOF\nrm tmp", state)
    assert [(o.operation, o.resource) for o in ops] == [
        ("write", "/w/app.py"),
        ("delete", "/w/tmp"),
    ]
    assert ops[0].content_hash == sha256_text("print(1)\n")
    assert state.cwd == "/w"


def test_editor_tools_of_each_format():
    assert _ops(
        "str_replace_editor",
        {"command": "str_replace", "path": "/w/a.py", "old_str": "x", "new_str": "y"},
    ) == [("write", "/w/a.py", "str_replace")]
    assert _ops("str_replace_editor", {"command": "view", "path": "/w/a.py"}) == [
        ("read", "/w/a.py", "view")
    ]
    assert _ops("Write", {"file_path": "/p/m.py", "content": "x = 1\n"}) == [
        ("write", "/p/m.py", "Write")
    ]
    assert _ops("Edit", {"file_path": "/p/m.py", "old_string": "a"}) == [
        ("write", "/p/m.py", "Edit")
    ]
    assert _ops("Read", {"file_path": "/p/m.py"}) == [("read", "/p/m.py", "Read")]
    assert _ops("write", {"path": "notes.md", "content": "hi"}) == [
        ("write", "notes.md", "write")
    ]
    assert _ops("Bash", {"command": "rm -rf dist"}) == [("delete", "dist", "rm")]
    assert _ops("TodoWrite", {"todos": []}) == []


def test_swe_agent_editor_edits_the_open_file():
    state = TrailState(cwd="/repo")
    assert _ops("open", {"path": "src/f.py", "line_number": 10}, state) == [
        ("read", "/repo/src/f.py", "open")
    ]
    assert _ops("edit", {"search": "a", "replace": "b"}, state) == [
        ("write", "/repo/src/f.py", "edit")
    ]
    assert _ops("create", {"filename": "t.py"}, state) == [
        ("create", "/repo/t.py", "create")
    ]
    assert _ops("insert", {"text": "x"}, state) == [("write", "/repo/t.py", "insert")]


def test_ipython_cells():
    code = (
        "create_file('/w/LICENSE')\n"
        "with open('/w/LICENSE', 'w') as f:\n    f.write(text)\n"
        "print(open('/w/README.md').read())\n"
        "!rm /w/tmp.txt\n"
    )
    assert _ops("run_ipython", {"code": code}) == [
        ("create", "/w/LICENSE", "create_file"),
        ("write", "/w/LICENSE", "open"),
        ("read", "/w/README.md", "open"),
        ("delete", "/w/tmp.txt", "rm"),
    ]


@pytest.mark.parametrize(
    ("tool", "args", "operation", "resource"),
    [
        ("create_ticket", {"title": "x"}, "create", "api:create_ticket"),
        (
            "update_reservation_flights",
            {"reservation_id": "JG7FMM", "cabin": "economy"},
            "write",
            "api:update_reservation_flights?reservation_id=JG7FMM",
        ),
        ("DeleteAccount", {"token": "t"}, "delete", "api:DeleteAccount"),
        (
            "get_user_details",
            {"user_id": "u1"},
            "read",
            "api:get_user_details?user_id=u1",
        ),
        ("run_tests", {"suite": "smoke"}, "test", "run_tests smoke"),
    ],
)
def test_generic_api_tools_by_verb(tool, args, operation, resource):
    assert [(o, r) for o, r, _ in _ops(tool, args)] == [(operation, resource)]


def test_tools_that_touch_no_artifact():
    for tool in ("calculate", "think", "finish", "submit", "TodoWrite"):
        assert _ops(tool, {"query": "x"}) == []


@pytest.mark.parametrize(
    ("tool", "args", "resource"),
    [
        # Issue 13: list_* / search_* / get_* reads were missing from the trail.
        (
            "search_direct_flight",
            {"origin": "DEN", "destination": "IAH", "date": "2024-05-27"},
            "api:search_direct_flight?date=2024-05-27&destination=IAH&origin=DEN",
        ),
        ("list_all_airports", {}, "api:list_all_airports"),
        ("web_search", {"query": "pony iso"}, "web_search:pony iso"),
        ("Glob", {"pattern": "**/*.py", "path": "/project"}, "/project"),
        ("Grep", {"pattern": "def subtract", "path": "/project"}, "/project"),
        ("find_file", {"file_name": "fields.py", "dir": "src"}, "src"),
        ("web_fetch", {"url": "https://example.com/a"}, "https://example.com/a"),
    ],
)
def test_looking_tools_are_reads(tool, args, resource):
    assert [(o, r) for o, r, _ in _ops(tool, args)] == [("read", resource)]


@pytest.mark.parametrize(
    ("output", "expected"),
    [
        ("collected 24 items\n24 passed in 12.3s", ("passed", "24 passed in 12.3s")),
        (
            "===== 2 failed, 10 passed in 1.2s =====",
            ("failed", "2 failed, 10 passed in 1.2s"),
        ),
        ("Ran 3 tests in 0.01s\n\nOK", ("passed", "ran 3 tests: OK")),
        (
            "Ran 3 tests in 0.01s\n\nFAILED (failures=1)",
            ("failed", "ran 3 tests: FAILED"),
        ),
        ("--- FAIL: TestX (0.00s)\nFAIL", ("failed", "FAIL")),
        ("ok  \tpkg/x\t0.1s", ("passed", "ok")),
        ("compiling...", None),
    ],
)
def test_test_outcomes(output, expected):
    assert parse_test_outcome(output) == expected


def test_text_actions_take_the_last_block():
    assert text_action("I will look.\n```\nls -F\n```") == "ls -F"
    assert text_action("x\n<command>\nopen a.py 10\n</command>") == "open a.py 10"
    assert text_action("no action here") is None


def _m(turn, role, content="", calls=(), call_id=None, ref=None) -> Message:
    return Message(
        message_id=f"msg_{turn}",
        session_id="ses_x",
        tenant_id="acme",
        turn=turn,
        role=role,
        content=content,
        content_hash=f"h{turn}",
        token_count=1,
        tool_calls=list(calls),
        tool_call_id=call_id,
        artifact_ref=ref,
        policy_version="p",
        source_ref="f#1",
    )


def _obs(message: Message, status: str) -> ToolObservation:
    return ToolObservation(
        observation_id=f"obs_{message.turn}",
        message_id=message.message_id,
        session_id="ses_x",
        tenant_id="acme",
        tool_call_id=message.tool_call_id,
        status=status,
        artifact_ref=message.artifact_ref or "art_x",
    )


def test_results_link_to_calls_even_when_call_ids_repeat():
    bash = ToolCall(call_id="c1", tool_name="bash", arguments='{"command": "rm a"}')
    bash2 = ToolCall(call_id="c1", tool_name="bash", arguments='{"command": "pytest"}')
    messages = [
        _m(0, "assistant", calls=[bash]),
        _m(1, "tool", call_id="c1", ref="art_1"),
        _m(2, "assistant", calls=[bash2]),
        _m(3, "tool", call_id="c1", ref="art_2"),
    ]
    trail = derive_trail(
        TrailInput(
            "ses_x",
            "acme",
            "openai_chat",
            messages,
            {messages[1].message_id: _obs(messages[1], "error")},
            {"art_2": "=== 1 failed in 0.1s ==="},
        )
    )
    assert [
        (t.turn, t.operation, t.outcome, t.result_turn, t.artifact_ref) for t in trail
    ] == [
        (0, "delete", "error", 1, "art_1"),
        (2, "test", "failed", 3, "art_2"),
    ]
    assert len({t.trail_id for t in trail}) == 2


def test_text_action_observations_stored_as_tool_messages_are_results():
    """Readers store SWE-agent / mini-swe-agent observations as unlinked
    ``tool`` messages: the raw output (the artifact) is the action's result."""
    outputs = {
        "art_1": "[File: /repo/reproduce.py (1 lines total)]\n"
        "(Current directory: /repo)",
        "art_2": "Your proposed edit has introduced new syntax error(s).",
    }
    messages = [
        _m(0, "assistant", "Create it.\n```\ncreate reproduce.py\n```"),
        _m(1, "tool", "[tool_result tool=unknown]", ref="art_1"),
        _m(2, "assistant", "Edit.\n```\nedit 1:1\nprint(1)\nend_of_edit\n```"),
        _m(3, "tool", "[tool_result tool=unknown]", ref="art_2"),
    ]
    trail = derive_trail(
        TrailInput("ses_x", "acme", "swe_agent", messages, outputs=outputs)
    )
    assert [(t.turn, t.resource, t.outcome, t.result_turn) for t in trail] == [
        (0, "reproduce.py", "unknown", 1),
        (2, "/repo/reproduce.py", "error", 3),
    ]


def test_swe_agent_text_actions_use_the_next_message_and_directory_marks():
    messages = [
        _m(0, "assistant", "Create it.\n```\ncreate reproduce.py\n```"),
        _m(
            1,
            "user",
            "[File: /repo/reproduce.py (1 lines total)]\n(Current directory: /repo)",
        ),
        _m(2, "assistant", "Edit.\n```\nedit 1:1\nprint(1)\nend_of_edit\n```"),
        _m(3, "user", "Your proposed edit has introduced new syntax error(s)."),
        _m(4, "assistant", "Again.\n```\nedit 1:1\nprint(2)\nend_of_edit\n```"),
        _m(5, "user", "File updated."),
        _m(6, "assistant", "Clean up.\n```\nrm reproduce.py\n```"),
        _m(7, "user", ""),
    ]
    trail = derive_trail(TrailInput("ses_x", "acme", "swe_agent", messages))
    assert [(t.turn, t.operation, t.resource, t.outcome, t.source) for t in trail] == [
        (0, "create", "reproduce.py", "unknown", "text_action"),
        (2, "write", "/repo/reproduce.py", "error", "text_action"),
        (4, "write", "/repo/reproduce.py", "unknown", "text_action"),
        (6, "delete", "/repo/reproduce.py", "unknown", "text_action"),
    ]
    assert net_changes(trail) == {
        "reproduce.py": "create",
        "/repo/reproduce.py": "delete",
    }


def test_text_actions_only_for_text_action_formats():
    messages = [_m(0, "assistant", "Run:\n```\nrm -rf /\n```")]
    assert derive_trail(TrailInput("ses_x", "acme", "openai_chat", messages)) == []


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("claude_code_sample_session.jsonl", [("write", "/project/hello.py")]),
        ("claude_code_edge_cases.jsonl", [("write", "/tmp/complex_example.py")]),
        (
            "openhands_runtime_gui_mode.json",
            [
                ("create", "/workspace/todo-app/index.html"),
                ("create", "/workspace/todo-app/app.js"),
            ],
        ),
        (
            "openhands_resolver_output.jsonl",
            [("create", "LICENSE"), ("read", "LICENSE")],
        ),
        (
            "swe_agent_function_calling.traj",
            [
                ("read", "."),  # find_file in the working directory
                ("read", "tests/missing_colon.py"),
                ("write", "tests/missing_colon.py"),
            ],
        ),
        (
            "api_bank_add_agenda.jsonl",
            [
                ("read", "api:GetUserToken"),
                ("create", "api:AddAgenda"),
                ("create", "api:AddAlarm"),
            ],
        ),
    ],
)
def test_fixture_transcripts(load, name, expected):
    sessions = load(__import__("pathlib").Path(ROOT_TRANSCRIPTS) / name)
    ops = []
    for s in sessions:
        trail = derive_trail(
            TrailInput(
                s.session.session_id,
                "acme",
                s.session.source_format,
                s.messages,
                {o.message_id: o for o in s.observations},
                {a.artifact_id: a.content for a in s.artifacts},
            )
        )
        ops.extend((t.operation, t.resource) for t in trail)
    assert ops == expected


def test_full_writes_carry_the_content_hash(load):
    from pathlib import Path

    (session,) = load(Path(ROOT_TRANSCRIPTS) / "claude_code_sample_session.jsonl")
    call = next(
        c for m in session.messages for c in m.tool_calls if c.tool_name == "Write"
    )
    (entry,) = derive_trail(
        TrailInput(session.session.session_id, "acme", "claude_code", session.messages)
    )
    assert entry.content_hash == sha256_text(json.loads(call.arguments)["content"])
