"""`MCPServer`: the tools of an MCP server, over stdio or streamable HTTP, as aerix tools.

The session lives in a task of its own, started on entering: the SDK's task groups
must be left in the task that entered them, and this way `async with` works from
any task (a test fixture, a command that runs each step with `Runner.run`), a call
runs in the agent's task, and a server that breaks the session breaks only that
task, never the caller's.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import dataclasses
import math
import os
import shlex
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal, TextIO

import anyio
import httpx2
import mcp
import mcp_types as types
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from .. import __version__
from ..errors import AerixError, describe
from ..tools import Tool, ToolContext, tool
from ._checks import (
    bad,
    check_headers,
    check_names,
    check_prefix,
    check_timeout,
    check_url,
    is_str_map,
    without_userinfo,
)
from ._names import map_names
from ._results import MCPServerError, MCPToolError, leaf, result_value
from ._stderr import StderrTail
from ._stray import StrayOutput, in_session, quiet_sdk_logs

__all__ = ["DEFAULT_TIMEOUT", "MCPServer"]

DEFAULT_TIMEOUT = 30.0
"""Seconds a server has to start, answer the handshake and list its tools."""
MAX_PAGES = 100
"""The most pages of `tools/list` read: a server whose cursor never ends cannot hang the start."""


@dataclass(frozen=True, kw_only=True)
class _Spec:
    """What `MCPServer.stdio` or `MCPServer.http` was given."""

    name: str
    kind: Literal["stdio", "http"]
    prefix: str | None
    timeout: float
    names: Mapping[str, str | None]
    stdio: StdioServerParameters | None = None
    url: str = ""
    headers: Mapping[str, str] = field(default_factory=dict)
    stderr: TextIO | None = None


_HTTP_TIMEOUT = httpx2.Timeout(30.0, read=300.0)
"""The SDK's own HTTP timeouts (a response stream may stay open), for the client aerix makes."""
_CANCEL_GRACE = 5.0
"""Seconds a cancelled call waits for its request to end (its `notifications/cancelled` sent)."""
_CLOSED = "Connection closed"
"""The SDK's own message for a session whose connection closed (`CONNECTION_CLOSED`, -32000,
also a code that JSON-RPC leaves to a server's own errors)."""


class MCPServer:
    """An MCP server whose tools an agent can call: an async context manager.

    Made by `MCPServer.stdio(...)` or `MCPServer.http(...)`. Entering it starts the
    server (or connects to it), does the MCP handshake and lists its tools; inside,
    `tools` holds them as aerix `Tool`s. Leaving it closes the session and ends a
    stdio server's process. One `MCPServer` holds one session at a time; it may be
    entered again after it is left.

    Examples:
        >>> server = MCPServer.stdio("python", ["server.py"], prefix="kit")
        >>> server.name
        'python server.py'
    """

    def __init__(self, spec: _Spec) -> None:
        """Use `MCPServer.stdio(...)` or `MCPServer.http(...)`."""
        self._spec = spec
        self._tools: tuple[Tool, ...] | None = None
        self._client: mcp.Client | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[None] | None = None
        self._scope: anyio.CancelScope | None = None
        self._closing = asyncio.Event()
        self._tail: StderrTail | None = None
        self._stray = StrayOutput(spec.name, stdio=spec.kind == "stdio")
        """What the server sent that is not MCP, in the session now (each session starts anew)."""
        self._gone: str | None = None
        self._refused: str | None = None
        """The last HTTP error status the server answered while starting (`401 Unauthorized`)."""

    @classmethod
    def stdio(
        cls,
        command: str,
        args: Sequence[str] = (),
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
        prefix: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        names: Mapping[str, str | None] | None = None,
        stderr: TextIO | None = None,
    ) -> MCPServer:
        """A server that runs as a process of its own and speaks MCP on its stdin and stdout.

        Args:
            command: The program to run (looked up on `PATH`), e.g. `"python"` or `"npx"`.
            args: Its arguments.
            env: Environment variables for it, over the SDK's safe defaults (`PATH`,
                `HOME` and a few more; not this process's whole environment).
            cwd: The folder it runs in (default: this process's).
            prefix: Put before every tool's name (`prefix_name`): tells the tools of two
                servers apart.
            timeout: Seconds it has to start, answer the handshake and list its tools.
            names: Aerix names for some of its tools, by their MCP names, instead of the
                mapped ones (`prefix` is not added); `None` leaves a tool out.
            stderr: Where its stderr goes, as it comes (default: this process's
                `sys.stderr`). Either way its last lines explain a server that fails.

        Raises:
            AerixError: `kind="options"`, naming the bad argument.
        """
        if not isinstance(command, str) or not command.strip():
            raise bad(f"MCPServer.stdio: command must be a program to run, got {command!r}")
        if isinstance(args, str | bytes) or not isinstance(args, Sequence):
            raise bad(
                f"MCPServer.stdio: args must be a list of strings, got {args!r}; "
                f"e.g. MCPServer.stdio({command!r}, {_split(args)!r})"
            )
        if not all(isinstance(a, str) for a in args):
            raise bad(f"MCPServer.stdio: args must all be strings, got {list(args)!r}")
        if env is not None and not is_str_map(env):
            raise bad(f"MCPServer.stdio: env must map names to strings, got {env!r}")
        if cwd is not None and not os.path.isdir(cwd):
            raise bad(f"MCPServer.stdio: cwd {os.fspath(cwd)!r} is not a folder")
        if stderr is not None and not callable(getattr(stderr, "write", None)):
            raise bad(f"MCPServer.stdio: stderr must be a text stream, got {type(stderr).__name__}")
        name = shlex.join([os.path.basename(command) or command, *args])
        return cls(
            _Spec(
                name=name,
                kind="stdio",
                prefix=check_prefix(prefix),
                timeout=check_timeout(timeout),
                names=check_names(names),
                stdio=StdioServerParameters(
                    command=command,
                    args=list(args),
                    env=None if env is None else dict(env),
                    cwd=None if cwd is None else os.fspath(cwd),
                ),
                stderr=stderr,
            )
        )

    @classmethod
    def http(
        cls,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        prefix: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        names: Mapping[str, str | None] | None = None,
    ) -> MCPServer:
        """A server that speaks MCP over streamable HTTP at `url`.

        Args:
            url: Its MCP endpoint, e.g. `"http://127.0.0.1:8000/mcp"`.
            headers: HTTP headers for every request (an `Authorization`, say): names and values
                that HTTP can carry (visible ASCII, on one line).
            prefix: Put before every tool's name (`prefix_name`).
            timeout: Seconds it has to answer the handshake and list its tools.
            names: Aerix names for some of its tools, by their MCP names (`prefix` is not
                added); `None` leaves a tool out.

        Raises:
            AerixError: `kind="options"`, naming the bad argument: a URL without a host or
                with a bad port, a header that HTTP cannot carry.
        """
        url = check_url(url)
        checked = check_headers(headers)
        return cls(
            _Spec(
                name=without_userinfo(url),
                kind="http",
                prefix=check_prefix(prefix),
                timeout=check_timeout(timeout),
                names=check_names(names),
                url=url,
                headers=checked,
            )
        )

    @property
    def name(self) -> str:
        """The server as errors and results name it: its command line, or its URL."""
        return self._spec.name

    @property
    def tools(self) -> tuple[Tool, ...]:
        """Its tools, one per server tool: there only inside `async with`.

        Each has the server tool's description, its `inputSchema` as `schema`, and its MCP
        annotations (`destructiveHint`, `readOnlyHint`, ...) as `Tool.annotations`. No tool
        of a server needs approval in the agent (`needs_approval` is `False`); to have a
        person decide on the destructive ones, give them `needs_approval` as `aerix run`
        does: `dataclasses.replace(t, needs_approval=True)` where
        `t.annotations.get("destructiveHint") is True` and `readOnlyHint` is not.

        Raises:
            AerixError: `kind="options"`, outside `async with`.
        """
        if self._tools is None:
            raise bad(
                f"MCP server {self.name!r}: its tools are listed on entering it; "
                "use them inside `async with server:`"
            )
        return self._tools

    async def __aenter__(self) -> MCPServer:
        """Start the server (or connect to it), do the MCP handshake and list its tools.

        Raises:
            AerixError: `kind="busy"` while it is already open; `kind="options"` when it
                cannot start, refuses the handshake or does not list its tools within
                `timeout`, with what it said and what to do.
        """
        if self._task is not None:
            raise AerixError(
                "busy", f"MCP server {self.name!r} is already open; make another MCPServer to open it twice"
            )
        loop = asyncio.get_running_loop()
        self._loop, self._gone, self._closing = loop, None, asyncio.Event()
        ready: asyncio.Future[list[types.Tool]] = loop.create_future()
        self._task = loop.create_task(self._own(ready), name=f"aerix.mcp {self.name}")
        try:
            listed = await ready
            self._tools = self._build(listed)
        except BaseException:
            await self._finish()
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._finish()

    def __repr__(self) -> str:
        state = "closed" if self._tools is None else f"open, {len(self._tools)} tools"
        return f"MCPServer({self.name!r}, {state})"

    async def _finish(self) -> None:
        """Close the session (stop the start, if it is still going) and wait for the task to end."""
        task = self._task
        if task is None:
            return
        self._closing.set()
        if self._client is None and self._scope is not None:  # still starting
            self._scope.cancel()
        try:
            await asyncio.shield(task)  # a cancelled caller leaves it to finish by itself
        except asyncio.CancelledError:
            if not task.done():
                raise
        except Exception:  # the session's own failure: the results said so
            pass
        finally:
            if task.done():
                self._task, self._tools = None, None

    async def _own(self, ready: asyncio.Future[list[types.Tool]]) -> None:
        """The session's task: start, hand the tool list to `__aenter__`, wait to be closed, close."""
        tail = StderrTail(self._spec.stderr) if self._spec.kind == "stdio" else None
        self._tail = tail
        self._stray = StrayOutput(self.name, stdio=self._spec.kind == "stdio")
        quiet_sdk_logs()
        in_session.set(True)  # this task's own context, which the SDK's tasks for the session inherit
        timed_out = False
        try:
            with anyio.CancelScope() as scope:
                self._scope = scope
                scope.deadline = anyio.current_time() + self._spec.timeout
                async with self._connect(tail) as client:
                    listed = await _list_tools(client)
                    scope.deadline = math.inf
                    self._client = client
                    if not ready.done():
                        ready.set_result(listed)
                    await self._closing.wait()
            timed_out = scope.cancelled_caught and not self._closing.is_set()
        except Exception as exc:
            cause = leaf(exc)
            if tail is not None:
                await tail.settle()
            if not ready.done():
                error = self._start_error(cause)
                error.__cause__ = cause
                ready.set_exception(error)
            elif self._gone is None and not self._closing.is_set():
                self._gone = _one_line(cause)
        finally:
            self._client = None
            if tail is not None:
                tail.close()
            if not ready.done():
                if timed_out:
                    ready.set_exception(self._timeout_error())
                else:  # stopped while starting: `__aenter__` was cancelled
                    ready.cancel()

    @contextlib.asynccontextmanager
    async def _connect(self, tail: StderrTail | None) -> AsyncIterator[mcp.Client]:
        """The SDK's client over this server's transport, entered (the handshake done)."""
        spec = self._spec
        info = types.Implementation(name="aerix", version=__version__)
        async with contextlib.AsyncExitStack() as stack:
            if tail is not None:
                assert spec.stdio is not None
                transport: Any = _stdio_transport(spec.stdio, tail)
            else:
                self._refused = None
                http = await stack.enter_async_context(
                    httpx2.AsyncClient(headers=dict(spec.headers or {}), timeout=_HTTP_TIMEOUT)
                )
                http.event_hooks["response"].append(self._note_status)
                transport = streamable_http_client(spec.url, http_client=http)
            client = mcp.Client(transport, client_info=info, cache=None, message_handler=self._on_message)
            yield await stack.enter_async_context(client)

    async def _on_message(self, message: object) -> None:
        """The SDK's messages beside answers: an exception is something it skipped (a line of
        a banner on stdout), which `StrayOutput` says in one line; notifications need nothing."""
        if isinstance(message, Exception):
            self._stray.note(message)

    async def _note_status(self, response: httpx2.Response) -> None:
        """Keep an HTTP error status of the start (the SDK's error no longer says it)."""
        if response.status_code >= 400 and self._client is None:
            self._refused = f"{response.status_code} {response.reason_phrase}".strip()

    def _build(self, listed: list[types.Tool]) -> tuple[Tool, ...]:
        """The aerix tools of the server's tool list."""
        names = map_names(self.name, [t.name for t in listed], self._spec.prefix, self._spec.names)
        tools: list[Tool] = []
        for t in listed:
            if t.name not in names:
                continue
            try:
                made = tool(
                    name=names[t.name],
                    description=t.description or t.title or "",
                    schema=copy.deepcopy(t.input_schema),
                    run=self._runner(t.name),
                )
            except AerixError as exc:
                name = names[t.name]
                said = exc.message.removeprefix(f"tool {name!r}: ")  # named once, below
                label = repr(t.name) if name == t.name else f"{t.name!r} (aerix name {name!r})"
                raise bad(
                    f"MCP server {self.name!r}: tool {label}: {said}; "
                    f"leave it out with names={{{t.name!r}: None}}"
                ) from None
            if t.annotations is not None:
                hints = t.annotations.model_dump(mode="json", by_alias=True, exclude_none=True)
                made = dataclasses.replace(made, annotations=MappingProxyType(hints))
            tools.append(made)
        return tuple(tools)

    def _runner(self, mcp_name: str) -> Callable[[dict[str, Any], ToolContext], Any]:
        async def run(input: dict[str, Any], cx: ToolContext) -> Any:
            return await self._call(mcp_name, input, cx)

        return run

    async def _call(self, mcp_name: str, arguments: dict[str, Any], cx: ToolContext) -> Any:
        """Send `tools/call`; an abort of `cx.signal`, the caller's cancellation, or the session's
        end cancels it."""
        client, task, loop = self._client, self._task, self._loop
        if client is None or task is None or loop is None:
            raise MCPServerError(await self._unavailable())
        if asyncio.get_running_loop() is not loop:
            raise MCPServerError(
                f"MCP server {self.name!r} was opened on another event loop: call its tools on the "
                "loop that entered `async with` (await agent.run/ask there, not run_sync/ask_sync)"
            )
        if cx.signal.aborted:
            raise MCPServerError(f"the call of {mcp_name!r} was aborted before it was sent")
        scope = anyio.CancelScope()
        # The request runs in a task of its own, which only its cancel scope stops: a caller's
        # cancellation (concurrent calls stopped by an abort) that came on top of the scope's would
        # cut the SDK's courtesy `notifications/cancelled` short, and the server would go on.
        request = asyncio.ensure_future(self._request(client, task, loop, scope, mcp_name, arguments, cx))
        try:
            return await asyncio.shield(request)
        except asyncio.CancelledError:
            request.add_done_callback(_retrieved)  # the caller has left: nobody else reads it
            scope.cancel()  # the request ends by itself once its cancel is sent (the SDK bounds that)
            await asyncio.wait({request}, timeout=_CANCEL_GRACE)  # a second cancel cuts this short
            raise

    async def _request(
        self,
        client: Any,
        task: asyncio.Task[Any],
        loop: asyncio.AbstractEventLoop,
        scope: anyio.CancelScope,
        mcp_name: str,
        arguments: dict[str, Any],
        cx: ToolContext,
    ) -> Any:
        with scope:

            def cancel(*_: object) -> None:
                with contextlib.suppress(RuntimeError):  # the loop is closed: nothing to cancel
                    loop.call_soon_threadsafe(scope.cancel)

            remove = cx.signal.add_callback(cancel)
            task.add_done_callback(cancel)
            try:
                result = await client.call_tool(mcp_name, arguments)
            except MCPError as exc:
                if exc.code == types.CONNECTION_CLOSED and exc.message == _CLOSED:
                    raise MCPServerError(await self._unavailable()) from None
                raise MCPToolError(
                    f"MCP server {self.name!r} refused the call of {mcp_name!r}: {exc.message} "
                    f"(MCP error {exc.code})"
                ) from None
            except httpx2.HTTPError as exc:
                gone = f"MCP server {self.name!r} cannot be reached: {_one_line(exc)}"
                raise MCPServerError(gone) from None
            except Exception as exc:  # the SDK's own failures: a result it cannot read, a broken stream
                if task.done():
                    raise MCPServerError(await self._unavailable()) from None
                failed = f"MCP server {self.name!r}: the call of {mcp_name!r} failed: {_one_line(exc)}"
                raise MCPServerError(failed) from exc
            finally:
                remove()
                task.remove_done_callback(cancel)
        if scope.cancelled_caught:
            if task.done() or self._closing.is_set():  # the session ended under it
                raise MCPServerError(await self._unavailable())
            how = "aborted" if cx.signal.aborted else "cancelled"
            raise MCPServerError(f"the call of {mcp_name!r} was {how}: the request is cancelled")
        return result_value(result)

    async def _unavailable(self) -> str:
        """Why a call cannot be answered: the session is closed, or the server is gone, and why."""
        if self._tail is not None:
            await self._tail.settle()
        if self._task is None or self._closing.is_set():
            return f"MCP server {self.name!r} is closed: its tools work only inside its `async with` block"
        return f"MCP server {self.name!r} is gone: {self._why_gone()}; leave its `async with` and enter again"

    def _why_gone(self) -> str:
        if self._gone is not None:
            return self._gone
        tail = self._tail
        if tail is None:
            return "it closed the connection"
        words = tail.last()
        why = "its process ended" if tail.ended else "it closed the connection"
        return f"{why} (its last words on stderr: {words!r})" if words else why

    def _start_error(self, exc: BaseException) -> AerixError:
        """The error of a server that failed to start: what happened, and what to do."""
        where = f"MCP server {self.name!r}"
        spec = self._spec
        if spec.stdio is not None and isinstance(exc, OSError):
            command = spec.stdio.command
            if isinstance(exc, FileNotFoundError) and exc.filename in (None, command):
                return bad(
                    f"{where}: cannot start it: there is no command {command!r}; install it, or give "
                    "its full path (as the command, its arguments in args)"
                )
            if isinstance(exc, PermissionError):
                return bad(
                    f"{where}: cannot start {command!r}: permission denied; make it executable, "
                    "or run it through its interpreter (MCPServer.stdio('python', ['server.py']))"
                )
            return bad(f"{where}: cannot start it: {_one_line(exc)}")
        if isinstance(exc, httpx2.ConnectError):
            return bad(f"{where}: cannot connect ({exc}); is the server running, and is the URL right?")
        if isinstance(exc, httpx2.HTTPError):
            return bad(f"{where}: the MCP handshake failed: {_one_line(exc)}")
        if self._refused is not None and self._refused[:3] in ("401", "403"):
            return bad(
                f"{where} refused the connection: HTTP {self._refused}; give its credentials "
                "with headers= (MCPServer.http(url, headers={'Authorization': 'Bearer …'}))"
            )
        if isinstance(exc, MCPError):
            if exc.code == types.CONNECTION_CLOSED:
                how = self._why_gone() if spec.kind == "stdio" else "it closed the connection"
                fix = "run the command yourself to see why" if spec.kind == "stdio" else "check the URL"
                how += self._stray.said()
                return bad(f"{where} failed before answering the MCP handshake: {how}; {fix}")
            hint = "; check that the URL is its MCP endpoint (often …/mcp)" if spec.kind == "http" else ""
            said = exc.message.strip().partition("\n")[0]  # the first line: pydantic's errors go on for pages
            if self._refused is not None and self._refused[4:] not in said:  # not said already
                hint = f" (HTTP {self._refused}){hint}"
            return bad(f"{where} refused the MCP handshake: {said} (MCP error {exc.code}){hint}")
        return bad(f"{where}: the MCP handshake failed: {_one_line(exc)}")

    def _timeout_error(self) -> AerixError:
        spec = self._spec
        words = self._tail.last() if self._tail is not None else None
        said = f" (its last words on stderr: {words!r})" if words else ""
        transport = "on stdio" if spec.kind == "stdio" else "streamable HTTP at that URL"
        return bad(
            f"MCP server {self.name!r} did not answer the MCP handshake and list its tools within "
            f"{spec.timeout:g} s{said}{self._stray.said()}; "
            f"check that it is an MCP server speaking {transport}, or give it longer with timeout="
        )


@contextlib.asynccontextmanager
async def _stdio_transport(params: StdioServerParameters, tail: StderrTail) -> AsyncIterator[Any]:
    """The SDK's stdio transport, its stderr into `tail`; this process's copy of the pipe's write
    end closes once the server has its own, so the pipe's end says that the server ended."""
    try:
        async with stdio_client(params, errlog=tail.file) as streams:
            tail.started()
            yield streams
    finally:
        tail.started()


async def _list_tools(client: mcp.Client) -> list[types.Tool]:
    """Every tool the server lists, page by page (none when it offers no tools)."""
    if client.server_capabilities.tools is None:
        return []
    listed: list[types.Tool] = []
    cursor: str | None = None
    for _ in range(MAX_PAGES):
        page = await client.list_tools(cursor=cursor)
        listed += page.tools
        cursor = page.next_cursor
        if not cursor:
            break
    return listed


def _retrieved(request: asyncio.Future[Any]) -> None:
    """Read a finished request's outcome, which its caller, gone, never will."""
    if not request.cancelled():
        request.exception()


def _split(args: object) -> list[str]:
    """A command line's words, as `args` takes them (`"server.py main"` → `["server.py", "main"]`)."""
    text = args.decode(errors="replace") if isinstance(args, bytes) else str(args)
    try:
        return shlex.split(text)
    except ValueError:  # an unclosed quote
        return text.split()


def _one_line(exc: BaseException) -> str:
    return describe(exc).replace("\n", " ")
