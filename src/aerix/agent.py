"""The agent: the loop that asks a model for one turn at a time.

A run goes: the prompt → a turn (one generation, parsed; a typed final checked) →
its calls (`_calls`: one at a time, or at once) → their results as the next user
message → the next turn … → a final or a limit. `Agent._play` tells that story as
events; `Agent._run` hands them out and ends the run, in one place, with exactly one
ending (`_ending`, or what stopped it: `failure_end`). How a run starts and is
released is `_lifecycle`'s; what the runs leave (the conversation, the calls that wait
for a decision) is `_conversation`'s, which `Agent` inherits; `as_tool`, `_agent_tool`'s.
"""

from __future__ import annotations

import asyncio
import functools
import types
from collections.abc import AsyncGenerator, AsyncIterator, Iterable, Iterator, Mapping
from contextlib import aclosing
from typing import Any, Never

from ._agent_tool import agent_tool
from ._answer import Answer, answer_of
from ._approvals import Paused, Verdict
from ._calls import Calls, Results
from ._checks import check_agent_options, check_calls_per_turn, check_run_args, check_tool_choice, check_tools
from ._contract import Contract
from ._conversation import Conversation, Refused, check_sources
from ._guard import Aborted, Handout
from ._handover import handover
from ._hooks import on_final
from ._lifecycle import NO_RETRY, Lifecycle, Retry, Run, Started, failure_end, limit_end
from ._observe import observe
from ._portal import iterate
from ._stream import Reply, stream_of
from .abort import AbortSignal
from .events import (
    AgentEvent,
    Call,
    EndEvent,
    FinalEvent,
    RetryEvent,
    TextEvent,
    TurnEvent,
)
from .model import ChatMessage, ContextExceeded, Delta, GenerateOptions, GenerationOptions, Model, ToolFit
from .options import Hooks, Limits, ToolChoice, check_generation
from .sessions import Session
from .tools import Tool, json_copy
from .turn import BadTurn, Turn, fit_text, json_closed, render_results, render_retry

__all__ = ["Agent", "Answer"]


class Agent(Conversation):
    """An agent: a model, instructions, tools, limits and hooks, and a conversation.

    Args:
        model: Any `Model` (an object with `chat(messages, opts)`).
        instructions: The start of the system message.
        tools: The tools the model may call; names must be unique.
        limits: A `Limits`, or a dict with its keys.
        generation: Sampling settings (`GenerationOptions` without
            `max_tokens` and `constraint`, which the loop sets), checked here
            against the bounds every engine takes (`top_p` and `min_p` in
            [0, 1], `top_k` at least 0, ...).
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
        output: The answer's type: `str` (the default, a text answer), any type
            `@tool` takes as an annotation (a dataclass, a `TypedDict`, a
            Pydantic model, `list[int]`, …) or a JSON Schema dict. The final is
            then decoded under its schema, checked (a final that fails is a bad
            turn) and converted: `FinalEvent.output` and `Answer.output`.
        calls_per_turn: The most calls one turn may hold, 1 to 8.
        concurrent_calls: Run the tools of a turn at once (after every
            `before_call` and input check, in call order) rather than one at a time.
        name: The agent's name, for tracing and its `repr`.
        state: What another agent's `state()` gave (through JSON, in another
            process too): this agent, with the same tools, takes its
            conversation and the calls that wait for a decision, and `resume`
            goes on from there.
        messages: The conversation to start from (another agent's `messages`, or
            `json.loads` of them): user and assistant messages, each exactly `role`
            and `content`. The next call id follows the highest its results name.
        session: A `Session` (`aerix.sessions.SQLiteSession`) that keeps the
            conversation and the calls that wait: the agent takes them from it (now
            if its `load` is synchronous, else before the first run or resume) and
            appends every message as it commits it.

    Raises:
        AerixError: `kind="options"`, naming the bad option and value (for
            `state`, its bad part, or a tool of a waiting call that this agent
            does not have).
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
        output: Any = str,
        calls_per_turn: int = 1,
        concurrent_calls: bool = False,
        name: str | None = None,
        state: Mapping[str, Any] | None = None,
        messages: Iterable[ChatMessage] | None = None,
        session: Session | None = None,
        **unknown: Never,
    ) -> None:
        check_agent_options(unknown, model, instructions, constrain, concurrent_calls, name)
        check_sources(state, messages, session)
        self._tools = types.MappingProxyType(check_tools(tools))
        self._tool_list = tuple(self._tools.values())
        self._limits = Limits.of(limits)
        self._hooks = Hooks.of(hooks)
        self._generation = check_generation(generation)
        self._tool_choice = check_tool_choice(tool_choice, self._tools)
        self._contract = Contract(
            instructions,
            self._tool_list,
            output=output,
            calls_per_turn=check_calls_per_turn(calls_per_turn),
            max_tokens=self._limits.max_tokens,
            decodable=constrain,
        )
        self._calls = Calls(
            tools=self._tools, hooks=self._hooks, limits=self._limits, concurrent=concurrent_calls
        )
        self._model = model
        self._constrain = constrain
        self._name = name
        self._instructions = instructions
        self._system: ChatMessage = {"role": "system", "content": self._contract.system}
        self._tool_texts = [fit_text(t) for t in self._tool_list]
        """The tools as a `ToolFit` model reads them."""
        self._life = Lifecycle()
        self._open(state, messages, session)  # the conversation (`_conversation`)

    @property
    def name(self) -> str | None:
        """The agent's name, if it was given one."""
        return self._name

    @property
    def model(self) -> Model:
        """The model the agent generates with."""
        return self._model

    @property
    def tools(self) -> Mapping[str, Tool]:
        """The agent's tools by name (read-only: an agent's tools are fixed when it is made)."""
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
    def busy(self) -> bool:
        """Whether a run is in progress."""
        return self._life.busy

    def as_tool(self, name: str | None = None, description: str | None = None) -> Tool:
        """This agent as a tool another agent may call: input `{"prompt": string}`.

        Each call runs a copy of this agent on a new conversation (`_agent_tool`), so calls
        may run at once. The result is its final's text; any other ending, an error result.

        Args:
            name: The tool's name (default: the agent's `name`, which must then be one).
            description: What the calling model reads (default: the instructions,
                else `Ask the agent NAME.`).

        Raises:
            AerixError: `kind="options"` when there is no name, or it is not a tool name.
        """
        return agent_tool(self, name, description)

    # -- running ---------------------------------------------------------------

    def run(self, prompt: str, *, signal: AbortSignal | None = None) -> AsyncGenerator[AgentEvent, None]:
        """Run the agent on `prompt`, continuing its conversation; yield the run's events.

        The run ends with exactly one `FinalEvent` or `EndEvent`. An abort of
        `signal` ends it with `end(reason="abort")`; cancelling the consuming
        task raises `CancelledError` there and keeps only completed turns.

        Args:
            prompt: The user message, sent to the model unchanged.
            signal: Aborts the run when aborted.

        Raises:
            AerixError: `kind="busy"` if a run is in progress; `kind="options"`
                for a bad signal, or a prompt that is not a string, is empty
                or only whitespace, or holds a surrogate that UTF-8 cannot encode.
        """
        check_run_args(prompt, signal)
        self._life.check_idle()
        self._check_waiting()
        return self._handout(prompt, signal)

    def _handout(
        self, prompt: str | None, signal: AbortSignal | None, decided: Mapping[str, Verdict] | None = None
    ) -> AsyncGenerator[AgentEvent, None]:
        """A run's events, as `run` and `resume` hand them out."""
        started = Started()
        # the one seam for tracing
        events = observe(self, self._run(prompt, signal, started, decided), signal)
        return Handout(events, lambda held: self._life.dropped(started, events, held))

    def _handout_sync(
        self, prompt: str | None, signal: AbortSignal | None, decided: Mapping[str, Verdict] | None = None
    ) -> Iterator[AgentEvent]:
        """A run's events, as `run_sync` and `resume_sync` hand them out."""
        return iterate(
            lambda run_signal: observe(self, self._run(prompt, run_signal, None, decided), run_signal), signal
        )

    async def ask(self, prompt: str, *, signal: AbortSignal | None = None) -> Answer:
        """Run to the end and return the final answer.

        Raises:
            AerixError: `kind="end"` (with `.reason` and `.events`) if the run
                ended without a final; `kind="busy"` or `kind="options"` as `run`.
        """
        events: list[AgentEvent] = [ev async for ev in self.run(prompt, signal=signal)]
        return answer_of(events)

    def run_sync(self, prompt: str, *, signal: AbortSignal | None = None) -> Iterator[AgentEvent]:
        """`run` for code without an event loop (or inside one: a notebook).

        Drives the run on a private event loop, in this thread when none runs
        here, else on a worker thread. Leaving the iteration early aborts the run.
        """
        check_run_args(prompt, signal)
        self._life.check_idle()
        self._check_waiting()
        return self._handout_sync(prompt, signal)

    def ask_sync(self, prompt: str, *, signal: AbortSignal | None = None) -> Answer:
        """`ask` for code without an event loop (or inside one: a notebook)."""
        return answer_of(list(self.run_sync(prompt, signal=signal)))

    @property
    def _current(self) -> Run | None:
        """The run under way, if any (tracing reads its state)."""
        return self._life.current

    async def _run(
        self,
        prompt: str | None,
        user_signal: AbortSignal | None,
        started: Started | None = None,
        decided: Mapping[str, Verdict] | None = None,
    ) -> AsyncGenerator[AgentEvent, None]:
        """A run as its consumer sees it: the events of `_play`, then exactly one ending
        (`started` gets the run, for `Lifecycle.dropped`). A resumed run has no prompt, and
        the decisions on the waiting calls."""
        choice = self._tool_choice
        if decided is not None:  # a resumed run: its first generation is no prompt's first turn
            choice = "none" if self._paused is not None and self._paused.answer_next else "auto"
        run = self._life.start(prompt, user_signal, choice)
        run.decided = decided
        if started is not None:
            started.run = run
        guard, consumer, store = run.guard, run.consumer, self._store
        try:
            loaded = store.loaded
            await store.ready(self._restore, self._restore_pending)
            if not loaded:
                self._loaded(run, prompt, decided)  # raises `Refused` as `run` or `resume` would have
            async with aclosing(self._play(run)) as play:
                guard.arm()
                async for ev in play:
                    # While the consumer has the event, an abort cancels nothing, and a consumer
                    # cancelled there frees the agent. (No reference to its task stays here.)
                    consumer.hand(guard.disarm())
                    yield ev
                    guard.arm()  # raises `Aborted` if the run was aborted, or freed, meanwhile
                    if store.session is not None and store.due:  # an async session's writes
                        await store.flush()
            ending = self._ending(run)
            if store.due:
                await store.flush()
        except Refused as refused:  # as `run` or `resume` raise: no events
            raise refused.error from None
        except (asyncio.CancelledError, Exception) as exc:
            failure = failure_end(run, exc)
            if failure is None:  # the consumer's task is being cancelled: no ending, as Python expects
                raise
            ending = failure
        finally:
            self._life.release(run)  # free the agent before the last event: a consumer may break on it
        yield ending

    async def _play(self, run: Run) -> AsyncGenerator[AgentEvent, None]:
        """What a run does: generations until a final is accepted, a bad turn has no retry
        left, or `limits.turns` is reached (`_ending` says which); or a turn's calls wait."""
        self._window.begin(self._messages, run.pending or (self._paused.messages if self._paused else ()))
        if run.decided is not None:
            async for ev in self._resumed(run):
                yield ev
        else:
            await self._choose_first(run)
        while run.generation < self._limits.turns:
            for trim in self._fit(run):
                yield trim
            run.generation += 1
            reply = run.reply = Reply()  # checks each delta against the stream protocol
            stream = self._generate(run)
            refused: ContextExceeded | None = None
            began = False
            try:
                async for delta in stream:
                    began = True
                    if text := reply.take(delta):
                        yield TextEvent(text=text)
                    reply.note(delta)  # is it the done delta
            except ContextExceeded as exc:
                if began:  # after a delta: an engine failure, as any other
                    raise
                refused = exc
            finally:  # close the stream, whatever happened (an async generator can be closed)
                if (aclose := getattr(stream, "aclose", None)) is not None:
                    await aclose()
            if refused is not None:  # no generation: it counts against neither turns nor retries
                run.generation -= 1
                for trim in self._fit(run, refused):
                    yield trim
                continue
            reply.end(run.signal)
            usage = reply.usage()
            self._window.used(usage.prompt_tokens)
            yield usage
            turn = self._contract.parse(reply.text, run.choice)  # a typed final: checked, converted
            if isinstance(turn, BadTurn):
                retry = self._retry(run, turn)
                if retry is None:
                    return
                yield retry
                continue
            run.retry, run.choice = NO_RETRY, "auto"
            if turn.final is not None:
                if await self._final(run, turn):
                    return
                continue  # `on_final` asked for another turn
            calls = tuple([Call(id=self._new_id(), tool=c.tool, input=c.input) for c in turn.calls])
            # The event's own copies of the inputs: a consumer that changes them changes no call.
            shown = tuple([Call(id=c.id, tool=c.tool, input=json_copy(c.input)) for c in calls])
            yield TurnEvent(turn=run.generation, calls=shown, thought=turn.thought)
            done = functools.partial(self._calls_done, run, turn)  # kept once the last result is in
            played = self._calls.play(calls, run.seen, run.signal, done)
            try:
                async for ev in played:  # each call's `call` event and `result` event
                    yield ev
            finally:  # tools still running at once stop now, not when the event loop collects them
                await played.aclose()
            if run.seen.waits:  # calls wait: the run pauses here
                if run.signal.aborted:  # by a hook, after the turn's last event: the abort wins
                    raise Aborted
                said: ChatMessage = {"role": "assistant", "content": reply.text}
                run.paused = Paused.of_turn((*run.pending, said), calls, run.seen, turn.dropped)
                return

    async def _choose_first(self, run: Run) -> None:
        """Under `"auto"`, let a `ToolFit` model say whether the first turn calls a tool or answers."""
        if run.choice == "auto" and self._constrain and isinstance(self._model, ToolFit) and self._tool_list:
            fit = await self._model.tools_fit(run.prompt, self._tool_texts)
            if fit is not None:
                run.choice = "required" if fit else "none"

    def _generate(self, run: Run) -> AsyncIterator[Delta]:
        """Ask the model for one generation: the conversation so far (what fits of it), under
        the turn's schema."""
        opts: GenerateOptions = {**self._generation}  # type: ignore[typeddict-item]
        opts["max_tokens"] = self._limits.max_tokens
        opts["signal"] = run.signal
        messages = self._window.prompt(self._system, self._messages, [*run.pending, *run.retry.messages])
        opts["handover"] = handover(self._system, messages[1 : len(messages) - len(run.retry.messages)], ())
        if self._constrain:
            opts["constraint"] = {"json": self._contract.schema(run.choice, run.retry.short)}
        return stream_of(self._model.chat(messages, opts))

    def _retry(self, run: Run, bad: BadTurn) -> RetryEvent | None:
        """A bad or cut turn: the retry to ask for, or `None` when none is left (the last
        generation allowed failed, or one turn too many failed in a row)."""
        limits = self._limits
        reason = bad.reason
        cut = run.reply.cut and not json_closed(run.reply.text)
        if cut:
            reason = f"cut: the turn reached max_tokens ({limits.max_tokens}) before its JSON closed"
        failures = run.retry.failures + 1
        last = run.generation == limits.turns or failures > limits.retries
        messages: tuple[ChatMessage, ...] = ()
        if not last:
            final_only = run.choice == "none" or not self._tool_list
            again = render_retry(reason, cut=cut, max_tokens=limits.max_tokens, final_only=final_only)
            messages = ({"role": "assistant", "content": run.reply.text}, {"role": "user", "content": again})
        # `bound`: the turn wrote a number too large; its retry bounds numbers, as that of a cut turn
        short = run.retry.short or cut or bad.bound
        run.retry = Retry(failures=failures, reason=reason, short=short, messages=messages)
        return None if last else RetryEvent(turn=run.generation, reason=reason)

    async def _final(self, run: Run, turn: Turn) -> bool:
        """A final turn: the run's answer (`True`), unless `on_final` continues the run."""
        assert turn.final is not None
        more = await on_final(self._hooks, turn.final, run.signal)
        self._commit(run, more)
        if more is None:
            run.final = FinalEvent(text=turn.final, thought=turn.thought, output=turn.value)
        return more is None

    def _calls_done(self, run: Run, turn: Turn, results: Results) -> None:
        """A turn's last result is in: the turn is complete, and kept before the result is handed out."""
        if run.seen.repeated:  # a call past `limits.repeats`: the next turn may only answer
            run.choice = "none"
        self._commit(run, render_results(results, turn.dropped))

    def _ending(self, run: Run) -> FinalEvent | EndEvent:
        """The ending of a run that played to its end: its final, the calls it waits on, or the
        limit it stopped at (`limit_end`)."""
        if run.final is not None:
            return run.final
        if run.paused is not None:  # the agent waits from now on: `pending`, `resume`
            self._pause(run.paused)
            return EndEvent(reason="paused", message=run.paused.message, pending=run.paused.pending)
        return limit_end(run, self._limits)

    def __repr__(self) -> str:
        name = "" if self._name is None else f"name={self._name!r}, "
        model = type(self._model).__name__
        return f"Agent({name}model={model}, tools={list(self._tools)}, limits={self._limits})"
