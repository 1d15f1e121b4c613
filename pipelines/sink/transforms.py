"""Beam wrappers of the sink: stage records as Parquet shards, report them.

``WriteTables`` writes each table's records as Parquet shards under
``staging/<run_id>/<table>/`` (``pipelines.sink.shards``, each with its
manifest); ``ReportShards`` waits for every shard and writes the full list of
their paths to the staging folder. The commit is not a pipeline step: once the
runner is done, the launcher checks the reported paths against the shard
manifests and commits once (``pipelines.sink.pending``), so no worker attaches
the catalog, whatever the runner. Until that commit, no reader can see any of
the run's rows.
"""

from __future__ import annotations

from pathlib import Path

import apache_beam as beam
from apache_beam.transforms.window import GlobalWindow
from apache_beam.utils.windowed_value import WindowedValue

from ctxledger.pipelines.config import JobConfig
from ctxledger.pipelines.sink.shards import SHARD_MAX_ROWS, ShardBuffer
from ctxledger.pipelines.sink.staged import write_reported
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


class ReportShardsFn(beam.DoFn):
    """The run's full list of shard paths -> one file in its staging folder,
    which the launcher commits from (``pipelines.sink.pending``)."""

    def __init__(self, staging_dir: str):
        self.staging_dir = staging_dir

    def process(self, paths):
        write_reported(self.staging_dir, list(paths))
        yield len(paths)


class ReportShards(beam.PTransform):
    """Staged shard paths -> the reported-shards file (emits how many)."""

    def __init__(self, config: JobConfig):
        super().__init__()
        self.staging_dir = config.staging_dir

    def expand(self, paths):
        return (
            paths
            | "CollectShardPaths" >> beam.combiners.ToList()
            | "ReportShardPaths" >> beam.ParDo(ReportShardsFn(self.staging_dir))
        )
