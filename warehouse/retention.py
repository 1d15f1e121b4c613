"""The retention purge every nightly run does, and its counts in the run record.

What is purged, and where it happens:

1. **History** (``expire_history``), before the run's commit: DuckLake snapshots
   older than ``policy.history.keep_snapshots_days`` are expired (the current
   one never is) and the files only they used are deleted, so rows a purge or
   erasure removed do not live on in time travel past that window; data files
   the catalog does not know (an interrupted commit's) are deleted at once on a
   local catalog (no other writer can be mid-commit while this one holds it)
   and once older than ``orphan_grace_hours`` on a shared one; the ``staging/``
   folders of dead attempts (their lock is free) at once, and ``quarantine/``
   folders of runs that never committed once older than the grace period.
   None of this changes what the current snapshot shows, so an interrupted
   expiry leaves the warehouse as it was.
2. **Rows** (``purge_in_transaction``), inside the run's own commit transaction:
   the memory lifecycle (``warehouse.memory_api``: consent re-admission of
   pending ``no_basis`` pointers a grant now covers, the memories it admits
   embedded with the policy's model as the nightly's are, memories past retention or
   without a live basis are deleted with receipts, supersession re-resolved for
   the subjects the run touched) and artifacts past
   ``policy.retention.artifacts_days`` with the evidence built from them. Being
   in the run's transaction, the run's rows and the purge become visible
   together or not at all: a run killed at any point leaves the previous
   snapshot or the complete new one, and its rerun (same run id) does exactly
   what the uninterrupted run would have.
3. **After the commit** (``after_commit``): a full ``purge_history`` when
   memories were purged and ``memory.purge_history`` is on (a withdrawal or
   retention purge must not stay readable in history for the whole window),
   and sorted compaction of the memory serving tables. Both leave the current
   rows unchanged.

The counts (``RetentionCounts``) go into the run's ``runs.retention`` column. A
nightly with nothing new still runs 1 and 2 (``run_retention``); it records a
``retention`` job row, in its own snapshot, only when something was removed.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import time
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa

from ctxledger.schemas import RunManifest, content_hash
from ctxledger.schemas.arrow import to_table
from ctxledger.schemas.policy import HistorySettings, Policy
from ctxledger.warehouse.catalog import LAKE_ALIAS, Warehouse
from ctxledger.warehouse.concurrency import attempt_alive, retry_on_conflict


@dataclass
class RetentionCounts:
    """What one retention step removed (stored as JSON in ``runs.retention``)."""

    memories_expired: int = 0
    memories_withdrawn: int = 0
    memories_resolved: int = 0
    #: Consent re-admission: pending ``no_basis`` pointers a later grant turned
    #: into memories, and pointers closed (span gone or changed, expired...).
    memories_readmitted: int = 0
    readmissions_closed: int = 0
    artifacts_expired: int = 0
    evidence_rows_removed: int = 0
    snapshots_expired: int = 0
    files_deleted: int = 0
    orphan_files_deleted: int = 0
    stale_run_dirs_removed: int = 0

    @property
    def rows_removed(self) -> bool:
        """Whether table rows were deleted or changed (not only history)."""
        return bool(
            self.memories_expired
            or self.memories_withdrawn
            or self.memories_resolved
            or self.memories_readmitted
            or self.readmissions_closed
            or self.artifacts_expired
            or self.evidence_rows_removed
        )

    @property
    def changed(self) -> bool:
        return any(asdict(self).values())

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str | None) -> RetentionCounts:
        data = json.loads(text or "{}")
        return cls(**{k: int(v) for k, v in data.items() if k in cls.__annotations__})


@dataclass
class HistoryExpiry:
    """What ``expire_history`` removed."""

    snapshots_expired: list[int] = field(default_factory=list)
    files_deleted: int = 0
    orphan_files_deleted: int = 0
    stale_run_dirs_removed: int = 0

    def add_to(self, counts: RetentionCounts) -> None:
        counts.snapshots_expired += len(self.snapshots_expired)
        counts.files_deleted += self.files_deleted
        counts.orphan_files_deleted += self.orphan_files_deleted
        counts.stale_run_dirs_removed += self.stale_run_dirs_removed


@dataclass
class RetentionResult:
    """What ``run_retention`` (a nightly with nothing new) did."""

    counts: RetentionCounts
    run_id: str | None = None
    snapshot_id: int | None = None
    #: The memory lifecycle's own result (``MaintenanceResult``), for callers
    #: that report receipts and the history purge.
    memory: object | None = None


# -- 1. history --------------------------------------------------------------------


def _ts(value: datetime) -> str:
    return f"TIMESTAMPTZ '{value.astimezone(UTC).isoformat()}'"


def expire_history(
    wh: Warehouse,
    settings: HistorySettings,
    now: datetime,
    *,
    current_run: str | None = None,
) -> HistoryExpiry:
    """Expire old snapshots, delete their files and debris of crashed runs.

    Runs outside any transaction (DuckLake's maintenance calls commit on their
    own). ``current_run``: the name of the staging folder that must be kept
    (``staging/<run_id>-<attempt>`` of the run about to commit).
    """
    out = HistoryExpiry()
    con = wh.connection()
    if settings.keep_snapshots_days is not None:
        cutoff = now - timedelta(days=settings.keep_snapshots_days)
        current = wh.current_snapshot()
        expired = con.execute(
            f"CALL ducklake_expire_snapshots('{LAKE_ALIAS}', "
            f"older_than => {_ts(cutoff)})"
        ).fetchall()
        out.snapshots_expired = sorted(int(r[0]) for r in expired)
        if current in out.snapshots_expired:  # never happens; DuckLake keeps it
            raise RuntimeError("the current snapshot was expired")
        out.files_deleted = len(
            con.execute(
                f"CALL ducklake_cleanup_old_files('{LAKE_ALIAS}', cleanup_all => true)"
            ).fetchall()
        )
    grace = now - timedelta(hours=settings.orphan_grace_hours)
    # A local DuckDB catalog file is open in one process at a time (DuckDB's
    # file lock), and DuckLake writes data files only inside a transaction of
    # an attached catalog: while this connection holds the catalog, no other
    # process can be half-way through a commit (and a job commits from one
    # thread, after this cleanup), so every unknown file is a killed commit's
    # and goes now. A shared (Postgres) catalog may have a
    # writer on another machine mid-commit: there the grace period stands.
    if wh.catalog.startswith(("postgres:", "postgresql:")):
        scope = f"older_than => {_ts(grace)}"
    else:
        scope = "cleanup_all => true"
    out.orphan_files_deleted = len(
        con.execute(
            f"CALL ducklake_delete_orphaned_files('{LAKE_ALIAS}', {scope})"
        ).fetchall()
    )
    out.stale_run_dirs_removed = _remove_stale_run_dirs(wh, grace, current_run)
    return out


def _remove_stale_run_dirs(
    wh: Warehouse, older_than: datetime, current_run: str | None
) -> int:
    """Delete ``staging/<run>-<attempt>`` and ``quarantine/<run>`` folders of
    runs that never committed (a killed run's shards, a crashed run's
    quarantined raw bytes), once untouched since ``older_than``.

    A staging folder whose attempt lock (``warehouse.concurrency.attempt_lock``)
    no process holds is a dead attempt's and goes at once; one whose lock is
    held belongs to a running job and stays, however old. Only folders without
    a lock file (older versions) wait for the grace period."""
    committed = {r[0] for r in wh.query("SELECT run_id FROM runs").fetchall()}
    referenced = {
        r[0].split("/")[1]
        for r in wh.query(
            "SELECT DISTINCT quarantine_ref FROM dead_letters "
            "WHERE quarantine_ref LIKE 'quarantine/%/%'"
        ).fetchall()
    }
    limit = older_than.timestamp()
    removed = 0
    for folder, keep in (("staging", set()), ("quarantine", committed | referenced)):
        base = wh.root / folder
        if not base.is_dir():
            continue
        for entry in base.iterdir():
            if not entry.is_dir() or entry.name == current_run:
                continue
            if entry.name in keep:
                _remove_stale_partials(entry, limit)
                continue
            alive = attempt_alive(entry) if folder == "staging" else None
            if alive:
                continue
            if alive is None and _newest_mtime(entry) >= limit:
                continue
            shutil.rmtree(entry, ignore_errors=True)
            removed += 1
    return removed


def _remove_stale_partials(folder: Path, limit: float) -> None:
    """Temporary files of writes a kill cut short (``pipelines.atomic``: a
    quarantine copy's ``.<sha256>.bin.<nonce>.partial``) in a kept folder:
    partial raw bytes, removed once untouched since ``limit``."""
    for partial in folder.glob(".*.partial"):
        with contextlib.suppress(FileNotFoundError):
            if partial.stat().st_mtime < limit:
                partial.unlink()


def _newest_mtime(folder: Path) -> float:
    newest = folder.stat().st_mtime
    for dirpath, _, files in os.walk(folder):
        for name in files:
            try:
                newest = max(newest, os.stat(os.path.join(dirpath, name)).st_mtime)
            except FileNotFoundError:
                continue
    return newest


# -- 2. rows, inside a commit transaction ------------------------------------------


def prepare(wh: Warehouse) -> None:
    """What ``purge_in_transaction`` needs set up outside the transaction."""
    from ctxledger.warehouse.memory_api import install_macros

    install_macros(wh)


def purge_artifacts(wh: Warehouse, days: int | None, now: datetime) -> tuple[int, int]:
    """Delete artifacts past retention and the evidence rows built from them.

    Inside the caller's transaction. An artifact expires when every message
    that references it is older than ``days`` (the message's ``created_at``,
    else the start of the run that committed it; a message of the run being
    committed without a timestamp counts as new), or when no message references
    it. Returns (artifacts removed, evidence rows removed).
    """
    if days is None:
        return 0, 0
    tables = wh.existing_tables()
    if not {"artifacts", "messages", "runs"} <= tables:
        return 0, 0
    cutoff = now - timedelta(days=days)
    con = wh.connection()
    doomed = con.execute(
        "SELECT a.tenant_id, a.artifact_id FROM artifacts a LEFT JOIN ("
        "  SELECT m.tenant_id, m.artifact_ref AS artifact_id, "
        "    max(coalesce(m.created_at, r.started_at, ?)) AS last_used "
        "  FROM messages m LEFT JOIN runs r ON r.run_id = m.run_id "
        "  WHERE m.artifact_ref IS NOT NULL GROUP BY ALL"
        ") u USING (tenant_id, artifact_id) "
        "WHERE u.last_used IS NULL OR u.last_used < ? "
        "ORDER BY a.tenant_id, a.artifact_id",
        [now, cutoff],
    ).fetchall()
    if not doomed:
        return 0, 0
    con.register(
        "__expired_artifacts",
        pa.table(
            {
                "tenant_id": pa.array([t for t, _ in doomed], pa.string()),
                "artifact_id": pa.array([a for _, a in doomed], pa.string()),
            }
        ),
    )
    try:
        artifacts = _delete_matching(con, "artifacts", "artifact_id")
        evidence = 0
        for table in ("evidence_chunks", "documents"):
            if table in tables:
                evidence += _delete_matching(
                    con, table, "doc_id", "kind = 'tool_artifact' AND "
                )
    finally:
        con.unregister("__expired_artifacts")
    return artifacts, evidence


def _delete_matching(con, table: str, column: str, extra: str = "") -> int:
    row = con.execute(
        f"DELETE FROM {table} WHERE {extra}EXISTS (SELECT 1 FROM "
        f"__expired_artifacts x WHERE x.tenant_id = {table}.tenant_id "
        f"AND x.artifact_id = {table}.{column})"
    ).fetchone()
    return int(row[0] or 0) if row else 0


def purge_in_transaction(
    wh: Warehouse,
    policy: Policy,
    now: datetime,
    run_id: str | None,
    job_version: str,
    counts: RetentionCounts,
    *,
    readmission_run_id: str | None = None,
    embed=None,
):
    """The row purges of one retention step, inside the caller's transaction
    (``prepare`` first), with consent re-admission (a grant committed since a
    ``no_basis`` rejection admits it here, also in a run with nothing new).
    Adds to ``counts``; returns the memory lifecycle's ``MaintenanceResult``.
    ``readmission_run_id``: the run re-admitted memories name (default
    ``run_id``). Re-admitted memories are embedded with the policy's
    ``evidence.embedding`` (``embed``: another ``MemoryVectors``, tests)."""
    from ctxledger.pipelines.memory.embed import MemoryVectors
    from ctxledger.warehouse.memory_api import MaintenanceResult, _lifecycle

    lifecycle = MaintenanceResult()
    if "memories" in wh.existing_tables():
        _lifecycle(
            wh,
            policy.memory,
            now,
            run_id,
            job_version,
            lifecycle,
            own_transaction=False,
            policy_version=policy.policy_version,
            readmission_run_id=readmission_run_id,
            # re-admitted memories get their vector now, like the nightly's
            embed=embed or MemoryVectors(policy.evidence.embedding),
        )
    artifacts, evidence = purge_artifacts(wh, policy.retention.artifacts_days, now)
    counts.memories_expired += lifecycle.expired
    counts.memories_withdrawn += lifecycle.withdrawn
    counts.memories_resolved += lifecycle.resolved
    counts.memories_readmitted += lifecycle.readmitted
    counts.readmissions_closed += lifecycle.readmission_closed
    counts.artifacts_expired += artifacts
    counts.evidence_rows_removed += evidence
    return lifecycle


# -- 3. after the commit -----------------------------------------------------------


def after_commit(
    root: str | Path,
    policy: Policy,
    counts: RetentionCounts,
    *,
    catalog: str | None = None,
    data_path: str | None = None,
    memory: object | None = None,
):
    """History purge (if memories were purged) and serving-table compaction.

    Returns a ``MaintenanceResult`` (``memory`` if given, else one built from
    ``counts``) with ``history`` and ``compacted`` filled in.
    """
    from ctxledger.warehouse.memory_api import (
        SERVING_TABLES,
        MaintenanceResult,
        compact_sorted,
        data_files,
        ensure_serving_options,
        purge_history,
    )

    result = memory or MaintenanceResult(
        resolved=counts.memories_resolved,
        expired=counts.memories_expired,
        withdrawn=counts.memories_withdrawn,
    )
    with Warehouse.open(root, catalog=catalog, data_path=data_path) as wh:
        if "memories" in wh.existing_tables():
            ensure_serving_options(wh)
            for table in SERVING_TABLES:
                if data_files(wh, table) > policy.memory.compact_after_files:
                    compact_sorted(wh, table)
                    result.compacted.append(table)
    purged = counts.memories_expired or counts.memories_withdrawn
    if purged and policy.memory.purge_history:
        result.history = purge_history(root, catalog=catalog, data_path=data_path)
    return result


# -- a nightly with nothing new ----------------------------------------------------


class _NothingToRecordError(Exception):
    """Roll the retention transaction back: it changed no row."""


def run_retention(
    root: str | Path,
    policy: Policy,
    *,
    now: datetime | None = None,
    catalog: str | None = None,
    data_path: str | None = None,
    job_version: str = "",
) -> RetentionResult:
    """The retention purge on its own (a nightly run with nothing new to ingest).

    Expires history, then purges rows in one transaction that also stores a
    ``runs`` row (job ``retention``, with the counts) when anything was removed;
    nothing removed: no row and no snapshot.
    """
    now = now or datetime.now(UTC)
    started = datetime.now(UTC)
    counts = RetentionCounts()
    run_id = content_hash("retention", now, time.time_ns(), prefix="ret_", length=20)
    with Warehouse.open(root, catalog=catalog, data_path=data_path) as wh:
        wh.ensure_tables()
        expire_history(wh, policy.history, now).add_to(counts)
        history_only = RetentionCounts(**asdict(counts))
        prepare(wh)
        state: dict[str, object] = {}

        def body() -> None:
            attempt = RetentionCounts(**asdict(history_only))
            con = wh.connection()
            with wh.transaction():
                wh._take_commit_lock()
                state["memory"] = purge_in_transaction(
                    wh,
                    policy,
                    now,
                    None,
                    job_version,
                    attempt,
                    readmission_run_id=run_id,
                )
                if not attempt.changed:
                    raise _NothingToRecordError
                manifest = RunManifest(
                    run_id=run_id,
                    job="retention",
                    status="committed",
                    started_at=started,
                    finished_at=datetime.now(UTC),
                    policy_version=policy.policy_version,
                    code_version=job_version,
                    runner="local",
                    retention=attempt.to_json(),
                )
                con.register("__retention_run", to_table(RunManifest, [manifest.row()]))
                try:
                    wh.insert_new("runs", "SELECT * FROM __retention_run")
                finally:
                    con.unregister("__retention_run")
                wh.set_commit_message(
                    f"run {run_id}",
                    {"run_id": run_id, "job": "retention", **asdict(attempt)},
                )
            state["counts"] = attempt

        try:
            retry_on_conflict(body)
        except _NothingToRecordError:
            return RetentionResult(counts, memory=state.get("memory"))
        counts = state["counts"]  # type: ignore[assignment]
        snapshot = wh.snapshot_for_run(run_id)
    memory = after_commit(
        root,
        policy,
        counts,
        catalog=catalog,
        data_path=data_path,
        memory=state.get("memory"),
    )
    return RetentionResult(counts, run_id, snapshot, memory)


_LABELS = (
    ("memories_expired", "memories expired"),
    ("memories_withdrawn", "memories without basis"),
    ("memories_resolved", "memories re-resolved"),
    ("memories_readmitted", "memories re-admitted"),
    ("readmissions_closed", "re-admissions closed"),
    ("artifacts_expired", "artifacts past retention"),
    ("evidence_rows_removed", "artifact evidence rows"),
    ("snapshots_expired", "snapshots expired"),
    ("files_deleted", "files deleted"),
    ("orphan_files_deleted", "orphan files deleted"),
    ("stale_run_dirs_removed", "stale run folders"),
)


def describe(counts: RetentionCounts | str | None) -> str:
    """A one-line summary of the non-zero counts (``-`` when nothing)."""
    if not isinstance(counts, RetentionCounts):
        counts = RetentionCounts.from_json(counts)
    parts = [
        f"{label} {getattr(counts, name)}"
        for name, label in _LABELS
        if getattr(counts, name)
    ]
    return ", ".join(parts) or "-"
