"""The agent: the loop that asks a model for one turn at a time.

A run goes: the prompt → a turn (one generation, parsed) → its calls, each
through `before_call`, the input check, the tool and `after_call` → their
results as the next user message → the next turn … → a final or a limit.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import (
    AsyncIterator,
    Callable,
    Coroutine,
    Iterable,
    Iterator,
    Mapping,
    Sequence,
)
from dataclasses import dataclass, replace
from typing import Any, Never, TypeVar

from .abort import AbortController, AbortSignal
from .errors import AerixError, describe
from .events import (
    AgentEvent,
    Call,
    CallEvent,
    EndEvent,
    FinalEvent,
    ResultEvent,
    RetryEvent,
    TextEvent,
    TurnEvent,
    UsageEvent,
)
from .model import ChatMessage, Delta, GenerateOptions, GenerationOptions, Model, ToolFit
from .options import (
    HookError,
    Hooks,
    Limits,
    ToolChoice,
    check_after_call,
    check_before_call,
    check_generation,
    check_on_final,
)
from .tools import Tool, ToolContext, cut_result, run_tool
from .turn import BadTurn, parse_turn, render_results, render_retry, render_system, turn_schema

__all__ = ["Agent", "Answer"]

T = TypeVar("T")


@dataclass(frozen=True, kw_only=True, slots=True)
class Answer:
    """What `ask` returns: the final's text and every event of the run."""

    text: str
    """The final answer."""
    events: tuple[AgentEvent, ...]
    """Every event of the run, the final last."""


class _Abort(Exception):
    """Unwinds a run that was aborted."""


class _Guard:
    """Turns an abort into a cancellation of the await in progress (as `asyncio.timeout` does).

    The run arms the guard while it awaits the model, a tool or a hook, and
    disarms it while it yields, so an abort never cancels the consumer's code.
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
        if self._signal.aborted:
            raise _Abort
        self._task = asyncio.current_task()

    def disarm(self) -> None:
        self._task = None

    def owns_cancel(self) -> bool:
        """After a `CancelledError`: whether it came only from an abort (then it is undone)."""
        fired, self._fired = self._fired, None
        return fired is not None and fired.uncancel() == 0

    def close(self) -> None:
        self._remove()
        self._task = None
        if self._fired is not None:  # fired, but the cancellation was absorbed on the way
            self._fired.uncancel()
            self._fired = None


class Agent:
    """An agent: a model, instructions, tools, limits and hooks, and a conversation.

    Args:
        model: Any `Model` (an object with `chat(messages, opts)`).
        instructions: The start of the system message.
        tools: The tools the model may call; names must be unique.
        limits: A `Limits`, or a dict with its keys.
        generation: Sampling settings (`GenerationOptions` without
            `max_tokens` and `constraint`, which the loop sets).
        constrain: Send the turn schema as the constraint of every generation.
            Set `False` for a model without constrained decoding; then only
            parse-and-retry applies.
        hooks: A `Hooks`, or a dict with its keys.
        tool_choice: For the first turn of each run: `"auto"` (call tools or
            answer), `"required"` (must call a tool), `"none"` (must answer) or
            a tool's name (must call that tool). Later turns are free. Under
            `"auto"`, a model that is a `ToolFit` (`LlamaCpp`) is asked first
            whether a tool fits the prompt, and the first turn then calls or
            answers accordingly.

    Raises:
        AerixError: `kind="options"`, naming the bad option and value.
    """

    def __init__(
        self,
        model: Model,
        instructions: str = "",
        tools: Iterable[Tool] = (),
        limits: Limits | Mapping[str, Any] | None = None,
        generation: GenerationOptions | Mapping[str, Any] | None = None,
        constrain: bool = True,
        hooks: Hooks | Mapping[str, Any] | None = None,
        tool_choice: ToolChoice = "auto",
        **unknown: Never,
    ) -> None:
        if unknown:
            allowed = "model, instructions, tools, limits, generation, constrain, hooks, tool_choice"
            raise AerixError("options", f"unknown option {next(iter(unknown))!r}; options are {allowed}")
        if not callable(getattr(model, "chat", None)):
            raise AerixError(
                "options",
                f"model must have a chat(messages, opts) method; got {type(model).__name__}",
            )
        if not isinstance(instructions, str):
            raise AerixError("options", f"instructions must be a string, got {type(instructions).__name__}")
        if not isinstance(constrain, bool):
            raise AerixError("options", f"constrain must be True or False, got {constrain!r}")
        self._tools = _check_tools(tools)
        self._tool_list = tuple(self._tools.values())
        self._limits = Limits.of(limits)
        self._hooks = Hooks.of(hooks)
        self._generation = check_generation(generation)
        self._tool_choice = _check_tool_choice(tool_choice, self._tools)
        self._model = model
        self._constrain = constrain
        self._instructions = instructions
        self._system: ChatMessage = {
            "role": "system",
            "content": render_system(instructions, self._tool_list),
        }
        self._schemas: dict[tuple[str, bool], dict[str, Any]] = {}
        self._tool_texts = [f"{t.name}: {t.description}" for t in self._tool_list]
        """The tools as a `ToolFit` model reads them."""
        self._messages: list[ChatMessage] = []
        self._next_id = 0
        self._busy = False
        self._guard: _Guard | None = None
        self._lock = threading.Lock()

    @property
    def model(self) -> Model:
        """The model the agent generates with."""
        return self._model

    @property
    def tools(self) -> Mapping[str, Tool]:
        """The agent's tools by name."""
        return self._tools

    @property
    def limits(self) -> Limits:
        """The agent's limits."""
        return self._limits

    @property
    def system(self) -> str:
        """The system message the model gets before the conversation."""
        return self._system["content"]

    @property
    def messages(self) -> Sequence[ChatMessage]:
        """The conversation so far (without the system message): completed turns only."""
        return tuple(ChatMessage(role=m["role"], content=m["content"]) for m in self._messages)

    @property
    def busy(self) -> bool:
        """Whether a run is in progress."""
        return self._busy

    def reset(self) -> None:
        """Forget the conversation.

        Raises:
            AerixError: `kind="busy"` during a run.
        """
        if self._busy:
            raise AerixError("busy", "cannot reset the agent during a run; abort it or wait for its end")
        self._messages.clear()
        self._next_id = 0

    # -- running ---------------------------------------------------------------

    def run(self, prompt: str, *, signal: AbortSignal | None = None) -> AsyncIterator[AgentEvent]:
        """Run the agent on `prompt`, continuing its conversation; yield the run's events.

        The run ends with exactly one `FinalEvent` or `EndEvent`. An abort of
        `signal` ends it with `end(reason="abort")`; cancelling the consuming
        task raises `CancelledError` there and keeps only completed turns.

        Args:
            prompt: The user message, sent to the model unchanged.
            signal: Aborts the run when aborted.

        Raises:
            AerixError: `kind="busy"` if a run is in progress; `kind="options"`
                for a prompt that is not a string or a bad signal.
        """
        _check_run_args(prompt, signal)
        self._check_idle()
        return self._run(prompt, signal)

    async def ask(self, prompt: str, *, signal: AbortSignal | None = None) -> Answer:
        """Run to the end and return the final answer.

        Raises:
            AerixError: `kind="end"` (with `.reason` and `.events`) if the run
                ended without a final; `kind="busy"` or `kind="options"` as `run`.
        """
        events: list[AgentEvent] = [ev async for ev in self.run(prompt, signal=signal)]
        return _answer(events)

    def run_sync(self, prompt: str, *, signal: AbortSignal | None = None) -> Iterator[AgentEvent]:
        """`run` for code without an event loop (or inside one: a notebook).

        Drives the run on a private event loop, in this thread when none runs
        here, else on a worker thread. Leaving the iteration early aborts the run.
        """
        _check_run_args(prompt, signal)
        self._check_idle()
        return self._run_sync(prompt, signal)

    def ask_sync(self, prompt: str, *, signal: AbortSignal | None = None) -> Answer:
        """`ask` for code without an event loop (or inside one: a notebook)."""
        return _answer(list(self.run_sync(prompt, signal=signal)))

    def _check_idle(self) -> None:
        if self._busy:
            raise AerixError("busy", "the agent is already running; one run at a time per agent")

    def _run_sync(self, prompt: str, signal: AbortSignal | None) -> Iterator[AgentEvent]:
        controller = AbortController()
        unfollow = controller.follow(signal)
        portal = _Portal()
        events = self._run(prompt, controller.signal)
        try:
            while True:
                try:
                    ev: AgentEvent = portal.call(events.__anext__())
                except StopAsyncIteration:
                    return
                yield ev
        finally:
            controller.abort()
            portal.call(events.aclose())  # type: ignore[attr-defined]
            portal.close()
            unfollow()

    async def _run(self, prompt: str, user_signal: AbortSignal | None) -> AsyncIterator[AgentEvent]:
        with self._lock:
            self._check_idle()
            self._busy = True
        controller = AbortController()
        unfollow = controller.follow(user_signal)
        signal = controller.signal
        guard = _Guard(signal)
        self._guard = guard
        limits, tools = self._limits, self._tools
        pending: list[ChatMessage] = [{"role": "user", "content": prompt}]
        retry: list[ChatMessage] = []
        generation, failures, choice, short = 0, 0, self._tool_choice, False
        ending: FinalEvent | EndEvent
        try:
            try:
                guard.arm()
                if (
                    choice == "auto"
                    and self._constrain
                    and isinstance(self._model, ToolFit)
                    and self._tool_list
                ):
                    fit = await self._model.tools_fit(prompt, self._tool_texts)
                    if fit is not None:
                        choice = "required" if fit else "none"
                while True:
                    if generation == limits.turns:
                        ending = EndEvent(
                            reason="turns",
                            message=f"no final after {generation} generations (limits.turns)",
                        )
                        break
                    generation += 1
                    opts: GenerateOptions = {**self._generation}  # type: ignore[typeddict-item]
                    opts["max_tokens"] = limits.max_tokens
                    opts["signal"] = signal
                    if self._constrain:
                        opts["constraint"] = {"json": self._schema(choice, short)}
                    stream = self._model.chat([self._system, *self._messages, *pending, *retry], opts)
                    parts: list[str] = []
                    done: Delta | None = None
                    try:
                        async for delta in stream:
                            if done is not None:
                                raise RuntimeError("the model sent a delta after its done delta")
                            if not isinstance(delta.text, str):
                                raise TypeError(
                                    f"the model sent a delta whose text is {type(delta.text).__name__}"
                                )
                            if delta.text:
                                parts.append(delta.text)
                                guard.disarm()
                                yield TextEvent(text=delta.text)
                                guard.arm()
                            if delta.done:
                                done = delta
                    finally:
                        aclose = getattr(stream, "aclose", None)
                        if aclose is not None:
                            await aclose()
                    if done is None:
                        if signal.aborted:  # the engine ended its stream on the abort
                            raise _Abort
                        raise RuntimeError("the model's stream ended without its done delta")
                    text = "".join(parts)
                    u = done.usage
                    guard.disarm()
                    yield UsageEvent(
                        prompt_tokens=u.prompt_tokens if u else 0,
                        completion_tokens=u.completion_tokens if u else 0,
                        cached_tokens=u.cached_tokens if u else 0,
                    )
                    guard.arm()

                    turn = parse_turn(text, self._tool_list, choice)
                    if isinstance(turn, BadTurn):
                        cut = done.finish == "length"
                        reason = (
                            f"cut: the turn reached max_tokens ({limits.max_tokens}) before its JSON closed"
                            if cut
                            else turn.reason
                        )
                        if generation == limits.turns:
                            ending = EndEvent(
                                reason="turns",
                                message=f"the last generation allowed by limits.turns failed: {reason}",
                            )
                            break
                        if failures == limits.retries:
                            ending = EndEvent(
                                reason="retries",
                                message=f"{failures + 1} bad turns in a row "
                                f"(limits.retries={limits.retries}); last: {reason}",
                            )
                            break
                        failures += 1
                        short = short or cut
                        retry = [
                            {"role": "assistant", "content": text},
                            {
                                "role": "user",
                                "content": render_retry(reason, cut=cut, max_tokens=limits.max_tokens),
                            },
                        ]
                        guard.disarm()
                        yield RetryEvent(turn=generation, reason=reason)
                        guard.arm()
                        continue
                    failures, retry, choice, short = 0, [], "auto", False

                    if turn.final is not None:
                        more = None
                        if self._hooks.on_final is not None:
                            more = check_on_final(
                                await _call_hook("on_final", self._hooks.on_final, turn.final)
                            )
                            guard.arm()
                        pending.append({"role": "assistant", "content": text})
                        if more is None:
                            self._commit(pending)
                            ending = FinalEvent(text=turn.final, thought=turn.thought)
                            break
                        pending.append({"role": "user", "content": more})
                        self._commit(pending)
                        continue

                    calls = tuple(Call(id=self._new_id(), tool=c.tool, input=c.input) for c in turn.calls)
                    guard.disarm()
                    yield TurnEvent(turn=generation, calls=calls, thought=turn.thought)
                    guard.arm()
                    results: list[tuple[str, str, str]] = []
                    for call in calls:
                        text_error = await self._before_call(call)
                        if isinstance(text_error, Call):
                            call = text_error
                            guard.disarm()
                            yield CallEvent(id=call.id, tool=call.tool, input=call.input)
                            guard.arm()
                            out, error = await run_tool(
                                tools[call.tool],
                                call.input,
                                ToolContext(signal=signal, call_id=call.id),
                            )
                            if self._hooks.after_call is not None:
                                replaced = check_after_call(
                                    await _call_hook("after_call", self._hooks.after_call, call, out)
                                )
                                out = out if replaced is None else replaced
                        else:
                            guard.disarm()
                            yield CallEvent(id=call.id, tool=call.tool, input=call.input)
                            guard.arm()
                            out, error = text_error, True
                        out = cut_result(out, limits.result_chars)
                        results.append((call.id, call.tool, out))
                        guard.disarm()
                        yield ResultEvent(id=call.id, tool=call.tool, text=out, error=error)
                        guard.arm()
                    pending.append({"role": "assistant", "content": text})
                    pending.append({"role": "user", "content": render_results(results, turn.dropped)})
                    self._commit(pending)
            except _Abort:
                ending = _aborted(signal)
            except asyncio.CancelledError:
                if guard.owns_cancel():
                    ending = _aborted(signal)
                elif (task := asyncio.current_task()) is not None and task.cancelling() == 0:
                    ending = EndEvent(reason="error", message="CancelledError raised inside the run")
                else:
                    raise
            except HookError as exc:
                ending = _aborted(signal) if signal.aborted else EndEvent(reason="error", message=str(exc))
            except Exception as exc:  # an engine failure: the run's end, never an exception
                ending = (
                    _aborted(signal) if signal.aborted else EndEvent(reason="error", message=describe(exc))
                )
            guard.disarm()
            # free the agent before the last event: a consumer may break on it
            self._release(guard, controller, unfollow)
            yield ending
        finally:
            self._release(guard, controller, unfollow)

    async def _before_call(self, call: Call) -> Call | str:
        """Apply `before_call`: the call to run, or the refusal text."""
        if self._hooks.before_call is None:
            return call
        outcome = check_before_call(await _call_hook("before_call", self._hooks.before_call, call))
        if outcome is None:
            return call
        key, value = outcome
        if key == "deny":
            return f"refused: {value}"
        return replace(call, input=value)

    def _release(self, guard: _Guard, controller: AbortController, unfollow: Callable[[], None]) -> None:
        guard.close()
        controller.abort("run ended")  # stops tools or engines still holding the signal
        unfollow()
        if self._guard is guard:  # not a newer run's state
            self._guard, self._busy = None, False

    def _schema(self, choice: str, short: bool) -> dict[str, Any]:
        """The turn schema for this tool choice, built on first use: most runs need only one
        of them, and each is a few dozen objects that the agent keeps (and the garbage
        collector scans)."""
        schema = self._schemas.get((choice, short))
        if schema is None:
            schema = self._schemas[choice, short] = turn_schema(
                self._tool_list, choice, short=short, max_tokens=self._limits.max_tokens
            )
        return schema

    def _commit(self, pending: list[ChatMessage]) -> None:
        self._messages.extend(pending)
        pending.clear()

    def _new_id(self) -> str:
        self._next_id += 1
        return f"call_{self._next_id}"

    def __repr__(self) -> str:
        return f"Agent(model={type(self._model).__name__}, tools={list(self._tools)}, limits={self._limits})"


async def _call_hook(name: str, fn: Callable[..., Any], *args: Any) -> Any:
    try:
        out = fn(*args)
        if inspect.isawaitable(out):
            out = await out
    except Exception as exc:
        raise HookError(f"hook {name} raised {describe(exc)}") from exc
    return out


def _aborted(signal: AbortSignal) -> EndEvent:
    reason = signal.reason
    return EndEvent(reason="abort", message=reason if isinstance(reason, str) else "aborted")


def _answer(events: list[AgentEvent]) -> Answer:
    last = events[-1] if events else None
    if isinstance(last, FinalEvent):
        return Answer(text=last.text, events=tuple(events))
    reason = last.reason if isinstance(last, EndEvent) else "error"
    message = last.message if isinstance(last, EndEvent) else "the run produced no ending"
    raise AerixError(
        "end", f"the run ended without a final ({reason}): {message}", reason=reason, events=events
    )


def _check_run_args(prompt: object, signal: object) -> None:
    if not isinstance(prompt, str):
        raise AerixError("options", f"prompt must be a string, got {type(prompt).__name__}")
    if signal is not None and not isinstance(signal, AbortSignal):
        raise AerixError("options", f"signal must be an AbortSignal or None, got {type(signal).__name__}")


def _check_tools(tools: object) -> dict[str, Tool]:
    if isinstance(tools, Tool | str | Mapping) or not isinstance(tools, Iterable):
        raise AerixError("options", f"tools must be a list of tools, got {type(tools).__name__}")
    out: dict[str, Tool] = {}
    for i, t in enumerate(tools):
        if not isinstance(t, Tool):
            hint = "; decorate it with @aerix.tool" if callable(t) else ""
            raise AerixError("options", f"tools[{i}] is not a Tool: {t!r}{hint}")
        if t.name in out:
            raise AerixError("options", f"two tools are named {t.name!r}; tool names must be unique")
        out[t.name] = t
    return out


def _check_tool_choice(choice: object, tools: Mapping[str, Tool]) -> str:
    if choice in ("auto", "none"):
        return str(choice)
    if choice == "required" or choice in tools:
        if not tools:
            raise AerixError("options", f"tool_choice={choice!r} needs at least one tool")
        return str(choice)
    allowed = ", ".join(repr(c) for c in ("auto", "required", "none", *tools))
    raise AerixError("options", f"bad tool_choice {choice!r}; one of {allowed}")


class _Portal:
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
        try:
            self.call(self._loop.shutdown_asyncgens())
        finally:
            if self._thread is not None:
                self._loop.call_soon_threadsafe(self._loop.stop)
                self._thread.join()
            self._loop.close()
