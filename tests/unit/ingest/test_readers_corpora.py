"""The readers against the real external corpora (``/work/shared/corpora``, set A).

The corpora are not part of the repository; a clone without them skips these
tests (set ``CTXLEDGER_CORPORA`` to point elsewhere). Every expected number below
was derived independently of the readers, with ``jq`` over the raw files (the
command is in the comment) or, where the mapping splits messages, with a separate
throw-away script that walks the JSON by the rule stated in the comment.
Origins and licences of the sets: ``/work/shared/corpora/README.md``.
"""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path

import pytest

from ctxledger.pipelines.ingest.drafts import DraftSession, Rejected, SourceFile
from ctxledger.pipelines.ingest.readers import (
    detect_format,
    expected_records,
    read_source,
)

CORPORA = Path(
    os.environ.get(
        "CTXLEDGER_CORPORA", Path(__file__).resolve().parents[4] / "shared/corpora"
    )
)
TRANSCRIPT_SETS = (
    "tau-bench-airline-gpt4o",
    "swe-agent-trajectories",
    "mini-swe-agent-trajectories",
    "openhands-trajectories",
    "toolbench-dfsdt-answers",
    "api-bank-dialogues",
    "pydantic-ai-recorded-tool-conversations",
    "claude-code-session-fixtures",
)


@pytest.fixture(scope="module")
def corpora() -> Path:
    if not CORPORA.is_dir():
        pytest.skip(f"external corpora not present at {CORPORA}")
    return CORPORA


def _files(root: Path, pattern: str) -> list[Path]:
    return sorted(p for p in root.glob(pattern) if p.is_file())


def _read(path: Path, root: Path):
    """Detect, read, and check conservation of one corpus file."""
    source = SourceFile(path=path.relative_to(root).as_posix(), data=path.read_bytes())
    fmt = detect_format(source)
    items = list(read_source(source, fmt))
    sessions = [i for i in items if isinstance(i, DraftSession)]
    rejected = [i for i in items if isinstance(i, Rejected)]
    assert sum(i.records for i in items) == expected_records(source, fmt), path
    return fmt, sessions, rejected


def _read_all(root: Path, pattern: str, fmt: str):
    sessions, rejected = [], []
    files = _files(root, pattern)
    assert files, pattern
    for path in files:
        found, s, r = _read(path, root)
        assert found == fmt, path
        sessions += s
        rejected += r
    return sessions, rejected


def _messages(sessions):
    return [m for s in sessions for m in s.messages]


def _assert_links(sessions, allowed_unlinked: int = 0) -> int:
    """Every tool result points at a call made earlier in its session."""
    unlinked = 0
    for session in sessions:
        calls: set[str] = set()
        for message in session.messages:
            calls.update(c.call_id for c in message.tool_calls)
            if message.role == "tool":
                if message.tool_call_id is None:
                    unlinked += 1
                else:
                    assert message.tool_call_id in calls, message.source_offset
    assert unlinked == allowed_unlinked
    return unlinked


def test_every_transcript_file_conserves_records(corpora):
    for name in TRANSCRIPT_SETS:
        for path in _files(corpora / name, "**/*"):
            if path.name.startswith("LICENSE") or path.suffix == ".md":
                continue
            _read(path, corpora)


def test_tau_bench(corpora):
    sessions, rejected = _read_all(
        corpora / "tau-bench-airline-gpt4o", "*.json", "tau_bench"
    )
    assert rejected == []
    # jq 'length' -> 50 entries, one session each (and one record each).
    assert len(sessions) == 50
    assert sum(s.records for s in sessions) == 50
    messages = _messages(sessions)
    # jq '[.[].traj|length]|add' -> 1384 (as the corpus README says).
    assert len(messages) == 1384
    # jq '[.[].traj[].role]|group_by(.)|map({(.[0]):length})|add'
    # -> assistant 642, user 410, tool 282, system 50.
    assert Counter(m.role for m in messages) == {
        "assistant": 642,
        "user": 410,
        "tool": 282,
        "system": 50,
    }
    # jq '[.[].traj[]|select(.tool_calls)|.tool_calls|length]|add' -> 282.
    assert sum(len(m.tool_calls) for m in messages) == 282
    _assert_links(sessions)
    # jq '[.[]|select(.reward==1)]|length' -> 21.
    assert sum(1 for s in sessions if s.metadata["reward"] == 1) == 21
    assert sessions[6].external_id == "task:6/trial:0"
    assert sessions[6].source_offset == "document/entry:6"


def test_swe_agent(corpora):
    root = corpora / "swe-agent-trajectories"
    sessions, rejected = _read_all(root, "*.traj", "swe_agent")
    assert rejected == []
    # 22 .traj files; for f in *.traj; do jq '.history|length' "$f"; done -> sum 489.
    assert len(sessions) == 22
    messages = _messages(sessions)
    assert len(messages) == 489
    # jq '[.history[]|select(.role=="tool")]|length' summed -> 44, each with one
    # tool_call_ids entry; jq '[.history[]|.tool_calls // []|length]|add' -> 44.
    # Observations recorded as "user" (agents without function calling) are
    # tool results too: a user message right after an assistant one whose
    # message_type, if any, is "observation":
    # jq -s '[.[]|.history as $h|range(1;$h|length)|select($h[.].role=="user"
    #   and $h[.-1].role=="assistant" and (($h[.].message_type//"observation")
    #   =="observation"))]|length' *.traj -> 169 (of 193 user messages).
    assert Counter(m.role for m in messages) == {
        "system": 22,
        "user": 193 - 169,
        "assistant": 230,
        "tool": 44 + 169,
    }
    # What stays "user": each file's task, plus the old-format demonstration.
    users = [m.content for m in messages if m.role == "user"]
    assert sum(u.startswith("We're currently solving") for u in users) == 22
    assert sum(u.startswith("Here is a demonstration") for u in users) == 2
    assert sum(len(m.tool_calls) for m in messages) == 44
    _assert_links(sessions, allowed_unlinked=169)
    by_id = Counter(s.external_id for s in sessions)
    # jq '.replay_config.problem_statement.id' -> set in 6 files.
    assert by_id == {
        None: 16,
        "marshmallow-code__marshmallow-1867": 5,
        "SWE-agent__test-repo-i1": 1,
    }
    # The YAML demo is not a transcript record: no format, and a JSON decode
    # rejection (it is not JSON) rather than a crash.
    demo = root / "str_replace_anthropic_demo.yaml"
    source = SourceFile(path=demo.name, data=demo.read_bytes())
    assert detect_format(source) is None
    [only] = list(read_source(source))
    assert isinstance(only, Rejected) and only.reason_code == "malformed_json"


def test_mini_swe_agent(corpora):
    sessions, rejected = _read_all(
        corpora / "mini-swe-agent-trajectories", "*.traj.json", "mini_swe_agent"
    )
    assert rejected == []
    # jq 'length' -> 22 and 6 messages; no structured tool calls.
    assert sorted(len(s.messages) for s in sessions) == [6, 22]
    messages = _messages(sessions)
    assert all(not m.tool_calls for m in messages)
    # The environment's replies are observations (unlinked tool results):
    # jq -s '[.[]|. as $h|range(1;$h|length)|select($h[.].role=="user" and
    #   $h[.-1].role=="assistant")]|length' *.traj.json -> 12; the task stays
    #   the one user message of each file (jq '[.[]|select(.role=="user")]').
    assert Counter(m.role for m in messages) == {
        "system": 2,
        "user": 2,
        "assistant": 12,
        "tool": 12,
    }
    assert all(
        m.content.startswith("Please solve this issue")
        for m in messages
        if m.role == "user"
    )
    _assert_links(sessions, allowed_unlinked=12)


def test_openhands(corpora):
    root = corpora / "openhands-trajectories"
    sessions, rejected = _read_all(root, "*.json*", "openhands")
    assert rejected == []
    # Messages = events minus bookkeeping (agent_state_changed / null / recall
    # observations, recall / change_agent_state actions):
    # jq -c '.history|[.[]|select((.observation//"")|IN("agent_state_changed",
    #   "null","recall")|not)|select((.action//"")|IN("recall",
    #   "change_agent_state")|not)]|length' output.jsonl files -> 47 68 101 / 8 44;
    # the same filter on the runtime lists -> 4, 10, 6, 8 (file-name order).
    assert [len(s.messages) for s in sessions] == [47, 68, 101, 8, 44, 4, 10, 6, 8]
    messages = _messages(sessions)
    # Non-bookkeeping observations: 22+33+50 + 3+21 + 1+4+0+3 = 137.
    assert sum(m.role == "tool" for m in messages) == 137
    # User messages are only "message" actions of the user, never observations:
    # jq -c '[.history[]|select(.action=="message")|.source]' (runtime lists:
    # '[.[]|...]') -> source "user": 1+1+1 + 0+0 + 1+1+3+1 = 9, plus the two
    # source-less resolver tasks (before the agent acted) = 11.
    assert sum(m.role == "user" for m in messages) == 11
    # Two "error" observations in the multi-swe-bench runs answer no action
    # (OpenHands' report of a malformed tool call: no cause, no metadata).
    _assert_links(sessions, allowed_unlinked=2)
    assert [s.external_id for s in sessions[:3]] == [
        "ponylang__ponyc-4595",
        "ponylang__ponyc-4593",
        "ponylang__ponyc-4588",
    ]
    # gui mode: 4 agent_state_changed + 1 change_agent_state + 3 null = 8 folded.
    assert sessions[6].metadata["n_folded_events"] == 8
    assert all(s.started_at is not None for s in sessions[:3] + sessions[5:])


def test_toolbench(corpora):
    sessions, rejected = _read_all(
        corpora / "toolbench-dfsdt-answers", "*.json", "toolbench"
    )
    # 15 answers; two (G1 69, G3 8) have no train_messages, only a search tree
    # with valid_data false: genuinely no conversation -> no_messages.
    assert sorted((r.reason_code, r.records) for r in rejected) == [
        ("no_messages", 1),
        ("no_messages", 1),
    ]
    assert len(sessions) == 13
    messages = _messages(sessions)
    # jq '(.answer_generation.train_messages // [[]])[-1]|length' summed -> 122.
    assert len(messages) == 122
    # jq '[...[-1][]|select(.role=="function")]|length' summed -> 37; every
    # assistant function_call (50) gets a generated id.
    assert sum(m.role == "tool" for m in messages) == 37
    assert sum(len(m.tool_calls) for m in messages) == 50
    _assert_links(sessions)


def test_api_bank(corpora):
    sessions, rejected = _read_all(
        corpora / "api-bank-dialogues", "*/*.jsonl", "api_bank"
    )
    assert rejected == []
    # 263 files (the README says 262 dialogues; 263 files are there), one session
    # each; for f in */*.jsonl; do grep -c . "$f"; done | paste -sd+ | bc -> 2582.
    assert len(sessions) == 263
    assert sum(s.records for s in sessions) == 2582
    messages = _messages(sessions)
    # jq select(.role=="User") -> 864, "AI" -> 1210, "API" -> 508 (2 messages each).
    assert Counter(m.role for m in messages) == {
        "user": 864,
        "assistant": 1210 + 508,
        "tool": 508,
    }
    _assert_links(sessions)
    assert all(m.tool_status == "ok" for m in messages if m.role == "tool")


def test_pydantic_ai_openai_chat(corpora):
    path = (
        corpora / "pydantic-ai-recorded-tool-conversations/openai_chat_tool_calls.jsonl"
    )
    fmt, sessions, rejected = _read(path, corpora)
    assert fmt == "openai_chat" and rejected == []
    # jq -s 'length' -> 12; jq -s '[.[].request.messages|length]|add' -> 44,
    # plus one response message per line.
    assert len(sessions) == 12
    assert len(_messages(sessions)) == 44 + 12
    _assert_links(sessions)
    assert all(s.external_id for s in sessions)


def test_pydantic_ai_anthropic_messages(corpora):
    path = (
        corpora / "pydantic-ai-recorded-tool-conversations"
        "/anthropic_messages_tool_use.jsonl"
    )
    fmt, sessions, rejected = _read(path, corpora)
    assert fmt == "anthropic_messages" and rejected == []
    assert len(sessions) == 31
    messages = _messages(sessions)
    # Rule walked by a separate script: per line, 1 for a non-empty system prompt,
    # then per message (request messages + response) one draft per *_tool_result
    # / tool_result block plus one per maximal run of other blocks -> 222, of
    # which 67 are tool results (35 tool_result + 32 server/MCP results).
    assert len(messages) == 222
    assert sum(m.role == "tool" for m in messages) == 67
    _assert_links(sessions)
    assert any(m.thinking for m in messages)
    assert sum(m.tool_status == "error" for m in messages) == 2


def test_claude_code(corpora):
    root = corpora / "claude-code-session-fixtures"
    sessions, rejected = [], []
    for pattern in ("*/*.jsonl", "*/*.json"):
        s, r = _read_all(root, pattern, "claude_code")
        sessions += s
        rejected += r
    # Sessions per sessionId: edge_cases.jsonl holds "edge_cases" and one
    # "todowrite_session" line; the other files one session each; the loglines
    # document is one session: 7.
    assert len(sessions) == 7
    # Messages by the Anthropic rule (see above), counted by a separate script:
    # edge_cases 10 + 1, representative 11, session_b 3, todowrite 11,
    # sample_session.jsonl 7, sample_session.json 33 -> 76.
    assert sorted(len(s.messages) for s in sessions) == [1, 3, 7, 10, 11, 11, 33]
    _assert_links(sessions)
    # edge_cases.jsonl is a parser torture test; its 7 bad lines are rejected:
    # line 10 message without content ("contenst"), 11 message is a string,
    # 13 a bare string, 14 an object without type, 15 a number, 16 an array,
    # 18 a content list holding a bare string.
    assert sorted((r.source_offset.split(":")[1], r.reason_code) for r in rejected) == [
        ("10", "missing_field"),
        ("11", "wrong_type"),
        ("13", "wrong_type"),
        ("14", "missing_field"),
        ("15", "wrong_type"),
        ("16", "wrong_type"),
        ("18", "wrong_type"),
    ]
    ids = {s.external_id for s in sessions}
    assert {"edge_cases", "todowrite_session", "test-session-id"} <= ids
