"""``ctxledger sql`` is read-only by default, through the real CLI on a real lake.

Writes, other files, ATTACH, settings and DuckLake maintenance fail with exit
code 1 and a one-line reason; queries, time travel and the evidence and memory
macros work; ``--write`` opens the lake for maintenance.
"""

from __future__ import annotations

import pytest
from test_memory_api import SEED, _commit
from typer.testing import CliRunner

from ctxledger.jobs.cli import app
from ctxledger.warehouse import Warehouse

RUNNER = CliRunner()


@pytest.fixture(scope="module")
def lake(tmp_path_factory):
    root = tmp_path_factory.mktemp("sql-ro") / "wh"
    with Warehouse.open(root, create=True) as wh:
        _commit(wh, "seed", SEED)
        _commit(wh, "seed2", SEED[:2])
        first = wh.snapshot_for_run("seed")
    secret = root / "quarantine" / "r1" / "x.bin"
    secret.parent.mkdir(parents=True)
    secret.write_text("raw quarantined bytes")
    return root, first


def _sql(root, *args):
    return RUNNER.invoke(app, ["sql", "-w", str(root), "-o", "csv", *args])


@pytest.mark.parametrize(
    "statement",
    [
        "DELETE FROM runs",
        "UPDATE memories SET text = 'forged'",
        "INSERT INTO runs (run_id) VALUES ('forged')",
        "DROP TABLE memories",
        "CALL ducklake_expire_snapshots('lake', older_than => now())",
        "SELECT * FROM read_text('/etc/passwd')",
        "SELECT * FROM read_blob('{root}/quarantine/r1/x.bin')",
        "SELECT * FROM glob('{root}/**')",
        "COPY (SELECT 1) TO '{root}/out.csv'",
        "COPY memories TO '{root}/out.parquet'",
        "EXPLAIN ANALYZE COPY (SELECT 1) TO '{root}/out.csv'",
        "PREPARE p AS SELECT 1",
        "ATTACH '{root}/other.db' AS other",
        "SET enable_external_access = true",
        "RESET lock_configuration",
        "LOAD vss",
        "INSTALL httpfs",
    ],
)
def test_writes_files_and_settings_fail_with_one_line(lake, statement):
    root, _ = lake
    done = _sql(root, statement.format(root=root))
    assert done.exit_code == 1, done.output
    assert done.output.startswith("error:") and "Traceback" not in done.output
    assert "/etc/passwd" not in done.output or "Cannot access" in done.output
    assert "root:x:" not in done.output and "raw quarantined" not in done.output
    assert not (root / "out.csv").exists() and not (root / "other.db").exists()


def test_queries_time_travel_and_macros_work(lake):
    root, first = lake
    done = _sql(root, "SELECT count(*) AS n FROM memories")
    assert done.exit_code == 0, done.output
    assert done.output.splitlines()[-1] == str(len(SEED))
    travel = _sql(root, f"SELECT count(*) FROM runs AT (VERSION => {first})")
    assert travel.exit_code == 0, travel.output
    pinned = _sql(root, "--snapshot", str(first), "SELECT count(*) FROM memories")
    assert pinned.exit_code == 0 and pinned.output.splitlines()[-1] == str(len(SEED))
    macros = _sql(
        root,
        # evidence_search adds only the embedding model (Python, not DuckDB
        # file access) to these: left out to keep the test fast
        "SELECT count(*) FROM evidence_bm25('acme', ['sre'], 'rotate the key') "
        "UNION ALL SELECT count(*) FROM evidence_versions() "
        "UNION ALL SELECT len(evidence_terms('Rotating keys'))",
    )
    assert macros.exit_code == 0, macros.output
    assert macros.output.splitlines()[1:] == ["0", "0", "2"], macros.output
    temp = _sql(root, "CREATE TEMP MACRO plus1(x) AS x + 1")
    assert temp.exit_code == 0, temp.output


def test_write_opens_the_lake_for_maintenance(tmp_path):
    root = tmp_path / "wh"
    with Warehouse.open(root, create=True) as wh:
        _commit(wh, "seed", SEED)
    assert _sql(root, "DELETE FROM memories WHERE subject_id = 'u2'").exit_code == 1
    done = _sql(root, "--write", "DELETE FROM memories WHERE subject_id = 'u2'")
    assert done.exit_code == 0, done.output
    with Warehouse.open(root) as wh:
        assert wh.query("SELECT count(*) FROM memories").fetchone()[0] == len(
            [m for m in SEED if m.subject_id != "u2"]
        )
