"""Crash-safe erasure: plan, write a durable journal, then execute it idempotently.

``erase_subject`` used to find the subject's quarantined raw bytes through the
dead-letter rows it deleted in the same run: a ``kill -9`` after the row
commit left every quarantine file, and a second ``forget`` found none (the
rows that led to them were gone). Now it works in two phases:

1. **Plan** (reads only): the subject's sessions, the landing files that hold
   only the subject's sessions, every byte-for-byte copy of those files landed
   elsewhere (same sha256 under another ``tenant=``/``subject=`` folder: the
   content identity, not only the rows), the dead letters attributable to the
   subject and the names of every quarantined copy of their bytes. All of it
   is written to ``<warehouse>/erasure_journal/<erasure_id>.json`` (owner-only,
   written to a temporary name, fsynced, renamed, folder fsynced) before
   anything is deleted.
2. **Execute** the journal's steps in order, each idempotent and recorded in
   the journal when done: ``rows`` (one snapshot; the counts are saved to the
   journal inside the transaction, before its commit), ``quarantine`` (every
   copy by name, in every run folder), ``staging``, ``history`` (rewrite,
   expire, clean files, compact the catalog, rebuild the replica), ``replica``
   (interrupted replica builds), ``receipt`` (one row in ``erasures``, keyed
   by the erasure id, so a rerun adds none). The journal is deleted last.

A journal left by a crash is finished by the next ``forget`` (any subject),
``nightly`` or ``ctxledger doctor`` (``finish_pending``), before they do
anything else; the receipt exists only once every step is done. An
``flock`` on ``<erasure_id>.lock`` keeps two processes from executing one
journal at once. The journal holds the subject id (it must redo the deletes)
and ids, never message text; it lives only until the erasure completes.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa

from ctxledger.schemas import content_hash
from ctxledger.schemas.arrow import to_table
from ctxledger.schemas.memory import (
    ErasureReceipt,
    MemorySettings,
    TableRows,
    subject_hash,
)
from ctxledger.warehouse.catalog import LAKE_ALIAS, Warehouse
from ctxledger.warehouse.memory_api import (
    _attributed_dead_letters,
    _columns,
    _default_settings,
    _delete_sql,
    _register_erase_sets,
    _remove_quarantine_copies,
    _scrub_file,
    _set_message,
    purge_history,
    subject_sessions,
)

JOURNAL_DIR = "erasure_journal"
FORMAT = 1
#: Steps of an erasure, in the order they run.
STEPS = ("rows", "quarantine", "staging", "history", "replica", "receipt")


# -- the journal -------------------------------------------------------------------


def journal_dir(root: str | Path) -> Path:
    """Where a warehouse keeps its unfinished erasure journals."""
    return Path(root) / JOURNAL_DIR


def pending_journals(root: str | Path) -> list[Path]:
    """Journals of erasures that have not completed (oldest name first)."""
    folder = journal_dir(root)
    if not folder.is_dir():
        return []
    return sorted(folder.glob("era_*.json"))


def _fsync_dir(folder: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def save_journal(path: Path, journal: dict[str, Any]) -> None:
    """Write ``journal`` durably: temporary name, fsync, rename, fsync folder."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.partial")
    data = json.dumps(journal, sort_keys=True, indent=1).encode("utf-8")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)


@contextlib.contextmanager
def _exclusive(path: Path) -> Iterator[bool]:
    """Hold ``<journal>.lock`` while the block runs; False: another process
    is executing this journal now (the kernel drops the lock on kill -9)."""
    fd = os.open(path.with_suffix(".lock"), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        yield True
    finally:
        os.close(fd)


# -- plan --------------------------------------------------------------------------


def _content_copies(
    wh: Warehouse, tenant_id: str, own_files: list[str]
) -> tuple[list[str], list[list[str]]]:
    """sha256 of the subject's own landing files, and ``[tenant, path]`` of
    every other landing file (any tenant or subject folder) with those bytes."""
    if not own_files:
        return [], []
    con = wh.connection()
    con.register("__erase_own", pa.table({"path": pa.array(own_files, pa.string())}))
    try:
        hashes = sorted(
            r[0]
            for r in con.execute(
                "SELECT DISTINCT file_hash FROM landing_files WHERE tenant_id = ? "
                "AND path IN (SELECT path FROM __erase_own)",
                [tenant_id],
            ).fetchall()
        )
        con.register("__erase_hashes", pa.table({"h": pa.array(hashes, pa.string())}))
        try:
            copies = con.execute(
                "SELECT DISTINCT tenant_id, path FROM landing_files "
                "WHERE file_hash IN (SELECT h FROM __erase_hashes) "
                "AND path NOT LIKE 'erased:%' AND NOT (tenant_id = ? AND path IN "
                "(SELECT path FROM __erase_own)) ORDER BY ALL",
                [tenant_id],
            ).fetchall()
        finally:
            con.unregister("__erase_hashes")
    finally:
        con.unregister("__erase_own")
    return hashes, [[t, p] for t, p in copies]


def _sessions_of_files(wh: Warehouse, files: list[list[str]]) -> list[str]:
    """Session ids whose source file is one of ``[tenant, path]``."""
    out: set[str] = set()
    for tenant, path in files:
        out.update(
            r[0]
            for r in wh.query(
                "SELECT session_id FROM sessions WHERE tenant_id = ? "
                "AND source_file = ?",
                [tenant, path],
            ).fetchall()
        )
    return sorted(out)


def _quarantine_refs(wh: Warehouse, files: list[list[str]]) -> list[str]:
    """Quarantine refs of the dead letters of ``[tenant, path]`` files."""
    refs: set[str] = set()
    for tenant, path in files:
        refs.update(
            r[0]
            for r in wh.query(
                "SELECT DISTINCT quarantine_ref FROM dead_letters WHERE tenant_id = ? "
                "AND source_file = ? AND quarantine_ref IS NOT NULL",
                [tenant, path],
            ).fetchall()
        )
    return sorted(refs)


def erasure_id_for(tenant_id: str, subject_id: str, requested_at: datetime) -> str:
    """The id of an erasure (and of its journal and receipt)."""
    hashed = subject_hash(tenant_id, subject_id)
    return content_hash("erase", tenant_id, hashed, requested_at, prefix="era_")


def plan_erasure(
    wh: Warehouse,
    tenant_id: str,
    subject_id: str,
    *,
    settings: MemorySettings | None = None,
    job_version: str = "",
    requested_at: datetime,
) -> tuple[Path, dict[str, Any]]:
    """Find everything of the subject (reads only, on ``wh``) and write the
    durable journal; its path and content."""
    settings = settings or _default_settings()
    erasure_id = erasure_id_for(tenant_id, subject_id, requested_at)
    wh.ensure_tables()
    wh.connection().execute(f"CALL ducklake_flush_inlined_data('{LAKE_ALIAS}')")
    sessions, files = subject_sessions(
        wh, tenant_id, subject_id, settings.subject_metadata_key
    )
    own_files = sorted(f for f, whole in files.items() if whole)
    hashes, copies = _content_copies(wh, tenant_id, own_files)
    copy_sessions = _sessions_of_files(wh, copies)
    attributed = _attributed_dead_letters(
        wh, tenant_id, subject_id, sessions, settings.subject_metadata_key
    )
    scrubbed = [[tenant_id, f] for f in own_files] + copies
    quarantine = sorted(
        set(_quarantine_refs(wh, scrubbed)) | {r for _, r in attributed if r}
    )
    journal = {
        "format": FORMAT,
        "erasure_id": erasure_id,
        "tenant_id": tenant_id,
        "subject_id": subject_id,
        "subject_hash": subject_hash(tenant_id, subject_id),
        "requested_at": requested_at.isoformat(),
        "job_version": job_version,
        "sessions": sorted(set(sessions) | set(copy_sessions)),
        "subject_sessions": len(sessions),
        "own_files": len(own_files),
        "scrub_files": scrubbed,
        "file_hashes": hashes,
        "dead_letters": sorted(d for d, _ in attributed),
        "quarantine": quarantine,
        "done": [],
        "counts": {},
        "quarantine_files_deleted": 0,
        "snapshots_expired": [],
        "files_deleted": 0,
        "catalog_compacted": False,
    }
    path = journal_dir(wh.root) / f"{erasure_id}.json"
    os.makedirs(path.parent, mode=0o700, exist_ok=True)
    os.chmod(path.parent, 0o700)
    save_journal(path, journal)
    return path, journal


# -- execute -----------------------------------------------------------------------


def _erase_rows(wh: Warehouse, path: Path, journal: dict[str, Any]) -> None:
    """Delete the journal's rows in one snapshot (idempotent: a rerun finds
    none); the counts reach the journal before the commit."""
    tenant_id, subject_id = journal["tenant_id"], journal["subject_id"]
    counts: dict[str, int] = {}
    wh.ensure_tables()
    con = wh.connection()
    con.execute(f"CALL ducklake_flush_inlined_data('{LAKE_ALIAS}')")
    columns = _columns(wh)
    _register_erase_sets(wh, list(journal["sessions"]))
    try:
        with wh.transaction():
            for table in sorted(columns):
                found = _delete_sql(table, columns[table], tenant_id, subject_id)
                if found is None:
                    continue
                sql, params = found
                deleted = int(con.execute(sql, params).fetchone()[0] or 0)
                if deleted:
                    counts[table] = counts.get(table, 0) + deleted
            if "artifacts" in columns:
                deleted = con.execute(
                    "DELETE FROM artifacts WHERE (tenant_id || chr(0) || "
                    "artifact_id) IN (SELECT artifact_key FROM __erase_artifacts)"
                ).fetchone()[0]
                if deleted:
                    counts["artifacts"] = int(deleted)
            for tenant, file in journal["scrub_files"]:
                _scrub_file(wh, tenant, file, counts)
            if journal["dead_letters"]:
                ids = pa.array(journal["dead_letters"], pa.string())
                con.register("__erase_dead", pa.table({"id": ids}))
                try:
                    dropped = con.execute(
                        "DELETE FROM dead_letters WHERE dead_letter_id IN "
                        "(SELECT id FROM __erase_dead)"
                    ).fetchone()[0]
                finally:
                    con.unregister("__erase_dead")
                if dropped:
                    counts["dead_letters"] = counts.get("dead_letters", 0) + int(
                        dropped
                    )
            erasure_id = journal["erasure_id"]
            _set_message(
                wh,
                f"erase {erasure_id}",
                {"kind": "erasure", "erasure_id": erasure_id},
            )
            # A rerun after a crash past this commit counts 0: keep the larger.
            before = journal["counts"]
            journal["counts"] = {
                t: max(before.get(t, 0), counts.get(t, 0))
                for t in sorted(set(before) | set(counts))
            }
            save_journal(path, journal)
    finally:
        for name in ("__erase_sessions", "__erase_messages", "__erase_artifacts"):
            con.unregister(name)


def _receipt(journal: dict[str, Any]) -> ErasureReceipt:
    counts = journal["counts"]
    copies = len(journal["scrub_files"]) - journal["own_files"]
    return ErasureReceipt(
        erasure_id=journal["erasure_id"],
        tenant_id=journal["tenant_id"],
        subject_hash=journal["subject_hash"],
        reason="request",
        requested_at=datetime.fromisoformat(journal["requested_at"]),
        completed_at=datetime.now(UTC),
        rows=[TableRows(table=t, rows=n) for t, n in sorted(counts.items()) if n],
        rows_total=sum(n for t, n in counts.items() if "scrubbed" not in t),
        sessions=journal["subject_sessions"],
        snapshots_expired=journal["snapshots_expired"],
        files_deleted=journal["files_deleted"],
        quarantine_files_deleted=journal["quarantine_files_deleted"],
        catalog_compacted=journal["catalog_compacted"],
        history_purged=True,
        pseudonym_mappings=0,
        note=(
            "pseudonyms are keyed HMACs; no mapping table exists. "
            f"{journal['own_files']} landing file(s) held only this subject's "
            "sessions"
            + (
                f" ({copies} byte-for-byte copies elsewhere erased too)"
                if copies
                else ""
            )
            + ": delete them upstream too."
        ),
        job_version=journal["job_version"],
    )


def _store_receipt(root: Path, receipt: ErasureReceipt, catalog, data_path) -> None:
    """Insert the receipt (keyed by the erasure id: a rerun adds nothing)."""
    with Warehouse.open(root, catalog=catalog, data_path=data_path) as wh:
        con = wh.connection()
        with wh.transaction():
            con.register("__receipt", to_table(ErasureReceipt, [receipt.row()]))
            try:
                wh.insert_new("erasures", "SELECT * FROM __receipt")
            finally:
                con.unregister("__receipt")
            _set_message(
                wh, f"erasure receipt {receipt.erasure_id}", {"kind": "erasure"}
            )


def _run_steps(
    root: Path,
    path: Path,
    journal: dict[str, Any],
    catalog,
    data_path,
    wh: Warehouse | None = None,
) -> ErasureReceipt:
    """Every step the journal has not done yet, in order (the caller holds
    the journal's lock); the journal goes last. ``wh``: an open handle to run
    the row step on (it is closed before the history purge)."""
    from ctxledger.warehouse.memory_serving import remove_partial_builds

    done: list[str] = journal["done"]

    def finished(step: str) -> None:
        done.append(step)
        save_journal(path, journal)

    if "rows" not in done:
        if wh is None:
            with Warehouse.open(root, catalog=catalog, data_path=data_path) as own:
                _erase_rows(own, path, journal)
        else:
            _erase_rows(wh, path, journal)
        finished("rows")
    if wh is not None:
        wh.close()
    if "quarantine" not in done:
        journal["quarantine_files_deleted"] += _remove_quarantine_copies(
            root, journal["quarantine"]
        )
        finished("quarantine")
    if "staging" not in done:
        # Shards of runs that never committed (or are running: forget must
        # run with no writer) hold the subject's rows in plain Parquet.
        shutil.rmtree(root / "staging", ignore_errors=True)
        finished("staging")
    if "history" not in done:
        history = purge_history(root, catalog=catalog, data_path=data_path)
        journal["snapshots_expired"] = sorted(
            set(journal["snapshots_expired"]) | set(history.snapshots_expired)
        )
        journal["files_deleted"] += history.files_deleted
        journal["catalog_compacted"] = history.catalog_compacted
        finished("history")
    if "replica" not in done:
        # purge_history rebuilt the lookup replica; crashed builds go too.
        remove_partial_builds(root)
        finished("replica")
    receipt = _receipt(journal)
    if "receipt" not in done:
        _store_receipt(root, receipt, catalog, data_path)
        finished("receipt")
    path.unlink()
    _fsync_dir(path.parent)
    return receipt


def execute_erasure(
    root: str | Path,
    path: Path,
    *,
    catalog: str | None = None,
    data_path: str | None = None,
) -> ErasureReceipt | None:
    """Run the journal at ``path`` to completion; its receipt (None: another
    process is executing it, or it completed meanwhile)."""
    root = Path(root)
    with _exclusive(path) as mine:
        if not mine:
            return None
        try:
            journal = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        receipt = _run_steps(root, path, journal, catalog, data_path)
    path.with_suffix(".lock").unlink(missing_ok=True)
    return receipt


def finish_pending(
    root: str | Path,
    *,
    catalog: str | None = None,
    data_path: str | None = None,
) -> list[ErasureReceipt]:
    """Complete every erasure a crash left unfinished; their receipts."""
    for partial in journal_dir(root).glob(".era_*.partial"):  # a save cut short
        partial.unlink(missing_ok=True)
    receipts = []
    for path in pending_journals(root):
        receipt = execute_erasure(root, path, catalog=catalog, data_path=data_path)
        if receipt is not None:
            receipts.append(receipt)
    return receipts


def erase_subject(
    root: str | Path,
    tenant_id: str,
    subject_id: str,
    *,
    catalog: str | None = None,
    data_path: str | None = None,
    settings: MemorySettings | None = None,
    job_version: str = "",
    now: datetime | None = None,
) -> ErasureReceipt:
    """Erase one subject everywhere in the warehouse, history included.

    Deleted, in one snapshot: rows of every table with ``tenant_id`` and
    ``subject_id`` columns (memories, rejections, consent events, ...), rows of
    every table with a ``session_id`` of the subject's sessions (sessions,
    messages, tool observations, extraction counts, ledgers), memories drawn
    from those sessions, rows with a ``message_id`` of those messages, the
    subject's artifacts no other session uses and evidence built from them
    (``doc_id`` = artifact id). Paths of landing files that hold only the
    subject's sessions are replaced by ``erased:<sha256>`` in ``landing_files``
    and ``dead_letters`` (the hash stays, so the next nightly does not ingest
    the file again), and their quarantined raw bytes are deleted. Landing files
    with the same bytes under another tenant or subject folder (copies) are
    erased the same way, their sessions with them. Dead letters attributable to
    the subject (a subject folder on their path, or quarantined bytes that name
    the subject or continue one of their sessions) are deleted, and every
    quarantined copy of their bytes, a backfill's or a rerun's included. Then
    the ``staging/`` folder, ``purge_history`` and a receipt in ``erasures``.
    Pseudonyms are keyed HMACs computed on the fly: no mapping table exists, so
    there is none to delete (``pseudonym_mappings`` = 0).

    Crash-safe: unfinished journals are finished first, then this erasure is
    planned into its own journal and executed (module docstring).
    """
    root = Path(root)
    finish_pending(root, catalog=catalog, data_path=data_path)
    requested_at = now or datetime.now(UTC)
    erasure_id = erasure_id_for(tenant_id, subject_id, requested_at)
    path = journal_dir(root) / f"{erasure_id}.json"
    wh = Warehouse.open(root, catalog=catalog, data_path=data_path)  # exists?
    try:
        os.makedirs(path.parent, mode=0o700, exist_ok=True)
        with _exclusive(path) as mine:
            if not mine:
                raise RuntimeError(f"erasure {erasure_id} is running elsewhere")
            path, journal = plan_erasure(
                wh,
                tenant_id,
                subject_id,
                settings=settings,
                job_version=job_version,
                requested_at=requested_at,
            )
            receipt = _run_steps(root, path, journal, catalog, data_path, wh=wh)
    finally:
        wh.close()
    path.with_suffix(".lock").unlink(missing_ok=True)
    return receipt
