"""`EngineError`, and the wording of each way a request to a server can fail.

Every message names the server (its base URL), says what happened and, where
there is one, the fix: the option to change or the thing to check.
"""

from __future__ import annotations

import contextlib
import errno
import json
import socket
from collections.abc import Callable
from typing import TypeVar

import httpx

from ._sse import error_message, excerpt

__all__ = [
    "MAX_BACKOFF",
    "RETRY_STATUS",
    "EngineError",
    "attempts",
    "connect_cause",
    "describe",
    "read_error",
    "refuses_json_schema",
    "retry_delay",
    "status_cause",
]

RETRY_STATUS = frozenset({429, 502, 503, 504})
"""HTTP statuses that mean "busy or restarting, try again"."""
MAX_BACKOFF = 10.0
"""Seconds: the longest wait between two attempts, whatever `Retry-After` asks."""


class EngineError(Exception):
    """A generation failed: the server is unreachable, refused, stalled or broke its stream.

    The agent loop turns it into `end(reason="error", message=str(exc))`.

    Args:
        base_url: The server's base URL.
        cause: What went wrong, and what to do about it.
    """

    base_url: str
    """The server's base URL, as the engine was given it."""
    cause: str
    """What went wrong, without the server's name."""

    def __init__(self, base_url: str, cause: str) -> None:
        super().__init__(f"server {base_url}: {cause}")
        self.base_url = base_url
        self.cause = cause


def describe(exc: BaseException) -> str:
    """`Type: message` of an exception (just the type when it has no message)."""
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def attempts(attempt: int) -> str:
    """` (after N attempts)` when the request was retried, else nothing."""
    return f" (after {attempt + 1} attempts)" if attempt else ""


async def read_error(response: httpx.Response) -> tuple[str, str]:
    """The message of an error response, quoted and cut, and its whole body as text
    (empty when it cannot be read; the message says so)."""
    try:
        raw = await response.aread()
    except httpx.HTTPError as exc:
        return f"(its body could not be read: {describe(exc)})", ""
    text = raw.decode("utf-8", "replace")
    try:
        return error_message(json.loads(text)), text
    except ValueError:
        return excerpt(text, 500), text


REFUSAL_STATUS = frozenset({400, 422, 500})
"""HTTP statuses with which servers refuse a request field they do not take."""


def refuses_json_schema(status: int, detail: str) -> bool:
    """Whether an error answer says that the server does not take the `json_schema` response format.

    llama-cpp-python's server answers HTTP 500 with its request model's
    validation error (`'loc': ('body', 'response_format', 'type')`, "Input
    should be 'text' or 'json_object'", `'input': 'json_schema'`); older
    `llama-server`s answered "response_format type must be one of "text" or
    "json_object", but got: json_schema". A refusal of the schema itself
    (OpenAI's "Invalid schema for response_format 'turn'") names neither form.
    """
    text = detail.lower()
    return (
        status in REFUSAL_STATUS
        and "response_format" in text
        and ("json_schema" in text or "json_object" in text)
    )


def status_cause(
    status: int,
    detail: str,
    attempt: int,
    *,
    url: str,
    model: str,
    dialect: str,
    fell_back: bool = False,
) -> str:
    """Why an HTTP error status failed the request, and what to check.

    Args:
        status: The HTTP status.
        detail: The server's message, quoted (`read_error`).
        attempt: The attempt that failed, from 0.
        url: Where the request went.
        model: The model name sent.
        dialect: The dialect the request was sent in.
        fell_back: The engine had moved from `json_schema` to `json_object`
            after the server refused the first.
    """
    cause = f"answered HTTP {status} to POST {url}: {detail}{attempts(attempt)}"
    if status == 404:
        return f"{cause}; check base_url (it usually ends in /v1) and model={model!r}"
    if status in (401, 403):
        return f"{cause}; check api_key"
    if status in REFUSAL_STATUS and dialect != "none" and "response_format" in detail:
        if fell_back:
            return (
                f"{cause}; the server refused dialect='json_schema' and then dialect={dialect!r}: "
                "try dialect='none'"
            )
        other = (
            "dialect='json_object' (llama-cpp-python's server)"
            if dialect == "json_schema"
            else "dialect='json_schema' (vLLM, SGLang, llama-server, Ollama, OpenAI)"
        )
        return f"{cause}; the server may not accept dialect={dialect!r}: try {other} or dialect='none'"
    if status in RETRY_STATUS:
        return f"{cause}; the server is overloaded or restarting: raise retries or add replicas"
    return cause


def connect_cause(exc: httpx.TransportError, attempt: int, *, connect_timeout: float) -> str:
    """Why no connection could be opened."""
    if isinstance(exc, httpx.ConnectTimeout):
        what = f"did not accept a connection within connect_timeout={connect_timeout:g} s"
    elif _cause(exc, socket.gaierror) is not None:
        return (
            f"could not be reached: its host name did not resolve ({describe(exc)}){attempts(attempt)}; "
            "check the host in base_url"
        )
    elif (code := _local_errno(exc)) is not None:  # this process's fault, not the server's
        return (
            f"could not be reached: this process has too many open files ({code}: {describe(exc)}); "
            "close the engines and connections it no longer needs, or raise the limit (ulimit -n)"
        )
    else:
        what = f"refused the connection ({describe(exc)})"
    return f"{what}{attempts(attempt)}; is the server running at this base_url?"


def _local_errno(exc: BaseException) -> str | None:
    """`EMFILE` or `ENFILE` where an exception or one it came from says that the process or
    the system is out of file descriptors, else `None`."""
    found = _cause(exc, OSError, lambda e: e.errno in (errno.EMFILE, errno.ENFILE))
    return None if found is None or found.errno is None else errno.errorcode[found.errno]


_E = TypeVar("_E", bound=BaseException)


def _cause(exc: BaseException, kind: type[_E], test: Callable[[_E], bool] = lambda e: True) -> _E | None:
    """The first of `exc` and the exceptions it came from that is a `kind` and passes `test`."""
    seen: set[int] = set()
    at: BaseException | None = exc
    while at is not None and id(at) not in seen:
        seen.add(id(at))
        if isinstance(at, kind) and test(at):
            return at
        at = at.__cause__ or at.__context__
    return None


def retry_delay(backoff: float, attempt: int, response: httpx.Response | None) -> float:
    """Seconds to wait before the next attempt: `backoff` doubled per attempt, or `Retry-After`."""
    delay: float = backoff * 2**attempt
    if response is not None:
        with contextlib.suppress(ValueError):
            delay = max(delay, float(str(response.headers.get("retry-after", ""))))
    return min(delay, MAX_BACKOFF)
