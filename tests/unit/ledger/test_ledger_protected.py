"""Protected fields: extraction, normalisation, checksum and matching."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxledger.pipelines.ledger.protected import (
    check_fields,
    checksum,
    extract_fields,
    find_amounts,
    find_dates,
    find_identifiers,
    find_rules,
    merge_fields,
)
from ctxledger.schemas.ledger import ProtectedField
from ctxledger.schemas.transcript import Message


def _msg(content: str, role: str = "user", turn: int = 1) -> Message:
    return Message(
        message_id=f"msg_{turn}",
        session_id="ses_x",
        tenant_id="acme",
        turn=turn,
        role=role,
        content=content,
        content_hash=f"h{turn}",
        token_count=1,
        policy_version="p",
        source_ref="f#1",
    )


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("Refund of $1,249.00 is blocked", "USD 1249.00"),
        ("costs €12", "EUR 12.00"),
        ("a budget of $2.5m", "USD 2500000.00"),
        ("USD 300 was charged", "USD 300.00"),
        ("we owe 45 dollars", "USD 45.00"),
        ("paid 1,000 GBP", "GBP 1000.00"),
    ],
)
def test_amounts_are_normalised_to_code_and_two_decimals(text, value):
    assert [f.value for f in find_amounts(text)] == [value]


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("started on 2026-03-14 at noon", "2026-03-14"),
        ("due 14 March 2026", "2026-03-14"),
        ("due March 14th, 2026", "2026-03-14"),
        ("on 3/14/2026", "2026-03-14"),
        ("on 14/3/2026", "2026-03-14"),
    ],
)
def test_dates_are_normalised_to_iso(text, value):
    assert [f.value for f in find_dates(text)] == [value]


def test_impossible_dates_and_shell_dollars_are_not_fields():
    assert find_dates("version 2026-13-45") == []
    assert find_amounts("echo $HOME and $ ls") == []


@pytest.mark.parametrize(
    ("text", "label", "value"),
    [
        ("my employee number 4417", "employee_number", "4417"),
        ("employee number changed to 4471 now", "employee_number", "4471"),
        ("the affected shard is Pay-Shard-7.", "shard", "pay-shard-7"),
        ("ticket INC-5512 is open", "ticket", "INC-5512"),
        ("see R-20931", "ref", "R-20931"),
        ("account 8812345", "account", "8812345"),
        ("booking ABC123 confirmed", "booking", "ABC123"),
        ("mail <EMAIL_ADDRESS:3f9a1c2b> now", "pseudonym", "<EMAIL_ADDRESS:3f9a1c2b>"),
    ],
)
def test_identifiers_get_the_most_specific_label(text, label, value):
    found = find_identifiers(text)
    assert [(f.label, f.value) for f in found] == [(label, value)]


def test_reference_lookalikes_and_plain_words_are_not_identifiers():
    assert find_identifiers("uses SHA-256 and ISO-8601 and UTF-8") == []
    assert find_identifiers("the ticket you open and the payment workers") == []


def test_rules_are_clauses_of_their_kind():
    found = find_rules(
        "Do not restart the workers. Pending approval: failover needs sign-off. "
        "We decided against rolling back; the deploy is not the cause. "
        "Next step is the review on Friday."
    )
    assert [(f.kind, f.value) for f in found] == [
        ("negation", "do not restart the workers"),
        ("approval", "pending approval: failover needs sign-off"),
        ("negation", "we decided against rolling back"),
        ("negation", "the deploy is not the cause"),
        ("pending_action", "next step is the review on friday"),
    ]


def test_planted_fields_each_with_their_source_message(planted, settings):
    fields = extract_fields(
        planted.messages,
        settings.protected_kinds,
        settings.fact_roles,
        settings.rule_roles,
    )
    by_name = {f.canonical: f.turn for f in fields}
    assert by_name["identifier:employee_number:4417"] == 2
    assert by_name["identifier:shard:pay-shard-7"] == 19
    assert by_name["identifier:employee_number:4471"] == 30
    assert by_name["amount:USD 1249.00"] == 13
    assert by_name["date:2026-03-14"] == 15
    assert (
        by_name["negation:do not restart the payment workers without my approval"] == 7
    )
    assert (
        by_name["pending_action:next step is the post-incident review on friday"] == 38
    )
    assert any(name.startswith("approval:pending approval") for name in by_name)
    messages = {m.message_id: m for m in planted.messages}
    for item in fields:
        assert messages[item.source_message_id].turn == item.turn


def test_roles_and_kinds_limit_what_is_extracted():
    messages = [
        _msg("Never deploy on Fridays.", "assistant", 1),
        _msg("Ticket INC-77 is mine.", "system", 2),
        _msg("Do not page me; order A1B2C3 shipped.", "user", 3),
    ]
    fields = extract_fields(messages, ("negation", "identifier"), ("user",), ("user",))
    assert [f.canonical for f in fields] == [
        "identifier:order:A1B2C3",
        "negation:do not page me",
    ]


def _field(value: str, kind="identifier", label="ref", turn=1) -> ProtectedField:
    return ProtectedField(
        kind=kind, label=label, value=value, source_message_id=f"m{turn}", turn=turn
    )


@given(
    st.lists(
        st.from_regex(r"[A-Z]{2,4}-[0-9]{2,5}", fullmatch=True), min_size=1, max_size=8
    ),
    st.randoms(),
)
def test_checksum_ignores_order_duplicates_and_sources(values, rng):
    fields = [_field(v, turn=i) for i, v in enumerate(values)]
    shuffled = list(fields) + [_field(values[0], turn=99)]
    rng.shuffle(shuffled)
    assert checksum(fields) == checksum(shuffled)
    assert checksum(fields).startswith("sha256:")


def test_checksum_changes_with_any_value():
    base = [_field("INC-1"), _field("4417", label="employee_number")]
    changed = [_field("INC-1"), _field("4471", label="employee_number")]
    assert checksum(base) != checksum(changed)


def test_merge_keeps_the_older_occurrence():
    old = [_field("INC-1", turn=1)]
    new = [_field("inc-1", turn=5), _field("INC-2", turn=6)]
    assert [(f.value, f.turn) for f in merge_fields(old, new)] == [
        ("INC-1", 1),
        ("INC-2", 6),
    ]


def test_check_fields_reports_present_missing_and_altered():
    fields = [
        _field("pay-shard-7", label="shard", turn=19),
        _field("4417", label="employee_number", turn=2),
        _field("USD 1249.00", kind="amount", label="amount", turn=13),
        _field("we decided against rolling back the deploy", "negation", "negation"),
        _field("do not restart the payment workers", "negation", "negation"),
    ]
    text = (
        "Tickets go under employee number 4417. The refund is $1,294.00. "
        "We decided to roll back the deploy. Never restart payment workers."
    )
    status = {c.field.value: (c.status, c.found) for c in check_fields(text, fields)}
    assert status["pay-shard-7"] == ("missing", None)
    assert status["4417"] == ("present", None)
    assert status["USD 1249.00"] == ("altered", "USD 1294.00")
    assert status["we decided against rolling back the deploy"][0] == "altered"
    assert status["do not restart the payment workers"] == ("present", None)


def test_another_source_value_is_not_an_alteration():
    fields = [
        _field("4417", label="employee_number", turn=2),
        _field("4471", label="employee_number", turn=30),
    ]
    checks = check_fields("use employee number 4471", fields)
    assert [(c.field.value, c.status) for c in checks] == [
        ("4417", "missing"),
        ("4471", "present"),
    ]


_WORDS = st.sampled_from(
    "the team said ticket INC-5512 about pay-shard-7 for $1,249.00 on 2026-03-14 "
    "do not never restart workers employee number 4417 pending approval sign-off "
    "next step review account 99812 <PERSON:3f9a1c2b> decided against rollback".split()
)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.lists(_WORDS, min_size=1, max_size=14), min_size=1, max_size=4))
def test_a_message_always_carries_the_fields_extracted_from_it(sentences):
    text = " ".join(" ".join(words) + "." for words in sentences)
    fields = extract_fields([_msg(text)])
    assert [c for c in check_fields(text, fields) if c.status != "present"] == []
