"""Bi-temporal supersession, source ranking and conflicts."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st
from memfactory import at, memory

from ctxledger.pipelines.memory.resolve import changed, resolve


def _by_text(items):
    return {m.text: m for m in items}


def test_newer_user_statement_supersedes_older_on_same_slot():
    old = memory(
        "my employee number 4417", slot="employee_number", value="4417", turn=2
    )
    new = memory(
        "my employee number changed to 4471", slot="employee_number", value="4471",
        turn=30, recorded=at(days=2),
    )  # fmt: skip
    other = memory("the affected shard is pay-shard-7", slot="affected_shard", turn=19)
    out = _by_text(resolve([new, other, old]))
    older = out["my employee number 4417"]
    assert older.superseded_by == new.memory_id
    assert older.valid_to == new.valid_from
    assert older.superseded_at == new.recorded_at
    assert out["my employee number changed to 4471"].superseded_by is None
    assert out["the affected shard is pay-shard-7"].valid_to is None


def test_system_record_outranks_inference_whatever_the_order():
    fact = memory("Plan: Pro", source="system_record", kind="account_state",
                  slot="plan", value="Pro", turn=1)  # fmt: skip
    guess = memory("It seems you are on the Free plan.", source="model_inferred",
                   slot="plan", value="Free", turn=5)  # fmt: skip
    out = _by_text(resolve([fact, guess]))
    assert out["It seems you are on the Free plan."].superseded_by == fact.memory_id
    assert out["Plan: Pro"].superseded_by is None
    assert out["Plan: Pro"].conflict_with is None


def test_user_vs_system_disagreement_is_flagged_not_guessed():
    said = memory("My plan is Enterprise.", slot="plan", value="Enterprise", turn=3)
    record = memory("Plan: Pro", source="system_record", kind="account_state",
                    slot="plan", value="Pro", turn=1)  # fmt: skip
    out = _by_text(resolve([said, record]))
    assert out["My plan is Enterprise."].conflict_with == record.memory_id
    assert out["Plan: Pro"].conflict_with == said.memory_id
    assert out["Plan: Pro"].superseded_by is None


def test_same_time_different_values_is_a_conflict():
    a = memory("my account is A-1", slot="account", value="A-1", turn=4,
               when=at(5))  # fmt: skip
    b = memory("my account is A-2", slot="account", value="A-2", turn=4,
               when=at(5))  # fmt: skip
    out = resolve([a, b])
    assert {m.conflict_with for m in out} == {a.memory_id, b.memory_id}
    assert all(m.superseded_by is None for m in out)


def test_untimed_session_turn_order_supersedes_not_conflicts():
    # No timestamps: every statement of the session has the run's time.
    now = at(days=5)
    old = memory("my employee number 4417", slot="employee_number", value="4417",
                 turn=2, when=now)  # fmt: skip
    new = memory("my employee number changed to 4471", slot="employee_number",
                 value="4471", turn=30, when=now)  # fmt: skip
    out = _by_text(resolve([new, old]))
    assert out[old.text].superseded_by == new.memory_id
    assert out[old.text].valid_to == now  # held for no known time
    assert out[new.text].superseded_by is None
    assert {m.conflict_with for m in out.values()} == {None}


def test_same_time_in_different_sessions_is_a_conflict():
    a = memory("my account is A-1", slot="account", value="A-1", turn=9,
               when=at(5), session="ses_a")  # fmt: skip
    b = memory("my account is A-2", slot="account", value="A-2", turn=2,
               when=at(5), session="ses_b")  # fmt: skip
    out = resolve([a, b])
    assert {m.conflict_with for m in out} == {a.memory_id, b.memory_id}
    assert all(m.superseded_by is None for m in out)


def test_explicit_correction_supersedes_the_value_it_names():
    a = memory("my account is A-1", slot="account", value="A-1", turn=9,
               when=at(5), session="ses_a")  # fmt: skip
    fix = memory("my account is A-2, not A-1", slot="account", value="A-2",
                 turn=2, when=at(5), session="ses_b")  # fmt: skip
    out = _by_text(resolve([fix, a]))
    assert out[a.text].superseded_by == fix.memory_id
    assert out[fix.text].superseded_by is None
    assert {m.conflict_with for m in out.values()} == {None}
    # a correction naming another value decides nothing about A-1
    other = memory("my account is A-2, not A-3", slot="account", value="A-2",
                   turn=2, when=at(5), session="ses_b")  # fmt: skip
    assert {m.conflict_with for m in resolve([a, other])} == {
        a.memory_id, other.memory_id
    }  # fmt: skip


def test_correction_naming_nothing_beats_a_plain_statement_in_one_message():
    plain = memory("my plan is Pro", slot="plan", value="Pro", turn=3)
    fix = memory("Actually, my plan is Team", slot="plan", value="Team", turn=3)
    out = _by_text(resolve([plain, fix]))
    assert out[plain.text].superseded_by == fix.memory_id
    assert out[fix.text].superseded_by is None and out[fix.text].conflict_with is None


def test_a_newer_statement_beats_an_older_correction():
    fix = memory("my plan is Team, not Pro", slot="plan", value="Team", turn=3,
                 when=at(1), session="ses_a")  # fmt: skip
    later = memory("my plan is Pro", slot="plan", value="Pro", turn=1,
                   when=at(days=1), session="ses_b")  # fmt: skip
    out = _by_text(resolve([fix, later]))
    assert out[fix.text].superseded_by == later.memory_id
    assert out[later.text].superseded_by is None


def test_memories_without_slot_are_never_superseded():
    a = memory("Do not restart workers.", slot=None, turn=1)
    b = memory("Keep the status page updated.", slot=None, turn=2)
    assert changed([a, b], resolve([a, b])) == []


def test_stated_validity_is_kept_and_restored():
    end = at(days=3)
    old = memory("Plan: Pro", source="system_record", kind="account_state",
                 slot="plan", value="Pro", stated_valid_to=end)  # fmt: skip
    new = memory("Plan: Team", source="system_record", kind="account_state",
                 slot="plan", value="Team", turn=2, when=at(days=1))  # fmt: skip
    superseded = _by_text(resolve([old, new]))["Plan: Pro"]
    assert superseded.valid_to == at(days=1)
    alone = resolve([superseded])[0]
    assert alone.valid_to == end and alone.superseded_by is None


_TEXTS = ("statement {i} {v}", "correction {i}: it is {v}", "{i}: {v}, not {o}")
_MEMS = st.lists(
    st.builds(
        lambda i, src, slot, value, day, session, text: memory(
            text.format(i=i, v=value, o="2" if value == "1" else "1"),
            source=src,
            slot=slot,
            value=value,
            turn=i,
            when=at(days=day),
            session=session,
        ),
        st.integers(0, 30),
        st.sampled_from(["user_stated", "system_record", "model_inferred"]),
        st.sampled_from(["a", "b", None]),
        st.sampled_from(["1", "2"]),
        st.integers(0, 3),
        st.sampled_from(["ses_1", "ses_2"]),
        st.sampled_from(_TEXTS),
    ),
    max_size=8,
    unique_by=lambda m: m.memory_id,
)


@settings(max_examples=80, deadline=None)
@given(_MEMS, st.randoms(use_true_random=False))
def test_property_resolve_is_idempotent_and_order_free(items, rnd: random.Random):
    once = resolve(items)
    assert resolve(once) == once
    shuffled = list(items)
    rnd.shuffle(shuffled)
    assert _by_id(resolve(shuffled)) == _by_id(once)
    # at most one current fact per source and slot, unless flagged as conflicts
    current = [m for m in once if m.slot and m.superseded_by is None]
    for slot in {m.slot for m in current}:
        for source in ("user_stated", "system_record"):
            heads = [m for m in current if m.slot == slot and m.source == source]
            assert len(heads) <= 1 or all(m.conflict_with for m in heads)


def _by_id(items):
    return {m.memory_id: m for m in items}
