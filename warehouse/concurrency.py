"""Retrying a warehouse transaction that lost a race with a concurrent writer.

Several jobs may commit to one DuckLake catalog at once (a PostgreSQL catalog and a
shared data path; docs/scale_out.md). DuckLake uses optimistic concurrency: every
commit claims the next snapshot id, and the loser of a race checks the winner's
change set. Changes that do not overlap (two appends) are re-committed by DuckLake
itself (``ducklake_max_retry_count`` times, ``ducklake_retry_wait_ms`` apart, the
wait growing by ``ducklake_retry_backoff``); a logical conflict (both created the
same table, both deleted from the same table, one altered a table the other
wrote to) aborts the transaction with a ``TransactionException``.

An aborted transaction wrote nothing, so the safe answer is to run the whole
transaction again: it re-reads the catalog at the new snapshot (the table now
exists, the rows the other writer committed are now seen by the anti-join) and
commits what is still missing. ``retry_on_conflict`` does that with bounded,
jittered exponential backoff; any other error, or a conflict that outlives the
attempts, propagates (a transient error: the runner or scheduler retries the job).

Creating a fresh PostgreSQL catalog races too: two first ATTACHes both create
DuckLake's metadata tables and one fails with "already exists"; the retry finds
the catalog initialised.

A local catalog file is different: DuckDB locks it per process for as long as a
connection has it attached (read-only attaches too), so a second job waits for
the first to let go. Those waits are bounded by time (``lock_wait_s``, default
``CTXLEDGER_LOCK_WAIT_S`` or 120 s), not by attempts: a commit or compaction of
the other job may take a while. When the wait runs out the job stops with one
clear line (``WarehouseBusyError``) instead of DuckDB's raw lock error, and
every attach a job makes (the commit's, and the stages' read-only ones in
``warehouse.evidence_api``) goes through this same path.
"""

from __future__ import annotations

import fcntl
import logging
import os
import random
import re
import secrets
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import TypeVar

import duckdb

from ctxledger.warehouse.errors import WarehouseError

T = TypeVar("T")

log = logging.getLogger("ctxledger.warehouse")

#: Messages of errors that mean "another writer got there first; try again".
CONFLICT_MARKERS = (
    "Transaction conflict",
    "Failed to commit DuckLake transaction",
    "Exceeded the maximum retry count",
    "could not serialize access",
    "deadlock detected",
    # A local DuckDB catalog file is open in one process at a time: another job
    # (a second nightly, a forget) holds it for a moment; the ATTACH is retried.
    "Could not set lock on file",
)
#: A first ATTACH that raced another one creating the catalog's metadata tables.
INIT_MARKERS = ("already exists", "duplicate key value")
#: DuckDB's error when another process has the local catalog file attached.
LOCK_MARKER = "Could not set lock on file"
#: Seconds a job waits for another job to let go of a local catalog file.
DEFAULT_LOCK_WAIT_S = 120.0
#: The one line a job stops with when the wait runs out.
BUSY_MESSAGE = (
    "another job holds the warehouse{where}; retry or use a PostgreSQL catalog "
    "(docs/scale_out.md)"
)


class WarehouseBusyError(WarehouseError):
    """Another process held the local catalog file for longer than the wait."""

    def __init__(self, catalog: str | None = None):
        where = f" ({catalog})" if catalog else ""
        super().__init__(BUSY_MESSAGE.format(where=where))
        self.catalog = catalog


def is_lock_error(exc: BaseException) -> bool:
    """Whether ``exc`` (or the text of an error a runner wrapped) is DuckDB's
    "another process has this catalog file attached"."""
    return LOCK_MARKER in str(exc)


def busy_error(exc: BaseException) -> WarehouseBusyError | None:
    """The one-line error for a lock error ``exc`` (raised here or wrapped by a
    Beam runner, whose message carries the worker's traceback), else None."""
    if isinstance(exc, WarehouseBusyError):
        return exc
    if not is_lock_error(exc):
        return None
    found = re.search(LOCK_MARKER + r' "([^"]+)"', str(exc))
    return WarehouseBusyError(found.group(1) if found else None)


def lock_wait_s() -> float:
    """How long a job waits for a local catalog file another job holds."""
    try:
        return max(0.0, float(os.environ.get("CTXLEDGER_LOCK_WAIT_S", "")))
    except ValueError:
        return DEFAULT_LOCK_WAIT_S


def is_conflict(exc: BaseException) -> bool:
    """Whether ``exc`` is a lost race that running the transaction again fixes."""
    if not isinstance(exc, duckdb.Error):
        return False
    text = str(exc)
    if any(marker in text for marker in CONFLICT_MARKERS):
        return True
    return "Failed to initialize DuckLake" in text and any(
        marker in text for marker in INIT_MARKERS
    )


def backoff_delays(
    attempts: int,
    base: float = 0.05,
    cap: float = 2.0,
    rng: Callable[[], float] = random.random,
) -> list[float]:
    """Waits before retries 1..attempts-1: full jitter over ``base * 2**n``.

    Jitter keeps writers that collided once from colliding again in lockstep.
    """
    return [rng() * min(cap, base * 2**n) for n in range(max(0, attempts - 1))]


def retry_on_conflict(
    operation: Callable[[], T],
    *,
    attempts: int = 10,
    base: float = 0.05,
    cap: float = 5.0,
    sleep: Callable[[float], None] = time.sleep,
    rng: Callable[[], float] = random.random,
    on_retry: Callable[[int, BaseException], None] | None = None,
    lock_wait: float | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> T:
    """Run ``operation`` (one whole transaction) until it is not a lost race.

    ``operation`` must be safe to run again after an aborted attempt: it opens
    its own transaction and computes what to write from what it reads inside it.
    A local catalog file held by another process is waited for up to
    ``lock_wait`` seconds (``lock_wait_s()`` when None), then
    ``WarehouseBusyError``; other lost races get ``attempts`` tries.
    """
    delays = backoff_delays(attempts, base, cap, rng)
    wait = lock_wait_s() if lock_wait is None else lock_wait
    deadline: float | None = None
    attempt = 0  # lost races other than a held lock file
    tries = 0
    while True:
        tries += 1
        try:
            return operation()
        except duckdb.Error as exc:
            if not is_conflict(exc):
                raise
            if is_lock_error(exc):
                now = clock()
                deadline = now + wait if deadline is None else deadline
                if now >= deadline:
                    raise busy_error(exc) from exc
                delay = min(deadline - now, rng() * min(1.0, base * 2 ** min(tries, 8)))
            else:
                if attempt == attempts - 1:
                    raise
                delay = delays[attempt]
                attempt += 1
            reason = str(exc).strip().splitlines()[-1][:200]
            if is_lock_error(exc):
                # One line per wait, not one per try.
                (log.warning if tries == 1 else log.debug)(
                    "another job holds the warehouse; waiting up to %.0f s: %s",
                    wait,
                    reason,
                )
            else:
                log.warning(
                    "lost a race with a concurrent writer (try %d), retrying: %s",
                    tries,
                    reason,
                )
            if on_retry is not None:
                on_retry(tries, exc)
            sleep(delay)


# -- run attempts ------------------------------------------------------------------

#: Lock file a live run attempt holds (``flock``) inside its staging folder.
ATTEMPT_LOCK = ".attempt.lock"


def new_attempt() -> str:
    """A nonce naming one attempt of a run: ``<UTC time>-<random>``.

    The run id stays a hash of what the run processes (its rerun after a crash
    must write exactly the rows the uninterrupted run would have, ``run_id``
    columns included); two attempts of the same run that overlap in time (two
    nightlies started seconds apart) must not share a staging folder, where one
    would delete or commit the other's half-written shards.
    """
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
    return f"{stamp}-{secrets.token_hex(4)}"


@contextmanager
def attempt_lock(folder: str | os.PathLike[str]) -> Iterator[Path]:
    """Create ``folder`` and hold an exclusive lock in it while the block runs.

    The kernel drops the lock when the process dies (``kill -9`` included), so
    ``attempt_alive`` tells a crashed attempt's folder from a running one's at
    once, instead of waiting for a grace period.
    """
    path = Path(folder)
    path.mkdir(parents=True, exist_ok=True)
    fd = os.open(path / ATTEMPT_LOCK, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        yield path
    finally:
        os.close(fd)


def attempt_alive(folder: str | os.PathLike[str]) -> bool | None:
    """Whether a live process holds ``folder``'s attempt lock; None: the folder
    has no lock file (written by an older version, or not a run's folder)."""
    lock = Path(folder) / ATTEMPT_LOCK
    try:
        fd = os.open(lock, os.O_RDWR)
    except FileNotFoundError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False
