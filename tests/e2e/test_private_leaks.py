"""Issue 11's planted values that used to survive: e-mail addresses at private
domains and passwords typed in prose, in user text, tool arguments and tool
outputs. One nightly with a consent grant (so memories, ledgers, evidence and the
serving replica are all written), then every file under the warehouse and the
run's log are scanned for each value, raw and JSON-escaped: none may be there.

The values are invented for this test (no corpus, no real person).
"""

from __future__ import annotations

import json
import logging

import pytest
from test_memory_api import leaks

from ctxledger.jobs.nightly import run_nightly
from ctxledger.serving.memories import memories
from ctxledger.warehouse import Warehouse

pytestmark = pytest.mark.slow

PLANTED = [
    "rowan.tessaly@quillmere.internal",
    "ops-oncall@build.local",
    "h.vantongeren@acme.corp",
    "someone@company.example",
    "Zq7maplefrost",
    "adminpass-4471",
    "t0k3n-Harbor-88xq",
    "Kestrel-5150q",
]


def _line(turn, role, content, **extra):
    row = {
        "session_id": "s-1",
        "turn": turn,
        "role": role,
        "content": content,
        "created_at": f"2026-03-20T10:{turn:02d}:00Z",
        "metadata": {"subject_id": "u-7"},
    }
    return json.dumps(row | extra) + "\n"


def _landing(folder):
    tenant = folder / "tenant=acme"
    tenant.mkdir(parents=True)
    call = {
        "id": "c1",
        "name": "create_account",
        "arguments": {"email": PLANTED[1], "password": PLANTED[5]},
    }
    (tenant / "chat.jsonl").write_text(
        _line(0, "user", f"My work email is {PLANTED[0]}, please use it from now on.")
        + _line(1, "user", f"My username is admin and my password is {PLANTED[4]}.")
        + _line(2, "assistant", "I will create the account.", tool_calls=[call])
        + _line(
            3,
            "tool",
            json.dumps(
                {
                    "status": "created",
                    "owner": PLANTED[2],
                    "note": f"api token: {PLANTED[6]}",
                }
            ),
            tool_call_id="c1",
            name="create_account",
        )
        + _line(4, "user", f"Also cc {PLANTED[3]}. My passcode is {PLANTED[7]}.")
        + _line(5, "user", "I prefer e-mail over phone calls.")
    )


def _forms(values):
    return sorted({f for v in values for f in (v, json.dumps(v)[1:-1])})


def test_private_domain_emails_and_prose_passwords_reach_no_file_or_log(
    tmp_path, caplog
):
    _landing(tmp_path / "landing")
    consent = tmp_path / "consent.jsonl"
    consent.write_text(
        json.dumps(
            {
                "event": "grant",
                "tenant_id": "acme",
                "subject_id": "u-7",
                "purpose": "support",
                "basis": "consent",
                "at": "2026-01-01T00:00:00Z",
            }
        )
        + "\n"
    )
    warehouse = tmp_path / "wh"
    with caplog.at_level(logging.DEBUG):
        result = run_nightly(tmp_path / "landing", warehouse, consent=consent)
    assert result.manifest is not None and result.manifest.status == "committed"
    with Warehouse.open(warehouse) as wh:
        counts = wh.row_counts()
        view = memories(wh, "acme", "u-7", "support")
    # the scan must have something to look at in every derived family
    assert counts["messages"] == 6 and counts["compression_ledger"] > 0
    assert counts["evidence_chunks"] > 0 and counts["memories"] > 0
    assert view.items, "the consented preference must be served"
    assert leaks(warehouse, ["prefer e-mail over phone"]), "the scan sees text"
    assert leaks(warehouse, _forms(PLANTED)) == []
    log = caplog.text
    assert [v for v in _forms(PLANTED) if v in log] == []
