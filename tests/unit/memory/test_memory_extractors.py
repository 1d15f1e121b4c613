"""Extraction over redacted sessions: the real MiniLM classifier, the planted
40-turn transcript, purposes, tool-result system fields, and the LLM extractor
against a local OpenAI-compatible stub server."""

from __future__ import annotations

import json
import threading
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import numpy as np
import pytest
from memfactory import grant

from ctxledger.pipelines.memory.classify import (
    MiniLMEncoder,
    PrototypeClassifier,
    PurposeClassifier,
)
from ctxledger.pipelines.memory.extract import (
    RuleExtractor,
    SessionContext,
    TransientError,
    extract_session,
)
from ctxledger.pipelines.memory.gate import gate_candidates
from ctxledger.pipelines.memory.llm import LlmExtractor
from ctxledger.pipelines.memory.resolve import resolve
from ctxledger.schemas import Message, Session, ToolCall, ToolObservation, content_hash
from ctxledger.schemas.policy import load_policy

ROOT = Path(__file__).resolve().parents[3]
PLANTED = ROOT / "tests" / "fixtures" / "planted" / "forty_turns.jsonl"
SETTINGS = load_policy(None).memory


@pytest.fixture(scope="module")
def encoder():
    return MiniLMEncoder().load()


def session_of(lines, source_file="tenant=acme/subject=priya/chat.jsonl", meta="{}"):
    session = Session(
        session_id="ses_planted",
        tenant_id="acme",
        source_format="canonical",
        source_file=source_file,
        source_hash="h",
        metadata=meta,
    )
    messages = []
    for line in lines:
        messages.append(
            Message(
                message_id=f"msg_{line['turn']}",
                session_id=session.session_id,
                tenant_id="acme",
                turn=line["turn"],
                role=line["role"],
                content=line["content"] if line["role"] != "tool" else "[tool_result]",
                content_hash="h",
                created_at=datetime.fromisoformat(line["created_at"]),
                token_count=1,
                policy_version="p",
                source_ref=f"{source_file}#line:{line['turn'] + 1}",
            )
        )
    return session, messages


@pytest.fixture(scope="module")
def planted(encoder):
    lines = [json.loads(x) for x in PLANTED.read_text().splitlines() if x.strip()]
    session, messages = session_of(lines)
    ctx = SessionContext.build(session, messages)
    extractor = RuleExtractor(SETTINGS, encoder)
    return ctx, extract_session(ctx, [extractor], PurposeClassifier(SETTINGS, encoder))


def test_planted_rule_and_fact_come_with_provenance(planted):
    ctx, result = planted
    assert ctx.subject_id == "priya"
    by_turn = {c.provenance.turn: c for c in result.candidates}
    rule, shard, correction = by_turn[2], by_turn[19], by_turn[30]
    assert rule.kind == "rule" and rule.slot == "employee_number"
    assert rule.value == "4417" and rule.source == "user_stated"
    assert shard.slot == "affected_shard" and shard.value == "pay-shard-7"
    assert correction.slot == "employee_number" and correction.value == "4471"
    for candidate in (rule, shard, correction):
        message = next(m for m in ctx.messages if m.turn == candidate.provenance.turn)
        span = message.content[
            candidate.provenance.char_start : candidate.provenance.char_end
        ]
        assert span == candidate.text  # verbatim
        assert candidate.purpose == "support"
        assert candidate.provenance.message_id == message.message_id


ISSUE_CORRECTION = (
    "Correction: my employee number is 4471, not 4417. Use 4471 from now on."
)


@pytest.mark.parametrize("turn30", [None, ISSUE_CORRECTION])
def test_untimed_planted_correction_supersedes_by_turn_order(encoder, turn30):
    """Without timestamps every statement of the session gets the run's time:
    turn order, not a conflict, decides that turn 30 replaces turn 2."""
    lines = [json.loads(x) for x in PLANTED.read_text().splitlines() if x.strip()]
    if turn30 is not None:
        lines[30]["content"] = turn30
    session, messages = session_of(lines)
    messages = [m.model_copy(update={"created_at": None}) for m in messages]
    ctx = SessionContext.build(session, messages)
    result = extract_session(
        ctx, [RuleExtractor(SETTINGS, encoder)], PurposeClassifier(SETTINGS, encoder)
    )
    now = datetime(2026, 3, 20, tzinfo=UTC)
    gated = gate_candidates(
        result.candidates,
        [grant(subject=ctx.subject_id, purpose=p) for p in SETTINGS.purpose_names],
        SETTINGS.model_copy(update={"retention": {"user_stated": {"*": 3650}}}),
        now=now,
        policy_version="p",
        run_id="r",
    )
    slot = [m for m in resolve(gated.memories) if m.slot == "employee_number"]
    by_turn = {m.provenance.turn: m for m in slot}
    assert {m.valid_from for m in slot} == {now}  # no time tells them apart
    old, new = by_turn[2], by_turn[30]
    assert (old.value, new.value) == ("4417", "4471")
    assert old.superseded_by == new.memory_id and old.valid_to == now
    assert new.superseded_by is None
    assert all(m.conflict_with is None for m in slot)


def test_questions_commands_and_assistant_restatements_are_not_memories(planted):
    _, result = planted
    turns = {c.provenance.turn for c in result.candidates}
    assert not turns & {9, 17, 28, 34, 40}  # questions, one-off requests
    assert all(
        c.source == "user_stated" for c in result.candidates
    )  # no "it seems you..." in this transcript
    assert result.scanned == 41 and result.failed == []


def test_ids_are_content_hashes_stable_across_runs(planted, encoder):
    ctx, result = planted
    again = extract_session(
        ctx,
        [RuleExtractor(SETTINGS, encoder)],
        PurposeClassifier(SETTINGS, encoder),
    )
    assert [c.memory_id for c in again.candidates] == [
        c.memory_id for c in result.candidates
    ]


def test_classifier_catches_paraphrases_the_rules_miss(encoder):
    classifier = PrototypeClassifier(
        encoder,
        {
            "preference": ("I prefer short answers.", "Please keep replies brief."),
            "other": ("Thanks, that helps.", "Can you check the logs?"),
        },
        threshold=0.45,
        margin=0.05,
        reject="other",
    )
    labels = classifier.classify(["Brief replies suit me best.", "Thanks a lot!"])
    assert labels[0] is not None and labels[0].name == "preference"
    assert labels[1] is None


def test_purpose_keywords_then_prototypes_then_default(encoder):
    purposes = PurposeClassifier(SETTINGS, encoder)
    assert purposes.classify(
        [
            "Please refund the invoice for March.",
            "The incident ticket is still open.",
            "I was charged twice on my credit card last month.",
            "Hello there.",
        ]
    ) == ["billing", "support", "billing", SETTINGS.default_purpose]


def test_purpose_without_model_uses_keywords_and_default():
    purposes = PurposeClassifier(SETTINGS, None)
    assert purposes.classify(["refund please", "good morning"]) == [
        "billing",
        SETTINGS.default_purpose,
    ]


def test_fake_encoder_classifier_is_deterministic():
    table = {"a": [1.0, 0.0], "b": [0.0, 1.0], "x": [0.9, 0.1], "y": [0.5, 0.5]}

    def encode(texts):
        return np.array([table[t] for t in texts], dtype=float)

    clf = PrototypeClassifier(encode, {"A": ["a"], "B": ["b"]}, 0.5, 0.2)
    x, y = clf.classify(["x", "y"])
    assert x.name == "A" and y is None  # y: no margin


def test_assistant_inference_is_model_inferred(encoder):
    lines = [
        {"turn": 0, "role": "user", "content": "Summaries please.",
         "created_at": "2026-03-14T10:00:00+00:00"},
        {"turn": 1, "role": "assistant",
         "content": "Sure. It seems you prefer short answers, so I will be brief.",
         "created_at": "2026-03-14T10:01:00+00:00"},
    ]  # fmt: skip
    session, messages = session_of(lines, source_file="chat.jsonl")
    ctx = SessionContext.build(session, messages)
    result = extract_session(
        ctx, [RuleExtractor(SETTINGS, encoder)], PurposeClassifier(SETTINGS, encoder)
    )
    (guess,) = [c for c in result.candidates if c.source == "model_inferred"]
    assert guess.kind == "preference" and guess.slot == "preference:answers"
    assert guess.text.startswith("It seems you prefer short answers")
    assert ctx.subject_id == f"session:{session.session_id}"


def test_subject_from_metadata_wins_over_path():
    session, messages = session_of(
        [], source_file="tenant=acme/subject=a/x.jsonl", meta='{"subject_id": "b"}'
    )
    assert SessionContext.build(session, messages).subject_id == "b"


def test_tool_results_give_system_records_for_policy_fields():
    session, messages = session_of(
        [{"turn": 0, "role": "tool", "content": "", "created_at":
          "2026-03-14T10:00:00+00:00"}]
    )  # fmt: skip
    observation = ToolObservation(
        observation_id="obs_1",
        message_id=messages[0].message_id,
        session_id=session.session_id,
        tenant_id="acme",
        tool_name="get_account",
        status="ok",
        key_fields=json.dumps(
            {"keys": ["plan", "status"], "plan": "Pro", "status": "ok"}
        ),
        artifact_ref="art_1",
    )
    ctx = SessionContext.build(session, messages, [observation])
    result = extract_session(
        ctx, [RuleExtractor(SETTINGS, None)], PurposeClassifier(SETTINGS, None)
    )
    (record,) = result.candidates
    assert (record.source, record.kind, record.text) == (
        "system_record",
        "account_state",
        "Plan: Pro",
    )
    assert record.purpose == "billing" and record.provenance.json_key == "plan"
    assert record.provenance.field == "tool_output"


def _call_and_result(status, key_fields, arguments='{"user_id": "mia_li_3668"}'):
    """A session: the agent calls get_user_details, the tool answers."""
    at = "2026-03-14T10:00:00+00:00"
    session, (call, result) = session_of(
        [
            {"turn": 0, "role": "assistant", "content": "", "created_at": at},
            {"turn": 1, "role": "tool", "content": "", "created_at": at},
        ]
    )
    call = call.model_copy(
        update={
            "tool_calls": [
                ToolCall(
                    call_id="c1", tool_name="get_user_details", arguments=arguments
                )
            ]
        }
    )
    observation = ToolObservation(
        observation_id="obs_1",
        message_id=result.message_id,
        session_id=session.session_id,
        tenant_id="acme",
        tool_call_id="c1",
        tool_name="get_user_details",
        status=status,
        key_fields=json.dumps(key_fields),
        artifact_ref="art_1",
    )
    ctx = SessionContext.build(session, [call, result], [observation])
    return extract_session(
        ctx, [RuleExtractor(SETTINGS, None)], PurposeClassifier(SETTINGS, None)
    ).candidates


def test_membership_and_accepted_call_arguments_are_system_records():
    """tau-bench: ``membership`` in the result, ``user_id`` in the arguments of
    the call it answered (issue 13: structured tool fields -> system records)."""
    found = _call_and_result(
        "unknown", {"keys": ["email", "membership"], "email": "x@y.z",
                    "membership": "gold"}
    )  # fmt: skip
    by_slot = {c.slot: c for c in found}
    assert set(by_slot) == {"membership", "user_id"}  # email stays in the system
    assert (by_slot["membership"].kind, by_slot["membership"].text) == (
        "account_state",
        "Membership: gold",
    )
    uid = by_slot["user_id"]
    assert (uid.source, uid.kind, uid.value) == (
        "system_record",
        "identity",
        "mia_li_3668",
    )
    assert uid.provenance.field == "tool_arguments"
    assert uid.provenance.turn == 0 and uid.provenance.json_key == "user_id"


@pytest.mark.parametrize(
    ("status", "key_fields"),
    [("error", {"keys": ["x"], "x": 1}), ("unknown", {})],  # failed / "Error: ..."
)
def test_arguments_of_a_failed_call_are_not_records(status, key_fields):
    assert _call_and_result(status, key_fields) == []


def test_reply_to_an_agent_question_and_clauses(encoder):
    """A bare reply fills the attribute the agent asked for; a sentence holding a
    username and a password keeps the username only; a complaint, a one-off
    request and a reservation number are not memories."""
    at = "2026-03-14T10:00:00+00:00"
    lines = [
        (0, "assistant", "Could you please provide your user ID?"),
        (1, "user", "Sure, it's sofia_kim_7287."),
        (2, "assistant", "What is your username and password?"),
        (3, "user", "JohnDoe"),
        (4, "user", "My username is JohnDoe, and my password is pass123."),
        (5, "user", "I'm really unhappy with the service you gave me."),
        (6, "user", "I want to cancel this booking for my trip."),
        (7, "user", "My reservation ID is 1N99U6 for that trip."),
    ]
    session, messages = session_of(
        [{"turn": t, "role": r, "content": c, "created_at": at} for t, r, c in lines]
    )
    ctx = SessionContext.build(session, messages)
    result = extract_session(
        ctx, [RuleExtractor(SETTINGS, encoder)], PurposeClassifier(SETTINGS, encoder)
    )
    got = {(c.provenance.turn, c.slot, c.value) for c in result.candidates}
    assert got == {(1, "user_id", "sofia_kim_7287"), (4, "username", "JohnDoe")}
    (clause,) = [c for c in result.candidates if c.provenance.turn == 4]
    content = messages[4].content
    assert content[clause.provenance.char_start : clause.provenance.char_end] == (
        "My username is JohnDoe"
    )


class _Stub(BaseHTTPRequestHandler):
    replies: list = []
    seen: list = []

    def do_POST(self):  # noqa: N802 - http.server API
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        _Stub.seen.append(body)
        status, payload = _Stub.replies.pop(0)
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


@pytest.fixture()
def stub():
    server = HTTPServer(("127.0.0.1", 0), _Stub)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    _Stub.replies, _Stub.seen = [], []
    yield f"http://127.0.0.1:{server.server_port}/v1"
    server.shutdown()


def _chat(memories):
    return {"choices": [{"message": {"content": json.dumps({"memories": memories})}}]}


def test_llm_extractor_keeps_only_verbatim_spans(stub):
    text = "My plan is Pro. Also I like tea."
    session, messages = session_of(
        [{"turn": 0, "role": "user", "content": text,
          "created_at": "2026-03-14T10:00:00+00:00"}]
    )  # fmt: skip
    _Stub.replies = [
        (
            200,
            _chat(
                [
                    {"text": "I like tea.", "kind": "preference", "slot": "Drink",
                     "value": "tea"},
                    {"text": "The user loves coffee.", "kind": "preference"},
                ]
            ),
        )
    ]  # fmt: skip
    ctx = SessionContext.build(session, messages)
    result = extract_session(
        ctx, [LlmExtractor(stub, model="stub-1")], PurposeClassifier(SETTINGS, None)
    )
    verified, guessed = result.candidates
    assert verified.text == "I like tea." and verified.reject_reason is None
    assert text[verified.provenance.char_start : verified.provenance.char_end] == (
        "I like tea."
    )
    assert verified.slot == "drink" and verified.extractor == "llm:stub-1"
    assert guessed.reject_reason == "unverified_span" and guessed.text == ""
    sent = _Stub.seen[0]["messages"][1]["content"]
    assert text in sent and sent.startswith("role: user")


def test_llm_errors_transient_raise_terminal_dead_letter(stub):
    session, messages = session_of(
        [{"turn": 0, "role": "user", "content": "I prefer tea.",
          "created_at": "2026-03-14T10:00:00+00:00"}]
    )  # fmt: skip
    ctx = SessionContext.build(session, messages)
    extractor = LlmExtractor(stub)
    _Stub.replies = [(503, {"error": "busy"})]
    with pytest.raises(TransientError):
        extract_session(ctx, [extractor], PurposeClassifier(SETTINGS, None))
    _Stub.replies = [(200, {"choices": [{"message": {"content": "not json"}}]})]
    result = extract_session(ctx, [extractor], PurposeClassifier(SETTINGS, None))
    assert result.scanned == 0 and result.candidates == []
    (failed,) = result.failed
    assert failed[1] == "memory_extraction_failed"


def test_memory_id_changes_with_provenance():
    from ctxledger.pipelines.memory.extract import memory_id_for
    from ctxledger.schemas.memory import Provenance

    one = memory_id_for("t", "s", "p", "fact", "user_stated", "x", Provenance(turn=1))
    two = memory_id_for("t", "s", "p", "fact", "user_stated", "x", Provenance(turn=2))
    assert one != two and one.startswith("mem_")
    assert content_hash("x") == content_hash("x")


CONTACT = "Great. Please do not email me, call <PHONE_NUMBER:ab12cd34> instead."


def test_a_contact_preference_is_filed_under_every_contacting_purpose(encoder):
    """The sample's "do not email me, call ..." was filed under ``billing``
    only (its message is nearest the billing prototypes), so a ``support``
    lookup missed it: a contact preference binds every purpose that contacts
    the subject (``contacts_subject``), and the gate stores each."""
    purposes = PurposeClassifier(SETTINGS, encoder)
    assert purposes.classify([CONTACT]) == ["billing"]  # the message alone
    assert set(purposes.contact_purposes) == {"support", "billing"}
    lines = [{"turn": 0, "role": "user", "content": CONTACT,
              "created_at": "2026-03-02T09:20:00+00:00"}]  # fmt: skip
    session, messages = session_of(lines)
    ctx = SessionContext.build(session, messages)
    result = extract_session(ctx, [RuleExtractor(SETTINGS, encoder)], purposes)
    assert {(c.purpose, c.kind, c.text) for c in result.candidates} == {
        ("support", "rule", CONTACT[len("Great. ") :]),
        ("billing", "rule", CONTACT[len("Great. ") :]),
    }
    assert len({c.memory_id for c in result.candidates}) == 2
    gated = gate_candidates(
        result.candidates,
        [grant(subject=ctx.subject_id, purpose=p) for p in SETTINGS.purpose_names],
        SETTINGS,
        now=datetime(2026, 3, 3, tzinfo=UTC),
        policy_version="p",
        run_id="r",
    )
    assert {m.purpose for m in gated.memories} == {"support", "billing"}


def test_without_contacting_purposes_the_message_purpose_stays(encoder):
    settings = SETTINGS.model_copy(
        update={
            "purposes": tuple(
                p.model_copy(update={"contacts_subject": False})
                for p in SETTINGS.purposes
            )
        }
    )
    lines = [{"turn": 0, "role": "user", "content": CONTACT,
              "created_at": "2026-03-02T09:20:00+00:00"}]  # fmt: skip
    session, messages = session_of(lines)
    ctx = SessionContext.build(session, messages)
    result = extract_session(
        ctx, [RuleExtractor(settings, encoder)], PurposeClassifier(settings, encoder)
    )
    assert [c.purpose for c in result.candidates] == ["billing"]


def test_code_and_log_lines_in_user_turns_are_never_embedded():
    """Only sentences with a memory cue reach the kind classifier."""
    sent: list[str] = []

    def encode(texts):
        sent.extend(texts)
        return np.tile(np.eye(1, 8, dtype=np.float32), (len(texts), 1))

    lines = [{"turn": 0, "role": "user", "created_at": "2026-03-02T09:20:00+00:00",
              "content": "Requirement already satisfied: six in /usr/lib (1.16). "
                         "33:    version = m.group(1)\n"
                         "I appreciate that, but the plan is unclear. "
                         "Brief replies suit me best."}]  # fmt: skip
    session, messages = session_of(lines)
    ctx = SessionContext.build(session, messages)
    extractor = RuleExtractor(SETTINGS, encode)
    prototypes = set(extractor.kinds._texts)
    result = extract_session(ctx, [extractor], PurposeClassifier(SETTINGS, None))
    assert set(sent) - prototypes == {"Brief replies suit me best."}
    assert result.classified == 1


def test_tool_results_are_never_embedded_for_their_purpose():
    """A tool message's content is a stub: its purpose comes from keywords in
    its tool's name, else the default; the model never reads it."""
    sent: list[str] = []

    def encode(texts):
        sent.extend(texts)
        return np.tile(np.eye(1, 8, dtype=np.float32), (len(texts), 1))

    session, messages = session_of(
        [{"turn": 0, "role": "tool", "content": "", "created_at":
          "2026-03-14T10:00:00+00:00"}]
    )  # fmt: skip
    observation = ToolObservation(
        observation_id="obs_1",
        message_id=messages[0].message_id,
        session_id=session.session_id,
        tenant_id="acme",
        tool_name="get_refund_status",
        status="ok",
        key_fields=json.dumps({"membership": "gold"}),
        artifact_ref="art_1",
    )
    ctx = SessionContext.build(session, messages, [observation])
    purposes = PurposeClassifier(SETTINGS, encode)
    result = extract_session(ctx, [RuleExtractor(SETTINGS, encode)], purposes)
    (record,) = result.candidates
    assert record.text == "Membership: gold" and record.purpose == "billing"
    assert sent == [] and result.purpose_texts == 0
