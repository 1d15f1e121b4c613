"""Issue 31's observed memory failures: venting, control phrases, free-text
corrections and slot normalization, through the real extract -> gate ->
resolve path with the MiniLM classifier."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from memfactory import grant

from ctxledger.pipelines.memory import intent, patterns
from ctxledger.pipelines.memory.classify import MiniLMEncoder, PurposeClassifier
from ctxledger.pipelines.memory.extract import (
    RuleExtractor,
    SessionContext,
    extract_session,
)
from ctxledger.pipelines.memory.gate import gate_candidates
from ctxledger.pipelines.memory.resolve import resolve
from ctxledger.schemas import Message, Session
from ctxledger.schemas.policy import load_policy

SETTINGS = load_policy(None).memory
T0 = datetime(2026, 5, 1, 9, tzinfo=UTC)
NOW = datetime(2026, 6, 1, tzinfo=UTC)


@pytest.fixture(scope="module")
def encoder():
    return MiniLMEncoder().load()


def _session(index: int, turns: list[tuple[str, str]]):
    started = T0 + timedelta(days=index)
    source = "tenant=acme/subject=dana/chat.jsonl"
    session = Session(
        session_id=f"ses_{index}",
        tenant_id="acme",
        source_format="canonical",
        source_file=source,
        source_hash="h",
        started_at=started,
    )
    messages = [
        Message(
            message_id=f"msg_{index}_{turn}",
            session_id=session.session_id,
            tenant_id="acme",
            turn=turn,
            role=role,
            content=text,
            content_hash="h",
            created_at=started,
            token_count=1,
            policy_version="p",
            source_ref=f"{source}#line:{turn + 1}",
        )
        for turn, (role, text) in enumerate(turns)
    ]
    return session, messages


def run(encoder, *sessions: list[tuple[str, str]]):
    """``(served memories, stored memories, rejections)`` over the sessions."""
    extractor = RuleExtractor(SETTINGS, encoder)
    purposes = PurposeClassifier(SETTINGS, encoder)
    memories, rejections = [], []
    for index, turns in enumerate(sessions):
        ctx = SessionContext.build(*_session(index, turns))
        result = extract_session(ctx, [extractor], purposes)
        gated = gate_candidates(
            result.candidates,
            [grant(subject=ctx.subject_id, purpose=p) for p in SETTINGS.purpose_names],
            SETTINGS,
            now=NOW,
            policy_version="p",
            run_id="r",
        )
        memories.extend(gated.memories)
        rejections.extend(gated.rejections)
    stored = resolve(memories)
    served = [m for m in stored if m.superseded_by is None]
    return served, stored, rejections


def texts(memories) -> list[str]:
    return [m.text for m in memories]


def test_venting_is_not_a_role_and_does_not_supersede_it(encoder):
    served, _, _ = run(
        encoder,
        [
            ("user", "I'm the on-call lead for the payments team."),
            ("assistant", "Noted."),
            ("user", "Ugh, this is the third outage this week, I'm so fed up."),
        ],
    )
    roles = [m for m in served if m.slot == "role"]
    assert len(roles) == 1 and roles[0].value.startswith("the on-call lead")
    assert not any("outage" in t for t in texts(served))


@pytest.mark.parametrize(
    "text",
    [
        "Don't give up, buddy!",
        "Good to see you!",
        "Honestly I'm exhausted and this is driving me crazy.",
        "Wow, that's awesome, congrats on the new job!",
    ],
)
def test_small_talk_and_encouragement_are_never_memories(encoder, text):
    served, _, rejections = run(encoder, [("user", text)])
    assert served == []


def test_dont_remember_this_is_refused_in_the_same_turn_with_a_reason(encoder):
    served, _, rejections = run(
        encoder,
        [
            ("user", "My name is Dana Whitfield."),
            ("assistant", "Thanks."),
            (
                "user",
                "Please don't remember this: I've been seeing a therapist for burnout.",
            ),
        ],
    )
    assert texts(served) == ["My name is Dana Whitfield."]
    declined = [r for r in rejections if r.reason == intent.USER_DECLINED]
    assert declined and all(r.provenance.turn == 2 for r in declined)


def test_forget_that_withdraws_the_address_with_provenance(encoder):
    served, _, rejections = run(
        encoder,
        [
            (
                "user",
                "My home address is 14 Elm Street, Springfield. "
                "Actually forget that, don't store my address.",
            ),
            ("assistant", "Okay."),
            ("user", "I prefer email over phone calls."),
        ],
    )
    assert not any(m.slot == "home_address" for m in served)
    assert not any(m.kind == "rule" for m in served)  # the control phrase itself
    (withdrawn,) = [r for r in rejections if r.reason == intent.USER_WITHDRAWN]
    assert withdrawn.provenance.turn == 0 and withdrawn.provenance.char_start == 0


def test_later_turn_withdraws_the_named_memory(encoder):
    served, _, rejections = run(
        encoder,
        [
            ("user", "My phone number is 555-0101."),
            ("assistant", "Saved."),
            ("user", "On second thought, don't keep my phone number."),
        ],
    )
    assert not any("555-0101" in t for t in texts(served))
    assert any(r.reason == intent.USER_WITHDRAWN for r in rejections)


def test_not_recalling_something_is_no_control_phrase():
    assert (
        intent.control("I don't remember the reservation ID, but I'm omar_1.") is None
    )
    assert intent.control("I'll never forget that trip.") is None
    assert intent.control("Don't store my address.").target == "address"


def test_you_can_remember_that_is_a_memory(encoder):
    served, _, _ = run(encoder, [("user", "You can remember that I'm vegetarian.")])
    assert texts(served) == ["I'm vegetarian."]


def test_statements_about_other_people_are_not_the_users(encoder):
    served, _, rejections = run(
        encoder,
        [
            ("user", "My colleague Tom is a vegetarian and lives in Boulder."),
            ("user", "My manager is Priya Nair."),
        ],
    )
    assert [m.value for m in served] == ["Priya Nair"]


@pytest.mark.parametrize(
    ("text", "other"),
    [
        ("My colleague Tom is a vegetarian.", True),
        ("My dad's on blood thinners.", True),
        ("She works nights at the hospital.", True),
        ("My manager is Luis Ortega.", False),
        ("I'm a counselor and I moved from Sweden.", False),
    ],
)
def test_about_other(text, other):
    assert intent.about_other(text) is other


@pytest.mark.parametrize(
    ("first", "second", "old", "new"),
    [
        (
            "Always use us-east-2 for the staging deploys.",
            "Actually, use eu-central-1 from now on, not us-east-2.",
            "us-east-2",
            "eu-central-1",
        ),
        (
            "I'm a Silver member.",
            "Correction: I'm actually a Platinum member now, not Silver.",
            "silver",
            "platinum",
        ),
        (
            "My home airport is SFO.",
            "My home airport is now OAK instead of SFO.",
            "SFO",
            "OAK",
        ),
        (
            "I prefer aisle seats.",
            "Actually, I prefer window seats now.",
            "aisle",
            "window",
        ),
        ("I live in Denver.", "I moved to Seattle last month.", "Denver", "Seattle"),
        (
            "My manager is Priya Nair.",
            "I no longer report to Priya; my manager is now Luis Ortega.",
            "Priya",
            "Luis",
        ),
    ],
)
@pytest.mark.parametrize("across_sessions", [False, True])
def test_free_text_corrections_supersede(
    encoder, first, second, old, new, across_sessions
):
    if across_sessions:
        served, stored, _ = run(encoder, [("user", first)], [("user", second)])
    else:
        served, stored, _ = run(
            encoder, [("user", first), ("assistant", "Noted."), ("user", second)]
        )
    assert any(new.casefold() in t.casefold() for t in texts(served))
    assert not any(
        old.casefold() in t.casefold() and new.casefold() not in t.casefold()
        for t in texts(served)
    )
    superseded = [m for m in stored if m.superseded_by is not None]
    assert superseded and all(m.text == first for m in superseded)


def test_aisle_and_window_seats_share_one_slot():
    assert patterns.preference("I prefer aisle seats.")[0] == "preference:seats"
    assert patterns.preference("Actually, I prefer window seats now.") == (
        "preference:seats",
        "window seats now",
    )


def test_a_negation_that_is_no_correction_names_nothing():
    assert patterns.replaced_values("I'm not sure about that.") == frozenset()
    assert "us-east-2" in patterns.replaced_values("Use eu-central-1, not us-east-2.")
    assert patterns.replaced_values("From now on, send it to finance, not to me.") == (
        frozenset()
    )


def test_lowercase_i_is_the_pronoun_and_the_text_stays_verbatim(encoder):
    served, _, _ = run(
        encoder,
        [("user", "i live in Porto")],
        [("user", "so i moved to Lisbon in march")],
    )
    assert [(m.slot, m.value, m.text) for m in served] == [
        ("home_city", "Lisbon", "so i moved to Lisbon in march")
    ]
    assert intent.first_person("i'm here, hi") == "I'm here, hi"


def test_standing_change_is_kept_and_supersedes(encoder):
    served, _, _ = run(
        encoder,
        [("user", "We always run cargo test before a merge.")],
        [("user", "btw we use nextest now instead of cargo test")],
    )
    assert texts(served) == ["btw we use nextest now instead of cargo test"]


def test_occupation_statements_are_identities():
    assert patterns.occupation("I maintain the ingest service, it's all rust") == (
        "maintain",
        "the ingest service",
    )
    assert patterns.occupation("I work at Acme Corp.") == ("work_at", "Acme Corp")
    assert patterns.occupation("I manage to get by.") is None


def test_a_polite_tail_does_not_make_an_instruction_chatter(encoder):
    served, _, _ = run(
        encoder, [("user", "Always CC my manager on escalations, thanks!")]
    )
    assert [m.kind for m in served] == ["rule"]
