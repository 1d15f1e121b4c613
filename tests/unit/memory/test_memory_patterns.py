"""Pattern rules and sentence spans: tables of statements and what they yield."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxledger.pipelines.memory import patterns
from ctxledger.pipelines.memory.text import sentences


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


@pytest.mark.parametrize(
    ("text", "slot", "value"),
    [
        ("I'd prefer direct flights, please.", "preference:flights", "direct flights"),
        ("I’d prefer aisle seats.", "preference:seats", "aisle seats"),
        ("I'm a silver member, so I should get priority.", "membership", "silver"),
        ("As a Gold member, I have always flown with you.", "membership", "gold"),
        ("I'll be using my Platinum membership.", "membership", "platinum"),
        ("I actually live in Princeton and fly from EWR.", "home_city", "Princeton"),
        ("I don't have the number, but I'm omar_rossi_1241.", "user_id",
         "omar_rossi_1241"),
        ("I can provide my user ID, it's daiki_lee_6144.", "user_id",
         "daiki_lee_6144"),
        ('My username is "foo"', "username", "foo"),
        ("email is foo@example.com.", "email", "foo@example.com"),
        ("I prefer tea instead of coffee.", "preference:tea", "tea instead of coffee"),
        ("I like one-line summaries.", "preference:summaries", "one-line summaries"),
    ],
)  # fmt: skip
def test_issue13_statements_get_slot_and_value(text, slot, value):
    hit = patterns.match_user_sentence(text)
    assert hit is not None and (hit.slot, hit.value) == (slot, value)


@pytest.mark.parametrize(
    "text",
    [
        "I'd prefer a flight that departs after 8 am.",  # a pick in this session
        "I would prefer not to be transferred to another agent.",
        "I'd prefer the second cheapest flight in economy class.",
        "My reservation ID is 1N99U6.",  # a transaction object, not the user
        "My appointment ID is 90123456 and I want to move it.",
    ],
)
def test_one_off_choices_and_object_ids_are_no_statement(text):
    assert patterns.match_user_sentence(text) is None


@pytest.mark.parametrize(
    ("text", "never"),
    [
        ("I'm really unhappy with the service I received.", True),
        ("I'm feeling a bit unwell today.", True),
        ("I want to cancel this booking.", True),
        ("I'll use the credit card on file for the payment.", True),
        ("Please proceed with the change.", True),
        ("The confirmation number for my flight is H8Q05L.", True),
        ("The time is 10:00 AM.", True),
        ("8 am tomorrow.", True),
        ("I work on the data platform team.", False),
        ("I prefer short answers.", False),
    ],
)
def test_moods_requests_and_session_details_are_never_memories(text, never):
    assert patterns.not_a_memory(text) is never


def test_under_the_name_in_a_request():
    hit = patterns.match_question("Can you cancel it under the name Sarah Johnson?")
    assert (hit.slot, hit.value) == ("name", "Sarah Johnson")
    assert patterns.match_question("Can you check my flight status?") is None


@pytest.mark.parametrize(
    ("question", "reply", "expected"),
    [
        ("Could you please provide your user ID?", "Sure, it's sofia_kim_7287.",
         ("user_id", "sofia_kim_7287")),
        ("I need to verify your user ID. May I have it please?", "It's F24681.",
         ("user_id", "F24681")),
        ("What's your username?", "JohnDoe", ("username", "JohnDoe")),
        ("May I have your full name?", "Robert Lee", ("name", "Robert Lee")),
        ("What is your email?", "It's a@b.co", ("email", "a@b.co")),
        # a question that also asks for a secret: the reply is never read
        ("What is your username and password?", "JohnDoe", None),
        ("Please give me your user ID and the token.", "abc_123", None),
        # two attributes asked, or none: ambiguous
        ("Your user ID and email, please?", "abc_123", None),
        ("Which hotel would you like?", "The Hilton.", None),
        ("What is the name of the hotel?", "Sheraton Hotel", None),
        # not a bare value
        ("Could you provide your user ID?", "I don't have it with me now.", None),
        ("Could you provide your user ID?", "Yes.", None),
    ],
)  # fmt: skip
def test_reply_to_a_question_for_one_attribute(question, reply, expected):
    assert patterns.answer(question, reply) == expected


def test_credentials_are_flagged():
    assert patterns.about_credential("my password is bar")
    assert patterns.about_credential("The verification code is 970420.")
    assert not patterns.about_credential("My username is foo")
