"""The abort guard of a run: an abort cancels the await in progress, never the consumer's code."""

from __future__ import annotations

import asyncio
from typing import Any

from .abort import AbortSignal
from .events import EndEvent

__all__ = ["Aborted", "Guard", "aborted"]


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

    def disarm(self) -> None:
        """Let an abort cancel nothing (until the next `arm`)."""
        self._task = None

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


def aborted(signal: AbortSignal) -> EndEvent:
    """The ending of an aborted run: its message is the abort's reason, if that is a string."""
    reason = signal.reason
    return EndEvent(reason="abort", message=reason if isinstance(reason, str) else "aborted")
