"""The analysts' catalog views and comments (``warehouse/views.py``) on a small real
DuckLake warehouse: each view's answer, idempotent installation, comments from
the pydantic field descriptions, and the plain-DuckDB recipes of docs/analysts.md
(offline ATTACH under another alias, a moved folder)."""

from __future__ import annotations

import shutil
from datetime import UTC, datetime

import duckdb
import pytest

import ctxledger.warehouse.views as views
from ctxledger.warehouse import Warehouse
from ctxledger.warehouse.catalog import extension_directory
from ctxledger.warehouse.tables import TABLES

DAY1 = datetime(2026, 11, 2, 3, 0, tzinfo=UTC)
DAY2 = datetime(2026, 11, 3, 3, 0, tzinfo=UTC)

ROWS = [
    "INSERT INTO tool_observations (observation_id, message_id, session_id, "
    "tenant_id, tool_name, status, size_bytes, token_count, artifact_ref) VALUES "
    "('o1','m1','s1','t1','bash','ok',100,40,'a1'),"
    "('o2','m2','s1','t1','bash','error',50,10,'a2'),"
    "('o3','m3','s1','t1','read',  'ok',10,5,'a3'),"
    "('o4','m4','s2','t2','bash','ok',1,1,'a4')",
    "INSERT INTO messages (message_id, session_id, tenant_id, turn, role, "
    "content_hash, token_count, policy_version, source_ref, pii) VALUES "
    "('m1','s1','t1',0,'user','h',3,'p','x',[{'entity_type':'EMAIL_ADDRESS',"
    "'field':'content','start':0,'end':7,'score':1.0,'recognizer':'r'},"
    "{'entity_type':'PERSON','field':'content','start':9,'end':15,'score':0.9,"
    "'recognizer':'r'}]),"
    "('m2','s2','t1',1,'user','h',3,'p','x',[{'entity_type':'EMAIL_ADDRESS',"
    "'field':'content','start':0,'end':7,'score':1.0,'recognizer':'r'}]),"
    "('m3','s3','t2',0,'assistant','h',3,'p','x',[])",
    "INSERT INTO runs (run_id, job, status, started_at, finished_at, "
    "policy_version, code_version, runner) VALUES "
    f"('r1','nightly','committed','{DAY1.isoformat()}','{DAY1.isoformat()}',"
    "'p','c','DirectRunner'),"
    f"('r2','nightly','committed','{DAY2.isoformat()}','{DAY2.isoformat()}',"
    "'p','c','DirectRunner')",
    "INSERT INTO dead_letters (dead_letter_id, run_id, stage, tenant_id, "
    "source_file, source_offset, reason_code, message, job_version) VALUES "
    "('d1','r1','ingest','t1','f','1','invalid_json','m','v'),"
    "('d2','r1','ingest','t1','f','2','invalid_json','m','v'),"
    "('d3','r2','ingest','t1','f','3','invalid_json','m','v'),"
    "('d4','r2','redact','t1','f','4','too_large','m','v')",
    "INSERT INTO memories (memory_id, tenant_id, subject_id, purpose, kind, "
    "source, text, extractor, extractor_version, created_at, valid_from, "
    "recorded_at, expires_at, superseded_at, policy_version) VALUES "
    "('k1','t1','u1','support','fact','user_stated','x','e','1',"
    "'2026-01-01','2026-01-01','2026-01-01','2999-01-01',NULL,'p'),"
    "('k2','t1','u2','support','fact','user_stated','x','e','1',"
    "'2026-01-01','2026-01-01','2026-01-01','2999-01-01','2026-02-01','p'),"
    "('k3','t1','u1','support','fact','user_stated','x','e','1',"
    "'2026-01-01','2026-01-01','2026-01-01','2026-01-02',NULL,'p'),"
    "('k4','t1','u1','billing','fact','system_record','x','e','1',"
    "'2026-01-01','2026-01-01','2026-01-01','2999-01-01',NULL,'p')",
    "INSERT INTO compression_ledger (summary_id, tenant_id, session_id, scope, "
    "window_start_turn, window_end_turn, covered_from_turn, covered_to_turn, "
    "strategy, strategy_version, generator, generator_version, created_at, "
    "sources_digest, summary_text, protected_checksum, verified, missing_fields, "
    "altered_fields, rebuild_required, roll_depth) VALUES "
    "('l1','t1','s1','window',0,9,0,9,'s','1','g','1','2026-01-01','d','x','c',"
    "false,['path:/a','id:7'],['url:x'],true,2),"
    "('l2','t1','s1','window',10,19,0,19,'s','1','g','1','2026-01-01','d','x','c',"
    "true,[],[],false,3),"
    "('l3','t1','s2','session',0,5,0,5,'s','1','g','1','2026-01-01','d','x','c',"
    "true,[],[],false,0)",
]


@pytest.fixture(scope="module")
def lake(tmp_path_factory):
    root = tmp_path_factory.mktemp("views") / "wh"
    with Warehouse.open(root, create=True) as wh:
        with wh.transaction() as con:
            con.execute("USE lake")
            for statement in ROWS:
                con.execute(statement)
    return root


def _rows(root, sql):
    with Warehouse.open(root, read_only=True) as wh:
        return sorted(wh.query(sql).fetchall(), key=str)


EXPECTED = {
    "tokens_per_tool_per_session": (
        "SELECT tenant_id, session_id, tool_name, calls, tokens, bytes, errors",
        [("t1", "s1", "bash", 2, 50, 150, 1), ("t1", "s1", "read", 1, 5, 10, 0),
         ("t2", "s2", "bash", 1, 1, 1, 0)],
    ),
    "pii_per_tenant": (
        "SELECT tenant_id, entity_type, spans, messages, sessions",
        [("t1", "EMAIL_ADDRESS", 2, 2, 2), ("t1", "PERSON", 1, 1, 1)],
    ),
    "dead_letters_per_day": (
        "SELECT CAST(day AS VARCHAR), tenant_id, stage, reason_code, "
        "dead_letters, runs",
        [("2026-11-02", "t1", "ingest", "invalid_json", 2, 1),
         ("2026-11-03", "t1", "ingest", "invalid_json", 1, 1),
         ("2026-11-03", "t1", "redact", "too_large", 1, 1)],
    ),
    "memories_per_purpose": (
        "SELECT tenant_id, purpose, kind, source, memories, live, subjects",
        [("t1", "billing", "fact", "system_record", 1, 1, 1),
         ("t1", "support", "fact", "user_stated", 3, 1, 2)],
    ),
    "ledger_drift": (
        "SELECT tenant_id, session_id, summaries, unverified, missing_fields, "
        "altered_fields, rebuild_required, max_roll_depth",
        [("t1", "s1", 2, 1, 2, 1, 1, 3), ("t1", "s2", 1, 0, 0, 0, 0, 0)],
    ),
}  # fmt: skip


def test_every_view_has_an_expected_answer():
    assert {v.name for v in views.VIEWS} == set(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_view_answers_its_question(lake, name):
    select, expected = EXPECTED[name]
    assert _rows(lake, f"{select} FROM {name}") == sorted(expected, key=str)


def test_views_and_comments_install_once(lake):
    """Re-opening for writing adds no snapshot; a changed view or description
    is brought up to date in one."""
    with Warehouse.open(lake, create=True) as wh:
        before = wh.current_snapshot()
    with Warehouse.open(lake, create=True) as wh:
        assert wh.current_snapshot() == before
        assert views.install_catalog_extras(wh.connection(), "lake") == 0


def test_a_changed_view_is_replaced(tmp_path, monkeypatch):
    root = tmp_path / "wh"
    Warehouse.open(root, create=True).close()
    changed = views.View("ledger_drift", "changed", "SELECT 42 AS answer")
    monkeypatch.setattr(
        views,
        "VIEWS",
        tuple(
            changed if v.name == "ledger_drift" else v for v in views.VIEWS
        ),  # fmt: skip
    )
    with Warehouse.open(root, create=True) as wh:
        assert wh.query("SELECT * FROM ledger_drift").fetchall() == [(42,)]
        before = wh.current_snapshot()
    with Warehouse.open(root, create=True) as wh:
        assert wh.current_snapshot() == before


MAIN_TABLES = (
    "sessions", "messages", "tool_observations", "artifacts", "dead_letters",
    "runs", "memories", "compression_ledger",
)  # fmt: skip


@pytest.mark.parametrize("table", MAIN_TABLES)
def test_main_tables_describe_every_column(table):
    described = {c for (t, c) in views.column_comments() if t == table}
    assert set(TABLES[table].model_fields) == described


def test_every_column_of_every_table_carries_a_comment(lake):
    """Analysts read ``duckdb_columns()``: no column may be undocumented
    (issue 32: 183 of 342 were). A new field needs a ``Field`` description
    or an entry in ``warehouse.column_docs``."""
    rows = _rows(
        lake,
        "SELECT table_name, column_name FROM duckdb_columns() "
        "WHERE database_name = 'lake' AND schema_name = 'main' "
        "AND table_name IN (SELECT table_name FROM duckdb_tables() "
        "WHERE database_name = 'lake') "
        "AND (comment IS NULL OR trim(comment) = '') ORDER BY ALL",
    )
    assert rows == []
    assert all(views.column_comments().get((t, c)) for t in TABLES
               for c in TABLES[t].model_fields)  # fmt: skip


def test_comments_come_from_the_field_descriptions(lake):
    rows = dict(
        _rows(
            lake,
            "SELECT column_name, comment FROM duckdb_columns() "
            "WHERE database_name = 'lake' AND table_name = 'messages'",
        )
    )
    assert rows["content"] == TABLES["messages"].model_fields["content"].description
    assert "PII" in rows["content"]
    table = _rows(
        lake,
        "SELECT comment FROM duckdb_tables() "
        "WHERE database_name = 'lake' AND table_name = 'dead_letters'",
    )
    assert table[0][0].startswith("A record a stage could not process.")


def test_views_are_not_tables(lake):
    """Jobs that iterate the lake's tables (erasure) must not see the views."""
    with Warehouse.open(lake, read_only=True) as wh:
        assert wh.existing_tables() == set(TABLES)
        from ctxledger.warehouse.memory_api import _columns

        assert not set(_columns(wh)) & {v.name for v in views.VIEWS}


def test_plain_duckdb_recipe_of_a_moved_folder(lake, tmp_path):
    """docs/analysts.md: offline ATTACH under any alias; a moved folder needs
    DATA_PATH + OVERRIDE_DATA_PATH."""
    moved = tmp_path / "elsewhere" / "wh"
    shutil.copytree(lake, moved)
    shutil.move(lake, tmp_path / "gone")  # the original path no longer exists
    try:
        con = duckdb.connect(config={"extension_directory": extension_directory()})
        catalog = moved / "catalog.ducklake"
        con.execute(f"ATTACH 'ducklake:{catalog}' AS plain (READ_ONLY)")
        with pytest.raises(duckdb.IOException, match="lake"):
            con.execute("SELECT count(*) FROM plain.tool_observations").fetchall()
        con.execute("DETACH plain")
        con.execute(
            f"ATTACH 'ducklake:{catalog}' AS analyst (DATA_PATH '{moved}/lake/', "
            "OVERRIDE_DATA_PATH true, READ_ONLY)"
        )
        con.execute("USE analyst")
        assert con.execute(
            "SELECT sum(tokens) FROM tokens_per_tool_per_session"
        ).fetchone() == (56,)
        assert con.execute(
            "SELECT count(*) FROM duckdb_columns() WHERE database_name = 'analyst' "
            "AND table_name = 'memories' AND comment IS NOT NULL"
        ).fetchone()[0] == len(TABLES["memories"].model_fields)
        con.close()
    finally:
        shutil.move(tmp_path / "gone", lake)
