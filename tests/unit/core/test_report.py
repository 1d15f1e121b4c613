"""``ctxledger report`` over a real DuckLake warehouse (hand-made runs, no
pipeline): run resolution, the run's own snapshot, old runs without timings,
expired snapshots and the CLI's one-line errors."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from rich.console import Console
from typer.testing import CliRunner

from ctxledger.jobs import cli
from ctxledger.jobs.report import MAX_ROWS, gather, resolve_run, top_rows, write_report
from ctxledger.schemas import DeadLetter, RunManifest, StageCount
from ctxledger.schemas.arrow import to_table
from ctxledger.schemas.operations import StageTiming
from ctxledger.warehouse import Warehouse

T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)


def _letter(run_id: str, i: int, reason: str = "malformed_json") -> dict:
    return DeadLetter(
        dead_letter_id=f"dl_{run_id}_{i}",
        run_id=run_id,
        stage="ingest",
        tenant_id="t",
        source_file="a.jsonl",
        source_offset=f"line:{i}",
        reason_code=reason,
        message="line is not JSON",
        job_version="c",
    ).row()


def _commit(wh: Warehouse, run_id: str, minutes: int, letters: list[dict], **kw):
    manifest = RunManifest(
        run_id=run_id,
        job="nightly",
        status="committed",
        started_at=T0 + timedelta(minutes=minutes),
        finished_at=T0 + timedelta(minutes=minutes + 1),
        policy_version="pol_1",
        code_version="c",
        runner="DirectRunner",
        stage_counts=[StageCount(stage="ingest", records_in=5, records_out=3, dead=2)],
        **kw,
    )
    wh.commit_staged(
        run_id,
        {},
        {
            "dead_letters": to_table(DeadLetter, letters),
            "runs": to_table(RunManifest, [manifest.row()]),
        },
        {},
    )


@pytest.fixture
def warehouse(tmp_path):
    root = tmp_path / "wh"
    with Warehouse.open(root, create=True) as wh:
        _commit(wh, "run_old", 0, [_letter("run_old", 1), _letter("run_old", 2)])
        _commit(
            wh,
            "run_new",
            10,
            [_letter("run_new", 1, "unknown_role")],
            stage_timings=[StageTiming(stage="redact", seconds=1.5, calls=3)],
        )
    return root


def _chart(page, chart_id):
    return next(c for c in page.charts if c.chart_id == chart_id)


def test_latest_is_the_newest_run_and_unknown_ids_are_a_clear_error(warehouse):
    with Warehouse.open(warehouse) as wh:
        assert resolve_run(wh, "latest") == "run_new"
        assert resolve_run(wh, "run_old") == "run_old"
        with pytest.raises(ValueError, match="no run 'nope'"):
            resolve_run(wh, "nope")


def test_every_chart_is_there_and_those_without_data_say_so(warehouse):
    page = gather(warehouse, "latest")
    assert page.header.run_id == "run_new" and page.header.snapshot_id == 3
    assert [c.chart_id for c in page.charts] == [
        "stages", "dead-letters", "pii", "memories", "ledger", "chunks", "timings",
    ]  # fmt: skip
    assert _chart(page, "stages").rows == (("ingest", (5, 3, 2)),)
    assert _chart(page, "dead-letters").rows == (("unknown_role (ingest)", (1,)),)
    assert _chart(page, "timings").rows == (("redact", (1.5,)),)
    for empty in ("pii", "memories", "ledger", "chunks"):
        assert _chart(page, empty).empty, empty


def test_the_report_reads_the_runs_own_snapshot_not_later_changes(warehouse):
    with Warehouse.open(warehouse) as wh:
        wh.query("DELETE FROM dead_letters WHERE run_id = 'run_old'")
    page = gather(warehouse, "run_old")
    assert page.header.snapshot_id == 2
    assert "as of snapshot 2" in page.data_note
    assert _chart(page, "dead-letters").rows == (("malformed_json (ingest)", (2,)),)


def test_an_old_run_without_timings_renders_not_recorded(warehouse, tmp_path):
    # a warehouse from before timings: the column is missing, then added back
    # empty (NULL for old rows) by the next open with create
    with Warehouse.open(warehouse) as wh:
        wh.query("ALTER TABLE runs DROP COLUMN stage_timings")
        wh.query("CALL ducklake_expire_snapshots('lake', versions => [2, 3])")
    page = gather(warehouse, "run_old")
    assert page.header.snapshot_id is None and "no longer exists" in page.data_note
    timings = _chart(page, "timings")
    assert timings.empty and "not recorded" in timings.empty_message
    with Warehouse.open(warehouse, create=True) as wh:
        assert wh.query("SELECT stage_timings FROM runs").fetchall() == [(None,)] * 2
    out = write_report(warehouse, "run_new", tmp_path / "out" / "r.html")
    html = out.path.read_text()
    assert "Time per stage not recorded for this run." in html
    assert 'id="chart-timings"' in html and "run_new" in html


def test_cli_writes_the_page_and_fails_in_one_line(warehouse, tmp_path, monkeypatch):
    monkeypatch.setattr(cli, "console", Console(width=400, color_system=None))
    runner = CliRunner()
    target = tmp_path / "report.html"
    done = runner.invoke(
        cli.app,
        ["report", "--run", "latest", "--html", str(target), "-w", str(warehouse)],
    )
    assert done.exit_code == 0, done.output
    assert "run_new" in done.output and "7 charts" in done.output
    assert target.read_text().count("<svg") == 7
    bad = runner.invoke(
        cli.app,
        ["report", "--run", "nope", "--html", str(target), "-w", str(warehouse)],
    )
    assert bad.exit_code != 0 and isinstance(bad.exception, ValueError)


def test_long_lists_keep_the_biggest_rows_and_sum_the_rest():
    rows = [(f"reason_{i:02d}", 100 - i) for i in range(20)]
    kept = top_rows(rows, "reasons")
    assert len(kept) == MAX_ROWS
    assert kept[: MAX_ROWS - 1] == rows[: MAX_ROWS - 1]
    assert kept[-1] == ("other (6 reasons)", sum(v for _, v in rows[MAX_ROWS - 1 :]))
    assert sum(v for _, v in kept) == sum(v for _, v in rows)
    assert top_rows(rows[:3], "reasons") == rows[:3]
