"""The sync portal: `run_sync` and `ask_sync` drive a run's steps through it, on a private loop."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncGenerator, Callable, Coroutine, Iterator
from typing import Any, TypeVar

from .abort import AbortController, AbortSignal

__all__ = ["Portal", "iterate"]

T = TypeVar("T")


class Portal:
    """Runs coroutines on a private event loop: here if no loop runs in this
    thread, else on a worker thread (a notebook's loop is never blocked on)."""

    def __init__(self) -> None:
        try:
            asyncio.get_running_loop()
            threaded = True
        except RuntimeError:
            threaded = False
        self._loop = asyncio.new_event_loop()
        self._thread: threading.Thread | None = None
        if threaded:
            self._thread = threading.Thread(target=self._loop.run_forever, name="aerix-sync", daemon=True)
            self._thread.start()
        self._pending: Any = None

    def call(self, coro: Coroutine[Any, Any, T] | Any) -> T:
        """Run `coro` to its end on the private loop and return its result."""
        pending, self._pending = self._pending, None
        if pending is not None and not pending.done():  # a step was interrupted (Ctrl-C): let it finish
            try:
                self._wait(pending)
            except BaseException:
                pass
        if self._thread is None:
            task = self._loop.create_task(coro)
            self._pending = task
            result: T = self._loop.run_until_complete(task)
        else:
            fut = asyncio.run_coroutine_threadsafe(coro, self._loop)
            self._pending = fut
            result = fut.result()
        self._pending = None
        return result

    def _wait(self, pending: Any) -> Any:
        if self._thread is None:
            return self._loop.run_until_complete(pending)
        return pending.result()

    def close(self) -> None:
        """Cancel the tasks still on the loop (an engine's stream reader that outlived its
        turn), finish its async generators, stop its thread, close it: as `asyncio.run` ends."""
        try:
            self.call(_cancel_the_rest())
            self.call(self._loop.shutdown_asyncgens())
        finally:
            if self._thread is not None:
                self._loop.call_soon_threadsafe(self._loop.stop)
                self._thread.join()
            self._loop.close()


async def _cancel_the_rest() -> None:
    """Cancel every other task of this loop and wait for them to end."""
    rest = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
    for task in rest:
        task.cancel()
    await asyncio.gather(*rest, return_exceptions=True)


def iterate(
    start: Callable[[AbortSignal], AsyncGenerator[T, None]], signal: AbortSignal | None
) -> Iterator[T]:
    """Iterate an async run from sync code, one step at a time through a `Portal`.

    Args:
        start: Makes the run, given the signal that aborts it.
        signal: The user's signal, followed by the run's.

    Leaving the iteration early aborts the run, then closes it.
    """
    controller = AbortController()
    unfollow = controller.follow(signal)
    portal = Portal()
    events = start(controller.signal)
    try:
        while True:
            try:
                item: T = portal.call(events.__anext__())
            except StopAsyncIteration:
                return
            yield item
    finally:
        controller.abort()
        portal.call(events.aclose())
        portal.close()
        unfollow()
