"""``forget`` and tool evidence shared by two subjects.

Two customers of one tenant get the same tool output (the same bytes): one
stored artifact, two subject-scoped evidence versions. Erasing one customer
removes that customer's evidence rows and keeps the other's, and the artifact
itself (still used by the other session) stays.
"""

from __future__ import annotations

import json

import pytest

from ctxledger.jobs.nightly import run_nightly
from ctxledger.warehouse import Warehouse
from ctxledger.warehouse.erasure import erase_subject

pytestmark = pytest.mark.slow

OUTPUT = "lookup_status: all systems operational, queue depth 12, region eu-west"


def _session(subject: str) -> str:
    lines = [
        {"session_id": f"s-{subject}", "turn": 0, "role": "user",
         "content": "is the service up?", "created_at": "2026-03-02T09:00:00Z"},
        {"session_id": f"s-{subject}", "turn": 1, "role": "assistant",
         "content": "checking",
         "tool_calls": [{"id": "c1", "name": "lookup_status", "arguments": {}}],
         "created_at": "2026-03-02T09:00:01Z"},
        {"session_id": f"s-{subject}", "turn": 2, "role": "tool", "content": OUTPUT,
         "tool_call_id": "c1", "name": "lookup_status", "status": "ok",
         "created_at": "2026-03-02T09:00:02Z"},
    ]  # fmt: skip
    return "".join(json.dumps(x) + "\n" for x in lines)


def _owners(wh: Warehouse, table: str) -> list[str]:
    rows = wh.query(
        f"SELECT DISTINCT subject_id FROM {table} WHERE kind = 'tool_artifact' "
        "ORDER BY 1"
    ).fetchall()
    return [r[0] for r in rows]


def test_forget_removes_the_subjects_copy_of_a_shared_tool_output(tmp_path):
    for subject in ("ana", "bo"):
        folder = tmp_path / "landing" / "tenant=acme" / f"subject={subject}"
        folder.mkdir(parents=True)
        (folder / "chat.jsonl").write_text(_session(subject))
    warehouse = tmp_path / "wh"
    run_nightly(tmp_path / "landing", warehouse)
    with Warehouse.open(warehouse) as wh:
        assert wh.query("SELECT count(*) FROM artifacts").fetchone()[0] == 1
        assert _owners(wh, "documents") == ["ana", "bo"]
        assert _owners(wh, "evidence_chunks") == ["ana", "bo"]
    erase_subject(warehouse, "acme", "bo")
    with Warehouse.open(warehouse) as wh:
        assert _owners(wh, "documents") == ["ana"]
        assert _owners(wh, "evidence_chunks") == ["ana"]
        assert wh.query("SELECT count(*) FROM artifacts").fetchone()[0] == 1
