"""Open a DuckLake warehouse, create its tables, and commit one run as one snapshot.

Layout of a warehouse folder::

    catalog.ducklake     the DuckLake catalog (a DuckDB file; Postgres at scale)
    lake/                Parquet data files DuckLake manages
    staging/<run_id>/    Parquet shards a run wrote, before the commit registers them
    quarantine/<run_id>/ raw bytes of rejected records, owner-only

Readers only ever see committed snapshots: shards in ``staging`` are invisible until
``commit_run`` inserts them inside one transaction, which DuckLake turns into one
snapshot. A crash before the commit leaves the previous snapshot untouched.
"""

from __future__ import annotations

import json
import logging
import os
import re
import sysconfig
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

from ctxledger.schemas.arrow import arrow_schema
from ctxledger.warehouse.catalog_url import catalog_location
from ctxledger.warehouse.concurrency import retry_on_conflict
from ctxledger.warehouse.errors import WarehouseError
from ctxledger.warehouse.tables import TABLES
from ctxledger.warehouse.views import install_catalog_extras

log = logging.getLogger("ctxledger.warehouse")

CATALOG_FILE = "catalog.ducklake"
LAKE_ALIAS = "lake"
#: One-row table every data commit updates, so two concurrent commits conflict
#: (both delete its row) and the loser re-runs its de-duplicating inserts against
#: the winner's rows; plain appends would both commit and duplicate shared keys.
COMMIT_LOCK_TABLE = "_commit_lock"


def extension_directory() -> str:
    """Where the offline DuckDB extension packages put their binaries."""
    return os.path.join(sysconfig.get_paths()["purelib"], "duckdb_ext", "extensions")


def _config(verify: bool) -> dict[str, str]:
    config = {
        "extension_directory": extension_directory(),
        "autoinstall_known_extensions": "false",
        "autoload_known_extensions": "true",
    }
    if not verify:
        config["allow_unsigned_extensions"] = "true"
    return config


def connect(
    database: str = ":memory:",
    read_only: bool = False,
    load: Sequence[str] = (),
    verify: bool = False,
) -> duckdb.DuckDBPyConnection:
    """A DuckDB connection that loads extensions only from the offline packages,
    with the extensions in ``load`` loaded (see ``load_extensions``).

    ``verify``: DuckDB checks every extension's signature on this connection and
    refuses unsigned ones (``allow_unsigned_extensions`` off); the read-only SQL
    console uses it, since its user may ``LOAD`` whatever it likes before the
    configuration is locked."""
    con = duckdb.connect(database, read_only=read_only, config=_config(verify=verify))
    try:
        load_extensions(con, *load)
    except BaseException:
        con.close()
        raise
    return con


def lake_extensions(catalog: str) -> tuple[str, ...]:
    """The extensions attaching DuckLake ``catalog`` needs."""
    if catalog.startswith(("postgres:", "postgresql:")):
        return ("ducklake", "postgres_scanner")
    return ("ducklake",)


#: Extensions whose signature DuckDB checked in this process.
_VERIFIED: set[str] = set()
_VERIFIED_LOCK = threading.Lock()


def load_extensions(con: duckdb.DuckDBPyConnection, *names: str) -> None:
    """``LOAD`` each extension, its signature checked once per process.

    DuckDB checks an extension's signature on every load, reading the whole
    binary (ducklake: 50 MB, about 0.2 s), and a job opens the warehouse a dozen
    times. So the first load of each extension in a process happens on a
    throwaway connection with DuckDB's checks on (a tampered file fails there);
    connections then load the same checked file without reading it again. (An
    extension DuckDB autoloads for a user's own SQL, say ``vss`` in ``ctxledger
    sql``, is not checked first: every extension we use is loaded through here.)
    """
    for name in names:
        with _VERIFIED_LOCK:
            if name not in _VERIFIED:
                check = duckdb.connect(":memory:", config=_config(verify=True))
                try:
                    check.execute(f"LOAD {name}")
                finally:
                    check.close()
                _VERIFIED.add(name)
        con.execute(f"LOAD {name}")


@dataclass(frozen=True)
class CommitResult:
    """What one commit did: rows inserted per table and the snapshot it created."""

    snapshot_id: int | None
    inserted: dict[str, int]
    #: Another attempt of the same run id had committed it already: this one
    #: added nothing and made no snapshot (``Warehouse.commit_staged``).
    already_committed: bool = False


class _AlreadyCommittedError(Exception):
    """Raised inside a commit's transaction to roll it back: the run id has
    a committed ``runs`` row (another attempt of the same run got there)."""


def _missing_struct_fields(
    wanted: pa.DataType, stored: pa.DataType, path: str
) -> list[str]:
    """Dotted paths (``sections.findings``) of struct fields a model has gained
    since the lake's column was created. Without adding them, an insert of the
    new rows would silently drop those fields (DuckDB casts by field name)."""
    if not (pa.types.is_struct(wanted) and pa.types.is_struct(stored)):
        return []
    have = {
        stored.field(i).name: stored.field(i).type for i in range(stored.num_fields)
    }
    missing: list[str] = []
    for i in range(wanted.num_fields):
        sub = wanted.field(i)
        if sub.name not in have:
            missing.append(f"{path}.{sub.name}")
        else:
            missing += _missing_struct_fields(
                sub.type, have[sub.name], f"{path}.{sub.name}"
            )
    return missing


def _quote(path: str | Path) -> str:
    return "'" + str(path).replace("'", "''") + "'"


_MOVED = re.compile(r'does not match existing data path in the catalog "([^"]*)"')


def attach_lake(
    con: duckdb.DuckDBPyConnection,
    catalog: str,
    data_path: str,
    *,
    default_data_path: bool,
    options: str = "",
) -> None:
    """``ATTACH`` the DuckLake ``catalog`` as ``LAKE_ALIAS`` on ``con``.

    DuckLake stores the data path it was created with and refuses another one.
    It also resolves a *relative* stored path against the process's working
    directory, not the catalog file, so storing ``lake/`` would not make a
    warehouse relocatable either. So a local warehouse that is opened with its
    default data path (``<folder>/lake``) after the folder was copied or moved
    (the stored path is some other ``.../lake/``) is attached with DuckLake's
    ``OVERRIDE_DATA_PATH``: the ``lake/`` next to the catalog file is used for
    this session, and the stored path is left as it is (an explicit
    ``--data-path`` that disagrees with the catalog still fails loudly).
    """
    target = _quote("ducklake:" + catalog)
    path = _quote(data_path.rstrip("/") + "/")
    sql = f"ATTACH {target} AS {LAKE_ALIAS} (DATA_PATH {path}{options}"
    try:
        con.execute(sql + ")")
    except duckdb.Error as exc:
        moved = _MOVED.search(str(exc))
        local = not catalog.startswith(("postgres:", "postgresql:"))
        if not (
            moved
            and default_data_path
            and local
            and Path(moved.group(1).rstrip("/")).name == "lake"
        ):
            raise
        con.execute(sql + ", OVERRIDE_DATA_PATH true)")


class Warehouse:
    """A DuckLake warehouse folder (or catalog URL) with our tables in it.

    The lake itself (tables, commits, snapshots, SQL); memories, evidence
    search and packs are the read path's (``ctxledger.Context``)."""

    def __init__(
        self,
        root: str | Path,
        catalog: str | None = None,
        data_path: str | None = None,
        snapshot: int | None = None,
        read_only: bool = False,
    ):
        self.root = Path(root).resolve()
        self.snapshot = snapshot
        #: Attach the catalog READ_ONLY, with signed extensions only (the
        #: analyst console, ``warehouse.sql_access``); a pinned snapshot is
        #: always read-only.
        self.read_only = read_only
        # postgres:// URLs become DuckLake's `postgres:<libpq keywords>` form.
        self.catalog = catalog_location(catalog or str(self.root / CATALOG_FILE))
        self.data_path = data_path or str(self.root / "lake")
        self._default_data_path = data_path is None
        self._con: duckdb.DuckDBPyConnection | None = None

    # -- lifecycle ---------------------------------------------------------------
    @classmethod
    def open(cls, root: str | Path, create: bool = False, **kwargs: Any) -> Warehouse:
        """Open a warehouse; ``create`` makes the folder and tables if missing."""
        root = Path(root)
        warehouse = cls(root, **kwargs)
        is_local = not warehouse.catalog.startswith(("postgres:", "postgresql:"))
        if is_local and not Path(warehouse.catalog).exists() and not create:
            raise WarehouseError(
                f"no warehouse at {root} (expected {warehouse.catalog}); "
                "run `ctxledger nightly` first or pass the right --warehouse"
            )
        warehouse.root.mkdir(parents=True, exist_ok=True)
        if "://" not in warehouse.data_path:  # s3://, gs://: the store has no dirs
            Path(warehouse.data_path).mkdir(parents=True, exist_ok=True)
        warehouse.connection()
        if create:
            warehouse.ensure_tables()
        return warehouse

    def connection(self) -> duckdb.DuckDBPyConnection:
        """The open DuckDB connection with the lake attached as ``lake``."""
        if self._con is None:
            # Two first ATTACHes of a fresh Postgres catalog race to create it.
            self._con = retry_on_conflict(self._attach)
        return self._con

    def _attach(self) -> duckdb.DuckDBPyConnection:
        con = connect(load=lake_extensions(self.catalog), verify=self.read_only)
        try:
            options = ""
            if self.snapshot is not None:
                options += f", SNAPSHOT_VERSION {int(self.snapshot)}"
            if self.snapshot is not None or self.read_only:
                options += ", READ_ONLY"
            attach_lake(
                con,
                self.catalog,
                self.data_path,
                default_data_path=self._default_data_path,
                options=options,
            )
            con.execute(f"USE {LAKE_ALIAS}")
        except BaseException:
            con.close()
            raise
        return con

    def close(self) -> None:
        """Detach the lake, then close (a live relation must not pin the catalog)."""
        if self._con is not None:
            try:
                self._con.execute(f"USE memory; DETACH {LAKE_ALIAS}")
            except duckdb.Error:
                pass
            self._con.close()
            self._con = None

    def __enter__(self) -> Warehouse:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- schema ------------------------------------------------------------------
    def existing_tables(self) -> set[str]:
        """Data tables in the lake (not the internal ``COMMIT_LOCK_TABLE``)."""
        return self._lake_tables() - {COMMIT_LOCK_TABLE}

    def _lake_tables(self) -> set[str]:
        rows = (
            self.connection()
            .execute(
                "SELECT table_name FROM information_schema.tables "
                "WHERE table_catalog = ? AND table_schema = 'main' "
                "AND table_type = 'BASE TABLE'",  # not warehouse/views.py's views
                [LAKE_ALIAS],
            )
            .fetchall()
        )
        return {r[0] for r in rows}

    def ensure_tables(self) -> None:
        """Create missing tables and add missing columns, in one snapshot at most.

        Column types come from the Arrow schemas in ``schemas``; adding a field to
        a record model adds the column here on the next open (old rows read NULL).
        Reads and DDL share one transaction, so two jobs opening a fresh shared
        catalog at once do not both create a table: the loser's commit conflicts
        and the retry finds the tables there.
        """
        retry_on_conflict(self._ensure_tables)

    def _ensure_tables(self) -> None:
        con = self.connection()
        with self.transaction():
            existing = self._lake_tables()
            columns: dict[str, set[str]] = {}
            for table, column in con.execute(
                "SELECT table_name, column_name FROM information_schema.columns "
                "WHERE table_catalog = ? AND table_schema = 'main'",
                [LAKE_ALIAS],
            ).fetchall():
                columns.setdefault(table, set()).add(column)
            creates: list[tuple[str, pa.Table]] = []
            additions: list[tuple[str, str, pa.Table]] = []
            for name, model in TABLES.items():
                schema = arrow_schema(model)
                if name not in existing:
                    creates.append((name, schema.empty_table()))
                    continue
                stored = None
                for field in schema:
                    empty = pa.schema([field]).empty_table()
                    if field.name not in columns.get(name, set()):
                        additions.append((name, field.name, empty))
                        continue
                    if not pa.types.is_struct(field.type):
                        continue
                    if stored is None:
                        stored = con.execute(f"SELECT * FROM {name} LIMIT 0").arrow()
                    for path in _missing_struct_fields(
                        field.type, stored.schema.field(field.name).type, field.name
                    ):
                        additions.append((name, path, empty))
            lock_missing = COMMIT_LOCK_TABLE not in existing
            for name, empty in creates:
                con.register("__empty", empty)
                con.execute(f"CREATE TABLE {name} AS SELECT * FROM __empty")
                con.unregister("__empty")
            for name, column, empty in additions:
                con.register("__empty", empty)
                dtype = con.execute(
                    f"DESCRIBE SELECT {column} FROM __empty"
                ).fetchone()[1]
                con.unregister("__empty")
                con.execute(f"ALTER TABLE {name} ADD COLUMN {column} {dtype}")
            if lock_missing:
                con.execute(f"CREATE TABLE {COMMIT_LOCK_TABLE} (commits BIGINT)")
                con.execute(f"INSERT INTO {COMMIT_LOCK_TABLE} VALUES (0)")
            # Views and comments for analysts (warehouse/views.py): no DDL when
            # they are up to date, so an unchanged warehouse gets no snapshot.
            extras = install_catalog_extras(con, LAKE_ALIAS)
            if not creates and not additions and not lock_missing and not extras:
                return
            self._set_commit_message("schema", {"kind": "schema"})

    def take_commit_lock(self) -> None:
        """Serialise this transaction against every other data commit."""
        self._take_commit_lock()

    def _take_commit_lock(self) -> None:
        """Update the lock row inside the open transaction (see
        ``COMMIT_LOCK_TABLE``): of two data commits that overlap in time, one
        now aborts with a conflict and is retried instead of duplicating keys."""
        con = self.connection()
        if COMMIT_LOCK_TABLE not in self._lake_tables():
            # A warehouse from before the lock: the next ensure_tables adds it.
            return
        con.execute(f"UPDATE {COMMIT_LOCK_TABLE} SET commits = commits + 1")

    # -- transactions ------------------------------------------------------------
    @contextmanager
    def transaction(self) -> Iterator[duckdb.DuckDBPyConnection]:
        con = self.connection()
        con.execute("BEGIN TRANSACTION")
        try:
            yield con
        except BaseException:
            con.execute("ROLLBACK")
            raise
        con.execute("COMMIT")

    def set_commit_message(self, message: str, extra: dict[str, Any]) -> None:
        """Tag the open transaction's snapshot (``run <id>`` for job runs)."""
        self._set_commit_message(message, extra)

    def _set_commit_message(self, message: str, extra: dict[str, Any]) -> None:
        self.connection().execute(
            f"CALL {LAKE_ALIAS}.set_commit_message('ctxledger', ?, extra_info => ?)",
            [message, json.dumps(extra, sort_keys=True)],
        )

    # -- commit ------------------------------------------------------------------
    def insert_new(self, table: str, source_sql: str) -> int:
        """Insert rows of ``source_sql`` whose key is not yet in ``table``.

        De-duplication on the record key makes a re-run of the same input add
        nothing, and also drops duplicates inside the batch itself.
        """
        model = TABLES[table]
        key = ", ".join(model.key)
        columns = ", ".join(model.model_fields)
        # which of a key's duplicates is kept: ``dedupe_order`` (e.g. Artifact)
        order = ", ".join((*model.key, *getattr(model, "dedupe_order", ())))
        con = self.connection()
        before = con.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
        con.execute(
            f"INSERT INTO {table} ({columns}) "
            f"SELECT {columns} FROM ("
            f"  SELECT *, row_number() OVER (PARTITION BY {key} ORDER BY {order})"
            "   AS __rn"
            f"  FROM ({source_sql}) src"
            f") fresh ANTI JOIN {table} existing USING ({key}) WHERE fresh.__rn = 1"
        )
        after = con.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
        return after - before

    def commit_staged(
        self,
        run_id: str,
        staged: dict[str, Sequence[str]],
        extra_rows: dict[str, pa.Table],
        commit_info: dict[str, Any],
        manifest: Callable[[dict[str, int]], pa.Table] | None = None,
        in_transaction: Callable[[Warehouse], None] | None = None,
    ) -> CommitResult:
        """Register a run's Parquet shards and extra rows as one snapshot.

        ``staged`` maps table -> Parquet files; ``extra_rows`` maps table -> Arrow
        rows computed by the job. ``manifest`` builds the ``runs`` row from the
        inserted counts, so the run record states what its snapshot added.
        ``in_transaction`` runs after the inserts and before the manifest (the
        run's retention step: memory lifecycle, artifact purge), so its changes
        are part of the same snapshot; it runs again if the commit is retried.
        Everything happens in one transaction: all of it becomes visible, or none.
        A transaction that conflicts with a concurrent writer's commit runs again
        (``warehouse.concurrency``), so each key lands once whichever commits first.
        """
        try:
            inserted = retry_on_conflict(
                lambda: self._commit_staged(
                    run_id, staged, extra_rows, commit_info, manifest, in_transaction
                )
            )
        except _AlreadyCommittedError:
            log.info("run %s was committed by another attempt; adding nothing", run_id)
            return CommitResult(self.snapshot_for_run(run_id), {}, True)
        return CommitResult(self.snapshot_for_run(run_id), inserted)

    def run_committed(self, run_id: str) -> bool:
        """Whether ``runs`` holds a committed row for ``run_id`` (read in the
        open transaction, if any)."""
        if "runs" not in self._lake_tables():
            return False
        found = (
            self.connection()
            .execute(
                "SELECT count(*) FROM runs WHERE run_id = ? AND status = 'committed'",
                [run_id],
            )
            .fetchone()
        )
        return bool(found and found[0])

    def _commit_staged(
        self,
        run_id: str,
        staged: dict[str, Sequence[str]],
        extra_rows: dict[str, pa.Table],
        commit_info: dict[str, Any],
        manifest: Callable[[dict[str, int]], pa.Table] | None,
        in_transaction: Callable[[Warehouse], None] | None = None,
    ) -> dict[str, int]:
        inserted: dict[str, int] = {}
        con = self.connection()
        with self.transaction():
            self._take_commit_lock()
            # A run id commits once: two attempts of one run (two nightlies
            # over the same new files) serialise on the commit lock, and the
            # second finds the first's ``runs`` row here (docs/scale_out.md).
            if manifest is not None and self.run_committed(run_id):
                raise _AlreadyCommittedError(run_id)
            for table, files in staged.items():
                files = [f for f in files if Path(f).exists()]
                if not files:
                    inserted[table] = 0
                    continue
                listing = "[" + ", ".join(_quote(f) for f in files) + "]"
                inserted[table] = self.insert_new(
                    table, f"SELECT * FROM read_parquet({listing}, union_by_name=true)"
                )
            for table, rows in extra_rows.items():
                name = f"__extra_{table}"
                con.register(name, rows)
                try:
                    inserted[table] = inserted.get(table, 0) + self.insert_new(
                        table, f"SELECT * FROM {name}"
                    )
                finally:
                    con.unregister(name)
            if in_transaction is not None:
                in_transaction(self)
            if manifest is not None:
                con.register("__manifest", manifest(dict(inserted)))
                try:
                    self.insert_new("runs", "SELECT * FROM __manifest")
                finally:
                    con.unregister("__manifest")
            self._set_commit_message(f"run {run_id}", {"run_id": run_id, **commit_info})
        return inserted

    # -- reads -------------------------------------------------------------------
    def snapshot_for_run(self, run_id: str) -> int | None:
        row = (
            self.connection()
            .execute(
                f"SELECT max(snapshot_id) FROM {LAKE_ALIAS}.snapshots() "
                "WHERE commit_message = ?",
                [f"run {run_id}"],
            )
            .fetchone()
        )
        return row[0] if row else None

    def current_snapshot(self) -> int:
        return (
            self.connection()
            .execute(f"SELECT id FROM {LAKE_ALIAS}.current_snapshot()")
            .fetchone()[0]
        )

    def snapshots(self) -> list[tuple[int, Any, str | None]]:
        return (
            self.connection()
            .execute(
                "SELECT snapshot_id, snapshot_time, commit_message "
                f"FROM {LAKE_ALIAS}.snapshots() "
                "ORDER BY snapshot_id"
            )
            .fetchall()
        )

    def processed_hashes(self) -> set[str]:
        """Content hashes of landing files a committed run already processed."""
        rows = (
            self.connection()
            .execute(
                "SELECT DISTINCT file_hash FROM landing_files "
                "WHERE status = 'processed'"
            )
            .fetchall()
        )
        return {r[0] for r in rows}

    def processed_files(self) -> list[tuple[str, str, str]]:
        """``(file_hash, tenant_id, path)`` of landing files a committed run
        processed: their landing identity (``pipelines.ingest.landing``) is
        computed from these, so the same bytes under two tenants stay apart."""
        return (
            self.connection()
            .execute(
                "SELECT DISTINCT file_hash, tenant_id, path FROM landing_files "
                "WHERE status = 'processed'"
            )
            .fetchall()
        )

    def row_counts(self) -> dict[str, int]:
        con = self.connection()
        return {
            t: con.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in TABLES
        }

    def query(
        self, sql: str, params: Sequence[Any] | None = None
    ) -> duckdb.DuckDBPyRelation:
        return self.connection().sql(sql, params=params)
