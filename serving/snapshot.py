"""Serve one committed snapshot at a time without ever holding the writer's lock.

Why a copy: DuckDB locks a local catalog file per process, and a ``READ_ONLY``
attach of a DuckLake catalog still takes that lock (shared). Measured on DuckDB
1.4.4: a process holding ``Warehouse.open(root, read_only=True)`` made a writer
in another process fail its attach with "Could not set lock on file ...
Conflicting lock is held" until the reader exited (docs/serving.md). A
resident server would lock out the nightly, backfill and forget for as long as
it runs.

So a reader never opens the writer's catalog file. ``SnapshotReader`` copies the
catalog file and its WAL (both, plain byte copies: an OS-level ``fcntl`` lock
does not stop reads) into a private folder, checks that neither changed while
it copied (else it copies again), attaches the copy ``READ_ONLY`` over the same
Parquet ``lake/`` (DuckLake data files are immutable once written), warms the
memory replica and the evidence index for that snapshot, and only then swaps
it in. A background thread repeats this when the catalog's ``stat`` signature
moves (every commit writes the file or its WAL), so answers switch to a new
snapshot within ``poll_s`` plus the warm-up, and a request never waits for it.

Each generation owns its private memory replica (``<copy>/serving/``, built from
the copy), so a reader never rewrites the writer's shared replica files.
Requests in flight keep their generation until they finish (reference count);
a retired generation is closed and its folder deleted afterwards, so erased
rows do not outlive the next swap in a reader's copy. If a writer's cleanup
deletes a data file an old copy still names, the request gets an IO error,
the reader refreshes at once and the request is retried on the new snapshot.

A Postgres catalog has no file lock: it is attached ``READ_ONLY`` directly and
the generation is renewed when the catalog's snapshot id moves.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import duckdb

from ctxledger.warehouse.catalog import CATALOG_FILE, Warehouse, WarehouseError
from ctxledger.warehouse.catalog_url import catalog_location
from ctxledger.warehouse.memory_serving import file_signature

log = logging.getLogger(__name__)

#: Attempts to take a copy whose files did not change while they were copied.
COPY_ATTEMPTS = 20
WORKDIR_PREFIX = "ctxledger-serve-"
#: The pid of the process a copy folder belongs to.
OWNER_FILE = "owner.pid"


def remove_orphans(parent: str | Path | None = None) -> int:
    """Delete copy folders whose process is gone (killed before it could clean
    up): they hold catalog copies and memory replicas, i.e. rows that may have
    been erased since. Returns how many were removed."""
    removed = 0
    for folder in Path(parent or tempfile.gettempdir()).glob(f"{WORKDIR_PREFIX}*"):
        try:
            pid = int((folder / OWNER_FILE).read_text())
            os.kill(pid, 0)
            continue  # alive
        except ProcessLookupError:
            pass
        except (OSError, ValueError):
            continue  # not ours to judge (no pid yet, another user's)
        shutil.rmtree(folder, ignore_errors=True)
        removed += 1
    return removed


class _SnapshotWarehouse(Warehouse):
    """A ``Warehouse`` over an immutable catalog copy: its snapshot and tables
    never change, so the per-request catalog queries are answered once."""

    _tables: set[str] | None = None
    _current: int | None = None

    def existing_tables(self) -> set[str]:
        if self._tables is None:
            self._tables = super().existing_tables()
        return self._tables

    def current_snapshot(self) -> int:
        if self._current is None:
            self._current = super().current_snapshot()
        return self._current


class Generation:
    """One opened snapshot: its warehouse, and the requests using it."""

    def __init__(self, wh: Warehouse, snapshot_id: int, folder: Path | None):
        self.wh = wh
        self.snapshot_id = snapshot_id
        self.folder = folder
        #: What the reader's ``warm`` returned for this snapshot (``Context``:
        #: its memory store), closed with the generation.
        self.state: Any = None
        self._users = 0
        self._retired = False
        self._lock = threading.Lock()

    def enter(self) -> None:
        with self._lock:
            self._users += 1

    def leave(self) -> None:
        with self._lock:
            self._users -= 1
            done = self._retired and self._users == 0
        if done:
            self._close()

    def retire(self) -> None:
        with self._lock:
            self._retired = True
            done = self._users == 0
        if done:
            self._close()

    def _close(self) -> None:
        try:
            try:
                if self.state is not None:
                    self.state.close()
            finally:
                self.wh.close()
        finally:
            if self.folder is not None:
                shutil.rmtree(self.folder, ignore_errors=True)


class SnapshotReader:
    """The latest committed snapshot of a warehouse, opened without its lock."""

    def __init__(
        self,
        root: str | Path,
        *,
        catalog: str | None = None,
        data_path: str | None = None,
        workdir: str | Path | None = None,
        poll_s: float = 0.5,
        warm: Any = None,
    ):
        self.root = Path(root).resolve()
        self.catalog = catalog_location(catalog or str(self.root / CATALOG_FILE))
        self.local = not self.catalog.startswith(("postgres:", "postgresql:"))
        self.data_path = data_path or str(self.root / "lake")
        self.poll_s = poll_s
        #: Called with each new generation's warehouse before it is served; what
        #: it returns is kept as the generation's ``state``.
        self.warm = warm
        remove_orphans(workdir)
        self._workdir = Path(tempfile.mkdtemp(prefix=WORKDIR_PREFIX, dir=workdir))
        (self._workdir / OWNER_FILE).write_text(str(os.getpid()))
        self._watch = (Path(self.catalog), Path(f"{self.catalog}.wal"))
        self._current: Generation | None = None
        self._signature: tuple | None = None
        self._swap_lock = threading.Lock()
        self._refresh_lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._serial = 0
        self.swaps = 0
        self.last_error: str | None = None

    # -- lifecycle ---------------------------------------------------------------
    def start(self) -> SnapshotReader:
        """Open the current snapshot and start watching for new ones."""
        if self.local and not Path(self.catalog).exists():
            raise WarehouseError(
                f"no warehouse at {self.root} (expected {self.catalog}); "
                "run `ctxledger nightly` first or pass the right --warehouse"
            )
        self.refresh()
        if self.poll_s > 0:
            self._thread = threading.Thread(
                target=self._watch_loop, name="ctxledger-snapshots", daemon=True
            )
            self._thread.start()
        return self

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        with self._swap_lock:
            current, self._current = self._current, None
        if current is not None:
            current.retire()
        shutil.rmtree(self._workdir, ignore_errors=True)

    @property
    def snapshot_id(self) -> int | None:
        current = self._current
        return None if current is None else current.snapshot_id

    @contextmanager
    def generation(self) -> Iterator[Generation]:
        """The current generation, kept open until the block ends."""
        with self._swap_lock:
            current = self._current
            if current is None:
                raise WarehouseError("the snapshot reader is closed")
            current.enter()
        try:
            yield current
        finally:
            current.leave()

    # -- refresh -----------------------------------------------------------------
    def _watch_loop(self) -> None:
        while not self._stop.wait(self.poll_s):
            try:
                self.refresh()
                self.last_error = None
            except Exception as exc:  # keep serving the last good snapshot
                self.last_error = f"{type(exc).__name__}: {exc}"
                log.warning("snapshot refresh failed: %s", self.last_error)

    def refresh(self, force: bool = False) -> bool:
        """Swap in the catalog's newest snapshot if it moved. True: swapped."""
        with self._refresh_lock:
            if self.local:
                if (
                    not force
                    and self._current is not None
                    and file_signature(self._watch) == self._signature
                ):
                    return False
                gen, signature = self._open_copy()
            else:
                gen = self._open_direct()
                if (
                    not force
                    and self._current is not None
                    and gen.snapshot_id == self._current.snapshot_id
                ):
                    gen.retire()
                    return False
                signature = None
            try:
                if self.warm is not None:
                    gen.state = self.warm(gen.wh)
            except BaseException:
                gen.retire()
                raise
            with self._swap_lock:
                old, self._current = self._current, gen
                self._signature = signature if self.local else None
            self.swaps += 1
            if old is not None:
                old.retire()
            return True

    def _open_copy(self) -> tuple[Generation, tuple]:
        """Copy the catalog (and WAL) consistently and attach the copy."""
        self._serial += 1
        folder = self._workdir / f"g{self._serial}"
        folder.mkdir()
        target = folder / CATALOG_FILE
        wh: _SnapshotWarehouse | None = None
        try:
            for _ in range(COPY_ATTEMPTS):
                before = file_signature(self._watch)
                for src, dst in zip(
                    self._watch, (target, Path(f"{target}.wal")), strict=True
                ):
                    Path(dst).unlink(missing_ok=True)
                    try:
                        shutil.copyfile(src, dst)
                    except FileNotFoundError:
                        pass  # no WAL right now
                after = file_signature(self._watch)
                if before == after:
                    break
            else:
                raise WarehouseError("the catalog kept changing while it was copied")
            wh = _SnapshotWarehouse(
                folder,
                catalog=str(target),
                data_path=self.data_path,
                read_only=True,
            )
            # The copy's folder is not the warehouse folder: let a moved
            # warehouse's lake/ be found as Warehouse.open would.
            wh._default_data_path = self.data_path == str(self.root / "lake")
            # Answered now, before any request thread can ask (one DuckDB
            # connection must not run statements from two threads at once).
            snapshot = wh.current_snapshot()
            wh.existing_tables()
        except BaseException:
            if wh is not None:
                wh.close()
            shutil.rmtree(folder, ignore_errors=True)
            raise
        return Generation(wh, snapshot, folder), before

    def _open_direct(self) -> Generation:
        wh = _SnapshotWarehouse(
            self.root, catalog=self.catalog, data_path=self.data_path, read_only=True
        )
        # A READ_ONLY attach of a Postgres catalog reads the newest snapshot in
        # every transaction; pin this generation to the one it opened at.
        snapshot = wh.current_snapshot()
        wh.close()
        wh = _SnapshotWarehouse(
            self.root, catalog=self.catalog, data_path=self.data_path,
            snapshot=snapshot,
        )  # fmt: skip
        wh._current = snapshot
        wh.existing_tables()
        return Generation(wh, snapshot, None)


def is_missing_file(exc: BaseException) -> bool:
    """A read failed because a data file of an old snapshot is gone."""
    if isinstance(exc, FileNotFoundError):
        return True
    return isinstance(exc, duckdb.IOException | duckdb.HTTPException) and (
        "No such file" in str(exc) or "not found" in str(exc).lower()
    )
