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

import logging
import random
import time
from collections.abc import Callable
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
