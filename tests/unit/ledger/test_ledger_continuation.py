"""Issue 13: a ledger a model can continue from.

The goal is the first real request (framework templates and demonstrations are
left out), pinned statements are the user's, findings are assistant conclusions
plus tool-result key facts, rejected attempts keep their why, a confirmation the
agent asked for stays pending until the user answers, the next step is the
latest open request and action, and no line is cut mid-word.
"""

from __future__ import annotations

import json

from ctxledger.pipelines.ledger.boilerplate import is_demonstration, request_text
from ctxledger.pipelines.ledger.build import SessionSources, build_session_ledger
from ctxledger.pipelines.ledger.results import output_facts
from ctxledger.pipelines.ledger.text import cut, cut_left, sentences
from ctxledger.schemas.ledger import ArtifactTrailEntry
from ctxledger.schemas.transcript import Message, Session, ToolCall, ToolObservation

SWE_TEMPLATE = """We're currently solving the following issue within our repository. \
Here's the issue text:
ISSUE:
TimeDelta serialization precision
I just found quite strange behaviour of `TimeDelta` field serialization

INSTRUCTIONS:
Now, you're going to solve this issue on your own.
Remember, YOU CAN ONLY ENTER ONE COMMAND AT A TIME. You should always wait for \
feedback after every command.

IMPORTANT TIPS:
1. Always start by trying to replicate the bug that the issues discusses.

(Open file: n/a)
(Current directory: /repo)
bash-$"""

DEMO = """Here is a demonstration of how to correctly accomplish this task.
It is included to show you how to correctly use the interface.
--- DEMONSTRATION ---
We're currently solving the following issue: never use tabs.
--- END OF DEMONSTRATION ---
"""


def _m(turn, role, content="", calls=(), call_id=None, ref=None) -> Message:
    return Message(
        message_id=f"msg_{turn}",
        session_id="ses_x",
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


def _obs(message: Message, tool: str, key_fields: dict | None = None):
    return ToolObservation(
        observation_id=f"obs_{message.turn}",
        message_id=message.message_id,
        session_id="ses_x",
        tenant_id="acme",
        tool_call_id=message.tool_call_id,
        tool_name=tool,
        status="ok",
        key_fields=json.dumps(key_fields or {}),
        artifact_ref=message.artifact_ref or "",
    )


def _ledger(messages, observations=(), outputs=None, source_format="openai_chat"):
    session = Session(
        session_id="ses_x",
        tenant_id="acme",
        source_format=source_format,
        source_file="f",
        source_hash="h",
    )
    sources = SessionSources(session, messages, list(observations), outputs or {})
    from ctxledger.schemas.policy import load_policy

    return build_session_ledger(sources, load_policy(None).ledger).session_entry


def test_request_text_keeps_the_issue_and_drops_template_blocks():
    request = request_text(SWE_TEMPLATE)
    assert "TimeDelta serialization precision" in request
    assert "YOU CAN ONLY ENTER ONE COMMAND" not in request
    assert "Always start by" not in request and "bash-$" not in request
    tagged = (
        "I've uploaded a repository.\n<issue_description>\nponyc segfaults on match\n"
        "</issue_description>\nIMPORTANT: You should ONLY interact with the env."
    )
    assert sentences(request_text(tagged)) == ("ponyc segfaults on match",)
    plain = "Please never deploy on Fridays.\nALWAYS ask first."
    assert request_text(plain) == plain  # no template: the whole message


def test_demonstrations_are_recognised_by_their_fence():
    assert is_demonstration(DEMO)
    assert not is_demonstration(SWE_TEMPLATE)


def test_goal_and_pins_come_from_the_request_not_the_framework():
    system = (
        "SETTING: You are an autonomous programmer.\n"
        "You should always wait for feedback after every command."
    )
    entry = _ledger(
        [
            _m(0, "system", system),
            _m(1, "user", DEMO),
            _m(2, "user", SWE_TEMPLATE),
            _m(3, "assistant", "I will reproduce it.\n```\nls -F\n```"),
        ],
        source_format="swe_agent",
    )
    goal = [g.text for g in entry.sections.goal]
    assert goal[0] == "TimeDelta serialization precision"
    assert all("demonstration" not in g for g in goal)
    pinned = " ".join(p.text for p in entry.sections.pinned_user_statements)
    assert "YOU CAN ONLY" not in pinned and "never use tabs" not in pinned
    assert "wait for feedback" not in pinned
    assert not any("never use tabs" in f.value for f in entry.protected_fields)


def test_findings_failures_facts_and_the_latest_request_and_action():
    call = ToolCall(call_id="c1", tool_name="Bash", arguments='{"command": "pytest"}')
    messages = [
        _m(0, "user", "Create a function to add two numbers."),
        _m(1, "assistant", "Running the tests.", calls=[call]),
        _m(2, "tool", "[tool_result tool=Bash]", call_id="c1", ref="art_1"),
        _m(
            3,
            "assistant",
            "The output shows that subtract returns None. "
            "My first edit did not use the proper indentation.",
        ),
        _m(4, "user", "Thanks! Now add a multiply function too."),
        _m(
            5,
            "assistant",
            "On it.",
            calls=[
                ToolCall(
                    call_id="c2", tool_name="Edit", arguments='{"file_path": "m.py"}'
                )
            ],
        ),
    ]
    output = (
        "Exit code 1\n== FAILURES ==\n"
        "test_sub - AssertionError: expected 5 but got None"
    )
    entry = _ledger(messages, [_obs(messages[2], "Bash")], {"art_1": output})
    text = entry.summary_text
    sections = entry.sections
    assert [f.text for f in sections.findings] == [
        "The output shows that subtract returns None."
    ]
    assert [r.text for r in sections.rejected_options] == [
        "My first edit did not use the proper indentation."
    ]
    assert "AssertionError: expected 5 but got None" in sections.tool_results[0].facts
    assert "exit=1" in sections.tool_results[0].facts
    assert output not in text  # key facts, never the raw output
    steps = [s.text for s in sections.next_steps]
    assert steps == [
        "latest request: Now add a multiply function too.",
        "latest action: Edit file_path=m.py",
    ]


def test_a_confirmation_asked_stays_pending_until_the_user_answers():
    ask = _m(
        2,
        "assistant",
        "Here's the updated payment breakdown:\n- Remaining balance: $55\n"
        "Please confirm if you would like to proceed with this updated payment.",
    )
    before = _ledger([_m(1, "user", "Book me a flight to Seattle on May 20."), ask])
    pending = [a.text for a in before.sections.pending_approvals]
    assert len(pending) == 1 and "$55" in pending[0] and "confirm" in pending[0]
    after = _ledger(
        [
            _m(1, "user", "Book me a flight to Seattle on May 20."),
            ask,
            _m(3, "user", "Yes, I confirm."),
        ]
    )
    assert after.sections.pending_approvals == []


def test_output_facts_are_error_lines_and_exit_codes_only():
    assert output_facts("all good\n345\n") == ""
    assert output_facts(
        "Error: payment amount does not add up, total price is 305"
    ) == ("error: Error: payment amount does not add up, total price is 305")


def test_lines_are_never_cut_mid_word():
    assert cut("alpha beta gamma", 12) == "alpha beta…"
    assert cut_left("create@t8, write(edit 1:1)@t10, delete(rm)@t26", 30) == (
        "… delete(rm)@t26"
    )
    trail = [
        ArtifactTrailEntry(
            trail_id=f"trl_{i}",
            tenant_id="acme",
            session_id="ses_x",
            turn=i,
            message_id=f"msg_{i}",
            tool_name="str_replace_editor",
            operation="write",
            resource="/repo/src/marshmallow/fields.py",
            detail=f"str_replace: error{i}",
            outcome="error",
        )
        for i in range(40)
    ]
    from ctxledger.pipelines.ledger.from_trail import changed_items as _changed

    (artifact,) = _changed([], trail)
    assert len(artifact.change) <= 400
    first = artifact.change.removeprefix("… ")
    assert first.startswith("write(str_replace)@t")  # a whole step, not 'ror,'


def test_a_user_turning_an_option_down_is_a_rejected_option():
    entry = _ledger(
        [
            _m(1, "user", "Move my flight to May 24 and upgrade to business."),
            _m(2, "assistant", "Option 3 costs $1,110. Shall I proceed with it?"),
            _m(3, "user", "Option 3 is close, but it's still above my budget."),
        ]
    )
    assert [r.text for r in entry.sections.rejected_options] == [
        "Option 3 is close, but it's still above my budget."
    ]
