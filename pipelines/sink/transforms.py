"""Beam wrappers of the sink: stage records as Parquet shards, commit them once.

``WriteTables`` writes each table's records to ``staging/<run_id>/<table>/``;
``CommitSnapshot`` waits for every shard, then runs the single commit step
(``pipelines.sink.commit.commit_run``) on one worker. Until that step commits, no
reader can see any of the run's rows.
"""

from __future__ import annotations

from datetime import datetime

import apache_beam as beam

from pipelines.config import JobConfig
from pipelines.sink.commit import commit_run
from schemas.arrow import arrow_schema
from warehouse.tables import TABLES


class WriteTables(beam.PTransform):
    """``{table: PCollection[Record]}`` -> PCollection of staged shard paths."""

    def __init__(self, config: JobConfig):
        super().__init__()
        self.config = config

    def expand(self, tables):
        written = []
        for table, records in sorted(tables.items()):
            model = TABLES[table]
            written.append(
                records
                | f"ToRows[{table}]" >> beam.Map(lambda record: record.row())
                | f"WriteParquet[{table}]"
                >> beam.io.WriteToParquet(
                    f"{self.config.staging_dir}/{table}/part",
                    arrow_schema(model),
                    file_name_suffix=".parquet",
                    codec="zstd",
                )
            )
        return written | "FlattenShardPaths" >> beam.Flatten()


class CommitRunFn(beam.DoFn):
    """Run the commit step once, over the full list of staged shards.

    ``commit`` is ``commit_run`` (append) unless a job brings its own, such as the
    backfill's replacing commit (a picklable callable with the same signature).
    """

    def __init__(
        self, config, started_at, files_seen, files_skipped, runner, commit=None
    ):
        self.config = config
        self.started_at = started_at
        self.files_seen = files_seen
        self.files_skipped = files_skipped
        self.runner = runner
        self.commit = commit or commit_run

    def process(self, paths):
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
    ):
        super().__init__()
        self.fn = CommitRunFn(
            config, started_at, files_seen, files_skipped, runner, commit
        )

    def expand(self, paths):
        return (
            paths
            | "CollectShardPaths" >> beam.combiners.ToList()
            | "CommitRun" >> beam.ParDo(self.fn)
        )
