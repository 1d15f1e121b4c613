"""``ctxledger forget`` leaves no byte of the subject anywhere under the warehouse.

Two subjects reuse one session id (``chat-1``) in their own files; a shared file
holds a session of each plus a rejected line of each (one naming its subject in
``metadata``, one only continuing the subject's session); a ``subject=bob/``
folder holds a line that is not even JSON. A backfill's quarantine copy and a
crashed run's staging shard are planted as well. After ``forget`` for bob, every
file under the warehouse (catalog, Parquet, quarantine, staging, the serving
replica) is scanned for bob's strings, raw and JSON-escaped: none is left, and
alice's are all still there.
"""

from __future__ import annotations

import json
import shutil

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from test_memory_api import leaks
from typer.testing import CliRunner

from ctxledger.jobs.cli import app
from ctxledger.jobs.nightly import run_nightly
from ctxledger.warehouse import Warehouse

pytestmark = pytest.mark.slow

BOB = [
    "quokka marmalade saxophone",
    'wombat "custard" trombone \u00e9lan',
    "narwhal pancake accordion",
    "axolotl folder kazoo",
]
ALICE = [
    "pelican turnip harmonica",
    'lemur "biscuit" clarinet \u00e9clair',
    "toucan noodle bagpipe",
]


def _line(session, role, content, subject=None):
    row = {"session_id": session, "role": role, "content": content}
    if subject:
        row["metadata"] = {"subject_id": subject}
    return json.dumps(row) + "\n"


def _forms(texts):
    """Each text raw, as JSON writes it (ASCII-escaped), and JSON-escaped UTF-8."""
    out = []
    for text in texts:
        out += [
            text,
            json.dumps(text)[1:-1],
            json.dumps(text, ensure_ascii=False)[1:-1],
        ]
    return sorted(set(out))


def _all_seen(root, texts) -> bool:
    """Whether every text is found, in one of its forms, somewhere under root."""
    found = {t for _, t in leaks(root, _forms(texts))}
    return all(found & set(_forms([text])) for text in texts)


@pytest.fixture(scope="module")
def landed(tmp_path_factory):
    base = tmp_path_factory.mktemp("forget-bytes")
    tenant = base / "landing" / "tenant=acme"
    (tenant / "subject=bob").mkdir(parents=True)
    (tenant / "alice.jsonl").write_text(
        _line("chat-1", "user", f"Remember: {ALICE[0]}.", "alice")
    )
    (tenant / "bob.jsonl").write_text(
        _line("chat-1", "user", f"Remember: {BOB[0]}.", "bob")
    )
    (tenant / "shared.jsonl").write_text(
        _line("s-alice", "user", "Hello from the first user.", "alice")
        + _line("s-bob", "user", "Hello from the second user.", "bob")
        + _line("s-alice", "robot", ALICE[1], "alice")  # rejected: unknown role
        + _line("s-bob", "robot", BOB[1], "bob")  # rejected, names bob
        + _line("s-bob", "robot", BOB[2])  # rejected, continues bob's session
        + _line("s-alice", "robot", ALICE[2])  # rejected, continues alice's
    )
    (tenant / "subject=bob" / "notes.jsonl").write_text(
        _line("n-1", "user", "A note without metadata.")
        + "{not json at all: "
        + BOB[3]
        + "\n"
    )
    warehouse = base / "wh"
    result = run_nightly(base / "landing", warehouse, source_format="canonical")
    assert result.manifest is not None
    return warehouse


def test_two_subjects_reusing_a_session_id_stay_two_sessions(landed):
    with Warehouse.open(landed) as wh:
        rows = wh.query(
            "SELECT session_id, metadata FROM sessions WHERE external_id = 'chat-1'"
        ).fetchall()
    assert len({r[0] for r in rows}) == 2, rows


def test_forget_removes_one_subject_quarantine_included(landed):
    root = landed
    quarantined = sorted((root / "quarantine").rglob("*.bin"))
    assert len(quarantined) >= 5  # 2 alice + 3 bob rejected lines
    assert _all_seen(root, BOB)  # the scan would see them
    # a backfill's copy of a quarantined line, under its own run folder
    bob_files = [p for p in quarantined if BOB[2].encode() in p.read_bytes()]
    copy = root / "quarantine" / "run_backfill" / bob_files[0].name
    copy.parent.mkdir(parents=True)
    shutil.copy(bob_files[0], copy)
    # a crashed run's staged shard
    shard = root / "staging" / "run_crashed" / "messages" / "part-0.parquet"
    shard.parent.mkdir(parents=True)
    pq.write_table(pa.table({"content": [BOB[0], ALICE[0]]}), shard)

    done = CliRunner().invoke(
        app, ["forget", "-w", str(root), "--tenant", "acme", "--subject", "bob"]
    )
    assert done.exit_code == 0, done.output
    assert "bob" not in done.output
    assert leaks(root, _forms(BOB)) == []
    assert _all_seen(root, ALICE)  # the other subject is untouched
    with Warehouse.open(root) as wh:
        sessions = wh.query(
            "SELECT count(*) FROM sessions WHERE external_id = 'chat-1'"
        ).fetchone()[0]
        dead = wh.query(
            "SELECT count(*) FROM dead_letters WHERE quarantine_ref IS NOT NULL"
        ).fetchone()[0]
        (deleted,) = wh.query(
            "SELECT quarantine_files_deleted FROM erasures WHERE reason = 'request'"
        ).fetchone()
    assert sessions == 1
    assert dead == 2  # alice's two rejected lines keep their quarantine refs
    assert deleted == 4  # bob's three lines and the backfill's copy
