"""The playground's ASGI app: the page, its settings, and runs streamed as Server-Sent Events.

Routes:

- `GET /`: the page; `GET /static/…`: its script, style and icon (also at
  `GET /favicon.ico`).
- `GET /api/config`: the pickable tools and the default settings.
- `GET /api/session`: this session's settings, whether it is busy, the
  events of its runs (a reloaded page shows the conversation again) and the
  calls that wait for a decision (`pending`).
- `POST /api/run` with `{"prompt": …, "settings": {…}}`: starts a run and
  answers with `text/event-stream`: a `session` event (`{"type": "session",
  "conversation": "same" | "new"}`), then one `data:` line of JSON
  (`to_dict()`) per event, ending with the run's `final` or `end`. While the run
  waits on an engine that reports its `progress` (`LlamaCpp`), `progress` events
  (`{"type": "progress", "phase": "prefill" | "decode" | null, …, "text": …}`)
  come between them, a few times a second while it changes. A session that is busy
  gets HTTP 409 with `{"error": …}`; bad settings get 400. Closing the stream
  aborts the run.
- `POST /api/resume` with `{"decisions": {"call_2": true, "call_3": {"deny":
  "…"}}}`: a run that ended `paused` goes on with a decision for each waiting
  call (`true`, `false`, `{"deny": reason}` or `{"input": {…}}`, as
  `Agent.resume` takes them), streamed as `/api/run` streams a run. The page's
  Approve and Deny buttons send it. 409 while a run is in progress; 400 when no
  call waits, or for a missing, extra or bad decision (naming the ids).
- `POST /api/stop`: aborts this session's run. `POST /api/reset`: forgets
  the conversation and any calls that wait (409 during a run).

A browser session is a cookie; each session has one `Agent`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from ..errors import AerixError
from ..options import Hooks, Limits
from ..tools import Tool
from ._progress import IDLE, has_progress, read_progress
from ._session import (
    ModelFactory,
    ModelFailed,
    Run,
    Session,
    SessionStore,
    Settings,
    parse_settings,
    tool_summaries,
)

__all__ = ["COOKIE", "DEFAULT_INSTRUCTIONS", "create_app"]

STATIC = Path(__file__).parent / "static"
COOKIE = "aerix_session"
DEFAULT_INSTRUCTIONS = "You are a helpful assistant. Use the tools when they help, then answer briefly."
HEARTBEAT_S = 10.0
"""Seconds between keep-alive comments on a quiet stream (a closed tab is noticed on the next write)."""
PROGRESS_S = 0.25
"""Seconds between two readings of the engine's `progress` during a run."""
MAX_BODY = 4 << 20
"""The largest run request read, in bytes (4 MiB: a prompt far longer than any context)."""
_RUN_SHAPE = '{"prompt": "...", "settings": {...}}'
"""What a run request's body looks like, as its errors show it."""
_RESUME_SHAPE = '{"decisions": {"call_2": true, "call_3": {"deny": "..."}}}'
"""What a resume request's body looks like, as its errors show it."""


def create_app(
    model_factory: ModelFactory,
    *,
    tools: Sequence[Tool] | None = None,
    instructions: str = DEFAULT_INSTRUCTIONS,
    limits: Limits | None = None,
    temperature: float | None = 0.0,
    hooks: Hooks | Mapping[str, Any] | None = None,
    model_name: str = "",
    allowed_hosts: Sequence[str] | None = None,
) -> Starlette:
    """The playground as an ASGI app (Starlette), to serve with any ASGI server.

    Args:
        model_factory: Makes the model of each new agent: a session's first run,
            or a run after its settings changed. Sync factories run on a worker
            thread; async ones are awaited. Return one shared engine
            (`lambda: engine`) to share a loaded model between sessions.
        tools: The tools the page can pick from (default: the demo tools).
            All are picked at first.
        instructions: The default instructions (the page can edit them).
        limits: The default limits (the page can edit them).
        temperature: The default temperature, from 0 to 2 (`None`: the engine's).
        hooks: Hooks for every agent (a `Hooks` or a dict), e.g. a
            `before_call` that refuses some calls.
        model_name: Shown in the page's header.
        allowed_hosts: Host names the app answers to (others get 400), e.g.
            `["127.0.0.1", "localhost"]` against DNS rebinding; `None`: any.

    Raises:
        AerixError: `kind="options"` for two tools with one name or bad defaults.

    Example:
        >>> import aerix, uvicorn
        >>> engine = aerix.load("smollm2-instruct")  # doctest: +SKIP
        >>> app = create_app(lambda: engine, model_name="smollm2-instruct")
        >>> uvicorn.run(app, host="127.0.0.1", port=8000)  # doctest: +SKIP
    """
    pickable = list(_demo_tools() if tools is None else tools)
    by_name = _by_name(pickable)
    agent_hooks = Hooks.of(hooks)
    defaults = parse_settings(
        {"temperature": temperature},
        Settings(instructions=instructions, tools=tuple(by_name), limits=limits or Limits()),
        by_name,
    )
    config = {"model": model_name, "tools": tool_summaries(pickable), "defaults": defaults.to_dict()}
    endpoints = _Endpoints(model_factory, by_name, defaults, agent_hooks, config)
    middleware = [Middleware(_Guard, hosts=list(allowed_hosts) if allowed_hosts else None)]
    app = Starlette(routes=endpoints.routes(), middleware=middleware, lifespan=endpoints.lifespan)
    app.state.sessions = endpoints.store
    return app


def _by_name(pickable: Sequence[object]) -> dict[str, Tool]:
    """The pickable tools by name, in their order; a non-tool or a name given twice is refused."""
    by_name: dict[str, Tool] = {}
    for t in pickable:
        if not isinstance(t, Tool):
            raise AerixError(
                "options", f"tools must be Tool objects, got {t!r}; decorate it with @aerix.tool"
            )
        if t.name in by_name:
            raise AerixError("options", f"two tools are named {t.name!r}; tool names must be unique")
        by_name[t.name] = t
    return by_name


class _Endpoints:
    """The app's endpoints and lifespan, over one store of sessions."""

    def __init__(
        self,
        model_factory: ModelFactory,
        by_name: dict[str, Tool],
        defaults: Settings,
        hooks: Hooks,
        config: dict[str, Any],
    ) -> None:
        self._model_factory = model_factory
        self._by_name = by_name
        self._defaults = defaults
        self._hooks = hooks
        self._config = config
        self.store = SessionStore()

    def routes(self) -> list[Route | Mount]:
        """The routes, as the module's docstring lists them."""
        return [
            Route("/", self.page),
            Route("/favicon.ico", self.favicon),
            Route("/api/config", self.get_config),
            Route("/api/session", self.get_session),
            Route("/api/run", self.post_run, methods=["POST"]),
            Route("/api/resume", self.post_resume, methods=["POST"]),
            Route("/api/stop", self.post_stop, methods=["POST"]),
            Route("/api/reset", self.post_reset, methods=["POST"]),
            Mount("/static", StaticFiles(directory=STATIC), name="static"),
        ]

    async def page(self, request: Request) -> Response:
        session, new = _session(request, self.store)
        response = FileResponse(STATIC / "index.html", headers={"Cache-Control": "no-store"})
        return _with_cookie(response, session, new)

    async def favicon(self, request: Request) -> Response:
        return FileResponse(STATIC / "favicon.svg", media_type="image/svg+xml")

    async def get_config(self, request: Request) -> Response:
        return _Json(self._config)

    async def get_session(self, request: Request) -> Response:
        session, new = _session(request, self.store)
        body = {
            "busy": session.busy,
            "settings": (session.settings or self._defaults).to_dict(),
            "runs": [r.to_dict() for r in session.runs],
            "pending": session.pending,
        }
        return _with_cookie(_Json(body), session, new)

    async def post_run(self, request: Request) -> Response:
        refused = _refuse_cross_site(request, json_body=True)
        if refused is not None:
            return refused
        session, new = _session(request, self.store)
        body = await _run_request(request)
        if isinstance(body, tuple):
            status, message = body
            return _error(status, message, session, new)
        if session.busy:
            return _busy(session, new)
        try:
            settings = parse_settings(body.get("settings"), self._defaults, self._by_name)
            run, dropped = await session.start(
                body["prompt"], settings, self._by_name, self._model_factory, self._hooks
            )
        except ModelFailed as exc:
            return _error(500, f"could not make the model: {exc}", session, new)
        except AerixError as exc:  # busy: a run in progress, or calls that wait (the message names them)
            return _error(409 if exc.kind == "busy" else 400, exc.message, session, new)
        return _streamed(run, "new" if dropped else "same", session, new)

    async def post_resume(self, request: Request) -> Response:
        refused = _refuse_cross_site(request, json_body=True)
        if refused is not None:
            return refused
        session, new = _session(request, self.store)
        body = await _json_body(request, _RESUME_SHAPE)
        if isinstance(body, tuple):
            status, message = body
            return _error(status, message, session, new)
        decisions = body.get("decisions")
        if not isinstance(decisions, dict):
            return _error(400, f"decisions must be an object of call ids: {_RESUME_SHAPE}", session, new)
        try:
            run = session.resume(decisions)
        except AerixError as exc:
            return _error(409 if exc.kind == "busy" else 400, exc.message, session, new)
        return _streamed(run, "same", session, new)

    async def post_stop(self, request: Request) -> Response:
        refused = _refuse_cross_site(request)
        if refused is not None:
            return refused
        session, new = _session(request, self.store)
        stopped = session.stop("stopped from the page")
        return _with_cookie(_Json({"stopped": stopped}), session, new)

    async def post_reset(self, request: Request) -> Response:
        refused = _refuse_cross_site(request)
        if refused is not None:
            return refused
        session, new = _session(request, self.store)
        try:
            session.reset()
        except AerixError as exc:
            return _error(409, exc.message, session, new)
        return _with_cookie(_Json({"reset": True}), session, new)

    @contextlib.asynccontextmanager
    async def lifespan(self, app: Starlette) -> AsyncIterator[None]:
        yield
        store = self.store
        for session in store:  # shutting down: end the runs in progress with `abort`
            session.stop("the server is shutting down")
        tasks = [s.current.task for s in store if s.current is not None and s.current.task is not None]
        if tasks:
            await asyncio.wait(tasks, timeout=5)


def _streamed(run: Run, conversation: str, session: Session, new: bool) -> Response:
    """The response that streams `run`: a `session` event saying whether the conversation is
    the same or new, then the run's events."""
    headers = {"Cache-Control": "no-store", "X-Accel-Buffering": "no"}
    stream = _stream(run, {"type": "session", "conversation": conversation})
    response = StreamingResponse(stream, media_type="text/event-stream", headers=headers)
    return _with_cookie(response, session, new)


async def _json_body(request: Request, shape: str) -> dict[str, Any] | tuple[int, str]:
    """A request's body as a JSON object, or the HTTP status and message that refuse it."""
    raw = await _body(request)
    if raw is None:
        return 413, f"the request is larger than {MAX_BODY >> 20} MiB; send a shorter prompt"
    try:
        body = json.loads(raw)
    except (ValueError, RecursionError):
        return 400, f"the body must be JSON: {shape}"
    if not isinstance(body, dict):
        return 400, f"the body must be a JSON object: {shape}"
    return body


async def _run_request(request: Request) -> dict[str, Any] | tuple[int, str]:
    """A run request's body, its prompt a string with some text; or the HTTP status and
    message that refuse it."""
    body = await _json_body(request, _RUN_SHAPE)
    if isinstance(body, tuple):
        return body
    prompt = body.get("prompt")
    if prompt is not None and not isinstance(prompt, str):
        return 400, f"prompt must be a string, got {type(prompt).__name__}"
    if not prompt or not prompt.strip():
        return 400, "the prompt is empty; type a message first"
    return body


async def _stream(run: Run, hello: dict[str, Any]) -> AsyncIterator[str]:
    """The run's events and the engine's progress as SSE frames; a closed tab aborts the run."""
    getter: asyncio.Future[dict[str, Any] | None] | None = None
    clock = asyncio.get_running_loop().time
    watch = has_progress(run.model)
    shown = ""  # the text of the last progress frame: the engine was idle
    last_frame = next_reading = clock()
    try:
        yield _frame(hello, event="session")
        while True:
            # One pending get at a time, never cancelled by the heartbeat: no event is lost.
            getter = getter or asyncio.ensure_future(run.queue.get())
            done, _ = await asyncio.wait({getter}, timeout=PROGRESS_S if watch else HEARTBEAT_S)
            now = clock()
            if watch and now >= next_reading and not run.finished:
                next_reading = now + PROGRESS_S
                progress = read_progress(run.model) or IDLE
                if progress["text"] != shown:
                    shown = progress["text"]
                    last_frame = now
                    yield _frame(progress, event="progress")
            if not done:
                if now - last_frame >= HEARTBEAT_S:
                    last_frame = now
                    yield ": keep-alive\n\n"
                continue
            item, getter = getter.result(), None
            if item is None:
                return
            last_frame = now
            yield _frame(item)
    finally:
        if getter is not None:
            getter.cancel()
        if not run.finished:
            run.controller.abort("the page closed the stream")


def _frame(data: dict[str, Any], event: str | None = None) -> str:
    head = f"event: {event}\n" if event else ""
    # ASCII escapes: a lone surrogate (a model's `"\\ud800"`) travels as JSON, not as bad UTF-8
    return f"{head}data: {json.dumps(data)}\n\n"


class _Json(JSONResponse):
    """JSON with ASCII escapes: any text, a lone surrogate included, encodes."""

    def render(self, content: Any) -> bytes:
        return json.dumps(content, allow_nan=False, separators=(",", ":")).encode("ascii")


HEADERS = [
    (b"x-frame-options", b"DENY"),
    (
        b"content-security-policy",
        b"default-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'",
    ),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
]
"""On every response: no framing by another site, no script or style from elsewhere."""


class _Guard:
    """ASGI middleware: the security headers on every response, and, given `hosts`, a 400 for a
    request whose `Host` is none of them (against DNS rebinding; `[::1]:8000` reads as `::1`;
    `*.example.com` takes its subdomains, `*` any host)."""

    def __init__(self, app: Any, hosts: Sequence[str] | None) -> None:
        self._app = app
        self._hosts = None if hosts is None or "*" in hosts else {h.strip("[]").lower() for h in hosts}

    def _allowed(self, host: str) -> bool:
        assert self._hosts is not None
        return host in self._hosts or any(
            h.startswith("*.") and host.endswith(h[1:]) and len(host) > len(h) - 1 for h in self._hosts
        )

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        if self._hosts is not None:
            first = next((v for k, v in scope["headers"] if k == b"host"), b"")  # as Starlette reads it
            if not self._allowed(_host_of(first.decode("latin-1"))):
                await PlainTextResponse("Invalid host header", status_code=400, headers=_plain(HEADERS))(
                    scope, receive, send
                )
                return

        async def with_headers(message: Any) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *HEADERS]
            await send(message)

        await self._app(scope, receive, with_headers)


def _host_of(header: str) -> str:
    """The host of a `Host` header, without its port: `[::1]:8000` → `::1`, `localhost:80` → `localhost`."""
    header = header.strip().lower()
    if header.startswith("["):  # an IPv6 literal, then nothing or a port
        end = header.find("]")
        rest = header[end + 1 :] if end > 0 else "?"
        return header[1:end] if rest == "" or (rest[:1] == ":" and rest[1:].isdigit()) else ""
    return header.rsplit(":", 1)[0] if header.count(":") == 1 else header


def _plain(headers: Sequence[tuple[bytes, bytes]]) -> dict[str, str]:
    return {k.decode(): v.decode() for k, v in headers}


def _session(request: Request, store: SessionStore) -> tuple[Session, bool]:
    session = store.get(request.cookies.get(COOKIE))
    if session is not None:
        return session, False
    return store.create(), True


def _with_cookie(response: Response, session: Session, new: bool) -> Response:
    if new:
        response.set_cookie(COOKIE, session.id, httponly=True, samesite="strict", path="/")
    return response


async def _body(request: Request) -> bytes | None:
    """The request's body, or `None` if it is larger than `MAX_BODY` (read no further)."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > MAX_BODY:
        return None
    parts, size = [], 0
    async for part in request.stream():
        size += len(part)
        if size > MAX_BODY:
            return None
        parts.append(part)
    return b"".join(parts)


def _error(status: int, message: str, session: Session, new: bool) -> Response:
    return _with_cookie(_Json({"error": message}, status_code=status), session, new)


def _busy(session: Session, new: bool) -> Response:
    message = "a run is already in progress in this session; press Stop or wait for its end"
    return _error(409, message, session, new)


def _refuse_cross_site(request: Request, *, json_body: bool = False) -> Response | None:
    """Refuse a POST from another site's page (its `Origin` is not this host)."""
    origin = request.headers.get("origin")
    if origin is not None and urlsplit(origin).netloc != request.headers.get("host"):
        return _Json({"error": f"cross-site request from {origin} refused"}, status_code=403)
    if (
        json_body
        and request.headers.get("content-type", "").split(";")[0].strip().lower() != "application/json"
    ):
        return _Json({"error": "send the run as application/json"}, status_code=415)
    return None


def _demo_tools() -> list[Tool]:
    from ..demo_tools import DEMO_TOOLS

    return list(DEMO_TOOLS.values())
