"""One model reply, checked against the stream protocol while it streams.

A model's `chat` returns a stream (`stream_of` checks that it does): text deltas,
then exactly one done delta (`aerix.model.Model.chat`).
A stream that breaks the protocol is an engine failure: these checks raise, and
the loop ends the run with `error` and their message.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator

from ._guard import Aborted
from .abort import AbortSignal
from .errors import a_kind
from .events import UsageEvent
from .model import Delta, FinishReason

__all__ = ["Reply", "stream_of"]

_NO_TEXT = object()


def stream_of(returned: object) -> AsyncIterator[Delta]:
    """What a model's `chat` returned, checked to be a stream of deltas.

    Raises:
        TypeError: It is not an async iterator (a coroutine is closed first, so that Python
            does not warn of it never being awaited).
    """
    if not hasattr(returned, "__aiter__"):
        if inspect.iscoroutine(returned):
            returned.close()
            raise TypeError(
                "the model's chat is a coroutine function; it must return an async iterator of Delta "
                "(write it as an async generator: `async def chat(...)` that yields)"
            )
        raise TypeError(
            f"the model's chat returned {type(returned).__name__}, not an async iterator of Delta"
        )
    return returned  # type: ignore[return-value]


class Reply:
    """The deltas of one generation so far: their text and the done delta."""

    __slots__ = ("_done", "_parts", "text")

    def __init__(self) -> None:
        self._parts: list[str] = []
        self._done: Delta | None = None
        self.text = ""
        """The whole text, once the stream has ended."""

    def take(self, delta: Delta) -> str:
        """Check one delta and keep its text; return the text (`""` for none).

        Raises:
            RuntimeError: The delta came after the done delta.
            TypeError: It is not a `Delta`, or its text is not a `str`.
        """
        if self._done is not None:
            raise RuntimeError("the model sent a delta after its done delta")
        text = getattr(delta, "text", _NO_TEXT)  # a Delta, or an object that reads as one
        if text is _NO_TEXT:
            raise TypeError(f"the model's stream yielded {a_kind(delta)}, not a Delta (aerix.model.Delta)")
        if not isinstance(text, str):
            raise TypeError(f"the model sent a delta whose text is {type(text).__name__}")
        if text:
            self._parts.append(text)
        return text

    def note(self, delta: Delta) -> None:
        """Once its text is handed on: keep `delta` if it is the done delta."""
        if delta.done:
            self._done = delta

    def end(self, signal: AbortSignal) -> None:
        """Check, once the stream has ended, that it ended with its done delta; join the text.

        Raises:
            Aborted: It ended without it because the run was aborted (an
                engine may end its stream on the abort).
            RuntimeError: It ended without it otherwise.
        """
        if self._done is None:
            if signal.aborted:
                raise Aborted
            raise RuntimeError("the model's stream ended without its done delta")
        self.text = "".join(self._parts)

    @property
    def cut(self) -> bool:
        """Whether the generation stopped on `max_tokens`."""
        return self.finish == "length"

    @property
    def finish(self) -> FinishReason | None:
        """Why the model stopped, as its done delta says (`None` before it, or if it does not say)."""
        return None if self._done is None else self._done.finish

    def usage(self) -> UsageEvent:
        """The generation's usage event (zeros where the done delta has no usage)."""
        u = self._done.usage if self._done is not None else None
        return UsageEvent(
            prompt_tokens=u.prompt_tokens if u else 0,
            completion_tokens=u.completion_tokens if u else 0,
            cached_tokens=u.cached_tokens if u else 0,
        )
