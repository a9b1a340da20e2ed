"""Server-sent events and OpenAI chat-completion chunks, parsed without I/O.

`SseDecoder` turns the lines of an event stream into events (the WHATWG
event-stream format: `data:` lines gathered until a blank line, `:` comments
skipped). `parse_chunk` reads one `chat.completion.chunk` into the text, the
finish reason and the usage it carries, and raises `ChunkError` naming what
was wrong with anything else.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ...model import FinishReason, Usage

__all__ = [
    "DONE",
    "ChunkError",
    "ChunkInfo",
    "SseDecoder",
    "SseEvent",
    "error_message",
    "excerpt",
    "finish_reason",
    "parse_chunk",
]

DONE = "[DONE]"
"""The data of the event that ends an OpenAI stream."""


@dataclass(frozen=True, kw_only=True, slots=True)
class SseEvent:
    """One dispatched server-sent event."""

    event: str
    """The `event:` field, `"message"` when the server sent none."""
    data: str
    """The `data:` lines of the event, joined by newlines."""


class SseDecoder:
    """Gathers event-stream lines into `SseEvent`s."""

    __slots__ = ("_data", "_event")

    def __init__(self) -> None:
        self._data: list[str] = []
        self._event = ""

    def feed(self, line: str) -> SseEvent | None:
        """Take one line (without its line ending); return an event when a blank line ends one."""
        if not line:
            return self._dispatch()
        if line.startswith(":"):  # a comment, e.g. a keep-alive ping
            return None
        name, colon, value = line.partition(":")
        if colon and value.startswith(" "):
            value = value[1:]
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event = value
        return None

    def flush(self) -> SseEvent | None:
        """Return the event still open at the end of the stream, if any.

        The standard drops an event that no blank line ended; servers that omit
        the last blank line are common enough that aerix keeps it.
        """
        return self._dispatch()

    def _dispatch(self) -> SseEvent | None:
        data, event = self._data, self._event
        self._data, self._event = [], ""
        if not data:
            return None
        return SseEvent(event=event or "message", data="\n".join(data))


class ChunkError(ValueError):
    """A stream chunk that is not a chat-completion chunk; the message says why."""


@dataclass(frozen=True, kw_only=True, slots=True)
class ChunkInfo:
    """What one chat-completion chunk carries."""

    text: str = ""
    """Content generated since the last chunk."""
    finish: str | None = None
    """The raw `finish_reason`, when this chunk ends the choice."""
    usage: Usage | None = None
    """Token counts, when this chunk reports them (usually the last one)."""


def excerpt(text: str, limit: int = 200) -> str:
    """`text` quoted and cut to `limit` characters, for error messages."""
    return repr(text if len(text) <= limit else text[:limit] + "…")


def parse_chunk(data: str) -> ChunkInfo:
    """Read the `data` of one stream event as a chat-completion chunk.

    Raises:
        ChunkError: The data is not JSON, not a chunk, or an error object.
    """
    try:
        obj = json.loads(data)
    except json.JSONDecodeError as exc:
        raise ChunkError(f"sent a chunk that is not JSON ({exc.msg}): {excerpt(data)}") from None
    if not isinstance(obj, dict):
        raise ChunkError(f"sent a chunk that is not a JSON object: {excerpt(data)}")
    if "error" in obj:
        raise ChunkError(f"reported an error mid-stream: {error_message(obj)}")
    choices = obj.get("choices")
    if choices is None and "usage" not in obj:
        raise ChunkError(f"sent a chunk with neither `choices` nor `usage`: {excerpt(data)}")
    text, finish = "", None
    if choices:
        if not isinstance(choices, list) or not all(isinstance(c, dict) for c in choices):
            raise ChunkError(f"sent a chunk whose `choices` is not a list of objects: {excerpt(data)}")
        # the first choice only (a server asked for several, `n`, streams them interleaved)
        choice: dict[str, Any] = next((c for c in choices if c.get("index", 0) == 0), {})
        delta = choice.get("delta") or {}
        content = delta.get("content") if isinstance(delta, dict) else None
        if content is not None and not isinstance(content, str):
            raise ChunkError(f"sent a chunk whose `delta.content` is not a string: {excerpt(data)}")
        text = content or ""
        raw_finish = choice.get("finish_reason")
        finish = None if raw_finish is None else str(raw_finish)
    return ChunkInfo(text=text, finish=finish, usage=_usage(obj, data))


def finish_reason(raw: str) -> FinishReason:
    """Map a server's `finish_reason` to aerix's: `"length"` stays, anything else is `"stop"`."""
    return "length" if raw == "length" else "stop"


def error_message(obj: object) -> str:
    """The human message of an OpenAI-style (or FastAPI-style) error body."""
    if isinstance(obj, dict):
        err = obj.get("error", obj.get("detail", obj.get("message")))
        if isinstance(err, dict):
            err = err.get("message", err)
        if isinstance(err, str):
            return excerpt(err, 500)
        if err is not None:
            return excerpt(json.dumps(err), 500)
    return excerpt(json.dumps(obj), 500)


def _usage(obj: dict[str, Any], data: str) -> Usage | None:
    usage = obj.get("usage")
    if usage is None:
        return None
    if not isinstance(usage, dict):
        raise ChunkError(f"sent a `usage` that is not an object: {excerpt(data)}")
    details = usage.get("prompt_tokens_details")
    cached = details.get("cached_tokens") if isinstance(details, dict) else None
    if cached is None:  # llama.cpp's llama-server reports its prompt cache in `timings`
        timings = obj.get("timings")
        cached = timings.get("cache_n") if isinstance(timings, dict) else None
    try:
        counted = Usage(
            prompt_tokens=int(usage.get("prompt_tokens") or 0),
            completion_tokens=int(usage.get("completion_tokens") or 0),
            cached_tokens=int(cached or 0),
        )
    except (TypeError, ValueError):
        raise ChunkError(f"sent a `usage` with counts that are not integers: {excerpt(data)}") from None
    if min(counted.prompt_tokens, counted.completion_tokens, counted.cached_tokens) < 0:
        raise ChunkError(f"sent a `usage` with a count below zero: {excerpt(data)}")
    return counted
