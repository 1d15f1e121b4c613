"""The ``sources`` table: store a registry version, read the active one, and
list what fell through to the default source.

Rows are stamped with ``source_id`` when written (``policy.sources``), but the
registry that *values* them is read at query time: the newest registry version
in ``sources`` (else the policy's own). A row's source is its stored id when the
active registry knows it, else the id the active registry's patterns give it
(rows written before the registry, or under other rules), so no evidence,
artifact or memory row is ever rewritten when the registry changes.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from ctxledger.schemas.sources import SourceRegistry, registry_from_rows, registry_rows

if TYPE_CHECKING:
    from ctxledger.schemas.policy import Policy
    from ctxledger.warehouse.catalog import Warehouse


def _registry_table(registry: SourceRegistry, now: datetime):
    import pyarrow as pa  # noqa: PLC0415

    from ctxledger.schemas.arrow import arrow_schema  # noqa: PLC0415
    from ctxledger.schemas.sources import SourceRow  # noqa: PLC0415

    rows = registry_rows(registry, now)
    return pa.Table.from_pylist([r.row() for r in rows], schema=arrow_schema(SourceRow))


def insert_registry(wh: Warehouse, registry: SourceRegistry, now: datetime) -> int:
    """Insert ``registry``'s rows inside the caller's transaction; the rows
    added (0 when that version is already stored)."""
    con = wh.connection()
    con.register("__sources", _registry_table(registry, now))
    try:
        return wh.insert_new("sources", "SELECT * FROM __sources")
    finally:
        con.unregister("__sources")


def sync_registry(
    wh: Warehouse, registry: SourceRegistry, now: datetime | None = None
) -> int:
    """Store ``registry`` in ``sources`` (one snapshot); 0 when that version is
    already stored. Returns the rows added."""
    from ctxledger.warehouse.concurrency import retry_on_conflict  # noqa: PLC0415

    wh.ensure_tables()
    when = now or datetime.now(UTC)

    def commit() -> int:
        with wh.transaction():
            wh.take_commit_lock()
            added = insert_registry(wh, registry, when)
            if added:
                wh.set_commit_message(
                    f"sources {registry.registry_version}",
                    {"registry_version": registry.registry_version},
                )
        return added

    return retry_on_conflict(commit)


def registry_is_empty(wh: Warehouse) -> bool:
    """Whether no registry is stored yet (a warehouse's first runs)."""
    if "sources" not in wh.existing_tables():
        return True
    row = wh.connection().execute("SELECT count(*) FROM sources").fetchone()
    return not (row and row[0])


def ensure_registry(wh: Warehouse, policy: Policy) -> int:
    """Store the policy's registry when ``sources`` holds none yet, so every
    stamped row resolves in the table; 0 otherwise. The nightly does the same
    inside its own commit (``store_first_registry``), in the run's snapshot."""
    if not registry_is_empty(wh):
        return 0
    return sync_registry(wh, policy.sources)


def store_first_registry(wh: Warehouse, policy: Policy, now: datetime) -> int:
    """Inside a run's transaction: the policy's registry when none is stored."""
    if not registry_is_empty(wh):
        return 0
    return insert_registry(wh, policy.sources, now)


def active_registry(wh: Warehouse, policy: Policy | None = None) -> SourceRegistry:
    """The newest registry stored in ``sources``; else the policy's registry."""
    fallback = policy.sources if policy is not None else SourceRegistry()
    if "sources" not in wh.existing_tables():
        return fallback
    row = (
        wh.connection()
        .execute(
            "SELECT registry_json FROM sources ORDER BY loaded_at DESC, "
            "registry_version DESC LIMIT 1"
        )
        .fetchone()
    )
    if row is None:
        return fallback
    return registry_from_rows([{"registry_json": row[0]}])


def source_of(
    registry: SourceRegistry, stored: str | None, kind: str, *keys: str | None
) -> str:
    """The source a row belongs to under ``registry`` (module docstring)."""
    if stored and stored in registry.by_id and stored != registry.default_source:
        return stored
    return registry.resolve(kind, *keys)


def row_sources(wh: Warehouse, registry: SourceRegistry) -> list[dict[str, Any]]:
    """Every distinct (table, kind, key) of ``documents``, ``evidence_chunks``,
    ``artifacts`` and ``memories`` with its resolved ``source_id`` and row count.

    Artifacts carry their stamped ``source_id`` but no tool name: their key is
    the tool that produced them (``tool_observations``), as for their evidence.
    """
    tables = wh.existing_tables()
    con = wh.connection()
    out: list[dict[str, Any]] = []

    def cols(table: str) -> set[str]:
        return {
            r[0]
            for r in con.execute(
                "SELECT column_name FROM information_schema.columns "
                "WHERE table_catalog = current_database() AND table_name = ?",
                [table],
            ).fetchall()
        }

    for table in ("documents", "evidence_chunks"):
        if table not in tables:
            continue
        sid = "source_id" if "source_id" in cols(table) else "NULL::VARCHAR"
        path = "source_path" if table == "documents" else "NULL::VARCHAR"
        # a tool artifact's key is its tool (the title / first section)
        tool = "title" if table == "documents" else "section_path[1]"
        for kind, doc_id, spath, tool_name, stored, n in con.execute(
            f"SELECT kind, doc_id, {path}, {tool}, {sid}, count(*) FROM {table} "
            "GROUP BY ALL ORDER BY ALL"
        ).fetchall():
            if kind == "tool_artifact":
                key, resolved = (
                    tool_name,
                    source_of(registry, stored, "tool_artifact", tool_name),
                )
            else:
                key, resolved = (
                    doc_id,
                    source_of(registry, stored, "document", doc_id, spath),
                )
            out.append(
                {
                    "table": table,
                    "kind": kind,
                    "key": key,
                    "source_id": resolved,
                    "stored_source_id": stored,
                    "rows": n,
                }
            )
    if "artifacts" in tables:
        # an artifact's key is the tool that produced it (``tool_observations``,
        # the smallest name when several did), the key its evidence uses too
        sid = "a.source_id" if "source_id" in cols("artifacts") else "NULL::VARCHAR"
        tool = (
            "(SELECT min(o.tool_name) FROM tool_observations o "
            "WHERE o.artifact_ref = a.artifact_id)"
            if "tool_observations" in tables
            else "NULL::VARCHAR"
        )
        for tool_name, stored, n in con.execute(
            f"SELECT {tool} AS tool, {sid} AS stored, count(*) FROM artifacts a "
            "GROUP BY ALL ORDER BY ALL"
        ).fetchall():
            out.append(
                {
                    "table": "artifacts",
                    "kind": "tool_artifact",
                    "key": tool_name,
                    "source_id": source_of(
                        registry, stored, "tool_artifact", tool_name
                    ),
                    "stored_source_id": stored,
                    "rows": n,
                }
            )
    if "memories" in tables:
        sid = "source_id" if "source_id" in cols("memories") else "NULL::VARCHAR"
        for source, kind, stored, n in con.execute(
            f"SELECT source, kind, {sid}, count(*) FROM memories "
            "GROUP BY ALL ORDER BY ALL"
        ).fetchall():
            out.append(
                {
                    "table": "memories",
                    "kind": "memory",
                    "key": f"{source}:{kind}",
                    "source_id": source_of(
                        registry, stored, "memory", source, f"{source}:{kind}"
                    ),
                    "stored_source_id": stored,
                    "rows": n,
                }
            )
    return out


def unregistered(wh: Warehouse, registry: SourceRegistry) -> list[dict[str, Any]]:
    """The rows of ``row_sources`` that fell through to the default source."""
    return [
        r
        for r in row_sources(wh, registry)
        if r["source_id"] == registry.default_source
    ]


__all__ = [
    "active_registry",
    "ensure_registry",
    "row_sources",
    "source_of",
    "sync_registry",
    "unregistered",
]
