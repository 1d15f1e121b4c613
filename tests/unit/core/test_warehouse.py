"""The DuckLake warehouse on real files in a tmp dir: create, commit, dedupe, travel."""

from __future__ import annotations

import duckdb
import pyarrow.parquet as pq
import pytest

from ctxledger.schemas import LandingFile, Session
from ctxledger.schemas.arrow import to_table
from ctxledger.warehouse import Warehouse, WarehouseError
from ctxledger.warehouse.tables import TABLES


def _session(i: int) -> dict:
    return Session(
        session_id=f"ses_{i}",
        tenant_id="t",
        source_format="canonical",
        source_file="f.jsonl",
        source_hash="h",
        run_id="r",
    ).row()


def _stage(tmp_path, name: str, rows: list[dict]) -> str:
    path = tmp_path / "staging" / "sessions" / f"{name}.parquet"
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(to_table(Session, rows), path)
    return str(path)


def test_open_without_create_fails_with_a_clear_message(tmp_path):
    with pytest.raises(WarehouseError, match="no warehouse"):
        Warehouse.open(tmp_path / "missing")


def test_create_makes_every_table_in_one_snapshot(tmp_path):
    with Warehouse.open(tmp_path / "wh", create=True) as wh:
        assert wh.existing_tables() == set(TABLES)
        assert [s[2] for s in wh.snapshots()] == [None, "schema"]
    with Warehouse.open(tmp_path / "wh", create=True) as wh:  # idempotent
        assert len(wh.snapshots()) == 2


def test_commit_is_one_snapshot_and_deduplicates_on_key(tmp_path):
    shard = _stage(tmp_path, "a", [_session(1), _session(2), _session(2)])
    with Warehouse.open(tmp_path / "wh", create=True) as wh:
        before = wh.current_snapshot()
        result = wh.commit_staged(
            "run-1",
            {"sessions": [shard]},
            {"landing_files": to_table(LandingFile, [_landing("h1")])},
            {},
        )
        assert result.inserted == {"sessions": 2, "landing_files": 1}
        assert result.snapshot_id == before + 1 == wh.current_snapshot()
        again = wh.commit_staged("run-2", {"sessions": [shard]}, {}, {})
        assert again.inserted == {"sessions": 0}
        assert wh.row_counts()["sessions"] == 2
        assert wh.processed_hashes() == {"h1"}


def _landing(file_hash: str, status: str = "processed") -> dict:
    return LandingFile(
        file_hash=file_hash,
        path="p",
        tenant_id="t",
        size_bytes=1,
        status=status,
        run_id="r",
    ).row()


def test_unprocessed_landing_statuses_are_not_skipped_next_time(tmp_path):
    rows = [_landing("ok"), _landing("moved", status="changed")]
    with Warehouse.open(tmp_path / "wh", create=True) as wh:
        wh.commit_staged("r", {}, {"landing_files": to_table(LandingFile, rows)}, {})
        assert wh.processed_hashes() == {"ok"}


def test_failed_commit_leaves_previous_snapshot_untouched(tmp_path):
    good = _stage(tmp_path, "good", [_session(1)])
    with Warehouse.open(tmp_path / "wh", create=True) as wh:
        snapshot = wh.current_snapshot()
        with pytest.raises(duckdb.Error):
            wh.commit_staged(
                "run-bad",
                {"sessions": [good], "messages": [good]},  # wrong shape for messages
                {},
                {},
            )
        assert wh.current_snapshot() == snapshot
        assert wh.row_counts()["sessions"] == 0


def test_time_travel_reads_an_earlier_snapshot(tmp_path):
    first = _stage(tmp_path, "first", [_session(1)])
    second = _stage(tmp_path, "second", [_session(2), _session(3)])
    root = tmp_path / "wh"
    with Warehouse.open(root, create=True) as wh:
        snap = wh.commit_staged("r1", {"sessions": [first]}, {}, {}).snapshot_id
        wh.commit_staged("r2", {"sessions": [second]}, {}, {})
        assert wh.row_counts()["sessions"] == 3
        travelled = wh.query(f"SELECT count(*) FROM sessions AT (VERSION => {snap})")
        assert travelled.fetchone()[0] == 1
    with Warehouse.open(root, snapshot=snap) as pinned:
        assert pinned.row_counts()["sessions"] == 1


def test_a_copied_or_moved_warehouse_folder_opens_and_reads(tmp_path):
    import shutil

    from typer.testing import CliRunner

    from ctxledger.jobs.cli import app

    first = tmp_path / "first" / "wh"
    shard = _stage(tmp_path, "a", [_session(1), _session(2)])
    with Warehouse.open(first, create=True) as wh:
        wh.commit_staged("run-1", {"sessions": [shard]}, {}, {})
        wh.commit_staged(
            "run-2", {}, {"sessions": to_table(Session, [_session(3)])}, {}
        )
    moved = tmp_path / "elsewhere" / "copy"
    shutil.copytree(first, moved)
    shutil.rmtree(first)  # moved: the stored data path is gone
    with Warehouse.open(moved) as wh:
        assert wh.row_counts()["sessions"] == 3
        travel = f"AT (VERSION => {wh.snapshot_for_run('run-1')})"
        assert wh.query(f"SELECT count(*) FROM sessions {travel}").fetchone() == (2,)
        wh.commit_staged(
            "run-3", {}, {"sessions": to_table(Session, [_session(4)])}, {}
        )
    assert not first.exists()  # nothing was written to the old place
    with Warehouse.open(moved) as wh:
        assert wh.row_counts()["sessions"] == 4
    done = CliRunner().invoke(
        app, ["sql", "-w", str(moved), "-o", "csv", "SELECT count(*) FROM sessions"]
    )
    assert done.exit_code == 0 and done.output.splitlines()[-1] == "4", done.output
    # an explicit --data-path that disagrees with the catalog still fails
    with pytest.raises(duckdb.Error, match="does not match"):
        Warehouse.open(moved, data_path=str(tmp_path / "other-lake"))


def test_struct_fields_a_model_gains_are_added_to_an_existing_lake(tmp_path):
    """A lake made before ``SummarySections`` gained a field would silently drop
    that field on insert; opening it adds the missing struct field instead."""
    with Warehouse.open(tmp_path, create=True) as wh:
        con = wh.connection()
        con.execute("ALTER TABLE compression_ledger DROP COLUMN sections.findings")
        kinds = con.execute(
            "SELECT data_type FROM information_schema.columns "
            "WHERE table_name = 'compression_ledger' AND column_name = 'sections'"
        ).fetchone()[0]
        assert "findings" not in kinds
    with Warehouse.open(tmp_path, create=True) as wh:
        kinds = (
            wh.connection()
            .execute(
                "SELECT data_type FROM information_schema.columns "
                "WHERE table_name = 'compression_ledger' "
                "AND column_name = 'sections'"
            )
            .fetchone()[0]
        )
        assert "findings STRUCT(" in kinds
