"""The calls of one turn: `before_call`, the repeat rule, the input check, the tool, `after_call`.

`Calls.play` takes every call of a turn down one path: its step is planned
(`before_call`, the repeat rule, the input check), its `call` event handed on,
its tool started, and its `result` event handed on after `after_call`. The calls
go down it in batches, which is all that sets the two strategies apart: one at a
time (the default), each call is a batch of its own, so its `result` comes
before the next call's `before_call`; at once (`concurrent_calls=True`), the
whole turn is one batch: every `before_call` and input check first, in call
order, then every `call` event before any tool starts, then the tools at once,
each as a task, and their `after_call`s and `result` events in call order.
Leaving early (an abort, a hook that raises, a consumer that closes the run)
cancels every tool still running and waits for it to end.

A call that waits for a person's decision (its tool `needs_approval`, or
`before_call` paused it) goes no further: it has no `call` or `result` event,
and the turn's other calls go on; the loop ends the run `paused` after them.
Once decided (`Agent.resume`), it comes back here without `before_call`: a
refusal is its result, else it goes on to the repeat rule and the input check.

The repeat rule (`Limits.repeats`): one identical call (the same tool and the
same input) may run again that many times within a run. A call past it does
not run; its result says that it repeats an earlier call and quotes that call's
result, and the run's next generation may only answer.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ._approvals import NEEDS_APPROVAL, Verdict
from ._guard import Aborted
from ._hooks import after_call, before_call
from ._json import json_writer
from ._observe import CALL, OBSERVERS
from .abort import AbortSignal
from .events import Call, CallEvent, ResultEvent
from .options import Hooks, Limits
from .tools import Tool, ToolContext, check_input, cut_result, json_copy, readable, run_tool
from .turn import MAX_INTEGER

__all__ = ["Calls", "Played", "Results", "Seen"]

Played = tuple[Call, str | None, tuple[str, bool] | None]
"""A call of a turn as it played: `(call, why it waits, None)`, or `(call, None, (its result
text, whether it is an error))` once done."""


@dataclass(kw_only=True, slots=True)
class Seen:
    """The calls of one run that were run (or checked), for the repeat rule."""

    runs: dict[str, int] = field(default_factory=dict)
    """How many times each call (by tool and input) was let run."""
    last: dict[str, tuple[str, str]] = field(default_factory=dict)
    """The id and result text of the last of each."""
    repeated: bool = False
    """Whether the last turn had a call past `Limits.repeats`."""
    running: list[asyncio.Task[tuple[str, bool]]] = field(default_factory=list)
    """The tools of the turn that run at once, while it plays."""
    played: list[Played] = field(default_factory=list)
    """The calls of the last turn so far, each done or waiting (those that wait first within a
    batch): what a paused turn keeps (`Paused.of_turn`)."""
    waits: bool = False
    """Whether a call of the last turn waits for a decision (one of `played` has no result)."""


@dataclass(kw_only=True, slots=True)
class _Step:
    """One call on its way: refused, a repeat, or let run (its outcome known or awaited)."""

    call: Call
    key: str | None = None
    """The call's tool and input, for the repeat rule; `None` for a refused call."""
    repeat: bool = False
    outcome: tuple[str, bool] | None = None
    """The result text and error flag, once known (a refusal, a failed check)."""
    job: asyncio.Task[tuple[str, bool]] | None = None
    """The tool running as a task, when the calls run at once."""
    wait: str | None = None
    """Why the call waits for a decision, if it does: it goes no further."""

    def event(self) -> CallEvent:
        """The call's `call` event, with its own copy of the input: a consumer that changes
        it changes neither what the tool gets nor what the repeat rule compares."""
        call = self.call
        return CallEvent(id=call.id, tool=call.tool, input=json_copy(call.input))

    @property
    def runs(self) -> bool:
        """Whether the call's tool is to run: not refused, not a repeat, its input checked."""
        return self.key is not None and not self.repeat and self.outcome is None and self.wait is None


Results = list[tuple[str, str, str]]
"""`(call id, tool name, result text)` for each call of a turn, in order."""


@dataclass(kw_only=True, slots=True, frozen=True)
class Calls:
    """How an agent runs the calls of a turn."""

    tools: Mapping[str, Tool]
    hooks: Hooks
    limits: Limits
    concurrent: bool = False
    """Run the tools of a turn at once (the turn is one batch), rather than one at a time."""

    async def play(
        self,
        calls: Sequence[Call],
        seen: Seen,
        signal: AbortSignal,
        done: Callable[[Results], None] | None,
        decided: Mapping[str, Verdict] | None = None,
    ) -> AsyncGenerator[CallEvent | ResultEvent, None]:
        """Run a turn's calls; yield each one's `call` event and `result` event (none for a call
        that waits for a decision: `seen.played` has those too).

        Args:
            calls: The turn's calls, in order, with their ids.
            seen: The run's calls so far (the repeat rule); updated.
            signal: The run's signal, which each tool gets.
            done: Called with the turn's results once the last one is in, before its
                event is handed on (a consumer that stops at that event keeps the turn);
                not called when a call waits (nor when `None`).
            decided: For calls that waited, the decision on each by id: they pass neither
                `before_call` nor the wait again.
        """
        results: Results = []
        steps: list[_Step] = []
        seen.repeated = False
        seen.played.clear()
        seen.waits = False
        try:
            for batch in [calls] if self.concurrent else [(call,) for call in calls]:
                steps = []
                for call in batch:
                    steps.append(await self._step(call, seen, None if decided is None else decided[call.id]))
                    if signal.aborted:  # by a hook: no other hook runs, and the run ends at the next event
                        break
                for step in steps:
                    if step.wait is None:
                        yield step.event()
                    else:
                        seen.played.append((step.call, step.wait, None))
                        seen.waits = True
                if self.concurrent:
                    self._start(steps, seen, signal)
                for step in steps:
                    if step.wait is not None:
                        continue
                    result = await self._finish(step, seen, signal)
                    results.append((result.id, result.tool, result.text))
                    seen.played.append((step.call, None, (result.text, result.error)))
                    if len(results) == len(calls) and done is not None:
                        done(results)
                    yield result
        finally:
            if self.concurrent:
                seen.running.clear()
                await _stop([s.job for s in steps if s.job is not None])

    async def _step(self, call: Call, seen: Seen, verdict: Verdict | None = None) -> _Step:
        """One call's step: `before_call` and whether it waits (or the decision on a call that
        waited), then the repeat rule, then the input check."""
        if verdict is not None:
            if verdict.refusal is not None:
                return _Step(call=call, outcome=(verdict.refusal, True))
            call = verdict.call(call)
        else:
            wait = NEEDS_APPROVAL if self.tools[call.tool].needs_approval else None
            if self.hooks.before_call is not None:
                call, refusal, pause = await before_call(self.hooks, call)
                if refusal is not None:  # a deny wins over a wait
                    return _Step(call=call, outcome=(refusal, True))
                wait = pause if pause is not None else wait
            if wait is not None:
                return _Step(call=call, wait=wait)
        key = _key(call)
        runs = seen.runs.get(key, 0)
        if runs > self.limits.repeats:
            seen.repeated = True
            return _Step(call=call, key=key, repeat=True)
        seen.runs[key] = runs + 1
        step = _Step(call=call, key=key)
        if (problem := check_input(self.tools[call.tool], call.input)) is not None:
            step.outcome = (f"error: {problem}", True)
        return step

    def _start(self, steps: list[_Step], seen: Seen, signal: AbortSignal) -> None:
        """Start the tools of a batch at once, each as a task."""
        for step in steps:
            if step.runs:
                step.job = asyncio.ensure_future(self._run(step.call, signal))
                seen.running.append(step.job)

    def _run(self, call: Call, signal: AbortSignal) -> Coroutine[Any, Any, tuple[str, bool]]:
        """The call's tool, run on its checked input with `signal`."""
        cx = ToolContext(signal=signal, call_id=call.id)
        job = run_tool(self.tools[call.tool], call.input, cx, checked=True)
        return _observed(call.id, job) if OBSERVERS else job

    async def _finish(self, step: _Step, seen: Seen, signal: AbortSignal) -> ResultEvent:
        """The `result` event of a planned call: its refusal, its repeat note, or the tool's
        (awaited, or run now, with `signal`; through `after_call`)."""
        call = step.call
        if step.repeat:
            assert step.key is not None
            # the earlier result was cut already; the note after it stays whole
            text = _repeat(self.limits.repeats, seen.last.get(step.key))
            return ResultEvent(id=call.id, tool=call.tool, text=text, error=True)
        if step.key is None:  # refused by `before_call`
            assert step.outcome is not None
            text, error = step.outcome
        else:
            if step.outcome is not None:  # its input failed the check
                text, error = step.outcome
            else:
                text, error = await (step.job if step.job is not None else self._run(call, signal))
            if signal.aborted:  # a tool stopped by the abort that returned anyway: its turn is not kept
                raise Aborted
            if self.hooks.after_call is not None:
                text = await after_call(self.hooks, call, text)
        text = cut_result(readable(text), self.limits.result_chars)
        if step.key is not None:
            seen.last[step.key] = (call.id, text)
        return ResultEvent(id=call.id, tool=call.tool, text=text, error=error)


async def _observed(call_id: str, job: Coroutine[Any, Any, tuple[str, bool]]) -> tuple[str, bool]:
    """`job`, a call's tool, run with `CALL` saying which call it is (for what observes runs)."""
    token = CALL.set(call_id)
    try:
        return await job
    finally:
        CALL.reset(token)


_sorted_json = json_writer(sort_keys=True, default=repr, check_circular=False)
"""`json.dumps(value, sort_keys=True, default=repr)`, quicker: a call's input is a JSON value
(parsed, or checked as one where a hook or a decision gave it), which never holds itself."""


def _key(call: Call) -> str:
    """A call's tool and input as one string: equal for equal inputs, whatever their key order,
    and whether a number is written `1` or `1.0` (one JSON number)."""
    values = call.input.values()
    same = call.input if _FLAT.issuperset(map(type, values)) else _same_numbers(call.input)
    return call.tool + "\0" + _sorted_json(same)


_FLAT = frozenset({str, int, bool, type(None)})
"""Types of the values of an input that `_same_numbers` leaves as they are (most inputs' only ones)."""


def _same_numbers(value: Any) -> Any:
    """`value` with each whole float as an int (`1.0` → `1`), at any depth."""
    if isinstance(value, float):
        return int(value) if value.is_integer() and abs(value) <= MAX_INTEGER else value
    if isinstance(value, dict):
        return {k: _same_numbers(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_same_numbers(v) for v in value]
    return value


def _repeat(repeats: int, earlier: tuple[str, str] | None) -> str:
    """The result of a call past `Limits.repeats`: it did not run; the earlier call's result."""
    ran = "once" if repeats == 0 else f"{repeats + 1} times"
    if earlier is None:  # not reached: an identical call that was let run has its result first
        return "error: this call repeats an earlier call (the same tool and input), so it was not run again"
    call_id, text = earlier
    # The earlier result first: a small model answering next copies from the start of it.
    # An earlier error keeps its one "error: " (not "error: error: ...").
    head = text if text.startswith("error: ") else f"error: {text}"
    return (
        f"{head}\n(that is the result of {call_id}; this call repeats it, the same tool and input, "
        f"which ran {ran}: limits.repeats={repeats}, so it was not run again)"
    )


async def _stop(jobs: list[asyncio.Task[tuple[str, bool]]]) -> None:
    """Cancel the tools still running and wait for them to end."""
    running = [j for j in jobs if not j.done()]
    for job in running:
        job.cancel()
    if running:
        await asyncio.wait(running)
    for job in jobs:
        if not job.cancelled():
            job.exception()  # retrieved: a failure after the run left is not reported twice
