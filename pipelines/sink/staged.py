"""Per-shard manifests: what the writers staged, checked before any commit.

Why: the commit used to trust whatever shard paths reached it. On a runner
that dropped them (Beam 2.77's DaskRunner loses what a DoFn emits in
``finish_bundle``: our writer's last shard) a run committed empty tables and
every stage still balanced (0 in, 0 out). Now every shard is recorded where
its rows are written: ``write_shard`` renames the finished Parquet file, then
writes a small JSON manifest (table, path, rows) under
``<staging_dir>/_shards/``. That is not a bundle callback or a pipeline
output, so no runner can drop it. ``verify_staged`` runs before the commit:

* every reported shard has its manifest, and its file holds that many rows;
* every manifest's shard was reported (else rows were written and lost on the
  way: the run fails, naming table, shards and rows);
* the ``landing_files`` rows staged equal the new landing files the job
  planned: a run that found N new files and ingested none never commits.

A retried bundle's failed attempt may leave a shard with a manifest that was
never reported: the check then fails the run rather than guess (the re-run is
idempotent: same run id, its own staging folder). No Beam import here.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import pyarrow.parquet as pq

MANIFESTS_DIR = "_shards"
#: The shard paths the pipeline reported, written by its last step
#: (``ReportShards``) for the launcher's commit.
REPORTED_FILE = "_reported_shards.json"


class StagingMismatchError(RuntimeError):
    """The staged shards and what reached the commit disagree: rows were lost."""


@dataclass(frozen=True)
class ShardManifest:
    """One staged shard as its writer recorded it."""

    table: str
    path: str
    rows: int


def record_shard(path: Path, table: str, rows: int) -> None:
    """Write the manifest of the finished shard ``path`` (temp name + rename)."""
    folder = path.parent.parent / MANIFESTS_DIR
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / f"{table}.{uuid.uuid4().hex}.json"
    partial = target.with_name(target.name + ".tmp")
    partial.write_text(json.dumps({"table": table, "path": str(path), "rows": rows}))
    os.replace(partial, target)


def write_reported(staging_dir: str | os.PathLike[str], paths: list[str]) -> None:
    """Write the pipeline's full list of shard paths (temp name + rename)."""
    folder = Path(staging_dir)
    folder.mkdir(parents=True, exist_ok=True)
    partial = folder / (REPORTED_FILE + ".tmp")
    partial.write_text(json.dumps(sorted(paths)))
    os.replace(partial, folder / REPORTED_FILE)


def read_reported(staging_dir: str | os.PathLike[str]) -> list[str]:
    """The shard paths the pipeline reported; fails when it reported none (its
    last step never ran, or its output was lost on the way)."""
    path = Path(staging_dir) / REPORTED_FILE
    if not path.is_file():
        raise StagingMismatchError(
            f"run not committed: the pipeline reported no shard list ({path} missing)"
        )
    return list(json.loads(path.read_text()))


def read_manifests(staging_dir: str | os.PathLike[str]) -> list[ShardManifest]:
    """Every shard manifest of a run's staging folder (``.tmp`` ones ignored)."""
    folder = Path(staging_dir) / MANIFESTS_DIR
    if not folder.is_dir():
        return []
    out = []
    for path in sorted(folder.glob("*.json")):
        body = json.loads(path.read_text())
        out.append(ShardManifest(body["table"], body["path"], int(body["rows"])))
    return out


def verify_staged(
    staging_dir: str | os.PathLike[str],
    reported: Iterable[str],
    expected_landing_files: int | None = None,
) -> dict[str, int]:
    """Check the reported shard paths against the writers' manifests (module
    docstring); returns the rows staged per table. Raises ``StagingMismatchError``
    with a one-line reason naming the table, the shards and the rows."""
    manifests = {m.path: m for m in read_manifests(staging_dir)}
    paths = {str(p) for p in reported}
    problems = []
    unknown = sorted(paths - set(manifests))
    if unknown:
        problems.append(f"{len(unknown)} reported shard(s) without a manifest")
    lost: dict[str, list[int]] = {}
    for path, shard in manifests.items():
        if path not in paths:
            lost.setdefault(shard.table, []).append(shard.rows)
    for table, rows in sorted(lost.items()):
        problems.append(
            f"{table}: {len(rows)} shard(s), {sum(rows)} row(s) staged but never "
            "reported to the commit"
        )
    rows_by_table: dict[str, int] = {}
    for path in sorted(paths & set(manifests)):
        shard = manifests[path]
        found = pq.ParquetFile(path).metadata.num_rows
        if found != shard.rows:
            problems.append(
                f"{shard.table}: {Path(path).name} holds {found} row(s), its "
                f"writer staged {shard.rows}"
            )
        rows_by_table[shard.table] = rows_by_table.get(shard.table, 0) + shard.rows
    landing = rows_by_table.get("landing_files", 0)
    if expected_landing_files is not None and landing != expected_landing_files:
        problems.append(
            f"landing_files: {expected_landing_files} new landing file(s) planned, "
            f"{landing} ingested"
        )
    if problems:
        raise StagingMismatchError("run not committed: " + "; ".join(problems))
    return rows_by_table
