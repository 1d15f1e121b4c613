"""``serving.fair_queue.FairQueue``: blocking calls run in arrival order, one
per event-loop turn, so a request that arrives during a call is served after
every request already waiting, never ahead of them and never a batch later.
"""

from __future__ import annotations

import asyncio
import socket

import pytest

from ctxledger.serving.fair_queue import FairQueue


def test_calls_run_in_arrival_order_and_return_their_results():
    async def main():
        queue = FairQueue()
        order: list[int] = []

        def call(k: int) -> int:
            order.append(k)
            return k * 10

        results = await asyncio.gather(*(queue.run(call, k) for k in range(6)))
        return order, results, queue.ran

    order, results, ran = asyncio.run(main())
    assert order == [0, 1, 2, 3, 4, 5]
    assert results == [0, 10, 20, 30, 40, 50]
    assert ran == 6


def test_one_call_per_loop_turn():
    """Between two queued calls the loop runs its other callbacks (a poll of
    its sockets comes with every turn): a callback scheduled by the first
    call runs before the second call."""

    async def main():
        loop = asyncio.get_running_loop()
        queue = FairQueue()
        events: list[str] = []

        def call(k: int) -> None:
            events.append(f"call {k}")
            loop.call_soon(events.append, f"after {k}")

        await asyncio.gather(*(queue.run(call, k) for k in range(3)))
        return events

    assert asyncio.run(main()) == [
        "call 0", "after 0", "call 1", "after 1", "call 2", "after 2",
    ]  # fmt: skip


def test_data_arriving_during_a_call_queues_behind_those_waiting():
    """Requests read from a socket while a call runs join the queue behind
    the ones already waiting (first come, first served across loop turns)."""

    async def main():
        loop = asyncio.get_running_loop()
        queue = FairQueue()
        order: list[str] = []
        left, right = socket.socketpair()
        left.setblocking(False)
        right.setblocking(False)
        tasks: list[asyncio.Task] = []

        def readable() -> None:
            data = left.recv(100).decode()
            for name in data.split():
                tasks.append(loop.create_task(queue.run(order.append, name)))

        loop.add_reader(left.fileno(), readable)

        def first(name: str) -> None:
            order.append(name)
            right.send(b"late ")  # arrives while "a" runs

        try:
            waiting = [
                loop.create_task(queue.run(first, "a")),
                loop.create_task(queue.run(order.append, "b")),
                loop.create_task(queue.run(order.append, "c")),
            ]
            await asyncio.gather(*waiting)
            while len(order) < 4:
                await asyncio.sleep(0.01)
            await asyncio.gather(*tasks)
        finally:
            loop.remove_reader(left.fileno())
            left.close()
            right.close()
        return order

    assert asyncio.run(main()) == ["a", "b", "c", "late"]


def test_an_exception_reaches_its_caller_and_the_queue_goes_on():
    async def main():
        queue = FairQueue()

        def fail() -> None:
            raise ValueError("bad request")

        first = asyncio.ensure_future(queue.run(fail))
        second = asyncio.ensure_future(queue.run(lambda: "next"))
        with pytest.raises(ValueError, match="bad request"):
            await first
        return await second

    assert asyncio.run(main()) == "next"


def test_a_cancelled_caller_is_skipped():
    async def main():
        queue = FairQueue()
        ran: list[str] = []
        first = asyncio.ensure_future(queue.run(ran.append, "first"))
        gone = asyncio.ensure_future(queue.run(ran.append, "gone"))
        last = asyncio.ensure_future(queue.run(ran.append, "last"))
        await asyncio.sleep(0)  # every call queued
        gone.cancel()
        await asyncio.gather(first, last)
        assert gone.cancelled()
        return ran, len(queue)

    ran, left = asyncio.run(main())
    assert ran == ["first", "last"]
    assert left == 0


def test_each_event_loop_has_its_own_queue():
    """A queue outlives a loop (each ``TestClient`` runs its own): a loop
    that stopped with a turn still pending does not hold up the next
    loop's calls."""
    queue = FairQueue()
    first = asyncio.new_event_loop()
    try:
        task = first.create_task(queue.run(lambda: "never ran"))
        first.call_soon(first.stop)  # after the task queued its call
        first.run_forever()
        assert len(queue) == 1  # its turn was scheduled, never taken
        task.cancel()
    finally:
        first.close()

    async def later():
        return await asyncio.wait_for(queue.run(lambda: "ran"), timeout=5)

    assert asyncio.run(later()) == "ran"
