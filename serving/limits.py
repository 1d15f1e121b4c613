"""What the HTTP server accepts: body size, requests per token, one token.

``RequestGuard`` is the outermost ASGI layer of ``serving.http``'s app (inside
Starlette's server-error handler only), so a request it refuses costs neither
FastAPI's routing nor ``/pack``'s fast path:

- a second ``Authorization`` header is a 400 (which one would win is up to
  each proxy and framework; "the last" silently was the old answer);
- a body over ``Limits.max_body_bytes`` is a 413, from its
  ``Content-Length`` before a byte of it is read, or, chunked, as soon as
  what was read passes the limit: at most the limit is held in memory;
- a known token over its rate is a 429 with ``Retry-After`` (a token bucket
  per token and worker process: ``TokenBuckets``).

The checks are one pass over the headers, a dict lookup and some arithmetic:
the /pack hot path pays no more than that (docs/serving.md).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

#: The default request body limit: a /pack body is ~200 bytes; 1 MB leaves
#: room for long queries and mandatory-id lists, and stops a 30 MB body from
#: holding a worker (issue 32: 19.7 s of other requests stalled).
MAX_BODY_BYTES = 1_000_000


@dataclass(frozen=True)
class Limits:
    """The server's bounds (``ctxledger serve --max-body-bytes --rate-limit
    --rate-burst``). ``rate_per_s`` is requests per second per token in each
    worker process; 0 turns the rate limit off (the default: a limit that
    suits one deployment starves another's bench, so the operator sets it).
    ``burst`` is the bucket's size (default: one second's worth, at least 1)."""

    max_body_bytes: int = MAX_BODY_BYTES
    rate_per_s: float = 0.0
    burst: int | None = None

    def __post_init__(self) -> None:
        if self.max_body_bytes < 1:
            raise ValueError("max_body_bytes must be at least 1")
        if self.rate_per_s < 0 or not math.isfinite(self.rate_per_s):
            raise ValueError("rate_per_s must be a finite number >= 0")
        if self.burst is not None and self.burst < 1:
            raise ValueError("burst must be at least 1")

    @property
    def bucket_size(self) -> int:
        if self.burst is not None:
            return self.burst
        return max(1, math.ceil(self.rate_per_s))


class TokenBuckets:
    """A token bucket per key: ``take(key)`` spends one request and returns
    0.0, or, when the bucket is empty, the seconds until it holds one again
    (spending nothing). Keys are the digests of known tokens, so the dict is
    as large as the token file, whatever callers send."""

    def __init__(
        self,
        rate_per_s: float,
        size: int,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.rate, self.size, self.clock = rate_per_s, float(size), clock
        #: key -> [requests left, when last counted]
        self._buckets: dict[str, list[float]] = {}

    def take(self, key: str) -> float:
        now = self.clock()
        bucket = self._buckets.get(key)
        if bucket is None:
            self._buckets[key] = [self.size - 1.0, now]
            return 0.0
        left = min(self.size, bucket[0] + (now - bucket[1]) * self.rate)
        bucket[1] = now
        if left >= 1.0:
            bucket[0] = left - 1.0
            return 0.0
        bucket[0] = left
        return (1.0 - left) / self.rate


def _error(status: int, detail: str, headers: list[tuple[bytes, bytes]] = ()):
    """The two ASGI messages of a JSON error answer, FastAPI's shape
    (``{"detail": ...}``)."""
    import json

    body = json.dumps({"detail": detail}).encode()
    start = {
        "type": "http.response.start",
        "status": status,
        "headers": [
            (b"content-length", str(len(body)).encode()),
            (b"content-type", b"application/json"),
            *headers,
        ],
    }
    return start, {"type": "http.response.body", "body": body}


class RequestGuard:
    """ASGI middleware enforcing ``Limits`` (module docstring).
    ``token_key`` maps an ``Authorization`` header to its token's key for
    the rate limit (None: no known token; the route answers 401)."""

    def __init__(
        self,
        app,
        *,
        limits: Limits,
        token_key: Callable[[bytes], str | None],
        clock: Callable[[], float] = time.monotonic,
    ):
        self.app = app
        self.max_body = limits.max_body_bytes
        self.token_key = token_key
        self.buckets = (
            TokenBuckets(limits.rate_per_s, limits.bucket_size, clock)
            if limits.rate_per_s > 0
            else None
        )

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        authorization = None
        length = None
        for name, value in scope["headers"]:
            if name == b"authorization":
                if authorization is not None:
                    await _send(send, 400, "more than one Authorization header")
                    return
                authorization = value
            elif name == b"content-length":
                length = value
        if length is not None:
            try:
                too_big = int(length) > self.max_body
            except ValueError:
                too_big = False  # uvicorn answers a malformed length itself
            if too_big:
                await self._too_large(send)
                return
        if self.buckets is not None and authorization is not None:
            key = self.token_key(authorization)
            wait = self.buckets.take(key) if key is not None else 0.0
            if wait > 0.0:
                retry = str(max(1, math.ceil(wait))).encode()
                await _send(
                    send,
                    429,
                    "rate limit exceeded for this token",
                    [(b"retry-after", retry)],
                )
                return
        if length is None and scope["method"] in ("POST", "PUT", "PATCH"):
            # chunked (no Content-Length): read up to the limit, then replay
            body = await self._bounded_body(receive)
            if body is None:
                await self._too_large(send)
                return
            receive = _replay(body, receive)
        await self.app(scope, receive, send)

    async def _bounded_body(self, receive) -> bytes | None:
        """The whole body, or None as soon as it passes the limit."""
        chunks, size, more = [], 0, True
        while more:
            message = await receive()
            if message["type"] != "http.request":
                break
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body:
                return None
            chunks.append(chunk)
            more = message.get("more_body", False)
        return b"".join(chunks)

    async def _too_large(self, send) -> None:
        await _send(send, 413, f"request body over the limit of {self.max_body} bytes")


async def _send(send, status: int, detail: str, headers=()) -> None:
    start, body = _error(status, detail, list(headers))
    await send(start)
    await send(body)


def _replay(body: bytes, receive):
    """An ASGI ``receive`` that yields ``body`` once, then defers to
    ``receive`` (a disconnect, for a handler that waits for one)."""
    sent = False

    async def again() -> dict:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return again
