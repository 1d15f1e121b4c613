"""Replace a scope of history with re-derived rows, changing only what differs.

A backfill re-derives every row that came from a set of sessions (and the tool
artifacts only those sessions reference) under a new policy. Committing that by
delete-all-then-insert would rewrite every row, so time travel could no longer
tell what the policy change did. Instead each replaced table is compared row by
row on its key and its *content* columns: a row whose content is the same under
the new policy stays as it is (with the run and policy version that produced it);
only rows that differ are deleted or inserted. Bookkeeping columns (which run
wrote a row, when, under which policy version) and lifecycle columns that the
memory maintenance step owns are not content.

All of it runs inside the caller's transaction, so it lands as one snapshot.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import duckdb

from ctxledger.warehouse.tables import TABLES

#: Temporary scope tables the predicates below refer to.
SCOPE_SESSIONS = "__scope_sessions"
SCOPE_ARTIFACTS = "__scope_artifacts"

_SESSIONS = f"IN (SELECT session_id FROM {SCOPE_SESSIONS})"
_IN_SESSIONS = f"session_id {_SESSIONS}"
_IN_ARTIFACTS = f"IN (SELECT artifact_id FROM {SCOPE_ARTIFACTS})"

#: Tables a backfill replaces, with the predicate selecting their in-scope rows.
REPLACED: dict[str, str] = {
    "sessions": _IN_SESSIONS,
    "messages": _IN_SESSIONS,
    "tool_observations": _IN_SESSIONS,
    "artifacts": f"artifact_id {_IN_ARTIFACTS}",
    "compression_ledger": _IN_SESSIONS,
    "artifact_trail": _IN_SESSIONS,
    "memories": f"provenance.session_id {_SESSIONS}",
    "memory_rejections": f"provenance.session_id {_SESSIONS}",
    "documents": f"kind = 'tool_artifact' AND doc_id {_IN_ARTIFACTS}",
    "evidence_chunks": f"kind = 'tool_artifact' AND doc_id {_IN_ARTIFACTS}",
}

#: Tables that record what one run did: appended with the run, never compared.
RUN_RECORDS = frozenset(
    {"runs", "landing_files", "memory_extractions", "backfill_diffs"}
)

#: Columns that say who wrote a row and when, not what it holds.
BOOKKEEPING = frozenset({"run_id", "policy_version"})

#: Per table: further columns that are not content (processing times, flags
#: about how a value was obtained, lifecycle state the maintenance step owns).
NOT_CONTENT: dict[str, frozenset[str]] = {
    # a memory's vector is derived from its text, and re-derived floats may
    # differ in the last bits: ``pipelines.sink.replace.refresh_memory_vectors``
    # replaces it only when the model changed
    "memories": frozenset(
        {
            "recorded_at",
            "superseded_at",
            "superseded_by",
            "valid_to",
            "conflict_with",
            "embedding",
            "embed_model",
        }
    ),
    "memory_rejections": frozenset({"recorded_at"}),
    "compression_ledger": frozenset({"created_at"}),
    "evidence_chunks": frozenset({"embedding_reused"}),
}


def content_columns(table: str) -> list[str]:
    """The columns whose values a backfill compares for ``table``."""
    skip = BOOKKEEPING | NOT_CONTENT.get(table, frozenset())
    return [c for c in TABLES[table].model_fields if c not in skip]


@dataclass
class TableChange:
    """What replacing one table's scope did (row counts)."""

    table: str
    before: int = 0
    after: int = 0
    inserted: int = 0
    deleted: int = 0
    unchanged: int = 0
    #: Rows replaced in place: deleted and inserted again under the same key.
    updated: int = 0


def register_scope(
    con: duckdb.DuckDBPyConnection, sessions: Sequence[str], artifacts_sql: str
) -> None:
    """Create the temporary scope tables for ``REPLACED`` predicates.

    ``artifacts_sql`` selects candidate artifact ids (those the in-scope sessions
    reference, old or new); an artifact any out-of-scope message references is
    removed from the scope, so shared tool outputs are never deleted.
    """
    con.execute(f"CREATE OR REPLACE TEMP TABLE {SCOPE_SESSIONS} (session_id VARCHAR)")
    if sessions:
        con.executemany(
            f"INSERT INTO {SCOPE_SESSIONS} VALUES (?)", [[s] for s in sessions]
        )
    con.execute(
        f"CREATE OR REPLACE TEMP TABLE {SCOPE_ARTIFACTS} AS "
        f"SELECT DISTINCT artifact_id FROM ({artifacts_sql}) c "
        "WHERE artifact_id IS NOT NULL AND artifact_id NOT IN ("
        "  SELECT artifact_ref FROM messages "
        f"  WHERE artifact_ref IS NOT NULL AND NOT {_IN_SESSIONS})"
    )


def drop_scope(con: duckdb.DuckDBPyConnection) -> None:
    """Remove the temporary scope tables."""
    for name in (SCOPE_SESSIONS, SCOPE_ARTIFACTS):
        con.execute(f"DROP TABLE IF EXISTS {name}")


def _fingerprint(table: str, alias: str) -> str:
    columns = ", ".join(f"{alias}.{c}" for c in content_columns(table))
    return f"md5(CAST(row({columns}) AS VARCHAR))"


def replace_scope(
    con: duckdb.DuckDBPyConnection, table: str, new_source_sql: str
) -> TableChange:
    """Make ``table``'s in-scope rows equal ``new_source_sql``'s, touching only
    rows whose content differs. Rows of the new source whose key exists outside
    the scope are not inserted twice."""
    model = TABLES[table]
    if len(model.key) != 1:
        raise ValueError(f"{table}: replacement needs a single-column key")
    key = model.key[0]
    columns = ", ".join(model.model_fields)
    scope = REPLACED[table]
    change = TableChange(table)
    # the duplicate kept is the commit's (``Warehouse.insert_new``)
    order = ", ".join((key, *getattr(model, "dedupe_order", ())))
    con.execute(
        f"CREATE OR REPLACE TEMP TABLE __new AS SELECT * EXCLUDE (__rn) FROM ("
        f"  SELECT *, row_number() OVER (PARTITION BY {key} ORDER BY {order}) AS __rn"
        f"  FROM ({new_source_sql}) src) WHERE __rn = 1"
    )
    con.execute(
        "CREATE OR REPLACE TEMP TABLE __old AS "
        f"SELECT {key} AS k, {_fingerprint(table, 't')} AS fp FROM {table} t "
        f"WHERE {scope}"
    )
    con.execute(
        "CREATE OR REPLACE TEMP TABLE __same AS "
        f"SELECT o.k FROM __old o JOIN __new n ON o.k = n.{key} "
        f"WHERE o.fp = {_fingerprint(table, 'n')}"
    )
    change.before = con.execute("SELECT count(*) FROM __old").fetchone()[0]
    change.unchanged = con.execute("SELECT count(*) FROM __same").fetchone()[0]
    change.deleted = change.before - change.unchanged
    if change.deleted:
        con.execute(
            f"DELETE FROM {table} WHERE {key} IN ("
            "  SELECT k FROM __old ANTI JOIN __same USING (k))"
        )
    count_before = con.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
    con.execute(
        f"INSERT INTO {table} ({columns}) SELECT {columns} FROM __new n "
        f"WHERE n.{key} NOT IN (SELECT {key} FROM {table})"
    )
    change.inserted = (
        con.execute(f"SELECT count(*) FROM {table}").fetchone()[0] - count_before
    )
    change.after = change.unchanged + change.inserted
    change.updated = con.execute(
        "SELECT count(*) FROM (SELECT k FROM __old ANTI JOIN __same USING (k)) d "
        f"JOIN __new n ON d.k = n.{key}"
    ).fetchone()[0]
    for name in ("__new", "__old", "__same"):
        con.execute(f"DROP TABLE IF EXISTS {name}")
    return change
