"""Pattern rules and sentence spans: tables of statements and what they yield."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pipelines.memory import patterns
from pipelines.memory.text import sentences


def test_sentence_spans_index_the_message_exactly():
    text = "Hi, I'm <PERSON:ab12cd34>. Refund of $1,249.00 is due.\nNext step: review."
    found = sentences(text)
    assert [s.text for s in found] == [
        "Hi, I'm <PERSON:ab12cd34>.",
        "Refund of $1,249.00 is due.",
        "Next step: review.",
    ]
    for sentence in found:
        assert text[sentence.start : sentence.end] == sentence.text


@given(st.text(alphabet=st.sampled_from("ab .?!\n<>:1"), max_size=80))
def test_spans_always_match_the_text(text):
    for sentence in sentences(text):
        assert text[sentence.start : sentence.end] == sentence.text
        assert sentence.text == sentence.text.strip() and sentence.text


@pytest.mark.parametrize(
    ("text", "kind", "slot", "value"),
    [
        (
            "Standing rule: any ticket you open goes under my employee number 4417.",
            "rule",
            "employee_number",
            "4417",
        ),
        (
            "Correction: my employee number changed to 4471 after the reorg; "
            "use 4471 for tickets from now on.",
            "rule",
            "employee_number",
            "4471",
        ),
        ("Do not restart the payment workers without my approval.", "rule", None, None),
        ("Keep the status page updated every 30 minutes.", "rule", None, None),
        ("my account is A-123", "identity", "account", "A-123"),
        ("My email is <EMAIL_ADDRESS:12ab34cd>.", "identity", "email", None),
        (
            "I prefer short answers.",
            "preference",
            "preference:answers",
            "short answers",
        ),
        ("Please keep answers short.", "preference", "preference:answers", "short"),
        (
            "I don't like long summaries.",
            "preference",
            "preference:summaries",
            "not long summaries",
        ),
        ("Hi, I'm <PERSON:ab12cd34> from payments.", "identity", "name", None),
        ("I am the account owner here.", "identity", "role", "the account owner here"),
        (
            "The database team confirmed: the affected shard is pay-shard-7.",
            "fact",
            "affected_shard",
            "pay-shard-7",
        ),
    ],
)
def test_user_statements(text, kind, slot, value):
    hit = patterns.match_user_sentence(text)
    assert hit is not None and hit.kind == kind and hit.slot == slot
    if value is not None:
        assert hit.value == value


@pytest.mark.parametrize(
    "text",
    [
        "Can you check which database shards show replication lag?",
        "Run the smoke tests on checkout.",
        "Let me ask the database team to confirm the shard.",
        "I'm not sure.",
        "I'd like to know the status.",
        "I am a bit confused.",
        "My account was charged twice.",
        "What's the current error rate?",
    ],
)
def test_not_memories_by_rule(text):
    assert patterns.match_user_sentence(text) is None


@pytest.mark.parametrize(
    ("text", "kind", "slot"),
    [
        ("It seems you prefer short answers.", "preference", "preference:answers"),
        ("You appear to be the account owner.", "identity", "role"),
        ("I assume your account is A-77.", "identity", "account"),
        ("Sounds like you work nights; it seems you are on call.", "fact", None),
    ],
)
def test_inferences_in_assistant_text(text, kind, slot):
    hit = patterns.match_inference(text)
    assert hit is not None and hit.kind == kind and hit.confidence < 1.0
    if slot is not None:
        assert hit.slot == slot


@pytest.mark.parametrize(
    "text",
    [
        "I will file every ticket under employee number 4417.",
        "Noted: I will not restart payment workers without your approval.",
        "Does it seem like you prefer short answers?",
    ],
)
def test_assistant_restatements_are_not_inferences(text):
    assert patterns.match_inference(text) is None


def test_slot_normalisation():
    assert patterns.normalize_slot("Employee  Number") == "employee_number"
    assert patterns.normalize_slot("e-mail") == "email"
    assert patterns.normalize_slot("employee no") == "employee_number"


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ("Correction: my employee number is 4471, not 4417.", {"4417"}),
        ("Use A-2 instead of A-1.", {"a-1"}),
        ("Actually, my plan is Team.", set()),
        ("Use 4471 for tickets from now on.", set()),
        ("My plan is Team now, no longer Pro.", {"pro"}),
    ],
)
def test_correction_and_the_values_it_names(text, names):
    found = patterns.correction(text)
    assert found is not None and names <= found.names
    for name in names:
        assert found.names_value(name.upper()) or found.names_value(name)


@pytest.mark.parametrize(
    "text",
    [
        "Standing rule: any ticket you open goes under my employee number 4417.",
        "My employee number is 4417.",
        "I prefer short answers.",
    ],
)
def test_plain_statements_are_not_corrections(text):
    assert patterns.correction(text) is None
