"""The model side: the types every engine speaks, and the `Model` protocol.

An engine streams one generation as text `Delta`s followed by exactly one
done `Delta` that carries `finish` and `usage`. Any object with a matching
`chat` method is a `Model`; engines import only this floor, and check the
options of a `chat` call with `checked_options`, so that every engine refuses
the same bad options with the same errors.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, TypedDict, cast, runtime_checkable

from .abort import AbortSignal
from .errors import AerixError

__all__ = [
    "CallMade",
    "ChatMessage",
    "Constraint",
    "ContextExceeded",
    "Delta",
    "FinishReason",
    "GenerateOptions",
    "GenerationOptions",
    "Handover",
    "JsonPath",
    "Model",
    "Role",
    "ToolFit",
    "Usage",
]

Role = Literal["system", "user", "assistant"]
FinishReason = Literal["stop", "length"]


class ChatMessage(TypedDict):
    """One message of a conversation: exactly `role` and `content`."""

    role: Role
    content: str


class Constraint(TypedDict):
    """Decode under this JSON Schema: every generation is a valid instance."""

    json: dict[str, Any]


class GenerationOptions(TypedDict, total=False):
    """Sampling settings; every key is optional."""

    max_tokens: int
    temperature: float
    top_p: float
    top_k: int
    min_p: float
    seed: int
    stop: list[str]


JsonPath = tuple[str | None, ...]
"""Where a value sits in a JSON document: the keys from the root down, `None` for any item
of an array (`("calls", None, "tool")`: the `tool` of any item of `calls`)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class CallMade:
    """A call that a turn wrote, with its result."""

    tool: str
    """The tool's name."""
    input: Any
    """The call's input, as the turn wrote it (a JSON value)."""
    result: str | None = None
    """The tool's own words: its result without what the loop writes around it (no label,
    `error: ` or note); `None` where the conversation holds no result for the call."""


@dataclass(frozen=True, kw_only=True)
class Handover:
    """What the loop tells an engine about the generation it asks for, so that the engine
    never reads it back from the messages' wording (`GenerateOptions["handover"]`).

    An `Agent` gives one with every generation; any engine may ignore it. `LlamaCpp`'s value
    rules read it: the request a call's tool is picked for, the calls a later turn should
    not write again, the texts values copy, where the tool name and the input are written.

    Example:
        A caller that replays a conversation without an `Agent` gives one itself:

            question = "What is the weather in Porto?"
            opts = {"handover": Handover(request=question, first_turn=True, texts=(question,))}
    """

    request: str | None = None
    """The user's latest request: the one this generation answers; `None` if there is none."""
    first_turn: bool = False
    """Whether this generation writes the first turn for `request` (no turn has called a tool
    for it yet; a retry of that turn is still the first)."""
    calls: tuple[CallMade, ...] = ()
    """The calls the turns for `request` wrote so far, in order, each with its result."""
    said: tuple[str, ...] = ()
    """The user's own messages, in order: the requests, not the results the loop sends back
    nor its requests for a turn again."""
    texts: tuple[str, ...] = ()
    """The texts values may be copied from, in order: the user's messages and the tools'
    results, each in its own words (`CallMade.result`)."""
    placeholders: tuple[str, ...] = ()
    """The placeholders of the system message, in order, each once: what stands for a value
    in a JSON example there (`<your answer>` in `{"final":"<your answer>"}`)."""
    tool_path: JsonPath | None = None
    """Where a call's tool name sits in the constraint's JSON; `None`: no calls."""
    input_path: JsonPath | None = None
    """Where a call's input sits in the constraint's JSON; `None`: no calls."""


class GenerateOptions(GenerationOptions, total=False):
    """Sampling settings plus what the loop sets on each generation."""

    constraint: Constraint
    signal: AbortSignal
    handover: Handover
    """What the loop knows of the conversation (`Handover`); any engine may ignore it."""


@dataclass(frozen=True, slots=True)
class Usage:
    """Token counts of one generation."""

    prompt_tokens: int
    """Tokens in the prompt, cached ones included."""
    completion_tokens: int
    """Tokens generated."""
    cached_tokens: int = 0
    """Prompt tokens reused from the engine's cache instead of prefilled."""


@dataclass(frozen=True, slots=True)
class Delta:
    """One piece of a streamed generation."""

    text: str = ""
    """Text generated since the last delta."""
    done: bool = False
    """True on the last delta of a stream, and only there."""
    finish: FinishReason | None = None
    """On the done delta: `"stop"` (ended on its own) or `"length"` (cut by `max_tokens`)."""
    usage: Usage | None = None
    """On the done delta: the generation's token counts."""


class ContextExceeded(Exception):
    """The prompt does not fit in the model's context: raised by an engine before its first delta.

    `LlamaCpp` raises it when the prompt's tokens and the generation's `max_tokens` together
    exceed its `n_ctx`; `OpenAICompatible` turns a server's context-length error into it. An
    `Agent` that meets it leaves older exchanges out and asks again (`TrimEvent`).

    Args:
        prompt_tokens: The prompt's size in tokens, as the engine counted it (0 if unknown).
        context_window: The context's size in tokens (0 if unknown).
        message: What the engine or server said; by default one made from the two sizes.
    """

    def __init__(self, prompt_tokens: int, context_window: int, message: str | None = None) -> None:
        self.prompt_tokens = prompt_tokens
        """The prompt's size in tokens (0 if unknown)."""
        self.context_window = context_window
        """The context's size in tokens (0 if unknown)."""
        if message is None:
            message = (
                f"the prompt has {prompt_tokens} tokens and does not fit in the context of "
                f"{context_window} tokens"
            )
        super().__init__(message)

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.prompt_tokens, self.context_window, str(self)))


@runtime_checkable
class Model(Protocol):
    """Anything that streams a chat generation as `Delta`s."""

    def chat(self, messages: list[ChatMessage], opts: GenerateOptions | None = None) -> AsyncIterator[Delta]:
        """Stream one generation: text deltas, then exactly one done delta.

        Args:
            messages: The conversation, system message first.
            opts: Sampling settings, the JSON constraint and the abort signal.
        """
        ...


@runtime_checkable
class ToolFit(Protocol):
    """A model that can tell whether tools fit a request (optional; an engine may offer it).

    An `Agent` with `tool_choice="auto"` asks it before each run's first turn:
    `True` makes that turn call a tool (as `"required"`), `False` makes it
    answer (as `"none"`), `None` leaves the choice to the model's first key.
    """

    async def tools_fit(self, request: str, tools: Sequence[str]) -> bool | None:
        """Whether one of `tools` (each `"name(fields)"`, `turn.fit_text`) fits
        `request`; `None`: no opinion."""
        ...


_OPTION_KEYS = frozenset(GenerateOptions.__optional_keys__)
NUMBER_BOUNDS: dict[str, tuple[float, float, type]] = {
    "temperature": (0.0, 100.0, float),
    "top_p": (0.0, 1.0, float),
    "top_k": (0, (1 << 31) - 1, int),
    "min_p": (0.0, 1.0, float),
    "max_tokens": (1, (1 << 31) - 1, int),
    "seed": (-(1 << 63), (1 << 64) - 1, int),
}
"""Each number option's bounds, inclusive, and whether it must be an integer."""


def out_of_bounds(key: str, value: object) -> str | None:
    """What is wrong with `value` for the number option `key` (`NUMBER_BOUNDS`): `"must be a
    number in [0.0, 1.0], got 2"`; `None` if nothing is."""
    lo, hi, kind = NUMBER_BOUNDS[key]
    ok = isinstance(value, int if kind is int else int | float) and not isinstance(value, bool)
    if ok and lo <= value <= hi:  # type: ignore[operator]
        return None
    return f"must be {'an integer' if kind is int else 'a number'} in [{lo}, {hi}], got {value!r}"


_ROLES = ("system", "user", "assistant")
"""A message's roles (`ChatMessage`)."""


def checked_options(messages: list[ChatMessage], opts: GenerateOptions | None) -> GenerateOptions:
    """The options (a copy; `{}` for `None`), once checked; the errors name the option, the value and
    what is allowed.

    Raises:
        AerixError: `kind="options"`: an unknown option, a value of the wrong type or out
            of bounds, no messages, or a message without a role (system, user or assistant)
            and a string content.
    """
    if not isinstance(messages, list | tuple):
        raise AerixError("options", f"messages must be a list of messages, got {type(messages).__name__}")
    if not messages:
        raise AerixError("options", "messages is empty: give at least one message")
    if opts is not None and not isinstance(opts, Mapping):
        raise AerixError("options", f"opts must be a dict of options or None, got {type(opts).__name__}")
    o: dict[str, Any] = dict(opts or {})
    unknown = sorted(set(o) - _OPTION_KEYS)
    if unknown:
        raise AerixError("options", f"unknown option(s) {unknown}; allowed: {sorted(_OPTION_KEYS)}")
    for key in NUMBER_BOUNDS:
        if o.get(key) is not None and (problem := out_of_bounds(key, o[key])) is not None:
            raise AerixError("options", f"{key} {problem}")
    stop = o.get("stop") or []
    if not isinstance(stop, list | tuple) or not all(isinstance(s, str) for s in stop):
        raise AerixError("options", f"stop must be a list of strings, got {stop!r}")
    constraint = o.get("constraint")
    if constraint is not None and not (isinstance(constraint, dict) and set(constraint) == {"json"}):
        raise AerixError("options", f'constraint must be {{"json": <JSON Schema>}}, got {constraint!r}')
    if constraint is not None and not isinstance(schema := constraint["json"], dict):
        raise AerixError(
            "options",
            f"constraint: 'json' must be a JSON Schema object (a dict), got {type(schema).__name__}",
        )
    signal = o.get("signal")
    if signal is not None and not isinstance(signal, AbortSignal):
        raise AerixError("options", f"signal must be an AbortSignal, got {signal!r}")
    handover = o.get("handover")
    if handover is not None and not isinstance(handover, Handover):
        raise AerixError(
            "options", f"handover must be an aerix.model.Handover, got {type(handover).__name__}"
        )
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or not isinstance(m.get("content"), str):
            raise AerixError("options", f"each message needs a role and a string content, got {m!r}")
        if m.get("role") not in _ROLES:
            raise AerixError(
                "options",
                f"messages[{i}] needs a role (system, user or assistant) as a string, got {m.get('role')!r}",
            )
    return cast(GenerateOptions, o)
