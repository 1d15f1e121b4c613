"""Open a private copy of a local catalog, so a reader never holds its lock.

DuckDB locks a local catalog file per process, and a ``READ_ONLY`` attach still
takes that lock: an analyst's ``ctxledger sql`` query that runs for minutes
would make a nightly, backfill or forget wait for it and, past their lock wait,
fail (issue 32). The server solved this first (``serving.snapshot``): copy the
catalog file and its WAL (plain byte copies: the ``fcntl`` lock does not stop
reads), check that neither changed while they were copied, and attach the copy
``READ_ONLY`` over the same Parquet ``lake/`` (DuckLake data files are immutable
once written). The copy is the last committed snapshot when it was taken; a
writer never waits for it.

A PostgreSQL catalog has no file lock and is attached directly.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from ctxledger.warehouse.catalog import CATALOG_FILE, Warehouse
from ctxledger.warehouse.catalog_url import catalog_location
from ctxledger.warehouse.errors import WarehouseError
from ctxledger.warehouse.memory_serving import file_signature

#: Attempts to take a copy whose files did not change while they were copied.
COPY_ATTEMPTS = 20


def is_local(catalog: str) -> bool:
    """Whether ``catalog`` (canonical form) is a DuckDB file, not PostgreSQL."""
    return not catalog.startswith(("postgres:", "postgresql:"))


def copy_catalog(catalog: str | Path, folder: str | Path) -> Path:
    """Copy the catalog file and its WAL into ``folder`` consistently (neither
    changed while copying); returns the copy's catalog path."""
    source = Path(catalog)
    watch = (source, Path(f"{source}.wal"))
    target = Path(folder) / CATALOG_FILE
    Path(folder).mkdir(parents=True, exist_ok=True)
    for _ in range(COPY_ATTEMPTS):
        before = file_signature(watch)
        for src, dst in zip(watch, (target, Path(f"{target}.wal")), strict=True):
            dst.unlink(missing_ok=True)
            try:
                shutil.copyfile(src, dst)
            except FileNotFoundError:
                pass  # no WAL right now
        if before == file_signature(watch):
            return target
    raise WarehouseError(f"the catalog {source} kept changing while it was copied")


def open_unlocked(
    root: str | Path,
    folder: str | Path,
    *,
    catalog: str | None = None,
    data_path: str | None = None,
    snapshot: int | None = None,
) -> Warehouse:
    """A read-only ``Warehouse`` that holds no lock a writer waits for: over a
    copy of a local catalog taken into ``folder`` (which the caller removes
    after closing it), or a PostgreSQL catalog attached ``READ_ONLY``."""
    root = Path(root).resolve()
    location = catalog_location(catalog or str(root / CATALOG_FILE))
    if not is_local(location):
        return Warehouse.open(
            root, catalog=catalog, data_path=data_path, snapshot=snapshot,
            read_only=True,
        )  # fmt: skip
    if not Path(location).exists():
        raise WarehouseError(
            f"no warehouse at {root} (expected {location}); "
            "run `ctxledger nightly` first or pass the right --warehouse"
        )
    copy = copy_catalog(location, folder)
    wh = Warehouse(
        Path(folder),
        catalog=str(copy),
        data_path=data_path or str(root / "lake"),
        snapshot=snapshot,
        read_only=True,
    )
    # The copy's folder is not the warehouse folder: a moved warehouse's lake/
    # is found as ``Warehouse.open`` would find it (``attach_lake``).
    wh._default_data_path = data_path is None
    wh.connection()
    return wh
