"""The one thread that runs llama.cpp's work for every `LlamaCpp` engine of a process.

llama.cpp's CPU backend, built with OpenMP as llama-cpp-python builds it by
default, keeps one team of OpenMP threads for each thread that calls into it.
GNU libgomp counts the threads of every team, and once they outnumber the CPUs
it lets a waiting thread spin only briefly before it sleeps; ggml waits at an
OpenMP barrier between the operations of every decode, so each of them then
wakes a sleeping thread: once a second engine has run a single decode on a
thread of its own, the first decodes markedly slower, for as long as that
thread lives (bench/threads.py measures it; docs/engines.md, "Threads,
concurrency and abort"). Every engine's work on one thread keeps one team, so
engines do not slow each other.

The cost: generations on different engines of one process run one after the
other, as those on one engine always have.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import Any, TypeVar

__all__ = ["Lane"]

T = TypeVar("T")

_lock = threading.Lock()
_executor: ThreadPoolExecutor | None = None
_thread_id: int | None = None


def _shared() -> ThreadPoolExecutor:
    """The process's llama.cpp thread, started on first use."""
    global _executor
    with _lock:
        if _executor is None:
            _executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="aerix-llamacpp")
            _executor.submit(_note_thread).result()
        return _executor


def _note_thread() -> None:
    global _thread_id
    _thread_id = threading.get_ident()


def _forget() -> None:
    """In a forked child: the parent's thread does not exist there; start a new one on use."""
    global _executor, _lock, _thread_id
    _executor, _lock, _thread_id = None, threading.Lock(), None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget)


class Lane:
    """One engine's work on the shared thread: what it has submitted and not yet finished,
    so that closing the engine cancels and waits for its own work, not another engine's."""

    __slots__ = ("_closed", "_futures", "_lock")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._futures: set[Future[Any]] = set()
        self._closed = False

    def submit(self, fn: Callable[..., T], /, *args: Any) -> Future[T]:
        """Run `fn(*args)` on the shared thread, after the work already submitted there.

        Raises:
            RuntimeError: The lane is shut down (its engine is closed).
        """
        with self._lock:
            if self._closed:
                raise RuntimeError("this LlamaCpp engine is closed")
            future = _shared().submit(fn, *args)
            self._futures.add(future)
        future.add_done_callback(self._discard)
        return future

    def _discard(self, future: Future[Any]) -> None:
        with self._lock:
            self._futures.discard(future)

    def shutdown(self) -> None:
        """Refuse new work, cancel this lane's queued work and wait for what already runs
        (not when called from the shared thread itself, which would wait for itself)."""
        with self._lock:
            self._closed = True
            futures = list(self._futures)
        for future in futures:
            future.cancel()
        if threading.get_ident() != _thread_id:
            wait(futures)
