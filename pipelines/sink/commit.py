"""The commit step: check a run's conservation counts, then commit it atomically.

Counting is done over the staged Parquet shards themselves (not over Beam
counters), so the check sees exactly what would be committed; the counters per
stage live in ``pipelines.sink.counts``. A stage whose ``records_in != records_out
+ dead`` means a record vanished: the run fails and nothing is committed.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path

from pipelines.config import JobConfig
from pipelines.sink.counts import STAGE_COUNTERS, StagedCounts
from schemas import RunManifest
from schemas.arrow import to_table
from warehouse.catalog import Warehouse
from warehouse.tables import TABLES


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
    staged = group_staged(staged_paths)
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
    manifest = RunManifest(
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
    )

    def manifest_rows(inserted: dict[str, int]):
        final = manifest.model_copy(
            update={"table_rows": json.dumps(inserted, sort_keys=True)}
        )
        return to_table(RunManifest, [final.row()])

    with Warehouse.open(
        config.warehouse,
        create=True,
        catalog=config.catalog,
        data_path=config.data_path,
    ) as warehouse:
        result = warehouse.commit_staged(
            config.run_id,
            staged,
            {},
            {"job": config.job, "policy_version": config.policy_version},
            manifest=manifest_rows,
        )
    manifest = manifest.model_copy(
        update={
            "snapshot_id": result.snapshot_id,
            "table_rows": json.dumps(result.inserted, sort_keys=True),
        }
    )
    shutil.rmtree(config.staging_dir, ignore_errors=True)
    return manifest
