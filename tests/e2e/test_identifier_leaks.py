"""Issue 29's end-to-end bypasses: JSON-escaped values, secret-bearing keys,
passports, national ids and birth dates in messages, tool calls and tool
results. One nightly with a consent grant (memories, ledgers, evidence all
written); then every file under the warehouse (raw bytes and Parquet strings),
every string in every table of the DuckLake catalog (its inlined rows) and
every memory must hold none of the planted values, in any of their spellings.

The values are invented for this test (no corpus, no real person); the ids
pass their checksums.
"""

from __future__ import annotations

import json

import duckdb
import pytest
from test_memory_api import leaks

from ctxledger.jobs.nightly import run_nightly
from ctxledger.warehouse import Warehouse

pytestmark = pytest.mark.slow

NAME = "Magdalena Szymańska"
PLANTED = [
    NAME,
    "Szymańska",
    "482913",  # "pin" in a tool result
    "zq93kdLm2x",  # "apiKey" in tool arguments
    "551234",  # "otp" as a JSON number
    "K4821937",  # passport, told in prose
    "C01X00T47",  # passport, under a JSON key
    "44051401359",  # PESEL
    "870117300452",  # Kazakh IIN
    "2341 2341 2346",  # Aadhaar
    "14 March 1987",  # birth date in prose
    "1987-03-14",  # birth date under "dob"
    "734291",  # "always use my account pin ..."
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
        "name": "update_profile",
        # a string of JSON, as json.dumps writes it: "Szyma\u0144ska"
        "arguments": json.dumps(
            {"full_name": NAME, "apiKey": PLANTED[3], "passport_number": PLANTED[6]}
        ),
    }
    result = json.dumps(
        {
            "status": "ok",
            "user_id": "u-7",
            "profile": {"name": NAME, "dob": PLANTED[11], "pin": PLANTED[2]},
            "otp": int(PLANTED[4]),
            "note": f"Verified {NAME} with Aadhaar {PLANTED[9]}",
        }
    )
    (tenant / "chat.jsonl").write_text(
        _line(0, "user", f"My passport number is {PLANTED[5]}.")
        + _line(1, "user", f"From now on, always use my account pin {PLANTED[12]}.")
        + _line(2, "user", f"My PESEL is {PLANTED[7]} and my IIN is {PLANTED[8]}.")
        + _line(3, "user", f"I was born on {PLANTED[10]}, please note it.")
        + _line(4, "assistant", "I will update the profile.", tool_calls=[call])
        + _line(5, "tool", result, tool_call_id="c1", name="update_profile")
        + _line(6, "user", "I prefer e-mail over phone calls.")
    )


def _forms(values):
    out = set()
    for v in values:
        out |= {v, json.dumps(v)[1:-1], json.dumps(v, ensure_ascii=False)[1:-1]}
        out.add(v.replace(" ", ""))
    return sorted(out)


def _catalog_strings(root):
    """Every string value of every table in each DuckDB file under root."""
    values = []
    for path in sorted(root.rglob("*")):
        if not path.is_file() or path.suffix in (".parquet", ".wal"):
            continue
        if not path.read_bytes()[8:12] == b"DUCK":
            continue
        con = duckdb.connect(str(path), read_only=True)
        try:
            tables = con.execute(
                "SELECT table_schema, table_name FROM information_schema.tables"
            ).fetchall()
            for schema, table in tables:
                for row in con.execute(
                    f'SELECT * FROM "{schema}"."{table}"'
                ).fetchall():
                    values.extend(str(v) for v in row if v is not None)
        finally:
            con.close()
    return values


def test_escaped_json_secret_keys_and_identifiers_reach_no_file(tmp_path):
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
    result = run_nightly(
        tmp_path / "landing", warehouse, consent=consent, source_format="canonical"
    )
    assert result.manifest is not None and result.manifest.status == "committed"
    with Warehouse.open(warehouse) as wh:
        counts = wh.row_counts()
        texts = [r[0] for r in wh.query("SELECT text FROM memories").fetchall()]
        stored = wh.query("SELECT content FROM artifacts").fetchall()
    assert counts["messages"] == 7 and counts["evidence_chunks"] > 0
    assert texts, "the consented preference must be stored"
    assert leaks(warehouse, ["prefer e-mail over phone"]), "the scan sees text"
    assert leaks(warehouse, _forms(PLANTED)) == []
    catalog = _catalog_strings(warehouse)
    assert catalog, "the catalog scan sees rows"
    assert [v for v in _forms(PLANTED) if any(v in s for s in catalog)] == []
    assert [t for t in texts for v in _forms(PLANTED) if v in t] == []
    # the tool output is still the same JSON document, values replaced
    doc = json.loads(stored[0][0])
    assert doc["status"] == "ok" and doc["profile"]["pin"].startswith("<")
    # no memory keeps a secret, even redacted ("always use my account pin ...")
    assert [t for t in texts if "<SECRET" in t or "<PASSWORD" in t] == []
