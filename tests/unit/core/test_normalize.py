"""Drafts -> records: ids, tool linking, artifacts, observations, redact failures.

The redactor here is a stand-in (these tests are about record building); the real
engine is exercised in tests/unit/redact and the pipeline tests.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from ctxledger.pipelines.ingest.drafts import (
    DraftMessage,
    DraftSession,
    DraftToolCall,
    SourceFile,
)
from ctxledger.pipelines.ingest.normalize import (
    SourceInfo,
    normalize_session,
    session_id_for,
)
from ctxledger.pipelines.ingest.readers import read_source
from ctxledger.pipelines.ledger.trail import TrailState, call_ops
from ctxledger.pipelines.memory.subjects import subject_for
from ctxledger.schemas import PiiFinding

INFO = SourceInfo(
    tenant_id="acme",
    source_file="tenant=acme/a.jsonl",
    source_hash="f" * 64,
    run_id="run_1",
    policy_version="v1+abc",
    job_version="test",
)


@dataclass
class Masked:
    text: str
    findings: list[PiiFinding] = field(default_factory=list)


def mask_emails(items):
    """Replace the literal 'bob@example.com' and report a finding at its place."""
    out = []
    for name, text in items:
        token = "<EMAIL_ADDRESS:0000>"
        if "bob@example.com" in text:
            start = text.index("bob@example.com")
            text = text.replace("bob@example.com", token)
            out.append(
                Masked(
                    text,
                    [
                        PiiFinding(
                            entity_type="EMAIL_ADDRESS",
                            field=name,
                            start=start,
                            end=start + len(token),
                            score=1.0,
                        )
                    ],
                )
            )
        else:
            out.append(Masked(text))
    return out


def _draft() -> DraftSession:
    return DraftSession(
        external_id="s-1",
        source_format="canonical",
        source_offset="line:1",
        messages=[
            DraftMessage(
                role="user", content="mail bob@example.com", source_offset="1"
            ),
            DraftMessage(
                role="assistant",
                content="",
                tool_calls=[
                    DraftToolCall(
                        call_id="c1",
                        tool_name="lookup",
                        arguments='{"q":"bob@example.com"}',
                    )
                ],
                source_offset="2",
            ),
            DraftMessage(
                role="tool",
                tool_call_id="c1",
                tool_output='{"email": "bob@example.com", "plan": "Pro", "n": 3}',
                tool_status="ok",
                source_offset="3",
            ),
            DraftMessage(
                role="tool",
                tool_call_id="c1",
                tool_output='{"email": "bob@example.com", "plan": "Pro", "n": 3}',
                tool_status="ok",
                source_offset="4",
            ),
        ],
    )


def test_records_are_redacted_linked_and_deterministic():
    built = normalize_session(_draft(), INFO, mask_emails)
    again = normalize_session(_draft(), INFO, mask_emails)
    assert built.messages == again.messages
    assert built.session.session_id == again.session.session_id
    assert built.session.message_count == 4
    user, call, result, _ = built.messages
    assert [m.turn for m in built.messages] == [0, 1, 2, 3]
    assert "bob@example.com" not in user.content
    assert user.pii[0].entity_type == "EMAIL_ADDRESS"
    assert "bob@example.com" not in call.tool_calls[0].arguments
    assert result.tool_call_id == "c1" and result.name == "lookup"
    assert result.artifact_ref and result.artifact_ref.startswith("art_")
    assert "artifact=" + result.artifact_ref in result.content
    # the same output twice is one artifact, two observations
    assert len(built.artifacts) == 1 and len(built.observations) == 2
    artifact = built.artifacts[0]
    assert "bob@example.com" not in artifact.content
    assert artifact.media_type == "application/json"
    observation = built.observations[0]
    assert observation.tool_name == "lookup" and observation.status == "ok"
    assert '"plan":"Pro"' in observation.key_fields
    assert len({m.message_id for m in built.messages}) == 4


def test_a_failing_message_becomes_a_redact_dead_letter_and_the_rest_survive():
    def fragile(items):
        if any("explode" in text for _, text in items):
            raise RuntimeError("boom with payload explode")
        return mask_emails(items)

    draft = _draft()
    bad = DraftMessage(role="user", content="explode", source_offset="9")
    draft = draft.model_copy(update={"messages": [*draft.messages, bad]})
    built = normalize_session(draft, INFO, fragile)
    assert built.messages_in == 5
    assert len(built.messages) == 4
    (letter,) = built.dead_letters
    assert letter.stage == "redact" and letter.reason_code == "redaction_failed"
    assert "explode" not in letter.message
    assert letter.source_offset == "9"


def test_session_ids_are_stable_across_files_only_for_formats_with_global_ids():
    draft = _draft()
    moved = SourceInfo(**{**INFO.__dict__, "source_hash": "e" * 64})
    assert (
        normalize_session(draft, INFO, mask_emails).session.session_id
        == normalize_session(draft, moved, mask_emails).session.session_id
    )
    other = draft.model_copy(update={"source_format": "tau_bench"})
    assert (
        normalize_session(other, INFO, mask_emails).session.session_id
        != normalize_session(other, moved, mask_emails).session.session_id
    )


# --- session identity is scoped by subject ------------------------------------------


def _info(source_file: str, source_hash: str = "f" * 64, **extra) -> SourceInfo:
    return SourceInfo(
        **{
            **INFO.__dict__,
            "source_file": source_file,
            "source_hash": source_hash,
            **extra,
        }
    )


def _canonical_sessions(path: str, *lines: dict) -> list[DraftSession]:
    data = b"".join(json.dumps(line).encode() + b"\n" for line in lines)
    items = list(read_source(SourceFile(path, data), "canonical"))
    assert all(isinstance(i, DraftSession) for i in items), items
    return items


def _session_of(path: str, source_hash: str, *lines: dict):
    (draft,) = _canonical_sessions(path, *lines)
    return normalize_session(draft, _info(path, source_hash), mask_emails).session


def test_two_subjects_reusing_one_session_id_get_two_sessions():
    """Issue 12: Bob must not write into Alice's session by reusing its id."""
    alice = {"session_id": "chat-1", "role": "user", "content": "my number is 1111"}
    bob = {"session_id": "chat-1", "role": "user", "content": "employee number 2222"}
    by_folder = [
        _session_of("tenant=acme/subject=alice/chat.jsonl", "a" * 64, alice),
        _session_of("tenant=acme/subject=bob/chat.jsonl", "b" * 64, bob),
    ]
    by_metadata = [
        _session_of(
            "tenant=acme/x.jsonl",
            "c" * 64,
            {**alice, "metadata": {"subject_id": "alice"}},
        ),
        _session_of(
            "tenant=acme/x.jsonl", "d" * 64, {**bob, "metadata": {"subject_id": "bob"}}
        ),
    ]
    for pair in (by_folder, by_metadata):
        assert pair[0].session_id != pair[1].session_id
        subjects = [subject_for(s.session_id, s.source_file, s.metadata) for s in pair]
        assert subjects == ["alice", "bob"]


def test_a_subjects_session_continues_across_files_and_appends():
    line = {"session_id": "chat-1", "role": "user", "content": "hi"}
    more = {**line, "content": "and more"}
    first = _session_of("tenant=acme/subject=alice/day1.jsonl", "a" * 64, line)
    other_file = _session_of("tenant=acme/subject=alice/day2.jsonl", "b" * 64, more)
    appended = _session_of("tenant=acme/subject=alice/day1.jsonl", "c" * 64, line, more)
    assert first.session_id == other_file.session_id == appended.session_id


def test_without_a_subject_only_the_same_landing_path_continues_a_session():
    line = {"session_id": "chat-1", "role": "user", "content": "hi"}
    more = {**line, "content": "and more"}
    first = _session_of("tenant=acme/a.jsonl", "a" * 64, line)
    appended = _session_of("tenant=acme/a.jsonl", "b" * 64, line, more)
    elsewhere = _session_of("tenant=acme/b.jsonl", "c" * 64, line)
    assert first.session_id == appended.session_id
    assert first.session_id != elsewhere.session_id


def test_the_policy_subject_key_scopes_the_session_id():
    (alice,) = _canonical_sessions(
        "a.jsonl",
        {"session_id": "s", "role": "user", "content": "x", "metadata": {"user": "al"}},
    )
    bob = alice.model_copy(update={"metadata": {"user": "bo"}})
    keyed = _info("a.jsonl", subject_key="user")
    assert session_id_for(alice, keyed) != session_id_for(bob, keyed)
    # with the default key, "user" names no subject: same file, same session
    assert session_id_for(alice, INFO) == session_id_for(bob, INFO)


def test_identical_bytes_under_two_subject_folders_are_two_sessions():
    draft = _draft().model_copy(update={"source_format": "tau_bench"})
    alice = _info("tenant=acme/subject=alice/run.json")
    bob = _info("tenant=acme/subject=bob/run.json")
    assert session_id_for(draft, alice) != session_id_for(draft, bob)


# --- JSON nested in a record is decoded with the same checks ------------------------

NESTED_POISON = '{"path": "a\\udc80.py", "n": 1}'  # the text holds an escape


def test_a_nested_lone_surrogate_escape_keeps_a_tool_output_as_plain_text():
    """The text is valid; decoding it as JSON would make a lone surrogate that the
    observation's key fields carry into the Parquet write (a failed run)."""
    draft = _draft()
    tool = draft.messages[2].model_copy(update={"tool_output": NESTED_POISON})
    draft = draft.model_copy(update={"messages": [*draft.messages[:2], tool]})
    built = normalize_session(draft, INFO, mask_emails)
    (artifact,) = built.artifacts
    assert artifact.media_type == "text/plain"
    for record in (*built.messages, *built.observations, artifact):
        record.model_dump_json().encode("utf-8")


def test_a_nested_lone_surrogate_escape_names_no_trail_resource():
    assert call_ops("write_file", NESTED_POISON, TrailState()) == []
    (op,) = call_ops("write_file", '{"path": "a.py"}', TrailState())
    assert op.resource.endswith("a.py")


def test_two_subjects_sharing_a_session_id_in_one_file_are_split():
    alice = {"session_id": "chat-1", "role": "user", "metadata": {"subject_id": "al"}}
    bob = {"session_id": "chat-1", "role": "user", "metadata": {"subject_id": "bo"}}
    data = b"".join(
        json.dumps(line).encode() + b"\n"
        for line in (
            {**alice, "content": "I am Alice"},
            {**bob, "content": "employee number 2222"},
            {"session_id": "chat-1", "role": "user", "content": "whose line?"},
            {**alice, "content": "still Alice"},
        )
    )
    items = list(read_source(SourceFile("tenant=acme/shared.jsonl", data)))
    sessions = [i for i in items if isinstance(i, DraftSession)]
    (rejected,) = [i for i in items if not isinstance(i, DraftSession)]
    assert rejected.reason_code == "ambiguous_subject" and rejected.raw
    assert rejected.source_offset.startswith("line:3:")
    assert [len(s.messages) for s in sessions] == [2, 1]
    info = _info("tenant=acme/shared.jsonl")
    built = [normalize_session(s, info, mask_emails).session for s in sessions]
    assert built[0].session_id != built[1].session_id
    assert [subject_for(b.session_id, b.source_file, b.metadata) for b in built] == [
        "al",
        "bo",
    ]


def test_a_subject_named_on_the_first_line_only_keeps_one_session():
    lines = [
        {"session_id": "s", "role": "user", "content": "a",
         "metadata": {"subject_id": "al"}},
        {"session_id": "s", "role": "assistant", "content": "b"},
    ]  # fmt: skip
    (session,) = _canonical_sessions("x.jsonl", *lines)
    assert len(session.messages) == 2 and session.metadata == {"subject_id": "al"}


def test_identifier_and_status_keys_survive_the_key_field_limit():
    """A tau-bench reservation has ``user_id`` as its 14th key alphabetically:
    cut at ``KEY_FIELD_LIMIT`` alphabetically, the memory stage never saw it."""
    from ctxledger.pipelines.ingest.normalize import KEY_FIELD_LIMIT, _key_fields

    value = {f"a{i:02d}": i for i in range(KEY_FIELD_LIMIT + 4)}
    value |= {"user_id": "u-1", "status": "confirmed", "bookingId": "B7"}
    facts = _key_fields(value)
    assert facts["user_id"] == "u-1" and facts["status"] == "confirmed"
    assert facts["bookingId"] == "B7"
    assert len(facts["keys"]) == KEY_FIELD_LIMIT
    assert facts["keys"] == sorted(facts["keys"])


def test_a_speaker_name_is_redacted_with_the_session_and_source_ids_kept():
    draft = DraftSession(
        external_id="conv-1",
        source_format="locomo",
        source_offset="document/sample:0",
        messages=[
            DraftMessage(
                role="user",
                name="bob@example.com",
                content="hello from bob@example.com",
                source_id="D1:1",
                source_offset="document/sample:0/session:1/turn:0",
            ),
            DraftMessage(
                role="assistant",
                name="Support",
                content="hi",
                source_offset="document/sample:0/session:1/turn:1",
            ),
        ],
    )
    result = normalize_session(draft, INFO, mask_emails)
    first, second = result.messages
    assert first.name == "<EMAIL_ADDRESS:0000>"
    assert first.source_id == "D1:1" and second.source_id is None
    assert second.name == "Support"
    assert {f.field for f in first.pii} == {"content", "speaker"}
