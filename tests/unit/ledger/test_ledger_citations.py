"""Issue 13, item 5: the ledger keeps the supporting source of its findings.

A finding names the tool results it rests on (call and argument, and the output
lines holding the values it cites), a lead-in keeps the list it announces, the
latest action says what it came to, and a merged window cites what a build
from raw cites.
"""

from __future__ import annotations

from ctxledger.pipelines.ledger.build import SessionSources, build_session_ledger
from ctxledger.pipelines.ledger.citations import Read, cite, cut_middle, tokens_of
from ctxledger.pipelines.ledger.findings import (
    add_finding,
    assistant_kind,
    is_echo,
    with_lists,
)
from ctxledger.pipelines.ledger.next_steps import call_text
from ctxledger.pipelines.ledger.results import output_facts, short_ref
from ctxledger.schemas.ledger import SectionItem
from ctxledger.schemas.policy import load_policy
from ctxledger.schemas.transcript import Session, ToolCall
from tests.unit.ledger.test_ledger_continuation import _ledger, _m, _obs


def _read(position, turn, action, output, typed=False):
    return Read(position, turn, action, output, typed)


def test_distinctive_tokens_are_ids_numbers_paths_and_quoted_names():
    tokens = tokens_of(
        "The `idseqsingle` rule in src/parser.c on line 692 sets AST_FLAG_IN_PARENS "
        "and costs $1,000 for reservation SE9KEL, a small step."
    )
    assert {"idseqsingle", "src/parser.c", "692", "ast_flag_in_parens"} <= set(tokens)
    assert {"1000", "se9kel"} <= set(tokens)
    assert "small" not in tokens and "rule" not in tokens and "line" not in tokens


def test_a_finding_cites_the_older_read_that_holds_its_value():
    reads = [
        _read(1, 3, "cat config.yaml", "name: api\nretries: 7\ntimeout_ms: 4500"),
        _read(3, 5, "ls", "a.py\nb.py"),
    ]
    note = cite("The client gives up after timeout_ms 4500.", reads, 4, True)
    assert note == ' [source: t3 cat config.yaml -> "timeout_ms: 4500"]'
    # Without a token, the turn reads the result right above it: its last
    # line when short.
    assert cite("That looks right.", reads, 4, True) == ' [source: t5 ls -> "b.py"]'
    assert cite("That looks right.", reads, 4, False) == ""
    # Out of reach (more than RECENT_MESSAGES back): no source.
    assert cite("timeout_ms is 4500.", reads, 40, False) == ""


def test_a_token_every_read_holds_does_not_pick_a_source():
    reads = [
        _read(
            i, i, f"get_reservation_details reservation_id=R{i}X", f"2024-05-17 R{i}X"
        )
        for i in range(1, 5)
    ]
    note = cite("Reservation R2X flies on 2024-05-17.", reads, 6, False)
    assert note == " [source: t2 get_reservation_details reservation_id=R2X]"


def test_structured_output_is_named_never_quoted_and_typed_results_are_short():
    reads = [_read(1, 2, "get_user user_id=u1", '{"tier": "gold", "id": "ZX91"}', True)]
    assert cite("The user ZX91 is gold.", reads, 2, False) == " [source: t2 get_user]"
    # The result right above, typed under "Tool results": the turn says it.
    assert cite("The user is gold.", reads, 2, True) == ""


def test_a_finding_with_an_id_the_user_did_not_say_is_not_an_echo():
    user = ["Please open a ticket under employee number 4417 for the failover."]
    assert is_echo("Noted: a ticket under employee number 4417 for the failover.", user)
    assert not is_echo(
        "Ticket INC-5512 is open under employee number 4417 for the failover.", user
    )


def test_a_lead_in_carries_its_list_unless_the_turn_concludes():
    content = (
        "Here are the flights:\n\n1. **HAT229**: $112\n   - 1 stop\n2. HAT118: $80\n\n"
        "Which one?"
    )
    assert with_lists(["Here are the flights:"], content, 400) == [
        "Here are the flights: » 1. HAT229: $112; 1 stop; 2. HAT118: $80"
    ]
    found = ["Here are the flights:", "HAT118 is the cheapest one at $80."]
    assert with_lists(found, content, 400) == ["HAT118 is the cheapest one at $80."]


def test_a_failure_cue_that_is_over_is_a_finding():
    assert (
        assistant_kind("The script ran successfully and the syntax error is resolved.")
        == "finding"
    )
    assert assistant_kind("The edit did not apply successfully.") == "failed"
    assert assistant_kind("The edit introduced a syntax error.") == "failed"


def test_viewer_lines_are_not_errors_and_calls_keep_their_target():
    listing = "[File: setup.py (60 lines total)]\n36:    raise RuntimeError('x')\n"
    assert output_facts(listing) == ""
    error = "Traceback\nRuntimeError: boom\n"
    assert output_facts(error) == "error: RuntimeError: boom"
    edit = (
        "ERRORS:\n- E999 SyntaxError: unmatched ']'\nYour changes have NOT been "
        "applied.\nDO NOT re-run the same failed edit command. Running it again "
        "will lead to the same error.\n"
    )
    assert output_facts(edit) == "error: - E999 SyntaxError: unmatched ']'"
    view = ToolCall(
        call_id="c",
        tool_name="str_replace_editor",
        arguments='{"command": "view", "path": "/w/parser.c"}',
    )
    assert call_text(view) == "str_replace_editor view /w/parser.c"
    long_call = "curl -X POST -F a=1 http://host:8000/cgi-bin/file.pl?/flag"
    short = cut_middle(long_call, 40)
    assert len(short) <= 42 and " … " in short
    assert short.startswith("curl -X POST") and short.endswith("/file.pl?/flag")
    assert short_ref("art_" + "0123456789ab" * 2 + "cdef0123") == "art_0123456789ab"
    assert short_ref("art_1") == "art_1"


def _text_action_session():
    """A SWE-agent style run: the finding at turn 8 cites a value read at
    turn 3, two results before it."""
    return [
        _m(0, "system", "You are an agent."),
        _m(1, "user", "Fix the slow client: requests time out."),
        _m(2, "assistant", "Let me read the config.\n```\ncat config.yaml\n```"),
        _m(3, "user", "retries: 7\ntimeout_ms: 4500\n(Open file: n/a)\nbash-$"),
        _m(4, "assistant", "Now the tests.\n```\npython -m pytest -q\n```"),
        _m(5, "user", "3 passed in 0.2s\n(Open file: n/a)\nbash-$"),
        _m(6, "assistant", "Let me run the client.\n```\npython client.py\n```"),
        _m(7, "user", "timed out after 4.5s\n(Open file: n/a)\nbash-$"),
        _m(
            8,
            "assistant",
            "The client gives up because timeout_ms is 4500 in the config. "
            "Let me raise it.\n```\nedit 2:2\ntimeout_ms: 9000\nend_of_edit\n```",
        ),
    ]


def test_findings_name_their_source_and_the_latest_action_its_outcome():
    entry = _ledger(_text_action_session(), source_format="swe_agent")
    findings = [f.text for f in entry.sections.findings]
    assert (
        "The client gives up because timeout_ms is 4500 in the config. [source: t3 "
        'cat config.yaml -> "timeout_ms: 4500"]'
    ) in findings
    cut = _ledger(_text_action_session()[:8], source_format="swe_agent")
    steps = [s.text for s in cut.sections.next_steps]
    assert 'latest action: python client.py -> "timed out after 4.5s"' in steps


def test_a_merged_window_cites_what_a_build_from_raw_cites():
    messages = _text_action_session()
    session = Session(
        session_id="ses_x",
        tenant_id="acme",
        source_format="swe_agent",
        source_file="f",
        source_hash="h",
    )
    sources = SessionSources(session, messages, [], {})
    settings = load_policy(None).ledger.model_copy(update={"window_turns": 4})
    built = build_session_ledger(sources, settings)
    last = built.window_entries[-1]
    assert last.roll_depth > 0  # merged, not rebuilt
    assert last.sections.findings == built.session_entry.sections.findings
    assert last.sections.next_steps == built.session_entry.sections.next_steps
    assert "[source: t3 cat config.yaml" in last.summary_text


def test_tool_observations_feed_the_source_of_function_calling_runs():
    call = ToolCall(call_id="c1", tool_name="bash", arguments='{"command": "wc -l a"}')
    messages = [
        _m(0, "user", "How long is the file a?"),
        _m(1, "assistant", "Counting.", calls=[call]),
        _m(2, "tool", "[tool_result tool=bash]", call_id="c1", ref="art_1"),
        _m(3, "assistant", "The file has 1234 lines in total."),
    ]
    entry = _ledger(messages, [_obs(messages[2], "bash")], {"art_1": "1234 a\n"})
    (finding,) = [f.text for f in entry.sections.findings]
    assert finding.endswith('[source: t2 bash wc -l a -> "1234 a"]')


def test_a_finding_that_holds_an_earlier_one_and_says_more_is_kept():
    def item(turn, text):
        return SectionItem(text=text, turn=turn, source_message_id=f"m{turn}")

    found = [item(36, "The fastest trip from Denver to Houston on May 27 is: » HAT229")]
    add_finding(found, item(38, "The fastest trip from Denver to Houston on May 27."))
    assert len(found) == 1  # says nothing new
    longer = (
        "Your reservation now has the fastest trip from Denver to Houston on May "
        "27, upgraded to business class and paid with the credit card on file."
    )
    add_finding(found, item(60, longer))
    add_finding(found, item(62, "The fastest trip from Denver to Houston is HAT118."))
    assert [f.turn for f in found] == [36, 60, 62]
    # A user's request repeated as a lead-in is judged by its list.
    assert with_lists(["The fastest trip is:"], "The fastest trip is:\n", 400) == []
