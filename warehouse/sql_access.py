"""Lock an analyst's DuckDB connection down to reading the lake (``ctxledger sql``).

``ctxledger sql`` runs whatever SQL it is given. Opened like a job's connection it
could delete rows, forge a ``runs`` row the HTML report then shows, expire every
snapshot, ``COPY`` rows out to any file, ``read_text('/etc/passwd')``, ``ATTACH``
other databases, read the raw quarantined bytes next to the lake, or load an
unsigned extension. So by default (``--write`` turns all of this off) the console:

1. attaches the catalog ``READ_ONLY`` on a connection that refuses unsigned
   extensions (``Warehouse(read_only=True)``): no INSERT, UPDATE, DELETE, DDL or
   DuckLake maintenance call (they all fail with "attached in read-only mode").
   A local catalog is attached as a private copy (``console_lake``,
   ``warehouse.catalog_copy``) in a folder outside the allowed paths: a long
   query holds no lock that a nightly, backfill or forget would wait for;
2. loads what the evidence macros need and creates them (temp macros live in the
   connection's own ``temp`` catalog, which a read-only lake does not affect);
3. allows file access to exactly the lake's data and delete files, of every
   snapshot still in the catalog (``allowed_paths``), plus a private temporary
   folder for spilling, then sets ``enable_external_access = false`` (no other
   file, no network, no further ``LOAD``/``INSTALL``/``ATTACH``) and
   ``lock_configuration = true`` (no ``SET``/``RESET`` can undo any of it).

``enable_external_access = false`` alone would also stop DuckLake from reading its
own Parquet files; allowing the whole warehouse folder would expose
``quarantine/`` and let ``COPY ... TO`` write into ``lake/``. An allowed path is
writable too, though: ``COPY ... TO '<a data file>' (USE_TMP_FILE false)`` could
overwrite one. So, before running anything, ``refusal`` parses each statement and
refuses the kinds that write files or change the session (COPY, EXPORT, ATTACH,
LOAD, INSTALL, SET, PREPARE/EXECUTE, EXPLAIN ANALYZE of anything but a query).
"""

from __future__ import annotations

import re
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import duckdb

from ctxledger.warehouse.catalog import LAKE_ALIAS, Warehouse
from ctxledger.warehouse.catalog_copy import open_unlocked


@contextmanager
def console_lake(
    root: str | Path,
    catalog: str | None,
    data_path: str | None,
    snapshot: int | None,
    *,
    write: bool = False,
) -> Iterator[Warehouse]:
    """The console's warehouse: the lake itself with ``write`` (maintenance
    takes the writer's lock like any job), else the last committed snapshot
    through a private catalog copy that is deleted afterwards."""
    if write:
        with Warehouse.open(root, catalog=catalog, data_path=data_path) as wh:
            yield wh
        return
    with tempfile.TemporaryDirectory(prefix="ctxledger-sql-catalog-") as folder:
        wh = open_unlocked(
            root, folder, catalog=catalog, data_path=data_path, snapshot=snapshot
        )
        try:
            yield wh
        finally:
            wh.close()


def lake_files(
    con: duckdb.DuckDBPyConnection, data_path: str, alias: str = LAKE_ALIAS
) -> list[str]:
    """Full paths of every data and delete file the attached catalog knows, of
    all its snapshots (time travel reads old files too). ``data_path``: the one
    the lake was attached with (a relocated warehouse's, ``attach_lake``)."""
    meta = f"__ducklake_metadata_{alias}"
    base = data_path.rstrip("/") + "/"
    rows = con.execute(
        f"""
        WITH tp AS (
          SELECT t.table_id,
                 CASE WHEN t.path_is_relative
                      THEN (CASE WHEN s.path_is_relative THEN ? || s.path
                                 ELSE s.path END) || t.path
                      ELSE t.path END AS tpath
          FROM {meta}.ducklake_table t JOIN {meta}.ducklake_schema s USING (schema_id)
        )
        SELECT CASE WHEN f.path_is_relative THEN tp.tpath || f.path ELSE f.path END
        FROM {meta}.ducklake_data_file f JOIN tp USING (table_id)
        UNION
        SELECT CASE WHEN f.path_is_relative THEN tp.tpath || f.path ELSE f.path END
        FROM {meta}.ducklake_delete_file f JOIN tp USING (table_id)
        """,
        [base],
    ).fetchall()
    return sorted(r[0] for r in rows)


#: Statement kinds the read-only console runs. Writes to the lake (INSERT,
#: UPDATE, DELETE, CREATE, ALTER, DROP, maintenance CALLs) reach DuckDB and fail
#: there ("attached in read-only mode"); on temp objects they work.
ALLOWED = frozenset(
    {
        duckdb.StatementType.SELECT,
        duckdb.StatementType.EXPLAIN,
        duckdb.StatementType.CREATE,
        duckdb.StatementType.CREATE_FUNC,
        duckdb.StatementType.DROP,
        duckdb.StatementType.INSERT,
        duckdb.StatementType.UPDATE,
        duckdb.StatementType.DELETE,
        duckdb.StatementType.ALTER,
        duckdb.StatementType.MERGE_INTO,
        duckdb.StatementType.CALL,
        duckdb.StatementType.PRAGMA,
        duckdb.StatementType.TRANSACTION,
        duckdb.StatementType.VARIABLE_SET,
    }
)
_EXPLAIN = re.compile(
    r"^\s*EXPLAIN\s*(?:ANALY[SZ]E\b|\((?P<opts>[^()]*)\))?\s*", re.IGNORECASE
)


def refusal(con: duckdb.DuckDBPyConnection, sql: str) -> str | None:
    """Why ``sql`` may not run on the read-only console, or None."""
    try:
        statements = con.extract_statements(sql)
    except duckdb.Error:
        return None  # let DuckDB report the syntax error itself
    for statement in statements:
        kind = statement.type
        if kind not in ALLOWED:
            return f"{kind.name} statements are refused (read-only; see --write)"
        if kind == duckdb.StatementType.EXPLAIN:
            match = _EXPLAIN.match(_strip_comments(statement.query))
            inner = _strip_comments(statement.query)[match.end() :] if match else ""
            try:
                kinds = {s.type for s in con.extract_statements(inner)}
            except duckdb.Error:
                kinds = set()
            if not kinds or kinds - {duckdb.StatementType.SELECT}:
                return "EXPLAIN is allowed of queries only (read-only; see --write)"
    return None


def _strip_comments(sql: str) -> str:
    sql = re.sub(r"/\*.*?\*/", " ", sql, flags=re.DOTALL)
    return re.sub(r"--[^\n]*", " ", sql)


def lock_down(
    con: duckdb.DuckDBPyConnection, data_files: list[str], temp_directory: str
) -> None:
    """Allow reading ``data_files`` only; no other file, network, extension or
    setting change for the rest of the connection's life."""
    con.execute("SET temp_directory = ?", [temp_directory])
    con.execute("SET allowed_directories = ?", [[temp_directory.rstrip("/") + "/"]])
    con.execute("SET allowed_paths = ?", [data_files])
    con.execute("SET autoload_known_extensions = false")
    con.execute("SET enable_external_access = false")
    con.execute("SET lock_configuration = true")
