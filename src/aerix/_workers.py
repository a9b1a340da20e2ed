"""Worker threads for plain-function tools: a lean hand-off that never blocks the event loop.

`workers.run(fn, *args)` hands `fn(*args)` to an idle daemon thread (one queue put)
and returns a future of the loop's; the thread hands the outcome back through the
loop's `_Waker` (a deque and one byte into a pipe the loop watches). Up to
`_Workers.MAX_IDLE` threads are kept idle. On Linux an idle worker is pinned to the
core of the loop's thread just before it is handed a call (a same-core wake-up is
much cheaper than one that crosses to an idle core) and lets go of the pin before
the call runs.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import os
import threading
import weakref
from collections import deque
from collections.abc import Callable
from queue import SimpleQueue
from typing import Any

__all__ = ["workers"]


class _Waker:
    """Wakes one event loop from worker threads: a finished call goes into a deque, and one
    byte into a pipe that the loop watches.

    Leaner than `call_soon_threadsafe` (no handle per call, and no second read that fails
    to find the self-pipe empty), and the loop reads every call finished since with one read.
    """

    __slots__ = ("__weakref__", "_done", "_read", "_write")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._done: deque[tuple[asyncio.Future[tuple[Any, bool]], Any, bool]] = deque()
        self._read, self._write = os.pipe()
        # closed once no worker holds the waker (not at exit: a hung worker may still write)
        weakref.finalize(self, _close, self._read, self._write).atexit = False
        os.set_blocking(self._read, False)
        os.set_blocking(self._write, False)
        loop.add_reader(self._read, self._drain)

    def deliver(self, fut: asyncio.Future[tuple[Any, bool]], outcome: Any, ok: bool) -> None:  # any thread
        self._done.append((fut, outcome, ok))
        try:
            os.write(self._write, b"\0")
        except BlockingIOError:  # the pipe is full: the loop has a wake pending anyway
            pass

    def _drain(self) -> None:  # the loop's thread
        try:
            os.read(self._read, 4096)
        except BlockingIOError:
            pass
        self.collect()

    def collect(self) -> None:  # the loop's thread
        """Deliver the calls finished so far (their bytes are read by the next `_drain`)."""
        done = self._done
        while done:
            _deliver(*done.popleft())


def _close(*fds: int) -> None:
    for fd in fds:
        os.close(fd)


class _Worker:
    """One worker thread: its inbox, its thread id, and whether the loop pinned it."""

    __slots__ = ("inbox", "pinned", "tid")

    def __init__(self) -> None:
        self.inbox: SimpleQueue[Any] = SimpleQueue()
        self.tid: int | None = None
        self.pinned = False


class _Workers:
    """Daemon worker threads for plain-function tools.

    Leaner than `asyncio.to_thread` on the hot path (one queue put; one pipe write
    back, through the loop's `_Waker`), and a tool left hanging after an abort never
    holds up interpreter exit or `asyncio.run`'s executor shutdown.

    On Linux an idle worker is pinned to the core the loop's thread is on just
    before it is woken, and lets go of that pin before the tool runs: a wake-up on
    the same core is much cheaper than one that crosses to an idle core (on a
    virtual machine several times so), and the tool, and any thread or process it
    starts, still gets every core the worker was allowed.
    """

    MAX_IDLE = 32

    def __init__(self) -> None:
        self._idle: list[_Worker] = []
        self._wakers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Waker | None]
        self._wakers = weakref.WeakKeyDictionary()
        """Each loop's waker; `None` for a loop that cannot watch a pipe (Windows, a proactor)."""
        self._lock = threading.Lock()
        self._pinning = True
        """Whether idle workers are pinned before a call; off for good once the OS refuses a pin."""

    def forget(self) -> None:
        """In a forked child: forget the parent's threads and loops, which are not there."""
        self._idle = []
        self._wakers = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()

    def run(self, fn: Callable[..., Any], *args: Any) -> asyncio.Future[tuple[Any, bool]]:
        """Run `fn(*args)` on a worker thread; the future gets `(value, True)` or `(exception, False)`."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[tuple[Any, bool]] = loop.create_future()
        try:
            waker = self._wakers[loop]
        except KeyError:
            waker = self._waker(loop)
        try:
            worker = self._idle.pop()
        except IndexError:
            worker = _Worker()
            thread = threading.Thread(target=self._work, args=(worker,), name="aerix-tool", daemon=True)
            thread.start()
            worker.tid = thread.native_id
        if self._pinning and worker.tid is not None and (core := _core_reader()) is not None:
            try:
                os.sched_setaffinity(worker.tid, (core(),))
                worker.pinned = True
            except OSError:  # refused here (a sandbox, a cpuset): workers wake where the kernel puts them
                self._pinning = False
        worker.inbox.put((loop, waker, fut, contextvars.copy_context(), fn, args))
        if waker is not None:  # a fast call is often done by now (its worker ran while the loop
            waker.collect()  # wrote): then it needs no wake-up of the loop's thread
        return fut

    def _waker(self, loop: asyncio.AbstractEventLoop) -> _Waker | None:
        with self._lock:
            if loop not in self._wakers:
                try:
                    self._wakers[loop] = _Waker(loop) if os.name == "posix" else None
                except (NotImplementedError, OSError):  # no add_reader, or no fd left
                    self._wakers[loop] = None
            return self._wakers[loop]

    def _work(self, worker: _Worker) -> None:
        allowed = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else set()
        while True:
            loop, waker, fut, ctx, fn, args = worker.inbox.get()
            if worker.pinned:  # the pin was for the wake-up only: the tool gets every allowed core
                worker.pinned = False
                try:
                    os.sched_setaffinity(0, allowed)
                except OSError:
                    pass
            try:
                outcome, ok = ctx.run(fn, *args), True
            except BaseException as exc:  # delivered to the awaiting task
                outcome, ok = exc, False
            idle = len(self._idle) < self.MAX_IDLE
            if idle:
                self._idle.append(worker)
            if waker is not None:
                waker.deliver(fut, outcome, ok)
            else:
                try:
                    loop.call_soon_threadsafe(_deliver, fut, outcome, ok)
                except RuntimeError:  # the loop is closed: nobody waits for this result
                    pass
            del loop, waker, fut, ctx, fn, args, outcome  # an idle worker holds no loop, no result
            if not idle:
                return


@functools.cache
def _core_reader() -> Callable[[], int] | None:
    """libc's `sched_getcpu`, where threads can be pinned (Linux); else `None`. Looked up on
    the first plain-function call, so that importing aerix does not import ctypes."""
    if not hasattr(os, "sched_setaffinity"):
        return None
    try:
        import ctypes

        sched_getcpu = ctypes.CDLL(None, use_errno=True).sched_getcpu
        sched_getcpu.restype = ctypes.c_int
        sched_getcpu.argtypes = ()
        if sched_getcpu() < 0:
            return None
    except (OSError, AttributeError):
        return None
    return sched_getcpu


def _deliver(fut: asyncio.Future[tuple[Any, bool]], outcome: Any, ok: bool) -> None:
    if not fut.done():  # else the awaiting task was cancelled (an abort)
        fut.set_result((outcome, ok))  # an exception too, as a value: any exception, even StopIteration


workers = _Workers()
"""The process's pool of worker threads for plain-function tools."""
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=workers.forget)
