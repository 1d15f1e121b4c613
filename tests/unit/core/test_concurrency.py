"""Concurrent commits to one DuckLake catalog: retry on conflict, land rows once.

The race is made deterministic on a local catalog: two cursors of one DuckDB
connection are two DuckLake transactions, and the second writer's whole commit
runs *inside* the first writer's open transaction (from its manifest callback),
so the first one always loses the race.
"""

from __future__ import annotations

import duckdb
import pytest
from staged_rows import landing_row, staged_sessions

from ctxledger.schemas import LandingFile, RunManifest
from ctxledger.schemas.arrow import to_table
from ctxledger.warehouse import Warehouse
from ctxledger.warehouse.catalog import COMMIT_LOCK_TABLE, LAKE_ALIAS
from ctxledger.warehouse.concurrency import (
    WarehouseBusyError,
    backoff_delays,
    busy_error,
    is_conflict,
    retry_on_conflict,
)
from ctxledger.warehouse.tables import TABLES


def _conflict() -> duckdb.TransactionException:
    return duckdb.TransactionException(
        "TransactionContext Error: Failed to commit: Failed to commit DuckLake "
        "transaction.\nTransaction conflict - attempting to delete from file"
    )


def test_retry_runs_the_operation_again_after_a_conflict():
    calls, waits, retried = [], [], []

    def operation():
        calls.append(1)
        if len(calls) < 3:
            raise _conflict()
        return "done"

    result = retry_on_conflict(
        operation,
        sleep=waits.append,
        rng=lambda: 1.0,
        on_retry=lambda n, exc: retried.append(n),
    )
    assert result == "done"
    assert len(calls) == 3
    assert retried == [1, 2]
    assert waits == [0.05, 0.1]


def test_other_errors_are_not_retried():
    calls = []

    def operation():
        calls.append(1)
        raise duckdb.CatalogException("Table with name nope does not exist!")

    with pytest.raises(duckdb.CatalogException):
        retry_on_conflict(operation, sleep=lambda _s: None)
    assert len(calls) == 1


def test_a_conflict_that_outlives_the_attempts_propagates():
    calls = []

    def operation():
        calls.append(1)
        raise _conflict()

    with pytest.raises(duckdb.TransactionException):
        retry_on_conflict(operation, attempts=4, sleep=lambda _s: None)
    assert len(calls) == 4


def test_conflict_classification():
    assert is_conflict(_conflict())
    init_race = duckdb.Error(
        'Failed to initialize DuckLake:Failed to execute query "CREATE TABLE ...": '
        'ERROR:  relation "ducklake_metadata" already exists'
    )
    assert is_conflict(init_race)
    assert not is_conflict(duckdb.CatalogException('Table "x" already exists'))
    assert not is_conflict(RuntimeError("Transaction conflict"))  # not a DuckDB error


def test_backoff_is_bounded_and_grows():
    delays = backoff_delays(12, base=0.05, cap=2.0, rng=lambda: 1.0)
    assert len(delays) == 11
    assert delays == sorted(delays)
    assert max(delays) == 2.0
    assert all(d >= 0 for d in backoff_delays(12))


def _second_writer(first: Warehouse) -> Warehouse:
    """Another transaction on the same lake (a cursor of the same connection)."""
    other = Warehouse(first.root)
    cursor = first.connection().cursor()
    cursor.execute(f"USE {LAKE_ALIAS}")
    other._con = cursor
    return other


def test_overlapping_commits_land_each_key_once_and_keep_both_snapshots(tmp_path):
    # Writer A stages sessions 0-9, writer B sessions 5-14: 5 shared keys.
    a_shard = staged_sessions(tmp_path, "a", range(0, 10))
    b_shard = staged_sessions(tmp_path, "b", range(5, 15))
    with Warehouse.open(tmp_path / "wh", create=True) as wh_a:
        wh_b = _second_writer(wh_a)
        attempts = []

        def manifest_a(inserted):
            attempts.append(dict(inserted))
            if len(attempts) == 1:
                # B commits while A's transaction is open: A must lose and retry.
                wh_b.commit_staged(
                    "run-b",
                    {"sessions": [b_shard]},
                    {"landing_files": to_table(LandingFile, [landing_row("b")])},
                    {},
                )
            return to_table(RunManifest, [])  # no runs row: not under test

        result = wh_a.commit_staged(
            "run-a",
            {"sessions": [a_shard]},
            {"landing_files": to_table(LandingFile, [landing_row("a")])},
            {},
            manifest=manifest_a,
        )
        assert len(attempts) == 2, "the losing writer ran its transaction again"
        assert attempts[0]["sessions"] == 10
        assert result.inserted["sessions"] == 5  # the other 5 were B's, now seen
        sessions = wh_a.query(
            "SELECT count(*), count(DISTINCT session_id) FROM sessions"
        ).fetchone()
        assert sessions == (15, 15)
        assert wh_a.processed_hashes() == {"a", "b"}
        messages = [s[2] for s in wh_a.snapshots()]
        assert messages.count("run run-a") == 1
        assert messages.count("run run-b") == 1
        assert result.snapshot_id == wh_a.current_snapshot()
        lock = wh_a.query(f"SELECT commits FROM {COMMIT_LOCK_TABLE}").fetchall()
        assert lock == [(2,)]
        wh_b._con.close()


def _runs_row(run_id: str):
    from datetime import UTC, datetime

    when = datetime(2026, 3, 1, tzinfo=UTC)
    manifest = RunManifest(
        run_id=run_id, job="nightly", status="committed", started_at=when,
        finished_at=when, policy_version="p", code_version="c", runner="direct",
    )  # fmt: skip
    return lambda _inserted: to_table(RunManifest, [manifest.row()])


def test_a_run_id_commits_once_when_two_attempts_race(tmp_path):
    """Two attempts of one run (same run id): the loser of the race re-runs
    its transaction, finds the winner's ``runs`` row and adds no snapshot."""
    a_shard = staged_sessions(tmp_path, "a", range(0, 10))
    b_shard = staged_sessions(tmp_path, "b", range(0, 10))
    with Warehouse.open(tmp_path / "wh", create=True) as wh_a:
        wh_b = _second_writer(wh_a)
        attempts = []
        winner = _runs_row("run-same")

        def manifest_a(inserted):
            attempts.append(dict(inserted))
            if len(attempts) == 1:
                wh_b.commit_staged(
                    "run-same", {"sessions": [b_shard]}, {}, {}, manifest=winner
                )
            return winner(inserted)

        before = wh_a.current_snapshot()
        result = wh_a.commit_staged(
            "run-same", {"sessions": [a_shard]}, {}, {}, manifest=manifest_a
        )
        assert result.already_committed and result.inserted == {}
        messages = [s[2] for s in wh_a.snapshots()]
        assert messages.count("run run-same") == 1
        assert wh_a.current_snapshot() == before + 1
        assert result.snapshot_id == before + 1
        again = wh_a.commit_staged(
            "run-same", {"sessions": [a_shard]}, {}, {}, manifest=winner
        )
        assert again.already_committed and wh_a.current_snapshot() == before + 1
        runs = wh_a.query("SELECT count(*) FROM runs").fetchone()[0]
        assert runs == 1
        wh_b._con.close()


def test_plain_appends_without_the_lock_would_duplicate(tmp_path):
    """Why the lock exists: DuckLake re-commits two overlapping appends both."""
    shard = staged_sessions(tmp_path, "a", range(0, 3))
    with Warehouse.open(tmp_path / "wh", create=True) as wh:
        a = wh.connection().cursor()
        b = wh.connection().cursor()
        for con in (a, b):
            con.execute(f"USE {LAKE_ALIAS}")
            con.execute("BEGIN TRANSACTION")
        for con in (a, b):
            con.execute(
                "INSERT INTO sessions SELECT * FROM read_parquet(?) fresh "
                "ANTI JOIN sessions USING (session_id)",
                [shard],
            )
        a.execute("COMMIT")
        b.execute("COMMIT")  # no conflict: both appends commit
        assert wh.query("SELECT count(*) FROM sessions").fetchone()[0] == 6


def test_concurrent_first_opens_create_the_tables_once(tmp_path):
    """Two writers finding an empty catalog both try to create every table."""
    root = tmp_path / "wh"
    (root / "lake").mkdir(parents=True)
    with Warehouse(root) as wh_a:
        wh_b = _second_writer(wh_a)
        real = wh_a._lake_tables
        reads = []

        def racing_read():
            seen = real()  # A's transaction reads an empty catalog...
            reads.append(seen)
            if len(reads) == 1:
                wh_b.ensure_tables()  # ...then B creates everything and commits
            return seen

        wh_a._lake_tables = racing_read
        wh_a.ensure_tables()  # A's first commit conflicts; the retry adds nothing
        assert len(reads) == 2
        assert reads[0] == set()
        assert wh_a.existing_tables() == set(TABLES)
        schema = [s for s in wh_a.snapshots() if s[2] == "schema"]
        assert len(schema) == 1
        wh_b._con.close()


def test_a_local_catalog_another_process_holds_is_waited_for():
    held = duckdb.IOException(
        'IO Error: Failed to attach DuckLake MetaData "__ducklake_metadata_lake" '
        'at path + "/w/catalog.ducklake"Could not set lock on file "/w/catalog'
        '.ducklake": Conflicting lock is held in python (PID 1)'
    )
    assert is_conflict(held)


def _held() -> duckdb.IOException:
    return duckdb.IOException(
        'IO Error: Could not set lock on file "/w/catalog.ducklake": '
        "Conflicting lock is held in python (PID 1)"
    )


def test_a_held_catalog_is_waited_for_by_time_not_by_attempts():
    """More tries than ``attempts`` while the lock wait lasts; then one line."""
    now, calls = [0.0], []

    def operation():
        calls.append(1)
        if len(calls) < 25:
            raise _held()
        return "done"

    def sleep(seconds):
        now[0] += seconds

    result = retry_on_conflict(
        operation, attempts=3, sleep=sleep, lock_wait=60, clock=lambda: now[0]
    )
    assert result == "done" and len(calls) == 25


def test_a_catalog_held_past_the_wait_is_one_clear_line():
    now = [0.0]

    def operation():
        raise _held()

    def sleep(seconds):
        assert seconds >= 0
        now[0] += max(seconds, 0.01)

    with pytest.raises(WarehouseBusyError) as raised:
        retry_on_conflict(operation, sleep=sleep, lock_wait=5, clock=lambda: now[0])
    message = str(raised.value)
    assert "\n" not in message and "Conflicting lock" not in message
    assert message.startswith("another job holds the warehouse (/w/catalog.ducklake)")
    assert "retry or use a PostgreSQL catalog" in message
    assert now[0] >= 5


def test_a_lock_error_a_runner_wrapped_becomes_the_same_line():
    wrapped = RuntimeError(
        "Pipeline failed: Traceback ...\n" + str(_held()) + "\n [while running X]"
    )
    assert str(busy_error(wrapped)).startswith("another job holds the warehouse")
    assert busy_error(RuntimeError("disk full")) is None


def test_attempts_get_their_own_staging_and_a_dead_ones_lock_is_free(tmp_path):
    import subprocess
    import sys

    from ctxledger.pipelines.config import JobConfig
    from ctxledger.warehouse.concurrency import attempt_alive, attempt_lock, new_attempt

    one, two = new_attempt(), new_attempt()
    configs = [
        JobConfig(job="nightly", run_id="run_x", landing="l", warehouse="w",
                  policy_version="p", code_version="c", attempt=a)
        for a in (one, two)
    ]  # fmt: skip
    assert one != two and configs[0].staging_dir != configs[1].staging_dir
    assert configs[0].staging_dir.startswith("w/staging/run_x-")

    folder = tmp_path / "staging" / "run_x-a"
    assert attempt_alive(folder) is None  # no lock file: cannot tell
    with attempt_lock(folder):
        assert attempt_alive(folder) is True
    assert attempt_alive(folder) is False
    # another process holds it, then dies without cleaning up (kill -9)
    child = subprocess.Popen(
        [sys.executable, "-c",
         "import sys, time; from ctxledger.warehouse.concurrency import attempt_lock\n"
         "with attempt_lock(sys.argv[1]):\n"
         "    print('locked', flush=True); time.sleep(60)", str(folder)],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert child.stdout.readline().strip() == "locked"
        assert attempt_alive(folder) is True
    finally:
        child.kill()
        child.wait()
    assert attempt_alive(folder) is False
