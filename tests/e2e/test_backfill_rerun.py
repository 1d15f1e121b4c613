"""An identical backfill is a no-op, also over input that carries no times.

Tool outputs of SWE-agent transcripts and memories stated in undated chats have
no time of their own; they take the run's logical time (``JobConfig.received_at``:
the nightly's start, and for a backfill when its files were first received),
never the wall clock of the run that derives them. So a backfill under the
policy the nightly used, and the same backfill again, commit nothing (issue 32:
each rerun used to rewrite every undated tool-artifact document and chunk, and
the memories of undated chats).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from ctxledger.jobs.backfill import run_backfill
from ctxledger.jobs.nightly import run_nightly
from ctxledger.warehouse import Warehouse

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
SWE = ROOT / "tests" / "fixtures" / "transcripts" / "swe_agent_function_calling.traj"
POLICY = ROOT / "pipelines" / "redact" / "default_policy.yaml"

#: An undated support chat whose user states standing rules (memories).
CHAT = [
    "From now on, always send my invoices to the billing team.",
    "Noted, invoices go to billing from now on.",
    "Please never call me before 9am.",
]


def _tables(wh) -> dict[str, list]:
    return {
        table: sorted(map(str, wh.query(f"SELECT * EXCLUDE (run_id) FROM {table}")
                      .fetchall()))
        for table in ("documents", "evidence_chunks", "memories", "messages")
    }  # fmt: skip


def test_an_identical_backfill_commits_nothing(tmp_path):
    subject = tmp_path / "landing" / "tenant=acme" / "subject=priya"
    subject.mkdir(parents=True)
    shutil.copy(SWE, subject / SWE.name)
    (subject / "chat.jsonl").write_text(
        "".join(
            json.dumps({"session_id": "undated", "turn": i,
                        "role": "user" if i % 2 == 0 else "assistant",
                        "content": text}) + "\n"
            for i, text in enumerate(CHAT)
        )
    )  # fmt: skip
    consent = tmp_path / "consent.jsonl"
    consent.write_text(
        json.dumps(
            {"event": "grant", "tenant_id": "acme", "subject_id": "priya",
             "purpose": "support", "basis": "contract",
             "at": "2020-01-01T00:00:00Z"}
        ) + "\n"
    )  # fmt: skip
    warehouse = tmp_path / "wh"
    run_nightly(tmp_path / "landing", warehouse, policy_file=POLICY, consent=consent)
    with Warehouse.open(warehouse) as wh:
        (started,) = wh.query(
            "SELECT started_at FROM runs WHERE job = 'nightly'"
        ).fetchone()
        undated = wh.query(
            "SELECT DISTINCT effective_from FROM documents WHERE kind = 'tool_artifact'"
        ).fetchall()
        memories = wh.query("SELECT DISTINCT valid_from FROM memories").fetchall()
        before, rows = wh.current_snapshot(), _tables(wh)
    # the run's logical time, not each worker's clock
    assert undated == [(started,)]
    assert memories == [(started,)]
    for _ in range(2):
        result = run_backfill(warehouse, policy_file=POLICY, tenant="acme")
        assert result.snapshot_id is None and result.changes == []
        with Warehouse.open(warehouse) as wh:
            assert wh.current_snapshot() == before
            assert _tables(wh) == rows
