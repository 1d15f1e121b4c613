"""``serving.balance``: the workers of ``serve --workers N`` share one
listening socket and keep their connection counts even.

Keep-alive connections stay on the worker that accepted them, and a worker's
clients wait about its connections times one pack per request, so an uneven
split is a slower p99 for the fuller worker's clients.
"""

from __future__ import annotations

import asyncio
import socket
import sys

import pytest

from ctxledger.serving.balance import (
    ABSENT,
    BalancedAcceptor,
    may_accept,
    waiting_connections,
)


@pytest.mark.parametrize(
    ("counts", "slot", "waiting", "expected"),
    [
        ([0, 0], 0, 0, True),  # even: either may
        ([1, 0], 0, 0, False),  # ahead: let the other catch up
        ([1, 0], 1, 0, True),
        ([25, 25], 1, 1, True),
        ([26, 25], 0, 1, False),
        ([0, 0], 0, 50, True),  # a burst: each takes its share at once
        ([24, 0], 0, 26, True),  # share ceil(50 / 2) = 25
        ([25, 0], 0, 25, False),
        ([3, ABSENT], 0, 0, True),  # a worker not serving does not count
        ([ABSENT, 3], 1, 0, True),
        ([4, 2, 2], 0, 6, True),  # share ceil(14 / 3) = 5
        ([5, 2, 2], 0, 6, False),  # share ceil(15 / 3) = 5
    ],
)
def test_may_accept(counts, slot, waiting, expected):
    assert may_accept(counts, slot, waiting) is expected


@pytest.mark.skipif(sys.platform != "linux", reason="TCP_INFO of a listener: Linux")
def test_waiting_connections_counts_the_accept_queue():
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    port = server.getsockname()[1]
    clients = []
    try:
        assert waiting_connections(server) == 0
        clients = [socket.create_connection(("127.0.0.1", port)) for _ in range(5)]
        assert waiting_connections(server) == 5
        server.accept()[0].close()
        assert waiting_connections(server) == 4
    finally:
        for sock in [*clients, server]:
            sock.close()


async def _spread(
    clients: int, workers: int, absent: tuple[int, ...] = (), *, queued: bool = False
):
    """``workers`` acceptors on one loop sharing a listening socket (slots in
    ``absent`` not serving); ``clients`` connections opened one after another
    (``queued``: all of them waiting in the socket's queue before the
    acceptors start), then one more after they landed. Returns each worker's
    accepted count then and after the last one, the published counts, and
    the counts once the acceptors closed."""
    from multiprocessing import get_context

    from ctxledger.serving.balance import shared_counts

    loop = asyncio.get_running_loop()
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(128)
    port = listener.getsockname()[1]
    counts = shared_counts(workers, get_context("spawn"))
    held: list[list[socket.socket]] = [[] for _ in range(workers)]
    dups: list[socket.socket] = []

    def acceptor(slot: int) -> BalancedAcceptor:
        async def serve(conn: socket.socket) -> None:
            held[slot].append(conn)

        # its own descriptor of the one socket, as each worker process has
        mine = listener.dup()
        dups.append(mine)
        return BalancedAcceptor(mine, counts, slot, lambda: len(held[slot]), serve)

    acceptors = [acceptor(k) for k in range(workers) if k not in absent]
    opened: list[socket.socket] = []
    if queued:
        opened = [socket.create_connection(("127.0.0.1", port)) for _ in range(clients)]
    for a in acceptors:
        a.start()
    try:
        while len(opened) < clients:
            sock = socket.socket()
            sock.setblocking(False)
            await loop.sock_connect(sock, ("127.0.0.1", port))
            opened.append(sock)
        for _ in range(1000):  # until every connection was taken (5 s at most)
            if sum(len(h) for h in held) == clients:
                break
            await asyncio.sleep(0.005)
        landed = [len(h) for h in held]
        late = socket.socket()
        late.setblocking(False)
        await loop.sock_connect(late, ("127.0.0.1", port))
        opened.append(late)
        for _ in range(1000):
            if sum(len(h) for h in held) == clients + 1:
                break
            await asyncio.sleep(0.005)
        after = [len(h) for h in held]
        slots = list(counts)
    finally:
        for a in acceptors:
            a.close()
            await a.wait_closed()
        for sock in [*opened, *(c for h in held for c in h), *dups, listener]:
            sock.close()
    closed = list(counts)
    return landed, after, slots, closed


@pytest.mark.parametrize("queued", [False, True])
def test_connections_are_split_evenly_and_the_next_goes_to_the_emptiest(queued):
    """One by one, or a burst already waiting in the queue (the first
    worker to look takes its share at once, ``waiting_connections``)."""
    landed, after, slots, closed = asyncio.run(_spread(50, 2, queued=queued))
    assert landed == [25, 25]
    assert sorted(after) == [25, 26]
    assert slots == after  # each published its count
    assert closed == [ABSENT, ABSENT]  # closing clears the slot


def test_three_workers_and_a_worker_not_serving():
    landed, after, _, _ = asyncio.run(_spread(30, 3))
    assert landed == [10, 10, 10] and sorted(after) == [10, 10, 11]
    landed, _, slots, _ = asyncio.run(_spread(12, 3, absent=(1,)))
    assert landed == [6, 0, 6]  # the absent slot holds nobody back
    assert slots[1] == ABSENT
