"""Beam wrappers of the sink: stage records as Parquet shards, commit them once.

``WriteTables`` writes each table's records as Parquet shards under
``staging/<run_id>/<table>/`` (``pipelines.sink.shards``);
``CommitSnapshot`` waits for every shard, checks the reported paths against
the writers' shard manifests (``pipelines.sink.staged``), then runs the single
commit step
(``pipelines.sink.commit.commit_run``) on one worker. Until that step commits, no
reader can see any of the run's rows.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import apache_beam as beam
from apache_beam.transforms.window import GlobalWindow
from apache_beam.utils.windowed_value import WindowedValue

from ctxledger.pipelines.config import JobConfig
from ctxledger.pipelines.sink.commit import commit_run
from ctxledger.pipelines.sink.shards import SHARD_MAX_ROWS, ShardBuffer
from ctxledger.pipelines.sink.staged import verify_staged
from ctxledger.schemas.arrow import arrow_schema
from ctxledger.warehouse.tables import TABLES


class WriteShardsFn(beam.DoFn):
    """Rows of one table -> staged Parquet shards (``pipelines.sink.shards``).

    Emits each shard's path as it is written and the last one when the bundle
    ends; the write fuses with the stage that made the rows (no shuffle).
    """

    def __init__(self, table: str, directory: str, max_rows: int = SHARD_MAX_ROWS):
        self.table = table
        self.directory = directory
        self.max_rows = max_rows
        self.buffer: ShardBuffer | None = None

    def setup(self):
        self.schema = arrow_schema(TABLES[self.table])

    def start_bundle(self):
        self.buffer = ShardBuffer(Path(self.directory), self.schema, self.max_rows)

    def process(self, record):
        path = self.buffer.add(record.row())
        if path is not None:
            yield path

    def finish_bundle(self):
        path = self.buffer.flush()
        if path is not None:
            yield WindowedValue(path, GlobalWindow().max_timestamp(), [GlobalWindow()])


class WriteTables(beam.PTransform):
    """``{table: PCollection[Record]}`` -> PCollection of staged shard paths."""

    def __init__(self, config: JobConfig, max_rows: int = SHARD_MAX_ROWS):
        super().__init__()
        self.config = config
        self.max_rows = max_rows

    def expand(self, tables):
        written = [
            records
            | f"WriteShards[{table}]"
            >> beam.ParDo(
                WriteShardsFn(
                    table, f"{self.config.staging_dir}/{table}", self.max_rows
                )
            )
            for table, records in sorted(tables.items())
        ]
        return written | "FlattenShardPaths" >> beam.Flatten()


class CommitRunFn(beam.DoFn):
    """Run the commit step once, over the full list of staged shards.

    ``commit`` is ``commit_run`` (append) unless a job brings its own, such as the
    backfill's replacing commit (a picklable callable with the same signature).
    """

    def __init__(
        self,
        config,
        started_at,
        files_seen,
        files_skipped,
        runner,
        commit=None,
        expected_files=None,
    ):
        self.config = config
        self.expected_files = expected_files
        self.started_at = started_at
        self.files_seen = files_seen
        self.files_skipped = files_skipped
        self.runner = runner
        self.commit = commit or commit_run

    def process(self, paths):
        if getattr(self.config, "embed_ahead", False):
            # the evidence stage took its vectors: stop the embed-ahead helper
            # (and its read-only attach, which would block this commit)
            from ctxledger.pipelines.evidence.ahead import release_ahead

            release_ahead(self.config.run_id)
        # Every shard a writer staged must have reached this step, and every
        # planned landing file must be ingested: else fail, never commit less.
        verify_staged(self.config.staging_dir, paths, self.expected_files)
        yield self.commit(
            self.config,
            paths,
            started_at=self.started_at,
            files_seen=self.files_seen,
            files_skipped=self.files_skipped,
            runner=self.runner,
        )


class CommitSnapshot(beam.PTransform):
    """Staged shard paths -> one committed snapshot (emits the ``RunManifest``)."""

    def __init__(
        self,
        config: JobConfig,
        started_at: datetime,
        files_seen: int,
        files_skipped: int,
        runner: str,
        commit=None,
        expected_files: int | None = None,
    ):
        super().__init__()
        self.fn = CommitRunFn(
            config,
            started_at,
            files_seen,
            files_skipped,
            runner,
            commit,
            expected_files,
        )

    def expand(self, paths):
        return (
            paths
            | "CollectShardPaths" >> beam.combiners.ToList()
            | "CommitRun" >> beam.ParDo(self.fn)
        )
