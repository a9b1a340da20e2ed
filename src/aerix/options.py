"""The agent's options: `Limits`, `Hooks`, generation settings, and the checks
that refuse bad ones (and bad hook return values) with a message naming them."""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, fields
from typing import Any, Literal, TypeAlias

from .errors import AerixError, a_kind
from .events import Call
from .model import NUMBER_BOUNDS, GenerationOptions, out_of_bounds

__all__ = [
    "AfterCall",
    "BeforeCall",
    "Hooks",
    "Limits",
    "OnFinal",
    "ToolChoice",
    "check_after_call",
    "check_before_call",
    "check_generation",
    "check_on_final",
    "not_json",
]

ToolChoice: TypeAlias = str
"""`"auto"`, `"required"`, `"none"` or a tool's name."""

BeforeCall: TypeAlias = Mapping[str, Any] | None
"""What `before_call` returns: `None`, `{"deny": reason}`, `{"input": {...}}` or
`{"pause": reason}`."""
AfterCall: TypeAlias = Mapping[str, Any] | None
"""What `after_call` returns: `None` or `{"result": text}`."""
OnFinal: TypeAlias = Mapping[str, Any] | None
"""What `on_final` returns: `None` or `{"continue": text}`."""


def _bad(message: str) -> AerixError:
    return AerixError("options", message)


@dataclass(frozen=True, slots=True)
class Limits:
    """Named bounds on a run. Each is a positive integer (`retries` and `repeats` may be 0).

    Raises:
        AerixError: `kind="options"`, naming the limit, for a value that is not an
            integer or out of its range.

    Example:
        >>> Limits(turns=4, result_chars=2000).turns
        4
    """

    turns: int = 8
    """Generations per run, retries and cut turns included."""
    retries: int = 2
    """Extra attempts after a bad or cut turn, per turn."""
    max_tokens: int = 512
    """Tokens per generation."""
    result_chars: int = 4000
    """Characters of one tool result; the rest is cut, with a note."""
    repeats: int = 1
    """How many times one identical call (the same tool and input) may run again
    within a run. A call past it does not run: its result says that it repeats an
    earlier call and quotes that call's result, and the next generation may only answer."""

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            low = 0 if f.name in ("retries", "repeats") else 1
            if isinstance(value, bool) or not isinstance(value, int):
                raise _bad(f"limits.{f.name} must be an integer, got {value!r}")
            if value < low:
                raise _bad(f"limits.{f.name} must be at least {low}, got {value!r}")
        most = int(NUMBER_BOUNDS["max_tokens"][1])  # what every engine takes (`aerix.model`)
        if self.max_tokens > most:
            raise _bad(f"limits.max_tokens must be at most {most}, got {self.max_tokens!r}")

    @classmethod
    def of(cls, value: Limits | Mapping[str, Any] | None) -> Limits:
        """A `Limits` from a `Limits`, a dict with the same keys, or `None` (the defaults).

        Args:
            value: What an agent was given as its `limits`.

        Raises:
            AerixError: `kind="options"` for an unknown key, a bad value or another type.
        """
        if value is None:
            return cls()
        if isinstance(value, Limits):
            return value
        if isinstance(value, Mapping):
            known = {f.name for f in fields(cls)}
            unknown = [k for k in value if k not in known]
            if unknown:
                raise _bad(f"unknown limit {unknown[0]!r}; limits are {', '.join(sorted(known))}")
            return cls(**value)
        raise _bad(f"limits must be a Limits or a dict, got {type(value).__name__}")


HookFn: TypeAlias = Callable[..., Any | Awaitable[Any]]


@dataclass(frozen=True, slots=True)
class Hooks:
    """Optional callbacks, sync or async, that steer a run.

    A hook that raises, or returns anything but what it may return, ends the
    run with `end(reason="error")`.

    Raises:
        AerixError: `kind="options"` for a hook that is not callable.

    Example:
        >>> def no_deletes(call):
        ...     return {"deny": "deleting is not allowed"} if call.tool == "delete" else None
        >>> hooks = Hooks(before_call=no_deletes)
    """

    before_call: Callable[[Call], BeforeCall | Awaitable[BeforeCall]] | None = None
    """Before each call: `None`, `{"deny": reason}` (the result becomes
    `refused: <reason>`), `{"input": {...}}` (replaces the input, then checked) or
    `{"pause": reason}` (the call waits for a person's decision: the run ends `paused`
    once the turn's other calls are done, and `Agent.resume` goes on)."""
    after_call: Callable[[Call, str], AfterCall | Awaitable[AfterCall]] | None = None
    """After each call that ran (error results too, not refusals): `None` or
    `{"result": text}`, which replaces the result."""
    on_final: Callable[[str], OnFinal | Awaitable[OnFinal]] | None = None
    """On a final: `None`, or `{"continue": text}`: the final stays in the
    conversation and the agent gets another turn with `text` as a user message."""

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if value is not None and not callable(value):
                raise _bad(f"hooks.{f.name} must be callable, got {type(value).__name__}")

    @classmethod
    def of(cls, value: Hooks | Mapping[str, Any] | None) -> Hooks:
        """A `Hooks` from a `Hooks`, a dict with the same keys, or `None`.

        Args:
            value: What an agent was given as its `hooks`.

        Raises:
            AerixError: `kind="options"` for an unknown key, a hook that is not callable
                or another type.
        """
        if value is None:
            return cls()
        if isinstance(value, Hooks):
            return value
        if isinstance(value, Mapping):
            known = {f.name for f in fields(cls)}
            unknown = [k for k in value if k not in known]
            if unknown:
                raise _bad(f"unknown hook {unknown[0]!r}; hooks are {', '.join(sorted(known))}")
            return cls(**value)
        raise _bad(f"hooks must be a Hooks or a dict, got {type(value).__name__}")


_FLOATS = ("temperature", "top_p", "min_p")
_INTS = ("top_k", "seed")


def check_generation(value: Mapping[str, Any] | None) -> GenerationOptions:
    """Check the `generation` option: sampling settings without `max_tokens` and `constraint`.

    Args:
        value: The option as given, or `None`.

    Raises:
        AerixError: `kind="options"`, naming the key, for an unknown key, one the loop
            sets, or a value out of its bounds.
    """
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise _bad(f"generation must be a dict, got {type(value).__name__}")
    out: dict[str, Any] = {}
    for key, v in value.items():
        if key in ("max_tokens", "constraint", "signal"):
            hint = "; use limits.max_tokens" if key == "max_tokens" else " (leave it out)"
            raise _bad(f"generation.{key} is set by the loop{hint}")
        if key in _FLOATS or key in _INTS:  # the bounds every engine checks (`aerix.model`)
            if (problem := out_of_bounds(key, v)) is not None:
                raise _bad(f"generation.{key} {problem}")
        elif key == "stop":
            if (
                isinstance(v, str)
                or not isinstance(v, list | tuple)
                or not all(isinstance(s, str) and s for s in v)
            ):
                raise _bad(f"generation.stop must be a list of non-empty strings, got {v!r}")
            v = list(v)
        else:
            allowed = ", ".join((*_FLOATS, *_INTS, "stop"))
            raise _bad(f"unknown generation option {key!r}; allowed: {allowed}")
        out[key] = v
    return out  # type: ignore[return-value]


class HookError(Exception):
    """A hook raised or returned a value it may not return."""


def _one_key(hook: str, value: object, allowed: tuple[str, ...]) -> tuple[str, Any] | None:
    if value is None:
        return None
    if isinstance(value, Mapping) and len(value) == 1:
        ((key, v),) = value.items()
        if key in allowed:
            return key, v
    shapes = " or ".join(f"{{{k!r}: ...}}" for k in allowed)
    raise HookError(f"hook {hook} returned {value!r}; it may return None or {shapes}")


def check_before_call(value: object) -> tuple[Literal["deny", "input", "pause"], Any] | None:
    """Check what `before_call` returned.

    Args:
        value: The hook's return value.

    Returns:
        `None`, or `("deny", reason)`, `("input", replacement)` or `("pause", reason)`.

    Raises:
        HookError: The value is none of those, or its reason or input is of the wrong kind.
    """
    outcome = _one_key("before_call", value, ("deny", "input", "pause"))
    if outcome is not None:
        key, v = outcome
        if key in ("deny", "pause") and not isinstance(v, str):
            raise HookError(f"hook before_call: the {key} reason must be a string, got {v!r}")
        if key == "input" and not isinstance(v, dict):
            raise HookError(f"hook before_call: the replacement input must be a dict, got {v!r}")
        if key == "input" and (problem := not_json(v, "input")) is not None:
            raise HookError(f"hook before_call: the replacement input must be JSON, but {problem}")
    return outcome  # type: ignore[return-value]


def not_json(value: object, path: str) -> str | None:
    """Where `value` is no JSON value (`"input.tags is {1, 2}, a set"`), else `None`. A tuple
    reads as an array, as `json.dumps` writes it.

    Args:
        value: The value to look through, at any depth.
        path: How a message names `value` (`"input"`).
    """
    if value is None or isinstance(value, str | bool | int):
        return None
    if isinstance(value, float):
        return None if math.isfinite(value) else f"{path} is {value!r}, which JSON has no value for"
    if isinstance(value, list | tuple):
        return next((p for i, v in enumerate(value) if (p := not_json(v, f"{path}[{i}]"))), None)
    if isinstance(value, dict):
        for k, v in value.items():
            if not isinstance(k, str):
                return f"{path} has the key {k!r}, which is not a string"
            if (problem := not_json(v, f"{path}.{k}")) is not None:
                return problem
        return None
    return f"{path} is {value!r}, {a_kind(value)}"


def check_after_call(value: object) -> str | None:
    """Check what `after_call` returned: the replacement result, or `None`.

    Args:
        value: The hook's return value.

    Raises:
        HookError: The value is neither `None` nor `{"result": text}` with a string text.
    """
    outcome = _one_key("after_call", value, ("result",))
    if outcome is None:
        return None
    if not isinstance(outcome[1], str):
        raise HookError(f"hook after_call: the replacement result must be a string, got {outcome[1]!r}")
    return outcome[1]


def check_on_final(value: object) -> str | None:
    """Check what `on_final` returned: the text to continue with, or `None`.

    Args:
        value: The hook's return value.

    Raises:
        HookError: The value is neither `None` nor `{"continue": text}` with some text.
    """
    outcome = _one_key("on_final", value, ("continue",))
    if outcome is None:
        return None
    if not isinstance(outcome[1], str):
        raise HookError(f"hook on_final: the continue text must be a string, got {outcome[1]!r}")
    if not outcome[1] or outcome[1].isspace():  # as a run's prompt may not be
        raise HookError(
            f"hook on_final: the continue text is empty ({outcome[1]!r}); give the model a text to go on"
        )
    return outcome[1]
