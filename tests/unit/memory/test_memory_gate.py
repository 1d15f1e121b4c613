"""Consent liveness and the gate: no memory without a live basis and a retention."""

from __future__ import annotations

from datetime import timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from memfactory import at, candidate, grant, withdraw

from ctxledger.pipelines.memory.consent import live_basis, live_grants
from ctxledger.pipelines.memory.extract import (
    RuleExtractor,
    SessionContext,
    extract_session,
    memory_id_for,
)
from ctxledger.pipelines.memory.gate import gate_candidates
from ctxledger.pipelines.memory.readmit import MessageText, Readmission, readmit
from ctxledger.schemas import Message, Session
from ctxledger.schemas.memory import KNOWN_SOURCES
from ctxledger.schemas.policy import load_policy

SETTINGS = load_policy(None).memory
NOW = at(days=10)


def _gate(candidates, consent, now=NOW, settings_=SETTINGS, basis_at=None):
    return gate_candidates(
        candidates,
        consent,
        settings_,
        now=now,
        policy_version="p",
        run_id="r",
        basis_at=basis_at,
    )


def test_grant_is_live_from_its_time_until_withdrawn():
    events = [grant(when=at(days=-1)), withdraw(when=at(days=5))]
    live = lambda t: bool(live_grants(events, "acme", "u-1", "support", t))  # noqa: E731
    assert not live(at(days=-2))
    assert live(at(days=-1)) and live(at(days=4))
    assert not live(at(days=5)) and not live(at(days=6))


def test_withdrawal_scope_purpose_star_and_basis():
    events = [
        grant(basis="consent", when=at(days=-1)),
        grant(basis="contract", when=at(days=-1)),
        withdraw(basis="consent", when=at(days=1)),
    ]
    left = live_grants(events, "acme", "u-1", "support", at(days=2))
    assert [g.basis for g in left] == ["contract"]
    events.append(withdraw(purpose="*", when=at(days=3)))
    assert live_grants(events, "acme", "u-1", "support", at(days=4)) == []
    # a later grant is live again
    events.append(grant(basis="consent", when=at(days=5)))
    assert (
        live_basis(events, "acme", "u-1", "support", at(days=6), SETTINGS.bases).basis
        == "consent"
    )


def test_grant_that_ends_by_itself():
    events = [grant(when=at(days=-1), expires=at(days=2))]
    assert live_grants(events, "acme", "u-1", "support", at(days=1))
    assert not live_grants(events, "acme", "u-1", "support", at(days=2))


def test_other_subject_tenant_or_purpose_does_not_count():
    for event in (
        grant(subject="u-2"),
        grant(tenant="globex"),
        grant(purpose="billing"),
    ):
        assert not live_grants([event], "acme", "u-1", "support", at())


@pytest.mark.parametrize(
    ("make", "consent", "reason"),
    [
        (lambda: candidate(), [], "no_basis"),
        (lambda: candidate(), [grant(purpose="billing")], "no_basis"),
        (
            lambda: candidate(),
            [grant(when=at(days=-5)), withdraw(when=at(days=-1))],
            "basis_withdrawn",
        ),
        (lambda: candidate(purpose=None), [grant()], "no_purpose"),
        (lambda: candidate(purpose="marketing"), [grant()], "no_purpose"),
        (
            lambda: candidate(reject_reason="unverified_span"),
            [grant()],
            "unverified_span",
        ),
        (
            lambda: candidate(when=NOW - timedelta(days=800)),
            [grant(when=NOW - timedelta(days=900))],
            "expired",
        ),
    ],
)
def test_rejections_have_reasons_and_no_text(make, consent, reason):
    result = _gate([make()], consent)
    assert result.memories == []
    (rejection,) = result.rejections
    assert rejection.reason == reason
    assert "text" not in type(rejection).model_fields


def test_unknown_source_is_stored_not_rejected():
    # the design's fifth assert: stored (and counted), served by no query
    result = _gate([candidate(source="unknown")], [grant()])
    (memory,) = result.memories
    assert memory.source == "unknown" and result.rejections == []
    days = SETTINGS.retention_days("unknown", "preference")
    known = [SETTINGS.retention_days(s, "preference") for s in KNOWN_SOURCES]
    assert days == min(d for d in known if d is not None)
    assert memory.expires_at == memory.valid_from + timedelta(days=days)
    assert "unknown" not in SETTINGS.fact_sources + SETTINGS.hypothesis_sources


def test_no_basis_rejection_is_a_text_free_pending_pointer():
    text = "I prefer short answers."
    span = candidate(text).model_copy(update={"extractor": "classifier"})
    (pointer,) = _gate([span], []).rejections
    assert pointer.reason == "no_basis" and pointer.readmission == "pending"
    assert pointer.memory_id == span.memory_id
    assert pointer.provenance == span.provenance
    assert pointer.valid_from == span.valid_from
    assert pointer.extractor_version == "test-1"
    assert text not in pointer.model_dump_json()
    # a withdrawal is not re-admitted by a later grant; an extractor that cannot
    # be re-run offline (LLM, test) leaves no pointer
    withdrawn = _gate(
        [span], [grant(when=at(days=-5)), withdraw(when=at(days=-1))]
    ).rejections
    assert [r.readmission for r in withdrawn] == [None]
    assert _gate([candidate(text)], []).rejections[0].readmission is None


def test_basis_at_checks_the_grant_at_another_time():
    # a grant after the statement: no basis at the message's time, live now
    later = [grant(when=at(days=5))]
    assert _gate([candidate()], later).rejections[0].reason == "no_basis"
    (memory,) = _gate([candidate()], later, basis_at=NOW).memories
    assert memory.valid_from == candidate().valid_from


def test_residual_secret_is_rejected_even_with_a_live_basis():
    # text that went through redaction and still holds a secret: never stored
    leaks = [
        candidate("My password: hunter2xyz is the one I always use."),
        candidate("I prefer the staging login.", slot="login",
                  value="password=hunter2xyz"),
    ]  # fmt: skip
    result = _gate([*leaks, candidate()], [grant()])
    assert [m.memory_id for m in result.memories] == [candidate().memory_id]
    assert [r.reason for r in result.rejections] == ["secret_in_text"] * 2
    assert "hunter2" not in "".join(r.model_dump_json() for r in result.rejections)


def test_no_retention_rule_means_rejected_not_kept_forever():
    bare = SETTINGS.model_copy(update={"retention": {}})
    result = _gate([candidate()], [grant()], settings_=bare)
    assert [r.reason for r in result.rejections] == ["no_retention_rule"]


def test_stored_memory_cites_its_basis_and_expiry_from_policy():
    result = _gate([candidate(kind="preference")], [grant(basis="contract")])
    (memory,) = result.memories
    assert memory.basis == "contract" and memory.consent_id
    days = SETTINGS.retention_days("user_stated", "preference")
    assert memory.expires_at == memory.valid_from + timedelta(days=days)
    assert memory.recorded_at == NOW


def test_retention_is_per_source_and_kind():
    assert (
        SETTINGS.retention_days("model_inferred", "preference")
        == SETTINGS.retention["model_inferred"]["*"]
    )
    assert SETTINGS.retention_days("user_stated", "account_state") is None


@settings(max_examples=60, deadline=None)
@given(
    events=st.lists(
        st.tuples(
            st.sampled_from(["grant", "withdraw"]),
            st.sampled_from(["support", "billing", "*"]),
            st.sampled_from(["consent", "contract", None]),
            st.integers(-10, 10),
        ),
        max_size=6,
    ),
    when=st.integers(-10, 10),
    purpose=st.sampled_from(["support", "billing"]),
)
def test_property_no_memory_without_a_live_basis(events, when, purpose):
    consent = []
    for kind, event_purpose, basis, day in events:
        if kind == "grant":
            if event_purpose == "*" or basis is None:
                continue
            consent.append(grant(purpose=event_purpose, basis=basis, when=at(days=day)))
        else:
            consent.append(
                withdraw(purpose=event_purpose, basis=basis, when=at(days=day))
            )
    item = candidate(purpose=purpose, when=at(days=when))
    result = _gate([item], consent)
    assert len(result.memories) + len(result.rejections) == 1
    for memory in result.memories:
        assert live_grants(consent, "acme", "u-1", purpose, memory.valid_from)


# -- consent re-admission (pipelines.memory.readmit) ---------------------------------

_SAID = "Thanks for the help. I prefer short answers. Can you check the logs?"
_HARBOR = "Thanks for the help. I live near the harbor. Can you check the logs?"


def _message(content: str = _SAID) -> MessageText:
    return MessageText(
        message_id="msg_7",
        session_id="ses_7",
        tenant_id="acme",
        turn=3,
        role="user",
        content=content,
        content_hash="h",
        token_count=12,
        policy_version="p",
        source_ref="s.jsonl#3",
    )


class _Support:
    def classify(self, texts):
        return ["support"] * len(texts)


def _pointer(content: str = _SAID):
    """The pending pointer of the statement in ``content`` (no consent yet)."""
    row = _message(content)
    session = Session(
        session_id=row.session_id,
        tenant_id="acme",
        source_format="canonical",
        source_file="u-1.jsonl",
        source_hash="x",
        started_at=at(),
        metadata='{"subject_id": "u-1"}',
    )
    message = Message(**{**vars(row), "created_at": at(minutes=3)})
    ctx = SessionContext.build(session, [message])
    found = extract_session(ctx, [RuleExtractor(SETTINGS, None)], _Support())
    (span,) = found.candidates
    (pointer,) = _gate([span], []).rejections
    return span, pointer


def _readmit(pointer, message, consent, now=NOW):
    return readmit(
        pointer, message, consent, SETTINGS, now=now, policy_version="p2", run_id="r2"
    )


def test_a_later_grant_readmits_the_span_with_its_provenance_and_time():
    span, pointer = _pointer()
    assert pointer.readmission == "pending" and span.text == "I prefer short answers."
    assert _readmit(pointer, _message(), []) == Readmission()  # still no basis
    later = grant(when=at(days=5))  # given after the statement, live now
    memory = _readmit(pointer, _message(), [later]).memory
    assert memory.memory_id == span.memory_id and memory.text == span.text
    assert memory.provenance == span.provenance and memory.consent_id
    assert memory.valid_from == at(minutes=3) and memory.created_at == NOW
    assert (memory.slot, memory.value) == (span.slot, span.value)
    assert memory.run_id == "r2" and memory.policy_version == "p2"


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        # the message is gone / was redacted differently since (a backfill)
        (lambda p: (p, None), "message_gone"),
        (
            lambda p: (p, _message(_SAID.replace("short", "<PERSON>"))),
            "span_changed",
        ),
        # the rules changed and no longer find this statement at this span
        (
            lambda p: (
                p.model_copy(update={"kind": "rule", "extractor_version": "old"}),
                _message(),
            ),
            "no_candidate",
        ),
        # a classifier span cannot be re-checked without the model
        (
            lambda p: (
                p.model_copy(
                    update={"extractor": "classifier", "extractor_version": "old"}
                ),
                _message(_HARBOR),
            ),
            "extractor_changed",
        ),
    ],
)
def test_a_pointer_that_no_longer_yields_its_candidate_is_closed(change, reason):
    _, pointer = _pointer()
    pointer, message = change(pointer)
    outcome = _readmit(pointer, message, [grant(when=at(days=5))])
    assert outcome == Readmission(closed=reason)


def test_a_classifier_span_of_the_same_extractor_version_is_readmitted():
    # the rules do not match it, so its kind is the classifier's, kept on the
    # pointer (with the confidence): re-admitted without loading the model
    _, pointer = _pointer()
    text = "I live near the harbor."
    fields = {
        "extractor": "classifier",
        "kind": "identity",
        "confidence": 0.61,
        "extractor_version": RuleExtractor(SETTINGS, None).version,
    }
    fields["memory_id"] = memory_id_for(
        "acme", "u-1", "support", "identity", "user_stated", text, pointer.provenance
    )
    pointer = pointer.model_copy(update=fields)
    memory = _readmit(pointer, _message(_HARBOR), [grant()]).memory
    assert (memory.text, memory.kind, memory.confidence) == (text, "identity", 0.61)
    assert memory.memory_id == fields["memory_id"]


def test_readmission_gates_again_retention_is_counted_from_the_statement():
    _, pointer = _pointer()
    late = at(days=800)
    outcome = _readmit(pointer, _message(), [grant(when=at(days=5))], now=late)
    assert outcome == Readmission(closed="expired")


def test_secret_values_and_leftover_identifiers_are_refused():
    """Issue 29: a memory whose value is a credential is refused even when
    redacted; an identifier the redactor missed is refused too."""
    refused = [
        candidate(text="From now on, always use my account pin <SECRET:1a2b3c4d>."),
        candidate(text="my card pin is hidden", value="<PASSWORD:00ff00ff>"),
        candidate(text="My passport number is K4821937."),
        candidate(text="I was born on 14 March 1987."),
    ]
    kept = candidate(text="My passport number is <PASSPORT:1a2b3c4d>.")
    result = _gate([*refused, kept], [grant()])
    assert [m.memory_id for m in result.memories] == [kept.memory_id]
    assert [r.reason for r in result.rejections] == [
        "secret_value",
        "secret_value",
        "identifier_in_text",
        "identifier_in_text",
    ]
