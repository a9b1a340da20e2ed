"""`ScriptedModel`: a `Model` that plays scripted turns, for testing agents.

Examples:
    >>> import asyncio
    >>> from aerix import Agent, tool
    >>> from aerix.testing import ScriptedModel
    >>> @tool
    ... def add(a: int, b: int) -> int:
    ...     '''Add two integers.'''
    ...     return a + b
    >>> model = ScriptedModel([
    ...     '{"calls":[{"tool":"add","input":{"a":2,"b":3}}]}',
    ...     lambda messages: '{"final":"' + messages[-1]["content"].split()[-1] + '"}',
    ... ])
    >>> agent = Agent(model=model, tools=[add])
    >>> asyncio.run(agent.ask("What is 2 + 3?")).text
    '5'
    >>> all("constraint" in call.opts for call in model.calls)
    True
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from .errors import AerixError
from .model import ChatMessage, ContextExceeded, Delta, FinishReason, GenerateOptions, Usage

__all__ = ["Cut", "Fail", "NoDone", "ScriptedCall", "ScriptedModel", "Stall", "Step"]


@dataclass(frozen=True, kw_only=True, slots=True)
class Cut:
    """Stream `text`, then stop as if `max_tokens` ran out (`finish="length"`)."""

    text: str = '{"calls":[{"tool":"'
    """What streams before the cut (by default, a turn cut inside its first call)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Fail:
    """Stream `text`, then raise `error` mid-stream (an engine failure)."""

    text: str = ""
    """What streams before the failure."""
    error: BaseException | str = "scripted engine failure"
    """The exception raised; a string is raised as a `RuntimeError` with that message."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Stall:
    """Stream `text`, then hang until the generation's signal is aborted."""

    text: str = ""
    """What streams before the stall."""


@dataclass(frozen=True, kw_only=True, slots=True)
class NoDone:
    """Stream `text`, then end the stream without its done delta (a broken engine)."""

    text: str = ""
    """What streams before the stream ends."""


Step: TypeAlias = "str | Cut | Fail | Stall | NoDone"
"""What one generation plays: a turn's text, or a way for the engine to misbehave."""
Script: TypeAlias = "Step | Callable[[list[ChatMessage]], Step]"
"""A script entry: a step, or a function of the messages that returns one."""


@dataclass(frozen=True, kw_only=True, slots=True)
class ScriptedCall:
    """One recorded generation: what the model was given."""

    messages: list[ChatMessage]
    """A copy of the messages, system message first."""
    opts: dict[str, Any] = field(default_factory=dict)
    """A copy of the options (`max_tokens`, `constraint`, `signal`, sampling)."""
    refused: bool = False
    """Whether the model refused the prompt as too long for its `context_window`
    (`ContextExceeded`, no script entry played)."""


class ScriptedModel:
    """A `Model` that plays a script, one entry per generation, and records every call.

    Args:
        turns: One entry per generation, in order: the turn text (a `str`),
            a `Cut`, `Fail`, `Stall` or `NoDone`, or a callable that gets the
            messages and returns one of those.
        chunk_size: Stream the text in deltas of this many characters
            (default: one delta with the whole text).
        context_window: How many tokens the model's context holds (`None`: no
            limit). A prompt whose size and the generation's `max_tokens` (1
            without it) together exceed it is refused with `ContextExceeded`
            before any delta, as `LlamaCpp` refuses it, and plays no entry:
            a test can watch an `Agent` fit its conversation to a small window.

    A generation past the end of the script fails with an error that says so.
    Token counts are estimates: a message's content at 4 characters a token,
    rounded up, plus 4 tokens for each message (`prompt_tokens`); `cached_tokens`
    counts the leading messages equal to the previous call's, so a test can
    check that the conversation only appends.

    Example:
        >>> import asyncio
        >>> from aerix.model import ContextExceeded
        >>> model = ScriptedModel(['{"final":"ok"}'], context_window=64)
        >>> ScriptedModel.prompt_tokens([{"role": "user", "content": "x" * 200}])
        54
        >>> async def ask(words: int) -> str:
        ...     try:
        ...         return "".join([d.text async for d in model.chat(
        ...             [{"role": "user", "content": "x" * words}], {"max_tokens": 16})])
        ...     except ContextExceeded as exc:
        ...         return str(exc)
        >>> asyncio.run(ask(200))
        'the prompt has 54 tokens and does not fit in the context of 64 tokens with max_tokens=16'
        >>> asyncio.run(ask(20))
        '{"final":"ok"}'
    """

    def __init__(
        self,
        turns: Iterable[Script] = (),
        *,
        chunk_size: int | None = None,
        context_window: int | None = None,
    ) -> None:
        if chunk_size is not None and (
            isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 1
        ):
            raise AerixError(
                "options",
                f"ScriptedModel: chunk_size must be a whole number of characters >= 1, got {chunk_size!r}",
            )
        if context_window is not None and (
            isinstance(context_window, bool) or not isinstance(context_window, int) or context_window < 1
        ):
            raise AerixError(
                "options",
                "ScriptedModel: context_window must be a whole number of tokens >= 1 (or None: no limit), "
                f"got {context_window!r}",
            )
        if isinstance(turns, str | bytes):
            raise AerixError(
                "options",
                "ScriptedModel: turns must be a list of entries, got one string; "
                f"wrap it in a list: ScriptedModel([{_short(turns)}])",
            )
        self._script = _entries(turns, 0)
        self._chunk = chunk_size
        self.context_window = context_window
        """How many tokens the context holds; `None`: no limit."""
        self._played = 0
        """Script entries played (a generation past the script's end plays none)."""
        self.calls: list[ScriptedCall] = []
        """Every generation asked for, in order."""
        self._last: list[ChatMessage] = []
        self._sizes: list[int] = []
        self._cached_total = 0

    @staticmethod
    def prompt_tokens(messages: Iterable[ChatMessage]) -> int:
        """The size of a prompt in this model's tokens: each message's content at 4 characters
        a token, rounded up, plus 4 tokens a message."""
        return sum(_tokens(m["content"]) + _PER_MESSAGE for m in messages)

    @property
    def remaining(self) -> int:
        """Script entries not played yet."""
        return len(self._script) - self._played

    def add(self, *entries: Script) -> None:
        """Append entries to the script (each checked as `ScriptedModel` checks its `turns`)."""
        self._script.extend(_entries(entries, len(self._script)))

    async def chat(
        self, messages: list[ChatMessage], opts: GenerateOptions | None = None
    ) -> AsyncIterator[Delta]:
        """Play the next script entry as a stream of deltas, and record the call.

        Args:
            messages: The conversation, system message first (copied into `calls`).
            opts: The generation's options (copied into `calls`).

        Raises:
            ContextExceeded: The prompt and `max_tokens` do not fit in `context_window`.
            RuntimeError: No entry is left to play.
            TypeError: A callable entry returned something other than a step.
            Exception: A `Fail` entry's error, after its text.
        """
        opts = opts or {}
        refusal = self._refusal(messages, opts.get("max_tokens"))
        # the loop never mutates a message it has sent, so a shallow copy is a snapshot
        self.calls.append(ScriptedCall(messages=list(messages), opts=dict(opts), refused=refusal is not None))
        if refusal is not None:
            raise refusal
        prompt_tokens, cached = self._count(messages)
        if self._played >= len(self._script):  # entries added later are played from here
            raise RuntimeError(f"ScriptedModel: no script entry left for generation {len(self.calls)}")
        entry = self._script[self._played]
        self._played += 1
        step = entry(messages) if callable(entry) else entry
        if not isinstance(step, _STEPS):
            raise TypeError(
                f"ScriptedModel: script entry {self._played - 1} (a callable) returned "
                f"{type(step).__name__}; it must return the turn's text (a str), "
                "or a Cut, Fail, Stall or NoDone"
            )
        text = step if isinstance(step, str) else step.text
        signal = opts.get("signal")
        step_size = self._chunk or max(1, len(text))
        for i in range(0, len(text), step_size):
            if signal is not None and signal.aborted:
                return
            yield Delta(text=text[i : i + step_size])
        if isinstance(step, Fail):
            raise step.error if isinstance(step.error, BaseException) else RuntimeError(step.error)
        if isinstance(step, Stall):
            if signal is None:
                await asyncio.Event().wait()
            else:
                await signal.wait()
            return
        if isinstance(step, NoDone):
            return
        finish: FinishReason = "length" if isinstance(step, Cut) else "stop"
        usage = Usage(prompt_tokens=prompt_tokens, completion_tokens=_tokens(text), cached_tokens=cached)
        yield Delta(done=True, finish=finish, usage=usage)

    def _refusal(self, messages: list[ChatMessage], max_tokens: int | None) -> ContextExceeded | None:
        """The refusal of a prompt that leaves no room for `max_tokens` in `context_window`."""
        window = self.context_window
        if window is None:  # no window: nothing to count
            return None
        size = self.prompt_tokens(messages)
        if size + (max_tokens or 1) <= window:
            return None
        room = "" if max_tokens is None else f" with max_tokens={max_tokens}"
        return ContextExceeded(
            size,
            window,
            f"the prompt has {size} tokens and does not fit in the context of {window} tokens{room}",
        )

    def _count(self, messages: list[ChatMessage]) -> tuple[int, int]:
        last, sizes = self._last, self._sizes
        n = len(last)
        if len(messages) >= n and messages[:n] == last:  # the usual case: it only appended
            same = n
        else:
            same = 0
            for old, new in zip(last, messages, strict=False):
                if old != new:
                    break
                same += 1
            del sizes[same:]
            self._cached_total = sum(sizes)
        cached = self._cached_total
        added = [_tokens(m["content"]) + _PER_MESSAGE for m in messages[same:]]
        sizes.extend(added)
        self._cached_total = cached + sum(added)
        self._last = list(messages)
        return self._cached_total, cached


_STEPS = (str, Cut, Fail, Stall, NoDone)
_PER_MESSAGE = 4
"""Tokens a message costs beyond its content (its role and the template's marks)."""


def _entries(entries: Iterable[object], first: int) -> list[Script]:
    """Script entries, checked: each a step or a callable (`first`: the index of the first)."""
    out: list[Script] = []
    for i, entry in enumerate(entries, first):
        if not isinstance(entry, _STEPS) and not callable(entry):
            raise AerixError(
                "options",
                f"ScriptedModel: script entry {i} is {type(entry).__name__} {_short(entry)}; an entry is "
                "the turn's text (a str), a Cut, Fail, Stall or NoDone, or a callable that gets the "
                "messages and returns one of those",
            )
        out.append(entry)
    return out


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _tokens(text: str) -> int:
    return (len(text) + 3) // 4
