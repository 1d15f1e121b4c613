"""The commit step: check a run's conservation counts, then commit it atomically.

Counting is done over the staged Parquet shards themselves (not over Beam
counters), so the check sees exactly what would be committed; the counters per
stage live in ``pipelines.sink.counts``. A stage whose ``records_in != records_out
+ dead`` means a record vanished: the run fails and nothing is committed.

``commit_run`` appends (nightly, stream); ``pipelines.sink.replace`` replaces a
scope of history (backfill). Both share ``check_staged`` and ``run_manifest``.

``commit_run`` also runs the retention purge (``warehouse.retention``): a nightly
first expires history older than the policy's window, and every run's
transaction also purges memories and artifacts past retention and re-resolves
supersession, so the run's rows and its purge are one snapshot (a kill at any
point leaves the previous snapshot or the complete new one); the counts go in
the manifest's ``retention`` column.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path

from ctxledger.pipelines.config import JobConfig
from ctxledger.pipelines.sink.counts import STAGE_COUNTERS, StagedCounts
from ctxledger.pipelines.timing import merge_timings, read_timings
from ctxledger.schemas import RunManifest, StageCount
from ctxledger.schemas.arrow import to_table
from ctxledger.schemas.operations import StageTiming
from ctxledger.warehouse.catalog import Warehouse
from ctxledger.warehouse.tables import TABLES


class StageImbalanceError(RuntimeError):
    """Records were lost between stages; the run must not be committed."""


def group_staged(paths: Iterable[str]) -> dict[str, list[str]]:
    """Group shard paths ``.../<table>/part-*.parquet`` by table name."""
    grouped: dict[str, list[str]] = {}
    for path in paths:
        table = Path(path).parent.name
        if table not in TABLES:
            raise ValueError(f"staged file outside a table folder: {path}")
        grouped.setdefault(table, []).append(path)
    return {table: sorted(files) for table, files in grouped.items()}


def check_staged(staged: dict[str, list[str]]) -> tuple[list[StageCount], int]:
    """Every stage's conservation counts and the number of landing files staged.

    Raises ``StageImbalanceError`` when any stage lost a record.
    """
    tally = StagedCounts(staged)
    try:
        counts = [counter(tally) for counter in STAGE_COUNTERS]
        files_new = tally.rows("landing_files")
    finally:
        tally.close()
    broken = [c for c in counts if not c.balanced]
    if broken:
        detail = ", ".join(
            f"{c.stage}: in {c.records_in} != out {c.records_out} + dead {c.dead}"
            for c in broken
        )
        raise StageImbalanceError(f"records lost between stages ({detail})")
    return counts, files_new


def run_manifest(
    config: JobConfig,
    counts: list[StageCount],
    *,
    started_at: datetime,
    files_seen: int,
    files_new: int,
    files_skipped: int,
    runner: str,
) -> RunManifest:
    """The ``runs`` row of a run about to commit (finished now)."""
    return RunManifest(
        run_id=config.run_id,
        job=config.job,
        status="committed",
        started_at=started_at,
        finished_at=datetime.now(UTC),
        policy_version=config.policy_version,
        code_version=config.code_version,
        runner=runner,
        files_seen=files_seen,
        files_new=files_new,
        files_skipped=files_skipped,
        stage_counts=counts,
        config=config.model_dump_json(),
        stage_timings=read_timings(config.staging_dir),
    )


def manifest_table(manifest: RunManifest, inserted: dict[str, int]):
    """The manifest as an Arrow row, stating the rows its snapshot added.

    Called inside the commit transaction once the shards are registered, so the
    ``commit`` timing (since ``finished_at``) covers registering them.
    """
    seconds = (datetime.now(UTC) - manifest.finished_at).total_seconds()
    commit = StageTiming(stage="commit", seconds=seconds, calls=1)
    final = manifest.model_copy(
        update={
            "table_rows": json.dumps(inserted, sort_keys=True),
            "stage_timings": merge_timings([*manifest.stage_timings, commit]),
        }
    )
    return to_table(RunManifest, [final.row()])


def prepare_commit(
    config: JobConfig,
    staged_paths: Iterable[str],
    *,
    started_at: datetime,
    files_seen: int,
    files_skipped: int,
    runner: str,
) -> tuple[dict[str, list[str]], RunManifest]:
    """The staged shards by table and the run's manifest, once every stage's
    counts balance (the first half of any commit step)."""
    staged = group_staged(staged_paths)
    counts, files_new = check_staged(staged)
    manifest = run_manifest(
        config,
        counts,
        started_at=started_at,
        files_seen=files_seen,
        files_new=files_new,
        files_skipped=files_skipped,
        runner=runner,
    )
    return staged, manifest


def commit_run(
    config: JobConfig,
    staged_paths: Iterable[str],
    *,
    started_at: datetime,
    files_seen: int,
    files_skipped: int,
    runner: str,
) -> RunManifest:
    """Verify the run's counts and commit shards + manifest as one snapshot."""
    staged, manifest = prepare_commit(
        config,
        staged_paths,
        started_at=started_at,
        files_seen=files_seen,
        files_skipped=files_skipped,
        runner=runner,
    )
    from ctxledger.pipelines.redact.registry import load_checked_policy
    from ctxledger.warehouse.retention import (
        RetentionCounts,
        expire_history,
        prepare,
        purge_in_transaction,
    )
    from ctxledger.warehouse.sources import store_first_registry

    policy = load_checked_policy(config.policy_file)
    now = datetime.now(UTC)
    history = RetentionCounts()
    purged: list[RetentionCounts] = [history]

    def purge(wh: Warehouse) -> None:
        # Runs again when a conflicting commit makes the transaction retry.
        counts = RetentionCounts(**vars(history))
        purge_in_transaction(
            wh, policy, now, config.run_id, config.code_version, counts
        )
        # The first run stores the policy's source registry in its own
        # snapshot, so every source_id it stamps resolves in ``sources``.
        store_first_registry(wh, policy, config.received_at or now)
        purged.append(counts)

    def manifest_rows(inserted: dict[str, int]):
        final = manifest.model_copy(update={"retention": purged[-1].to_json()})
        return manifest_table(final, inserted)

    with config.open_warehouse() as warehouse:
        if config.job == "nightly":
            expire_history(
                warehouse,
                policy.history,
                now,
                current_run=Path(config.staging_dir).name,
            ).add_to(history)
        prepare(warehouse)
        result = warehouse.commit_staged(
            config.run_id,
            staged,
            {},
            {"job": config.job, "policy_version": config.policy_version},
            manifest=manifest_rows,
            in_transaction=purge,
        )
    manifest = manifest.model_copy(
        update={
            "snapshot_id": result.snapshot_id,
            "table_rows": json.dumps(result.inserted, sort_keys=True),
            "retention": purged[-1].to_json(),
        }
    )
    shutil.rmtree(config.staging_dir, ignore_errors=True)
    return manifest
