"""A stdio server's stderr: passed on as it comes, its last lines kept to explain a failure."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from collections import deque
from typing import TextIO

__all__ = ["StderrTail"]

KEPT_LINES = 20


class StderrTail:
    """The write end of a pipe for a server's stderr; the event loop reads the other end.

    What the server writes goes on to `target` (`sys.stderr` at the time of writing
    when it is `None`), and the last lines stay for error messages. Where the loop
    cannot watch a pipe (Windows' proactor), the server writes to this process's
    stderr directly and no lines are kept.
    """

    def __init__(self, target: TextIO | None) -> None:
        self._target = target
        self._lines: deque[str] = deque(maxlen=KEPT_LINES)
        self._partial = ""
        self._loop: asyncio.AbstractEventLoop | None = None
        self._read: int | None = None
        self.ended = False
        """Whether every writer closed the pipe: the server's process (and its children) ended."""
        self._ended = asyncio.Event()
        read, write = os.pipe()
        try:
            loop = asyncio.get_running_loop()
            os.set_blocking(read, False)
            loop.add_reader(read, self._on_data)
        except (NotImplementedError, RuntimeError, OSError):
            os.close(read)
            os.close(write)
            self.file: TextIO = _inherited(target)
            self._owned = False
            return
        self._loop, self._read = loop, read
        self.file = open(write, "w", encoding="utf-8", closefd=True)  # noqa: SIM115 - closed by started()
        self._owned = True

    def started(self) -> None:
        """Close this process's copy of the write end, once the server has its own (or failed to start)."""
        if self._owned:
            self._owned = False
            self.file.close()

    async def settle(self, seconds: float = 0.5) -> None:
        """Wait (a little) for the pipe's end: a process that exits closes its stdout a moment
        before its stderr, and its stderr's end is what says that it ended."""
        if self._read is not None and not self.ended:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._ended.wait(), seconds)

    def last(self) -> str | None:
        """The last line the server wrote that is not blank, if any."""
        self._drain()
        for line in reversed([*self._lines, self._partial]):
            if line.strip():
                return line.strip()
        return None

    def close(self) -> None:
        """Stop reading (passing on what is left) and close the pipe."""
        self.started()
        self._drain()
        if self._read is not None and self._loop is not None:
            if not self._loop.is_closed():
                self._loop.remove_reader(self._read)
            os.close(self._read)
            self._read = None

    def _on_data(self) -> None:
        self._drain()

    def _drain(self) -> None:
        while self._read is not None and not self.ended:
            try:
                data = os.read(self._read, 65536)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                data = b""
            if not data:
                self.ended = True
                self._ended.set()
                if self._loop is not None and not self._loop.is_closed():
                    self._loop.remove_reader(self._read)
                return
            self._take(data.decode("utf-8", errors="replace"))

    def _take(self, text: str) -> None:
        target = self._target if self._target is not None else sys.stderr
        with contextlib.suppress(Exception):  # a closed or odd target: the lines are still kept
            target.write(text)
            target.flush()
        lines = (self._partial + text).split("\n")
        self._partial = lines.pop()
        self._lines.extend(lines)


def _inherited(target: TextIO | None) -> TextIO:
    """A stream with a file descriptor that the server can write its stderr to."""
    for stream in (target, sys.stderr, sys.__stderr__):
        try:
            if stream is not None:
                stream.fileno()
                return stream
        except (AttributeError, OSError, ValueError):
            continue
    global _devnull
    if _devnull is None:
        _devnull = open(os.devnull, "w", encoding="utf-8")  # noqa: SIM115 - lives as long as the process
    return _devnull


_devnull: TextIO | None = None
