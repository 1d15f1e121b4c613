"""The commit step: check a run's conservation counts, then commit it atomically.

Counting is done over the staged Parquet shards themselves (not over counters), so
the check sees exactly what would be committed:

* ``ingest`` (unit: source record): from ``landing_files`` rows.
* ``validate`` (unit: message): parsed messages plus message-level dead letters.
* ``redact`` (unit: message): parsed messages in; staged message rows plus
  redact dead letters out.

A stage whose ``records_in != records_out + dead`` means a record vanished: the run
fails and nothing is committed.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path

from pipelines.config import JobConfig
from schemas import RunManifest, StageCount
from schemas.arrow import to_table
from warehouse.catalog import Warehouse, connect
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


def _scalar(con, sql: str, files: Sequence[str]) -> int:
    if not files:
        return 0
    listing = "[" + ", ".join("'" + f.replace("'", "''") + "'" for f in files) + "]"
    value = con.execute(
        sql.format(files=f"read_parquet({listing}, union_by_name=true)")
    )
    return int(value.fetchone()[0] or 0)


def stage_counts(staged: dict[str, list[str]]) -> list[StageCount]:
    """Conservation counts per stage, computed from the staged shards."""
    con = connect()
    try:
        landing = staged.get("landing_files", [])
        dead = staged.get("dead_letters", [])
        ingest_in = _scalar(con, "SELECT sum(records_in) FROM {files}", landing)
        ingest_out = _scalar(con, "SELECT sum(records_out) FROM {files}", landing)
        ingest_dead = _scalar(con, "SELECT sum(dead) FROM {files}", landing)
        parsed = _scalar(con, "SELECT sum(messages_parsed) FROM {files}", landing)
        validate_dead = _scalar(
            con, "SELECT count(*) FROM {files} WHERE stage = 'validate'", dead
        )
        redact_dead = _scalar(
            con, "SELECT count(*) FROM {files} WHERE stage = 'redact'", dead
        )
        messages = _scalar(
            con, "SELECT count(*) FROM {files}", staged.get("messages", [])
        )
    finally:
        con.close()
    return [
        StageCount(
            stage="ingest",
            records_in=ingest_in,
            records_out=ingest_out,
            dead=ingest_dead,
        ),
        StageCount(
            stage="validate",
            records_in=parsed + validate_dead,
            records_out=parsed,
            dead=validate_dead,
        ),
        StageCount(
            stage="redact", records_in=parsed, records_out=messages, dead=redact_dead
        ),
    ]


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
    counts = stage_counts(staged)
    broken = [c for c in counts if not c.balanced]
    if broken:
        detail = ", ".join(
            f"{c.stage}: in {c.records_in} != out {c.records_out} + dead {c.dead}"
            for c in broken
        )
        raise StageImbalanceError(f"records lost between stages ({detail})")
    files_new = _scalar_rows(staged.get("landing_files", []))
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


def _scalar_rows(files: Sequence[str]) -> int:
    con = connect()
    try:
        return _scalar(con, "SELECT count(*) FROM {files}", files)
    finally:
        con.close()
