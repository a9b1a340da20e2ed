"""An agent's conversation: what it keeps between runs, and the calls that wait for a person.

`Agent` inherits `Conversation`; agent.py tells the run, this module keeps what
the runs leave. The conversation grows in one place, `_commit`, a completed turn
at a time, and a session (`_history.Store`) gets each message as it is kept.
What is sent of it when it outgrows the model's context is `_window`'s (`_fit`).
A turn whose calls wait for a decision is kept apart (`_approvals.Paused`,
`_pause`) until `resume` has them decided: each result joins it as it comes
(`_settle`), and the whole turn is kept once none waits.
"""

from __future__ import annotations

import copy
from collections.abc import AsyncGenerator, Iterable, Iterator, Mapping, Sequence
from typing import Any, Self

from ._approvals import Paused, Verdict, check_decisions, check_state, highest_id
from ._calls import Calls
from ._history import Store, check_messages
from ._lifecycle import Lifecycle, Run
from ._window import Window
from .abort import AbortSignal
from .errors import AerixError
from .events import AgentEvent, Call, CallEvent, ResultEvent, TrimEvent
from .model import ChatMessage, ContextExceeded, Model
from .options import Limits
from .sessions import Session
from .tools import Tool
from .turn import render_results

__all__ = ["Conversation", "check_sources"]


def check_sources(state: object, messages: object, session: object) -> None:
    """Refuse more than one conversation to start from."""
    given = [n for n, v in (("state", state), ("messages", messages), ("session", session)) if v is not None]
    if len(given) > 1:
        raise AerixError("options", f"give one of state=, messages= and session=, not {' and '.join(given)}")


class Conversation:
    """The conversation an agent keeps, its session and the calls that wait (`Agent`'s base)."""

    # The agent's own, which the conversation reads.
    _tools: Mapping[str, Tool]
    _life: Lifecycle
    _model: Model
    _limits: Limits
    _system: ChatMessage
    _calls: Calls

    def _open(
        self, state: Mapping[str, Any] | None, messages: Iterable[ChatMessage] | None, session: Session | None
    ) -> None:
        """Start from nothing, or from `state`, `messages` or `session` (a synchronous one's
        now, an async one's before the first run or resume)."""
        self._messages: list[ChatMessage] = []
        self._window = Window()
        """What is sent of the conversation when it outgrows the context (`_window`)."""
        self._next_id = 0
        self._paused: Paused | None = None
        """The turn whose calls wait for a decision, until `resume` completes it."""
        self._store = Store(session)
        if state is not None:
            kept, self._paused = check_state(state, self._tools)
            self._restore(list(kept))
        elif messages is not None:
            self._restore(check_messages(messages))
        self._store.load_now(self._restore, self._restore_pending)

    def _copy(self) -> Self:
        """A copy of this agent, idle, with an empty conversation of its own and no session."""
        twin = copy.copy(self)
        twin._life = Lifecycle()
        twin._open(None, None, None)
        return twin

    @property
    def messages(self) -> Sequence[ChatMessage]:
        """The conversation so far (without the system message): completed turns only."""
        return tuple(ChatMessage(role=m["role"], content=m["content"]) for m in self._messages)

    @property
    def pending(self) -> tuple[Call, ...]:
        """The calls that wait for a decision, in call order (empty when none wait): `resume`
        takes one for each id."""
        return () if self._paused is None else self._paused.pending

    @property
    def session(self) -> Session | None:
        """The session that keeps the conversation, if the agent was given one."""
        return self._store.session

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
        return self._handout_sync(None, signal, self._decide(decisions, signal))

    def _handout(
        self, prompt: str | None, signal: AbortSignal | None, decided: Mapping[str, Verdict] | None = None
    ) -> AsyncGenerator[AgentEvent, None]:
        raise NotImplementedError  # the agent's: a run's events, as `run` and `resume` hand them out

    def _handout_sync(
        self, prompt: str | None, signal: AbortSignal | None, decided: Mapping[str, Verdict] | None = None
    ) -> Iterator[AgentEvent]:
        raise NotImplementedError  # the agent's: as `_handout`, for code without an event loop

    def _decide(self, decisions: object, signal: AbortSignal | None) -> Mapping[str, Verdict]:
        """The checked decisions of a `resume`, before anything changes; an async session not
        loaded yet has them checked once it is (`_loaded`), before the run's first event."""
        if signal is not None and not isinstance(signal, AbortSignal):
            raise AerixError("options", f"signal must be an AbortSignal or None, got {type(signal).__name__}")
        self._life.check_idle()
        if not self._store.loaded:
            return Undecided(decisions)
        self._check_session_pending()
        if self._paused is None:
            raise AerixError("options", _NONE_WAITS)
        return check_decisions(self._paused, decisions)

    def _check_session_pending(self) -> None:
        """Refuse to resume calls that the session no longer keeps waiting as this agent does:
        another agent on the same session decided them (or others wait there now)."""
        known, pending = self._store.pending_now()
        mine = None if self._paused is None else self._paused.to_json()
        if known and pending != mine:
            self._store.reload(self._restore, self._restore_pending)
            waiting = ", ".join(c.id for c in self.pending) or "none"
            raise AerixError(
                "options",
                "the session's waiting calls changed since this agent read them (another agent on "
                f"the same session decided them?); taken again from it: waiting now: {waiting}",
            )

    def _loaded(self, run: Run, prompt: str | None, decided: Mapping[str, Verdict] | None) -> None:
        """Once an async session is loaded, before a run's first event: a run refused while calls
        wait there (`busy`), or a resume's decisions checked against what waits (`options`).

        Raises:
            AerixError: as `run` or `resume` would have, had the session been loaded before.
        """
        try:
            if prompt is not None:
                self._check_waiting()
            elif isinstance(decided, Undecided):
                if self._paused is None:
                    raise AerixError("options", _NONE_WAITS)
                run.decided = check_decisions(self._paused, decided.given)
                run.choice = "none" if self._paused.answer_next else "auto"
        except AerixError as exc:
            raise Refused(exc) from None

    async def _resumed(self, run: Run) -> AsyncGenerator[AgentEvent, None]:
        """A resumed run's first step: the decided calls, each result kept in the paused turn as
        it comes (an abort later loses none), then the whole turn kept (`_settle`)."""
        assert self._paused is not None and run.decided is not None
        played = self._calls.play(self._paused.pending, run.seen, run.signal, None, run.decided)
        began: dict[str, str] = {}  # the decided calls under way: their tools may have run
        try:
            async for ev in played:
                if isinstance(ev, CallEvent):
                    began[ev.id] = ev.tool
                elif isinstance(ev, ResultEvent):
                    del began[ev.id]
                    self._settle(run, ev)
                yield ev
        except BaseException:
            self._unkept(run, began)
            raise
        finally:
            await played.aclose()

    def _unkept(self, run: Run, began: Mapping[str, str]) -> None:
        """A resumed run failed while decided calls ran (a hook raised, an engine failed): their
        tools may have acted, so they wait no more; each gets an error result saying so. After an
        abort they stay waiting (the abort stopped them)."""
        if run.signal.aborted:
            return
        for call_id, tool in list(began.items()):
            self._settle(run, ResultEvent(id=call_id, tool=tool, text=UNKEPT, error=True))

    def _check_waiting(self) -> None:
        """Refuse a new run while calls wait for a decision."""
        if self._paused is not None:
            raise AerixError(
                "busy",
                f"the agent is paused, {self._paused.message}; decide them with agent.resume(...) "
                "or forget them with agent.reset()",
            )

    def _commit(self, run: Run, answer: str | None = None) -> None:
        """Keep a completed turn (the one place a conversation grows): the pending prompt, the
        reply, and the results or the continue text."""
        kept: list[ChatMessage] = [*run.pending, {"role": "assistant", "content": run.reply.text}]
        if answer is not None:
            kept.append({"role": "user", "content": answer})
        run.pending.clear()
        self._messages += kept
        self._store.append(kept)  # a synchronous session's now; an async one's at the next event

    def _pause(self, paused: Paused) -> None:
        """Keep a turn whose calls wait for a decision, until `resume` completes it."""
        self._paused = paused
        self._store.save_pending(paused.to_json())  # a session keeps the waiting calls too

    def _settle(self, run: Run, result: ResultEvent) -> None:
        """A decided call's result: kept in the paused turn as it comes (an abort later loses
        none), and once none waits, the whole turn kept."""
        assert self._paused is not None
        paused = self._paused = self._paused.done(result.id, result.text, result.error)
        if paused.pending:
            self._store.save_pending(paused.to_json())
            return
        self._paused = None
        run.pending[:] = paused.messages[:-1]
        run.reply.text = paused.messages[-1]["content"]  # the paused turn's reply
        self._commit(run, render_results(paused.results, paused.dropped))
        # after the turn is kept: killed in between, the session's stale waiting
        # state is dropped when it is loaded (`_restore_pending`)
        self._store.save_pending(None)
        if paused.answer_next:  # a call past `limits.repeats`: the next turn may only answer
            run.choice = "none"

    def _fit(self, run: Run, refused: ContextExceeded | None = None) -> list[TrimEvent]:
        """Send less of the conversation: after the engine refused it as too long, or before
        sending what would not fit the model's `context_window` (`_window`).

        Raises:
            ContextExceeded: After a refusal, nothing is left to leave out or shorten.
        """
        window, max_tokens = _context_window(self._model), self._limits.max_tokens
        if window is None and refused is None:  # no window to fit: the engine says if it fits
            return []
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


_NONE_WAITS = "no call waits for a decision (agent.pending is empty); use run"

UNKEPT = "error: the run ended before this call's result was kept; it is not run again"
"""The result of a decided call whose resumed run failed while it ran (its tool may have acted)."""


class Refused(Exception):
    """A run that an async session, once loaded, refuses (as `run` or `resume` would have)."""

    def __init__(self, error: AerixError) -> None:
        super().__init__(error.message)
        self.error = error


class Undecided(dict[str, Verdict]):
    """A resume's decisions, given before an async session was loaded: checked once it is."""

    def __init__(self, given: object) -> None:
        super().__init__()
        self.given = given


def _context_window(model: object) -> int | None:
    """The model's `context_window`, where it says one (a whole number of tokens)."""
    try:
        window = getattr(model, "context_window", None)
    except Exception:  # a property that fails says nothing
        return None
    return window if isinstance(window, int) and not isinstance(window, bool) and window > 0 else None
