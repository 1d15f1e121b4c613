"""Stored vectors handed to the evidence stage as a file, not a catalog attach.

Why: the stage's lookups (``LookupEmbeddingsFn``: reuse a vector the
warehouse already holds for the same tenant, text hash and model) used to
attach the catalog inside a DoFn. On a cluster that DoFn runs on another
machine, which cannot reach a local catalog file, and every worker attached
it again. Now the launcher exports the model's stored vectors once, while it
plans (``warehouse.evidence_api.export_stored_vectors``), to a Parquet file in
the run's staging folder (a path every worker shares, like the shards); the
DoFn reads that file with a plain in-memory DuckDB connection.

Cost: one copy of the model's vectors per run that has any (~1.5 KB a
vector). No Beam import here.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

#: Where a run's exported vectors go, under its staging folder.
VECTORS_FILE = "_inputs/stored_vectors.parquet"


def vectors_path(staging_dir: str) -> str:
    """The exported-vectors file of a run."""
    return str(Path(staging_dir) / VECTORS_FILE)


class VectorFile:
    """``(tenant_id, content_hash)`` keys -> stored vectors, from the exported
    file; the connection opens on the first call, ``close`` lets it go."""

    def __init__(self, path: str):
        self.path = path
        self._con = None

    def __call__(
        self, keys: Sequence[tuple[str, str]]
    ) -> dict[tuple[str, str], list[float]]:
        if not keys:
            return {}
        import duckdb
        import pyarrow as pa

        if self._con is None:
            self._con = duckdb.connect()
        wanted = pa.table(
            {"tenant_id": [k[0] for k in keys], "content_hash": [k[1] for k in keys]}
        )
        self._con.register("__wanted", wanted)
        try:
            rows = self._con.execute(
                "SELECT v.tenant_id, v.content_hash, v.embedding "
                "FROM read_parquet(?) v SEMI JOIN __wanted w "
                "ON v.tenant_id = w.tenant_id AND v.content_hash = w.content_hash",
                [self.path],
            ).fetchall()
        finally:
            self._con.unregister("__wanted")
        return {(t, h): list(v) for t, h, v in rows if v is not None}

    def close(self) -> None:
        if self._con is not None:
            self._con.close()
        self._con = None
