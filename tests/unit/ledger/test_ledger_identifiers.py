"""Protected fields cover identifiers and counts (issue 31): commit hashes,
versions, sizes and limits, test counts. ``verify`` names the field when one
of them changes, in a summary written elsewhere and in a stored entry whose
sources changed. The session is ``tests/fixtures/planted/pool_incident.jsonl``;
it also checks the decision, next-step and tool-result sections of its ledger.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ctxledger.pipelines.ledger.build import LedgerBuilder, SessionSources
from ctxledger.pipelines.ledger.protected import find_identifiers
from ctxledger.pipelines.ledger.verify import audit_outside, reverify_entry

POOL = (
    Path(__file__).resolve().parents[2] / "fixtures" / "planted" / "pool_incident.jsonl"
)
#: An outside summary that carries every value of the session.
GOOD = (
    "Commit 9f3c2ab cut the orders-api pool size from 256 to 64; requests queue. "
    "The DB cap is 300 connections, the peak ~200. Doubling the pool size to 128 "
    "was rejected: it still queues at the peak. Revert 9f3c2ab to 256; the "
    "integration tests report 48 passed, 0 failed. The revert needs approval on "
    "change request CAB-5521 before we deploy it; then refund order A-3381."
)


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("revert 9f3c2ab now", [("commit", "9f3c2ab")]),
        ("DuckDB 1.4.4 and v2.3", [("version", "1.4.4"), ("version", "v2.3")]),
        ("pool size 256 -> 128", [("pool_size", "256"), ("pool_size", "128")]),
        ("the DB cap 300 and peak ~200", [("cap", "300"), ("peak", "200")]),
        (
            "timeout 30s, batch size 1,024",
            [("timeout", "30s"), ("batch_size", "1,024")],
        ),
        ("48 passed, 0 failed", [("tests_passed", "48"), ("tests_failed", "0")]),
        ("Ran 12 tests in 0.3s", [("tests", "12")]),
        # not commits or versions: words, paths, pseudonyms, dates, addresses
        (
            "deadbeef 1234567 /tmp/abc1234f <PERSON:3f9a1c2b>",
            [("pseudonym", "<PERSON:3f9a1c2b>")],
        ),
        ("on 2026-03-14 at 10.0.0.1 the workers 2026-03-14", []),
    ],
)
def test_identifiers_and_counts_are_found_with_their_label(text, found):
    assert [(f.label, f.value) for f in find_identifiers(text)] == found


@pytest.fixture(scope="module")
def pool(load, as_sources) -> SessionSources:
    (session,) = load(POOL)
    return as_sources(session)


def _replace(sources: SessionSources, turn: int, old: str, new: str) -> SessionSources:
    messages = []
    for m in sources.messages:
        if m.turn == turn:
            assert old in m.content
            m = m.model_copy(
                update={
                    "content": m.content.replace(old, new),
                    "content_hash": f"x{turn}",
                    "message_id": f"msg_changed_{turn}",
                }
            )
        messages.append(m)
    return SessionSources(
        sources.session, messages, sources.observations, sources.outputs
    )


def test_a_summary_that_keeps_every_value_passes(pool, settings):
    audit = audit_outside(GOOD, pool, settings, 0, 12)
    assert audit.missing == [] and audit.altered == [], (audit.missing, audit.altered)


@pytest.mark.parametrize(
    ("old", "new", "field"),
    [
        ("9f3c2ab", "9f3c2bb", "identifier:commit:9f3c2ab"),
        ("256", "512", "identifier:pool_size:256"),
        ("48 passed", "46 passed", "identifier:tests_passed:48"),
    ],
)
def test_verify_names_a_changed_commit_pool_size_or_test_count(
    pool, settings, old, new, field
):
    """Each drift alone fails the audit, naming the field (it exited 0)."""
    audit = audit_outside(GOOD.replace(old, new), pool, settings, 0, 12)
    named = {c.field.canonical for c in audit.altered} | set(audit.missing)
    assert field in named, (audit.missing, audit.altered)
    assert not audit.passed


@pytest.mark.parametrize(
    ("turn", "old", "new", "field"),
    [
        (1, "commit 9f3c2ab", "commit 7c41d0e", "identifier:commit:7c41d0e"),
        (1, "from 256 to 64", "from 256 to 32", "identifier:pool_size:32"),
        (9, "48 passed", "47 passed", "identifier:tests_passed:47"),
    ],
)
def test_a_stored_ledger_drifts_when_a_source_changes_one(
    pool, settings, turn, old, new, field
):
    entry = LedgerBuilder(pool, settings).build().session_entry
    assert entry.verified
    audit = reverify_entry(entry, _replace(pool, turn, old, new), settings)
    assert not audit.entry.verified and "drift" in audit.entry.rebuild_required_reasons
    assert field in audit.entry.missing_fields + audit.entry.altered_fields


def test_the_ledger_reads_results_decisions_and_the_pending_chain(pool, settings):
    entry = LedgerBuilder(pool, settings).build().session_entry
    sections = entry.sections
    text = entry.summary_text
    # a passing test run is a pass, never an error or a rejected option
    (tests,) = [r for r in sections.tool_results if r.tool_name == "run_tests"]
    assert tests.status == "ok" and "error" not in tests.facts
    assert "48 passed, 0 failed" in tests.facts
    assert not any("48 passed" in r.text for r in sections.rejected_options)
    # the rejection keeps what was rejected (doubling to 128) and why
    (rejected,) = [r for r in sections.rejected_options if "rejected it" in r.text]
    assert "128" in rejected.text and "300" in rejected.text and "200" in rejected.text
    # next steps: the pending chain, not the request for a summary
    steps = " ".join(n.text for n in sections.next_steps)
    assert "summarise where we are" not in steps
    assert "CAB-5521" in steps and "A-3381" in steps
    for value in ("9f3c2ab", "256", "128", "300", "48"):
        assert value in text
