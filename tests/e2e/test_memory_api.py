"""The query API and the lifecycle on a real DuckLake warehouse (no pipeline).

* the seed article's five-record example plus an unknown-provenance record;
* withdrawal and expiry reflected on the next query, without a rebuild;
* the SQL macros give the same answer as the Python API;
* the nightly lifecycle step: cross-run supersession, retention and withdrawal
  purges with receipts, and history that forgets purged rows.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from ctxledger.pipelines.memory.extract import memory_id_for
from ctxledger.schemas.arrow import to_table
from ctxledger.schemas.memory import ConsentRecord, MemoryRecord, Provenance
from ctxledger.schemas.policy import load_policy
from ctxledger.serving.memories import memories
from ctxledger.warehouse import Warehouse
from ctxledger.warehouse.memory_api import maintain, record_consent

NOW = datetime.now(UTC)
SETTINGS = load_policy(None).memory


def _memory(
    text, *, source, kind="fact", subject="u1", purpose="support", days_ago=3,
    expires_in=30, slot=None, value=None, provenance="default", turn=1, run="r1",
) -> MemoryRecord:  # fmt: skip
    prov = (
        Provenance(session_id="ses_1", message_id=f"msg_{turn}", turn=turn)
        if provenance == "default"
        else provenance
    )
    when = NOW - timedelta(days=days_ago)
    return MemoryRecord(
        memory_id=memory_id_for(
            "acme", subject, purpose, kind, source, text, prov or Provenance()
        ),
        tenant_id="acme",
        subject_id=subject,
        purpose=purpose,
        kind=kind,
        source=source,
        text=text,
        slot=slot,
        value=value,
        extractor="seed",
        extractor_version="seed-1",
        provenance=prov,
        basis="contract",
        created_at=when,
        valid_from=when,
        recorded_at=when,
        expires_at=NOW + timedelta(days=expires_in),
        policy_version="seed",
        run_id=run,
    )


def _event(subject, event, purpose="support", basis="contract", days_ago=60):
    when = NOW - timedelta(days=days_ago)
    return ConsentRecord(
        consent_id=ConsentRecord.id_for(
            "acme", subject, purpose, basis, event, when, None
        ),
        tenant_id="acme",
        subject_id=subject,
        purpose=purpose,
        basis=basis,
        event=event,
        effective_at=when,
    )


def _commit(wh: Warehouse, run_id: str, memories: list[MemoryRecord]) -> None:
    wh.commit_staged(
        run_id,
        {},
        {"memories": to_table(MemoryRecord, [m.row() for m in memories])},
        {},
    )


SEED = [
    # the seed article's five records...
    _memory("Key created 3 days ago", source="system_record", kind="account_state"),
    _memory("Prefers short answers", source="model_inferred", kind="preference"),
    _memory("Billing card ends in 4242", source="user_stated", purpose="billing"),
    _memory("Key created yesterday", source="system_record", subject="u2"),
    _memory("Plan: Pro", source="system_record", days_ago=400, expires_in=-35),
    # ... plus one memory of unknown provenance
    _memory("Prefers dark mode", source="user_stated", provenance=None),
]


@pytest.fixture()
def seeded(tmp_path):
    wh = Warehouse.open(tmp_path / "wh", create=True)
    _commit(wh, "seed", SEED)
    record_consent(
        wh,
        [
            _event("u1", "grant"),
            _event("u1", "grant", purpose="billing"),
            _event("u2", "grant"),
        ],
    )
    yield wh
    wh.close()


def test_seed_example_gives_one_fact_and_one_hypothesis(seeded):
    view = memories(seeded, "acme", "u1", "support")
    assert view.facts == ["Key created 3 days ago"]
    assert view.hypotheses == ["Prefers short answers"]
    assert view.conflicts == []
    (fact,) = view.items_as("fact")
    assert fact.source == "system_record" and fact.provenance["message_id"] == "msg_1"


def test_each_of_the_four_checks_on_its_own(seeded):
    assert memories(seeded, "acme", "u2", "support").facts == ["Key created yesterday"]
    assert memories(seeded, "acme", "u1", "billing").facts == [
        "Billing card ends in 4242"
    ]
    assert memories(seeded, "globex", "u1", "support").items == ()
    texts = {m.text for m in memories(seeded, "acme", "u1", "support").items}
    assert "Plan: Pro" not in texts  # expired
    assert "Prefers dark mode" not in texts  # unknown provenance


def test_sql_macros_give_the_same_answer(seeded):
    from ctxledger.warehouse.memory_api import install_macros

    install_macros(seeded)
    facts = seeded.query(
        "SELECT text FROM memory_facts('acme', 'u1', 'support') ORDER BY text"
    ).fetchall()
    hypotheses = seeded.query(
        "SELECT text FROM memory_hypotheses('acme', 'u1', 'support')"
    ).fetchall()
    assert facts == [("Key created 3 days ago",)]
    assert hypotheses == [("Prefers short answers",)]
    periods = seeded.query(
        "SELECT subject_id, purpose, withdrawn_at FROM consent_periods() "
        "ORDER BY subject_id, purpose"
    ).fetchall()
    assert [(s, p) for s, p, _ in periods] == [
        ("u1", "billing"),
        ("u1", "support"),
        ("u2", "support"),
    ]


def test_sql_file_runs_through_the_sql_command_stdin(seeded, tmp_path):
    import subprocess
    import sys

    root = seeded.root
    seeded.close()
    sql = Path(__file__).resolve().parents[2] / "warehouse" / "sql" / "memory.sql"
    script = sql.read_text() + (
        "SELECT text FROM memory_facts('acme', 'u1', 'support');\n"
    )
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "ctxledger.jobs.cli",
            "sql",
            "-w",
            str(root),
            "-o",
            "csv",
        ],
        input=script,
        capture_output=True,
        text=True,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert done.returncode == 0, done.stderr
    assert "Key created 3 days ago" in done.stdout


def test_withdrawal_and_expiry_show_on_the_next_query_without_rebuild(seeded):
    assert memories(seeded, "acme", "u1", "support").facts
    later = NOW + timedelta(days=31)  # past every u1 support memory's expiry
    assert memories(seeded, "acme", "u1", "support", at=later).items == ()
    record_consent(seeded, [_event("u1", "withdraw", days_ago=0)])
    assert memories(seeded, "acme", "u1", "support").items == ()
    assert memories(seeded, "acme", "u1", "billing").facts  # other purpose untouched
    # a new grant makes the (still stored) memories servable again
    record_consent(seeded, [_event("u1", "grant", basis="consent", days_ago=-0.001)])
    assert memories(seeded, "acme", "u1", "support", at=NOW + timedelta(minutes=1))


def _strings(value):
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def leaks(root: Path, texts: list[str]) -> list[tuple[str, str]]:
    """(file, text) for every text found in any file under root: decoded strings
    of every Parquet file and the raw bytes of every file (catalog included)."""
    found = []
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        data = path.read_bytes()
        found.extend((path.name, t) for t in texts if t.encode() in data)
        if path.suffix == ".parquet":
            for row in pq.read_table(path).to_pylist():
                for value in _strings(row):
                    found.extend((path.name, t) for t in texts if t in value)
    return sorted(set(found))


def test_nightly_lifecycle_supersedes_across_runs_and_purges(tmp_path):
    root = tmp_path / "wh"
    old = _memory("my employee number 4417", source="user_stated", kind="rule",
                  slot="employee_number", value="4417", days_ago=10, turn=2,
                  expires_in=300, run="run1")  # fmt: skip
    new = _memory("my employee number changed to 4471", source="user_stated",
                  kind="rule", slot="employee_number", value="4471", days_ago=5,
                  turn=30, expires_in=300, run="run2")  # fmt: skip
    doomed = _memory("Old plan: Starter", source="system_record", subject="u3",
                     days_ago=100, expires_in=1, run="run1")  # fmt: skip
    gone = _memory("I like green tea", source="user_stated", subject="u4",
                   kind="preference", expires_in=100, run="run1")  # fmt: skip
    with Warehouse.open(root, create=True) as wh:
        _commit(wh, "run1", [old, doomed, gone])
        record_consent(wh, [_event(s, "grant") for s in ("u1", "u3", "u4")])
        _commit(wh, "run2", [new])
        record_consent(wh, [_event("u4", "withdraw", days_ago=1)])
        assert memories(wh, "acme", "u1", "support").facts == [
            "my employee number 4417",
            "my employee number changed to 4471",
        ]  # before the lifecycle step: both current
    result = maintain(
        root, settings=SETTINGS, run_id="run2", now=NOW + timedelta(days=2)
    )
    assert result.resolved == 1
    assert (result.expired, result.withdrawn) == (1, 1)
    assert {r.reason for r in result.receipts} == {"retention", "consent_withdrawn"}
    assert result.history is not None and result.history.snapshots_expired
    with Warehouse.open(root) as wh:
        assert memories(wh, "acme", "u1", "support").facts == [
            "my employee number changed to 4471"
        ]
        row = wh.query(
            "SELECT superseded_by, valid_to FROM memories WHERE memory_id = ?",
            [old.memory_id],
        ).fetchone()
        assert row[0] == new.memory_id and row[1] == new.valid_from
        receipts = wh.query("SELECT reason, rows_total FROM erasures").fetchall()
        assert sorted(receipts) == [("consent_withdrawn", 1), ("retention", 1)]
    assert leaks(root, ["Old plan: Starter", "I like green tea"]) == []
    assert leaks(root, ["my employee number changed to 4471"])  # still there
    again = maintain(
        root, settings=SETTINGS, run_id="run2", now=NOW + timedelta(days=2)
    )
    assert not again.changed and again.snapshot_id is None
