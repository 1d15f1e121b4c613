"""The backfill's commit step: replace a scope of history as one snapshot.

Like ``commit_run`` it checks the staged shards' conservation counts first. Then,
in one transaction, it replaces the in-scope rows of every ``REPLACED`` table
with the re-derived ones (``warehouse.replace``: only rows whose content differs
change), appends the run's bookkeeping rows (landing files read, dead letters),
re-runs the memory lifecycle (retention, consent, supersession) over the result,
and stores the diff in ``backfill_diffs`` beside the ``runs`` row. If nothing
differs it rolls back: an unchanged history gets no snapshot (unless
``record_unchanged``: ``backfill --stale`` records that its files were
re-derived under the current detector, or they would stay stale).

Memory vectors are not content (``warehouse.replace.NOT_CONTENT``): a memory
whose text and provenance are the same keeps its row, and its vector, even if
the re-derived vector differs in the last float bits or was not computed
(deferred embedding). Only when the re-derived row carries a vector of another
model than the stored one (the policy's ``evidence.embedding.model`` changed,
or the stored row has none) is the stored vector replaced in place
(``refresh_memory_vectors``, counted as ``memories / re_embedded``).
Re-admitted memories are embedded like the nightly's (``MemoryVectors``).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from ctxledger.pipelines.config import JobConfig
from ctxledger.pipelines.sink.commit import manifest_table, prepare_commit
from ctxledger.schemas import RunManifest
from ctxledger.schemas.arrow import arrow_schema, to_table
from ctxledger.schemas.backfill import BackfillChange
from ctxledger.warehouse.catalog import Warehouse, WarehouseError
from ctxledger.warehouse.replace import (
    REPLACED,
    RUN_RECORDS,
    SCOPE_SESSIONS,
    TableChange,
    drop_scope,
    register_scope,
    replace_scope,
)
from ctxledger.warehouse.tables import TABLES


class StaleBackfillError(WarehouseError):
    """The warehouse moved on after the backfill was planned."""


@dataclass(frozen=True)
class BackfillScope:
    """What a backfill replaces: the sessions of its landing files, planned
    against ``base_snapshot``; ``memory_settings`` is the new policy's."""

    sessions: tuple[str, ...]
    base_snapshot: int
    memory_settings: object
    now: datetime = field(default_factory=lambda: datetime.now(UTC))
    #: Embeds re-admitted memories (``MemoryVectors``); None: one for the
    #: run's policy (``JobConfig.policy_file``), loading the model only if used.
    memory_embed: object | None = None
    #: Commit the run and the landing files it read even when nothing differs
    #: (``backfill --stale``: the files now count as derived by this version).
    record_unchanged: bool = False


class _NothingChangedError(Exception):
    """Raised inside the transaction to roll it back: nothing differs."""


def _parquet(files: Iterable[str]) -> str:
    listing = ", ".join("'" + f.replace("'", "''") + "'" for f in files)
    return f"SELECT * FROM read_parquet([{listing}], union_by_name=true)"


def _source(con, staged: dict[str, list[str]], table: str) -> str:
    """SQL over the staged rows of ``table`` (an empty relation when none)."""
    files = [f for f in staged.get(table, []) if Path(f).exists()]
    if files:
        return _parquet(files)
    name = f"__empty_{table}"
    con.register(name, arrow_schema(TABLES[table]).empty_table())
    return f"SELECT * FROM {name}"


_REDACTIONS_SQL = """
WITH o AS (
  SELECT session_id, turn, f.entity_type AS et, count(*) AS n
  FROM (SELECT session_id, turn, unnest(pii) AS f FROM messages
        WHERE session_id IN (SELECT session_id FROM {scope}))
  GROUP BY ALL),
nw AS (
  SELECT session_id, turn, f.entity_type AS et, count(*) AS n
  FROM (SELECT session_id, turn, unnest(pii) AS f FROM (
          SELECT DISTINCT ON (message_id) * FROM ({new})))
  GROUP BY ALL)
SELECT coalesce(o.et, nw.et) AS et,
       sum(coalesce(o.n, 0)) AS before, sum(coalesce(nw.n, 0)) AS after,
       sum(greatest(coalesce(nw.n, 0) - coalesce(o.n, 0), 0)) AS added,
       sum(greatest(coalesce(o.n, 0) - coalesce(nw.n, 0), 0)) AS removed
FROM o FULL JOIN nw
  ON o.session_id = nw.session_id AND o.turn = nw.turn AND o.et = nw.et
GROUP BY 1 ORDER BY 1
"""


def redaction_changes(con, new_messages_sql: str) -> list[tuple]:
    """Per entity type: findings before/after in the scope, and how many were
    added or removed, matching messages by position (session, turn)."""
    rows = con.execute(
        _REDACTIONS_SQL.format(scope=SCOPE_SESSIONS, new=new_messages_sql)
    ).fetchall()
    return [(r[0], int(r[1]), int(r[2]), int(r[3]), int(r[4])) for r in rows]


def refresh_memory_vectors(con, staged_memories_sql: str) -> int:
    """Give in-scope stored memories the re-derived vector where it is of
    another model than theirs (or they have none); returns the rows updated.

    After ``replace_scope``, inside the transaction, with the scope tables
    registered. Rows whose model is unchanged keep their vector (re-derived
    floats may differ in the last bits: not a change); a re-derived row
    without a vector (deferred embedding, a failed batch) never clears one.
    """
    columns = {
        r[0]
        for r in con.execute(
            f"SELECT column_name FROM (DESCRIBE SELECT * FROM ({staged_memories_sql}))"
        ).fetchall()
    }
    if not {"embedding", "embed_model"} <= columns:
        return 0
    row = con.execute(
        "UPDATE memories SET embedding = v.embedding, embed_model = v.embed_model "
        "FROM (SELECT DISTINCT ON (memory_id) memory_id, embedding, embed_model "
        f"  FROM ({staged_memories_sql}) "
        "  WHERE embedding IS NOT NULL AND embed_model IS NOT NULL "
        "  ORDER BY memory_id) v "
        "WHERE memories.memory_id = v.memory_id "
        f"AND memories.{REPLACED['memories']} "
        "AND memories.embed_model IS DISTINCT FROM v.embed_model"
    ).fetchone()
    return int(row[0] or 0) if row else 0


def _diff_rows(
    run_id: str,
    base: int,
    tables: dict[str, TableChange],
    redactions: list[tuple[str, int, int, int, int]],
    lifecycle,
    gate_expired: int,
    reembedded: int,
    reused: int,
    memory_vectors: int = 0,
) -> list[BackfillChange]:
    def row(section, item, **figures):
        return BackfillChange(
            run_id=run_id, base_snapshot=base, section=section, item=item, **figures
        )

    out = [
        row(
            "tables",
            t.table,
            before=t.before,
            after=t.after,
            added=t.inserted,
            removed=t.deleted,
            unchanged=t.unchanged,
            updated=t.updated,
        )
        for t in tables.values()
    ]
    out += [
        row("redactions", et, before=b, after=a, added=ad, removed=rm)
        for et, b, a, ad, rm in redactions
        if ad or rm
    ]
    mem = tables["memories"]
    out += [
        row("memories", "added", added=mem.inserted - mem.updated),
        row("memories", "removed", removed=mem.deleted - mem.updated),
        row("memories", "updated", updated=mem.updated),
        row("memories", "expired", removed=lifecycle.expired + gate_expired),
        row("memories", "withdrawn", removed=lifecycle.withdrawn),
        row("memories", "superseded", updated=lifecycle.resolved),
        row("memories", "re_embedded", updated=memory_vectors),
    ]
    led = tables["compression_ledger"]
    out += [
        row(
            "ledger",
            "rebuilt",
            before=led.before,
            after=led.after,
            added=led.inserted,
            removed=led.deleted,
            unchanged=led.unchanged,
        )
    ]
    chunks = tables["evidence_chunks"]
    out += [
        row("chunks", "re_embedded", added=reembedded),
        row("chunks", "reused", added=reused),
        row("chunks", "removed", removed=chunks.deleted),
    ]
    return out


def _memory_vectors(config: JobConfig):
    """``MemoryVectors`` for the run's policy (the model loads only if used)."""
    from ctxledger.pipelines.memory.embed import MemoryVectors
    from ctxledger.schemas.policy import load_policy

    return MemoryVectors(load_policy(config.policy_file).evidence.embedding)


class ReplacingCommit:
    """``commit`` callable for ``build_batch_graph`` (see the module docstring)."""

    def __init__(self, scope: BackfillScope):
        self.scope = scope

    def __call__(
        self,
        config: JobConfig,
        staged_paths: Iterable[str],
        *,
        started_at: datetime,
        files_seen: int,
        files_skipped: int,
        runner: str,
    ) -> RunManifest:
        staged, manifest = prepare_commit(
            config,
            staged_paths,
            started_at=started_at,
            files_seen=files_seen,
            files_skipped=files_skipped,
            runner=runner,
        )
        with config.open_warehouse() as wh:
            try:
                manifest = self._commit(wh, config, staged, manifest)
            except _NothingChangedError:
                manifest = manifest.model_copy(update={"status": "empty"})
        shutil.rmtree(config.staging_dir, ignore_errors=True)
        return manifest

    def _commit(self, wh: Warehouse, config, staged, manifest):
        from ctxledger.warehouse.memory_api import MaintenanceResult, _lifecycle

        scope = self.scope
        con = wh.connection()
        current = wh.current_snapshot()
        if current != scope.base_snapshot:
            raise StaleBackfillError(
                f"the warehouse moved from snapshot {scope.base_snapshot} to "
                f"{current} while the backfill ran; run the backfill again"
            )
        new_messages = _source(con, staged, "messages")
        new_sessions = con.execute(
            f"SELECT DISTINCT session_id FROM ({new_messages}) UNION "
            f"SELECT session_id FROM ({_source(con, staged, 'sessions')})"
        ).fetchall()
        sessions = sorted(set(scope.sessions) | {r[0] for r in new_sessions})
        embed = scope.memory_embed or _memory_vectors(config)
        lifecycle = MaintenanceResult()
        with wh.transaction():
            wh.take_commit_lock()
            register_scope(
                con,
                sessions,
                "SELECT artifact_ref AS artifact_id FROM messages "
                f"WHERE session_id IN (SELECT session_id FROM {SCOPE_SESSIONS}) "
                f"UNION SELECT artifact_ref FROM ({new_messages})",
            )
            redactions = redaction_changes(con, new_messages)
            rejected = _source(con, staged, "memory_rejections")
            gate_expired = con.execute(
                f"SELECT count(*) FROM memories WHERE {REPLACED['memories']} "
                "AND memory_id IN (SELECT memory_id FROM "
                f"({rejected}) WHERE reason = 'expired')"
            ).fetchone()[0]
            changes: dict[str, TableChange] = {}
            for table in REPLACED:
                changes[table] = replace_scope(con, table, _source(con, staged, table))
            memory_vectors = refresh_memory_vectors(
                con, _source(con, staged, "memories")
            )
            reembedded, reused = con.execute(
                "SELECT count(*) FILTER (NOT embedding_reused), "
                "count(*) FILTER (embedding_reused) FROM evidence_chunks "
                "WHERE run_id = ?",
                [config.run_id],
            ).fetchone()
            appended = 0
            for table in staged:
                if table not in REPLACED and table not in RUN_RECORDS:
                    appended += wh.insert_new(table, _source(con, staged, table))
            drop_scope(con)
            _lifecycle(
                wh,
                scope.memory_settings,
                scope.now,
                config.run_id,
                config.code_version,
                lifecycle,
                own_transaction=False,
                embed=embed,
            )
            touched = sum(c.inserted + c.deleted for c in changes.values())
            touched += memory_vectors
            if (
                not touched
                and not appended
                and not lifecycle.changed
                and not scope.record_unchanged
            ):
                raise _NothingChangedError
            inserted = {t: c.inserted for t, c in changes.items()}
            for table in ("landing_files", "memory_extractions"):
                inserted[table] = wh.insert_new(table, _source(con, staged, table))
            diff = _diff_rows(
                config.run_id,
                scope.base_snapshot,
                changes,
                redactions,
                lifecycle,
                int(gate_expired),
                int(reembedded or 0),
                int(reused or 0),
                memory_vectors,
            )
            con.register("__diff", to_table(BackfillChange, [d.row() for d in diff]))
            try:
                inserted["backfill_diffs"] = wh.insert_new(
                    "backfill_diffs", "SELECT * FROM __diff"
                )
            finally:
                con.unregister("__diff")
            con.register("__manifest", manifest_table(manifest, inserted))
            try:
                wh.insert_new("runs", "SELECT * FROM __manifest")
            finally:
                con.unregister("__manifest")
            wh.set_commit_message(
                f"run {config.run_id}",
                {
                    "run_id": config.run_id,
                    "job": config.job,
                    "policy_version": config.policy_version,
                    "base_snapshot": scope.base_snapshot,
                },
            )
        manifest = manifest.model_copy(
            update={
                "snapshot_id": wh.snapshot_for_run(config.run_id),
                "table_rows": json.dumps(inserted, sort_keys=True),
            }
        )
        return manifest
