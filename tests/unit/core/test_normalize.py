"""Drafts -> records: ids, tool linking, artifacts, observations, redact failures.

The redactor here is a stand-in (these tests are about record building); the real
engine is exercised in tests/unit/redact and the pipeline tests.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pipelines.ingest.drafts import DraftMessage, DraftSession, DraftToolCall
from pipelines.ingest.normalize import SourceInfo, normalize_session
from schemas import PiiFinding

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
