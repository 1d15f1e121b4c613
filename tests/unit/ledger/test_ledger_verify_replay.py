"""Auditing outside summaries, and replaying context policies (pure logic)."""

from __future__ import annotations

import json

import pytest

from ctxledger.pipelines.ledger.replay import (
    DEFAULT_POLICIES,
    SessionView,
    parse_policy,
    replay,
)
from ctxledger.pipelines.ledger.verify import (
    OutsideSummary,
    audit_outside,
    audit_text,
    display_value,
    parse_summaries,
    resource_aliases,
)
from ctxledger.schemas.ledger import ArtifactTrailEntry

GOOD = (
    "Elevated 502s on checkout since 09:40 UTC; incident started 2026-03-14. "
    "Tickets go under employee number 4417 (later corrected to 4471). "
    "Do not restart the payment workers without approval. Refund R-20931 for "
    "$1,249.00 is blocked. The affected shard is pay-shard-7; its failover is "
    "pending approval and needs sign-off from the DBA lead. create_ticket opened "
    "INC-5512. We decided against rolling back the deploy; the deploy is not the "
    "cause. Next step is the post-incident review on Friday."
)


@pytest.fixture(scope="module")
def view(planted_sources, settings):
    return SessionView(planted_sources, settings)


def test_a_complete_outside_summary_passes(planted_sources, settings):
    audit = audit_outside(GOOD, planted_sources, settings, 0, 40)
    assert audit.missing == [] and audit.altered == []
    assert audit.missing_artifacts == [] and audit.changed_artifacts == 1
    assert audit.passed


def test_dropping_pay_shard_7_fails_and_names_it(planted_sources, settings):
    text = GOOD.replace("The affected shard is pay-shard-7; its", "The")
    audit = audit_outside(text, planted_sources, settings, 0, 40)
    assert audit.missing == ["identifier:shard:pay-shard-7"]
    assert not audit.passed


def test_altered_values_and_dropped_artifacts_fail(planted_sources, settings):
    text = (
        GOOD.replace("$1,249.00", "$1,294.00")
        .replace("create_ticket opened INC-5512. ", "")
        .replace("decided against rolling back", "decided to roll back")
    )
    audit = audit_outside(text, planted_sources, settings, 0, 40)
    altered = {c.field.canonical: c.found for c in audit.altered}
    assert altered["amount:USD 1249.00"] == "USD 1294.00"
    assert altered["negation:we decided against rolling back the deploy"] == (
        "negation dropped"
    )
    assert "identifier:ticket:INC-5512" in audit.missing
    assert audit.missing_artifacts == ["api:create_ticket"]


def test_a_window_is_checked_against_its_own_turns(planted_sources, settings):
    summary = OutsideSummary(
        session_id="planted-40", text="employee number 4417", generator="g", window=0
    )
    first, last = summary.turn_range(41, settings.window_turns)
    assert (first, last) == (0, 19)
    audit = audit_outside(summary.text, planted_sources, settings, first, last)
    assert "identifier:shard:pay-shard-7" in audit.missing
    assert "identifier:employee_number:4471" not in {
        c.field.canonical for c in audit.checks
    }
    assert OutsideSummary(
        session_id="s", text="t", generator="g", window=[5, 9]
    ).turn_range(41, 20) == (5, 9)
    assert OutsideSummary(
        session_id="s", text="t", generator="g", window="3-4"
    ).turn_range(41, 20) == (3, 4)


def test_summary_lines_are_validated_without_echoing_them():
    raw = "\n".join(
        [
            json.dumps({"session_id": "s", "text": "t", "generator": "g"}),
            '{"session_id": "s", "text": "secret sk-live-1234" ',
            json.dumps({"session_id": "s", "text": "t", "generator": "g", "x": 1}),
            json.dumps(
                {"session_id": "s", "text": "t", "generator": "g", "window": -1}
            ),
            "",
        ]
    )
    good, bad = parse_summaries(raw)
    assert [n for n, _ in good] == [1]
    assert [(b.line, b.reason.split(":")[0]) for b in bad] == [
        (2, "malformed_json"),
        (3, "invalid_summary"),
        (4, "invalid_summary"),
    ]
    assert all("sk-live" not in b.reason for b in bad)


def test_artifacts_are_recognised_by_path_suffix_or_name():
    aliases = resource_aliases("/repo/src/marshmallow/fields.py")
    assert "src/marshmallow/fields.py" in aliases and "fields.py" in aliases
    trail = [
        ArtifactTrailEntry(
            trail_id="t1",
            tenant_id="a",
            session_id="s",
            turn=3,
            message_id="m",
            tool_name="edit",
            operation="write",
            resource="/repo/src/marshmallow/fields.py",
            outcome="ok",
        )
    ]
    assert audit_text("Fixed rounding in fields.py.", [], trail).passed
    assert audit_text("Fixed rounding in myfields.pyc.", [], trail).missing_artifacts


def test_long_digit_runs_are_masked_for_display():
    assert display_value("acct 4111111111111111") == "acct ************1111"
    assert display_value("pay-shard-8") == "pay-shard-8"


@pytest.mark.parametrize(
    ("spec", "kind", "n"),
    [
        ("full", "full", 0),
        ("sliding:12", "sliding", 12),
        ("pinned-user+last:4", "pinned", 4),
        ("elide-tool-results", "elide", 0),
        ("ledger", "ledger", 0),
    ],
)
def test_policy_specs(spec, kind, n):
    policy = parse_policy(spec)
    assert (policy.kind, policy.n) == (kind, n)


@pytest.mark.parametrize("spec", ["sliding", "sliding:0", "pinned:4", "all", ""])
def test_bad_policy_specs(spec):
    with pytest.raises(ValueError):
        parse_policy(spec)


def test_replay_of_the_planted_session(view):
    results = {
        r.policy: r for r in replay(view, [parse_policy(p) for p in DEFAULT_POLICIES])
    }
    assert "identifier:shard:pay-shard-7" in results["sliding:12"].missing
    kept = set(results["pinned-user+last:4"].carried)
    assert {"identifier:employee_number:4417", "identifier:shard:pay-shard-7"} <= kept
    assert results["full"].missing == [] and results["ledger"].missing == []
    for result in results.values():
        assert len(result.per_turn) == 41
        final = result.final
        assert final["total"] == sum(
            final[b]
            for b in ("system", "tool_definitions", "tool_results", "conversation")
        )
        assert result.session_total["total"] == sum(t["total"] for t in result.per_turn)
        assert final["system"] == 12 and final["tool_definitions"] > 0
    full = results["full"].final["total"]
    assert results["sliding:12"].final["total"] < full
    assert results["pinned-user+last:4"].final["total"] < full
    assert results["elide-tool-results"].final["total"] <= full
    assert results["ledger"].final["total"] < full


def test_policies_keep_what_they_say(view):
    sliding = view.context(parse_policy("sliding:12"), 40)
    assert [i.turn for i in sliding] == [0, *range(29, 41)]
    pinned = view.context(parse_policy("pinned-user+last:4"), 40)
    assert [i.turn for i in pinned if i.label == "pinned"][:2] == [2, 7]
    assert [i.turn for i in pinned if i.label != "pinned"] == [0, 37, 38, 39, 40]
    ledger = view.context(parse_policy("ledger"), 40)
    assert [(i.turn, i.label) for i in ledger] == [
        (0, "system"),
        (39, "summary"),
        (40, "user"),
    ]
    assert view.context(parse_policy("ledger"), 10) == view.context(
        parse_policy("full"), 10
    )
    # Tool results: full output tokens; the raw text is what carries facts.
    full = view.context(parse_policy("full"), 11)
    assert full[-1].bucket == "tool_results" and '"pay-shard-7"' in full[-1].text
