"""The abort guard of a run: an abort cancels the await in progress, never the consumer's code."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncGenerator, Callable, Coroutine
from typing import Any

from .abort import AbortSignal
from .errors import message_of
from .events import EndEvent

__all__ = ["Aborted", "Consumer", "Guard", "Handout", "aborted"]


class Aborted(Exception):
    """Unwinds a run that was aborted."""


class Guard:
    """Turns an abort into a cancellation of the await in progress (as `asyncio.timeout` does).

    The run arms the guard while it awaits the model, a tool or a hook, and
    disarms it while the consumer has an event, so an abort never cancels the
    consumer's code.
    """

    __slots__ = ("_fired", "_loop", "_remove", "_signal", "_task")

    def __init__(self, signal: AbortSignal) -> None:
        self._signal = signal
        self._loop = asyncio.get_running_loop()
        self._task: asyncio.Task[Any] | None = None
        self._fired: asyncio.Task[Any] | None = None
        self._remove = signal.add_callback(self._on_abort)

    def _on_abort(self) -> None:  # any thread
        try:
            self._loop.call_soon_threadsafe(self._cancel)
        except RuntimeError:  # the loop is closed: nothing is awaited
            pass

    def _cancel(self) -> None:
        if self._task is not None and self._fired is None:
            self._fired = self._task
            self._task.cancel()

    def arm(self) -> None:
        """Raise `Aborted` if the signal is aborted; else let an abort cancel the current task."""
        if self._signal.aborted:
            raise Aborted
        self._task = asyncio.current_task(self._loop)

    def disarm(self) -> asyncio.Task[Any] | None:
        """Let an abort cancel nothing (until the next `arm`); return the task it would have
        cancelled (the current one, when armed since this step began)."""
        task, self._task = self._task, None
        return task

    def owns_cancel(self) -> bool:
        """After a `CancelledError`: whether it came only from an abort (then it is undone)."""
        fired, self._fired = self._fired, None
        return fired is not None and fired.uncancel() == 0

    def close(self) -> None:
        """Stop watching the signal; undo a cancellation that was fired but absorbed on the way."""
        self._remove()
        self._task = None
        if self._fired is not None:
            self._fired.uncancel()
            self._fired = None


class Handout(AsyncGenerator[Any, None]):
    """A run's events as `Agent.run` hands them out: the run's own async generator, and a
    word to the agent when the consumer drops them.

    Python does not close an async generator that an `async for` leaves (a `break`, an
    exception, a timeout): the event loop closes it only a turn or two after nothing holds
    it, and until then the agent would stay busy. Dropped between two events, nothing can
    resume the run any more, so `left` ends it at once. A step still held elsewhere (a task
    made of `anext(events)`, not started yet) may resume it: `left` is told, and leaves it.
    """

    __slots__ = ("__weakref__", "_events", "_left", "_step")

    def __init__(self, events: AsyncGenerator[Any, None], left: Callable[[bool], None]) -> None:
        self._events = events
        self._left = left
        self._step: Any = None
        """The last step asked for: while someone still holds it, the run may go on."""

    def __aiter__(self) -> Handout:
        return self

    def __anext__(self) -> Coroutine[Any, Any, Any]:
        self._step = step = self._events.__anext__()
        return step

    def asend(self, value: None) -> Coroutine[Any, Any, Any]:
        self._step = step = self._events.asend(value)
        return step

    def athrow(self, *args: Any) -> Coroutine[Any, Any, Any]:
        self._step = step = self._events.athrow(*args)
        return step

    def aclose(self) -> Coroutine[Any, Any, None]:
        return self._events.aclose()

    def __del__(self) -> None:
        try:
            # Held by this slot and by getrefcount's argument alone, the last step was awaited
            # to its end (an `async for` lets go of each one) or never taken.
            self._left(self._step is not None and sys.getrefcount(self._step) > 2)
        except Exception:  # never out of a finaliser
            pass


class Consumer:
    """The task that a run's consumer iterates it in, watched while the consumer has an event.

    A run waits at each event for its consumer to ask for the next one. If the consumer's
    task is cancelled there, in its own code, nothing resumes the run: its generator is
    closed only when it is collected, and until then the agent would stay busy. So while
    the consumer has an event, the run watches that task, and frees itself as soon as the
    task ends cancelled (`abandoned` says so before the callback has had its turn).
    """

    __slots__ = ("_free", "_task")

    def __init__(self, free: Callable[[], None]) -> None:
        self._free = free
        self._task: asyncio.Task[Any] | None = None

    def hand(self, task: asyncio.Task[Any] | None) -> None:
        """The consumer is about to get an event: watch `task`, the one it runs in (the
        current task, as `Guard.disarm` gives it: no second look-up)."""
        if task is not self._task:
            self.drop()
            if task is not None:
                task.add_done_callback(self._done)
            self._task = task

    def abandoned(self) -> bool:
        """Whether the consumer's task ended cancelled while it had an event."""
        return self._task is not None and self._task.cancelled()

    def drop(self) -> None:
        """Stop watching (the run is ending, or moved to another task)."""
        if self._task is not None:
            self._task.remove_done_callback(self._done)
            self._task = None

    def _done(self, task: asyncio.Task[Any]) -> None:
        if task.cancelled():
            self._free()
        elif task is self._task:  # ended: it holds no event any more (nor, through it, the run)
            self._task = None


def aborted(signal: AbortSignal) -> EndEvent:
    """The ending of an aborted run: its message is the abort's reason, a string or an
    exception's message (`abort(TimeoutError("too slow"))`), else `"aborted"`."""
    reason = signal.reason
    if isinstance(reason, BaseException):
        reason = message_of(reason)
    return EndEvent(reason="abort", message=reason if isinstance(reason, str) and reason else "aborted")
