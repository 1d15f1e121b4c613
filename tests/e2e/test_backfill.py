"""End to end: a policy change (one more recognizer, a shorter retention) and
``ctxledger backfill`` change exactly the affected rows, in one snapshot, and
the stored diff matches counts done independently in SQL over the two snapshots.

Tests run in file order on one module-scoped warehouse.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from ctxledger.jobs.backfill import close_over_sessions, run_backfill
from ctxledger.jobs.cli import app
from ctxledger.jobs.nightly import run_nightly
from ctxledger.pipelines.redact.registry import load_checked_policy
from ctxledger.warehouse import Warehouse

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
PLANTED = ROOT / "tests" / "fixtures" / "planted" / "forty_turns.jsonl"
POLICY = ROOT / "pipelines" / "redact" / "default_policy.yaml"

#: Synthetic support chats: some messages carry a URL (found only once the new
#: policy enables presidio's URL recognizer), the others must stay untouched.
CHATS = {
    "acme": [
        "The status page at https://status.example.com/incidents/42 shows the outage.",
        "Thanks, I will keep an eye on it.",
        "The runbook lives at https://wiki.example.org/runbooks/db-failover now.",
        "Restarting the worker fixed the queue backlog.",
    ],
    "globex": [
        "See https://docs.example.net/guide for the migration steps.",
        "The migration finished without errors.",
    ],
}


def _chat(tenant: str, lines: list[str]) -> str:
    return "".join(
        json.dumps(
            {"session_id": f"{tenant}-chat", "turn": i, "role": "user",
             "content": text, "created_at": f"2026-03-20T10:{i:02d}:00Z"}
        ) + "\n"
        for i, text in enumerate(lines)
    )  # fmt: skip


def _policy(base: Path, name: str, *, urls: bool, fact_days: int) -> Path:
    data = yaml.safe_load(POLICY.read_text())
    data["memory"]["retention"] = {
        "user_stated": {"rule": 3650, "preference": 3650, "identity": 3650,
                        "fact": fact_days},
        "system_record": {"*": 3650},
        "model_inferred": {"*": 3650},
    }  # fmt: skip
    if urls:
        data["pii"]["entities"].append(
            {"type": "URL", "score_threshold": 0.5, "operator": "pseudonymize"}
        )
    path = base / name
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.fixture(scope="module")
def history(tmp_path_factory):
    base = tmp_path_factory.mktemp("backfill")
    landing = base / "landing"
    (landing / "tenant=acme" / "subject=priya").mkdir(parents=True)
    shutil.copy(PLANTED, landing / "tenant=acme" / "subject=priya" / PLANTED.name)
    for tenant, lines in CHATS.items():
        folder = landing / f"tenant={tenant}" / "chats"
        folder.mkdir(parents=True)
        (folder / "support.jsonl").write_text(_chat(tenant, lines))
    consent = base / "consent.jsonl"
    consent.write_text(
        json.dumps(
            {"event": "grant", "tenant_id": "acme", "subject_id": "priya",
             "purpose": "support", "basis": "contract",
             "at": "2026-01-01T00:00:00Z"}
        ) + "\n"
    )  # fmt: skip
    old = _policy(base, "old.yaml", urls=False, fact_days=3650)
    # The planted transcript is from 2026-03: 30 days of facts have ended.
    new = _policy(base, "new.yaml", urls=True, fact_days=30)
    warehouse = base / "wh"
    run_nightly(landing, warehouse, policy_file=old, consent=consent)
    with Warehouse.open(warehouse) as wh:
        base_snapshot = wh.current_snapshot()
    result = CliRunner().invoke(
        app,
        ["backfill", "--policy", str(new), "--tenant", "acme", "-w", str(warehouse)],
    )
    assert result.exit_code == 0, result.output
    with Warehouse.open(warehouse) as wh:
        (run_id,) = wh.query(
            "SELECT run_id FROM runs WHERE job = 'backfill'"
        ).fetchone()
        snapshot = wh.snapshot_for_run(run_id)
    return {
        "warehouse": warehouse,
        "base": base_snapshot,
        "snapshot": snapshot,
        "run_id": run_id,
        "old": old,
        "new": new,
        "output": result.output,
    }


def _diff(wh, run_id):
    rows = wh.query(
        "SELECT section, item, added, removed, updated FROM backfill_diffs "
        "WHERE run_id = ?",
        [run_id],
    ).fetchall()
    return {(s, i): (a, r, u) for s, i, a, r, u in rows}


def test_backfill_commits_one_snapshot_with_the_run_id(history):
    with Warehouse.open(history["warehouse"]) as wh:
        after = [s for s in wh.snapshots() if s[0] > history["base"]]
    assert [s[2] for s in after] == [f"run {history['run_id']}"]
    assert history["snapshot"] == after[0][0]
    assert "diff against snapshot" in history["output"]
    assert "URL" in history["output"]


def test_redaction_diff_matches_sql_over_the_two_snapshots(history):
    base, new = history["base"], history["snapshot"]
    positions = (
        "SELECT session_id, turn, f.entity_type AS et, count(*) AS n FROM "
        "(SELECT session_id, turn, unnest(pii) AS f FROM messages AT (VERSION => {v})) "
        "GROUP BY ALL"
    )
    with Warehouse.open(history["warehouse"]) as wh:
        independent = dict(
            wh.query(
                f"SELECT coalesce(o.et, n.et), "
                f"sum(greatest(coalesce(n.n, 0) - coalesce(o.n, 0), 0)) "
                f"FROM ({positions.format(v=base)}) o "
                f"FULL JOIN ({positions.format(v=new)}) n "
                "USING (session_id, turn, et) GROUP BY 1"
            ).fetchall()
        )
        diff = _diff(wh, history["run_id"])
    # Exactly the two acme URLs are new redactions; globex is out of scope.
    assert independent["URL"] == 2
    assert diff[("redactions", "URL")][0] == independent["URL"]
    assert all(v == 0 for k, v in independent.items() if k != "URL")


def test_only_affected_messages_changed_and_they_carry_the_new_policy(history):
    base, new = history["base"], history["snapshot"]
    # the version jobs stamp: the policy's hash and the detector's fingerprint
    new_version = load_checked_policy(history["new"]).policy_version
    with Warehouse.open(history["warehouse"]) as wh:
        gone = wh.query(
            f"SELECT tenant_id, content FROM messages AT (VERSION => {base}) "
            f"WHERE message_id NOT IN (SELECT message_id FROM messages "
            f"AT (VERSION => {new}))"
        ).fetchall()
        added = wh.query(
            f"SELECT tenant_id, content, policy_version FROM messages "
            f"AT (VERSION => {new}) WHERE message_id NOT IN "
            f"(SELECT message_id FROM messages AT (VERSION => {base}))"
        ).fetchall()
        diff = _diff(wh, history["run_id"])
        unchanged_versions = wh.query(
            "SELECT DISTINCT policy_version FROM messages "
            "WHERE content NOT LIKE '%<URL:%'"
        ).fetchall()
    assert sorted(t for t, _ in gone) == ["acme", "acme"]
    assert all("https://" in c for _, c in gone)
    assert len(added) == 2
    assert all(
        t == "acme" and "<URL:" in c and "https://" not in c and v == new_version
        for t, c, v in added
    )
    assert diff[("tables", "messages")][:2] == (len(added), len(gone))
    old_version = load_checked_policy(history["old"]).policy_version
    assert unchanged_versions == [(old_version,)]


def test_shorter_retention_removes_exactly_the_expired_facts(history):
    base, new = history["base"], history["snapshot"]
    with Warehouse.open(history["warehouse"]) as wh:
        removed = wh.query(
            f"SELECT kind FROM memories AT (VERSION => {base}) WHERE memory_id "
            f"NOT IN (SELECT memory_id FROM memories AT (VERSION => {new}))"
        ).fetchall()
        kept = wh.query(
            f"SELECT count(*) FROM memories AT (VERSION => {new})"
        ).fetchone()[0]
        diff = _diff(wh, history["run_id"])
    assert removed and {k for (k,) in removed} == {"fact"}
    assert kept > 0  # rules and preferences keep their longer retention
    assert diff[("memories", "expired")][1] == len(removed)
    assert diff[("tables", "memories")][1] == len(removed)


def test_same_backfill_again_changes_nothing(history):
    with Warehouse.open(history["warehouse"]) as wh:
        before = wh.current_snapshot()
    result = run_backfill(
        history["warehouse"], policy_file=history["new"], tenant="acme"
    )
    assert result.changes == [] and result.snapshot_id is None
    with Warehouse.open(history["warehouse"]) as wh:
        assert wh.current_snapshot() == before


def test_sessions_spread_over_files_are_closed_over():
    edges = [
        ("s1", "acme", "a.jsonl"),
        ("s1", "acme", "b.jsonl"),
        ("s2", "acme", "b.jsonl"),
        ("s3", "acme", "c.jsonl"),
        ("s4", "globex", "a.jsonl"),
    ]
    files, sessions = close_over_sessions({("acme", "a.jsonl")}, edges)
    assert files == {("acme", "a.jsonl"), ("acme", "b.jsonl")}
    assert sessions == {"s1", "s2"}
