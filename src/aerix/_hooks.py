"""A run's hooks: calling them, sync or async, and checking what they return.

A hook that raises, or returns a value it may not return, raises `HookError`,
which ends the run with `error`.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from ._checks import unencodable
from ._guard import Aborted
from .abort import AbortSignal
from .errors import describe
from .events import Call
from .options import HookError, Hooks, check_after_call, check_before_call, check_on_final
from .tools import cancelling, json_copy

__all__ = ["after_call", "before_call", "on_final"]


async def before_call(hooks: Hooks, call: Call) -> tuple[Call, str | None, str | None]:
    """Apply `before_call`: the call to run (its input maybe replaced), the refusal if denied,
    and the reason it waits for a decision if paused."""
    if hooks.before_call is None:
        return call, None, None
    outcome = check_before_call(await _call("before_call", hooks.before_call, call))
    if outcome is None:
        return call, None, None
    key, value = outcome
    if key == "input":
        return replace(call, input=json_copy(value)), None, None  # the hook's own dict stays the hook's
    if (problem := unencodable(value)) is not None:
        raise HookError(f"hook before_call: the {key} reason{problem}")
    reason = str.__str__(value)  # a str subclass's own value
    return (call, f"refused: {reason}", None) if key == "deny" else (call, None, reason)


async def after_call(hooks: Hooks, call: Call, text: str) -> str:
    """Apply `after_call` to the result text of a call that ran: the text, or its replacement."""
    if hooks.after_call is None:
        return text
    replaced = check_after_call(await _call("after_call", hooks.after_call, call, text))
    if replaced is not None and (problem := unencodable(replaced)) is not None:
        raise HookError(f"hook after_call: the replacement result{problem}")
    return text if replaced is None else str.__str__(replaced)  # a str subclass's own value


async def on_final(hooks: Hooks, text: str, signal: AbortSignal) -> str | None:
    """Apply `on_final`: the text to continue the run with, or `None` to accept the final.

    Raises:
        Aborted: The hook aborted the run.
    """
    if hooks.on_final is None:
        return None
    more = check_on_final(await _call("on_final", hooks.on_final, text))
    if signal.aborted:
        raise Aborted
    if more is not None and (problem := unencodable(more)) is not None:
        raise HookError(f"hook on_final: the continue text{problem}")
    return None if more is None else str.__str__(more)  # a str subclass's own value


async def _call(name: str, fn: Callable[..., Any], *args: Any) -> Any:
    try:
        out = fn(*args)
        if inspect.isawaitable(out):
            out = await out
    except asyncio.CancelledError as exc:
        if cancelling():  # the run's task is being cancelled (an abort, its consumer)
            raise
        raise HookError(f"hook {name} raised {describe(exc)}") from exc  # the hook's own
    except Exception as exc:
        raise HookError(f"hook {name} raised {describe(exc)}") from exc
    return out
