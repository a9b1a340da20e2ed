"""The events of a run: frozen dataclasses with a `type` and `to_dict()`.

Every run yields, in order, for each generation: `TextEvent`s, one
`UsageEvent`, then either a `RetryEvent`, or a `TurnEvent` followed by a
`CallEvent` and a `ResultEvent` per call (with `concurrent_calls`, every
`CallEvent` of the turn first, then the `ResultEvent`s, in call order; a call
that waits for a decision gets its two when the run resumes); and ends with
exactly one `FinalEvent` or `EndEvent`. A `TrimEvent` comes before a generation
whenever the engine refused the prompt as too long for its context and the agent
sends less of the conversation (the refused attempt has no other event).
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

__all__ = [
    "AgentEvent",
    "Call",
    "CallEvent",
    "EndEvent",
    "EndReason",
    "FinalEvent",
    "ResultEvent",
    "RetryEvent",
    "TextEvent",
    "TrimEvent",
    "TurnEvent",
    "UsageEvent",
]

EndReason = Literal["turns", "retries", "abort", "error", "paused"]
"""Why a run ended without a final: a limit (`turns`, `retries`), an abort, an
error (an engine failure, or a hook that raised or returned a bad value), or
calls that wait for a person's decision (`paused`: `Agent.resume` goes on)."""

_REPR_LIMIT = 60
"""About the most characters one value takes in a repr."""


def _short(value: object, limit: int = _REPR_LIMIT) -> str:
    """`repr(value)` in about `limit` characters: a longer one keeps its start and an ellipsis."""
    if isinstance(value, str):
        return repr(value if len(value) <= limit else value[: limit - 1] + "…")
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _repr(obj: object) -> str:
    """`Name(field=value, ...)`, each value shortened; `type` is left out (the name says it)."""
    names = [f.name for f in dataclasses.fields(obj) if f.name != "type"]  # type: ignore[arg-type]
    return f"{type(obj).__name__}({', '.join(f'{n}={_short(getattr(obj, n))}' for n in names)})"


def _tally(events: Sequence[object]) -> str:
    """The events by type, in order of first appearance: `"5 events: 2 text, usage, turn, final"`."""
    counts: dict[str, int] = {}
    for ev in events:
        kind = str(getattr(ev, "type", type(ev).__name__))
        counts[kind] = counts.get(kind, 0) + 1
    n = len(events)
    kinds = ", ".join(kind if count == 1 else f"{count} {kind}" for kind, count in counts.items())
    return f"{n} event{'' if n == 1 else 's'}{': ' if kinds else ''}{kinds}"


@dataclass(frozen=True, slots=True)
class Call:
    """One tool call of a turn."""

    id: str
    """Unique within the agent's conversation, e.g. `"call_3"`."""
    tool: str
    """The tool's name."""
    input: dict[str, Any]
    """The input the model sent (or the one `before_call` put in its place)."""

    __repr__ = _repr

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON: `{"id", "tool", "input"}`."""
        return {"id": self.id, "tool": self.tool, "input": self.input}


@dataclass(frozen=True, slots=True)
class TextEvent:
    """Raw model text, as it streams."""

    type: Literal["text"] = field(default="text", init=False)
    text: str
    """The text of one delta."""

    __repr__ = _repr

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON."""
        return {"type": self.type, "text": self.text}


@dataclass(frozen=True, slots=True)
class UsageEvent:
    """Token counts of one generation (one per generation)."""

    type: Literal["usage"] = field(default="usage", init=False)
    prompt_tokens: int
    """Tokens in the prompt, cached ones included."""
    completion_tokens: int
    """Tokens generated."""
    cached_tokens: int = 0
    """Prompt tokens the engine reused from its cache instead of prefilling."""

    __repr__ = _repr

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON."""
        return {
            "type": self.type,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "cached_tokens": self.cached_tokens,
        }


@dataclass(frozen=True, slots=True)
class TurnEvent:
    """A valid turn that calls tools."""

    type: Literal["turn"] = field(default="turn", init=False)
    turn: int
    """The generation's number within the run, from 1."""
    calls: tuple[Call, ...]
    """The calls that will run, in order (at most 8)."""
    thought: str | None = None
    """The turn's thought, if it had one (at most 600 characters)."""

    __repr__ = _repr

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON."""
        return {
            "type": self.type,
            "turn": self.turn,
            "calls": [c.to_dict() for c in self.calls],
            "thought": self.thought,
        }


@dataclass(frozen=True, slots=True)
class CallEvent:
    """A call about to run (after `before_call`), or about to be refused."""

    type: Literal["call"] = field(default="call", init=False)
    id: str
    """The call's id."""
    tool: str
    """The tool's name."""
    input: dict[str, Any]
    """The input the tool will get."""

    __repr__ = _repr

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON."""
        return {"type": self.type, "id": self.id, "tool": self.tool, "input": self.input}


@dataclass(frozen=True, slots=True)
class ResultEvent:
    """A call's result, as the model will see it."""

    type: Literal["result"] = field(default="result", init=False)
    id: str
    """The call's id."""
    tool: str
    """The tool's name."""
    text: str
    """The result text: the tool's output, `error: …` or `refused: …`."""
    error: bool = False
    """True for an input check failure, an exception, or a refusal."""

    __repr__ = _repr

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON."""
        return {
            "type": self.type,
            "id": self.id,
            "tool": self.tool,
            "text": self.text,
            "error": self.error,
        }


@dataclass(frozen=True, slots=True)
class RetryEvent:
    """A cut or bad turn is asked again."""

    type: Literal["retry"] = field(default="retry", init=False)
    turn: int
    """The number of the generation that failed, from 1."""
    reason: str
    """What was wrong with it."""

    __repr__ = _repr

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON."""
        return {"type": self.type, "turn": self.turn, "reason": self.reason}


@dataclass(frozen=True, slots=True)
class TrimEvent:
    """The conversation no longer fits the model's context window: what is sent of it changed.

    After an engine refused the prompt as too long (`aerix.model.ContextExceeded`), the
    agent stops sending its oldest whole exchanges (`dropped` messages), or, when the
    current run alone does not fit, sends its oldest tool results shortened (`dropped`
    0), and asks again: that attempt counts against neither `limits.turns` nor
    `limits.retries`. Nothing is deleted: `Agent.messages` keeps the whole conversation.
    """

    type: Literal["trim"] = field(default="trim", init=False)
    dropped: int
    """How many messages of the conversation this step stopped sending (0: results shortened)."""
    kept: int
    """How many messages after the system message are still sent."""

    __repr__ = _repr

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON."""
        return {"type": self.type, "dropped": self.dropped, "kept": self.kept}


class _Text:
    """The default of `FinalEvent.output`: the text itself (an answer of type `str`)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<the text>"


_TEXT: Any = _Text()


def _typed(text: str, output: object) -> bool:
    """Whether an answer is of a type other than `str`: its output is not its text.

    (The text of a typed answer is the value's JSON, which never equals a string value.)
    """
    return not (isinstance(output, str) and output == text)


def _plain(value: object) -> Any:
    """`value` as plain JSON: dataclasses, Pydantic models and enums to their fields and values.

    Args:
        value: An answer converted to its type (`FinalEvent.output`).
    """
    if isinstance(value, enum.Enum):  # an IntEnum or StrEnum member too, not left an int or str
        return _plain(value.value)
    if value is None or isinstance(value, str | bool | int | float):
        return value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        if hasattr(type(value), "__pydantic_fields__"):  # a pydantic dataclass: the keys of its schema
            import pydantic

            return pydantic.TypeAdapter(type(value)).dump_python(value, mode="json", by_alias=True)
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    dump = getattr(value, "model_dump", None)
    if callable(dump) and not isinstance(value, type):  # a Pydantic model
        return dump(mode="json", by_alias=True)  # the keys of its schema, which the model wrote
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [_plain(v) for v in value]
    return str(value)


@dataclass(frozen=True, slots=True)
class FinalEvent:
    """The run's answer: one of the two endings."""

    type: Literal["final"] = field(default="final", init=False)
    text: str
    """The answer: for an agent whose `output` is not `str`, the value's JSON text."""
    thought: str | None = None
    """The final turn's thought, if it had one."""
    output: Any = _TEXT
    """The answer converted to the agent's `output` type: the text itself for `str`
    (the default), else a value of that type (a dataclass, a list, an int, …)."""

    def __post_init__(self) -> None:
        if self.output is _TEXT:
            object.__setattr__(self, "output", self.text)

    def __repr__(self) -> str:
        shown = f"text={_short(self.text)}, thought={_short(self.thought)}"
        if _typed(self.text, self.output):
            shown += f", output={_short(self.output)}"
        return f"FinalEvent({shown})"

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON; with `output` (as plain JSON) for an answer of a type other than `str`."""
        out: dict[str, Any] = {"type": self.type, "text": self.text, "thought": self.thought}
        if _typed(self.text, self.output):
            out["output"] = _plain(self.output)
        return out


@dataclass(frozen=True, slots=True)
class EndEvent:
    """The run ended without a final: the other ending."""

    type: Literal["end"] = field(default="end", init=False)
    reason: EndReason
    """`"turns"`, `"retries"`, `"abort"`, `"error"` or `"paused"`."""
    message: str = ""
    """What happened, in words (for `error`, the failure's message; for `paused`, the
    calls that wait, each with its reason)."""
    pending: tuple[Call, ...] = ()
    """For `paused`, the calls that wait for a decision, in call order (`Agent.resume`
    takes one for each id); empty for every other reason."""

    def __repr__(self) -> str:
        shown = f"reason={_short(self.reason)}, message={_short(self.message)}"
        if self.pending:
            shown += f", pending={_short(self.pending)}"
        return f"EndEvent({shown})"

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON; with `pending` (a list of the calls' dicts) when calls wait."""
        out: dict[str, Any] = {"type": self.type, "reason": self.reason, "message": self.message}
        if self.pending:
            out["pending"] = [c.to_dict() for c in self.pending]
        return out


AgentEvent: TypeAlias = (
    TextEvent
    | UsageEvent
    | TurnEvent
    | CallEvent
    | ResultEvent
    | RetryEvent
    | TrimEvent
    | FinalEvent
    | EndEvent
)
"""Any event of a run."""
