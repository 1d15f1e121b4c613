"""Kill -9 of `ctxledger nightly` at random points never leaves a partial snapshot.

A base warehouse (S0) holds one committed run over landing A. The next run, over
landing B (A plus a new transcript that supersedes a memory of A, an artifact
past retention, a bad line, a new document), run once without interruption,
gives the reference state S1 and the run's timeline. Then, with the warehouse
reset to S0, ``TRIALS`` nightly subprocesses are killed with SIGKILL (the whole
process group) after a delay drawn from a seeded RNG, in turn: anywhere in the
run, in its writing and commit phase (from the moment its staging folder
appeared in the reference run), and inside its commit step (counted from the
moment the trial run itself first touches the data files). After each kill
the catalog must open and every table must hold exactly S0's rows or exactly
S1's rows. A killed trial's warehouse, debris included, carries over to the
next trial; a trial that completed is reset to S0. Finally the nightly reruns
to completion and the tables must equal the reference's rows exactly, with no
unknown data file and no staging folder left. (A DuckLake catalog stores its
data path, so every state lives at one warehouse path; S0 is restored from a
file copy.) Every job is its own process, forked from one server that imported
Beam, torch and spaCy once (``tests/forked_cli.py``), in its own process group,
so the kill points fall in the job's work rather than in Python's imports.

The policy keeps no history (``keep_snapshots_days: 0``, no orphan grace), so
every run also expires snapshots and deletes files while it can be killed.
Run-time columns (start/finish times, the run's config, stage timings, the
ledger's build time, the memories' transaction times, history counts) are left
out of the comparison.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import time
from datetime import date, datetime
from pathlib import Path

import pytest
import yaml
from forked_cli import JobServer

from ctxledger.warehouse import Warehouse
from ctxledger.warehouse.tables import TABLES

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
POLICY = ROOT / "pipelines" / "redact" / "default_policy.yaml"
TRIALS = int(os.environ.get("CTXLEDGER_KILL_TRIALS", "10"))
SEED = 20260311

#: Columns that hold when or where a run happened, not what it committed.
RUN_TIME = {
    "runs": {"started_at", "finished_at", "config", "stage_timings"},
    "compression_ledger": {"created_at"},
    # Transaction time: when the warehouse learned a memory (the run's clock).
    "memories": {"recorded_at", "superseded_at"},
    "memory_rejections": {"recorded_at"},
}
#: Counts of ``runs.retention`` that depend on the warehouse's history and
#: debris (a killed run leaves some), not on the rows.
HISTORY_COUNTS = {
    "snapshots_expired",
    "files_deleted",
    "orphan_files_deleted",
    "stale_run_dirs_removed",
}


def _line(session, turn, role, content, created_at, **extra):
    row = {"session_id": session, "turn": turn, "role": role, "content": content,
           "created_at": created_at, **extra}  # fmt: skip
    return json.dumps(row) + "\n"


# fmt: off
CHAT_A = "".join(
    [
        _line("dana-1", 0, "system", "You are the Acme support assistant.",
              "2026-03-02T09:00:00Z"),
        _line("dana-1", 1, "user",
              "Standing rule: always file my tickets under storage-reliability. "
              "My employee number is 4417.", "2026-03-02T09:01:00Z"),
        _line("dana-1", 2, "assistant", "Let me look up your account.",
              "2026-03-02T09:02:00Z",
              tool_calls=[{"id": "c1", "name": "lookup_account",
                           "arguments": {"account": "A-1"}}]),
        _line("dana-1", 3, "tool", '{"account": "A-1", "plan": "Pro"}',
              "2026-03-02T09:02:05Z", tool_call_id="c1", status="ok"),
        _line("dana-1", 4, "assistant",
              "Account A-1 is on the Pro plan. I opened ticket T-12 for the outage.",
              "2026-03-02T09:03:00Z"),
    ]
)
CHAT_B = "".join(
    [
        _line("dana-2", 0, "user",
              "My employee number changed to 4471. The deploy broke again.",
              "2026-03-09T10:00:00Z"),
        _line("dana-2", 1, "assistant", "Checking the old deploy log.",
              "2026-03-09T10:01:00Z",
              tool_calls=[{"id": "c2", "name": "read_log",
                           "arguments": {"path": "deploy.log"}}]),
        # A tool output from 2001: past the artifact retention the moment it lands.
        _line("dana-2", 2, "tool", "deploy finished with 0 errors",
              "2001-01-01T00:00:00Z", tool_call_id="c2", status="ok"),
        _line("dana-2", 3, "assistant", "The deploy of T-12 is pending approval.",
              "2026-03-09T10:02:00Z"),
    ]
) + '{"session_id": "dana-2", "role": "narrator", "content": "x"}\n'
# fmt: on
RUNBOOK = "# Restart\n\nDrain traffic, then restart the shard and watch latency.\n"
DEPLOY = "# Deploy\n\nDeploys need an approval from the release owner before noon.\n"


class Inputs:
    """Landing folders A and B, documents, consent and the policy file."""

    def __init__(self, base: Path):
        subject = "tenant=acme/subject=dana"
        self.landing_a = base / "landing_a"
        self.landing_b = base / "landing_b"
        for landing in (self.landing_a, self.landing_b):
            (landing / subject).mkdir(parents=True)
            (landing / subject / "chat-1.jsonl").write_text(CHAT_A)
        (self.landing_b / subject / "chat-2.jsonl").write_text(CHAT_B)
        self.docs_a, self.docs_b = base / "docs_a", base / "docs_b"
        for docs in (self.docs_a, self.docs_b):
            docs.mkdir()
            (docs / "runbook.md").write_text(RUNBOOK)
        (self.docs_b / "deploy.md").write_text(DEPLOY)
        self.consent = base / "consent.jsonl"
        self.consent.write_text(
            json.dumps({"event": "grant", "tenant_id": "acme", "subject_id": "dana",
                        "purpose": "support", "basis": "contract",
                        "at": "2026-01-01T00:00:00Z"}) + "\n"
        )  # fmt: skip
        data = yaml.safe_load(POLICY.read_text())
        # Memories that do not expire while the test runs, whatever today is.
        data["memory"]["retention"] = {
            s: {"*": 36500} for s in ("user_stated", "system_record", "model_inferred")
        }
        data["retention"] = {"artifacts_days": 3650}
        data["history"] = {"keep_snapshots_days": 0, "orphan_grace_hours": 0}
        self.policy = base / "policy.yaml"
        self.policy.write_text(yaml.safe_dump(data))

    def command(self, warehouse: Path, landing: Path, docs: Path) -> list[str]:
        """The job's ``ctxledger`` arguments."""
        return [
            "nightly",
            "--landing", str(landing), "--warehouse", str(warehouse),
            "--docs", str(docs), "--consent", str(self.consent),
            "--policy", str(self.policy),
        ]  # fmt: skip


def _plain(value):
    """A JSON-able, rounding-stable form of a cell (embeddings to 5 places)."""
    if isinstance(value, float):
        return round(value, 5)
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, datetime | date):
        return value.isoformat()
    return value


def _rows(wh: Warehouse, table: str) -> list[str]:
    relation = wh.query(f"SELECT * FROM {table}").arrow()
    if hasattr(relation, "read_all"):
        relation = relation.read_all()
    out = []
    for row in relation.to_pylist():
        for column in RUN_TIME.get(table, ()):
            row.pop(column, None)
        if table == "runs":
            counts = json.loads(row.get("retention") or "{}")
            row["retention"] = {
                k: v for k, v in counts.items() if k not in HISTORY_COUNTS
            }
        out.append(json.dumps(_plain(row), sort_keys=True, default=str))
    return sorted(out)


def snapshot_state(root: Path) -> dict[str, list[str]]:
    """Every table's rows (run-time columns left out), sorted; opens the catalog."""
    with Warehouse.open(root) as wh:
        return {table: _rows(wh, table) for table in TABLES}


def fingerprint(state: dict[str, list[str]]) -> dict[str, str]:
    return {
        table: f"{len(rows)}:"
        + hashlib.sha256("\n".join(rows).encode()).hexdigest()[:16]
        for table, rows in state.items()
    }


def _differences(a: dict, b: dict) -> str:
    lines = []
    for table in a:
        if a[table] != b[table]:
            only_a = sorted(set(a[table]) - set(b[table]))[:2]
            only_b = sorted(set(b[table]) - set(a[table]))[:2]
            lines.append(f"{table}: -{only_a} +{only_b}")
    return "\n".join(lines)


def _run(server: JobServer, command: list[str], log: Path) -> None:
    job = server.start(command, log)
    assert job.wait(timeout=900) == 0, job.output()[-4000:]


def _lake_files(warehouse: Path) -> set[Path]:
    return set((warehouse / "lake").rglob("*.parquet"))


def _timed_reference(
    server: JobServer, command: list[str], warehouse: Path, log: Path
) -> tuple[float, ...]:
    """Run to completion; return the seconds until its staging folder appeared,
    until its commit step first touched the data files (history expiry or the
    commit's own writes) and in all."""
    started = time.monotonic()
    lake_before = _lake_files(warehouse)
    job = server.start(command, log)
    staging = warehouse / "staging"
    first_write = commit_step = None
    while job.wait(timeout=0.02) is None:
        now = time.monotonic() - started
        if first_write is None and staging.is_dir() and any(staging.iterdir()):
            first_write = now
        if commit_step is None and _lake_files(warehouse) != lake_before:
            commit_step = now
    assert job.returncode == 0, job.output()[-4000:]
    total = time.monotonic() - started
    first_write = first_write if first_write is not None else 0.5 * total
    commit_step = commit_step if commit_step is not None else first_write
    return first_write, commit_step, total


def _kill_after(
    server: JobServer,
    command: list[str],
    log: Path,
    delay: float,
    commit_of: Path | None = None,
) -> bool:
    """Start the run, SIGKILL its process group after ``delay`` s (counted from
    the moment its commit step first touches ``commit_of``'s data files, when
    given); True when the run finished before the kill."""
    job = server.start(command, log)
    if commit_of is not None:
        lake_before = _lake_files(commit_of)
        while job.poll() is None and _lake_files(commit_of) == lake_before:
            time.sleep(0.01)
    if job.wait(timeout=delay) is not None:
        return job.returncode == 0
    job.kill()
    return False


def _history(root: Path) -> list[int]:
    with Warehouse.open(root) as wh:
        return [s[0] for s in wh.snapshots()]


def _orphans(root: Path) -> list:
    with Warehouse.open(root) as wh:
        return wh.query(
            "CALL ducklake_delete_orphaned_files('lake', dry_run => true, "
            "cleanup_all => true)"
        ).fetchall()


def test_kill9_leaves_previous_or_complete_snapshot_and_rerun_matches(
    tmp_path, job_server
):
    began = time.monotonic()
    inputs = Inputs(tmp_path)
    log = tmp_path / "jobs.log"
    warehouse, s0 = tmp_path / "wh", tmp_path / "s0-files"
    _run(job_server, inputs.command(warehouse, inputs.landing_a, inputs.docs_a), log)
    shutil.copytree(warehouse, s0)
    before = snapshot_state(warehouse)
    s0_history = _history(warehouse)
    command = inputs.command(warehouse, inputs.landing_b, inputs.docs_b)
    first_write, commit_step, total = _timed_reference(
        job_server, command, warehouse, log
    )
    after = snapshot_state(warehouse)
    allowed = {"previous": fingerprint(before), "complete": fingerprint(after)}
    assert allowed["previous"] != allowed["complete"]
    with Warehouse.open(warehouse) as wh:
        run_id, retention = wh.query(
            "SELECT run_id, retention FROM runs WHERE job = 'nightly' "
            "ORDER BY started_at DESC LIMIT 1"
        ).fetchone()
        # The purge and the lifecycle are part of the run's own snapshot.
        assert wh.snapshot_for_run(run_id) == wh.current_snapshot()
        counts = json.loads(retention)
        assert counts["artifacts_expired"] == 1 and counts["memories_resolved"] >= 1
        superseded = wh.query(
            "SELECT count(*) FROM memories WHERE superseded_by IS NOT NULL"
        ).fetchone()[0]
        assert superseded >= 1
        assert [s[2] for s in wh.snapshots()][-1] == f"run {run_id}"

    rng = random.Random(SEED)
    trial = warehouse
    shutil.rmtree(trial)
    shutil.copytree(s0, trial)
    outcomes = []
    for i in range(TRIALS):
        if i % 3 == 0:  # anywhere
            delay = rng.uniform(0.05 * total, 1.05 * total)
        elif i % 3 == 1:  # the writing and commit phase
            delay = rng.uniform(first_write, 1.02 * total)
        else:  # in the commit step, counted from its first touch of the lake
            delay = rng.uniform(0.0, 0.8 * (total - commit_step))
        commit_of = trial if i % 3 == 2 else None
        completed = _kill_after(job_server, command, log, delay, commit_of)
        state = snapshot_state(trial)  # the catalog file opens
        found = fingerprint(state)
        which = [name for name, fp in allowed.items() if fp == found]
        assert which, (
            f"trial {i} (killed at {delay:.1f}s of {total:.1f}s, earlier trials "
            f"{outcomes}) left a partial state:\n{_differences(after, state)}"
        )
        # Where the kill landed: (delay, finished, state, history of S0 expired
        # already, data files the catalog does not know = a commit cut short)
        history_gone = _history(trial) != s0_history and which[0] == "previous"
        outcomes.append(
            (round(delay, 1), completed, which[0], history_gone, len(_orphans(trial)))
        )
        if which[0] == "complete":
            shutil.rmtree(trial)
            shutil.copytree(s0, trial)

    _run(job_server, command, log)
    final = snapshot_state(trial)
    assert final == after, _differences(after, final)
    assert _orphans(trial) == []
    staging = trial / "staging"
    assert not staging.exists() or not any(staging.iterdir())
    print(
        f"\nkill -9: reference run {total:.1f}s (first write at {first_write:.1f}s, "
        f"commit step at {commit_step:.1f}s), "
        f"{TRIALS} trials {outcomes}, whole test {time.monotonic() - began:.0f}s"
    )
    states = {outcome[2] for outcome in outcomes}
    assert "previous" in states  # most trials must interrupt a real run
