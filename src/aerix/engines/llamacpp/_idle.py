"""The threads of each prefill, chosen from the CPUs idle at that moment.

llama.cpp's threads spin while they wait for each other, so a thread on a CPU
that another process keeps busy stalls the others at every step: with one CPU
of two busy, a prefill on two threads takes many times longer than on one. A
fixed half of the CPUs leaves that margin but halves the speed of a quiet
machine. So before each prefill the engine reads how busy the CPUs it may use
have been (the kernel's counters in /proc/stat, over a short window) and takes
one thread for each CPU that was idle (this process's own work counts as idle:
it is the engine's, or waits for it). Where the counters cannot be read (not
Linux), a prefill takes the engine's fixed default. The load average
(`os.getloadavg`) is cheaper to read, but it averages over a minute: a
process that began to spin a second ago barely moves it, and one that stopped
weighs on it for minutes.

The window: since the previous prefill's reading when that is recent (the
generation in between is the engine's own work), else a fresh sample of
`WINDOW` seconds; the engine's first reading is taken when the model is
loaded, so the first prefill rarely waits for one.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from . import _llama
from ._open import default_threads, usable_cpus

__all__ = ["WINDOW", "PrefillThreads", "Reading", "idle_cpus", "read_cpus"]

WINDOW = 0.05
"""Seconds: the shortest window the idle CPUs are read over (the kernel counts in ticks of
10 ms; five a CPU)."""
FRESH = 1.0
"""Seconds: a reading older than this says little about the moment; a fresh sample is taken."""
_IDLE_SHARE = 0.75
"""A CPU counts as idle from this share of the window on."""


@dataclass(frozen=True, slots=True)
class Reading:
    """What the kernel counted up to one moment."""

    wall: float
    """`time.monotonic()`, in seconds."""
    idle: float
    """The CPU-seconds the CPUs this process may use have been idle (idle and waiting for I/O)."""
    own: float
    """The CPU-seconds this process has run (user and system)."""


def read_cpus(stat: str = "/proc/stat") -> Reading | None:
    """The kernel's counters now, for the CPUs this process may run on; `None` where they
    cannot be read (not Linux)."""
    try:
        with open(stat) as f:
            lines = f.read().splitlines()
        allowed = os.sched_getaffinity(0)
        tick = os.sysconf("SC_CLK_TCK")
    except (OSError, AttributeError, ValueError):
        return None
    idle = 0
    for line in lines:
        name, _, rest = line.partition(" ")
        if name.startswith("cpu") and name[3:].isdigit() and int(name[3:]) in allowed:
            fields = rest.split()
            idle += int(fields[3]) + int(fields[4])
    times = os.times()
    return Reading(wall=time.monotonic(), idle=idle / tick, own=times.user + times.system)


def idle_cpus(before: Reading, after: Reading) -> float:
    """How many CPUs were idle between two readings, on average, counting this process's own
    work as idle; from 0 to the CPUs this process may use."""
    span = after.wall - before.wall
    if span <= 0:
        return 0.0
    idle = (after.idle - before.idle + after.own - before.own) / span
    return min(float(usable_cpus()), max(0.0, idle))


class PrefillThreads:
    """The prefill threads of one `Llama` context: the user's, or chosen for each prefill from
    the CPUs idle at that moment (`choose`).

    Args:
        llama: The loaded `Llama`.
        decode: The threads for one token at a time (they stay as they are).
        prefill: The user's prefill threads; `None`: chosen for each prefill.
        read: The kernel's counters (`read_cpus`; a test passes its own).
        sleep: How to wait for a fresh sample's window.
    """

    def __init__(
        self,
        llama: Any,
        decode: int,
        prefill: int | None,
        *,
        read: Callable[[], Reading | None] = read_cpus,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._llama = llama
        self._decode = decode
        self._fixed = prefill
        self._read = read
        self._sleep = sleep
        self._last = read() if prefill is None else None
        self._chosen = False
        self.threads: int = prefill or _llama.threads(llama)[1]
        """The prefill threads the context uses now."""

    def choose(self) -> int:
        """Set the context's prefill threads for the prefill about to start; how many."""
        if self._fixed is not None:
            return self._fixed
        now, before = self._read(), self._last
        if now is None or before is None:  # not Linux: the engine's fixed default
            return self._set(default_threads())
        since = now.wall - before.wall
        if since < WINDOW and self._chosen:
            return self.threads  # no news since the last choice: the window grows on
        if since < WINDOW or since > FRESH:
            if since > FRESH:
                before = now
            self._sleep(WINDOW - (now.wall - before.wall))
            now = self._read() or before
        self._last = now
        return self._set(max(1, int(idle_cpus(before, now) + 1 - _IDLE_SHARE)))

    def _set(self, threads: int) -> int:
        self._chosen = True
        if threads != self.threads:
            _llama.set_threads(self._llama, self._decode, threads)
            self.threads = threads
        return threads
