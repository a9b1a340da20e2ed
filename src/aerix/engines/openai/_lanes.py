"""A pool of HTTP connections for one event loop, one `httpx.AsyncClient` per connection.

httpx's own pool looks at every connection it holds each time a request
starts or ends (one `poll()` system call per idle connection), so with hundreds
of agents on one loop that polling takes most of the loop's time. A lane is a
client limited to one connection; `Lanes` hands each request an idle lane
(the most recently used one, whose connection is warm), opens a new one while
fewer than `size` are open, and otherwise queues the request until a lane is
released. Every step is O(1).
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable

import httpx

__all__ = ["Lanes"]


class Lanes:
    """Up to `size` single-connection clients, shared by the requests of one event loop.

    Args:
        make: Makes a new lane (a client limited to one connection).
        size: The most lanes open at once.
        keep: The most idle lanes kept open; more are closed on release.
    """

    __slots__ = ("_closed", "_idle", "_keep", "_make", "_open", "_size", "_waiters", "keeper")

    def __init__(self, make: Callable[[], httpx.AsyncClient], size: int, keep: int) -> None:
        self._make = make
        self._size = size
        self._keep = keep
        self._idle: list[httpx.AsyncClient] = []
        self._open = 0
        self._waiters: deque[asyncio.Future[httpx.AsyncClient]] = deque()
        self._closed = False
        self.keeper: object = None
        """What closes the lanes when their loop shuts down (kept alive here)."""

    @property
    def open(self) -> int:
        """Lanes open now, idle or busy."""
        return self._open

    async def acquire(self) -> httpx.AsyncClient:
        """A lane for one request; give it back with `release`."""
        if self._idle:
            return self._idle.pop()
        if self._open < self._size:
            self._open += 1
            return self._make()
        waiter: asyncio.Future[httpx.AsyncClient] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            return await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():  # handed a lane, then cancelled
                await self.release(waiter.result())
            else:
                self._waiters.remove(waiter)
            raise

    async def release(self, lane: httpx.AsyncClient) -> None:
        """Give a lane back: to the next waiting request, to the idle lanes, or closed."""
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(lane)
                return
        if not self._closed and len(self._idle) < self._keep:
            self._idle.append(lane)
            return
        self._open -= 1
        await lane.aclose()

    async def aclose(self) -> None:
        """Close the idle lanes now, and each busy one when no request waits for it."""
        self._closed = True
        idle, self._idle = self._idle, []
        self._open -= len(idle)
        for lane in idle:
            await lane.aclose()
