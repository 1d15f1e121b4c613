"""End to end: history redacted by an older detector is named by ``ctxledger
runs`` and re-derived by ``ctxledger backfill --stale``, which touches exactly
those landing files and is a no-op once history is current (issue 29).

The older detector is this one with its e-mail recognizer switched off and its
fingerprint set to zeros, in this process, for the first nightly: its rows are
stamped ``<policy>.00000000`` and keep raw e-mail addresses. The backfills run
as separate processes (``tests/forked_cli.py``), which compute the real
fingerprint themselves: a file the current detector derived in this process
must count as current there too. Tests run in file order on one warehouse.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ctxledger.jobs.cli import app
from ctxledger.jobs.nightly import run_nightly
from ctxledger.pipelines.redact import patterns, registry
from ctxledger.pipelines.redact.registry import load_checked_policy
from ctxledger.warehouse import Warehouse

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
POLICY = ROOT / "policies" / "default.yaml"
OLD = "0" * 64

#: Synthetic support chats (addresses on example domains).
CHATS = {
    "acme": [
        "Please send the invoice to billing.team@example.com by Friday.",
        "Restarting the worker fixed the queue backlog.",
    ],
    "initech": [
        "The deploy finished without errors.",
        "Thanks, closing the ticket now.",
    ],
    "globex": [
        "Forward the logs to ops.oncall@example.org please.",
        "The migration finished.",
    ],
}


def _land(landing: Path, tenant: str) -> None:
    folder = landing / f"tenant={tenant}" / "chats"
    folder.mkdir(parents=True)
    (folder / "support.jsonl").write_text(
        "".join(
            json.dumps(
                {"session_id": f"{tenant}-chat", "turn": i, "role": "user",
                 "content": text, "created_at": f"2026-03-20T10:{i:02d}:00Z"}
            ) + "\n"
            for i, text in enumerate(CHATS[tenant])
        )
    )  # fmt: skip


def _messages(wh, tenant):
    return wh.query(
        "SELECT turn, content, policy_version, run_id, message_id FROM messages "
        "WHERE tenant_id = ? ORDER BY turn",
        [tenant],
    ).fetchall()


def _runs_output(warehouse: Path) -> str:
    result = CliRunner().invoke(
        app,
        ["runs", "-w", str(warehouse), "--policy", str(POLICY)],
        env={"COLUMNS": "400"},
    )
    assert result.exit_code == 0, result.output
    return result.output


@pytest.fixture(scope="module")
def history(tmp_path_factory):
    base = tmp_path_factory.mktemp("stale")
    landing, warehouse = base / "landing", base / "wh"
    _land(landing, "acme")
    _land(landing, "initech")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(registry, "detector_fingerprint", lambda _model: OLD)
        mp.setitem(patterns.PATTERN_DETECTORS, "EMAIL_ADDRESS", lambda _text: [])
        old = run_nightly(landing, warehouse, policy_file=POLICY)
    _land(landing, "globex")
    current = run_nightly(landing, warehouse, policy_file=POLICY)
    assert old.manifest.policy_version.endswith(".00000000")
    assert current.manifest.policy_version == load_checked_policy(POLICY).policy_version
    with Warehouse.open(warehouse) as wh:
        before = {t: _messages(wh, t) for t in CHATS}
    return {
        "base": base,
        "warehouse": warehouse,
        "old": old.manifest,
        "current": current.manifest,
        "before": before,
    }


def _backfill(job_server, history, name, *extra):
    log = history["base"] / f"{name}.log"
    argv = ["backfill", "--stale", "--policy", str(POLICY),
            "-w", str(history["warehouse"]), *extra]  # fmt: skip
    job = job_server.start(argv, log, env={"COLUMNS": "300"})
    assert job.wait(timeout=600) == 0, job.output()[-3000:]
    return job.output()


def test_the_older_detector_left_raw_addresses(history):
    acme = history["before"]["acme"]
    assert "billing.team@example.com" in acme[0][1]
    assert {row[2] for row in acme} == {history["old"].policy_version}
    assert "ops.oncall@example.org" not in history["before"]["globex"][0][1]


def test_runs_names_the_history_of_the_older_detector(history):
    output = _runs_output(history["warehouse"])
    line = next(x for x in output.splitlines() if x.startswith("stale history"))
    assert "2 landing file(s) from 1 run(s)" in line
    assert "with another detector" in line
    assert history["old"].run_id in line and history["current"].run_id not in line
    assert "backfill --stale" in output


def test_stale_backfill_of_unchanged_rows_still_records_them(job_server, history):
    with Warehouse.open(history["warehouse"]) as wh:
        snapshot = wh.current_snapshot()
    output = _backfill(job_server, history, "initech", "--tenant", "initech")
    assert "1 file(s)" in output and "no row differs" in output
    with Warehouse.open(history["warehouse"]) as wh:
        assert wh.current_snapshot() == snapshot + 1
        # same content: the rows stay as they were (docs/backfill.md) ...
        assert _messages(wh, "initech") == history["before"]["initech"]
        (version,) = wh.query(
            "SELECT policy_version FROM runs WHERE job = 'backfill'"
        ).fetchone()
    # ... but the file now counts as derived by the current detector
    assert version == history["current"].policy_version
    line = next(
        x
        for x in _runs_output(history["warehouse"]).splitlines()
        if x.startswith("stale history")
    )
    assert "1 landing file(s) from 1 run(s)" in line


def test_stale_backfill_rederives_exactly_the_stale_rows(job_server, history):
    output = _backfill(job_server, history, "acme")
    assert "1 file(s), 1 session(s)" in output, output
    current = history["current"].policy_version
    with Warehouse.open(history["warehouse"]) as wh:
        acme = _messages(wh, "acme")
        (run_id,) = wh.query(
            "SELECT run_id FROM runs WHERE job = 'backfill' AND run_id NOT IN "
            "(SELECT run_id FROM landing_files WHERE tenant_id = 'initech')"
        ).fetchone()
        read = wh.query(
            "SELECT DISTINCT tenant_id FROM landing_files WHERE run_id = ?", [run_id]
        ).fetchall()
        globex = _messages(wh, "globex")
        initech = _messages(wh, "initech")
    assert read == [("acme",)]
    # the address the older detector missed is redacted now, by this version
    assert "billing.team@example.com" not in acme[0][1]
    assert "<EMAIL_ADDRESS:" in acme[0][1]
    assert acme[0][2] == current and acme[0][3] == run_id
    # files the current detector derived are untouched
    assert globex == history["before"]["globex"]
    assert initech == history["before"]["initech"]
    assert "stale history" not in _runs_output(history["warehouse"])


def test_a_second_stale_backfill_is_a_no_op(job_server, history):
    with Warehouse.open(history["warehouse"]) as wh:
        snapshot = wh.current_snapshot()
        runs = wh.query("SELECT count(*) FROM runs").fetchone()[0]
    output = _backfill(job_server, history, "again")
    assert "nothing to backfill" in output
    with Warehouse.open(history["warehouse"]) as wh:
        assert wh.current_snapshot() == snapshot
        assert wh.query("SELECT count(*) FROM runs").fetchone()[0] == runs
