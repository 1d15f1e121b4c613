"""Run blocking calls on the event loop one per loop turn, first come first
served, so every waiting request gets its turn in the order it arrived.

Why: a pack is CPU-bound Python (~3-4 ms) that ``serving.http._FastPack``
runs on the event loop's own thread. Run straight from each request's task,
the packs of all the requests the loop read in one poll run back to back,
and the loop reads nothing new, and runs nothing else, until the last is
done. Measured (bench_serve's closed loop, 25 clients on one worker): 23
connections had a median of 94 ms and two had 176-185 ms, request after
request (the same two kept missing a batch), and the p99 was twice the p50.
Taking one call per turn puts a poll between any two calls, so a request
that arrives during a call queues behind the ones already waiting: then
every connection had a median of 101-103 ms.
"""

from __future__ import annotations

import asyncio
import weakref
from collections import deque
from collections.abc import Callable
from typing import Any


class FairQueue:
    """Blocking calls of one event loop, run in arrival order, one a turn.

    ``await queue.run(fn, *args)`` returns ``fn(*args)`` (or raises what it
    raised) once every call queued before it has run. Each call runs from a
    ``call_soon`` callback, and the next one is scheduled only after it, so
    the loop polls its sockets (and reads newly arrived requests into the
    queue) between any two calls. A call whose caller stopped waiting
    (cancelled: the client went away, the server is stopping) is skipped.
    Each event loop has a queue of its own (a server has one loop; tests
    start one per ``TestClient``)."""

    def __init__(self) -> None:
        self._queues: weakref.WeakKeyDictionary[
            asyncio.AbstractEventLoop, _LoopQueue
        ] = weakref.WeakKeyDictionary()
        #: Calls run so far (tests and diagnostics).
        self.ran = 0

    def __len__(self) -> int:
        return sum(len(q.waiting) for q in list(self._queues.values()))

    async def run(self, fn: Callable[..., Any], *args: Any) -> Any:
        loop = asyncio.get_running_loop()
        queue = self._queues.get(loop)
        if queue is None:
            queue = self._queues[loop] = _LoopQueue()
        future: asyncio.Future[Any] = loop.create_future()
        queue.waiting.append((future, fn, args))
        if not queue.scheduled:
            queue.scheduled = True
            loop.call_soon(self._next, loop, queue)
        return await future

    def _next(self, loop: asyncio.AbstractEventLoop, queue: _LoopQueue) -> None:
        """Run the oldest call still wanted, then schedule the next turn."""
        waiting = queue.waiting
        try:
            while waiting:
                future, fn, args = waiting.popleft()
                if future.done():  # cancelled while it waited
                    continue
                self.ran += 1
                try:
                    result = fn(*args)
                except BaseException as exc:  # the caller gets it, as from a call
                    if not future.done():
                        future.set_exception(exc)
                    if not isinstance(exc, Exception):
                        raise  # KeyboardInterrupt, SystemExit: the loop's too
                else:
                    if not future.done():
                        future.set_result(result)
                break
        finally:
            if waiting:
                loop.call_soon(self._next, loop, queue)
            else:
                queue.scheduled = False


class _LoopQueue:
    """One loop's calls waiting, and whether a turn is scheduled for them."""

    __slots__ = ("scheduled", "waiting")

    def __init__(self) -> None:
        self.waiting: deque[tuple[asyncio.Future[Any], Callable[..., Any], tuple]]
        self.waiting = deque()
        self.scheduled = False


__all__ = ["FairQueue"]
