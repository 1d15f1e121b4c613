"""Ledger entries: anchored sections, windows and merges, rebuild rules, ids."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from ctxledger.pipelines.ledger.build import SessionSources, build_session_ledger
from ctxledger.pipelines.ledger.protected import check_fields, checksum
from ctxledger.pipelines.ledger.verify import reverify_entry
from ctxledger.schemas.ledger import LedgerEntry
from ctxledger.schemas.transcript import Message

NOW = datetime(2026, 3, 15, tzinfo=UTC)


@pytest.fixture(scope="module")
def ledger(planted_sources, settings):
    return build_session_ledger(planted_sources, settings, created_at=NOW)


def _replace(sources: SessionSources, turn: int, old: str, new: str) -> SessionSources:
    messages = []
    for m in sources.messages:
        if m.turn == turn:
            content = m.content.replace(old, new)
            m = m.model_copy(update={"content": content, "content_hash": f"x{turn}"})
            m = m.model_copy(update={"message_id": f"msg_changed_{turn}"})
        messages.append(m)
    return SessionSources(
        sources.session, messages, sources.observations, sources.outputs
    )


def test_planted_summary_carries_both_planted_facts(ledger):
    entry = ledger.session_entry
    assert "4417" in entry.summary_text and "pay-shard-7" in entry.summary_text
    names = {f.canonical for f in entry.protected_fields}
    assert {"identifier:employee_number:4417", "identifier:shard:pay-shard-7"} <= names
    assert entry.verified and entry.missing_fields == [] and entry.altered_fields == []
    assert entry.protected_checksum == checksum(entry.protected_fields)


def test_every_fixed_section_is_rendered_and_filled(ledger):
    text = ledger.session_entry.summary_text
    for title in (
        "Goal",
        "Decisions",
        "Rejected options",
        "Open questions",
        "Pending approvals",
        "Changed artifacts",
        "Test status",
        "Next steps",
        "Pinned user statements",
        "Tool results",
        "Protected facts",
    ):
        assert f"## {title}\n" in text
    sections = ledger.session_entry.sections
    assert sections.goal[0].turn == 1
    assert [q.turn for q in sections.open_questions] == [40]
    assert [r.turn for r in sections.rejected_options] == [32]
    assert [a.turn for a in sections.pending_approvals] == [24]
    # Cue sentences, then the latest open request and the latest action.
    assert [(s.turn, s.text.split(": ", 1)[0]) for s in sections.next_steps][1:] == [
        (40, "latest request"),
        (35, "latest action"),
    ]
    assert sections.next_steps[0].turn == 38
    assert "passed (24 passed in 12.3s)" in sections.test_status[0].text
    assert [a.resource for a in sections.changed_artifacts] == ["api:create_ticket"]


def test_pinned_user_statements_are_verbatim_user_text(ledger, planted):
    by_turn = {m.turn: m for m in planted.messages}
    pinned = ledger.session_entry.sections.pinned_user_statements
    assert {p.turn for p in pinned} >= {2, 7, 13, 15, 19, 24, 26, 30, 32, 38}
    for item in pinned:
        assert by_turn[item.turn].role == "user"
        assert item.text in by_turn[item.turn].content
        assert f'"{item.text}"' in ledger.session_entry.summary_text


def test_tool_results_are_typed_with_artifact_refs_never_raw_output(ledger, planted):
    results = ledger.session_entry.sections.tool_results
    assert [(r.turn, r.tool_name, r.status) for r in results] == [
        (5, "get_error_rate", "ok"),
        (11, "get_replication_lag", "ok"),
        (22, "create_ticket", "ok"),
        (36, "run_tests", "ok"),
    ]
    refs = {a.artifact_id for a in planted.artifacts}
    assert {r.artifact_ref for r in results} == refs
    text = ledger.session_entry.summary_text
    for artifact in planted.artifacts:
        assert artifact.content not in text
    assert '"lag_s"' not in text and "collected 24 items" not in text


def test_windows_merge_iteratively_until_a_rule_fires(ledger, settings, planted):
    windows = ledger.window_entries
    assert [(e.window_index, e.covered_to_turn) for e in windows] == [
        (0, 19),
        (1, 39),
        (2, 40),
    ]
    assert [e.roll_depth for e in windows] == [0, 1, 2]
    assert [e.rebuilt_from_raw for e in windows] == [True, False, False]
    assert windows[1].parent_summary_id == windows[0].summary_id
    # A merged entry reads its own window; a rebuilt one everything it covers.
    by_turn = {m.turn: m for m in planted.messages}
    assert windows[1].source_ids == [by_turn[t].message_id for t in range(20, 40)]
    assert windows[1].source_hashes == [by_turn[t].content_hash for t in range(20, 40)]
    assert len(ledger.session_entry.source_ids) == len(planted.messages)
    for entry in windows:
        assert entry.verified
    # A merge never re-summarises: the window-1 summary keeps window 0's items.
    assert windows[0].sections.pinned_user_statements[0] in (
        windows[1].sections.pinned_user_statements
    )


def test_merged_and_raw_protected_sets_agree(ledger):
    last = ledger.window_entries[-1]
    assert last.protected_checksum == ledger.session_entry.protected_checksum


def test_rebuild_after_n_merges(planted_sources, settings):
    strict = settings.model_copy(update={"window_turns": 5, "rebuild_after_merges": 2})
    windows = build_session_ledger(
        planted_sources, strict, created_at=NOW
    ).window_entries
    assert [e.roll_depth for e in windows] == [0, 1, 2, 0, 1, 2, 0, 1, 2]
    assert [e.rebuild_reason for e in windows[:4]] == ["first", None, None, "merges"]
    assert windows[2].rebuild_required and windows[2].rebuild_required_reasons == [
        "merges"
    ]
    assert windows[3].parent_summary_id is None and windows[3].rebuilt_from_raw


def test_rebuild_after_a_time_limit(planted_sources, settings):
    # Planted turns are one minute apart: 0.2 h is 12 turns.
    timed = settings.model_copy(
        update={
            "window_turns": 5,
            "rebuild_after_merges": 99,
            "rebuild_after_hours": 0.2,
        }
    )
    windows = build_session_ledger(
        planted_sources, timed, created_at=NOW
    ).window_entries
    assert "age" in [e.rebuild_reason for e in windows]
    base = None
    for entry in windows:
        if entry.rebuilt_from_raw:
            base = entry.covered_to_turn
            assert entry.parent_summary_id is None and entry.roll_depth == 0
        else:  # a merge never reaches past the time limit since the last rebuild
            assert entry.covered_to_turn - base <= 12


def test_rerun_gives_the_same_ids_and_checksums(planted_sources, settings, ledger):
    again = build_session_ledger(
        planted_sources, settings, created_at=NOW + timedelta(days=1), run_id="other"
    )
    assert [e.summary_id for e in again.entries] == [
        e.summary_id for e in ledger.entries
    ]
    assert [e.protected_checksum for e in again.entries] == [
        e.protected_checksum for e in ledger.entries
    ]
    assert [t.trail_id for t in again.trail] == [t.trail_id for t in ledger.trail]


def test_changing_one_protected_value_flips_verified_and_requires_rebuild(
    planted_sources, settings, ledger
):
    changed = _replace(planted_sources, 19, "pay-shard-7", "pay-shard-8")
    for entry in (ledger.session_entry, ledger.window_entries[0]):
        audit = reverify_entry(entry, changed, settings)
        assert audit.entry.verified is False
        assert audit.entry.rebuild_required is True
        assert "drift" in audit.entry.rebuild_required_reasons
        assert audit.checksum_changed and audit.sources_changed
    # Turns 20-25 still name pay-shard-7, so the session summary is only missing
    # the new value; window 0 (turns 0-19) now holds a value no source has.
    session = reverify_entry(ledger.session_entry, changed, settings).entry
    assert session.missing_fields == ["identifier:shard:pay-shard-8"]
    first = reverify_entry(ledger.window_entries[0], changed, settings).entry
    assert first.altered_fields == ["identifier:shard:pay-shard-8"]
    # The same sources verify; a change outside any protected value only asks
    # for a rebuild.
    same = reverify_entry(ledger.session_entry, planted_sources, settings)
    assert same.entry.verified and not same.entry.rebuild_required
    other = _replace(planted_sources, 18, "Sure", "Sure thing")
    audit = reverify_entry(ledger.session_entry, other, settings)
    assert audit.entry.verified is True
    assert audit.entry.rebuild_required_reasons == ["sources_changed"]
    # ... and building again from the changed sources yields new, verified ids.
    rebuilt = build_session_ledger(changed, settings, created_at=NOW)
    assert rebuilt.session_entry.summary_id != ledger.session_entry.summary_id
    assert rebuilt.session_entry.verified
    assert rebuilt.window_entries[0].summary_id != ledger.window_entries[0].summary_id


def test_entries_round_trip_through_arrow(ledger):
    from ctxledger.schemas.arrow import to_table

    table = to_table(LedgerEntry, [e.row() for e in ledger.entries])
    back = [LedgerEntry.model_validate(row) for row in table.to_pylist()]
    assert back == ledger.entries


def test_empty_session_gets_a_session_entry(planted_sources, settings):
    empty = SessionSources(planted_sources.session, [])
    built = build_session_ledger(empty, settings, created_at=NOW)
    assert [e.scope for e in built.entries] == ["session"]
    assert built.session_entry.verified and built.trail == []


def test_uncovered_fields_go_to_protected_facts(planted_sources, settings):
    tiny = settings.model_copy(update={"max_pinned_statements": 1})
    entry = build_session_ledger(planted_sources, tiny, created_at=NOW).session_entry
    facts = {f.text for f in entry.sections.protected_facts}
    assert facts, "capped pinned statements must push their fields to the backstop"
    assert entry.verified
    assert all(
        c.status == "present"
        for c in check_fields(entry.summary_text, entry.protected_fields)
    )


def _messages(planted) -> list[Message]:
    return planted.messages


@hsettings(max_examples=12, deadline=None)
@given(st.integers(min_value=1, max_value=41), st.integers(min_value=0, max_value=6))
def test_any_window_size_keeps_every_field_and_agrees_with_raw(
    planted_sources, settings, size, merges
):
    config = settings.model_copy(
        update={"window_turns": size, "rebuild_after_merges": merges}
    )
    built = build_session_ledger(planted_sources, config, created_at=NOW)
    session = built.session_entry
    for entry in built.entries:
        assert entry.verified, (entry.window_index, entry.missing_fields)
        assert entry.roll_depth <= max(merges, 0) or entry.rebuilt_from_raw
    assert built.window_entries[-1].protected_checksum == session.protected_checksum


def test_text_action_observations_are_not_user_statements(planted_sources, settings):
    def message(turn: int, role: str, content: str) -> Message:
        return Message(
            message_id=f"msg_{turn}",
            session_id="ses_swe",
            tenant_id="acme",
            turn=turn,
            role=role,
            content=content,
            content_hash=f"h{turn}",
            token_count=5,
            policy_version="p",
            source_ref="f#1",
        )

    session = planted_sources.session.model_copy(
        update={"session_id": "ses_swe", "source_format": "swe_agent"}
    )
    messages = [
        message(0, "user", "Please fix the bug in ticket BUG-1234."),
        message(1, "assistant", "Edit.\n```\nedit 3:3\nx = 1\nend_of_edit\n```"),
        message(
            2,
            "user",
            "File updated on 2024-01-02. Make sure the indentation is correct.",
        ),
    ]
    entry = build_session_ledger(
        SessionSources(session, messages), settings, created_at=NOW
    ).session_entry
    assert [f.canonical for f in entry.protected_fields] == [
        "identifier:ticket:BUG-1234"
    ]
    # The request is the goal (written once, there); the observation at t2
    # is neither the goal nor a pinned statement.
    assert [(g.turn, g.text) for g in entry.sections.goal] == [
        (0, "Please fix the bug in ticket BUG-1234.")
    ]
    assert entry.sections.pinned_user_statements == []


def test_lines_with_a_residual_secret_are_dropped_and_counted(
    planted_sources, settings
):
    # redacted text that still holds a secret (the redactor missed it): the
    # sentence is a pinned user statement and a goal candidate; it is never
    # stored, anywhere in any entry, and the drop is recorded without text
    leaky = _replace(
        planted_sources,
        2,
        "Standing rule:",
        "Always log in to staging with password: hunter2xyz. Standing rule:",
    )
    built = build_session_ledger(leaky, settings, created_at=NOW)
    for entry in built.entries:
        assert "hunter2" not in entry.model_dump_json()
        assert entry.verified  # the employee number is still carried
    assert all("hunter2" not in t.model_dump_json() for t in built.trail)
    sections = {(line.section, line.turn) for line, _ in built.dropped}
    assert ("pinned_user_statements", 2) in sections
    assert all(count >= 1 for _, count in built.dropped)
    assert "hunter2" not in repr(built.dropped)
    # the clean statement of the same message is still pinned
    pinned = built.session_entry.sections.pinned_user_statements
    assert any("4417" in p.text for p in pinned)
    clean = build_session_ledger(planted_sources, settings, created_at=NOW)
    assert clean.dropped == []
