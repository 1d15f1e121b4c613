"""End to end: the nightly job over the bundled sample landing into a real warehouse."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace

import pyarrow.parquet as pq
import pytest

from ctxledger.jobs.nightly import load_run, run_nightly
from ctxledger.pipelines.ingest.landing import discover
from ctxledger.schemas.policy import load_policy
from ctxledger.warehouse import Warehouse

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "sample" / "landing"
#: The sample's memory inputs and closing SQL, as ``make run`` passes them.
CONSENT = ROOT / "sample" / "consent.jsonl"
SYSTEM_RECORDS = ROOT / "sample" / "system-records.jsonl"
SUMMARY_SQL = ROOT / "sample" / "summary.sql"
SAMPLE_INPUTS = ("--consent", str(CONSENT), "--system-records", str(SYSTEM_RECORDS))

#: Values planted in sample/landing/tenant=acme/subject=cust-0001/canonical/
#: support-chat.jsonl.
PLANTED = [
    "dana.whitfield@example.org",
    "sk-test-4f8Kq9Zr2LmX7vB1nC3pD5sT6wY0aE8h",
    "ghp_FAKEFAKEFAKEFAKEFAKEFAKEFAKEFAKE1234",
    "415-555-0172",
    "+1 415 555 0172",
]

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def nightly(tmp_path_factory):
    """The CLI's nightly run over the sample landing (with the sample's consent
    and system records, as ``make run``), with its output kept."""
    warehouse = tmp_path_factory.mktemp("wh")
    done = _cli(
        "nightly", "--landing", str(SAMPLE), "--warehouse", str(warehouse),
        *SAMPLE_INPUTS,
    )  # fmt: skip
    with Warehouse.open(warehouse) as wh:
        run_id = wh.query("SELECT run_id FROM runs").fetchone()[0]
        manifest = load_run(wh, run_id)
    first = SimpleNamespace(
        manifest=manifest, run_id=run_id, output=done.stdout + done.stderr
    )
    first.discovery = discover(SAMPLE, "default")
    return warehouse, first


def test_cli_output_and_logs_hold_no_planted_value(nightly):
    _, result = nightly
    assert "committed" in result.output
    assert [v for v in PLANTED if v in result.output] == []


def test_piped_log_has_one_progress_line_per_stage_while_it_runs(nightly):
    """Non-TTY output (captured here): timestamped per-stage lines with counts,
    before the post-commit steps, not only the summary at the end."""
    _, result = nightly
    lines = result.output.splitlines()
    end = next(i for i, line in enumerate(lines) if "retention:" in line)
    stages = {}
    for line in lines[:end]:
        _, _, rest = line.partition(" stage ")
        if rest:
            stages[rest.split(":")[0]] = rest
    assert {"ingest", "redact", "ledger", "memory_extract", "commit"} <= set(stages)
    # ingest counts the run's 9 landing files, redact the sessions it drafted
    assert stages["ingest"].startswith("ingest: 9 / 9 files (100%)")
    assert " sessions" in stages["redact"] and " out, " in stages["redact"]


def test_first_run_commits_one_balanced_snapshot(nightly):
    warehouse, result = nightly
    manifest = result.manifest
    assert manifest is not None and manifest.status == "committed"
    assert manifest.snapshot_id is not None
    stages = [c.stage for c in manifest.stage_counts]
    assert stages[:3] == ["ingest", "validate", "redact"]
    assert len(stages) == len(set(stages))
    for count in manifest.stage_counts:
        assert count.records_in == count.records_out + count.dead, count
    assert all(c.records_in > 0 for c in manifest.stage_counts[:3])
    with Warehouse.open(warehouse) as wh:
        counts = wh.row_counts()
        assert wh.current_snapshot() == manifest.snapshot_id
    for table in ("sessions", "messages", "artifacts", "tool_observations", "runs"):
        assert counts[table] > 0, table
    assert counts["landing_files"] == len(result.discovery.items)


def test_bad_records_are_dead_letters_with_reasons_and_locations(nightly):
    warehouse, _ = nightly
    with Warehouse.open(warehouse) as wh:
        rows = wh.query(
            "SELECT source_file, source_offset, reason_code, message, quarantine_ref "
            "FROM dead_letters ORDER BY source_file, source_offset"
        ).fetchall()
    reasons = {(Path(f).name, code) for f, _, code, _, _ in rows}
    assert ("support-chat.jsonl", "unknown_role") in reasons
    assert ("support-chat.jsonl", "malformed_json") in reasons
    assert ("support-chat.jsonl", "wrong_type") in reasons
    assert ("truncated-upload.json", "malformed_json") in reasons
    for _, offset, _, message, quarantine in rows:
        assert offset
        assert "narrator" not in message and "This line" not in message
        if quarantine:
            path = warehouse / quarantine
            assert path.exists() and oct(path.stat().st_mode & 0o777) == "0o600"


def test_second_run_adds_nothing(nightly):
    warehouse, _ = nightly
    with Warehouse.open(warehouse) as wh:
        before_counts, before_snapshots = wh.row_counts(), wh.snapshots()
    again = run_nightly(
        SAMPLE, warehouse, consent=CONSENT, system_records=SYSTEM_RECORDS
    )
    assert again.manifest is None and again.files_new == 0
    with Warehouse.open(warehouse) as wh:
        assert wh.row_counts() == before_counts
        assert wh.snapshots() == before_snapshots


def _strings(value):
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def test_no_planted_value_in_any_parquet_file_or_table(nightly):
    warehouse, _ = nightly
    files = list((warehouse / "lake").rglob("*.parquet"))
    assert files
    leaks = []
    for path in files:
        for row in pq.read_table(path).to_pylist():
            for text in _strings(row):
                leaks.extend((path.name, v) for v in PLANTED if v in text)
    with Warehouse.open(warehouse) as wh:
        for table in wh.row_counts():
            for row in (
                wh.query(f"SELECT * FROM {table}").arrow().read_all().to_pylist()
            ):
                for text in _strings(row):
                    leaks.extend((table, v) for v in PLANTED if v in text)
    assert leaks == []


def test_redaction_left_joinable_pseudonyms(nightly):
    warehouse, _ = nightly
    with Warehouse.open(warehouse) as wh:
        contents = [
            r[0]
            for r in wh.query(
                "SELECT content FROM messages WHERE tenant_id = 'acme' "
                "AND content LIKE '%<EMAIL_ADDRESS:%'"
            ).fetchall()
        ]
    assert contents, "the planted email should be pseudonymised, not dropped"


def _stored_unless_expired(observed: datetime, days: int) -> bool:
    """Whether a sample memory observed at ``observed`` is still inside its
    retention today: the sample's dated lines age out by design (the gate then
    refuses them ``expired``), so the assertions follow the calendar."""
    return observed + timedelta(days=days) > datetime.now(UTC)


def test_consent_admits_a_handful_of_memories_and_refuses_the_rest(nightly):
    """With sample/consent.jsonl the run stores memories, only for the two
    consenting subjects; the tau-bench users gave no consent (``no_basis``)."""
    warehouse, result = nightly
    retention = load_policy().memory.retention
    with Warehouse.open(warehouse) as wh:
        stored = wh.query(
            "SELECT subject_id, purpose, source, text FROM memories"
        ).fetchall()
        refused = dict(
            wh.query(
                "SELECT reason, count(*) FROM memory_rejections GROUP BY ALL"
            ).fetchall()
        )
        refused_subjects = {
            r[0]
            for r in wh.query("SELECT subject_id FROM memory_rejections").fetchall()
        }
    gate = next(c for c in result.manifest.stage_counts if c.stage == "memory_gate")
    assert gate.records_out == len(stored) > 0
    assert {subject for subject, *_ in stored} <= {"cust-0001", "cust-0002"}
    assert refused.get("no_basis", 0) > 0
    assert any(s.startswith("session:") for s in refused_subjects)
    # cust-0002's api-bank dialogue has no timestamps: stored as of the run,
    # so these hold on any date.
    undated = {(src, text) for subj, _, src, text in stored if subj == "cust-0002"}
    assert ("user_stated", "My username is JaneSmith") in undated
    assert ("system_record", "Username: JaneSmith") in undated
    # The support chat (2026-03-02) and the system records (2026-11-30).
    said = datetime(2026, 3, 2, 9, 14, tzinfo=UTC)
    texts = {(subj, purpose, text) for subj, purpose, _, text in stored}
    rule = ("cust-0001", "support", "Any ticket you open goes under my employee "
            "number 4417.")  # fmt: skip
    assert (rule in texts) == _stored_unless_expired(
        said, retention["user_stated"]["rule"]
    )
    observed = datetime(2026, 11, 30, tzinfo=UTC)
    plan = ("cust-0001", "billing", "Plan: Pro (annual)")
    assert (plan in texts) == _stored_unless_expired(
        observed, retention["system_record"]["*"]
    )
    assert all("<" in t for _, _, t in texts if "email is" in t.lower())


def test_make_run_summary_shows_memories_redactions_and_a_ledger_excerpt(nightly):
    """What ``make run`` ends with (sample/summary.sql through ``ctxledger
    sql``): redaction counts, the stored memories, the gate's refusals, the
    evidence chunks and one ledger entry, shown as stored (no rich markup
    eaten), with no planted value."""
    warehouse, _ = nightly
    make = (ROOT / "Makefile").read_text()
    assert "< sample/summary.sql" in make and "sample/consent.jsonl" in make
    done = subprocess.run(
        [sys.executable, "-m", "ctxledger.jobs.cli", "sql",
         "--warehouse", str(warehouse)],
        stdin=SUMMARY_SQL.open(encoding="utf-8"),
        capture_output=True, text=True, cwd=ROOT, env={**os.environ, "COLUMNS": "250"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    out = done.stdout
    for heading in ("redacted", "memories of", "not stored", "evidence chunks"):
        assert heading in out, heading
    assert "EMAIL_ADDRESS" in out and "no_basis" in out and "tool_artifact" in out
    assert "cust-0002" in out and "Username: JaneSmith" in out
    assert "acme-support-0001" in out and "# Ledger summary" in out
    assert "lookup_account [ok]" in out  # a value with brackets, not markup
    assert "- none" not in out  # empty ledger sections are left out
    assert [v for v in PLANTED if v in out] == []


def test_portable_runner_gives_the_same_rows(tmp_path):
    landing = tmp_path / "landing"
    acme = SAMPLE / "tenant=acme"
    shutil.copytree(acme / "canonical", landing / "tenant=acme")
    shutil.copytree(
        acme / "subject=cust-0001" / "canonical",
        landing / "tenant=acme",
        dirs_exist_ok=True,
    )
    shutil.copytree(SAMPLE / "tenant=globex" / "openhands", landing / "tenant=globex")
    direct = run_nightly(landing, tmp_path / "direct")
    portable = run_nightly(
        landing,
        tmp_path / "portable",
        beam_args=[
            "--runner=PortableRunner",
            "--job_endpoint=embed",
            "--environment_type=LOOPBACK",
        ],
    )
    assert portable.manifest.runner == "PortableRunner"
    assert portable.run_id == direct.run_id
    tables = ("sessions", "messages", "artifacts", "tool_observations", "dead_letters")
    rows = {}
    for name in ("direct", "portable"):
        with Warehouse.open(tmp_path / name) as wh:
            rows[name] = {
                t: sorted(map(str, wh.query(f"SELECT * FROM {t}").fetchall()))
                for t in tables
            }
    assert rows["direct"] == rows["portable"]


def _cli(*args, check=True):
    env = {**os.environ, "COLUMNS": "200"}
    done = subprocess.run(
        [sys.executable, "-m", "ctxledger.jobs.cli", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
    )
    if check:
        assert done.returncode == 0, done.stderr
    return done


def test_cli_reports_runs_dead_letters_and_sql(nightly):
    warehouse, result = nightly
    runs = _cli("runs", "--warehouse", str(warehouse))
    assert result.run_id in runs.stdout and "committed" in runs.stdout
    dead = _cli("dead-letters", "--warehouse", str(warehouse))
    assert "unknown_role" in dead.stdout
    out = _cli(
        "sql",
        "--warehouse",
        str(warehouse),
        "-o",
        "csv",
        "SELECT count(*) AS n FROM sessions",
    )
    assert out.stdout.splitlines()[0] == "n" and int(out.stdout.splitlines()[1]) > 0


def test_cli_fails_with_one_line_reason(tmp_path):
    done = _cli("runs", "--warehouse", str(tmp_path / "nope"), check=False)
    assert done.returncode == 1
    assert "no warehouse" in done.stderr
    assert "Traceback" not in done.stderr
    bad = _cli(
        "nightly",
        "--landing",
        str(tmp_path / "missing"),
        "--warehouse",
        str(tmp_path),
        check=False,
    )
    assert bad.returncode == 1 and "landing folder not found" in bad.stderr
