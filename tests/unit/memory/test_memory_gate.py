"""Consent liveness and the gate: no memory without a live basis and a retention."""

from __future__ import annotations

from datetime import timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from memfactory import at, candidate, grant, withdraw

from pipelines.memory.consent import live_basis, live_grants
from pipelines.memory.gate import gate_candidates
from schemas.policy import load_policy

SETTINGS = load_policy(None).memory
NOW = at(days=10)


def _gate(candidates, consent, now=NOW, settings_=SETTINGS):
    return gate_candidates(
        candidates, consent, settings_, now=now, policy_version="p", run_id="r"
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
        (lambda: candidate(source="unknown"), [grant()], "unknown_source"),
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
