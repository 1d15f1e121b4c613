"""Spread keep-alive connections evenly over the worker processes of
``ctxledger serve --workers N``.

Why: a worker answers its connections' packs one after another on one core,
so a closed loop of clients on a worker waits about (its connections) x (one
pack) per request. With one SO_REUSEPORT socket per worker the kernel picks
a worker by a hash of each connection's addresses: 50 connections landed
21 / 29 or 22 / 28 as often as 25 / 25 (binomial), and the clients of the
fuller worker waited 30-75% longer (bench_serve: medians of 98 against 172
ms in one run). With one socket shared by every worker and left to uvicorn,
the worker that wakes first accepts every waiting connection (all 8 of 8
clients on one worker, seen in an earlier session).

So the workers share one listening socket and each accepts for itself
(``BalancedAcceptor``), only while it holds no more connections than the
emptiest worker serving, or fewer than its even share once the connections
waiting in the socket's queue are counted (``may_accept`` over ``counts``,
a few integers in shared memory, and ``waiting_connections``). A worker
holding more pauses (stops watching the socket) and looks again every
``RECHECK_S``: the counts of two workers differ by at most the connections
accepted at the same instant. An accepted socket is handed to the worker's
uvicorn server as if its own listener had accepted it.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import sys
from collections.abc import Callable, Sequence
from typing import Any

#: How often a paused worker looks at the counts again (seconds).
RECHECK_S = 0.002
#: How often a worker publishes its count while nothing else makes it (a
#: connection closing lowers it): seconds.
PUBLISH_S = 0.05
#: A slot's value while its worker does not serve (starting, restarting).
ABSENT = -1

log = logging.getLogger("uvicorn.error")


def may_accept(counts: Sequence[int], slot: int, waiting: int = 0) -> bool:
    """Whether the worker of ``slot`` may accept a connection now: it holds
    no more than any other serving worker (``ABSENT`` slots do not count),
    or fewer than its even share of every connection, those ``waiting`` in
    the socket's queue included (so a burst of new clients is split at once,
    without each worker waiting for the other to catch up first)."""
    mine = counts[slot]
    serving = [c for c in counts if c != ABSENT]
    if all(mine <= c for c in serving):
        return True
    share = -(-(sum(serving) + waiting) // len(serving))  # ceil
    return mine < share


def waiting_connections(sock: socket.socket) -> int:
    """Connections in a listening socket's accept queue (Linux: ``TCP_INFO``
    gives a listener's queue length as ``tcpi_unacked``); 0 where unknown."""
    try:
        info = sock.getsockopt(socket.IPPROTO_TCP, _TCP_INFO, _TCP_INFO_LEN)
    except (OSError, AttributeError):
        return 0
    if len(info) < _UNACKED_AT + 4:
        return 0
    return int.from_bytes(info[_UNACKED_AT : _UNACKED_AT + 4], sys.byteorder)


_TCP_INFO = getattr(socket, "TCP_INFO", -1)
#: ``struct tcp_info``: eight one-byte fields, then rto, ato, snd_mss,
#: rcv_mss (four-byte), then ``tcpi_unacked``.
_UNACKED_AT = 24
_TCP_INFO_LEN = 32


def shared_counts(workers: int, context: Any) -> Any:
    """``workers`` connection counts in shared memory (``ABSENT`` each), for
    processes of the multiprocessing ``context``."""
    return context.RawArray("l", [ABSENT] * workers)


class BalancedAcceptor:
    """Accepts connections from a shared listening socket for one worker.

    ``live()``: the connections the worker serves now (uvicorn's
    ``server_state.connections``); ``serve(conn)``: hand an accepted,
    non-blocking socket to the worker's server (a coroutine). ``close``
    stops accepting and marks the slot ``ABSENT``, so the other workers stop
    waiting for this one. Looks like an ``asyncio.Server`` to uvicorn's
    shutdown (``close``, ``wait_closed``)."""

    def __init__(
        self,
        sock: socket.socket,
        counts: Any,
        slot: int,
        live: Callable[[], int],
        serve: Callable[[socket.socket], Any],
    ):
        self.sock, self.counts, self.slot = sock, counts, slot
        self.live, self.serve = live, serve
        self._loop: asyncio.AbstractEventLoop | None = None
        self._watching = False
        self._timer: asyncio.TimerHandle | None = None
        self._publisher: asyncio.TimerHandle | None = None
        self._pending = 0  # accepted, not yet seen by ``live``
        self._tasks: set[asyncio.Task] = set()
        self.closed = False

    # -- lifecycle ---------------------------------------------------------------
    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self.sock.setblocking(False)
        self._publish()
        self._watch()
        self._publisher = self._loop.call_later(PUBLISH_S, self._tick)

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        self._unwatch()
        for handle in (self._timer, self._publisher):
            if handle is not None:
                handle.cancel()
        self.counts[self.slot] = ABSENT

    async def wait_closed(self) -> None:
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)

    # -- accepting ---------------------------------------------------------------
    def _publish(self) -> None:
        self.counts[self.slot] = self.live() + self._pending

    def _tick(self) -> None:
        self._publish()
        assert self._loop is not None
        self._publisher = self._loop.call_later(PUBLISH_S, self._tick)

    def _watch(self) -> None:
        if not self._watching and not self.closed:
            assert self._loop is not None
            self._loop.add_reader(self.sock.fileno(), self._readable)
            self._watching = True

    def _unwatch(self) -> None:
        if self._watching:
            assert self._loop is not None
            self._loop.remove_reader(self.sock.fileno())
            self._watching = False

    def _readable(self) -> None:
        """A connection waits: take it if this worker may, else pause."""
        self._publish()
        assert self._loop is not None
        while True:
            waiting = waiting_connections(self.sock)
            if not may_accept(self.counts, self.slot, waiting):
                self._pause()
                return
            try:
                conn, _ = self.sock.accept()
            except (BlockingIOError, InterruptedError):
                return  # none left: another worker took it
            except OSError:  # e.g. out of file descriptors: try again shortly
                self._pause()
                return
            conn.setblocking(False)
            self._pending += 1
            self._publish()
            task = self._loop.create_task(self.serve(conn))
            self._tasks.add(task)
            task.add_done_callback(self._served)
            if waiting <= 1:
                return  # the queue is empty (or nearly): the loop calls again

    def _served(self, task: asyncio.Task) -> None:
        self._tasks.discard(task)
        self._pending -= 1
        if not task.cancelled() and (exc := task.exception()) is not None:
            log.warning("an accepted connection could not be served: %r", exc)
        if not self.closed:
            self._publish()

    def _pause(self) -> None:
        self._unwatch()
        if self._timer is None and not self.closed:
            assert self._loop is not None
            self._timer = self._loop.call_later(RECHECK_S, self._recheck)

    def _recheck(self) -> None:
        self._timer = None
        if self.closed:
            return
        self._publish()
        if may_accept(self.counts, self.slot):
            self._watch()
        else:
            self._pause()


__all__ = [
    "ABSENT",
    "BalancedAcceptor",
    "RECHECK_S",
    "may_accept",
    "shared_counts",
    "waiting_connections",
]
