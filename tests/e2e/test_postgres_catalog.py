"""Acceptance: two nightly jobs commit to one PostgreSQL DuckLake catalog at once.

Both jobs start together against a fresh database (so they also race to create
DuckLake's metadata and our tables), share one ``--data-path`` and keep their own
``--warehouse`` folder (staging, quarantine), as two machines would. Both must
exit 0; every row of both must be there exactly once (the two landing sets share
one tool output, so the ``artifacts`` table has a key both jobs write); both runs
keep their snapshot; and a third run is a no-op.

The server comes from ``CTXLEDGER_TEST_POSTGRES`` (``.ci/run`` sets it from
``.ci/postgres.sh``); without it the test starts ``.ci/postgres.sh`` itself when
PostgreSQL's server binaries are installed, and is skipped otherwise.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from staged_rows import landing_row, staged_sessions

from ctxledger.schemas import LandingFile, RunManifest
from ctxledger.schemas.arrow import to_table
from ctxledger.warehouse import Warehouse
from ctxledger.warehouse.catalog import LAKE_ALIAS, connect
from ctxledger.warehouse.catalog_url import catalog_location
from ctxledger.warehouse.tables import TABLES

ROOT = Path(__file__).resolve().parents[2]
ENV_URL = "CTXLEDGER_TEST_POSTGRES"
RETRY_LOG = "lost a race with a concurrent writer"


def _server_url() -> str:
    url = os.environ.get(ENV_URL)
    if url:
        return url
    if not glob.glob("/usr/lib/postgresql/*/bin/initdb") and not shutil.which("pg_ctl"):
        pytest.skip(f"{ENV_URL} is unset and no PostgreSQL server is installed")
    done = subprocess.run(
        ["bash", str(ROOT / ".ci" / "postgres.sh")], capture_output=True, text=True
    )
    if done.returncode != 0 or not done.stdout.strip():
        pytest.skip(f"could not start PostgreSQL: {done.stderr.strip()[-300:]}")
    return done.stdout.strip().splitlines()[-1]


def _admin(url: str, sql: str) -> None:
    """Run a statement outside a transaction (CREATE/DROP DATABASE)."""
    con = connect()
    try:
        con.execute("LOAD postgres")
        dsn = catalog_location(url).removeprefix("postgres:")
        con.execute(f"ATTACH '{dsn}' AS pg (TYPE postgres)")
        con.execute("CALL postgres_execute('pg', ?, use_transaction := false)", [sql])
    finally:
        con.close()


@pytest.fixture
def catalog_url():
    """A fresh, empty database per test on the test server (dropped afterwards)."""
    server = _server_url()
    name = f"ctxledger_test_{uuid.uuid4().hex[:12]}"
    _admin(server, f'CREATE DATABASE "{name}"')
    base, _, _ = server.rpartition("/")
    yield f"{base}/{name}"
    try:
        _admin(server, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    except Exception:  # noqa: BLE001 - cleanup must not hide the test's result
        pass


def _canonical(path: Path, label: str, sessions: int) -> int:
    """A canonical JSONL file; returns its message count. Each session ends with
    a tool result; one of them is the same text in every file (a shared
    artifact key across the two jobs)."""
    lines = []
    for s in range(sessions):
        sid = f"{label}-s{s}"
        output = "total 0\nREADME.md\n" if s == 0 else f"{label} build {s}: 3 passed"
        lines += [
            {"session_id": sid, "role": "user", "turn": 0, "content": "run the tests"},
            {
                "session_id": sid,
                "role": "assistant",
                "turn": 1,
                "content": "Running them now.",
                "tool_calls": [{"id": f"c{s}", "name": "shell", "arguments": "{}"}],
            },
            {
                "session_id": sid,
                "role": "tool",
                "turn": 2,
                "name": "shell",
                "tool_call_id": f"c{s}",
                "status": "ok",
                "content": output,
            },
            {"session_id": sid, "role": "assistant", "turn": 3, "content": "Done."},
        ]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return len(lines)


def _nightly(landing: Path, warehouse: Path, url: str, data: Path) -> list[str]:
    """The job's ``ctxledger`` arguments."""
    return [
        "nightly",
        "--landing",
        str(landing),
        "--warehouse",
        str(warehouse),
        "--tenant",
        "acme",
        "--catalog",
        url,
        "--data-path",
        str(data),
    ]


def _reader(tmp_path: Path, url: str, data: Path) -> Warehouse:
    return Warehouse.open(tmp_path / "reader", catalog=url, data_path=str(data))


@pytest.mark.slow
def test_two_concurrent_nightly_jobs_on_one_postgres_catalog(
    tmp_path, catalog_url, job_server
):
    landing = {job: tmp_path / f"landing-{job}" for job in ("a", "b")}
    expected_messages = 0
    for job, folder in landing.items():
        for f in range(2):
            expected_messages += _canonical(folder / f"{job}{f}.jsonl", f"{job}{f}", 2)
    data = tmp_path / "shared-data"
    env = {"CTXLEDGER_DEBUG": "1"}
    started = time.monotonic()
    jobs = {
        job: job_server.start(
            _nightly(landing[job], tmp_path / f"wh-{job}", catalog_url, data),
            tmp_path / f"job-{job}.log",
            env,
        )
        for job in ("a", "b")
    }
    outputs = {}
    for job, proc in jobs.items():
        code = proc.wait(timeout=1800)
        outputs[job] = proc.output()
        assert code == 0, f"job {job}: {outputs[job][-3000:]}"
    retries = sum(out.count(RETRY_LOG) for out in outputs.values())
    print(f"two concurrent jobs: {time.monotonic() - started:.1f}s, {retries} retries")

    with _reader(tmp_path, catalog_url, data) as wh:
        # Every row of both jobs once: no table holds a key twice...
        for table, model in TABLES.items():
            key = ", ".join(model.key)
            total, distinct = wh.query(
                f"SELECT count(*), count(DISTINCT ({key})) FROM {table}"
            ).fetchone()
            assert total == distinct, f"{table}: {total} rows, {distinct} keys"
        # ...and nothing is missing: 2 jobs x 2 files x 2 sessions.
        assert wh.query("SELECT count(*) FROM sessions").fetchone()[0] == 8
        assert wh.query("SELECT count(*) FROM messages").fetchone()[0] == (
            expected_messages
        )
        assert wh.processed_hashes() and len(wh.processed_hashes()) == 4
        # Tool outputs: one text in every file, plus one per file: 1 + 4.
        assert wh.query("SELECT count(*) FROM artifacts").fetchone()[0] == 5
        runs = wh.query(
            "SELECT run_id FROM runs WHERE status = 'committed' ORDER BY run_id"
        ).fetchall()
        assert len(runs) == 2
        # No snapshot lost: both runs' snapshots exist, ids have no gaps, and
        # each run's snapshot holds that run's landing files.
        snapshots = wh.snapshots()
        ids = [s[0] for s in snapshots]
        assert ids == list(range(ids[0], ids[0] + len(ids)))
        messages = [s[2] for s in snapshots]
        for (run_id,) in runs:
            assert messages.count(f"run {run_id}") == 1
            snap = wh.snapshot_for_run(run_id)
            files = wh.query(
                "SELECT count(*) FROM landing_files "
                f"AT (VERSION => {int(snap)}) WHERE run_id = ?",
                [run_id],
            ).fetchone()[0]
            assert files == 2
        before = wh.current_snapshot()

    # A third run over either landing set finds nothing new.
    again = job_server.start(
        _nightly(landing["a"], tmp_path / "wh-a", catalog_url, data),
        tmp_path / "job-again.log",
        env,
    )
    assert again.wait(timeout=900) == 0, again.output()[-3000:]
    with _reader(tmp_path, catalog_url, data) as wh:
        assert wh.current_snapshot() == before
        assert wh.query("SELECT count(*) FROM messages").fetchone()[0] == (
            expected_messages
        )


_OPEN_SCRIPT = """
import sys, time
from ctxledger.warehouse import Warehouse
start, root, url, data = float(sys.argv[1]), *sys.argv[2:]
while time.time() < start:
    pass
with Warehouse.open(root, create=True, catalog=url, data_path=data) as wh:
    print(len(wh.existing_tables()))
"""


def test_first_opens_of_a_fresh_postgres_catalog_race_safely(tmp_path, catalog_url):
    """Four processes create the catalog and its tables at the same instant."""
    start = time.time() + 3
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-c",
                _OPEN_SCRIPT,
                str(start),
                str(tmp_path / f"wh{i}"),
                catalog_url,
                str(tmp_path / "data"),
            ],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(4)
    ]
    results = [p.communicate(timeout=300) for p in procs]
    for proc, (out, err) in zip(procs, results, strict=True):
        assert proc.returncode == 0, err[-2000:]
        assert out.strip().splitlines()[-1] == str(len(TABLES))
    with _reader(tmp_path, catalog_url, tmp_path / "data") as wh:
        assert [s[2] for s in wh.snapshots()] == [None, "schema"]


def test_overlapping_commits_on_postgres_land_each_key_once(tmp_path, catalog_url):
    """Deterministic race: writer B commits inside writer A's open transaction.

    A and B share 5 of their 10 session keys. A must lose, run its transaction
    again and add only the 5 keys B did not; both snapshots stay.
    """
    data = str(tmp_path / "data")
    a_shard = staged_sessions(tmp_path, "a", range(0, 10))
    b_shard = staged_sessions(tmp_path, "b", range(5, 15))
    with Warehouse.open(
        tmp_path / "wa", create=True, catalog=catalog_url, data_path=data
    ) as wh_a:
        wh_b = Warehouse(tmp_path / "wb", catalog=catalog_url, data_path=data)
        cursor = wh_a.connection().cursor()
        cursor.execute(f"USE {LAKE_ALIAS}")
        wh_b._con = cursor
        attempts: list[dict[str, int]] = []

        def manifest_a(inserted: dict[str, int]):
            attempts.append(dict(inserted))
            if len(attempts) == 1:
                wh_b.commit_staged(
                    "run-b",
                    {"sessions": [b_shard]},
                    {"landing_files": to_table(LandingFile, [landing_row("b")])},
                    {},
                )
            return to_table(RunManifest, [])

        result = wh_a.commit_staged(
            "run-a",
            {"sessions": [a_shard]},
            {"landing_files": to_table(LandingFile, [landing_row("a")])},
            {},
            manifest=manifest_a,
        )
        cursor.close()
        assert [a["sessions"] for a in attempts] == [10, 5]
        assert result.inserted["sessions"] == 5
        assert wh_a.query(
            "SELECT count(*), count(DISTINCT session_id) FROM sessions"
        ).fetchone() == (15, 15)
        assert wh_a.processed_hashes() == {"a", "b"}
        messages = [s[2] for s in wh_a.snapshots()]
        assert messages.count("run run-a") == messages.count("run run-b") == 1
        assert result.snapshot_id == wh_a.current_snapshot()
