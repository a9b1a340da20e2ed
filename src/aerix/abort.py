"""Abort signals: a thread-safe way to stop a run, a generation or a tool.

An `AbortController` owns one `AbortSignal`. Code that should stop when asked
reads `signal.aborted`, registers a callback, or awaits the signal. Any thread
may call `abort()`; callbacks run on the aborting thread, once. A callback that
raises is logged (logger `aerix`) and the others still run: `abort()` itself
never raises for one (a `KeyboardInterrupt` or `SystemExit` from one is raised
again once the others have run).
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable, Generator
from typing import Any

__all__ = ["AbortController", "AbortSignal"]

log = logging.getLogger("aerix")


class AbortSignal:
    """Tells whether an abort was asked for. Made by an `AbortController`."""

    __slots__ = ("_aborted", "_callbacks", "_lock", "_reason")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._aborted = False
        self._reason: object = None
        self._callbacks: list[Callable[[], object]] = []

    @property
    def aborted(self) -> bool:
        """Whether `abort()` was called."""
        return self._aborted

    @property
    def reason(self) -> object:
        """The reason given to `abort()` (`"aborted"` where it gave none); `None` before an abort."""
        return self._reason

    def add_callback(self, fn: Callable[[], object]) -> Callable[[], None]:
        """Call `fn()` once on abort (at once if already aborted).

        An exception from `fn` is logged (logger `aerix`), not raised: it stops neither
        the abort nor the other callbacks.

        Args:
            fn: Called with no arguments, on the thread that aborts.

        Returns:
            A function that unregisters `fn`; calling it twice is harmless.

        Example:
            >>> controller = AbortController()
            >>> remove = controller.signal.add_callback(lambda: print("stopping"))
            >>> controller.abort()
            stopping
        """
        with self._lock:
            if not self._aborted:
                self._callbacks.append(fn)
                return _Remover(self, fn)
        _call(fn)
        return _nothing

    def _discard(self, fn: Callable[[], object]) -> None:
        with self._lock:
            try:
                self._callbacks.remove(fn)
            except ValueError:
                pass

    async def wait(self) -> None:
        """Return once the signal is aborted (at once if it already is)."""
        if self._aborted:
            return
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[None] = loop.create_future()

        def wake() -> None:
            if not fut.done():
                fut.set_result(None)

        def on_abort() -> None:
            try:
                loop.call_soon_threadsafe(wake)
            except RuntimeError:  # the loop is closed: nobody is waiting
                pass

        remove = self.add_callback(on_abort)
        try:
            await fut
        finally:
            remove()

    def __await__(self) -> Generator[Any, None, None]:
        return self.wait().__await__()

    def _abort(self, reason: object) -> bool:
        with self._lock:
            if self._aborted:
                return False
            self._aborted = True
            self._reason = reason
            callbacks, self._callbacks = self._callbacks, []
        stop: BaseException | None = None
        for fn in callbacks:
            try:
                _call(fn)
            except BaseException as exc:  # a Ctrl-C or an exit: the other callbacks run first
                stop = stop or exc
        if stop is not None:
            raise stop
        return True

    def __repr__(self) -> str:
        return f"AbortSignal(aborted={self._aborted})"


def _call(fn: Callable[[], object]) -> None:
    """Call an abort callback; what it raises is logged, so that the other callbacks (a
    run's own among them) still run and the caller of `abort()` gets nothing thrown."""
    try:
        fn()
    except (Exception, asyncio.CancelledError):
        log.exception("an abort callback (%r) raised; the abort goes on", fn)


class _Remover:
    """Unregisters one callback, then forgets it.

    Forgetting matters: an object that registers its own method and keeps the
    remover (as a run's guard does) would otherwise form a reference cycle
    that lives until the garbage collector's next full scan.
    """

    __slots__ = ("_fn", "_signal")

    def __init__(self, signal: AbortSignal, fn: Callable[[], object]) -> None:
        self._signal: AbortSignal | None = signal
        self._fn = fn

    def __call__(self) -> None:
        signal, self._signal = self._signal, None
        if signal is not None:
            signal._discard(self._fn)
            self._fn = _nothing


def _nothing() -> None:
    """Does nothing: the remover of a callback that is not registered."""
    return None


class AbortController:
    """Owns an `AbortSignal` and aborts it.

    Examples:
        >>> controller = AbortController()
        >>> controller.signal.aborted
        False
        >>> controller.abort("enough")
        >>> controller.signal.aborted, controller.signal.reason
        (True, 'enough')
    """

    __slots__ = ("signal",)

    signal: AbortSignal
    """The signal this controller aborts: hand it to a run, a generation or a tool."""

    def __init__(self) -> None:
        self.signal = AbortSignal()

    def abort(self, reason: object = None) -> None:
        """Abort the signal and run its callbacks; later calls do nothing. Safe from any thread.

        Args:
            reason: What `signal.reason` says; `None` gives `"aborted"`.

        Raises:
            KeyboardInterrupt: Or `SystemExit`, where a callback raised one (after the
                other callbacks ran); any other exception of a callback is logged.
        """
        self.signal._abort("aborted" if reason is None else reason)

    def follow(self, signal: AbortSignal | None) -> Callable[[], None]:
        """Abort this controller when `signal` aborts, with the same reason.

        Args:
            signal: The signal to follow; `None` follows nothing.

        Returns:
            A function that stops following.
        """
        if signal is None:
            return _nothing
        return signal.add_callback(lambda: self.abort(signal.reason))
