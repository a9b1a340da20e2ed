"""The playground's sessions: one agent, one run at a time, and a log per browser.

A session is what a browser's cookie names. It holds the settings the page
sent last, the `Agent` built from them, the run in progress (its abort
controller and the task that drives it) and every event of its runs, so a
reloaded page can show the conversation again. Nothing here speaks HTTP.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import math
import secrets
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..abort import AbortController
from ..agent import Agent
from ..errors import AerixError
from ..model import Model
from ..options import Hooks, Limits
from ..tools import Tool

__all__ = ["ModelFactory", "Run", "Session", "SessionStore", "Settings", "parse_settings"]

ModelFactory = Callable[[], "Model | Awaitable[Model]"]
"""Makes the model of a new agent; may be sync (run on a worker thread) or async."""

MAX_SESSIONS = 64
"""Sessions kept at once; the least recently used idle one is dropped first."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Settings:
    """What the page can change: instructions, the picked tools, limits and temperature."""

    instructions: str
    """The start of the system message."""
    tools: tuple[str, ...]
    """The names of the picked tools, in the app's order."""
    limits: Limits
    """The agent's limits."""
    temperature: float | None = None
    """The sampling temperature, or `None` for the engine's default."""
    approve: tuple[str, ...] = ()
    """The picked tools whose calls wait for the page's Approve or Deny (a tool made with
    `needs_approval=True` always does)."""

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON, in the shape `parse_settings` reads."""
        return {
            "instructions": self.instructions,
            "tools": list(self.tools),
            "limits": {
                "turns": self.limits.turns,
                "retries": self.limits.retries,
                "max_tokens": self.limits.max_tokens,
                "result_chars": self.limits.result_chars,
                "repeats": self.limits.repeats,
            },
            "temperature": self.temperature,
            "approve": list(self.approve),
        }


def parse_settings(raw: object, defaults: Settings, tools: Mapping[str, Tool]) -> Settings:
    """Read the settings a page sent; absent keys keep their defaults.

    Args:
        raw: The `settings` object of a run request, or `None`.
        defaults: The app's settings.
        tools: The tools the page may pick from, by name.

    Raises:
        AerixError: `kind="options"`, naming the bad setting and what is allowed.
    """
    if raw is None:
        return defaults
    if not isinstance(raw, Mapping):
        raise AerixError("options", f"settings must be an object, got {_json_type(raw)}")
    known = ("approve", "instructions", "limits", "temperature", "tools")
    unknown = [k for k in raw if k not in known]
    if unknown:
        raise AerixError("options", f"unknown setting {unknown[0]!r}; settings are {', '.join(known)}")
    instructions = raw.get("instructions", defaults.instructions)
    if not isinstance(instructions, str):
        raise AerixError("options", f"instructions must be a string, got {_json_type(instructions)}")
    picked = raw.get("tools", list(defaults.tools))
    if not isinstance(picked, list) or not all(isinstance(n, str) for n in picked):
        raise AerixError("options", f"tools must be a list of tool names, got {picked!r}")
    asked = raw.get("approve", list(defaults.approve))
    if not isinstance(asked, list) or not all(isinstance(n, str) for n in asked):
        raise AerixError("options", f"approve must be a list of tool names, got {asked!r}")
    for name in (*picked, *asked):
        if name not in tools:
            raise AerixError("options", f"unknown tool {name!r}; tools are {', '.join(tools) or 'none'}")
    limits = Limits.of({**defaults.to_dict()["limits"], **_mapping("limits", raw.get("limits", {}))})
    temperature = raw.get("temperature", defaults.temperature)
    if temperature is not None and (
        isinstance(temperature, bool)
        or not isinstance(temperature, int | float)
        or not math.isfinite(temperature)
        or not 0 <= temperature <= 2
    ):
        raise AerixError("options", f"temperature must be a number from 0 to 2, got {temperature!r}")
    return Settings(
        instructions=instructions,
        tools=tuple(n for n in tools if n in picked),
        limits=limits,
        temperature=None if temperature is None else float(temperature),
        approve=tuple(n for n in tools if n in picked and (n in asked or tools[n].needs_approval)),
    )


def _mapping(name: str, value: object) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise AerixError("options", f"{name} must be an object, got {_json_type(value)}")
    return value


def _json_type(value: object) -> str:
    names = {bool: "a boolean", int: "a number", float: "a number", str: "a string", list: "a list"}
    return "null" if value is None else names.get(type(value), type(value).__name__)


@dataclass(kw_only=True, slots=True)
class Run:
    """A run in progress: its controller, its events so far, and where new ones go."""

    prompt: str | None
    """The user's prompt; `None` for a run that resumes a paused one."""
    decisions: Mapping[str, Any] | None = None
    """For a run that resumes a paused one, the page's decisions on its waiting calls."""
    controller: AbortController = field(default_factory=AbortController)
    """Aborted by the Stop button, or when the page closes the stream."""
    events: list[dict[str, Any]] = field(default_factory=list)
    """The run's events as plain JSON (`to_dict()`), in order."""
    queue: asyncio.Queue[dict[str, Any] | None] = field(default_factory=asyncio.Queue)
    """The events for the page's stream; `None` after the last."""
    task: asyncio.Task[None] | None = None
    """The task that drives the run."""
    model: object = None
    """The agent's model, whose `progress` (if it has one) the page shows while the run waits on it."""

    @property
    def finished(self) -> bool:
        """Whether the run has yielded its ending."""
        return bool(self.events) and self.events[-1]["type"] in ("final", "end")

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON: the prompt (or, for a resumed run, the decisions) and the events so far."""
        out: dict[str, Any] = {"prompt": self.prompt, "events": list(self.events)}
        if self.decisions is not None:
            out["decisions"] = dict(self.decisions)
        return out


class Session:
    """One browser's agent, its settings and its runs."""

    def __init__(self, session_id: str) -> None:
        self.id = session_id
        self.agent: Agent | None = None
        self.settings: Settings | None = None
        self.runs: list[Run] = []
        self.current: Run | None = None
        self.starting = False
        self._stop_reason: str | None = None
        """A Stop that came while the run was starting (its model being made): it ends the run."""
        self.last_seen = time.monotonic()

    @property
    def busy(self) -> bool:
        """Whether a run is being started or is in progress."""
        return self.starting or self.current is not None

    def reset(self) -> None:
        """Forget the conversation and the log.

        Raises:
            AerixError: `kind="busy"` during a run.
        """
        if self.busy:
            raise AerixError("busy", "a run is in progress in this session; press Stop, then Reset")
        if self.agent is not None:
            self.agent.reset()
        self.runs.clear()

    @property
    def pending(self) -> list[dict[str, Any]]:
        """The calls that wait for the page's decision, as plain JSON (none when none wait)."""
        return [c.to_dict() for c in self.agent.pending] if self.agent is not None else []

    def stop(self, reason: str) -> bool:
        """Abort the run in progress, or the one being started; return whether there was one."""
        if self.current is None:
            if self.starting:
                self._stop_reason = reason
            return self.starting
        self.current.controller.abort(reason)
        return True

    async def start(
        self,
        prompt: str,
        settings: Settings,
        tools: Mapping[str, Tool],
        factory: ModelFactory,
        hooks: Hooks | None = None,
    ) -> tuple[Run, bool]:
        """Start a run on a background task; its events go to `run.queue`.

        Builds a new agent when there is none or the settings changed (that
        starts a new conversation).

        Returns:
            The run, and whether a conversation was dropped for new settings.

        Raises:
            AerixError: `kind="busy"` during a run; `kind="options"` for
                settings the agent refuses.
        """
        if self.busy:
            raise AerixError(
                "busy", "a run is already in progress in this session; press Stop or wait for its end"
            )
        self.starting, self._stop_reason = True, None
        try:
            dropped = False
            if self.agent is None or settings != self.settings:
                dropped = self.agent is not None and bool(self.agent.messages)
                self.agent = await _build(settings, tools, factory, hooks)
                self.settings = settings
                self.runs.clear()
            run = Run(prompt=prompt, model=self.agent.model)
            events = self.agent.run(prompt, signal=run.controller.signal)
        finally:
            self.starting = False
        self._launch(run, events)
        return run, dropped

    def resume(self, decisions: Mapping[str, Any]) -> Run:
        """Resume the paused run on a background task with the page's decisions; its events
        go to `run.queue`.

        Raises:
            AerixError: `kind="busy"` during a run; `kind="options"` when no call waits, or
                for decisions the agent refuses (missing, extra or bad), naming the ids.
        """
        if self.busy:
            raise AerixError(
                "busy", "a run is already in progress in this session; press Stop or wait for its end"
            )
        if self.agent is None or not self.agent.pending:
            raise AerixError("options", "no call waits for a decision in this session; send a prompt")
        run = Run(prompt=None, decisions=decisions, model=self.agent.model)
        self._launch(run, self.agent.resume(decisions, signal=run.controller.signal))
        return run

    def _launch(self, run: Run, events: AsyncIterator[Any]) -> None:
        """Drive `run`'s events on a background task."""
        self.current = run
        self.runs.append(run)
        if self._stop_reason is not None:  # stopped while it started: it ends at once, with `abort`
            run.controller.abort(self._stop_reason)
            self._stop_reason = None
        run.task = asyncio.create_task(self._drive(run, events), name=f"aerix-playground-{self.id[:6]}")

    async def _drive(self, run: Run, events: Any) -> None:
        try:
            async for ev in events:
                item: dict[str, Any] = ev.to_dict()
                run.events.append(item)
                run.queue.put_nowait(item)
        except Exception as exc:  # the loop turns failures into an `end`; this is a last resort
            if not run.finished:
                item = {"type": "end", "reason": "error", "message": f"{type(exc).__name__}: {exc}"}
                run.events.append(item)
                run.queue.put_nowait(item)
        finally:
            self.current = None
            run.queue.put_nowait(None)


async def _build(
    settings: Settings, tools: Mapping[str, Tool], factory: ModelFactory, hooks: Hooks | None
) -> Agent:
    try:
        model = await asyncio.to_thread(factory)
        if inspect.isawaitable(model):
            model = await model
    except Exception as exc:  # whatever it raises, an `AerixError` too, is the server's, not the request's
        raise ModelFailed(f"{type(exc).__name__}: {exc}") from exc
    if not callable(getattr(model, "chat", None)):
        raise ModelFailed(f"the model factory returned {type(model).__name__}, not a Model (no chat method)")
    return Agent(
        model=model,
        instructions=settings.instructions,
        tools=[_asking(tools[n], n in settings.approve) for n in settings.tools],
        limits=settings.limits,
        generation={} if settings.temperature is None else {"temperature": settings.temperature},
        hooks=hooks,
    )


def _asking(t: Tool, approve: bool) -> Tool:
    """`t`, its calls waiting for the page's decision when `approve` says so."""
    return dataclasses.replace(t, needs_approval=True) if approve and not t.needs_approval else t


class ModelFailed(Exception):
    """The playground's model factory failed, or gave no model: the server's fault (500)."""


class SessionStore:
    """The sessions by id, at most `limit`; the least recently used idle ones go first."""

    def __init__(self, limit: int = MAX_SESSIONS) -> None:
        self._sessions: OrderedDict[str, Session] = OrderedDict()
        self._limit = limit

    def get(self, session_id: str | None) -> Session | None:
        """The session with this id, if it is kept."""
        session = self._sessions.get(session_id) if session_id else None
        if session is not None:
            session.last_seen = time.monotonic()
            self._sessions.move_to_end(session.id)
        return session

    def create(self) -> Session:
        """A new session with a fresh random id."""
        session = Session(secrets.token_urlsafe(24))
        self._sessions[session.id] = session
        self._evict(session)
        return session

    def _evict(self, new: Session) -> None:
        # never the session just made: its client is about to use it (with every other one
        # busy, the store holds one more than its limit until one of them is idle)
        idle = [s for s in self._sessions.values() if not s.busy and s is not new]
        while len(self._sessions) > self._limit and idle:
            del self._sessions[idle.pop(0).id]

    def __len__(self) -> int:
        return len(self._sessions)

    def __iter__(self) -> Any:
        return iter(list(self._sessions.values()))


def tool_summaries(tools: Sequence[Tool]) -> list[dict[str, Any]]:
    """The tools as the page lists them: name, description and fields."""
    return [
        {
            "name": t.name,
            "description": t.description,
            "needs_approval": t.needs_approval,
            "fields": {
                n: {"type": f.type, "required": f.required, "description": f.description}
                for n, f in t.input.items()
            },
        }
        for t in tools
    ]
