"""End to end: the nightly job builds ledgers; ``verify`` and ``replay`` read them.

One nightly run (real redaction, real DuckLake) over the 40-turn planted-fact
transcript, then the CLI commands in-process. (The trail of SWE-agent and
OpenHands runs is checked against their diffs in the unit tests: redacting those
long runs here would cost most of the suite's time budget.)
"""

from __future__ import annotations

import json
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from ctxledger.jobs import cli
from ctxledger.jobs.nightly import run_nightly
from ctxledger.schemas import RunManifest
from ctxledger.schemas.arrow import to_table
from ctxledger.schemas.transcript import Message
from ctxledger.warehouse import Warehouse

ROOT = Path(__file__).resolve().parents[2]
PLANTED = ROOT / "tests" / "fixtures" / "planted" / "forty_turns.jsonl"

# The summary names the reporter: the transcript's "Priya" is a name the redactor
# pseudonymises, and a pseudonym is a protected identifier the ledger checks for.
GOOD = (
    "Reported by Priya (payments on-call): "
    "elevated 502s on checkout since 09:40 UTC; incident started 2026-03-14. "
    "Tickets go under employee number 4417, corrected to 4471. Do not restart the "
    "payment workers without approval. Refund R-20931 for $1,249.00 is blocked. "
    "The affected shard is pay-shard-7; its failover is pending approval and needs "
    "sign-off from the DBA lead. create_ticket opened INC-5512. We decided against "
    "rolling back the deploy; the deploy is not the cause. Next step is the "
    "post-incident review on Friday."
)
DROPPED = GOOD.replace("The affected shard is pay-shard-7; its", "The")

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory):
    root = tmp_path_factory.mktemp("ledger")
    landing = root / "landing"
    (landing / "canonical").mkdir(parents=True)
    shutil.copy(PLANTED, landing / "canonical" / PLANTED.name)
    result = run_nightly(landing, root / "wh")
    assert result.manifest is not None and result.manifest.status == "committed"
    return root / "wh", result.manifest


@pytest.fixture()
def run(monkeypatch):
    """Run a CLI command in-process; wide console so nothing wraps."""
    monkeypatch.setattr(cli, "console", Console(width=400, color_system=None))
    runner = CliRunner()

    def invoke(*args: str):
        return runner.invoke(cli.app, [str(a) for a in args])

    return invoke


def _json_lines(output: str) -> list[dict]:
    """``-o json`` is one JSON array (docs/cli.md)."""
    rows = json.loads(output)
    assert isinstance(rows, list)
    return rows


def test_nightly_commits_ledger_and_trail_in_balance(warehouse):
    path, manifest = warehouse
    ledger = next(c for c in manifest.stage_counts if c.stage == "ledger")
    assert (ledger.records_in, ledger.records_out, ledger.dead) == (1, 1, 0)
    with Warehouse.open(path) as wh:
        scopes = wh.query(
            "SELECT scope, count(*), bool_and(verified) FROM compression_ledger "
            "GROUP BY ALL ORDER BY ALL"
        ).fetchall()
        trail = wh.query(
            "SELECT turn, operation, resource, outcome, artifact_ref IS NOT NULL "
            "FROM artifact_trail ORDER BY turn"
        ).fetchall()
        summary = wh.query(
            "SELECT summary_text FROM compression_ledger WHERE scope = 'session'"
        ).fetchone()[0]
        raw = [r[0] for r in wh.query("SELECT content FROM artifacts").fetchall()]
    assert scopes == [("session", 1, True), ("window", 3, True)]
    assert trail == [
        (4, "read", "api:get_error_rate", "ok", True),
        (10, "read", "api:get_replication_lag", "ok", True),
        (21, "create", "api:create_ticket", "ok", True),
        (35, "test", "run_tests checkout-smoke", "passed", True),
    ]
    assert all(output not in summary for output in raw)
    assert "4417" in summary and "pay-shard-7" in summary


def test_verify_stored_ledger_passes(warehouse, run):
    path, _ = warehouse
    done = run("verify", "--warehouse", path, "--output", "json")
    assert done.exit_code == 0, done.output
    rows = _json_lines(done.output)
    assert len(rows) == 4 and all(r["passed"] for r in rows)


def test_outside_summary_dropping_pay_shard_7_fails_verify(warehouse, run, tmp_path):
    path, _ = warehouse
    good = tmp_path / "good.jsonl"
    good.write_text(
        json.dumps({"session_id": "planted-40", "text": GOOD, "generator": "llm-a"})
        + "\n"
    )
    both = tmp_path / "both.jsonl"
    both.write_text(
        good.read_text()
        + json.dumps(
            {
                "session_id": "planted-40",
                "window": "session",
                "text": DROPPED,
                "generator": "llm-b",
            }
        )
        + "\n"
    )
    done = run("verify", "--warehouse", path, "--summaries", both)
    assert done.exit_code == 1
    assert "identifier:shard:pay-shard-7" in done.output
    assert "FAIL" in done.output
    rows = _json_lines(
        run("verify", "--warehouse", path, "--summaries", both, "-o", "json").output
    )
    assert [(r["generator"], r["passed"], r["missing"]) for r in rows] == [
        ("llm-a", True, []),
        ("llm-b", False, ["identifier:shard:pay-shard-7"]),
    ]


def test_replay_sliding_loses_the_shard_and_pinned_keeps_both(warehouse, run):
    path, _ = warehouse
    done = run("replay", "--warehouse", path, "--session", "planted-40")
    assert done.exit_code == 0, done.output
    for policy in ("full", "sliding:12", "pinned-user+last:4", "ledger"):
        assert policy in done.output
    done = run(
        "replay",
        "--warehouse",
        path,
        "--session",
        "planted-40",
        "--policy",
        "sliding:12",
        "--policy",
        "pinned-user+last:4",
        "--policy",
        "full",
        "-o",
        "json",
    )
    rows = {r["policy"]: r for r in _json_lines(done.output)}
    assert "identifier:shard:pay-shard-7" in rows["sliding:12"]["missing"]
    pinned = set(rows["pinned-user+last:4"]["carried"])
    assert {"identifier:employee_number:4417", "identifier:shard:pay-shard-7"} <= pinned
    for row in rows.values():
        assert row["session_total"]["total"] > row["final"]["total"] > 0
        assert set(row["final"]) == {
            "system",
            "tool_definitions",
            "tool_results",
            "conversation",
            "total",
        }
    assert rows["sliding:12"]["final"]["total"] < rows["full"]["final"]["total"]


def test_replay_of_an_unknown_session_fails_cleanly(warehouse, run):
    path, _ = warehouse
    done = run("replay", "--warehouse", path, "--session", "nope")
    assert done.exit_code != 0
    assert "no session 'nope'" in str(done.exception) or "nope" in done.output


def test_a_changed_source_value_fails_the_stored_ledger(warehouse, run):
    """A later run holds a new version of turn 19 (pay-shard-7 -> pay-shard-8)
    that no ledger was rebuilt from yet: the summaries covering it no longer
    verify and ask for a rebuild. (Runs last: it changes the warehouse.)"""
    path, _ = warehouse
    with Warehouse.open(path) as wh:
        row = wh.query(
            "SELECT m.* FROM messages m JOIN sessions s USING (session_id) "
            "WHERE s.external_id = 'planted-40' AND m.turn = 19"
        ).arrow()
        row = (row.read_all() if hasattr(row, "read_all") else row).to_pylist()[0]
        old = Message.model_validate(row)
        started = datetime.now(UTC) + timedelta(minutes=1)
        new = old.model_copy(
            update={
                "message_id": "msg_changed_19",
                "content": old.content.replace("pay-shard-7", "pay-shard-8"),
                "content_hash": "changed",
                "run_id": "run_changed",
            }
        )
        manifest = RunManifest(
            run_id="run_changed",
            job="test",
            status="committed",
            started_at=started,
            finished_at=started,
            policy_version=old.policy_version,
            code_version="test",
            runner="none",
        )
        wh.commit_staged(
            "run_changed",
            {},
            {
                "messages": to_table(Message, [new.row()]),
                "runs": to_table(RunManifest, [manifest.row()]),
            },
            {"job": "test"},
        )
    done = run("verify", "--warehouse", path, "--session", "planted-40", "-o", "json")
    assert done.exit_code == 1
    rows = {r["window"]: r for r in _json_lines(done.output)}
    assert rows["0 (t0-19)"]["passed"] is False
    assert rows["0 (t0-19)"]["rebuild_required"] is True
    assert rows["0 (t0-19)"]["altered"] == ["identifier:shard:pay-shard-8"]
    assert rows["session"]["missing"] == ["identifier:shard:pay-shard-8"]
    assert "checksum changed" in rows["session"]["note"]


POOL = ROOT / "tests" / "fixtures" / "planted" / "pool_incident.jsonl"
#: An outside summary of the pool incident that keeps every value.
POOL_SUMMARY = (
    "Commit 9f3c2ab cut the orders-api pool size from 256 to 64; requests queue. "
    "The DB cap is 300 connections, the peak ~200. Doubling the pool size to 128 "
    "was rejected: it still queues at the peak. Revert 9f3c2ab to 256; the "
    "integration tests report 48 passed, 0 failed. The revert needs approval on "
    "change request CAB-5521 before we deploy it; then refund order A-3381."
)


def test_verify_exits_non_zero_on_a_changed_commit_pool_size_or_test_count(
    tmp_path, run
):
    """Issue 31: these three drifts exited 0; each now fails, naming the field."""
    landing = tmp_path / "landing" / "canonical"
    landing.mkdir(parents=True)
    shutil.copy(POOL, landing / POOL.name)
    result = run_nightly(tmp_path / "landing", tmp_path / "wh")
    assert result.manifest is not None and result.manifest.status == "committed"
    lines = [
        {"session_id": "pool-incident", "text": text, "generator": name}
        for name, text in (
            ("kept", POOL_SUMMARY),
            ("commit", POOL_SUMMARY.replace("9f3c2ab", "9f3c2bb")),
            ("pool_size", POOL_SUMMARY.replace("256", "512")),
            ("test_count", POOL_SUMMARY.replace("48 passed", "46 passed")),
        )
    ]
    path = tmp_path / "summaries.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    done = run("verify", "--warehouse", tmp_path / "wh", "--summaries", path)
    assert done.exit_code == 1, done.output
    rows = {
        r["generator"]: r
        for r in _json_lines(
            run(
                "verify", "--warehouse", tmp_path / "wh", "--summaries", path,
                "-o", "json",
            ).output
        )
    }  # fmt: skip
    assert rows["kept"]["passed"], rows["kept"]
    for generator, field in (
        ("commit", "identifier:commit:9f3c2ab"),
        ("pool_size", "identifier:pool_size:256"),
        ("test_count", "identifier:tests_passed:48"),
    ):
        row = rows[generator]
        assert not row["passed"]
        named = row["missing"] + [a.split(" ")[0] for a in row["altered"]]
        assert any(field in n for n in named), row
