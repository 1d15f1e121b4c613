"""The goal is the first real request; pinned statements are listed once.

Cases modelled on the bundled support chat (``sample/landing/.../support-chat.jsonl``,
written for this project, redacted as the nightly stores it), on tau-bench
(sierra-research/tau-bench, MIT) and on API-Bank (AlibabaResearch/DAMO-ConvAI,
Apache-2.0) first user turns, shortened.
"""

from __future__ import annotations

import json

import pytest

from ctxledger.pipelines.ledger.build import SessionSources, build_session_ledger
from ctxledger.pipelines.ledger.goal import goal_sentences
from ctxledger.pipelines.ledger.text import sentences
from ctxledger.schemas.policy import load_policy
from ctxledger.schemas.transcript import Message, Session, ToolCall, ToolObservation

IDENTITY = (
    "Hi, I'm <PERSON:6fb1125c>. Any ticket you open goes under my employee number "
    "4417. My email is <EMAIL_ADDRESS:1507fe94>."
)
TASK = "I'll open ticket T-9921 for the duplicate charge of $42.50 on 2026-02-27."


def _m(turn, role, content="", calls=(), call_id=None, ref=None) -> Message:
    return Message(
        message_id=f"msg_{turn}",
        session_id="ses_g",
        tenant_id="acme",
        turn=turn,
        role=role,
        content=content,
        content_hash=f"h{turn}",
        token_count=len(content.split()) + 1,
        tool_calls=list(calls),
        tool_call_id=call_id,
        artifact_ref=ref,
        policy_version="p",
        source_ref="f#1",
    )


def _obs(message: Message, tool: str, key_fields: dict) -> ToolObservation:
    return ToolObservation(
        observation_id=f"obs_{message.turn}",
        message_id=message.message_id,
        session_id="ses_g",
        tenant_id="acme",
        tool_call_id=message.tool_call_id,
        tool_name=tool,
        status="ok",
        key_fields=json.dumps(key_fields),
        artifact_ref=message.artifact_ref or "",
    )


def _ledger(messages, observations=()):
    session = Session(
        session_id="ses_g",
        tenant_id="acme",
        source_format="openai_chat",
        source_file="f",
        source_hash="h",
    )
    sources = SessionSources(session, messages, list(observations), {})
    return build_session_ledger(sources, load_policy(None).ledger).session_entry


def _call(call_id: str, tool: str, **args) -> ToolCall:
    return ToolCall(call_id=call_id, tool_name=tool, arguments=json.dumps(args))


def _support_chat() -> tuple[list[Message], list[ToolObservation]]:
    lookup = _call("c1", "lookup_account", email="<EMAIL_ADDRESS:1507fe94>")
    result = _m(3, "tool", '{"account": "A-123", "plan": "Pro"}', call_id="c1")
    result = result.model_copy(update={"artifact_ref": "art_1"})
    messages = [
        _m(0, "system", "You are the Acme billing support assistant."),
        _m(1, "user", IDENTITY),
        _m(
            2, "assistant", "Thanks <PERSON:3ade5c18>. Let me look up your account."
        ).model_copy(update={"tool_calls": [lookup]}),
        result,
        _m(4, "assistant", f"Your account A-123 is on the Pro plan. {TASK}"),
        _m(5, "user", "Great. Please do not email me, call <PHONE:a1697570> instead."),
    ]
    observation = _obs(result, "lookup_account", {"account": "A-123", "plan": "Pro"})
    return messages, [observation]


def test_identity_lines_are_pinned_once_and_the_task_is_the_goal():
    messages, observations = _support_chat()
    entry = _ledger(messages, observations)
    text = entry.summary_text
    # No user sentence asks for anything: the task the assistant took on is
    # the goal, marked as the assistant's.
    assert [(g.turn, g.text) for g in entry.sections.goal] == [
        (4, "assistant: " + TASK)
    ]
    assert "see pinned user statement" not in text
    pinned = [p.text for p in entry.sections.pinned_user_statements]
    assert "Any ticket you open goes under my employee number 4417." in pinned
    assert "Please do not email me, call <PHONE:a1697570> instead." in pinned
    for statement in pinned:
        assert text.count(statement) == 1, statement


def test_a_later_user_request_replaces_the_assistant_stated_goal():
    messages, observations = _support_chat()
    ask = _m(6, "user", "Can you also refund the $42.50 to my card?")
    entry = _ledger([*messages, ask], observations)
    assert [(g.turn, g.text) for g in entry.sections.goal] == [(6, ask.content)]


@pytest.mark.parametrize(
    ("said", "goal"),
    [
        # a greeting is left out of the line, not the request with it
        (
            ["Hi, I need to change the passenger name on a flight reservation."],
            ["I need to change the passenger name on a flight reservation."],
        ),
        # identity and fact lines that ask nothing are pinned, not the goal
        (["I'm Dana Whitfield.", "My user ID is omar_rossi_1241."], []),
        (["Sure, my user ID is anya_garcia_5901 and the reservation is 3RK2T9."], []),
        # a standing rule is pinned, even phrased as an ask
        (["Please do not email me, call 415-555-0172 instead."], []),
        # a request naming an id or a date is the goal
        (
            ["I need to cancel my flights under reservation ID SI5UKW."],
            ["I need to cancel my flights under reservation ID SI5UKW."],
        ),
        (
            ["Book me a flight to Seattle on May 20."],
            ["Book me a flight to Seattle on May 20."],
        ),
        # the opening and the first ask when the ask comes later
        (
            [
                "The CTF challenge is a crypto problem named BabyEncryption.",
                "It contains crucial information about the delivery.",
                "Do you think you can decrypt it?",
            ],
            [
                "The CTF challenge is a crypto problem named BabyEncryption.",
                "Do you think you can decrypt it?",
            ],
        ),
        # a closing asks nothing
        (["No, thank you."], []),
    ],
)
def test_goal_sentences(said, goal):
    assert [shown for _, shown in goal_sentences(said)] == goal


def test_a_request_with_an_id_is_the_goal_written_once_not_pinned():
    said = "Hi! I need to cancel my flights under reservation ID SI5UKW."
    entry = _ledger([_m(1, "user", said + " Can you help me with that?")])
    goal = [g.text for g in entry.sections.goal]
    assert goal == [
        "I need to cancel my flights under reservation ID SI5UKW.",
        "Can you help me with that?",
    ]
    assert entry.sections.pinned_user_statements == []
    assert entry.summary_text.count("SI5UKW") == 1


def test_a_closing_is_not_the_latest_request():
    entry = _ledger(
        [
            _m(1, "user", "Can you add a meeting for me on March 3rd at 2pm?"),
            _m(2, "assistant", "The meeting has been added successfully."),
            _m(3, "user", "No, thank you."),
        ]
    )
    assert not [s for s in entry.sections.next_steps if "latest request" in s.text]


def test_titles_and_times_do_not_end_a_sentence():
    assert sentences(
        "Can you cancel my appointment with Dr. Davis on April 10th? "
        "Delete my alarm at 7:00 a.m. on March 16th. No. I said so."
    ) == (
        "Can you cancel my appointment with Dr. Davis on April 10th?",
        "Delete my alarm at 7:00 a.m. on March 16th.",
        "No.",
        "I said so.",
    )


def test_sources_read_leaves_out_api_reads_the_tool_results_repeat():
    get = _call("c1", "get_reservation_details", reservation_id="SE9KEL")
    search = _call("c2", "search_direct_flight", origin="JFK", destination="ORD")
    found = _m(3, "tool", "[]", call_id="c2", ref="art_2")
    got = _m(5, "tool", "{}", call_id="c1", ref="art_1")
    messages = [
        _m(1, "user", "Can you find a flight and check my reservation?"),
        _m(2, "assistant", "Searching.", calls=[search]),
        found,
        _m(4, "assistant", "Looking it up.", calls=[get]),
        got,
    ]
    observations = [
        _obs(got, "get_reservation_details", {"reservation_id": "SE9KEL"}),
        _obs(found, "search_direct_flight", {}),
    ]
    entry = _ledger(messages, observations)
    reads = [r.text for r in entry.sections.sources_read]
    assert "api:get_reservation_details?reservation_id=SE9KEL" in reads  # stored
    text = entry.summary_text
    line = text.split("## Sources read\n", 1)[1].split("\n", 1)[0]
    # shown once, under "Tool results" (reservation_id=SE9KEL)
    assert "get_reservation_details" not in line
    assert "reservation_id=SE9KEL" in text
    # the search's arguments are said nowhere else: its read stays
    assert "api:search_direct_flight?" in line
