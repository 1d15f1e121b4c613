"""A read-optimised serving replica of ``memories`` and ``consent`` for lookups:
its format, building and refreshing (the write side). Reading it, with the
serving rules, is ``serving.memories`` (``MemoryStore``, a ``ReplicaSet``).

Why: a memory lookup on the lake is two DuckLake scans (the subject's memories
and consent events), and each pays DuckLake's fixed cost (catalog queries,
planning, Parquet footers): 96 ms p50 at 1M memories, 132 ms at 10M on the
2-core test machine, against a goal of 5 ms. So the read path reads a copy of
the two tables laid out for point reads:

    <warehouse>/serving/memories.bin   one record per memory
    <warehouse>/serving/consent.bin    one record per consent event

Each file holds every row of its lake table at one DuckLake snapshot (named in
its header) as three arrays: ``keys``, a sorted int64 key per row (63 bits of
md5 of (tenant_id, subject_id, purpose) for memories, of (tenant_id,
subject_id) for consent), ``offsets`` into ``payload``, and ``payload``, each
row's served columns as one JSON array (ids first, timestamps as epoch
microseconds). A subject's rows are adjacent, so a lookup is a binary search
in the memory-mapped keys and one slice of the payload: ~0.1 ms, where one
DuckDB statement costs 0.3-0.5 ms before it reads anything (``SELECT 1``) and
a point read in a native DuckDB table sorted by the key 0.8-1.6 ms on this
machine (most of it loading and checksumming a 256 KB block per cold read).
The measured path here: a native DuckDB replica (two point reads in one
statement) gave 1.9-2.3 ms p50 at 1M and 4.0 ms at 10M; these files give
the numbers in docs/memory.md. Texts are stored as plain UTF-8 JSON (no
compression), so a byte scan of the file finds a text if it is there. DuckDB
still builds the files (one sorted query over the lake) and the rules run in
Python on the few rows of one subject.

Correctness rules:

* Nothing time-dependent is precomputed: expiry, validity at ``at`` and the live
  basis are evaluated at query time from the replica's columns
  (``serving.memories.serve_rows``/``live_basis``, the same rules as the
  ``memories_served`` SQL macro; a property test keeps the two equal). Time
  passing needs no rebuild.
* Before each lookup the store checks whether the lake's snapshot moved: for a
  local catalog file, a ``stat`` of the file and its WAL (every DuckLake commit
  writes one of them; ~10 us); otherwise, or when they changed, it reads the
  current snapshot id from the catalog (~0.3-0.8 ms). When it moved, the
  DuckLake change log (``ducklake_snapshot_changes``) says whether ``memories``
  or ``consent`` changed; only a changed table's file is rebuilt. A withdrawal
  arrives as a consent row, so it moves the snapshot and is served on the next
  lookup. A gap in the log (expired snapshots) counts as a change. (A local
  catalog file is attached by one process at a time, and within a process by
  one ``Warehouse``: every commit it can miss goes through the store's own.)
* A file is never modified in place: a rebuild writes a fresh file from the
  lake's current rows and renames it over the old one (``os.replace``), so an
  erased subject leaves no old bytes behind, and readers in other processes
  keep reading the old file (their mapping) until they notice the new snapshot.
* Time travel (a ``Warehouse`` pinned to a snapshot) reads the lake.

Writers refresh the replica eagerly (``refresh_serving``: the nightly job after
its commits, ``forget`` from scratch) so the first lookup after a run does not
pay for a rebuild; a store also refreshes lazily when it sees a newer snapshot.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
import mmap
import os
import re
import threading
import time
import uuid
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa

from ctxledger.schemas.evidence import EMBEDDING_DIM
from ctxledger.warehouse.catalog import LAKE_ALIAS, Warehouse

#: The memory columns a lookup returns, in ``ServedMemory`` order (the lake
#: path and the serving replica both read these).
MEMORY_COLUMNS = (
    "memory_id",
    "text",
    "kind",
    "source",
    "purpose",
    "slot",
    "value",
    "confidence",
    "provenance",
    "basis",
    "valid_from",
    "valid_to",
    "recorded_at",
    "expires_at",
    "conflict_with",
)

SERVING_DIR = "serving"
REPLICA_TABLES = ("memories", "consent")
#: Bumped when the replica's layout changes: an older file is rebuilt.
#: 4: memory vectors (``MemoryRecord.embedding``) after the offsets.
FORMAT = 4
MAGIC = b"CTXLEDGER-REPLICA\n"
#: The header (magic + JSON) is padded to this many bytes; arrays follow.
HEADER_BYTES = 4096
#: Rows per record batch while a file is written.
BUILD_BATCH = 262_144
_PROBE_ATTR = "_snapshot_probe"

#: Change kinds that leave a table's rows as they were (files rewritten only).
_CONTENT_PRESERVING = {"compacted_table", "flushed_inlined"}
_CHANGE = re.compile(r'([a-z_]+):(\d+|"(?:[^"]|"")*"(?:\."(?:[^"]|"")*")?)')

_TIMES = {"valid_from", "valid_to", "recorded_at", "expires_at"}
#: Payload arrays: the row's ids first (a key collision is checked on them),
#: timestamps as epoch microseconds.
_MEMORY_PAYLOAD = ("tenant_id", "subject_id", *MEMORY_COLUMNS)
_CONSENT_PAYLOAD = (
    "tenant_id",
    "subject_id",
    "event",
    "purpose",
    "basis",
    "effective_at",
    "expires_at",
)
_KEY_COLUMNS = {
    "memories": ("tenant_id", "subject_id", "purpose"),
    "consent": ("tenant_id", "subject_id"),
}
_PAYLOAD = {"memories": _MEMORY_PAYLOAD, "consent": _CONSENT_PAYLOAD}
_CONSENT_TIMES = {"effective_at", "expires_at"}
#: Rows a replica leaves out: a grant of unknown source is no basis (the
#: ``memories_served`` rule), so the replica never holds one.
_EXCLUDED = {
    "memories": "",
    "consent": " AND NOT (event = 'grant' AND coalesce(source, '') = 'unknown')",
}


def file_signature(paths: Iterable[Path]) -> tuple:
    """Identity, size, mtime and ctime of each file (None where it is missing):
    an unchanged signature of a local catalog and its WAL means no new commit,
    for the price of a ``stat`` per file."""
    out = []
    for path in paths:
        try:
            st = path.stat()
        except FileNotFoundError:
            out.append(None)
            continue
        out.append((st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns))
    return tuple(out)


def replica_key(*parts: str) -> int:
    """The replica's lookup key of ``parts`` (tenant, subject[, purpose]): the
    low 64 bits of md5 of the parts joined by ``/``, as DuckDB's
    ``md5_number_lower`` gives them, shifted to fit a signed BIGINT. A
    collision only costs a few extra rows: lookups compare the ids too."""
    digest = hashlib.md5("/".join(parts).encode()).digest()
    return int.from_bytes(digest[8:], "little") >> 1


def _key_sql(columns: Sequence[str]) -> str:
    joined = " || '/' || ".join(columns)
    return f"(md5_number_lower({joined}) >> 1)::BIGINT"


def _payload_sql(columns: Sequence[str], times: set[str]) -> str:
    items = [f"epoch_us({c})" if c in times else c for c in columns]
    return f"json_array({', '.join(items)})::VARCHAR"


_KEY_PROBE = ("tenant", "subject", "purpose")


# -- building replica files --------------------------------------------------------


def serving_dir(root: str | Path) -> Path:
    return Path(root) / SERVING_DIR


def replica_path(root: str | Path, table: str) -> Path:
    return serving_dir(root) / f"{table}.bin"


def _meta_alias() -> str:
    return f"__ducklake_metadata_{LAKE_ALIAS}"


def lake_snapshot(wh: Warehouse) -> int:
    """The lake's current snapshot id, read from the catalog's own table.

    It runs on a cursor of the warehouse's connection whose default database is
    the in-memory one: a statement bound while ``lake`` is the default database
    opens a DuckLake transaction (catalog reads, ~5 ms), one that names only the
    metadata database does not (~0.3 ms; ``lake.current_snapshot()`` costs as
    much as the former).
    """
    return int(
        _metadata_cursor(wh)
        .execute(f"SELECT max(snapshot_id) FROM {_meta_alias()}.ducklake_snapshot")
        .fetchone()[0]
    )


def _metadata_cursor(wh: Warehouse) -> duckdb.DuckDBPyConnection:
    """A cursor of ``wh``'s connection for catalog-metadata reads (see
    ``lake_snapshot``), cached on the warehouse."""
    con = wh.connection()
    probe = getattr(wh, _PROBE_ATTR, None)
    if probe is None or probe[0] is not con:
        cursor = con.cursor()
        cursor.execute("USE memory")
        probe = (con, cursor)
        setattr(wh, _PROBE_ATTR, probe)
    return probe[1]


def changed_tables(
    wh: Warehouse, since: int, until: int, tables: Sequence[str] = REPLICA_TABLES
) -> set[str]:
    """Which of ``tables`` have rows in snapshot ``until`` that differ from
    snapshot ``since``, from DuckLake's change log. Conservative: a gap in the
    log (expired snapshots), an unreadable entry or ``since > until`` counts as
    a change of every table."""
    if since == until:
        return set()
    if since > until:
        return set(tables)
    con = _metadata_cursor(wh)
    meta = _meta_alias()
    logged = con.execute(
        f"SELECT snapshot_id, changes_made FROM {meta}.ducklake_snapshot_changes "
        "WHERE snapshot_id > ? AND snapshot_id <= ?",
        [since, until],
    ).fetchall()
    present = con.execute(
        f"SELECT count(*) FROM {meta}.ducklake_snapshot "
        "WHERE snapshot_id > ? AND snapshot_id <= ?",
        [since, until],
    ).fetchone()[0]
    if present != until - since or len(logged) != until - since:
        return set(tables)
    ids: dict[str, str] = {}
    for table_id, name in con.execute(
        f"SELECT table_id, table_name FROM {meta}.ducklake_table"
    ).fetchall():
        if name in tables:
            ids[str(table_id)] = name
    changed: set[str] = set()
    for _, changes in logged:
        if not changes:
            continue
        found = _CHANGE.findall(changes)
        if len(",".join(f"{k}:{v}" for k, v in found)) != len(changes):
            return set(tables)  # an entry this parser does not understand
        for kind, target in found:
            if kind in _CONTENT_PRESERVING:
                continue
            if target in ids:
                changed.add(ids[target])
            for name in tables:
                if target.endswith(f'."{name}"') or target == f'"{name}"':
                    changed.add(name)
    return changed


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _offsets(column: pa.Array) -> tuple[np.ndarray, memoryview]:
    """Offsets (int64, starting at 0) and bytes of a string array's values."""
    validity, offsets, data = column.buffers()
    if validity is not None and column.null_count:
        raise ValueError("a replica payload is NULL")
    wide = pa.types.is_large_string(column.type)
    raw = np.frombuffer(
        offsets, dtype="<i8" if wide else "<i4", count=column.offset + len(column) + 1
    )[column.offset :].astype("<i8")
    start, end = int(raw[0]), int(raw[-1])
    return raw - start, memoryview(data)[start:end]


#: Bytes of one stored memory vector in the replica (float16: half of float32;
#: a cosine moves by < 1e-3, and the lake path rounds the same way).
VECTOR_BYTES = EMBEDDING_DIM * 2


def _vector_plan(
    wh: Warehouse, table: str, snapshot: int, key: str
) -> tuple[str | None, int, str]:
    """``(model, rows with a vector of it, extra SELECT column)`` for a replica
    build: the vectors of the lake's most used embedding model (rows of
    another model, or none, are embedded by the reader)."""
    if table != "memories":
        return None, 0, ""
    source = f"{LAKE_ALIAS}.{table} AT (VERSION => {snapshot})"
    has = (
        wh.connection()
        .execute(
            f"SELECT count(*) FROM (DESCRIBE SELECT * FROM {source}) "
            "WHERE column_name = 'embedding'"
        )
        .fetchone()[0]
    )
    if not has:
        return None, 0, ""
    found = (
        wh.connection()
        .execute(
            f"SELECT embed_model, count(*) AS n FROM {source} "
            f"WHERE {key} IS NOT NULL AND embedding IS NOT NULL{_EXCLUDED[table]} "
            "GROUP BY ALL ORDER BY n DESC, embed_model LIMIT 1"
        )
        .fetchone()
    )
    if found is None or found[0] is None:
        return None, 0, ""
    model = str(found[0])
    quoted = model.replace("'", "''")
    return (
        model,
        int(found[1]),
        f", CASE WHEN embed_model = '{quoted}' THEN embedding END AS vector",
    )


def _vector_block(column: pa.Array) -> tuple[np.ndarray, np.ndarray] | None:
    """``(mask of rows with a vector, their vectors as float16)`` of a batch's
    vector column; None when no row has one."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    mask = column.is_valid().to_numpy(zero_copy_only=False)
    if not mask.any():
        return None
    values = column.filter(pa.array(mask)).flatten().to_numpy(zero_copy_only=False)
    vectors = np.asarray(values, dtype="<f2").reshape(-1, EMBEDDING_DIM)
    if len(vectors) != int(mask.sum()):
        raise ValueError("a stored memory vector has the wrong width")
    return mask, vectors


def build_replica(wh: Warehouse, table: str, snapshot: int | None = None) -> Path:
    """Write ``table`` at ``snapshot`` (default: current) into a fresh replica
    file and rename it over the old one.

    DuckDB computes keys and payloads and sorts by key on the warehouse's own
    connection (where the lake is attached); the rows stream into the file in
    record batches. The new file holds only the snapshot's rows, so nothing
    erased survives in it.
    """
    if table not in REPLICA_TABLES:
        raise ValueError(f"not a replica table: {table}")
    snapshot = lake_snapshot(wh) if snapshot is None else int(snapshot)
    folder = serving_dir(wh.root)
    folder.mkdir(parents=True, exist_ok=True)
    target = replica_path(wh.root, table)
    tmp = folder / f".{table}.{uuid.uuid4().hex}.building"
    times = _TIMES if table == "memories" else _CONSENT_TIMES
    key = _key_sql(_KEY_COLUMNS[table])
    con = wh.connection()
    probe = con.execute(
        f"SELECT {_key_sql(['?', '?', '?'])}", list(_KEY_PROBE)
    ).fetchone()[0]
    if probe != replica_key(*_KEY_PROBE):
        raise RuntimeError("DuckDB's md5_number_lower disagrees with replica_key")
    rows = con.execute(
        f"SELECT count(*) FROM {LAKE_ALIAS}.{table} AT (VERSION => {snapshot}) "
        f"WHERE {key} IS NOT NULL{_EXCLUDED[table]}"
    ).fetchone()[0]
    model, n_vectors, vector_sql = _vector_plan(wh, table, snapshot, key)
    keys = np.empty(rows, dtype="<i8")
    offsets = np.zeros(rows + 1, dtype="<i8")
    slots = np.full(rows if model else 0, -1, dtype="<i4")
    keys_at = HEADER_BYTES
    offsets_at = keys_at + keys.nbytes
    slots_at = offsets_at + offsets.nbytes
    vectors_at = slots_at + -(-slots.nbytes // 8) * 8
    payload_at = vectors_at + n_vectors * VECTOR_BYTES
    reader = con.execute(
        f"SELECT {key} AS k, {_payload_sql(_PAYLOAD[table], times)} AS payload"
        f"{vector_sql} FROM {LAKE_ALIAS}.{table} AT (VERSION => {snapshot}) "
        f"WHERE {key} IS NOT NULL{_EXCLUDED[table]} ORDER BY k"
    ).fetch_record_batch(BUILD_BATCH)
    try:
        with open(tmp, "wb") as out:
            done = written = stored = 0
            for batch in reader:
                n = batch.num_rows
                if done + n > rows:
                    raise RuntimeError(f"{table} changed while its replica was built")
                keys[done : done + n] = batch.column(0).to_numpy()
                relative, data = _offsets(batch.column(1))
                out.seek(payload_at + written)
                out.write(data)
                offsets[done + 1 : done + n + 1] = written + relative[1:]
                if model:
                    block = _vector_block(batch.column(2))
                    if block is not None:
                        mask, vectors = block
                        if stored + len(vectors) > n_vectors:
                            raise RuntimeError(f"{table} vectors changed in a build")
                        slots[done + np.flatnonzero(mask)] = np.arange(
                            stored, stored + len(vectors), dtype="<i4"
                        )
                        out.seek(vectors_at + stored * VECTOR_BYTES)
                        out.write(vectors.tobytes())
                        stored += len(vectors)
                done, written = done + n, written + len(data)
            if done != rows or (rows and bool((np.diff(keys) < 0).any())):
                raise RuntimeError(f"{table} replica rows are missing or unsorted")
            if stored != n_vectors:
                raise RuntimeError(f"{table} replica vectors are missing")
            out.seek(keys_at)
            out.write(keys.tobytes())
            out.write(offsets.tobytes())
            out.write(slots.tobytes())
            header = {
                "format": FORMAT,
                "table": table,
                "snapshot_id": snapshot,
                "rows": rows,
                "keys_at": keys_at,
                "offsets_at": offsets_at,
                "payload_at": payload_at,
                "payload_bytes": written,
                "slots_at": slots_at,
                "vectors_at": vectors_at,
                "vectors": n_vectors,
                "embed_model": model,
                "key_probe": probe,
                "built_at": datetime.now(UTC).isoformat(),
            }
            blob = MAGIC + json.dumps(header).encode()
            if len(blob) > HEADER_BYTES:
                raise RuntimeError("replica header too long")
            out.seek(0)
            out.write(blob.ljust(HEADER_BYTES, b"\0"))
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _fsync(folder)
    return target


class Replica:
    """One replica file, memory-mapped read-only: header, keys, offsets."""

    def __init__(self, path: Path):
        with open(path, "rb") as f:
            self.identity = _identity_of(os.fstat(f.fileno()))
            head = f.read(HEADER_BYTES)
            if not head.startswith(MAGIC):
                raise ValueError(f"{path} is not a replica file")
            meta = json.loads(head[len(MAGIC) :].rstrip(b"\0"))
            size = os.fstat(f.fileno()).st_size
            if meta.get("format") != FORMAT or size != (
                meta["payload_at"] + meta["payload_bytes"]
            ):
                raise ValueError(f"{path}: other format or truncated")
            self._map = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        self.meta = meta
        self.table: str = meta["table"]
        self.snapshot_id = int(meta["snapshot_id"])
        rows = int(meta["rows"])
        self.keys = np.frombuffer(self._map, "<i8", rows, meta["keys_at"])
        self.offsets = np.frombuffer(self._map, "<i8", rows + 1, meta["offsets_at"])
        self._payload_at = int(meta["payload_at"])
        #: The model of the stored memory vectors (None: the file holds none).
        self.embed_model: str | None = meta.get("embed_model")
        n_vectors = int(meta.get("vectors") or 0)
        self.slots = np.frombuffer(
            self._map, "<i4", rows if self.embed_model else 0, meta["slots_at"]
        )
        self.vectors = np.frombuffer(
            self._map, "<f2", n_vectors * EMBEDDING_DIM, meta["vectors_at"]
        ).reshape(n_vectors, EMBEDDING_DIM)

    def span(self, key: int) -> tuple[int, int]:
        """The rows ``[lo, hi)`` stored under ``key``."""
        return (
            int(self.keys.searchsorted(key, "left")),
            int(self.keys.searchsorted(key, "right")),
        )

    def vector(self, row: int) -> np.ndarray | None:
        """The stored vector of ``row`` (float32), None when it has none."""
        if not len(self.slots):
            return None
        slot = int(self.slots[row])
        return None if slot < 0 else self.vectors[slot].astype(np.float32)

    def payloads(self, key: int) -> list[bytes]:
        """The payloads stored under ``key`` (adjacent rows)."""
        lo = int(self.keys.searchsorted(key, "left"))
        hi = int(self.keys.searchsorted(key, "right"))
        if lo == hi:
            return []
        bounds = self.offsets[lo : hi + 1].tolist()
        base = self._payload_at
        blob = self._map[base + bounds[0] : base + bounds[-1]]
        first = bounds[0]
        return [blob[a - first : b - first] for a, b in itertools.pairwise(bounds)]

    def __iter__(self) -> Iterator[bytes]:
        """Every payload, in key order (inspection and tests)."""
        bounds = self.offsets.tolist()
        base = self._payload_at
        for a, b in itertools.pairwise(bounds):
            yield self._map[base + a : base + b]

    def close(self) -> None:
        """Unmap the file (only when no other reader uses this object)."""
        self.keys = self.offsets = np.empty(0, dtype="<i8")
        self.slots = np.empty(0, dtype="<i4")
        self.vectors = np.empty((0, EMBEDDING_DIM), dtype="<f2")
        # The arrays above were views of the map; with them gone it can close.
        with contextlib.suppress(BufferError):
            self._map.close()

    def __enter__(self) -> Replica:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def read_replica(path: str | Path) -> Replica:
    """Open a replica file (``serving/<table>.bin``) for reading."""
    return Replica(Path(path))


#: A build file older than this is a crashed build's leftover, not one running.
STALE_BUILD_S = 3600


def remove_partial_builds(root: str | Path, older_than_s: float = 0) -> int:
    """Delete leftovers of interrupted builds (they can hold rows purged or
    erased since); ``older_than_s`` spares builds that may still be running."""
    folder = serving_dir(root)
    if not folder.is_dir():
        return 0
    removed = 0
    cutoff = time.time() - older_than_s
    for path in folder.glob(".*.building*"):
        with contextlib.suppress(FileNotFoundError):
            if path.stat().st_mtime <= cutoff:
                path.unlink()
                removed += 1
    return removed


# -- the store ---------------------------------------------------------------------


@dataclass
class RefreshResult:
    """What one refresh did."""

    snapshot_id: int | None = None
    rebuilt: list[str] = field(default_factory=list)
    reattached: list[str] = field(default_factory=list)


def _identity_of(st: os.stat_result) -> tuple[int, int, int]:
    return (st.st_ino, st.st_size, st.st_mtime_ns)


def _identity(path: Path) -> tuple[int, int, int] | None:
    try:
        return _identity_of(path.stat())
    except FileNotFoundError:
        return None


class ReplicaSet:
    """The replica files of one warehouse, memory-mapped and kept at the lake's
    snapshot: the write side (``refresh_serving`` after a commit) and the base
    of the read side's ``serving.memories.MemoryStore``.

    ``ensure_current`` is the freshness check, cheap when nothing moved: a
    ``stat`` of the catalog (has anything been committed?), else the catalog's
    snapshot id and its change log; ``refresh`` re-attaches a file another
    writer renewed and rebuilds a stale one. Refreshes take a lock.
    """

    def __init__(
        self,
        wh: Warehouse,
        *,
        owns: bool = False,
    ):
        self.wh = wh
        self._owns = owns
        self._replicas: dict[str, Replica] = {}
        self._checked: int | None = None
        self._signature: tuple | None = None
        self._failed: int | None = None
        #: Why the replica could not be built at the last failed snapshot.
        self.failure: str | None = None
        catalog = Path(wh.catalog)
        self._watch = (
            (catalog, Path(f"{catalog}.wal"))
            if not wh.catalog.startswith(("postgres:", "postgresql:"))
            and catalog.is_file()
            else None
        )
        self._lock = threading.RLock()
        self.refreshes = 0
        self.rebuilds = 0

    def close(self) -> None:
        """Unmap the replica files (and close the warehouse, if this store owns
        it)."""
        with self._lock:
            for table in list(self._replicas):
                self._detach(table)
            self._checked = self._signature = None
            if self._owns:
                self.wh.close()

    # -- freshness ----------------------------------------------------------------
    @property
    def snapshot_id(self) -> int | None:
        """The lake snapshot the replica was last checked against."""
        return self._checked

    def _catalog_signature(self) -> tuple | None:
        """Identity, size and mtime of the local catalog file and its WAL: a
        DuckLake commit writes to one of them, so an unchanged signature means
        no new snapshot. None: not a local file (ask the catalog)."""
        if self._watch is None:
            return None
        return file_signature(self._watch)

    def ensure_current(self) -> bool:
        """Make the attached replica match the lake's current snapshot (cheap
        when nothing moved). False: no replica can serve this snapshot (its
        tables are missing, or the build failed on a read-only or full disk;
        retried at the next snapshot), so read the lake."""
        signature = self._catalog_signature()
        if (
            signature is not None
            and signature == self._signature
            and self._checked is not None
        ):
            return True
        current = lake_snapshot(self.wh)
        if current == self._checked:
            self._signature = signature
            return True
        if current == self._failed:
            return False
        try:
            if not set(REPLICA_TABLES) <= self.wh.existing_tables():
                raise FileNotFoundError("no memories/consent tables in the lake")
            self.refresh(current)
        except (OSError, duckdb.IOException, duckdb.PermissionException) as exc:
            self._failed, self.failure = current, f"{type(exc).__name__}: {exc}"
            return False
        self._signature = signature
        return True

    def refresh(
        self, current: int | None = None, *, rebuild: bool = False
    ) -> RefreshResult:
        """Bring each replica file up to the lake's snapshot ``current``:
        re-attach a file another writer renewed, rebuild a stale one (all of
        them with ``rebuild``)."""
        with self._lock:
            current = lake_snapshot(self.wh) if current is None else current
            result = RefreshResult(snapshot_id=current)
            remove_partial_builds(self.wh.root, 0 if rebuild else STALE_BUILD_S)
            for table in REPLICA_TABLES:
                state = self._replicas.get(table)
                path = replica_path(self.wh.root, table)
                if not rebuild:
                    if state is None or state.identity != _identity(path):
                        had = state is not None
                        state = self._attach(table)
                        if had and state is not None:
                            result.reattached.append(table)
                    if state is not None and table not in changed_tables(
                        self.wh, state.snapshot_id, current, (table,)
                    ):
                        continue
                self._detach(table)
                build_replica(self.wh, table, current)
                self.rebuilds += 1
                result.rebuilt.append(table)
                if self._attach(table) is None:
                    raise RuntimeError(f"serving replica {path} unreadable after build")
            self._checked = current
            self.refreshes += 1
            return result

    def _detach(self, table: str) -> None:
        # Not closed: a lookup on another thread may still read it; the map
        # goes when the last reference does (a replaced file's inode with it).
        self._replicas.pop(table, None)

    def _attach(self, table: str) -> Replica | None:
        """Map the replica file of ``table``; None (and nothing mapped) when it
        is missing or not a valid replica of this format and table."""
        self._detach(table)
        path = replica_path(self.wh.root, table)
        try:
            replica = Replica(path)
        except (OSError, ValueError, KeyError):
            return None
        if replica.table != table or replica.meta.get("key_probe") != replica_key(
            *_KEY_PROBE
        ):
            replica.close()
            return None
        self._replicas[table] = replica
        return replica


def refresh_serving(
    root: str | Path,
    *,
    catalog: str | None = None,
    data_path: str | None = None,
    rebuild: bool = False,
    create: bool = True,
) -> RefreshResult | None:
    """Bring the replica of the warehouse at ``root`` up to its current
    snapshot (after a commit that may have changed memories or consent).

    ``rebuild``: write every file from scratch (erasure); ``create=False``:
    only when a replica already exists. None when nothing was done.
    """
    if not create and not any(replica_path(root, t).exists() for t in REPLICA_TABLES):
        remove_partial_builds(root)
        return None
    with Warehouse.open(root, catalog=catalog, data_path=data_path) as wh:
        if not set(REPLICA_TABLES) <= wh.existing_tables():
            return None
        store = ReplicaSet(wh)
        try:
            return store.refresh(rebuild=rebuild)
        finally:
            store.close()
