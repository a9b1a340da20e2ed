"""The agent: the loop that asks a model for one turn at a time.

A run goes: the prompt → a turn (one generation, parsed; a typed final
checked) → its calls, each through `before_call`, the repeat rule, the input
check, the tool and `after_call` (`_calls`: one at a time, or at once) → their
results as the next user message → the next turn … → a final or a limit.
`Agent._play` tells that story as events; `Agent._run` hands them to the
consumer and ends the run, in one place, with exactly one ending: the final
or the limit `_play` stopped at (`_ending`), or what stopped it (`_failure`).
A completed turn is kept in one place too (`_commit`). How a run starts, is
dropped, abandoned and released is `_lifecycle`'s.

A turn whose calls wait for a person's decision ends its run `paused` once its
other calls are done; the agent keeps the turn (`_approvals.Paused`) until
`resume` runs the decided calls (`_resumed`), keeps the whole turn, and goes on.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import types
from collections.abc import AsyncGenerator, AsyncIterator, Iterable, Iterator, Mapping, Sequence
from contextlib import aclosing
from typing import Any, Never

from ._answer import Answer, answer_of
from ._approvals import Paused, Verdict, check_decisions, check_state, highest_id
from ._calls import Calls, Results
from ._checks import check_agent_options, check_calls_per_turn, check_run_args, check_tool_choice, check_tools
from ._contract import Contract
from ._guard import Aborted, Handout, aborted
from ._handover import handover
from ._history import Store, check_messages
from ._hooks import on_final
from ._lifecycle import NO_RETRY, Lifecycle, Retry, Run, Started
from ._observe import observe
from ._portal import iterate
from ._stream import Reply
from ._window import Window
from .abort import AbortSignal
from .errors import AerixError, message_of
from .events import (
    AgentEvent,
    Call,
    EndEvent,
    FinalEvent,
    ResultEvent,
    RetryEvent,
    TextEvent,
    TrimEvent,
    TurnEvent,
)
from .model import ChatMessage, ContextExceeded, Delta, GenerateOptions, GenerationOptions, Model, ToolFit
from .options import Hooks, Limits, ToolChoice, check_generation
from .sessions import Session
from .tools import Tool, json_copy
from .turn import BadTurn, Turn, fit_text, json_closed, render_results, render_retry

__all__ = ["Agent", "Answer"]


class Agent:
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
        given = [
            n for n, v in (("state", state), ("messages", messages), ("session", session)) if v is not None
        ]
        if len(given) > 1:
            raise AerixError(
                "options", f"give one of state=, messages= and session=, not {' and '.join(given)}"
            )
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
        self._system: ChatMessage = {"role": "system", "content": self._contract.system}
        self._tool_texts = [fit_text(t) for t in self._tool_list]
        """The tools as a `ToolFit` model reads them."""
        self._messages: list[ChatMessage] = []
        self._window = Window()
        """What is sent of the conversation when it outgrows the context (`_window`)."""
        self._next_id = 0
        self._life = Lifecycle()
        self._paused: Paused | None = None
        """The turn whose calls wait for a decision, until `resume` completes it."""
        if state is not None:
            messages, self._paused = check_state(state, self._tools)
            self._messages = list(messages)
            self._next_id = highest_id(messages, self._paused)
        self._store = Store(session)
        if messages is not None:
            self._restore(check_messages(messages))
        self._store.load_now(self._restore, self._restore_pending)

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
    def messages(self) -> Sequence[ChatMessage]:
        """The conversation so far (without the system message): completed turns only."""
        return tuple(ChatMessage(role=m["role"], content=m["content"]) for m in self._messages)

    @property
    def busy(self) -> bool:
        """Whether a run is in progress."""
        return self._life.busy

    @property
    def pending(self) -> tuple[Call, ...]:
        """The calls that wait for a decision, in call order (empty when none wait): `resume`
        takes one for each id."""
        return () if self._paused is None else self._paused.pending

    def state(self) -> dict[str, Any]:
        """The agent's conversation and the calls that wait for a decision, as plain JSON.

        `Agent(state=...)` with the same tools takes it back, in another process too
        (`json.dumps` and `json.loads` on the way), and `resume` goes on from there.

        Returns:
            `{"messages": [...], "pending": None}`, or with the paused turn as `pending`:
            its messages, and each of its calls, waiting with its reason or done with its result.
        """
        paused = None if self._paused is None else self._paused.to_json()
        return {"messages": [dict(m) for m in self.messages], "pending": paused}

    @property
    def session(self) -> Session | None:
        """The session that keeps the conversation, if the agent was given one."""
        return self._store.session

    def reset(self, messages: Iterable[ChatMessage] | None = None) -> None:
        """Forget the conversation and any calls that wait, or start again from `messages`.

        A session is cleared too (a synchronous one before this returns, an async
        one before the next run), then given `messages`.

        Raises:
            AerixError: `kind="busy"` during a run; `kind="options"` for a bad message,
                naming its index (nothing changes then).
        """
        try:
            self._life.check_idle()
        except AerixError:
            raise AerixError(
                "busy", "cannot reset the agent during a run; abort it or wait for its end"
            ) from None
        kept = [] if messages is None else check_messages(messages)
        self._store.reset(kept)
        self._restore(kept)
        self._paused = None

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

    def resume(
        self, decisions: Mapping[str, Any], *, signal: AbortSignal | None = None
    ) -> AsyncGenerator[AgentEvent, None]:
        """Go on with a run that ended `paused`, once each waiting call has its decision.

        A new run, with its own limits: each decided call gets its `call` and
        `result` events (an approved call does not pass `before_call` again), then
        the model gets every result of the paused turn, in call order, and the run
        goes on. It ends with exactly one `FinalEvent` or `EndEvent`, as `run`'s do.

        Args:
            decisions: Each waiting call's id (`pending`) to `True` (run it), `False`
                (refuse it: `refused: denied`), `{"deny": reason}` (`refused: <reason>`)
                or `{"input": {...}}` (run it with that input, checked as usual).
            signal: Aborts the run when aborted.

        Raises:
            AerixError: `kind="options"` when no call waits, for a bad signal, or for a
                missing, extra or bad decision, naming the ids (nothing changes then);
                `kind="busy"` if a run is in progress.

        Example:
            >>> decisions = {"call_2": True, "call_3": {"deny": "not now"}}
            >>> async for ev in agent.resume(decisions):  # doctest: +SKIP
            ...     print(ev)
        """
        return self._handout(None, signal, self._decide(decisions, signal))

    def resume_sync(
        self, decisions: Mapping[str, Any], *, signal: AbortSignal | None = None
    ) -> Iterator[AgentEvent]:
        """`resume` for code without an event loop (or inside one: a notebook), as `run_sync`."""
        decided = self._decide(decisions, signal)
        return iterate(
            lambda run_signal: observe(self, self._run(None, run_signal, None, decided), run_signal), signal
        )

    def _decide(self, decisions: object, signal: AbortSignal | None) -> dict[str, Verdict]:
        """The checked decisions of a `resume`, before anything changes."""
        if signal is not None and not isinstance(signal, AbortSignal):
            raise AerixError("options", f"signal must be an AbortSignal or None, got {type(signal).__name__}")
        self._life.check_idle()
        if self._paused is None:
            raise AerixError("options", "no call waits for a decision (agent.pending is empty); use run")
        return check_decisions(self._paused, decisions)

    def _handout(
        self, prompt: str | None, signal: AbortSignal | None, decided: Mapping[str, Verdict] | None = None
    ) -> AsyncGenerator[AgentEvent, None]:
        """A run's events, as `run` and `resume` hand them out."""
        started = Started()
        # the one seam for tracing
        events = observe(self, self._run(prompt, signal, started, decided), signal)
        return Handout(events, lambda held: self._life.dropped(started, events, held))

    def _check_waiting(self) -> None:
        """Refuse a new run while calls wait for a decision."""
        if self._paused is not None:
            raise AerixError(
                "busy",
                f"the agent is paused, {self._paused.message}; decide them with agent.resume(...) "
                "or forget them with agent.reset()",
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
        return iterate(lambda run_signal: observe(self, self._run(prompt, run_signal), run_signal), signal)

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
        guard, consumer = run.guard, run.consumer
        try:
            await self._store.ready(self._restore, self._restore_pending)
            async with aclosing(self._play(run)) as play:
                guard.arm()
                async for ev in play:
                    # While the consumer has the event, an abort cancels nothing, and a consumer
                    # cancelled there frees the agent. (No reference to its task stays here.)
                    consumer.hand(guard.disarm())
                    yield ev
                    guard.arm()  # raises `Aborted` if the run was aborted, or freed, meanwhile
                    await self._store.flush()  # an async session's writes, as turns complete
            ending = self._ending(run)
            await self._store.flush()
        except (asyncio.CancelledError, Exception) as exc:
            failure = self._failure(run, exc)
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
            if any(s.result is None for s in run.seen.slots):  # calls wait: the run pauses here
                if run.signal.aborted:  # by a hook, after the turn's last event: the abort wins
                    raise Aborted
                said: ChatMessage = {"role": "assistant", "content": reply.text}
                run.paused = Paused.of_turn((*run.pending, said), calls, run.seen, turn.dropped)
                return

    async def _resumed(self, run: Run) -> AsyncGenerator[AgentEvent, None]:
        """A resumed run's first step: the decided calls, each result kept in the paused turn as
        it comes (an abort later loses none), then the whole turn kept."""
        paused = self._paused
        assert paused is not None and run.decided is not None
        played = self._calls.play(paused.pending, run.seen, run.signal, None, run.decided)
        try:
            async for ev in played:
                if isinstance(ev, ResultEvent):
                    paused = self._paused = paused.done(ev.id, ev.text, ev.error)
                    if paused.pending:
                        self._store.save_pending(paused.to_json())
                    else:
                        self._paused = None
                        run.pending[:] = paused.messages[:-1]
                        run.reply.text = paused.messages[-1]["content"]  # the paused turn's reply
                        self._commit(run, render_results(paused.results, paused.dropped))
                        # after the turn is kept: killed in between, the session's stale waiting
                        # state is dropped when it is loaded (`_restore_pending`)
                        self._store.save_pending(None)
                        if paused.answer_next:  # a call past `limits.repeats`: the next turn may only answer
                            run.choice = "none"
                yield ev
        finally:
            await played.aclose()

    async def _choose_first(self, run: Run) -> None:
        """Under `"auto"`, let a `ToolFit` model say whether the first turn calls a tool or answers."""
        if run.choice == "auto" and self._constrain and isinstance(self._model, ToolFit) and self._tool_list:
            fit = await self._model.tools_fit(run.prompt, self._tool_texts)
            if fit is not None:
                run.choice = "required" if fit else "none"

    def _fit(self, run: Run, refused: ContextExceeded | None = None) -> list[TrimEvent]:
        """Send less of the conversation: after the engine refused it as too long, or before
        sending what would not fit the model's `context_window` (`_window`).

        Raises:
            ContextExceeded: After a refusal, nothing is left to leave out or shorten.
        """
        window, max_tokens = _context_window(self._model), self._limits.max_tokens
        system, tail = self._system["content"], [*run.pending, *run.retry.messages]
        if refused is None:
            return self._window.before(
                self._messages, system=system, tail=tail, context_window=window, max_tokens=max_tokens
            )
        return self._window.refused(
            self._messages,
            system=system,
            tail=tail,
            refused=refused,
            context_window=window,
            max_tokens=max_tokens,
        )

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
        stream = self._model.chat(messages, opts)
        if not hasattr(stream, "__aiter__"):
            if inspect.iscoroutine(stream):
                stream.close()  # never awaited: closed, so Python does not warn of it
                raise TypeError(
                    "the model's chat is a coroutine function; it must return an async iterator of Delta "
                    "(write it as an async generator: `async def chat(...)` that yields)"
                )
            raise TypeError(
                f"the model's chat returned {type(stream).__name__}, not an async iterator of Delta"
            )
        return stream

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

    def _commit(self, run: Run, answer: str | None = None) -> None:
        """Keep a completed turn (the one place a conversation grows): the pending prompt, the
        reply, and the results or the continue text."""
        kept: list[ChatMessage] = [*run.pending, {"role": "assistant", "content": run.reply.text}]
        if answer is not None:
            kept.append({"role": "user", "content": answer})
        run.pending.clear()
        self._messages += kept
        self._store.append(kept)  # a synchronous session's now; an async one's at the next event

    def _ending(self, run: Run) -> FinalEvent | EndEvent:
        """The ending of a run that played to its end: its final, or the limit it stopped at."""
        if run.final is not None:
            return run.final
        if run.paused is not None:  # the agent waits from now on: `pending`, `resume`
            self._paused = run.paused
            self._store.save_pending(run.paused.to_json())  # a session keeps the waiting calls too
            return EndEvent(reason="paused", message=run.paused.message, pending=run.paused.pending)
        limits, retry, n = self._limits, run.retry, run.generation
        if not retry.failures:
            plural = "" if n == 1 else "s"
            return EndEvent(reason="turns", message=f"no final after {n} generation{plural} (limits.turns)")
        if n == limits.turns:
            return EndEvent(
                reason="turns", message=f"the last generation allowed by limits.turns failed: {retry.reason}"
            )
        if retry.failures == 1:
            return EndEvent(reason="retries", message=f"a bad turn (limits.retries=0): {retry.reason}")
        message = (
            f"{retry.failures} bad turns in a row (limits.retries={limits.retries}); last: {retry.reason}"
        )
        return EndEvent(reason="retries", message=message)

    def _failure(self, run: Run, exc: BaseException) -> EndEvent | None:
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

    def _restore(self, messages: list[ChatMessage]) -> None:
        """Take `messages` as the conversation; the next call id follows the highest they name."""
        self._messages = messages
        self._window = Window()
        self._next_id = highest_id(messages, self._paused)

    def _restore_pending(self, pending: Mapping[str, Any] | None) -> None:
        """Take the calls a session keeps waiting for a decision (none, if the conversation holds
        their results already: the session kept the completed turn, not yet that none wait)."""
        paused = None if pending is None else Paused.of_json(pending, self._tools, "the session's pending")
        self._paused = None if paused is None or paused.settled_in(self._messages) else paused
        self._next_id = highest_id(self._messages, self._paused)

    def _new_id(self) -> str:
        self._next_id += 1
        return f"call_{self._next_id}"

    def __repr__(self) -> str:
        name = "" if self._name is None else f"name={self._name!r}, "
        model = type(self._model).__name__
        return f"Agent({name}model={model}, tools={list(self._tools)}, limits={self._limits})"


def _context_window(model: object) -> int | None:
    """The model's `context_window`, where it says one (a whole number of tokens)."""
    try:
        window = getattr(model, "context_window", None)
    except Exception:  # a property that fails says nothing
        return None
    return window if isinstance(window, int) and not isinstance(window, bool) and window > 0 else None
