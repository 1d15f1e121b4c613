"""The memory lookup replica (``warehouse.memory_serving``) on real DuckLake
warehouses: it answers exactly as the lake path does on random data, follows
commits (rebuilding only the table that changed), shows withdrawals and expiry
on the next lookup without a rebuild, leaves time travel to the lake, and keeps
no byte of an erased subject.
"""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime, timedelta
from pathlib import Path

from test_memory_api import leaks

from ctxledger.pipelines.memory.extract import memory_id_for
from ctxledger.schemas.arrow import to_table
from ctxledger.schemas.memory import ConsentRecord, MemoryRecord, Provenance
from ctxledger.serving.context import Context
from ctxledger.serving.memories import MemoryStore, memories
from ctxledger.warehouse import Warehouse
from ctxledger.warehouse.erasure import erase_subject
from ctxledger.warehouse.memory_api import record_consent
from ctxledger.warehouse.memory_serving import (
    REPLICA_TABLES,
    ReplicaSet,
    changed_tables,
    lake_snapshot,
    read_replica,
    replica_path,
    serving_dir,
)

NOW = datetime.now(UTC).replace(microsecond=0)
TENANTS = ("acme", "globex")
PURPOSES = ("support", "billing")
SOURCES = ("user_stated", "system_record", "model_inferred")


def _day(days: float) -> datetime:
    return NOW + timedelta(days=days)


def _memory(tenant, subject, text, *, source="user_stated", purpose="support",
            days_ago=3, expires_in=30, provenance="msg", valid_to=None,
            conflict=None, kind="fact", run="r1") -> MemoryRecord:  # fmt: skip
    prov = {
        "msg": Provenance(session_id="ses_1", message_id=f"msg_{text[:12]}", turn=1),
        "input": Provenance(input_ref="records.jsonl#line:3"),
        "unknown": Provenance(),
        None: None,
    }[provenance]
    when = _day(-days_ago)
    return MemoryRecord(
        memory_id=memory_id_for(
            tenant, subject, purpose, kind, source, text, prov or Provenance()
        ),
        tenant_id=tenant,
        subject_id=subject,
        purpose=purpose,
        kind=kind,
        source=source,
        text=text,
        extractor="seed",
        extractor_version="seed-1",
        provenance=prov,
        basis="contract",
        created_at=when,
        valid_from=when,
        valid_to=None if valid_to is None else _day(valid_to),
        recorded_at=when,
        conflict_with=conflict,
        expires_at=_day(expires_in),
        policy_version="seed",
        run_id=run,
    )


def _event(tenant, subject, event, *, purpose="support", basis="contract",
           days_ago=60.0, expires_in=None) -> ConsentRecord:  # fmt: skip
    when = _day(-days_ago)
    expires = None if expires_in is None else _day(expires_in)
    return ConsentRecord(
        consent_id=ConsentRecord.id_for(
            tenant, subject, purpose, basis, event, when, expires
        ),
        tenant_id=tenant,
        subject_id=subject,
        purpose=purpose,
        basis=basis,
        event=event,
        effective_at=when,
        expires_at=expires,
    )


def _commit(wh: Warehouse, run_id: str, rows: list[MemoryRecord]) -> None:
    wh.commit_staged(
        run_id, {}, {"memories": to_table(MemoryRecord, [m.row() for m in rows])}, {}
    )


def _random_memories(rnd: random.Random, n: int, run: str) -> list[MemoryRecord]:
    out = []
    for i in range(n):
        tenant, subject = rnd.choice(TENANTS), f"u{rnd.randrange(8)}"
        out.append(
            _memory(
                tenant,
                subject,
                f'{run} statement {i} of {subject}: "quoted" \u00e9 \\ path/x',
                source=rnd.choice(SOURCES),
                purpose=rnd.choice(PURPOSES),
                days_ago=rnd.choice([400, 45, 20, 5, 1]),
                expires_in=rnd.choice([-10, -1, 2, 40, 500]),
                provenance=rnd.choice(["msg", "msg", "msg", "input", "unknown", None]),
                valid_to=rnd.choice([None, None, None, -30, -2, 3]),
                conflict=rnd.choice([None, None, None, "mem_other"]),
                run=run,
            )
        )
    return out


def _random_events(rnd: random.Random, n: int) -> list[ConsentRecord]:
    out = []
    for _ in range(n):
        event = rnd.choice(["grant", "grant", "withdraw"])
        out.append(
            _event(
                rnd.choice(TENANTS),
                f"u{rnd.randrange(8)}",
                event,
                purpose=rnd.choice(
                    [*PURPOSES, "*"] if event == "withdraw" else PURPOSES
                ),
                basis=rnd.choice(["contract", "consent"])
                if event == "grant"
                else rnd.choice(["contract", None]),
                days_ago=rnd.choice([400, 60, 30, 10, 2, -3]),
                expires_in=rnd.choice([None, None, -5, 20])
                if event == "grant"
                else None,
            )
        )
    return out


def _compare(
    wh: Warehouse, rnd: random.Random, queries: int, store: MemoryStore
) -> int:
    """Ask the replica (through ``store``) and the lake the same random
    questions; return how many answers served something (so the comparison
    is not of empty views only)."""
    nonempty = 0
    for _ in range(queries):
        tenant = rnd.choice([*TENANTS, "initech"])
        subject = f"u{rnd.randrange(9)}"
        purpose = rnd.choice(PURPOSES)
        at = rnd.choice([None, None, _day(-50), _day(-10), _day(-1.5), _day(4)])
        served = memories(wh, tenant, subject, purpose, at, store=store)
        lake = memories(wh, tenant, subject, purpose, at, lake=True)
        assert served.items == lake.items, (tenant, subject, purpose, at)
        nonempty += bool(served.items)
    return nonempty


def test_replica_answers_exactly_as_the_lake_on_random_data(tmp_path):
    rnd = random.Random(7)
    with Warehouse.open(tmp_path / "wh", create=True) as wh:
        _commit(wh, "r1", _random_memories(rnd, 120, "r1"))
        record_consent(wh, _random_events(rnd, 60))
        store = MemoryStore(wh)
        assert _compare(wh, rnd, 100, store) > 15
        before = store.rebuilds
        # new memories and new consent events: both tables move
        _commit(wh, "r2", _random_memories(rnd, 40, "r2"))
        record_consent(wh, _random_events(rnd, 20))
        assert _compare(wh, rnd, 100, store) > 15
        assert store.rebuilds == before + 2
        assert store.snapshot_id == lake_snapshot(wh)
        store.close()
    for table in REPLICA_TABLES:
        assert replica_path(tmp_path / "wh", table).is_file()


def _seeded(root: Path) -> Warehouse:
    wh = Warehouse.open(root, create=True)
    _commit(
        wh,
        "seed",
        [
            _memory("acme", "u1", "Key created 3 days ago", source="system_record"),
            _memory("acme", "u1", "Prefers short answers", source="model_inferred"),
            _memory("acme", "u1", "Plan ends tomorrow", expires_in=1),
            _memory("acme", "u2", "Key created yesterday", source="system_record"),
        ],
    )
    record_consent(
        wh,
        [_event("acme", "u1", "grant"), _event("acme", "u2", "grant", expires_in=1)],
    )
    return wh


def test_refresh_follows_commits_and_rebuilds_only_the_changed_table(tmp_path):
    with _seeded(tmp_path / "wh") as wh:
        store = MemoryStore(wh)
        assert store.memories("acme", "u1", "support").facts == [
            "Key created 3 days ago",
            "Plan ends tomorrow",
        ]
        consent_file = replica_path(wh.root, "consent").stat().st_ino
        rebuilds = store.rebuilds
        _commit(wh, "r2", [_memory("acme", "u1", "My team is storage", days_ago=1)])
        assert "My team is storage" in store.memories("acme", "u1", "support").facts
        assert store.rebuilds == rebuilds + 1  # memories only
        assert replica_path(wh.root, "consent").stat().st_ino == consent_file
        # a commit to another table moves the snapshot but rebuilds nothing
        wh.connection().execute("CREATE TABLE scratch AS SELECT 1 AS x")
        assert store.memories("acme", "u1", "support").facts
        assert store.rebuilds == rebuilds + 1
        assert store.snapshot_id == lake_snapshot(wh)
        store.close()


def test_withdrawal_and_expiry_show_on_the_next_lookup_without_rebuild(tmp_path):
    with _seeded(tmp_path / "wh") as wh:
        clock = {"now": NOW}
        store = MemoryStore(wh, clock=lambda: clock["now"])
        assert "Plan ends tomorrow" in store.memories("acme", "u1", "support").facts
        assert store.memories("acme", "u2", "support").facts
        rebuilds, refreshes = store.rebuilds, store.refreshes
        memories_file = replica_path(wh.root, "memories").stat().st_ino
        clock["now"] = _day(1.5)  # past the memory's expiry and u2's grant end
        assert "Plan ends tomorrow" not in store.memories("acme", "u1", "support").facts
        assert store.memories("acme", "u2", "support").items == ()
        assert (store.rebuilds, store.refreshes) == (rebuilds, refreshes)
        clock["now"] = NOW
        record_consent(wh, [_event("acme", "u1", "withdraw", basis=None, days_ago=0)])
        assert store.memories("acme", "u1", "support").items == ()
        assert store.rebuilds == rebuilds + 1  # consent only
        assert replica_path(wh.root, "memories").stat().st_ino == memories_file
        store.close()


def test_time_travel_reads_the_lake(tmp_path):
    root = tmp_path / "wh"
    with _seeded(root) as wh:
        assert memories(wh, "acme", "u1", "support").facts
        pinned = lake_snapshot(wh)
        _commit(wh, "r2", [_memory("acme", "u1", "Later statement", days_ago=1)])
        assert "Later statement" in memories(wh, "acme", "u1", "support").facts
    with Warehouse.open(root, snapshot=pinned) as old:
        store = MemoryStore(old)
        view = memories(old, "acme", "u1", "support", store=store)
        assert "Later statement" not in view.facts
        assert (store.refreshes, store.snapshot_id) == (0, None)  # not asked


def test_a_context_owns_a_store_per_snapshot_and_closes_it_with_it(tmp_path):
    """The replica reader belongs to the ``Context`` (its snapshot's
    generation), never to a ``Warehouse``, and goes when the snapshot does."""
    root = tmp_path / "wh"
    _seeded(root).close()
    with Context.open(root, poll_s=0, warm=False, blas_threads=None) as ctx:
        assert ctx.memories("acme", "u1", "support").facts
        with ctx.reader.generation() as gen:
            first = gen.state
            attached = [v for v in vars(gen.wh).values() if isinstance(v, ReplicaSet)]
        assert isinstance(first, MemoryStore) and first.snapshot_id is not None
        assert attached == []
        with Warehouse.open(root) as wh:
            _commit(wh, "r2", [_memory("acme", "u1", "Later statement", days_ago=1)])
        assert ctx.refresh()
        assert "Later statement" in ctx.memories("acme", "u1", "support").facts
        with ctx.reader.generation() as gen:
            assert isinstance(gen.state, MemoryStore) and gen.state is not first
        assert first.snapshot_id is None and first._replicas == {}  # closed


def test_a_context_store_reads_its_catalog_signature_once(tmp_path, monkeypatch):
    """A snapshot generation's catalog is a private copy nobody writes, so its
    store (``frozen``) stats it once, not on every lookup; a plain store
    still stats the live catalog on every lookup and sees a commit."""
    import ctxledger.warehouse.memory_serving as serving

    stats = []
    real = serving.file_signature
    monkeypatch.setattr(
        serving, "file_signature", lambda paths: stats.append(1) or real(paths)
    )
    root = tmp_path / "wh"
    _seeded(root).close()
    with Context.open(root, poll_s=0, warm=False, blas_threads=None) as ctx:
        for _ in range(3):
            assert ctx.memories("acme", "u1", "support").facts
        with ctx.reader.generation() as gen:
            assert gen.state.frozen
    assert len(stats) == 1
    stats.clear()
    with Warehouse.open(root) as wh:
        store = MemoryStore(wh)
        for _ in range(3):
            view = store.memories("acme", "u1", "support")
            assert "Later statement" not in view.facts
        _commit(wh, "r2", [_memory("acme", "u1", "Later statement", days_ago=1)])
        assert "Later statement" in store.memories("acme", "u1", "support").facts
        store.close()
    assert len(stats) == 4


def test_a_one_shot_context_reads_the_lake_and_builds_no_replica(tmp_path):
    """``replica=False`` (the ``memories`` command): the same answer, from the
    macro on the snapshot, with no private replica built for one lookup."""
    root = tmp_path / "wh"
    _seeded(root).close()
    with Context.open(root, poll_s=0, warm=False, blas_threads=None) as ctx:
        served = ctx.memories("acme", "u1", "support")
    with Context.open(
        root, poll_s=0, warm=False, blas_threads=None, replica=False
    ) as ctx:
        view = ctx.memories("acme", "u1", "support")
        with ctx.reader.generation() as gen:
            assert gen.state is None
            assert not serving_dir(gen.wh.root).exists()
    assert view.facts and view.items == served.items


def test_changed_tables_reads_the_change_log_and_distrusts_gaps(tmp_path):
    with _seeded(tmp_path / "wh") as wh:
        start = lake_snapshot(wh)
        record_consent(wh, [_event("acme", "u3", "grant")])
        after_consent = lake_snapshot(wh)
        wh.connection().execute("CREATE TABLE scratch AS SELECT 1 AS x")
        assert changed_tables(wh, start, after_consent) == {"consent"}
        assert changed_tables(wh, after_consent, lake_snapshot(wh)) == set()
        assert changed_tables(wh, lake_snapshot(wh), start) == set(REPLICA_TABLES)
        meta = "__ducklake_metadata_lake"
        wh.connection().execute(
            f"DELETE FROM {meta}.ducklake_snapshot_changes WHERE snapshot_id = ?",
            [after_consent],
        )
        assert changed_tables(wh, start, lake_snapshot(wh)) == set(REPLICA_TABLES)


def replica_texts(root: Path, texts: list[str]) -> list[tuple[str, str]]:
    """(file, text) for each text in a serving file: its raw UTF-8 bytes, the
    JSON-escaped form the payloads hold, and the decoded payloads."""
    found = []
    for path in sorted(serving_dir(root).iterdir()):
        data = path.read_bytes()
        for text in texts:
            escaped = json.dumps(text, ensure_ascii=False)[1:-1].encode()
            if text.encode() in data or escaped in data:
                found.append((path.name, text))
        if path.suffix == ".bin":
            with read_replica(path) as replica:
                for payload in replica:
                    values = json.loads(payload)
                    found.extend((path.name, t) for t in texts if t in values)
    return sorted(set(found))


def test_forget_leaves_no_byte_of_the_subject_in_the_replica(tmp_path):
    root = tmp_path / "wh"
    rnd = random.Random(3)
    erased = [
        'Standing rule: tickets go under "employee 4417"',
        "My badge is \u00e9-2291 \\ desk/7",
    ]
    kept = ["Key created yesterday"]
    with _seeded(root) as wh:
        _commit(wh, "r2", [_memory("acme", "u1", t, days_ago=1) for t in erased])
        _commit(wh, "r3", _random_memories(rnd, 30, "r3"))
        assert set(erased) <= set(memories(wh, "acme", "u1", "support").facts)
    assert {t for _, t in replica_texts(root, erased + kept)} == set(erased + kept)
    before = {t: replica_path(root, t).stat().st_ino for t in REPLICA_TABLES}
    erase_subject(root, "acme", "u1")
    assert replica_texts(root, erased) == []
    assert leaks(root, erased) == []
    assert {t for _, t in replica_texts(root, kept)} == set(kept)
    # rebuilt into new files, no partial build left behind
    assert all(replica_path(root, t).stat().st_ino != before[t] for t in REPLICA_TABLES)
    assert sorted(p.name for p in serving_dir(root).iterdir()) == [
        "consent.bin",
        "memories.bin",
    ]
    with Warehouse.open(root) as wh:
        assert memories(wh, "acme", "u1", "support").items == ()
        assert memories(wh, "acme", "u2", "support").facts == kept
