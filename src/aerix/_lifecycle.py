"""A run's state, and its lifecycle: how it starts, is dropped, abandoned, released and ends.

An agent plays one run at a time. `Lifecycle.start` takes the agent for a run
(refused while another is under way) and gives the run its own signal, which
follows the user's, and its guard. `Lifecycle.release` frees the agent once the
run ends, and aborts the run's signal so that tools or engines still holding it
stop. A run can also lose its consumer before it ends: the consumer's task is
cancelled while it holds an event (`abandon`, through the run's `Consumer`), or
the consumer drops the events between two of them (`dropped`, through
`Handout`). Nothing can resume such a run, so it is ended at once rather than
when the event loop gets to collect it. A run that stops short of a final ends
with the limit it reached (`limit_end`), or with what stopped it (`failure_end`).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from ._approvals import Paused, Verdict
from ._calls import Seen
from ._guard import Aborted, Consumer, Guard, aborted
from ._stream import Reply
from .abort import AbortController, AbortSignal
from .errors import AerixError, message_of
from .events import EndEvent, FinalEvent
from .model import ChatMessage
from .options import Limits

__all__ = ["NO_RETRY", "Lifecycle", "Retry", "Run", "Started", "failure_end", "limit_end"]


@dataclass(frozen=True, kw_only=True, slots=True)
class Retry:
    """The bad turns in a row so far, and what the next generation gets because of them."""

    failures: int = 0
    """Bad or cut turns in a row, the last one included; 0 after a good turn."""
    reason: str = ""
    """Why the last of them was refused."""
    short: bool = False
    """Ask for a shorter turn: one was cut, or wrote a number too large."""
    messages: tuple[ChatMessage, ...] = ()
    """The failed turn and the request to answer again, sent with the next generation only
    (none where no retry is left)."""


NO_RETRY = Retry()
"""The retry state after a good turn."""


@dataclass(kw_only=True, slots=True)
class Run:
    """The state of one run: what its lifecycle holds, then what its loop keeps."""

    prompt: str
    controller: AbortController
    """Owns the run's signal: aborted by the user's signal, and at the run's end."""
    signal: AbortSignal
    unfollow: Callable[[], None]
    """Stops following the user's signal."""
    guard: Guard
    """Turns an abort into a cancellation of the await in progress."""
    consumer: Consumer
    """The task the run's consumer iterates it in, watched while the consumer has an event."""
    released: bool = False
    """The agent is free of the run: it ended, or its consumer's task was cancelled."""
    # What the loop keeps (agent.py writes these).
    choice: str
    """The tool choice of the next generation: the agent's for the first turn, then `"auto"`."""
    pending: list[ChatMessage]
    """The run's messages not yet in the conversation: the prompt, until a turn completes."""
    generation: int = 0
    """Generations so far, retries included."""
    reply: Reply = field(default_factory=Reply)
    """The last generation's reply."""
    retry: Retry = NO_RETRY
    """The bad turns in a row so far."""
    seen: Seen = field(default_factory=Seen)
    """The calls run so far, for the repeat rule (`Limits.repeats`)."""
    final: FinalEvent | None = None
    """The run's final, once accepted."""
    decided: Mapping[str, Verdict] | None = None
    """For a run that resumes a paused one (`Agent.resume`), the decision on each waiting call."""
    paused: Paused | None = None
    """The turn whose calls wait for a decision, once the run pauses there."""


@dataclass(slots=True)
class Started:
    """Where a run's events leave the run as it starts, for `Lifecycle.dropped` to end."""

    run: Run | None = None
    """`None` until the consumer asks for the first event."""


class Lifecycle:
    """One agent's runs, one at a time: the run under way (`current`) and whether the agent is busy."""

    __slots__ = ("_busy", "_lock", "current")

    def __init__(self) -> None:
        self.current: Run | None = None
        """The run under way (tracing reads its state)."""
        self._busy = False
        self._lock = threading.Lock()

    @property
    def busy(self) -> bool:
        """Whether a run is in progress."""
        self.free_abandoned()
        return self._busy

    def check_idle(self) -> None:
        """Raise unless the agent is free for a run.

        Raises:
            AerixError: `kind="busy"` while a run is in progress.
        """
        self.free_abandoned()
        if self._busy:
            raise AerixError("busy", "the agent is already running; one run at a time per agent")

    def start(self, prompt: str | None, user_signal: AbortSignal | None, choice: str) -> Run:
        """Take the agent for a run (unless it is busy) and give the run its own signal and guard.

        Args:
            prompt: The run's prompt (checked already); `None` for a run that resumes a paused one.
            user_signal: The signal the run was given, which its own follows.
            choice: The tool choice of the run's first generation.
        """
        with self._lock:
            self.check_idle()
            self._busy = True
        controller = AbortController()
        run = Run(
            prompt="" if prompt is None else prompt,
            controller=controller,
            signal=controller.signal,
            unfollow=controller.follow(user_signal),
            guard=Guard(controller.signal),
            consumer=Consumer(lambda: self.abandon(run)),
            choice=choice,
            # a plain str, the same text
            pending=[] if prompt is None else [{"role": "user", "content": str.__str__(prompt)}],
        )
        self.current = run
        return run

    def release(self, run: Run) -> None:
        """Free the agent of `run` (once: later calls do nothing more) and stop what still holds
        its signal."""
        run.released = True
        run.consumer.drop()
        run.guard.close()
        run.controller.abort("run ended")  # stops tools or engines still holding the signal
        run.unfollow()
        if self.current is run:  # not a newer run's state
            self.current, self._busy = None, False

    def abandon(self, run: Run, reason: str = "the task that consumed the run was cancelled") -> None:
        """End a run whose consumer is gone: abort what it runs and free the agent. (Should
        another task resume it after all, it ends there with `abort` and this reason.)"""
        run.controller.abort(reason)
        self.release(run)

    def free_abandoned(self) -> None:
        """Free the agent of a run whose consumer's task was cancelled while it had an event (the
        task's callback does it too, but only at the loop's next turn)."""
        run = self.current
        if run is not None and run.consumer.abandoned():
            self.abandon(run)

    def dropped(self, started: Started, events: object, held: bool) -> None:
        """The consumer dropped a run's events between two of them (`Handout`): nothing can
        resume the run, so it is ended now, not when the event loop gets to close it. Not if
        a step is under way (`ag_running`) or still held (`held`: a task yet to take it)."""
        run = started.run
        if held or run is None or run.released or getattr(events, "ag_running", True):
            return
        if any(not job.done() for job in run.seen.running):  # tools run at once: they stop now, and
            # the agent is free once they have (when the event loop closes the run)
            run.controller.abort("the run's consumer dropped it")
        else:
            self.abandon(run, "the run's consumer dropped it")


def limit_end(run: Run, limits: Limits) -> EndEvent:
    """The ending of a run that stopped at a limit: no final within `limits.turns`, or a bad
    turn with no retry left (`limits.retries`)."""
    retry, n = run.retry, run.generation
    if not retry.failures:
        plural = "" if n == 1 else "s"
        return EndEvent(reason="turns", message=f"no final after {n} generation{plural} (limits.turns)")
    if n == limits.turns:
        return EndEvent(
            reason="turns", message=f"the last generation allowed by limits.turns failed: {retry.reason}"
        )
    if retry.failures == 1:
        return EndEvent(reason="retries", message=f"a bad turn (limits.retries=0): {retry.reason}")
    message = f"{retry.failures} bad turns in a row (limits.retries={limits.retries}); last: {retry.reason}"
    return EndEvent(reason="retries", message=message)


def failure_end(run: Run, exc: BaseException) -> EndEvent | None:
    """The ending of a run that raised `exc` (a failure ends it, never escapes), or `None` if the
    consumer's task is being cancelled."""
    signal = run.signal
    if isinstance(exc, Aborted):
        return aborted(signal)
    if isinstance(exc, asyncio.CancelledError):
        if run.guard.owns_cancel():
            return aborted(signal)
        task = asyncio.current_task()
        if task is not None and task.cancelling() == 0:
            return EndEvent(reason="error", message="CancelledError raised inside the run")
        return None
    if signal.aborted:  # a failure on the way out of an abort is the abort
        return aborted(signal)
    return EndEvent(reason="error", message=message_of(exc))
