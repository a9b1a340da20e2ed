"""The one exception aerix raises, and its kinds."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from .events import AgentEvent, EndReason

__all__ = ["AerixError", "ErrorKind", "a_kind", "describe", "message_of"]

ErrorKind = Literal["options", "busy", "end"]
"""`options`: a bad option or definition; `busy`: the agent is already running;
`end`: `ask` ended without a final (`reason` says why: `"paused"` when calls wait
for a decision, which `Agent.pending` holds and `Agent.resume` takes)."""


class AerixError(Exception):
    """An error raised by aerix.

    Args:
        kind: What went wrong: `"options"`, `"busy"` or `"end"`.
        message: What was wrong, what was given and what is allowed.
        reason: For `kind="end"`, why the run ended (an `EndReason`: `"paused"` when
            calls wait for a decision).
        events: For `kind="end"`, every event of the run.

    Example:
        >>> from aerix import Limits
        >>> try:
        ...     Limits(turns=0)
        ... except AerixError as err:
        ...     print(err.kind, "|", err.message)
        options | limits.turns must be at least 1, got 0
    """

    kind: ErrorKind
    """What went wrong: `"options"`, `"busy"` or `"end"`."""
    message: str
    """What was wrong, what was given and what is allowed (`str(err)` adds the kind)."""
    reason: EndReason | None
    """For `kind="end"`, why the run ended (`"paused"`: calls wait for a decision,
    `Agent.resume` goes on); else `None`."""
    events: tuple[AgentEvent, ...]
    """For `kind="end"`, every event of the run; else empty."""

    def __init__(
        self,
        kind: ErrorKind,
        message: str,
        *,
        reason: EndReason | None = None,
        events: Sequence[AgentEvent] = (),
    ) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.reason = reason
        self.events = tuple(events)

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickle and copy it whole: its kind, message, reason and events (and any attributes
        set on it since)."""
        return (_rebuilt, (self.kind, self.message, self.reason, self.events), self.__dict__)

    def __str__(self) -> str:
        return f"[{self.kind}] {self.message}"

    def __repr__(self) -> str:
        return f"AerixError(kind={self.kind!r}, message={self.message!r})"


def _rebuilt(
    kind: ErrorKind, message: str, reason: EndReason | None, events: tuple[AgentEvent, ...]
) -> AerixError:
    return AerixError(kind, message, reason=reason, events=events)


def describe(exc: BaseException) -> str:
    """An exception in one line: `Type: message`, or `Type` when it has none.

    Never raises, even for an exception whose `str()` does.

    Args:
        exc: The exception to describe.

    Example:
        >>> describe(ValueError("bad unit 'furlong'")), describe(TimeoutError())
        ("ValueError: bad unit 'furlong'", 'TimeoutError')
    """
    text = _said(exc)
    text = "(its message cannot be printed)" if text is None else text
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def message_of(exc: BaseException) -> str:
    """An exception's own message (`str(exc)`): what a tool's error result and an engine
    failure's `end` event say.

    Its type's name where the message says nothing alone: none (`raise TimeoutError()`),
    or a `KeyError`'s, which is only the missing key (`KeyError: 'city'`). Never raises,
    even for an exception whose `str()` does.

    Args:
        exc: The exception whose message to give.

    Example:
        >>> message_of(ValueError("bad unit")), message_of(KeyError("city"))
        ('bad unit', "KeyError: 'city'")
    """
    text = _said(exc)
    if not text:
        return type(exc).__name__
    return f"{type(exc).__name__}: {text}" if isinstance(exc, KeyError) else text


def a_kind(value: object) -> str:
    """`value`'s type as a message names it: `a str`, `an int`, `None`.

    Args:
        value: Any value.
    """
    if value is None:
        return "None"
    name = type(value).__name__
    return f"an {name}" if name[0].lower() in "aeiou" else f"a {name}"


def _said(exc: BaseException) -> str | None:
    """`str(exc)`, or `None` where that raises."""
    try:
        return str(exc)
    except Exception:
        return None
