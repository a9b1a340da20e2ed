"""The one seam between a run and whatever watches it (tracing): `observe`.

The loop has no tracing code. Every run's events pass through `observe` on
their way to the consumer; an observer (`aerix.otel.instrument` adds one)
wraps them and sees each event as the consumer asks for it. With no observer,
`observe` hands back the run's own iterator: not instrumented costs nothing.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable
from contextvars import ContextVar
from typing import Any, TypeAlias

from .abort import AbortSignal
from .events import AgentEvent

__all__ = ["CALL", "OBSERVERS", "Observer", "observe"]

Observer: TypeAlias = Callable[
    [Any, AsyncGenerator[AgentEvent, None], AbortSignal | None], AsyncGenerator[AgentEvent, None]
]
"""Given the agent, a run's events and the signal the run was given, the events to hand on: the
same ones, in order, none added or dropped. It must close the events it got when it is closed
itself."""

OBSERVERS: list[Observer] = []
"""The observers every new run passes through, first added innermost."""

CALL: ContextVar[str | None] = ContextVar("aerix_call", default=None)
"""The id of the call whose tool runs in this context, set while an observed run runs its
tools (not set when nothing observes): a run made inside a tool (an agent as a tool) reads
it, so that an observer knows which call of the outer run it belongs to."""


def observe(
    agent: Any, events: AsyncGenerator[AgentEvent, None], signal: AbortSignal | None
) -> AsyncGenerator[AgentEvent, None]:
    """`events`, passed through every observer (none: `events` itself, at no cost).

    Args:
        agent: The agent whose run the events are.
        events: The run's events, not started yet.
        signal: The signal the run was given (`None`: none), which ends it once aborted.
    """
    if not OBSERVERS:
        return events
    for observer in tuple(OBSERVERS):  # a snapshot: another thread may (un)instrument meanwhile
        events = observer(agent, events, signal)
    return events
