"""`OpenAICompatible`: a `Model` served over the OpenAI chat-completions API.

Any server that speaks `POST /v1/chat/completions` with streaming works: vLLM,
SGLang, llama.cpp's `llama-server`, `llama-cpp-python`'s server, Ollama,
OpenAI. Each `chat` call streams one generation (server-sent events) into
`Delta`s. One `httpx.AsyncClient` (one connection pool) is shared by every
call made on the same event loop, so many agents on one loop share
connections to the server.

Every failure is an `EngineError` raised from the `chat` iterator, naming the
server and the cause; connect and read timeouts bound every wait, so a dead or
stalled server never hangs a run.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import weakref
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Mapping
from types import TracebackType
from typing import Any, TypeAlias

try:
    import httpx
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError("aerix.engines.OpenAICompatible needs httpx: pip install 'aerix[server]'") from exc

from ..errors import AerixError
from ..model import ChatMessage, Delta, GenerateOptions, Usage
from ._chat_request import DIALECTS, Dialect, build_body
from ._sse import (
    DONE,
    ChunkError,
    SseDecoder,
    SseEvent,
    error_message,
    excerpt,
    finish_reason,
    parse_chunk,
)

__all__ = ["Dialect", "EngineError", "OpenAICompatible"]

_RETRY_STATUS = frozenset({429, 502, 503, 504})
_MAX_BACKOFF = 10.0
"""Seconds: the longest wait between two attempts, whatever `Retry-After` asks."""


class EngineError(Exception):
    """A generation failed: the server is unreachable, refused, stalled or broke its stream.

    Args:
        base_url: The server's base URL.
        cause: What went wrong, and what to do about it.
    """

    base_url: str
    cause: str

    def __init__(self, base_url: str, cause: str) -> None:
        super().__init__(f"server {base_url}: {cause}")
        self.base_url = base_url
        self.cause = cause


class _Aborted:
    """Queue item: the signal aborted the generation."""


_ABORTED = _Aborted()
_Item: TypeAlias = Delta | EngineError | _Aborted


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
            `llama-server`, Ollama, OpenAI; the default), `"json_object"`
            (`llama-cpp-python`'s server) or `"none"` (not sent; parse-and-retry
            only). See `aerix.engines._chat_request.Dialect`.
        connect_timeout: Seconds to open a connection.
        read_timeout: Seconds to wait for the response headers, and then for
            each piece of the stream; a server silent for longer is an error.
        retries: Extra attempts when a request fails before its first byte:
            connection errors and HTTP 429, 502, 503, 504.
        backoff: Seconds before the first retry, doubled for each next one
            (a longer `Retry-After` wins, up to 10 s).
        max_connections: Connections open to the server at once, per event loop;
            more concurrent generations wait for a free one.
        max_keepalive_connections: Idle connections kept open for reuse.
        headers: Extra HTTP headers on every request.
        extra_body: Extra request fields merged into every body (they win over
            aerix's own), e.g. `{"chat_template_kwargs": {...}}` for vLLM.
        http_client: Use this client instead of one per event loop; aerix then
            never closes it. Its own timeouts and limits apply.
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None = None,
        *,
        dialect: Dialect = "json_schema",
        connect_timeout: float = 5.0,
        read_timeout: float = 120.0,
        retries: int = 2,
        backoff: float = 0.5,
        max_connections: int = 256,
        max_keepalive_connections: int = 64,
        headers: Mapping[str, str] | None = None,
        extra_body: Mapping[str, Any] | None = None,
        http_client: httpx.AsyncClient | None = None,
    ) -> None:
        if not isinstance(base_url, str) or not base_url.startswith(("http://", "https://")):
            raise AerixError(
                "options",
                f"base_url must be an http:// or https:// URL such as 'http://127.0.0.1:8000/v1', "
                f"got {base_url!r}",
            )
        if not isinstance(model, str) or not model:
            raise AerixError("options", f"model must be the server's model name, got {model!r}")
        if dialect not in DIALECTS:
            raise AerixError(
                "options",
                f"dialect must be one of {', '.join(map(repr, DIALECTS))}, got {dialect!r}",
            )
        for name, value in (
            ("connect_timeout", connect_timeout),
            ("read_timeout", read_timeout),
            ("backoff", backoff),
        ):
            if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
                raise AerixError("options", f"{name} must be a number of seconds >= 0, got {value!r}")
        for name, count, low in (
            ("retries", retries, 0),
            ("max_connections", max_connections, 1),
            ("max_keepalive_connections", max_keepalive_connections, 0),
        ):
            if isinstance(count, bool) or not isinstance(count, int) or count < low:
                raise AerixError("options", f"{name} must be an integer >= {low}, got {count!r}")
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.dialect: Dialect = dialect
        self.url = f"{self.base_url}/chat/completions"
        self.connect_timeout = float(connect_timeout)
        self.read_timeout = float(read_timeout)
        self.retries = retries
        self.backoff = float(backoff)
        self._headers = dict(headers or {})
        if api_key:
            self._headers["Authorization"] = f"Bearer {api_key}"
        self._extra_body = dict(extra_body or {})
        self._limits = httpx.Limits(
            max_connections=max_connections, max_keepalive_connections=max_keepalive_connections
        )
        self._given_client = http_client
        self._clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, httpx.AsyncClient] = (
            weakref.WeakKeyDictionary()
        )
        self._lock = threading.Lock()
        self._tasks: set[asyncio.Task[None]] = set()

    def __repr__(self) -> str:
        return f"OpenAICompatible(base_url={self.base_url!r}, model={self.model!r}, dialect={self.dialect!r})"

    async def chat(
        self, messages: list[ChatMessage], opts: GenerateOptions | None = None
    ) -> AsyncIterator[Delta]:
        """Stream one generation: text deltas, then one done delta with `finish` and `usage`.

        An abort of `opts["signal"]` closes the HTTP stream at once and ends the
        iterator without a done delta.

        Args:
            messages: The conversation, sent unchanged.
            opts: Sampling settings, the JSON constraint and the abort signal.

        Raises:
            EngineError: The server could not be reached, answered with an
                error, stalled past a timeout, or broke or garbled its stream.
        """
        opts = opts or {}
        signal = opts.get("signal")
        if signal is not None and signal.aborted:
            return
        body = build_body(self.model, messages, opts, dialect=self.dialect, extra_body=self._extra_body)
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[_Item] = asyncio.Queue()
        # The request runs in its own task so that an abort (from any thread)
        # can cancel it, closing the connection, without cancelling our caller.
        task = loop.create_task(self._produce(body, queue.put_nowait))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        remove = signal.add_callback(_canceller(loop, task)) if signal is not None else _noop
        finished = False
        try:
            while True:
                item = await queue.get()
                if isinstance(item, Delta):
                    finished = item.done
                    yield item
                    if finished:
                        return
                elif isinstance(item, EngineError):
                    raise item
                else:
                    return
        finally:
            remove()
            if not finished:  # a finished request is left to hand its connection back
                task.cancel()

    async def aclose(self) -> None:
        """Close the connections this engine opened on the running event loop.

        Each event loop has its own client: call `aclose` on each loop that used
        the engine (a client whose loop is gone goes with it). The engine stays
        usable: the next `chat` opens a new client.
        """
        with self._lock:
            client = self._clients.pop(asyncio.get_running_loop(), None)
        if client is not None:
            await client.aclose()

    async def __aenter__(self) -> OpenAICompatible:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    def _client(self) -> httpx.AsyncClient:
        if self._given_client is not None:
            return self._given_client
        loop = asyncio.get_running_loop()
        with self._lock:
            client = self._clients.get(loop)
            if client is None or client.is_closed:
                client = httpx.AsyncClient(
                    headers=self._headers,
                    limits=self._limits,
                    timeout=httpx.Timeout(
                        connect=self.connect_timeout,
                        read=self.read_timeout,
                        write=self.read_timeout,
                        pool=None,  # bounded by the timeouts of the requests holding connections
                    ),
                )
                self._clients[loop] = client
            return client

    def _error(self, cause: str) -> EngineError:
        return EngineError(self.base_url, cause)

    async def _produce(self, body: dict[str, Any], put: Callable[[_Item], None]) -> None:
        try:
            await self._request(body, put)
        except asyncio.CancelledError:
            put(_ABORTED)
            raise
        except EngineError as exc:
            put(exc)
        except Exception as exc:  # an engine failure must reach the caller, never vanish
            error = self._error(f"request failed ({type(exc).__name__}: {exc})")
            error.__cause__ = exc
            put(error)

    async def _request(self, body: dict[str, Any], put: Callable[[_Item], None]) -> None:
        client = self._client()
        headers = self._headers if self._given_client is not None else None
        for attempt in range(self.retries + 1):
            last = attempt == self.retries
            try:
                async with client.stream("POST", self.url, json=body, headers=headers) as response:
                    if response.status_code == 200:
                        await self._read_stream(response, put)
                        return
                    detail = await self._error_detail(response)
                    if response.status_code in _RETRY_STATUS and not last:
                        await asyncio.sleep(self._delay(attempt, response))
                        continue
                    raise self._error(self._status_cause(response.status_code, detail, attempt))
            except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
                if not last:
                    await asyncio.sleep(self._delay(attempt, None))
                    continue
                raise self._error(self._connect_cause(exc, attempt)) from exc
            except (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError) as exc:
                # Before any response: often a kept-alive connection the server had closed.
                if not last:
                    await asyncio.sleep(self._delay(attempt, None))
                    continue
                raise self._error(
                    f"closed the connection before answering ({_describe(exc)}){_attempts(attempt)}"
                ) from exc
            except (httpx.ReadTimeout, httpx.WriteTimeout) as exc:
                raise self._error(
                    f"sent no response within read_timeout={self.read_timeout:g} s; "
                    "raise read_timeout if the server is busy"
                ) from exc

    async def _read_stream(self, response: httpx.Response, put: Callable[[_Item], None]) -> None:
        kind = response.headers.get("content-type", "")
        if kind.startswith("application/json"):
            detail = excerpt((await response.aread()).decode("utf-8", "replace"))
            raise self._error(
                f"answered with JSON instead of an event stream; does it support stream=true? {detail}"
            )
        finish: str | None = None
        usage: Usage | None = None
        chunks = 0
        lines = response.aiter_lines()
        try:
            async with contextlib.aclosing(_events(lines)) as events:
                async for event in events:
                    if event.event == "error":
                        raise self._error(f"reported an error mid-stream: {excerpt(event.data, 500)}")
                    if event.data == DONE:
                        if finish is None:
                            raise self._error(
                                f"sent [DONE] after {chunks} chunks without a finish_reason: "
                                "the generation was interrupted (llama-cpp-python's server "
                                "does this to one request when another arrives, unless "
                                "started with --interrupt_requests False)"
                            )
                        break
                    try:
                        info = parse_chunk(event.data)
                    except ChunkError as exc:
                        raise self._error(f"{exc} (after {chunks} chunks)") from None
                    chunks += 1
                    if info.text:
                        put(Delta(text=info.text))
                    if info.finish is not None:
                        finish = info.finish
                    if info.usage is not None:
                        usage = info.usage
                else:
                    if finish is None:
                        raise self._error(
                            f"the stream ended without a finish_reason or [DONE] after {chunks} "
                            "chunks: the generation was cut off"
                        )
        except httpx.ReadTimeout as exc:
            raise self._error(
                f"the stream stalled: no data for read_timeout={self.read_timeout:g} s after {chunks} chunks"
            ) from exc
        except httpx.TransportError as exc:
            raise self._error(f"the stream broke mid-turn after {chunks} chunks ({_describe(exc)})") from exc
        put(Delta(done=True, finish=finish_reason(finish or "stop"), usage=usage))
        # Read the end of the response so that its connection goes back to the pool.
        with contextlib.suppress(httpx.HTTPError):
            async for _ in lines:
                pass

    async def _error_detail(self, response: httpx.Response) -> str:
        try:
            raw = await response.aread()
        except httpx.HTTPError as exc:
            return f"(its body could not be read: {_describe(exc)})"
        text = raw.decode("utf-8", "replace")
        try:
            return error_message(json.loads(text))
        except ValueError:
            return excerpt(text, 500)

    def _status_cause(self, status: int, detail: str, attempt: int) -> str:
        cause = f"answered HTTP {status} to POST {self.url}: {detail}{_attempts(attempt)}"
        if status == 404:
            return f"{cause}; check base_url (it usually ends in /v1) and model={self.model!r}"
        if status in (401, 403):
            return f"{cause}; check api_key"
        if status in (400, 422) and self.dialect != "none" and "response_format" in detail:
            return (
                f"{cause}; the server may not accept dialect={self.dialect!r}: try "
                "dialect='json_object' (llama-cpp-python's server) or dialect='none'"
            )
        if status in _RETRY_STATUS:
            return f"{cause}; the server is overloaded or restarting: raise retries or add replicas"
        return cause

    def _connect_cause(self, exc: httpx.TransportError, attempt: int) -> str:
        if isinstance(exc, httpx.ConnectTimeout):
            what = f"did not accept a connection within connect_timeout={self.connect_timeout:g} s"
        else:
            what = f"refused the connection ({_describe(exc)})"
        return f"{what}{_attempts(attempt)}; is the server running at this base_url?"

    def _delay(self, attempt: int, response: httpx.Response | None) -> float:
        delay: float = self.backoff * 2**attempt
        if response is not None:
            with contextlib.suppress(ValueError):
                delay = max(delay, float(str(response.headers.get("retry-after", ""))))
        return min(delay, _MAX_BACKOFF)


def _describe(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _attempts(attempt: int) -> str:
    return f" (after {attempt + 1} attempts)" if attempt else ""


async def _events(lines: AsyncIterator[str]) -> AsyncGenerator[SseEvent, None]:
    decoder = SseDecoder()
    async for line in lines:
        event = decoder.feed(line)
        if event is not None:
            yield event
    event = decoder.flush()
    if event is not None:
        yield event


def _noop() -> None:
    return None


def _canceller(loop: asyncio.AbstractEventLoop, task: asyncio.Task[None]) -> Callable[[], None]:
    def cancel() -> None:
        with contextlib.suppress(RuntimeError):  # a closed loop took the task with it
            loop.call_soon_threadsafe(task.cancel)

    return cancel
