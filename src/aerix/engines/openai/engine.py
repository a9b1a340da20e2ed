"""`OpenAICompatible`: a `Model` served over the OpenAI chat-completions API.

Any server that speaks `POST /v1/chat/completions` with streaming works: vLLM,
SGLang, llama.cpp's `llama-server`, `llama-cpp-python`'s server, Ollama,
OpenAI. Each `chat` call streams one generation (server-sent events) into
`Delta`s. The calls made on one event loop share that loop's pool of
keep-alive connections (see `_lanes.py`), so many agents on one loop share
connections to the server.

Every failure is an `EngineError` raised from the `chat` iterator, naming the
server and the cause; connect and read timeouts bound every wait, so a dead or
stalled server never hangs a run.

Unless told which `dialect` to speak, the engine starts with `json_schema` and,
if the server's first answer refuses that response format (llama-cpp-python's
server does), sends the same request again as `json_object` and keeps that
form, logging a warning on the `aerix.engines.openai` logger once.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
import re
import ssl
import threading
import weakref
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Mapping, Sequence
from types import TracebackType
from typing import Any, TypeAlias
from urllib.parse import urlsplit

try:
    import httpx
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError("aerix.engines.OpenAICompatible needs httpx: pip install 'aerix[server]'") from exc

from ...errors import AerixError
from ...model import ChatMessage, ContextExceeded, Delta, GenerateOptions, Usage, checked_options
from ._chat_request import DIALECTS, Dialect, build_body
from ._context import context_refusal
from ._failures import (
    RETRY_STATUS,
    EngineError,
    attempts,
    connect_cause,
    describe,
    read_error,
    refuses_json_schema,
    retry_delay,
    status_cause,
)
from ._lanes import Lanes
from ._sse import DONE, ChunkError, SseDecoder, SseEvent, excerpt, finish_reason, parse_chunk

__all__ = ["Dialect", "EngineError", "OpenAICompatible"]

EventHook: TypeAlias = Callable[..., Any]
"""An httpx event hook: an async function of the `httpx.Request` (or `httpx.Response`)."""
BodyFor: TypeAlias = Callable[[Dialect], dict[str, Any]]
"""The body of one request, in a given dialect."""

log = logging.getLogger(__name__.rsplit(".", 1)[0])
"""`aerix.engines.openai`: where the engine says that it changed its dialect."""


class _Aborted:
    """Queue item: the signal aborted the generation."""


_ABORTED = _Aborted()
_ABORTED_DONE = Delta(done=True, finish="stop")
"""The done delta of an aborted generation."""
_Item: TypeAlias = Delta | EngineError | ContextExceeded | _Aborted


class OpenAICompatible:
    """A model behind an OpenAI-compatible chat-completions server.

    Example:
        >>> engine = OpenAICompatible("http://127.0.0.1:8000/v1", "Qwen/Qwen2.5-7B-Instruct")
        >>> engine.url
        'http://127.0.0.1:8000/v1/chat/completions'

    Args:
        base_url: The API root, as the OpenAI SDK takes it: usually ending in
            `/v1` (`http://host:8000/v1`); requests go to
            `{base_url}/chat/completions`.
        model: The model name the server serves (vLLM's `--served-model-name`).
        api_key: Sent as `Authorization: Bearer <api_key>` when given.
        dialect: How the JSON constraint is sent: `"json_schema"` (vLLM, SGLang,
            `llama-server`, Ollama, OpenAI), `"json_object"`
            (`llama-cpp-python`'s server) or `"none"` (not sent; parse-and-retry
            only). `None` (the default): `"json_schema"`, unless the server
            refuses it in its first answer; then that request is sent again as
            `"json_object"`, which the engine keeps (see `dialect`), with a
            warning on the `aerix.engines.openai` logger. A dialect given here
            is kept whatever the server answers.
        connect_timeout: Seconds to open a connection.
        read_timeout: Seconds to wait for the response headers, and then for
            each piece of the stream; a server silent for longer is an error.
        retries: Extra attempts when a request fails before its first byte:
            connection errors and HTTP 429, 502, 503, 504.
        backoff: Seconds before the first retry, doubled for each next one
            (a longer `Retry-After` wins, up to 10 s).
        max_connections: Connections open to the server at once, per event loop;
            more concurrent generations wait for a free one.
        max_keepalive_connections: Idle connections kept open for reuse, per
            event loop (default: `max_connections`).
        headers: Extra HTTP headers on every request.
        extra_body: Extra request fields merged into every body (they win over
            aerix's own), e.g. `{"chat_template_kwargs": {...}}` for vLLM.
        event_hooks: httpx event hooks (`{"request": [...], "response": [...]}`)
            on every request, e.g. to log or trace them.
        http_client: Send every request with this client instead of aerix's
            own connections; aerix never closes it, and its own timeouts,
            limits and event hooks apply (not the options above).
        context_window: How many tokens the served model's context holds (vLLM's
            `--max-model-len`, SGLang's `--context-length`, `llama-server`'s
            `--ctx-size` per slot, Ollama's `num_ctx`), if known: an `Agent` then
            fits its conversation to it before the server refuses it, and a
            refusal that names no size is given this one. `None`: unknown.

    A server's refusal of a prompt too long for its context (vLLM, SGLang,
    `llama-server`, llama-cpp-python's server and Ollama each word it their own
    way) is raised as `ContextExceeded`, with the sizes the server gives, so that
    an `Agent` leaves older exchanges out and asks again. Two servers say nothing
    of it to a streamed request, so give them `context_window`: llama-cpp-python's
    server answers with an empty stream (an `EngineError` that says so), and
    Ollama, unless told not to truncate, drops the oldest messages (and then the
    prompt's start) itself to fit its `num_ctx` (2048 or 4096 tokens unless set,
    whatever the model holds); set `num_ctx` on the Ollama model to what the
    conversation needs.

    Raises:
        AerixError: `kind="options"`, naming the option, for a bad value: a URL
            that is not `http://` or `https://`, a timeout that is not a positive
            number, a header HTTP cannot carry, an unknown dialect, a
            `context_window` that is not a whole number of tokens.
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None = None,
        *,
        dialect: Dialect | None = None,
        connect_timeout: float = 5.0,
        read_timeout: float = 120.0,
        retries: int = 2,
        backoff: float = 0.5,
        max_connections: int = 256,
        max_keepalive_connections: int | None = None,
        headers: Mapping[str, str] | None = None,
        extra_body: Mapping[str, Any] | None = None,
        event_hooks: Mapping[str, Sequence[EventHook]] | None = None,
        http_client: httpx.AsyncClient | None = None,
        context_window: int | None = None,
    ) -> None:
        keep = max_connections if max_keepalive_connections is None else max_keepalive_connections
        _check_options(base_url, model, dialect, connect_timeout, read_timeout, backoff)
        _check_window(context_window)
        _check_counts(retries=retries, max_connections=max_connections, max_keepalive_connections=keep)
        self.base_url = base_url.rstrip("/")
        """The API root, without a trailing slash."""
        self.model = model
        """The model name sent with every request."""
        self.context_window = context_window
        """How many tokens the model's context holds, as given; `None`: unknown."""
        self.dialect: Dialect = "json_schema" if dialect is None else dialect
        """How the JSON constraint is sent now: the one given, or the one the engine chose."""
        self._choose = dialect is None
        # Whether the dialect is decided: given, or json_schema answered once, or the fallback made.
        self._settled = not self._choose
        self._fell_back = False
        self.url = f"{self.base_url}/chat/completions"
        """Where requests go."""
        self.connect_timeout = float(connect_timeout)
        self.read_timeout = float(read_timeout)
        self.retries = retries
        self.backoff = float(backoff)
        self._max_connections = max_connections
        self._keep = keep
        _check_http(headers, api_key, extra_body, event_hooks, http_client)
        self._headers = dict(headers or {})
        if api_key:
            self._headers["Authorization"] = f"Bearer {api_key}"
        self._extra_body = dict(extra_body or {})
        self._event_hooks = {k: list(v) for k, v in (event_hooks or {}).items()}
        self._given_client = http_client
        # Loading the CA bundle is slow: do it once, here, not on the event loop
        # for every connection. Plain http:// needs no certificates at all.
        self._ssl: ssl.SSLContext | bool = False
        if self.base_url.startswith("https://"):
            make_context = getattr(httpx, "create_ssl_context", None)  # httpx >= 0.28
            self._ssl = make_context() if make_context is not None else True
        self._lanes: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Lanes] = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def name(self) -> str:
        """The model's name, as traces give it (`chat {name}`): the server's model name, `model`."""
        return self.model

    def __repr__(self) -> str:
        return f"OpenAICompatible(base_url={self.base_url!r}, model={self.model!r}, dialect={self.dialect!r})"

    async def chat(
        self, messages: list[ChatMessage], opts: GenerateOptions | None = None
    ) -> AsyncIterator[Delta]:
        """Stream one generation: text deltas, then one done delta with `finish` and `usage`.

        An abort of `opts["signal"]` closes the HTTP stream at once; the stream
        then ends with a done delta (`finish="stop"`, no usage: the server sent
        none), as `LlamaCpp`'s does, and does not raise.

        Args:
            messages: The conversation, sent unchanged.
            opts: Sampling settings, the JSON constraint and the abort signal.

        Raises:
            AerixError: `kind="options"`: an unknown option or a bad value (checked as
                `LlamaCpp` checks them), before any request.
            ContextExceeded: The server refused the prompt as too long for the
                model's context, before any text (see `OpenAICompatible`).
            EngineError: The server could not be reached, answered with an
                error, stalled past a timeout, or broke or garbled its stream.
        """
        checked = checked_options(messages, opts)
        signal = checked.get("signal")
        if signal is not None and signal.aborted:
            yield _ABORTED_DONE
            return
        extra = self._extra_body

        def body_for(dialect: Dialect) -> dict[str, Any]:
            return build_body(self.model, messages, checked, dialect=dialect, extra_body=extra)

        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[_Item] = asyncio.Queue()
        # The request runs in its own task so that an abort (from any thread)
        # can cancel it, closing the connection, without cancelling our caller.
        task = loop.create_task(self._produce(body_for, queue.put_nowait))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        remove = signal.add_callback(_canceller(loop, task)) if signal is not None else _no_callback
        finished = False
        try:
            while True:
                item = await queue.get()
                if isinstance(item, Delta):
                    finished = item.done
                    yield item
                    if finished:
                        return
                elif isinstance(item, EngineError | ContextExceeded):
                    try:
                        raise item
                    finally:
                        del item  # the error's traceback holds this frame: no cycle through `item`
                else:
                    finished = True
                    yield _ABORTED_DONE
                    return
        finally:
            remove()
            if not finished:  # a finished request is left to hand its connection back
                task.cancel()

    async def aclose(self) -> None:
        """Close the connections this engine opened on the running event loop.

        Each event loop has its own connections: call `aclose` on each loop that
        used the engine. A loop's connections are also closed when the loop shuts
        down (`asyncio.run`, `run_sync` and `ask_sync` shut theirs down), so code
        that makes a loop per call leaks none. The engine stays usable: the next
        `chat` opens new ones.
        """
        with self._lock:
            lanes = self._lanes.pop(asyncio.get_running_loop(), None)
        if lanes is not None:
            await lanes.aclose()

    async def __aenter__(self) -> OpenAICompatible:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    def _loop_lanes(self) -> Lanes:
        loop = asyncio.get_running_loop()
        with self._lock:
            lanes = self._lanes.get(loop)
            if lanes is None:
                lanes = self._lanes[loop] = Lanes(self._new_lane, self._max_connections, self._keep)
                lanes.keeper = self._closed_at_shutdown(loop, lanes)
                _start(lanes.keeper)
            return lanes

    async def _closed_at_shutdown(
        self, loop: asyncio.AbstractEventLoop, lanes: Lanes
    ) -> AsyncGenerator[None]:
        """Waits, started, for its loop to shut down: the loop closes every async generator
        still open then (`loop.shutdown_asyncgens`), and this one closes the loop's lanes.
        (The lanes' clients hold the loop, so it is never collected with them open.)"""
        try:
            yield
        finally:
            with self._lock:
                if self._lanes.get(loop) is lanes:
                    del self._lanes[loop]
            await lanes.aclose()

    def _new_lane(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(
            headers=self._headers,
            limits=httpx.Limits(max_connections=1, max_keepalive_connections=1),
            timeout=httpx.Timeout(
                connect=self.connect_timeout,
                read=self.read_timeout,
                write=self.read_timeout,
                pool=None,  # a lane serves one request at a time: it never waits for its pool
            ),
            verify=self._ssl,
            event_hooks=self._event_hooks,
        )

    def _error(self, cause: str) -> EngineError:
        return EngineError(self.base_url, cause)

    def _too_long(self, body: str, detail: str) -> ContextExceeded | None:
        """The `ContextExceeded` of an error body that refuses the prompt for its length, else `None`."""
        sizes = context_refusal(body)
        if sizes is None:
            return None
        prompt, window = sizes[0], sizes[1] or self.context_window or 0
        told = f"{prompt} tokens" if prompt else "its size not given"
        told += f", context of {window} tokens" if window else ", context size not given"
        return ContextExceeded(
            prompt,
            window,
            f"server {self.base_url}: the prompt does not fit in the model's context ({told}): {detail}",
        )

    async def _produce(self, body_for: BodyFor, put: Callable[[_Item], None]) -> None:
        try:
            if self._given_client is not None:
                await self._send(self._given_client, body_for, put)
                return
            lanes = self._loop_lanes()
            lane = await lanes.acquire()
            try:
                await self._send(lane, body_for, put)
            finally:
                await lanes.release(lane)
        except asyncio.CancelledError:
            put(_ABORTED)
            raise
        except (EngineError, ContextExceeded) as exc:
            put(exc)
        except Exception as exc:  # an engine failure must reach the caller, never vanish
            error = self._error(f"request failed ({describe(exc)})")
            error.__cause__ = exc
            put(error)

    async def _send(self, client: httpx.AsyncClient, body_for: BodyFor, put: Callable[[_Item], None]) -> None:
        """Send the request in the engine's dialect; once more in the new one if the engine fell back."""
        dialect = self.dialect
        if not await self._request(client, body_for(dialect), dialect, put):
            await self._request(client, body_for(self.dialect), self.dialect, put)

    def _fall_back(self, body: dict[str, Any], dialect: Dialect, status: int, detail: str) -> bool:
        """Whether to send a refused `json_schema` request again as `json_object` (switching once)."""
        if not (
            self._choose
            and dialect == "json_schema"
            and "response_format" in body
            and "response_format" not in self._extra_body  # the caller's own format: not ours to change
            and refuses_json_schema(status, detail)
        ):
            return False
        with self._lock:
            if self._settled and not self._fell_back:  # json_schema has worked: this is another refusal
                return False
            switched, self._settled, self._fell_back = not self._fell_back, True, True
            self.dialect = "json_object"
        if switched:
            log.warning(
                "server %s refused the json_schema response format (HTTP %d); this engine uses "
                "dialect='json_object' from now on (pass dialect='json_object' to skip this check)",
                self.base_url,
                status,
            )
        return True

    async def _request(
        self, client: httpx.AsyncClient, body: dict[str, Any], dialect: Dialect, put: Callable[[_Item], None]
    ) -> bool:
        """Send the request, retrying what failed before its first byte; stream the answer to `put`.

        Returns:
            `True` once the answer is streamed; `False` when the server refused
            the `json_schema` response format and the engine now speaks
            `json_object` (send the request again).
        """
        headers = self._headers if client is self._given_client else None  # lanes carry them
        for attempt in range(self.retries + 1):
            last = attempt == self.retries
            response: httpx.Response | None = None
            try:
                async with client.stream("POST", self.url, json=body, headers=headers) as response:
                    if response.status_code == 200:
                        if dialect == "json_schema":  # the server takes it: a later refusal is another matter
                            self._settled = True
                        await self._read_stream(response, put)
                        return True
                    detail, answer = await read_error(response)
                    if response.status_code in RETRY_STATUS and not last:
                        await asyncio.sleep(retry_delay(self.backoff, attempt, response))
                        continue
                    if (too_long := self._too_long(answer, detail)) is not None:
                        raise too_long
                    if self._fall_back(body, dialect, response.status_code, detail):
                        return False
                    raise self._error(
                        status_cause(
                            response.status_code,
                            detail,
                            attempt,
                            url=self.url,
                            model=self.model,
                            dialect=dialect,
                            fell_back=self._fell_back and dialect == "json_object",
                        )
                    )
            except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
                if not last:
                    await asyncio.sleep(retry_delay(self.backoff, attempt, None))
                    continue
                cause = connect_cause(exc, attempt, connect_timeout=self.connect_timeout)
                raise self._error(cause) from exc
            except (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError) as exc:
                # Before any response: often a kept-alive connection the server had closed.
                if not last:
                    await asyncio.sleep(retry_delay(self.backoff, attempt, None))
                    continue
                cause = f"closed the connection before answering ({describe(exc)}){attempts(attempt)}"
                raise self._error(cause) from exc
            except (httpx.ReadTimeout, httpx.WriteTimeout) as exc:
                cause = (
                    f"sent no response within read_timeout={self.read_timeout:g} s; "
                    "raise read_timeout if the server is busy"
                )
                raise self._error(cause) from exc
            finally:
                if response is not None:
                    _unbind(response)
        raise AssertionError("unreachable: the last attempt returns or raises")  # pragma: no cover

    async def _read_stream(self, response: httpx.Response, put: Callable[[_Item], None]) -> None:
        """Turn the event stream into deltas; fail on anything but a finished generation."""
        kind = response.headers.get("content-type", "")
        if kind.startswith("application/json"):
            detail = excerpt((await response.aread()).decode("utf-8", "replace"))
            raise self._error(
                f"answered with JSON instead of an event stream; does it support stream=true? {detail}"
            )
        if kind.startswith("text/html"):  # a web page: a proxy's, or the wrong base_url
            detail = excerpt((await response.aread()).decode("utf-8", "replace"))
            raise self._error(
                f"answered with a web page instead of an event stream; is {self.url} the chat "
                f"completions endpoint of an OpenAI-compatible API? {detail}"
            )
        finish: str | None = None
        usage: Usage | None = None
        chunks = 0
        said = False  # whether a text delta went out: a refusal after one is a failure
        lines = response.aiter_lines()
        try:
            async with contextlib.aclosing(_events(lines)) as events:
                async for event in events:
                    if event.event == "error":
                        detail = excerpt(event.data, 500)
                        if not said and (too_long := self._too_long(event.data, detail)) is not None:
                            raise too_long
                        raise self._error(f"reported an error mid-stream: {detail}")
                    if event.data == DONE:
                        if finish is None:
                            raise self._error(_interrupted(chunks))
                        break
                    try:
                        info = parse_chunk(event.data)
                    except ChunkError as exc:
                        # SGLang streams its refusal as the first event of an HTTP 200 answer.
                        if not said and (too_long := self._too_long(event.data, str(exc))) is not None:
                            raise too_long from None
                        raise self._error(f"{exc} (after {chunks} chunks)") from None
                    chunks += 1
                    if info.text and finish is None:  # nothing after the finish belongs to the turn
                        put(Delta(text=info.text))
                        said = True
                    if info.finish is not None:
                        finish = info.finish
                    if info.usage is not None:
                        usage = info.usage
                else:
                    if finish is None:  # a finished generation whose server omits [DONE] is fine
                        raise self._error(_cut_off(chunks))
        except httpx.ReadTimeout as exc:
            raise self._error(
                f"the stream stalled: no data for read_timeout={self.read_timeout:g} s after {chunks} chunks"
            ) from exc
        except httpx.TransportError as exc:
            raise self._error(f"the stream broke mid-turn after {chunks} chunks ({describe(exc)})") from exc
        put(Delta(done=True, finish=finish_reason(finish or "stop"), usage=usage))
        # Read the end of the response so that its connection can serve the next request.
        with contextlib.suppress(httpx.HTTPError):
            async for _ in lines:
                pass


def _start(agen: AsyncGenerator[None]) -> None:
    """Run `agen` to its first `yield` now, on the running loop, which then knows of it."""
    step = agen.asend(None)
    try:
        step.send(None)
    except StopIteration:
        pass
    else:  # pragma: no cover - a keeper never awaits before its first yield
        raise RuntimeError("the keeper awaited before its first yield")


def _check_options(
    base_url: object,
    model: object,
    dialect: object,
    connect_timeout: object,
    read_timeout: object,
    backoff: object,
) -> None:
    if not isinstance(base_url, str) or not base_url.startswith(("http://", "https://")):
        raise AerixError(
            "options",
            "base_url must be an http:// or https:// URL such as 'http://127.0.0.1:8000/v1', "
            f"got {base_url!r}",
        )
    try:
        parts = urlsplit(base_url)
        host, _ = parts.hostname, parts.port  # `.port` checks the port
    except ValueError as exc:  # a port that is no number, or out of range
        raise AerixError("options", f"base_url {base_url!r} is no URL: {exc}") from None
    if not host:
        raise AerixError(
            "options", f"base_url {base_url!r} names no host; give one, as in 'http://127.0.0.1:8000/v1'"
        )
    if "?" in base_url or "#" in base_url:
        raise AerixError(
            "options",
            f"base_url must be the API's root, without a query or fragment (requests go to "
            f"<base_url>/chat/completions), got {base_url!r}; pass query parameters in extra_body or headers",
        )
    if not isinstance(model, str) or not model:
        raise AerixError("options", f"model must be the server's model name, got {model!r}")
    if dialect is not None and dialect not in DIALECTS:
        allowed = ", ".join(map(repr, DIALECTS))
        raise AerixError(
            "options", f"dialect must be one of {allowed} (or None: let the engine choose), got {dialect!r}"
        )
    for name, value, low in (
        ("connect_timeout", connect_timeout, 0.0),
        ("read_timeout", read_timeout, 0.0),
        ("backoff", backoff, None),
    ):
        ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
        if not ok or value < 0 or (low is not None and value <= low):  # type: ignore[operator]
            bound = ">= 0" if low is None else "> 0"
            raise AerixError("options", f"{name} must be a finite number of seconds {bound}, got {value!r}")


def _check_window(context_window: object) -> None:
    if context_window is not None and (
        isinstance(context_window, bool) or not isinstance(context_window, int) or context_window < 1
    ):
        raise AerixError(
            "options",
            "context_window must be the model's context size, a whole number of tokens >= 1 "
            f"(or None: unknown), got {context_window!r}",
        )


def _check_http(
    headers: object, api_key: object, extra_body: object, event_hooks: object, http_client: object
) -> None:
    """What goes into every request: headers and a key HTTP can carry, a body JSON can write."""
    if headers is not None and (
        not isinstance(headers, Mapping)
        or not all(isinstance(k, str) and isinstance(v, str) for k, v in headers.items())
    ):
        raise AerixError("options", f"headers must map header names to strings, got {headers!r}")
    for name, value in (headers or {}).items():
        if not _header_safe(name, name=True) or not _header_safe(value):
            raise AerixError(
                "options",
                f"headers[{name!r}] = {value!r}: a header name must be one word of ASCII letters, digits "
                "and -_.!#$%&'*+^`|~, its value visible ASCII without line breaks or spaces around it "
                "(encode anything else, e.g. as base64)",
            )
    if api_key is not None and (not isinstance(api_key, str) or not _header_safe(api_key)):
        got = type(api_key).__name__ if not isinstance(api_key, str) else "a key a header cannot carry"
        raise AerixError("options", f"api_key must be an ASCII string (or None), got {got}")
    if extra_body is not None:
        if not isinstance(extra_body, Mapping):
            raise AerixError("options", f"extra_body must be a dict, got {extra_body!r}")
        try:
            json.dumps(extra_body, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise AerixError("options", f"extra_body must be plain JSON: {exc}") from None
    if event_hooks is not None:
        if not isinstance(event_hooks, Mapping) or not set(event_hooks) <= {"request", "response"}:
            raise AerixError(
                "options",
                f"event_hooks must map 'request' or 'response' to lists of functions, got {event_hooks!r}",
            )
        for key, hooks in event_hooks.items():
            if (
                isinstance(hooks, str | bytes)
                or not isinstance(hooks, Sequence)
                or not all(map(callable, hooks))
            ):
                raise AerixError(
                    "options", f"event_hooks[{key!r}] must be a list of functions, got {hooks!r}"
                )
    if http_client is not None and not isinstance(http_client, httpx.AsyncClient):
        raise AerixError(
            "options", f"http_client must be an httpx.AsyncClient, got {type(http_client).__name__}"
        )


_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
"""A header name (RFC 9110's token)."""
_FIELD_VALUE = re.compile(r"([\x21-\x7e]([\x20-\x7e\t]*[\x21-\x7e])?)?")
"""A header value: visible ASCII, inner spaces and tabs, no line break or NUL, nothing around it."""


def _header_safe(text: str, *, name: bool = False) -> bool:
    return (_TOKEN if name else _FIELD_VALUE).fullmatch(text) is not None


def _check_counts(**counts: object) -> None:
    lows = {"retries": 0, "max_connections": 1, "max_keepalive_connections": 0}
    for name, count in counts.items():
        if isinstance(count, bool) or not isinstance(count, int) or count < lows[name]:
            raise AerixError("options", f"{name} must be an integer >= {lows[name]}, got {count!r}")


def _cut_off(chunks: int) -> str:
    cause = f"the stream ended without a finish_reason or [DONE] after {chunks} chunks: "
    cause += "the generation was cut off"
    if chunks:
        return cause
    return (
        f"{cause} before it began; llama-cpp-python's server answers so when the prompt does not fit "
        "its context (its log says 'Requested tokens (N) exceed context window of M'): give the engine "
        "context_window= (the server's --n_ctx) and an Agent fits its conversation to it before sending"
    )


def _interrupted(chunks: int) -> str:
    return (
        f"sent [DONE] after {chunks} chunks without a finish_reason: the generation was interrupted "
        "(llama-cpp-python's server does this to one request when another arrives, unless started "
        "with --interrupt_requests False)"
    )


async def _events(lines: AsyncIterator[str]) -> AsyncGenerator[SseEvent, None]:
    decoder = SseDecoder()
    async for line in lines:
        event = decoder.feed(line)
        if event is not None:
            yield event
    event = decoder.flush()
    if event is not None:
        yield event


_SPENT = httpx.ByteStream(b"")


def _unbind(response: httpx.Response) -> None:
    """Break the reference cycle between a closed response and httpx's stream wrapper.

    httpx's client wraps each response's stream in an object that points back at
    the response; left alone, the response, its request and the connection's
    per-request objects (about 40 in all) outlive the request until the garbage
    collector's next full scan, and make that scan, which stops the event loop,
    longer. A closed response's stream is never read again.
    """
    response.stream = _SPENT


def _canceller(loop: asyncio.AbstractEventLoop, task: asyncio.Task[None]) -> Callable[[], None]:
    def cancel() -> None:
        with contextlib.suppress(RuntimeError):  # a closed loop took the task with it
            loop.call_soon_threadsafe(task.cancel)

    return cancel


def _no_callback() -> None:
    """The remover of a callback that was never added (no signal)."""
