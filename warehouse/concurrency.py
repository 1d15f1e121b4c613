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
"""

from __future__ import annotations

import fcntl
import logging
import os
import random
import secrets
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import TypeVar

import duckdb

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
) -> T:
    """Run ``operation`` (one whole transaction) until it is not a lost race.

    ``operation`` must be safe to run again after an aborted attempt: it opens
    its own transaction and computes what to write from what it reads inside it.
    """
    delays = backoff_delays(attempts, base, cap, rng)
    for attempt in range(attempts):
        try:
            return operation()
        except duckdb.Error as exc:
            if not is_conflict(exc) or attempt == attempts - 1:
                raise
            reason = str(exc).strip().splitlines()[-1][:200]
            log.warning(
                "lost a race with a concurrent writer (attempt %d of %d), retrying: %s",
                attempt + 1,
                attempts,
                reason,
            )
            if on_retry is not None:
                on_retry(attempt + 1, exc)
            sleep(delays[attempt])
    raise AssertionError("unreachable")  # pragma: no cover


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
