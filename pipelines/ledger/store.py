"""Read a session's records (and its ledger) back from the warehouse.

A session is found by its id (``ses_...``) or by the source's own id
(``external_id``); ``tenant`` narrows the search. When a turn has several message
rows (a source that changed and was ingested again), the row written by the most
recent run is the current one: that is what ledgers are verified against.
"""

from __future__ import annotations

from typing import Any

from ctxledger.pipelines.ledger.build import SessionSources
from ctxledger.schemas.ledger import ArtifactTrailEntry, LedgerEntry
from ctxledger.schemas.transcript import Message, Session, ToolObservation
from ctxledger.warehouse.catalog import Warehouse, WarehouseError


def _rows(wh: Warehouse, sql: str, params: list[Any]) -> list[dict[str, Any]]:
    table = wh.query(sql, params).arrow()
    if hasattr(table, "read_all"):
        table = table.read_all()
    return table.to_pylist()


def find_sessions(wh: Warehouse, ref: str, tenant: str | None = None) -> list[Session]:
    """Sessions whose id or external id is ``ref`` (optionally of one tenant)."""
    sql = (
        "SELECT * FROM sessions WHERE (session_id = ? OR external_id = ?)"
        + (" AND tenant_id = ?" if tenant else "")
        + " ORDER BY session_id"
    )
    params = [ref, ref] + ([tenant] if tenant else [])
    unique: dict[str, Session] = {}
    for row in _rows(wh, sql, params):
        unique.setdefault(row["session_id"], Session.model_validate(row))
    return list(unique.values())


def resolve_session(wh: Warehouse, ref: str, tenant: str | None = None) -> Session:
    """The one session ``ref`` names; a clear error when none or several match."""
    found = find_sessions(wh, ref, tenant)
    if not found:
        raise WarehouseError(f"no session {ref!r} in the warehouse")
    if len(found) > 1:
        ids = ", ".join(s.session_id for s in found[:5])
        raise WarehouseError(
            f"session {ref!r} is ambiguous ({ids}); pass the ses_... id or --tenant"
        )
    return found[0]


def load_sources(wh: Warehouse, session: Session) -> SessionSources:
    """The current messages, observations and tool outputs of ``session``."""
    messages = [
        Message.model_validate({k: v for k, v in row.items() if k != "__started"})
        for row in _rows(
            wh,
            "SELECT m.*, r.started_at AS __started FROM messages m "
            "LEFT JOIN runs r ON r.run_id = m.run_id "
            "WHERE m.session_id = ? "
            "QUALIFY row_number() OVER (PARTITION BY m.turn "
            "ORDER BY r.started_at DESC NULLS LAST, m.message_id) = 1 "
            "ORDER BY m.turn",
            [session.session_id],
        )
    ]
    ids = {m.message_id for m in messages}
    observations = [
        ToolObservation.model_validate(row)
        for row in _rows(
            wh,
            "SELECT * FROM tool_observations WHERE session_id = ? "
            "ORDER BY observation_id",
            [session.session_id],
        )
        if row["message_id"] in ids
    ]
    outputs = {
        row["artifact_id"]: row["content"]
        for row in _rows(
            wh,
            "SELECT DISTINCT a.artifact_id, a.content FROM artifacts a "
            "JOIN tool_observations o ON o.artifact_ref = a.artifact_id "
            "AND o.tenant_id = a.tenant_id WHERE o.session_id = ?",
            [session.session_id],
        )
    }
    return SessionSources(session, messages, observations, outputs)


def load_entries(
    wh: Warehouse, session_id: str | None = None, latest_only: bool = True
) -> list[LedgerEntry]:
    """Stored ledger entries (of one session, or all), newest run first per slot.

    ``latest_only`` keeps one entry per (session, scope, window): the one from the
    most recent run (earlier ones were superseded by a rebuild or a re-run).
    """
    where = "WHERE l.session_id = ?" if session_id else ""
    qualify = (
        "QUALIFY row_number() OVER (PARTITION BY l.session_id, l.scope, "
        "l.window_index ORDER BY l.created_at DESC, r.started_at DESC NULLS LAST, "
        "l.summary_id) = 1"
        if latest_only
        else ""
    )
    rows = _rows(
        wh,
        "SELECT l.* FROM compression_ledger l LEFT JOIN runs r ON r.run_id = l.run_id "
        f"{where} {qualify} ORDER BY l.session_id, l.scope DESC, l.window_index",
        [session_id] if session_id else [],
    )
    return [LedgerEntry.model_validate(row) for row in rows]


def load_trail(wh: Warehouse, session_id: str) -> list[ArtifactTrailEntry]:
    """The stored artifact trail of one session, in turn order."""
    return [
        ArtifactTrailEntry.model_validate(row)
        for row in _rows(
            wh,
            "SELECT * FROM artifact_trail WHERE session_id = ? ORDER BY turn, trail_id",
            [session_id],
        )
    ]
