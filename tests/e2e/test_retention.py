"""The retention purge on real DuckLake warehouses (no pipeline, controlled clocks).

* artifacts past ``retention.artifacts_days`` go, with the evidence built from
  them; recent ones stay; the counts land in a ``retention`` run row;
* snapshots older than ``history.keep_snapshots_days`` are expired and the files
  only they used are deleted from disk (time travel to them fails), the current
  rows intact;
* debris of a crashed run: unknown data files and dead attempts' staging
  folders go at once (local catalog), a live attempt's stays, quarantine and
  unlocked staging folders once older than the grace period;
* the commit step purges inside the run's own snapshot.
"""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb
import pytest
from typer.testing import CliRunner

from ctxledger.jobs.cli import app
from ctxledger.pipelines.config import JobConfig
from ctxledger.pipelines.sink.commit import commit_run
from ctxledger.schemas import Artifact, Message, RunManifest, Session
from ctxledger.schemas.arrow import to_table
from ctxledger.schemas.evidence import DocumentVersion, EvidenceChunk
from ctxledger.schemas.policy import HistorySettings, Policy, RetentionSettings
from ctxledger.warehouse import Warehouse
from ctxledger.warehouse.concurrency import attempt_lock
from ctxledger.warehouse.retention import RetentionCounts, run_retention

NOW = datetime.now(UTC)
DAY = timedelta(days=1)


def _policy(artifacts_days=None, keep_days=30.0, grace_hours=24.0) -> Policy:
    return Policy(
        retention=RetentionSettings(artifacts_days=artifacts_days),
        history=HistorySettings(
            keep_snapshots_days=keep_days, orphan_grace_hours=grace_hours
        ),
    )


def _message(turn, artifact, created_at, run_id="r-old") -> Message:
    return Message(
        message_id=f"msg_{turn}",
        session_id="ses_1",
        tenant_id="acme",
        turn=turn,
        role="tool",
        content=f"observation {turn}",
        content_hash=f"h{turn}",
        created_at=created_at,
        token_count=2,
        artifact_ref=artifact,
        policy_version="p",
        source_ref=f"f.jsonl#{turn}",
        run_id=run_id,
    )


def _artifact(artifact_id) -> Artifact:
    return Artifact(
        artifact_id=artifact_id,
        tenant_id="acme",
        size_bytes=9,
        content=f"output of {artifact_id}",
        policy_version="p",
    )


def _evidence(doc_id, kind):
    version = DocumentVersion(
        doc_version_id=f"dv_{doc_id}",
        tenant_id="acme",
        doc_id=doc_id,
        kind=kind,
        version="1",
        version_sort="1",
        effective_from=NOW - 200 * DAY,
        source_path=doc_id,
        source_hash="x",
        text_hash="x",
        policy_version="p",
        chunker_version="c",
    )
    chunk = EvidenceChunk(
        chunk_id=f"chk_{doc_id}",
        doc_version_id=version.doc_version_id,
        tenant_id="acme",
        doc_id=doc_id,
        doc_version="1",
        kind=kind,
        effective_from=version.effective_from,
        ordinal=0,
        char_start=0,
        char_end=4,
        text="text",
        content_hash="t",
        token_count=1,
        embedding=[0.0] * 384,
        embed_model="m",
        policy_version="p",
    )
    return version, chunk


def _run(run_id, started_at) -> RunManifest:
    return RunManifest(
        run_id=run_id,
        job="nightly",
        status="committed",
        started_at=started_at,
        finished_at=started_at,
        policy_version="p",
        code_version="c",
        runner="DirectRunner",
    )


def _commit(wh: Warehouse, run_id: str, **tables) -> int:
    rows = {
        name: to_table(type(records[0]), [r.row() for r in records])
        for name, records in tables.items()
    }
    return wh.commit_staged(run_id, {}, rows, {}).snapshot_id


@pytest.fixture()
def artifacts_wh(tmp_path):
    """Five artifacts of different ages, with tool-artifact and document evidence."""
    old, recent = NOW - 100 * DAY, NOW - 5 * DAY
    messages = [
        _message(1, "art_old", old),  # only an old reference: goes
        _message(2, "art_mixed", old),  # an old and a recent reference: stays
        _message(3, "art_mixed", recent),
        _message(4, "art_undated", None, run_id="r-old"),  # its run is old: goes
        _message(5, "art_recent", recent),  # stays
    ]  # art_orphan: referenced by no message, goes
    ids = ["art_old", "art_mixed", "art_undated", "art_recent", "art_orphan"]
    old_doc, old_chunk = _evidence("art_old", "tool_artifact")
    doc, chunk = _evidence("doc_runbook", "document")  # a document: never purged
    root = tmp_path / "wh"
    with Warehouse.open(root, create=True) as wh:
        _commit(
            wh,
            "r-old",
            messages=messages,
            artifacts=[_artifact(a) for a in ids],
            runs=[_run("r-old", old)],
            documents=[old_doc, doc],
            evidence_chunks=[old_chunk, chunk],
            sessions=[
                Session(
                    session_id="ses_1",
                    tenant_id="acme",
                    source_format="canonical",
                    source_file="f.jsonl",
                    source_hash="x",
                )
            ],
        )
    return root


def _ids(wh: Warehouse, table: str, column: str) -> set[str]:
    return {r[0] for r in wh.query(f"SELECT {column} FROM {table}").fetchall()}


def test_artifacts_past_retention_go_and_recent_ones_stay(artifacts_wh):
    result = run_retention(artifacts_wh, _policy(artifacts_days=30), now=NOW)
    assert result.counts.artifacts_expired == 3
    assert result.counts.evidence_rows_removed == 2  # art_old's chunk + version
    with Warehouse.open(artifacts_wh) as wh:
        assert _ids(wh, "artifacts", "artifact_id") == {"art_mixed", "art_recent"}
        assert _ids(wh, "evidence_chunks", "doc_id") == {"doc_runbook"}
        assert _ids(wh, "documents", "doc_id") == {"doc_runbook"}
        assert len(_ids(wh, "messages", "message_id")) == 5  # messages stay
        (row,) = wh.query(
            "SELECT run_id, job, status, retention FROM runs WHERE job = 'retention'"
        ).fetchall()
        assert row[1:3] == ("retention", "committed")
        stored = RetentionCounts.from_json(row[3])
        assert stored == result.counts and stored.artifacts_expired == 3
        assert wh.snapshot_for_run(row[0]) == wh.current_snapshot()
        assert result.snapshot_id == wh.current_snapshot()
        snapshots = wh.snapshots()
    runs = CliRunner().invoke(app, ["runs", "--warehouse", str(artifacts_wh)])
    assert runs.exit_code == 0, runs.output
    assert "artifacts past retention 3" in runs.output
    # Nothing left to purge: no row, no snapshot.
    again = run_retention(artifacts_wh, _policy(artifacts_days=30), now=NOW)
    assert not again.counts.changed and again.run_id is None
    with Warehouse.open(artifacts_wh) as wh:
        assert wh.snapshots() == snapshots


def test_artifacts_are_kept_forever_by_default(artifacts_wh):
    assert Policy().retention.artifacts_days is None
    result = run_retention(artifacts_wh, Policy(), now=NOW + 3650 * DAY)
    assert result.counts.artifacts_expired == 0
    with Warehouse.open(artifacts_wh) as wh:
        assert len(_ids(wh, "artifacts", "artifact_id")) == 5


def _live_files(wh: Warehouse, table: str) -> set[str]:
    return {
        r[0]
        for r in wh.query(
            f"SELECT data_file FROM ducklake_list_files('lake', '{table}')"
        ).fetchall()
    }


def test_snapshots_past_the_window_expire_and_their_files_leave_disk(tmp_path):
    root = tmp_path / "wh"
    with Warehouse.open(root, create=True) as wh:
        first = _commit(wh, "r1", artifacts=[_artifact("art_a"), _artifact("art_b")])
        old_files = _live_files(wh, "artifacts")
        # Replace the table's rows, so the first file is only used by history.
        with wh.transaction() as con:
            con.execute("DELETE FROM artifacts")
            wh.set_commit_message("rewrite", {})
        _commit(wh, "r2", artifacts=[_artifact("art_c")])
        before = [s[0] for s in wh.snapshots()]
        current = wh.current_snapshot()
        assert wh.query(
            f"SELECT count(*) FROM artifacts AT (VERSION => {first})"
        ).fetchone() == (2,)
    assert old_files and all(Path(f).exists() for f in old_files)

    # Inside the window: nothing expires.
    kept = run_retention(root, _policy(keep_days=30), now=NOW)
    assert kept.counts.snapshots_expired == 0 and kept.run_id is None
    assert all(Path(f).exists() for f in old_files)

    # 31 days on: every snapshot but the current one is older than the window.
    later = run_retention(root, _policy(keep_days=30), now=NOW + 31 * DAY)
    assert later.counts.snapshots_expired == len(before) - 1
    assert later.counts.files_deleted >= len(old_files)
    assert not any(Path(f).exists() for f in old_files)
    with Warehouse.open(root) as wh:
        assert _ids(wh, "artifacts", "artifact_id") == {"art_c"}  # current intact
        remaining = [s[0] for s in wh.snapshots()]
        assert current in remaining and first not in remaining
        with pytest.raises(duckdb.Error):
            wh.query(f"SELECT count(*) FROM artifacts AT (VERSION => {first})")
        (stored,) = wh.query(
            "SELECT retention FROM runs WHERE job = 'retention'"
        ).fetchone()
        assert json.loads(stored)["snapshots_expired"] == len(before) - 1
    on_disk = {str(p) for p in (root / "lake").rglob("*.parquet")}
    assert on_disk.isdisjoint(old_files)


def test_history_is_kept_when_the_window_is_none(tmp_path):
    root = tmp_path / "wh"
    with Warehouse.open(root, create=True) as wh:
        _commit(wh, "r1", artifacts=[_artifact("art_a")])
        before = wh.snapshots()
    result = run_retention(root, _policy(keep_days=None), now=NOW + 999 * DAY)
    assert result.counts.snapshots_expired == 0
    with Warehouse.open(root) as wh:
        assert wh.snapshots() == before


def test_debris_of_crashed_runs_goes_at_once_or_after_the_grace_period(tmp_path):
    root = tmp_path / "wh"
    with Warehouse.open(root, create=True) as wh:
        _commit(wh, "r1", artifacts=[_artifact("art_a")], runs=[_run("r1", NOW)])
    orphan = root / "lake" / "main" / "artifacts" / "ducklake-crashed.parquet"
    duckdb.sql("COPY (SELECT 1 AS x) TO '" + str(orphan) + "' (FORMAT parquet)")
    stale_stage = root / "staging" / "run_killed" / "messages"  # no lock file
    stale_stage.mkdir(parents=True)
    (stale_stage / "part-0.parquet").write_bytes(b"x")
    dead_attempt = root / "staging" / "run_x-20260101T000000-dead"
    with attempt_lock(dead_attempt):  # its process ended: the lock is free
        (dead_attempt / "part-0.parquet").write_bytes(b"x")
    stale_quarantine = root / "quarantine" / "run_killed"
    stale_quarantine.mkdir(parents=True)
    (stale_quarantine / "raw.bin").write_bytes(b"raw bytes of a rejected record")
    kept_quarantine = root / "quarantine" / "r1"  # a committed run's: stays
    kept_quarantine.mkdir(parents=True)
    (kept_quarantine / "raw.bin").write_bytes(b"x")
    hour_ago = (NOW - timedelta(hours=1)).timestamp()
    for path in (orphan, stale_stage / "part-0.parquet", stale_quarantine / "raw.bin"):
        os.utime(path, (hour_ago, hour_ago))

    live_attempt = root / "staging" / "run_y-20260101T000000-live"
    with attempt_lock(live_attempt):  # a running job's: stays, however old
        young = run_retention(root, _policy(grace_hours=24), now=NOW)
        # A local catalog is held by one process at a time: an unknown data
        # file is a killed commit's and goes at once; so does a dead attempt.
        assert young.counts.orphan_files_deleted == 1 and not orphan.exists()
        assert young.counts.stale_run_dirs_removed == 1
        assert not dead_attempt.exists() and stale_stage.exists()

        done = run_retention(root, _policy(grace_hours=24), now=NOW + 2 * DAY)
        assert live_attempt.exists()
    assert done.counts.orphan_files_deleted == 0
    assert done.counts.stale_run_dirs_removed == 2
    assert not (root / "staging" / "run_killed").exists()
    assert not stale_quarantine.exists() and kept_quarantine.exists()
    with Warehouse.open(root) as wh:
        assert _ids(wh, "artifacts", "artifact_id") == {"art_a"}


def test_the_commit_step_purges_inside_the_runs_own_snapshot(artifacts_wh, tmp_path):
    policy_file = tmp_path / "policy.yaml"
    # a policy file must name what it redacts (it fails closed otherwise)
    policy_file.write_text(
        "pii:\n  entities: [{type: PERSON}]\nretention:\n  artifacts_days: 30\n"
    )
    policy = Policy(retention=RetentionSettings(artifacts_days=30))
    config = JobConfig(
        job="nightly",
        run_id="run_retention_commit",
        landing=str(tmp_path),
        warehouse=str(artifacts_wh),
        policy_file=str(policy_file),
        policy_version=policy.policy_version,
        code_version="test",
    )
    manifest = commit_run(
        config, [], started_at=NOW, files_seen=0, files_skipped=0, runner="test"
    )
    counts = RetentionCounts.from_json(manifest.retention)
    assert counts.artifacts_expired == 3 and counts.evidence_rows_removed == 2
    with Warehouse.open(artifacts_wh) as wh:
        # one snapshot: the run's row and the purge became visible together
        assert wh.current_snapshot() == manifest.snapshot_id
        assert _ids(wh, "artifacts", "artifact_id") == {"art_mixed", "art_recent"}
        stored = wh.query(
            "SELECT retention FROM runs WHERE run_id = ?", [config.run_id]
        ).fetchone()[0]
        assert RetentionCounts.from_json(stored) == counts
        before = wh.query(
            f"SELECT count(*) FROM artifacts AT (VERSION => {manifest.snapshot_id - 1})"
        ).fetchone()[0]
        assert before == 5
