"""Views and comments an analyst finds in the catalog with plain DuckDB.

``install_catalog_extras`` runs inside ``Warehouse.ensure_tables`` (a writable
open): it creates the views for the common questions and writes table and column
comments from the record models (docstrings and pydantic ``Field`` descriptions),
so ``duckdb_columns()`` / ``DESCRIBE`` explain the data without this repository.

Idempotent and cheap: a view carries the hash of its SQL in its comment and is
replaced only when that changes; a comment is written only when it differs. An
unchanged warehouse gets no DDL, so no new snapshot. View bodies name tables
unqualified: DuckDB binds them inside the view's own catalog, so the views work
under any ``ATTACH ... AS <alias>`` (docs/analysts.md).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import duckdb

from ctxledger.warehouse.tables import TABLES


@dataclass(frozen=True)
class View:
    """One catalog view: its name, what it answers, and its query."""

    name: str
    description: str
    sql: str

    @property
    def comment(self) -> str:
        """The description plus a hash of the SQL (how a change is detected)."""
        digest = hashlib.sha256(self.sql.encode()).hexdigest()[:12]
        return f"{self.description} [ctxledger view {digest}]"


VIEWS: tuple[View, ...] = (
    View(
        "tokens_per_tool_per_session",
        "Tool calls, output tokens and bytes per tool in each session "
        "(from tool_observations).",
        "SELECT tenant_id, session_id, coalesce(tool_name, '?') AS tool_name, "
        "count(*) AS calls, sum(token_count) AS tokens, sum(size_bytes) AS bytes, "
        "count(*) FILTER (WHERE status = 'error') AS errors "
        "FROM tool_observations GROUP BY ALL",
    ),
    View(
        "pii_per_tenant",
        "Redacted PII spans per entity type per tenant (types and counts only; "
        "values are never stored).",
        "SELECT m.tenant_id, f.p.entity_type AS entity_type, count(*) AS spans, "
        "count(DISTINCT m.message_id) AS messages, "
        "count(DISTINCT m.session_id) AS sessions "
        "FROM messages AS m, unnest(m.pii) AS f(p) GROUP BY ALL",
    ),
    View(
        "dead_letters_per_day",
        "Dead letters per stage and reason code per day (the day their run started).",
        "WITH started AS (SELECT run_id, min(started_at) AS started_at FROM runs "
        "GROUP BY run_id) "
        "SELECT CAST(s.started_at AS DATE) AS day, d.tenant_id, d.stage, "
        "d.reason_code, count(*) AS dead_letters, "
        "count(DISTINCT d.run_id) AS runs "
        "FROM dead_letters AS d LEFT JOIN started AS s USING (run_id) "
        "GROUP BY ALL",
    ),
    View(
        "memories_per_purpose",
        "Stored memories per tenant, purpose, kind and source; live = not "
        "superseded, not expired, still valid now.",
        "SELECT tenant_id, purpose, kind, source, count(*) AS memories, "
        "count(*) FILTER (WHERE superseded_at IS NULL "
        "AND (valid_to IS NULL OR valid_to > now()) "
        "AND (expires_at IS NULL OR expires_at > now())) AS live, "
        "count(DISTINCT subject_id) AS subjects "
        "FROM memories GROUP BY ALL",
    ),
    View(
        "ledger_drift",
        "Per session: compression summaries that lost or altered protected "
        "fields, or need a rebuild from the raw messages.",
        "SELECT tenant_id, session_id, count(*) AS summaries, "
        "count(*) FILTER (WHERE NOT verified) AS unverified, "
        "sum(len(missing_fields)) AS missing_fields, "
        "sum(len(altered_fields)) AS altered_fields, "
        "count(*) FILTER (WHERE rebuild_required) AS rebuild_required, "
        "max(roll_depth) AS max_roll_depth "
        "FROM compression_ledger GROUP BY ALL",
    ),
)


def _sql_string(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _first_paragraph(doc: str | None) -> str | None:
    if not doc:
        return None
    paragraph = doc.strip().split("\n\n", 1)[0]
    return " ".join(paragraph.split()) or None


def table_comments() -> dict[str, str]:
    """Table -> the first paragraph of its record model's docstring."""
    found = {}
    for name, model in TABLES.items():
        text = _first_paragraph(model.__doc__)
        if text:
            found[name] = text
    return found


def column_comments() -> dict[tuple[str, str], str]:
    """``(table, column)`` -> the pydantic ``Field`` description of the column,
    else its comment in ``warehouse.column_docs``."""
    from ctxledger.warehouse.column_docs import BY_TABLE, column_doc

    found = {}
    for name, model in TABLES.items():
        for column, field in model.model_fields.items():
            text = field.description or column_doc(name, column)
            if text:
                found[(name, column)] = " ".join(text.split())
    for key, text in BY_TABLE.items():  # internal tables no model describes
        found.setdefault(key, " ".join(text.split()))
    return found


def _pending(con: duckdb.DuckDBPyConnection, alias: str) -> list[str]:
    """The DDL that brings views and comments in ``alias`` up to date."""
    statements = []
    tables = {
        name: comment
        for name, comment in con.execute(
            "SELECT table_name, comment FROM duckdb_tables() "
            "WHERE database_name = ? AND schema_name = 'main'",
            [alias],
        ).fetchall()
    }
    columns = {
        (table, column): comment
        for table, column, comment in con.execute(
            "SELECT table_name, column_name, comment FROM duckdb_columns() "
            "WHERE database_name = ? AND schema_name = 'main'",
            [alias],
        ).fetchall()
    }
    views = {
        name: comment
        for name, comment in con.execute(
            "SELECT view_name, comment FROM duckdb_views() "
            "WHERE database_name = ? AND schema_name = 'main' AND NOT internal",
            [alias],
        ).fetchall()
    }
    for table, text in table_comments().items():
        if table in tables and tables[table] != text:
            statements.append(
                f"COMMENT ON TABLE {alias}.{table} IS {_sql_string(text)}"
            )
    for (table, column), text in column_comments().items():
        if table in tables and (table, column) in columns:
            if columns[(table, column)] != text:
                statements.append(
                    f"COMMENT ON COLUMN {alias}.{table}.{column} IS "
                    + _sql_string(text)
                )
    for view in VIEWS:
        if views.get(view.name) != view.comment:
            statements.append(
                f"CREATE OR REPLACE VIEW {alias}.{view.name} AS {view.sql}"
            )
            statements.append(
                f"COMMENT ON VIEW {alias}.{view.name} IS {_sql_string(view.comment)}"
            )
    return statements


def install_catalog_extras(con: duckdb.DuckDBPyConnection, alias: str) -> int:
    """Create or update views and comments in the attached lake ``alias``, in
    the caller's transaction; the number of DDL statements run (0: up to date)."""
    statements = _pending(con, alias)
    for statement in statements:
        con.execute(statement)
    return len(statements)
