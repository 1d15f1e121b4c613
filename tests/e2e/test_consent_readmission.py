"""End to end: a consent grant that arrives after the first run re-admits the
statements it covers on the next nightly, without a backfill; and a record of
unknown source is stored, counted, and never served.

* nightly 1 lands two subjects' sessions and no consent: every statement is
  rejected ``no_basis`` and kept only as a text-free pointer;
* nightly 2 lands only a consent file (granting ``ana``) and a system-record
  file stating an unrecognised source: ana's statements appear with their
  original provenance and time, the unknown-source record is stored, not served;
* a grant for ``bo`` recorded through the API, then nightly 3 with nothing new
  (a ``retention`` run): bo's statement appears too;
* nightly 4 changes nothing; ``forget`` erases the pointers with the subject.

Tests run in file order on one module-scoped warehouse.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml

from ctxledger.jobs.nightly import run_nightly
from ctxledger.schemas.memory import ConsentRecord
from ctxledger.schemas.policy import load_policy
from ctxledger.serving.memories import memories
from ctxledger.warehouse import Warehouse
from ctxledger.warehouse.erasure import erase_subject
from ctxledger.warehouse.memory_api import record_consent

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
POLICY = ROOT / "pipelines" / "redact" / "default_policy.yaml"
SAID = {
    "ana": [
        "I prefer short answers with bullet points.",
        "Standing rule: always copy the platform lead on every incident ticket.",
    ],
    "bo": ["Always run the tests before pushing."],
}
UNKNOWN = "Plan: Enterprise since March."


def _session(subject: str, statements: list[str]) -> str:
    return "".join(
        json.dumps(
            {"session_id": f"{subject}-1", "turn": i, "role": "user",
             "content": text, "created_at": f"2026-03-20T10:{i:02d}:00Z"}
        ) + "\n"
        for i, text in enumerate(statements)
    )  # fmt: skip


def _grant(subject: str) -> dict:
    return {"event": "grant", "tenant_id": "acme", "subject_id": subject,
            "purpose": "support", "basis": "consent",
            "at": "2026-03-25T00:00:00Z"}  # fmt: skip


@pytest.fixture(scope="module")
def lake(tmp_path_factory):
    base = tmp_path_factory.mktemp("readmission")
    for subject, statements in SAID.items():
        folder = base / "landing" / "tenant=acme" / f"subject={subject}"
        folder.mkdir(parents=True)
        (folder / "chat.jsonl").write_text(_session(subject, statements))
    data = yaml.safe_load(POLICY.read_text())
    # retention long enough that the 2026-03 statements never expire in the test
    data["memory"]["retention"] = {
        "user_stated": {"*": 3650},
        "system_record": {"*": 3650},
        "model_inferred": {"*": 3650},
    }
    policy = base / "policy.yaml"
    policy.write_text(yaml.safe_dump(data))
    first = run_nightly(base / "landing", base / "wh", policy_file=policy)
    return base, policy, first


def _rows(warehouse: Path, sql: str, params=()):
    with Warehouse.open(warehouse) as wh:
        return wh.query(sql, list(params)).fetchall()


def _vectors(warehouse: Path, subject: str) -> list[tuple]:
    """(model, width, unit norm) of the subject's user statements' vectors."""
    return _rows(
        warehouse,
        "SELECT embed_model, len(embedding), "
        "CASE WHEN embedding IS NOT NULL THEN "
        "abs(list_dot_product(embedding, embedding) - 1) < 1e-3 END FROM memories "
        "WHERE subject_id = ? AND source = 'user_stated'",
        [subject],
    )


def test_nightly_1_rejects_without_basis_and_keeps_only_pointers(lake):
    base, _, first = lake
    warehouse = base / "wh"
    assert first.manifest.status == "committed"
    assert _rows(warehouse, "SELECT count(*) FROM memories") == [(0,)]
    pointers = _rows(
        warehouse,
        "SELECT subject_id, reason, readmission, provenance.message_id, "
        "provenance.char_start, extractor_version FROM memory_rejections "
        "ORDER BY subject_id",
    )
    assert [(s, r, p) for s, r, p, *_ in pointers] == [
        ("ana", "no_basis", "pending"),
        ("ana", "no_basis", "pending"),
        ("bo", "no_basis", "pending"),
    ]
    assert all(m and start is not None and v for *_, m, start, v in pointers)
    # text-free: no statement in any rejection column
    flat = json.dumps(_rows(warehouse, "SELECT * FROM memory_rejections"), default=str)
    assert not [t for texts in SAID.values() for t in texts if t in flat]


def test_nightly_2_a_consent_file_alone_readmits_with_provenance(lake):
    base, policy, _ = lake
    warehouse = base / "wh"
    consent = base / "consent.jsonl"
    # bo's grant states a source we do not know: stored, but no basis
    unknown_grant = {**_grant("bo"), "source": "crm-export"}
    consent.write_text(
        json.dumps(_grant("ana")) + "\n" + json.dumps(unknown_grant) + "\n"
    )
    records = base / "records.jsonl"
    records.write_text(
        json.dumps(
            {"tenant_id": "acme", "subject_id": "ana", "purpose": "support",
             "key": "plan",
             "text": UNKNOWN, "observed_at": "2026-03-26T00:00:00Z",
             "source": "sytem_record"}
        ) + "\n"
    )  # fmt: skip
    second = run_nightly(
        base / "landing",
        warehouse,
        policy_file=policy,
        consent=consent,
        system_records=records,
    )
    assert second.files_new == 0 and second.memory_inputs_new == 2
    assert json.loads(second.manifest.retention)["memories_readmitted"] == 2
    with Warehouse.open(warehouse) as wh:
        view = memories(wh, "acme", "ana", "support")
        lake_view = memories(wh, "acme", "ana", "support", lake=True)
        rows = wh.query(
            "SELECT m.text, m.source, m.valid_from, m.created_at, m.run_id, "
            "m.provenance.message_id, s.turn, s.created_at FROM memories m "
            "LEFT JOIN messages s ON s.message_id = m.provenance.message_id "
            "WHERE m.subject_id = 'ana' ORDER BY m.text"
        ).fetchall()
        marks = wh.query(
            "SELECT subject_id, readmission, readmission_run_id "
            "FROM memory_rejections ORDER BY subject_id"
        ).fetchall()
    assert sorted(view.facts) == sorted(SAID["ana"]) == sorted(lake_view.facts)
    # re-admitted memories carry their vector from the write, like the nightly's
    model = load_policy(policy).evidence.embedding.model
    assert _vectors(warehouse, "ana") == [(model, 384, True)] * 2
    assert {m for m, _v in view.vectors.values()} == {model}
    assert len(view.vectors) == len(view.items) == 2
    said = [r for r in rows if r[1] == "user_stated"]
    assert sorted(r[0] for r in said) == sorted(SAID["ana"])
    for _, _, valid_from, created_at, run_id, message_id, _, message_at in said:
        # provenance to the original message; valid from its time; made now
        assert message_id and valid_from == message_at
        assert created_at > valid_from and run_id == second.run_id
    assert marks == [
        ("ana", "readmitted", second.run_id),
        ("ana", "readmitted", second.run_id),
        ("bo", "pending", None),
    ]
    # the unrecognised source: stored as unknown, counted, served by no path
    assert _rows(warehouse, "SELECT subject_id, source FROM consent ORDER BY 1") == [
        ("ana", None),
        ("bo", "unknown"),
    ]
    assert [r[:2] for r in rows if r[1] != "user_stated"] == [(UNKNOWN, "unknown")]
    assert UNKNOWN not in [m.text for m in view.items + lake_view.items]
    assert _rows(
        warehouse,
        "SELECT source, count(*) FROM memories WHERE run_id = ? GROUP BY ALL "
        "ORDER BY source",
        [second.run_id],
    ) == [("unknown", 1), ("user_stated", 2)]


def test_a_grant_with_nothing_new_readmits_in_the_retention_run(lake):
    base, policy, _ = lake
    warehouse = base / "wh"
    line = _grant("bo")
    at = datetime.fromisoformat(line["at"]).astimezone(UTC)
    event = ConsentRecord(
        consent_id=ConsentRecord.id_for(
            "acme", "bo", "support", "consent", "grant", at, None
        ),
        tenant_id="acme",
        subject_id="bo",
        purpose="support",
        basis="consent",
        event="grant",
        effective_at=at,
    )
    with Warehouse.open(warehouse) as wh:
        assert record_consent(wh, [event]) == 1
        assert memories(wh, "acme", "bo", "support").facts == []
    third = run_nightly(base / "landing", warehouse, policy_file=policy)
    assert third.manifest is None  # nothing new: a retention run
    assert third.retention.memories_readmitted == 1
    with Warehouse.open(warehouse) as wh:
        assert memories(wh, "acme", "bo", "support").facts == SAID["bo"]
        (run,) = wh.query(
            "SELECT r.job FROM memories m JOIN runs r USING (run_id) "
            "WHERE m.subject_id = 'bo'"
        ).fetchall()
    assert run == ("retention",)
    assert _vectors(warehouse, "bo") == [
        (load_policy(policy).evidence.embedding.model, 384, True)
    ]


def test_nightly_4_changes_nothing_and_forget_erases_the_pointers(lake):
    base, policy, _ = lake
    warehouse = base / "wh"
    with Warehouse.open(warehouse) as wh:
        before = (wh.row_counts(), wh.snapshots())
    again = run_nightly(base / "landing", warehouse, policy_file=policy)
    assert again.manifest is None and not again.retention.memories_readmitted
    with Warehouse.open(warehouse) as wh:
        assert (wh.row_counts(), wh.snapshots()) == before
    erase_subject(warehouse, "acme", "ana")
    left = _rows(
        warehouse,
        "SELECT subject_id, count(*) FROM memory_rejections GROUP BY ALL",
    )
    assert left == [("bo", 1)]
