"""The pure ``pack_context`` (``serving.context_pack``): the design's packing
example as literal asserts, plus the selection rules the warehouse path shares.

The example: a shop's refund policy in two versions (v3 current, v2 superseded
and stale), a forum post, and another tenant's copy of the policy. Window 4000
with 1500 for the output and 500 overhead leaves 2000 tokens.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from ctxledger.serving.context_pack import (
    ContextCandidate,
    PackError,
    StaticScorer,
    greedy_select,
    pack_context,
)

AT = datetime(2025, 6, 1, tzinfo=UTC)


def _item(item_id, tokens, *, tenant="shop", trust="trusted", **kw):
    return ContextCandidate(
        item_id=item_id,
        kind="evidence",
        source=f"document:{item_id}",
        trust=trust,
        retrieved_at=AT,
        version=kw.pop("version", "1"),
        token_count=tokens,
        tenant=tenant,
        **kw,
    )


V3 = _item("policy-v3", 900, version="v3", freshness=0.9, relevance=0.9)
V2 = _item(
    "policy-v2", 900, version="v2", freshness=0.2, relevance=0.9, superseded=True
)
FORUM = _item("forum-post", 400, trust="untrusted", freshness=1.0, relevance=0.6)
RIVAL = _item("other-tenant-doc", 900, tenant="rival", freshness=1.0, relevance=1.0)
CANDIDATES = [V2, RIVAL, FORUM, V3]


def test_design_example_window_4000():
    result = pack_context(
        CANDIDATES, "shop", window=4000, max_output=1500, overhead=500
    )
    assert result.budget == 2000
    assert [c.item_id for c in result.selected] == ["policy-v3", "forum-post"]
    assert result.used == 1300
    assert result.reasons == {"policy-v2": "superseded"}
    assert result.withheld == 1
    assert all(c.tenant == "shop" for c in result.selected)
    listed = [c.item_id for c in result.selected] + list(result.reasons)
    assert "other-tenant-doc" not in listed


def test_design_example_window_5000_still_leaves_v2_out():
    # 3000 tokens: v2 (900) would fit beside v3 and the post; it is superseded
    result = pack_context(
        CANDIDATES, "shop", window=5000, max_output=1500, overhead=500
    )
    assert result.budget == 3000
    assert result.used == 1300 and result.used <= result.budget
    assert {c.item_id for c in result.selected} == {"policy-v3", "forum-post"}
    assert result.reasons == {"policy-v2": "superseded"}


def test_design_example_v2_alone_is_not_selected():
    result = pack_context([V2], "shop", window=5000, max_output=1500, overhead=500)
    assert result.selected == []
    assert result.used == 0
    assert result.reasons == {"policy-v2": "superseded"}


def test_another_tenant_alone_is_neither_selected_nor_listed():
    result = pack_context([RIVAL], "shop", window=5000, max_output=0, overhead=0)
    assert result.selected == [] and result.dropped == [] and result.withheld == 1


def test_budget_arithmetic_and_over_budget():
    # 2500 - 1500 - 500 = 500: v3 (900) does not fit, the post (400) does
    result = pack_context(
        CANDIDATES, "shop", window=2500, max_output=1500, overhead=500
    )
    assert result.budget == 500 and result.used == 400
    assert [c.item_id for c in result.selected] == ["forum-post"]
    assert result.reasons == {"policy-v2": "superseded", "policy-v3": "over_budget"}
    with pytest.raises(PackError, match="smaller than max output"):
        pack_context(CANDIDATES, "shop", window=1999, max_output=1500, overhead=500)


def test_utility_orders_selection_and_trust_sets_authority():
    # v3: 0.9 x 1.0 x 0.9 = 0.81; the post: 0.6 x 0.6 (untrusted) x 1.0 = 0.36
    assert V3.value == pytest.approx(0.81)
    assert FORUM.value == pytest.approx(0.36)
    result = pack_context([FORUM, V3], "shop", window=1000, max_output=0, overhead=0)
    assert [c.item_id for c in result.selected] == ["policy-v3"]
    assert result.reasons == {"forum-post": "over_budget"}


def test_duplicates_low_relevance_and_worthless_items():
    copy = _item("policy-v3-copy", 900, relevance=0.9, freshness=0.9, content_key="h3")
    original = _item("policy-v3", 900, relevance=0.9, freshness=0.9, content_key="h3")
    unrelated = _item("recipe", 100, relevance=0.05)
    stale = _item("ancient", 100, relevance=0.5, freshness=0.0)
    result = pack_context(
        [copy, original, unrelated, stale],
        "shop",
        window=5000,
        max_output=0,
        overhead=0,
        min_relevance=0.1,
    )
    # equal utility: the lower id goes first, its copy is the duplicate
    assert [c.item_id for c in result.selected] == ["policy-v3"]
    assert result.reasons == {
        "recipe": "low_relevance",
        "policy-v3-copy": "duplicate",
        "ancient": "non_positive_utility",
    }


def test_untrusted_items_go_in_only_above_their_relevance_floor():
    """Low trust is never filler: an untrusted item under
    ``untrusted_min_relevance`` is dropped though the budget has room, a
    trusted one at the same relevance is not."""
    forum = _item("forum-post", 100, trust="untrusted", relevance=0.3)
    wiki = _item("wiki-page", 100, trust="trusted", relevance=0.3)
    answer = _item("forum-answer", 100, trust="untrusted", relevance=0.7)
    noise = _item("recipe", 100, trust="untrusted", relevance=0.05)
    result = pack_context(
        [forum, wiki, answer, noise],
        "shop",
        window=5000,
        max_output=0,
        overhead=0,
        min_relevance=0.1,
        untrusted_min_relevance=0.4,
    )
    assert [c.item_id for c in result.selected] == ["forum-answer", "wiki-page"]
    assert result.reasons == {
        "forum-post": "untrusted_low_relevance",
        "recipe": "low_relevance",
    }


def test_mandatory_items_go_first_or_fail():
    result = pack_context(
        CANDIDATES,
        "shop",
        window=4000,
        max_output=1500,
        overhead=500,
        mandatory=["forum-post"],
    )
    assert [c.item_id for c in result.selected] == ["forum-post", "policy-v3"]
    with pytest.raises(PackError, match="superseded"):
        pack_context(CANDIDATES, "shop", 5000, 0, 0, mandatory=["policy-v2"])
    with pytest.raises(PackError, match="not found"):
        pack_context(CANDIDATES, "shop", 5000, 0, 0, mandatory=["other-tenant-doc"])
    with pytest.raises(PackError, match="need 1300 tokens but the budget is 1000"):
        pack_context(
            CANDIDATES, "shop", 1000, 0, 0, mandatory=["policy-v3", "forum-post"]
        )


def test_input_order_does_not_change_the_result():
    forward = pack_context(CANDIDATES, "shop", 4000, 1500, 500)
    backward = pack_context(list(reversed(CANDIDATES)), "shop", 4000, 1500, 500)
    assert forward.selected == backward.selected
    assert forward.reasons == backward.reasons


def test_greedy_select_reports_decisions_as_they_happen():
    items = [_item("a", 10, relevance=0.9), _item("b", 10, relevance=0.8)]
    events = []
    picked, dropped, used = greedy_select(
        items,
        15,
        StaticScorer([c.value for c in items]),
        on_select=lambda i, forced: events.append(("select", i, forced)),
        on_drop=lambda i, reason: events.append(("drop", i, reason)),
    )
    assert events == [("select", 0, False), ("drop", 1, "over_budget")]
    assert picked == [(0, False)] and dropped == [(1, "over_budget")] and used == 10
