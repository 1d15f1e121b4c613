"""End to end: the nightly job over the planted 40-turn transcript, consent
gating, withdrawal, and ``ctxledger forget`` leaving no byte of the subject's
memories in any warehouse file, history included.

Tests run in file order on one module-scoped warehouse; the erasure test is last.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml
from test_memory_api import leaks
from test_memory_serving import replica_texts

from ctxledger.jobs.nightly import run_nightly
from ctxledger.schemas.memory import ConsentRecord
from ctxledger.serving.memories import memories
from ctxledger.warehouse import Warehouse
from ctxledger.warehouse.memory_api import record_consent

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
PLANTED = ROOT / "tests" / "fixtures" / "planted" / "forty_turns.jsonl"
POLICY = ROOT / "pipelines" / "redact" / "default_policy.yaml"


def _line(session, turn, role, content, minute):
    return json.dumps(
        {"session_id": session, "turn": turn, "role": role, "content": content,
         "created_at": f"2026-03-20T10:{minute:02d}:00Z"}
    ) + "\n"  # fmt: skip


OTHERS = {
    # lee: keeps consent; the control subject of the erasure test
    "lee": [
        "Standing rule: always copy the platform lead on every incident ticket.",
        "My team is storage-reliability.",
    ],
    # sam: withdraws consent
    "sam": ["I prefer short answers with bullet points."],
    # kim: never gave consent
    "kim": ["My employee number is 9001."],
}


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    base = tmp_path_factory.mktemp("memory-e2e")
    landing = base / "landing" / "tenant=acme"
    (landing / "subject=priya").mkdir(parents=True)
    shutil.copy(PLANTED, landing / "subject=priya" / PLANTED.name)
    for subject, statements in OTHERS.items():
        folder = landing / f"subject={subject}"
        folder.mkdir()
        (folder / "chat.jsonl").write_text(
            "".join(
                _line(f"{subject}-1", i, "user", text, i)
                for i, text in enumerate(statements)
            )
        )
    consent = base / "consent.jsonl"
    consent.write_text(
        "".join(
            json.dumps(
                {"event": "grant", "tenant_id": "acme", "subject_id": s,
                 "purpose": "support", "basis": "contract",
                 "at": "2026-01-01T00:00:00Z"}
            ) + "\n"
            for s in ("priya", "lee", "sam")
        )
    )  # fmt: skip
    # The default policy with retention long enough that the 2026-03 transcript
    # stays unexpired for years (the test must not depend on today's date).
    data = yaml.safe_load(POLICY.read_text())
    data["memory"]["retention"] = {
        "user_stated": {"*": 3650},
        "system_record": {"*": 3650},
        "model_inferred": {"*": 3650},
    }
    policy = base / "policy.yaml"
    policy.write_text(yaml.safe_dump(data))
    warehouse = base / "wh"
    result = run_nightly(
        base / "landing", warehouse, policy_file=policy, consent=consent
    )
    return warehouse, result, policy


def _texts(turns):
    lines = [json.loads(x) for x in PLANTED.read_text().splitlines() if x.strip()]
    return {x["turn"]: x["content"] for x in lines if x["turn"] in turns}


def test_run_is_balanced_and_counts_every_candidate(planted):
    warehouse, result, _ = planted
    counts = {c.stage: c for c in result.manifest.stage_counts}
    for stage in ("memory_extract", "memory_gate"):
        assert counts[stage].balanced, counts[stage]
    with Warehouse.open(warehouse) as wh:
        messages = wh.query("SELECT count(*) FROM messages").fetchone()[0]
    assert counts["memory_extract"].records_in == messages + 3  # + consent lines
    gate = counts["memory_gate"]
    assert gate.records_out > 0 and gate.dead >= 1  # kim: rejected, not dropped


def test_planted_rule_and_fact_come_back_with_provenance(planted):
    warehouse, _, _ = planted
    texts = _texts({2, 19, 30})
    with Warehouse.open(warehouse) as wh:
        view = memories(wh, "acme", "priya", "support")
        by_text = {m.text: m for m in view.items}
        # turn 19: the confirmed fact; turn 30: the corrected standing rule
        shard = by_text[texts[19]]
        assert shard.served_as == "fact" and shard.provenance["turn"] == 19
        current = by_text[texts[30]]
        assert current.provenance["turn"] == 30 and current.value == "4471"
        # turn 2 is superseded by turn 30: not served now ...
        assert texts[2] not in view.facts
        # ... but it held between turn 2 and turn 30 (bi-temporal), and it is
        # still stored for audit with its provenance at turn 2.
        before = memories(
            wh, "acme", "priya", "support", at=datetime(2026, 3, 14, 10, 20, tzinfo=UTC)
        )
        old = {m.text: m for m in before.items}[texts[2]]
        assert old.provenance["turn"] == 2 and old.value == "4417"
        assert texts[30] not in before.facts
        row = wh.query(
            "SELECT superseded_by, valid_to, superseded_at FROM memories "
            "WHERE memory_id = ?",
            [old.memory_id],
        ).fetchone()
        assert row[0] == current.memory_id
        assert row[1] == datetime(2026, 3, 14, 10, 30, tzinfo=UTC)
        assert row[2] is not None


def test_no_memory_without_a_live_basis(planted):
    warehouse, _, _ = planted
    with Warehouse.open(warehouse) as wh:
        assert memories(wh, "acme", "kim", "support").items == ()
        kim = wh.query(
            "SELECT count(*) FROM memories WHERE subject_id = 'kim'"
        ).fetchone()[0]
        reasons = wh.query(
            "SELECT reason FROM memory_rejections WHERE subject_id = 'kim'"
        ).fetchall()
        assert kim == 0 and reasons and {r[0] for r in reasons} == {"no_basis"}
        orphans = wh.query(
            "SELECT count(*) FROM memories m ANTI JOIN consent c "
            "ON c.consent_id = m.consent_id AND c.event = 'grant'"
        ).fetchone()[0]
        assert orphans == 0


def test_rerun_adds_nothing(planted):
    warehouse, _, policy = planted
    with Warehouse.open(warehouse) as wh:
        before = (wh.row_counts(), wh.snapshots())
    again = run_nightly(warehouse.parent / "landing", warehouse, policy_file=policy)
    assert again.manifest is None
    with Warehouse.open(warehouse) as wh:
        assert (wh.row_counts(), wh.snapshots()) == before


def test_withdrawal_stops_serving_then_the_nightly_purges(planted):
    warehouse, _, policy = planted
    now = datetime.now(UTC)
    withdraw = ConsentRecord(
        consent_id=ConsentRecord.id_for(
            "acme", "sam", "support", None, "withdraw", now, None
        ),
        tenant_id="acme",
        subject_id="sam",
        purpose="support",
        event="withdraw",
        effective_at=now,
    )
    with Warehouse.open(warehouse) as wh:
        assert memories(wh, "acme", "sam", "support").items
        record_consent(wh, [withdraw])
        assert memories(wh, "acme", "sam", "support").items == ()  # no rebuild
    nightly = run_nightly(warehouse.parent / "landing", warehouse, policy_file=policy)
    assert nightly.memory_maintenance.withdrawn == 1
    with Warehouse.open(warehouse) as wh:
        assert wh.query(
            "SELECT count(*) FROM memories WHERE subject_id = 'sam'"
        ).fetchone() == (0,)
        assert wh.query(
            "SELECT reason, rows_total FROM erasures WHERE reason = 'consent_withdrawn'"
        ).fetchall() == [("consent_withdrawn", 1)]
    # the memory is gone from the memories table's files, history included (the
    # transcript itself stays: withdrawal erases memories, not messages)
    assert leaks(warehouse / "lake" / "main" / "memories", [OTHERS["sam"][0]]) == []
    # ... and from the lookup replica the nightly refreshed after the purge
    assert replica_texts(warehouse, [OTHERS["sam"][0]]) == []
    assert nightly.memory_maintenance.history.snapshots_expired


def test_forget_leaves_no_byte_of_the_subjects_memories(planted):
    warehouse, _, _ = planted
    with Warehouse.open(warehouse) as wh:
        priya = [r[0] for r in wh.query(
            "SELECT DISTINCT text FROM memories WHERE subject_id = 'priya'"
        ).fetchall()]  # fmt: skip
        lee = [r[0] for r in wh.query(
            "SELECT DISTINCT text FROM memories WHERE subject_id = 'lee'"
        ).fetchall()]  # fmt: skip
        snapshots_before = [s[0] for s in wh.snapshots()]
    assert len(priya) >= 3 and lee
    assert leaks(warehouse, priya)  # the check would see them
    # the nightly built the lookup replica: the texts are in it, byte-readable
    assert {t for _, t in replica_texts(warehouse, priya)} == set(priya)
    done = subprocess.run(
        [sys.executable, "-m", "ctxledger.jobs.cli", "forget",
         "--warehouse", str(warehouse), "--tenant", "acme", "--subject", "priya"],
        capture_output=True, text=True, cwd=ROOT,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "erased" in done.stdout and "priya" not in done.stdout
    assert leaks(warehouse, priya) == []
    assert replica_texts(warehouse, priya) == []  # rebuilt without them
    assert leaks(warehouse, ["pay-shard-7", "employee number 4417"]) == []
    assert {t for _, t in leaks(warehouse, lee)} == set(lee)  # others untouched
    with Warehouse.open(warehouse) as wh:
        (receipt,) = wh.query(
            "SELECT reason, subject_hash, rows_total, sessions, snapshots_expired, "
            "catalog_compacted FROM erasures WHERE reason = 'request'"
        ).fetchall()
        assert receipt[0] == "request" and receipt[1].startswith("sub_")
        assert receipt[2] > 41 and receipt[3] == 1
        assert set(receipt[4]) >= set(snapshots_before[:-1]) and receipt[5]
        assert memories(wh, "acme", "priya", "support").items == ()
        assert memories(wh, "acme", "lee", "support").facts
        for table in ("sessions", "messages", "memories", "consent"):
            assert wh.query(
                f"SELECT count(*) FROM {table} WHERE "
                + ("subject_id = 'priya'" if table in ("memories", "consent")
                   else "source_file LIKE '%subject=priya%'" if table == "sessions"
                   else "source_ref LIKE '%subject=priya%'")
            ).fetchone() == (0,)  # fmt: skip
