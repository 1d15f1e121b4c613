"""Staged Parquet shards: a table's rows buffered and written as bounded files.

The sink stages each table's rows under ``staging/<run_id>/<table>/`` and the
single commit step registers exactly the files the pipeline reported. A writer
lives in one bundle: it writes a file whenever its buffer reaches ``max_rows``
and once more when the bundle ends, so memory stays bounded however large the
run is and no extra shuffle is needed (the write fuses with the stage that made
the rows). A retried bundle writes new files under new names; its failed
attempt's files are never reported; their manifests make the commit fail the
run rather than guess (``pipelines.sink.staged``), and they go with the
staging folder.

Each file is written under a temporary name, fsynced and renamed once complete
(``pipelines.atomic.produce_atomic``), so a file with a final name is always a
whole Parquet file, and a failed write (a full disk) removes its temporary file;
then its manifest is written (``pipelines.sink.staged``), which the commit
checks the reported paths against.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from ctxledger.pipelines.atomic import produce_atomic
from ctxledger.pipelines.sink.staged import record_shard

#: Rows per staged file. Bounds a writer's buffer (rows with embeddings run to a
#: few KB each) while keeping files large enough for DuckLake to read well.
SHARD_MAX_ROWS = 20_000


def write_shard(directory: Path, schema: pa.Schema, rows: list[dict[str, Any]]) -> str:
    """Write ``rows`` as one new zstd Parquet file in ``directory``; its path."""
    directory.mkdir(parents=True, exist_ok=True)
    final = directory / f"part-{uuid.uuid4().hex}.parquet"
    table = pa.Table.from_pylist(rows, schema=schema)
    produce_atomic(final, lambda tmp: pq.write_table(table, tmp, compression="zstd"))
    # its manifest, written where its rows are (pipelines.sink.staged)
    record_shard(final, directory.name, len(rows))
    return str(final)


class ShardBuffer:
    """Rows of one table in one bundle, flushed to a new shard every ``max_rows``."""

    def __init__(
        self, directory: Path, schema: pa.Schema, max_rows: int = SHARD_MAX_ROWS
    ):
        if max_rows < 1:
            raise ValueError(f"max_rows must be at least 1, got {max_rows}")
        self.directory = directory
        self.schema = schema
        self.max_rows = max_rows
        self.rows: list[dict[str, Any]] = []

    def add(self, row: dict[str, Any]) -> str | None:
        """Buffer ``row``; the new shard's path when the buffer was full."""
        self.rows.append(row)
        if len(self.rows) >= self.max_rows:
            return self.flush()
        return None

    def flush(self) -> str | None:
        """Write what is buffered (nothing when empty); the new shard's path."""
        if not self.rows:
            return None
        rows, self.rows = self.rows, []
        return write_shard(self.directory, self.schema, rows)
