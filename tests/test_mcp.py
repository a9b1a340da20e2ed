"""`aerix.mcp`: the tools of real MCP servers that the tests start themselves.

The server (tests/mcp_servers/kit.py) is written with the SDK's own server class and
runs over stdio and over streamable HTTP on 127.0.0.1; tests/mcp_servers/silent.py
never answers the handshake; `not_mcp` is an HTTP endpoint that answers what no MCP
server would.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import http.server
import json
import logging
import os
import re
import shlex
import socket
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from _embedded import missing

pytest.importorskip("mcp", reason="aerix.mcp needs the mcp extra")

import mcp
from mcp.client.stdio import StdioServerParameters, stdio_client

from aerix import AbortController, AerixError, Agent, ToolContext
from aerix.mcp import MCPServer, aerix_name
from aerix.testing import ScriptedModel
from aerix.tools import NAME_PATTERN, Tool, run_tool

SERVERS = Path(__file__).parent / "mcp_servers"
KIT = str(SERVERS / "kit.py")
LISTED = str(SERVERS / "listed.py")
SILENT = str(SERVERS / "silent.py")
KIT_TOOLS = ["add", "order", "fail", "hang", "crash", "stats", "picture", "get_weather_v2"]


# --- the servers -------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@contextlib.contextmanager
def http_kit(env: dict[str, str] | None = None) -> Iterator[str]:
    """The kit server over streamable HTTP on a free port of 127.0.0.1: its URL, until the block ends."""
    port = _free_port()
    process = subprocess.Popen(
        [sys.executable, KIT, "--http", str(port)],
        env={**os.environ, **(env or {})},
        stdin=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"the HTTP kit server did not start (exit {process.poll()})") from None
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@contextlib.contextmanager
def not_mcp(content_type: str, body: bytes) -> Iterator[str]:
    """An HTTP endpoint on 127.0.0.1 that answers every request 200 with `body`: its URL."""

    class Answer(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("content-length") or 0))
            self.send_response(200)
            self.send_header("content-type", content_type)
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_DELETE = do_POST

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Answer)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/mcp"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@contextlib.asynccontextmanager
async def kit(transport: str, mark: Path | None = None, **options: Any) -> AsyncIterator[MCPServer]:
    """The kit server, entered, over `transport`; `mark` is the file its `hang` tool writes when cancelled."""
    env = {"AERIX_MCP_MARK": str(mark)} if mark is not None else {}
    if transport == "stdio":
        async with MCPServer.stdio(sys.executable, [KIT], env=env, **options) as server:
            yield server
    else:
        with http_kit(env) as url:
            async with MCPServer.http(url, **options) as server:
                yield server


TRANSPORTS = ["stdio", pytest.param("http", marks=pytest.mark.slow)]


def by_name(server: MCPServer) -> dict[str, Tool]:
    return {t.name: t for t in server.tools}


async def call(t: Tool, input: dict[str, Any], signal: Any = None) -> tuple[str, bool]:
    """Run a tool as the loop does: the input check, then `run`."""
    cx = ToolContext(signal=signal or AbortController().signal, call_id="call_1")
    return await run_tool(t, input, cx)


async def wait_for(check: Callable[[], bool], seconds: float = 20) -> bool:
    deadline = time.monotonic() + seconds
    while not check():
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.05)
    return True


def _said(mark: Path) -> str:
    """What the kit server wrote to its mark file so far (`""` before it made the file)."""
    try:
        return mark.read_text()
    except FileNotFoundError:
        return ""


def children() -> set[int]:
    """This process's child processes (zombies too), read from /proc."""
    me, found = os.getpid(), set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            if int(stat.rpartition(")")[2].split()[1]) == me:
                found.add(int(entry))
    return found


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def threads() -> int:
    return len(os.listdir("/proc/self/task"))


linux = pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="counts processes and fds in /proc")


# --- names -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "prefix", "mapped"),
    [
        ("add", None, "add"),
        ("Get-Weather.v2", None, "get_weather_v2"),
        ("search", "GitHub", "github_search"),
        ("list files", "fs", "fs_list_files"),
        ("3d_render", None, "tool_3d_render"),
        ("_private", None, "private"),
        ("__", None, "tool"),
        ("Ünïcode", None, "n_code"),
        ("x" * 80, None, "x" * 64),
        ("x" * 80, "pre", "pre_" + "x" * 60),
        ("_under", "weather", "weather_under"),  # the name's leading `_`s go with a prefix too
        ("__x", "Weather", "weather_x"),
        ("__", "w", "w_tool"),
        ("3d_render", "gh", "gh_3d_render"),
    ],
)
def test_a_name_is_mapped_to_the_tool_name_pattern(name: str, prefix: str | None, mapped: str) -> None:
    assert aerix_name(name, prefix) == mapped
    assert NAME_PATTERN.match(mapped)


@pytest.mark.parametrize("name", ["A", "1", "_", "-", "é", "9lives", "__x__", "a.b/c:d", "Z" * 100, "ǅ"])
def test_any_name_maps_to_a_valid_tool_name(name: str) -> None:
    assert NAME_PATTERN.match(aerix_name(name))
    assert NAME_PATTERN.match(aerix_name(name, "Pre-fix"))


# --- listing -----------------------------------------------------------------------------------


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_the_tools_are_the_servers_with_their_descriptions_and_schemas(transport: str) -> None:
    params = StdioServerParameters(command=sys.executable, args=[KIT])
    async with mcp.Client(stdio_client(params)) as client:
        listed = (await client.list_tools()).tools
    async with kit(transport) as server:
        tools = server.tools
        assert isinstance(tools, tuple) and all(isinstance(t, Tool) for t in tools)
        assert [t.name for t in tools] == KIT_TOOLS
        assert [t.description for t in tools] == [t.description for t in listed]
        assert [t.schema for t in tools] == [t.input_schema for t in listed]
        assert all(t.input == {} for t in tools)
        assert repr(server) == f"MCPServer({server.name!r}, open, {len(KIT_TOOLS)} tools)"


async def test_a_prefix_goes_first_and_names_renames_or_leaves_out() -> None:
    async with kit("stdio", prefix="Kit") as server:
        assert [t.name for t in server.tools] == [f"kit_{n}" for n in KIT_TOOLS]
    names = {"add": "plus", "crash": None, "Get-Weather.v2": "weather"}
    async with kit("stdio", prefix="kit", names=names) as server:
        tools = by_name(server)
        assert list(tools) == [
            "plus",
            "kit_order",
            "kit_fail",
            "kit_hang",
            "kit_stats",
            "kit_picture",
            "weather",
        ]
        assert await call(tools["plus"], {"a": 1, "b": 2}) == ("3", False)


async def test_two_tools_that_map_to_one_name_are_refused_naming_both() -> None:
    with pytest.raises(AerixError) as caught:
        async with MCPServer.stdio(sys.executable, [KIT, "--clash"]):
            pass
    assert caught.value.kind == "options"
    assert "'get-data' and 'Get_Data' both map to the aerix name 'get_data'" in caught.value.message
    assert "names={'Get_Data': 'another_name'}" in caught.value.message
    async with MCPServer.stdio(sys.executable, [KIT, "--clash"], names={"Get_Data": "get_data_2"}) as server:
        tools = by_name(server)
        assert await call(tools["get_data"], {}) == ("one", False)
        assert await call(tools["get_data_2"], {}) == ("two", False)


async def test_a_server_that_lists_one_name_twice_is_told_that_names_cannot_tell_them_apart() -> None:
    listed = json.dumps([{"name": n, "inputSchema": {"type": "object"}} for n in ("same", "other", "same")])
    for names in (None, {"same": "another_name"}):  # renaming goes by MCP name: it renames both
        with pytest.raises(AerixError) as caught:
            async with MCPServer.stdio(sys.executable, [LISTED, listed], names=names):
                pass
        assert caught.value.kind == "options"
        assert caught.value.message.endswith(
            "lists two tools named 'same', and names= (keyed by MCP name) cannot tell them apart: have "
            "the server give them different names, or leave both out with names={'same': None}"
        ), caught.value.message
    async with MCPServer.stdio(sys.executable, [LISTED, listed], names={"same": None}) as server:
        assert [t.name for t in server.tools] == ["other"]  # both left out, as the message says


@pytest.mark.parametrize(
    ("name", "said"),
    [("bad", "tool 'bad': unsupported"), ("Bad-One", "tool 'Bad-One' (aerix name 'bad_one'): unsupported")],
)
async def test_a_tool_whose_schema_aerix_cannot_take_is_named_once(name: str, said: str) -> None:
    schema = {"type": "object", "properties": {"x": {"not": {"type": "string"}}}}
    listed = json.dumps(
        [{"name": "good", "inputSchema": {"type": "object"}}, {"name": name, "inputSchema": schema}]
    )
    with pytest.raises(AerixError) as caught:
        async with MCPServer.stdio(sys.executable, [LISTED, listed]):
            pass
    message = caught.value.message
    assert f"{said} JSON Schema keyword 'not' at schema.properties.x.not;" in message
    assert message.count(f"'{name}'") == 2, message  # once in the cause, once in the way out
    assert message.endswith(f"leave it out with names={{{name!r}: None}}")
    async with MCPServer.stdio(sys.executable, [LISTED, listed], names={name: None}) as server:
        assert await call(by_name(server)["good"], {}) == ("ok {}", False)


async def test_names_must_name_the_servers_tools() -> None:
    with pytest.raises(
        AerixError, match=r"names= gives 'ad', which is none of its tools; its tools are 'add'"
    ):
        async with kit("stdio", names={"ad": "plus"}):
            pass


def test_the_tools_are_there_only_inside_the_block() -> None:
    server = MCPServer.stdio("python", ["server.py"])
    assert server.name == "python server.py"
    with pytest.raises(AerixError, match=r"its tools are listed on entering it; use them inside `async with"):
        _ = server.tools


# --- calls -------------------------------------------------------------------------------------


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_call_gives_the_text_the_structured_content_or_an_error(transport: str) -> None:
    async with kit(transport) as server:
        tools = by_name(server)
        assert await call(tools["add"], {"a": 2, "b": 3}) == ("5", False)
        assert await call(tools["get_weather_v2"], {"city": "Lisbon"}) == ("Sunny in Lisbon", False)
        assert await call(tools["picture"], {}) == ("before\nafter", False)  # the image is left out
        assert await call(tools["stats"], {}) == ('{"count": 3, "ok": true}', False)
        text, error = await call(tools["fail"], {"reason": "on a test"})
        assert error and text.startswith("error: ") and "failed on purpose: on a test" in text
        # the input is checked against the server's schema before anything is sent
        text, error = await call(tools["add"], {"a": 2})
        assert error and "b" in text and "MCP" not in text


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_nested_input_reaches_the_server(transport: str) -> None:
    async with kit(transport) as server:
        order = by_name(server)["order"]
        assert order.schema["properties"]["items"]["type"] == "array"
        input = {"items": [{"sku": "A1", "qty": 2}, {"sku": "B2", "qty": 1}], "address": {"city": "Porto"}}
        assert await call(order, input) == ("ordered 2 x A1, 1 x B2 to Porto (slow)", False)
        text, error = await call(order, {"items": [{"sku": "A1", "qty": "2"}], "address": {"city": "Porto"}})
        assert error and "qty" in text


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_an_abort_cancels_the_request(transport: str, tmp_path: Path) -> None:
    mark = tmp_path / "cancelled"
    async with kit(transport, mark) as server:
        tools = by_name(server)
        controller = AbortController()
        asyncio.get_running_loop().call_later(0.5, controller.abort)
        text, error = await asyncio.wait_for(call(tools["hang"], {}, controller.signal), 30)
        assert error and "aborted" in text
        # the server creates the file, then writes it: wait for the word, not the file
        assert await wait_for(lambda: _said(mark) == "cancelled"), "the server's tool was not cancelled"
        assert await call(tools["add"], {"a": 1, "b": 1}) == ("2", False)  # the session goes on


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_server_that_dies_gives_error_results_and_closes_quietly(transport: str) -> None:
    before = children()
    async with kit(transport) as server:
        tools = by_name(server)
        text, error = await asyncio.wait_for(call(tools["crash"], {}), 30)
        assert error and f"MCP server {server.name!r} is gone" in text, text
        if transport == "stdio":
            assert "its process ended" in text
        text, error = await asyncio.wait_for(call(tools["add"], {"a": 1, "b": 1}), 30)
        assert error and f"MCP server {server.name!r}" in text
    assert children() <= before
    text, error = await call(tools["add"], {"a": 1, "b": 1})
    assert error and "is closed: its tools work only inside its `async with` block" in text


async def test_leaving_the_block_ends_the_servers_process() -> None:
    before = children()
    async with kit("stdio") as server:
        started = children() - before
        assert len(started) == 1
        assert await call(by_name(server)["add"], {"a": 1, "b": 1}) == ("2", False)
    assert not started & children()


async def test_the_block_can_be_left_from_another_task_and_entered_again() -> None:
    server = MCPServer.stdio(sys.executable, [KIT])
    await asyncio.create_task(server.__aenter__())
    with pytest.raises(AerixError) as caught:
        await server.__aenter__()
    assert caught.value.kind == "busy"
    assert await call(by_name(server)["add"], {"a": 1, "b": 2}) == ("3", False)
    await asyncio.create_task(server.__aexit__(None, None, None))
    async with server:
        assert await call(by_name(server)["add"], {"a": 2, "b": 2}) == ("4", False)


async def test_the_stderr_of_a_server_goes_where_it_is_told() -> None:
    import io

    err = io.StringIO()
    code = "import sys; sys.stderr.write('starting up\\n'); sys.stderr.flush(); raise SystemExit('no luck')"
    with pytest.raises(AerixError) as caught:
        async with MCPServer.stdio(sys.executable, ["-c", code], stderr=err):
            pass
    assert "failed before answering the MCP handshake: its process ended" in caught.value.message
    assert "its last words on stderr: 'no luck'" in caught.value.message
    assert err.getvalue() == "starting up\nno luck\n"


# --- what is not MCP ---------------------------------------------------------------------------


def _sdk_said(records: list[logging.LogRecord], text: str) -> list[logging.LogRecord]:
    return [r for r in records if r.name.startswith("mcp.") and r.getMessage().startswith(text)]


async def test_lines_on_stdout_that_are_not_mcp_are_noted_once_without_a_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    async with MCPServer.stdio(sys.executable, [KIT, "--banner"]) as server:
        assert await call(by_name(server)["add"], {"a": 1, "b": 2}) == ("3", False)  # the session works
    ours = [r for r in caplog.records if r.name == "aerix.mcp"]
    assert [(r.levelname, r.getMessage()) for r in ours] == [
        (
            "WARNING",
            f"MCP server {server.name!r} wrote a line on stdout that is not MCP, skipped: "
            '"starting up..." (an MCP server on stdio writes only MCP messages on stdout, anything '
            "else on stderr)",
        ),
        ("DEBUG", f'MCP server {server.name!r} sent more that is not MCP, skipped: {{"status": "ready"}}'),
    ]
    assert all(r.exc_info is None for r in ours)
    assert _sdk_said(caplog.records, "Failed to parse JSONRPC message") == []  # not the SDK's traceback


def test_a_banner_on_stdout_is_one_line_on_stderr_when_logging_is_not_configured() -> None:
    code = (
        "import asyncio, sys\n"
        "from aerix.mcp import MCPServer\n"
        "async def main():\n"
        f"    async with MCPServer.stdio(sys.executable, [{KIT!r}, '--banner']) as server:\n"
        "        print(len(server.tools))\n"
        "asyncio.run(main())\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"{len(KIT_TOOLS)}\n"
    name = shlex.join([os.path.basename(sys.executable), KIT, "--banner"])
    assert done.stderr.splitlines() == [
        f"MCP server {name!r} wrote a line on stdout that is not MCP, skipped: "
        '"starting up..." (an MCP server on stdio writes only MCP messages on stdout, anything '
        "else on stderr)"
    ]


async def test_a_session_opened_with_the_sdk_itself_still_logs_as_the_sdk_does(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with MCPServer.stdio(sys.executable, [KIT, "--banner"]):  # aerix's filter is on from here
        pass
    caplog.clear()
    params = StdioServerParameters(command=sys.executable, args=[KIT, "--banner"])
    async with mcp.Client(stdio_client(params)) as client:
        await client.list_tools()
    said = _sdk_said(caplog.records, "Failed to parse JSONRPC message from server")
    assert len(said) == 2 and all(r.exc_info is not None for r in said)
    assert not [r for r in caplog.records if r.name == "aerix.mcp"]


async def test_a_server_that_writes_no_mcp_on_stdout_is_told_so() -> None:
    with pytest.raises(AerixError) as caught:
        async with MCPServer.stdio(sys.executable, ["-c", "print('hello'); print('world')"]):
            pass
    assert caught.value.message.endswith(
        "failed before answering the MCP handshake: its process ended; it wrote 2 lines on stdout "
        'that are not MCP, the first "hello"; run the command yourself to see why'
    ), caught.value.message
    echo = "import sys\nfor line in sys.stdin:\n    print('garbage', flush=True)"
    with pytest.raises(AerixError) as caught:
        async with MCPServer.stdio(sys.executable, ["-c", echo], timeout=1):
            pass
    assert re.search(
        r"within 1 s; it wrote (a line|\d+ lines) on stdout that (is|are) not MCP(:|, the first) "
        r'"garbage"; check that it is an MCP server speaking on stdio',
        caught.value.message,
    ), caught.value.message


@pytest.mark.parametrize(
    ("content_type", "body", "said"),
    [
        ("text/html", b"<html>hello</html>", "Unexpected content type: text/html (MCP error -32600)"),
        (
            "application/json",
            b'{"status": "ok"}',
            "Failed to parse JSON response: 11 validation errors for union[JSONRPCRequest,"
            "JSONRPCNotification,JSONRPCResponse,JSONRPCError] (MCP error -32700)",
        ),
    ],
)
async def test_an_http_answer_that_is_no_mcp_is_named_once_in_one_line(
    content_type: str, body: bytes, said: str, caplog: pytest.LogCaptureFixture
) -> None:
    with not_mcp(content_type, body) as url, pytest.raises(AerixError) as caught:
        async with MCPServer.http(url, timeout=10):
            pass
    assert caught.value.message == (
        f"MCP server {url!r} refused the MCP handshake: {said}; check that the URL is its MCP endpoint "
        "(often …/mcp)"
    )
    for sdk in ("Unexpected content type", "Error parsing JSON response"):
        assert _sdk_said(caplog.records, sdk) == []  # said once, in the error, not logged twice


# --- in an agent -------------------------------------------------------------------------------


def _turn(tool: str, input: str) -> str:
    return f'{{"calls":[{{"tool":"{tool}","input":{input}}}]}}'


async def test_an_agent_calls_the_servers_tools_and_goes_on_when_it_dies() -> None:
    async with kit("stdio") as server:
        model = ScriptedModel(
            [
                _turn("add", '{"a":20,"b":22}'),
                _turn("crash", "{}"),
                _turn("add", '{"a":1,"b":1}'),
                '{"final":"done"}',
            ]
        )
        agent = Agent(model=model, tools=server.tools)
        events = [ev async for ev in agent.run("add, then crash")]
    results = [ev for ev in events if ev.type == "result"]
    assert [(r.tool, r.error) for r in results] == [("add", False), ("crash", True), ("add", True)]
    assert results[0].text == "42"
    assert f"MCP server {server.name!r} is gone" in results[1].text
    assert events[-1].type == "final"


async def test_an_aborted_run_cancels_the_servers_tool(tmp_path: Path) -> None:
    mark = tmp_path / "cancelled"
    async with kit("stdio", mark) as server:
        agent = Agent(model=ScriptedModel([_turn("hang", "{}")]), tools=server.tools)
        controller = AbortController()
        asyncio.get_running_loop().call_later(0.5, controller.abort, "enough")
        events = [ev async for ev in agent.run("hang", signal=controller.signal)]
        assert events[-1].type == "end" and events[-1].reason == "abort"
        assert await wait_for(lambda: _said(mark) == "cancelled"), "the server's tool was not cancelled"


async def test_an_aborted_run_cancels_every_request_of_its_concurrent_calls(tmp_path: Path) -> None:
    """The abort cancels each call's request (the SDK's `notifications/cancelled` for each),
    even as the loop cancels the calls' tasks on top of it."""
    mark = tmp_path / "cancelled"
    async with kit("stdio", mark) as server:
        two = '{"calls":[{"tool":"hang","input":{}},{"tool":"hang","input":{}}]}'
        agent = Agent(model=ScriptedModel([two]), tools=server.tools, calls_per_turn=2, concurrent_calls=True)
        controller = AbortController()
        asyncio.get_running_loop().call_later(0.5, controller.abort, "enough")
        events = [ev async for ev in agent.run("hang twice", signal=controller.signal)]
        assert events[-1].type == "end" and events[-1].reason == "abort"
        both = "cancelled" * 2
        assert await wait_for(lambda: _said(mark) == both), f"the server cancelled {_said(mark)!r}, not both"


async def test_a_caller_cancelled_twice_leaves_no_request_behind(tmp_path: Path) -> None:
    """A caller cancelled (twice, as anyio's scopes do) cancels the request on the server and
    leaves no task whose failure nobody reads."""
    mark = tmp_path / "cancelled"
    unread: list[object] = []
    loop = asyncio.get_running_loop()
    loop.set_exception_handler(lambda _, context: unread.append(context.get("message")))
    try:
        async with kit("stdio", mark) as server:
            caller = asyncio.ensure_future(call(by_name(server)["hang"], {}))
            await asyncio.sleep(0.5)
            caller.cancel()
            await asyncio.sleep(0)
            caller.cancel()
            with pytest.raises(asyncio.CancelledError):
                await caller
            assert await wait_for(lambda: _said(mark) == "cancelled"), "the server's tool was not cancelled"
            assert await call(by_name(server)["add"], {"a": 1, "b": 1}) == ("2", False)
        gc.collect()
        await asyncio.sleep(0.1)
    finally:
        loop.set_exception_handler(None)
    assert unread == []


async def test_a_servers_own_error_of_code_32000_is_a_refusal_not_a_closed_session() -> None:
    listed = json.dumps(
        [
            {"name": "rpc_error", "inputSchema": {"type": "object"}},
            {"name": "ok", "inputSchema": {"type": "object"}},
        ]
    )
    async with MCPServer.stdio(sys.executable, [LISTED, listed]) as server:
        tools = by_name(server)
        text, error = await call(tools["rpc_error"], {})
        assert error and text.endswith(
            "refused the call of 'rpc_error': custom rpc failure (MCP error -32000)"
        )
        assert await call(tools["ok"], {}) == ("ok {}", False)  # the session goes on


async def test_the_servers_annotations_of_a_tool_are_on_it_and_ask_for_no_approval() -> None:
    listed = json.dumps(
        [
            {"name": "wipe", "inputSchema": {"type": "object"}, "annotations": {"destructiveHint": True}},
            {
                "name": "look",
                "inputSchema": {"type": "object"},
                "annotations": {"title": "Look", "readOnlyHint": True, "openWorldHint": False},
            },
            {"name": "plain", "inputSchema": {"type": "object"}},
        ]
    )
    async with MCPServer.stdio(sys.executable, [LISTED, listed]) as server:
        tools = by_name(server)
        assert dict(tools["wipe"].annotations) == {"destructiveHint": True}
        assert dict(tools["look"].annotations) == {
            "title": "Look",
            "readOnlyHint": True,
            "openWorldHint": False,
        }
        assert dict(tools["plain"].annotations) == {}
        with pytest.raises(TypeError):
            tools["wipe"].annotations["destructiveHint"] = False  # type: ignore[index]
        assert not any(t.needs_approval for t in server.tools)  # the agent decides, not the server
        assert await call(tools["wipe"], {}) == ("ok {}", False)


# --- bad input ---------------------------------------------------------------------------------


async def test_a_command_that_does_not_exist_is_named() -> None:
    with pytest.raises(AerixError) as caught:
        async with MCPServer.stdio("aerix-no-such-server", ["--flag"]):
            pass
    assert caught.value.kind == "options"
    assert caught.value.message == (
        "MCP server 'aerix-no-such-server --flag': cannot start it: there is no command "
        "'aerix-no-such-server'; install it, or give its full path (as the command, its arguments in args)"
    )


async def test_a_server_that_never_answers_times_out_naming_it() -> None:
    before = children()
    with pytest.raises(AerixError) as caught:
        async with MCPServer.stdio(sys.executable, [SILENT], timeout=1):
            pass
    name = shlex.join([os.path.basename(sys.executable), SILENT])
    assert caught.value.message == (
        f"MCP server {name!r} did not answer the MCP handshake and list its tools within 1 s; check "
        "that it is an MCP "
        "server speaking on stdio, or give it longer with timeout="
    )
    assert children() <= before


async def test_a_server_that_exits_at_once_is_explained() -> None:
    with pytest.raises(AerixError, match=r"failed before answering the MCP handshake: its process ended"):
        async with MCPServer.stdio(sys.executable, ["-c", "pass"]):
            pass


async def test_a_url_that_refuses_the_connection_is_named() -> None:
    url = f"http://127.0.0.1:{_free_port()}/mcp"
    with pytest.raises(AerixError) as caught:
        async with MCPServer.http(url, timeout=10):
            pass
    assert caught.value.kind == "options"
    assert caught.value.message.startswith(f"MCP server {url!r}: cannot connect (")
    assert caught.value.message.endswith("); is the server running, and is the URL right?")


@pytest.mark.slow
async def test_a_url_that_is_no_mcp_endpoint_is_named() -> None:
    with http_kit() as url:
        wrong = url.replace("/mcp", "/nope")
        with pytest.raises(
            AerixError, match=r"refused the MCP handshake: .*check that the URL is its MCP endpoint"
        ):
            async with MCPServer.http(wrong):
                pass


@pytest.mark.slow
async def test_a_server_that_wants_credentials_is_named_with_its_http_status() -> None:
    with http_kit({"AERIX_MCP_TOKEN": "sesame"}) as url:
        for headers in (None, {"Authorization": "Bearer wrong"}):
            with pytest.raises(
                AerixError,
                match=r"refused the connection: HTTP 401 Unauthorized; give its credentials with headers=",
            ):
                async with MCPServer.http(url, headers=headers):
                    pass
        async with MCPServer.http(url, headers={"Authorization": "Bearer sesame"}) as server:
            assert await call(by_name(server)["add"], {"a": 1, "b": 2}) == ("3", False)


@pytest.mark.slow
async def test_headers_go_with_every_request() -> None:
    with http_kit() as url:
        async with MCPServer.http(url, headers={"X-Aerix-Test": "1"}) as server:
            assert await call(by_name(server)["add"], {"a": 1, "b": 2}) == ("3", False)


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: MCPServer.stdio(""), "command must be a program to run"),
        (lambda: MCPServer.stdio("python", "server.py"), "args must be a list of strings, got 'server.py'"),
        (  # the fix splits a command line into its words
            lambda: MCPServer.stdio("python", "server.py --port 'a b'"),
            re.escape("e.g. MCPServer.stdio('python', ['server.py', '--port', 'a b'])"),
        ),
        (lambda: MCPServer.stdio("python", [1]), "args must all be strings"),
        (lambda: MCPServer.stdio("python", prefix="!!!"), "prefix '!!!' has no letter or digit"),
        (
            lambda: MCPServer.http("http://x/mcp", prefix="p" * 63),
            "maps to 63 characters; a tool name has at most 64",
        ),
        (lambda: MCPServer.stdio("python", env={"A": 1}), "env must map names to strings"),
        (lambda: MCPServer.stdio("python", cwd="/no/such/folder"), "cwd '/no/such/folder' is not a folder"),
        (lambda: MCPServer.stdio("python", prefix=""), "prefix must be a non-empty string"),
        (lambda: MCPServer.stdio("python", timeout=0), "timeout must be a positive number of seconds"),
        (lambda: MCPServer.stdio("python", names={"a": "Bad Name"}), r"names\['a'\] = 'Bad Name'"),
        (lambda: MCPServer.http("127.0.0.1:8000/mcp"), "url must start with http:// or https://"),
        (lambda: MCPServer.http("http://x/mcp", headers={"A": 1}), "headers must map names to strings"),
        (
            lambda: MCPServer.http("http://"),
            re.escape("url 'http://' names no host; give one, as in 'http://127.0.0.1:8000/mcp'"),
        ),
        (lambda: MCPServer.http("https://:8000/mcp"), "url 'https://:8000/mcp' names no host"),
        (
            lambda: MCPServer.http("http://127.0.0.1:notaport/mcp"),
            re.escape(
                "url 'http://127.0.0.1:notaport/mcp' has the port 'notaport'; a port is a number from 1 "
                "to 65535, as in 'http://127.0.0.1:8000/mcp' (or none: 80 for http, 443 for https)"
            ),
        ),
        (lambda: MCPServer.http("http://127.0.0.1:99999/mcp"), "has the port '99999'; a port is a number"),
        (lambda: MCPServer.http("http://127.0.0.1:0/mcp"), "has the port '0'; a port is a number"),
        (lambda: MCPServer.http("http://[::1]:-1/mcp"), r"has the port '-1'; a port is a number"),
        (lambda: MCPServer.http("http://[::1/mcp"), r"url 'http://\[::1/mcp' is no URL \(Invalid IPv6 URL\)"),
        (
            lambda: MCPServer.http("http://my host/mcp"),
            re.escape(
                "url 'http://my host/mcp' holds ' ' (at index 9), which a URL cannot carry; percent-encode"
            ),
        ),
        (  # the index is of the URL as shown, without its user and password
            lambda: MCPServer.http("http://me:secret@my host/mcp"),
            re.escape("url 'http://my host/mcp' holds ' ' (at index 9), which a URL cannot carry"),
        ),
        (  # an @ in the query is no user's: the URL is shown whole
            lambda: MCPServer.http("http://host:8080?email=a b@example.com"),
            re.escape("url 'http://host:8080?email=a b@example.com' holds ' ' (at index 24)"),
        ),
        (  # a bad character in the password: said, not shown
            lambda: MCPServer.http("http://me:se cret@host/mcp"),
            re.escape("the user or password of url 'http://host/mcp' holds a character a URL cannot carry"),
        ),
        (
            lambda: MCPServer.http("http://x/mcp", headers={"X-Key": "a\r\nInjected: 1"}),
            re.escape("headers['X-Key'] holds '\\r' (at index 1), which an HTTP header cannot carry"),
        ),
        (
            lambda: MCPServer.http("http://x/mcp", headers={"Bad Name": "1"}),
            re.escape("headers: 'Bad Name' is no header name; a name is one word of ASCII letters"),
        ),
        (
            lambda: MCPServer.http("http://x/mcp", headers={"X-Key": " padded"}),
            re.escape("headers['X-Key'] starts or ends with a space or tab, which HTTP drops; strip it"),
        ),
    ],
)
def test_bad_arguments_are_refused(make: Callable[[], MCPServer], message: str) -> None:
    with pytest.raises(AerixError, match=message) as caught:
        make()
    assert caught.value.kind == "options"


def test_a_url_with_a_password_is_named_without_it() -> None:
    assert MCPServer.http("https://me:secret@example.com/mcp").name == "https://example.com/mcp"
    with pytest.raises(AerixError) as caught:
        MCPServer.http("https://me:secret@example.com:https/mcp")
    assert "secret" not in caught.value.message
    assert "url 'https://example.com:https/mcp' has the port 'https'" in caught.value.message


def test_a_header_value_http_cannot_carry_is_named_by_its_character_not_shown() -> None:
    with pytest.raises(AerixError) as caught:
        MCPServer.http("http://127.0.0.1:8000/mcp", headers={"Authorization": "Bearer tökén"})
    assert caught.value.kind == "options"
    assert caught.value.message == (
        "MCPServer.http: headers['Authorization'] holds 'ö' (at index 8), which an HTTP header cannot "
        "carry: a value is visible ASCII on one line; encode anything else (as base64, say)"
    )
    assert "tökén" not in caught.value.message  # a header value is often a secret
    # what HTTP carries is taken: inner spaces and tabs, an empty value, an IPv6 host, no port
    server = MCPServer.http("http://[::1]/mcp", headers={"X-A": "a b\tc", "X-Empty": ""})
    assert server.name == "http://[::1]/mcp"


def test_without_the_sdk_the_import_names_the_extra() -> None:
    code = (
        "import sys; sys.modules['mcp'] = None\n"
        "try:\n    import aerix.mcp\nexcept ImportError as exc:\n    print(exc)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "pip install 'aerix[mcp]'" in out


# --- nothing left behind -----------------------------------------------------------------------


@linux
@pytest.mark.slow
@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_a_hundred_sessions_leave_no_process_thread_or_fd(transport: str) -> None:
    with contextlib.ExitStack() as stack:
        url = stack.enter_context(http_kit()) if transport == "http" else ""

        def server() -> MCPServer:
            return MCPServer.stdio(sys.executable, [KIT]) if transport == "stdio" else MCPServer.http(url)

        async def session() -> None:
            async with server() as s:
                assert await call(by_name(s)["add"], {"a": 1, "b": 2}) == ("3", False)

        await session()  # the first one imports and starts what stays for good (a thread pool)
        kids, fds, tasks, py_threads = children(), open_fds(), threads(), threading.active_count()
        for _ in range(100):
            await session()
        # A finished thread or child may take a moment to go on a loaded machine: wait for the
        # counts to come back (at most 10 s), then compare them.
        for _ in range(200):
            if children() == kids and threads() == tasks and threading.active_count() == py_threads:
                break
            await asyncio.sleep(0.05)
        assert children() == kids
        assert open_fds() == fds
        assert threads() == tasks and threading.active_count() == py_threads
        assert len(asyncio.all_tasks()) == 1  # this test's own


# --- the embedded model ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def smollm2() -> Any:
    if (why := missing()) is not None:
        pytest.skip(f"the embedded model cannot run here: {why}")
    import aerix

    engine = aerix.load("smollm2-instruct")  # installed, it must load
    yield engine
    close = getattr(engine, "close", None)
    if close is not None:
        close()


PROMPTS = {
    "add": "What is 12 plus 30?",
    "order": "Order two units of product A1 and one of B2, shipped to Porto.",
    "get_weather_v2": "What is the weather like in Lisbon today?",
}
"""A prompt for each tool the model gets: the nested `order` too."""


@pytest.mark.slow
@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_the_embedded_model_makes_a_valid_call_every_turn(transport: str, smollm2: Any) -> None:
    from aerix import Limits

    left_out: dict[str, str | None] = {n: None for n in ("fail", "hang", "crash", "stats", "picture")}
    async with kit(transport, names=left_out) as server:
        assert sorted(t.name for t in server.tools) == sorted(PROMPTS)
        for choice in ["required", *PROMPTS]:
            for name, prompt in PROMPTS.items():
                if choice not in ("required", name):
                    continue
                agent = Agent(
                    model=smollm2,
                    tools=server.tools,
                    tool_choice=choice,  # the first turn calls a tool (that one, when named)
                    # repeats: every identical call runs too, so that every result is the server's
                    limits=Limits(turns=3, max_tokens=256, repeats=3),
                    generation={"temperature": 0},
                )
                events = [ev async for ev in agent.run(prompt)]
                # a turn cut by max_tokens is asked again, shorter; none is ever invalid
                assert all(ev.reason.startswith("cut:") for ev in events if ev.type == "retry"), events
                turns = [ev for ev in events if ev.type == "turn"]
                assert turns, f"no call for {prompt!r}"
                if choice != "required":
                    assert [c.tool for c in turns[0].calls] == [choice]
                results = [ev for ev in events if ev.type == "result"]
                assert len(results) == sum(len(t.calls) for t in turns)
                for result in results:
                    # the input was valid under the server's schema, and the server ran the tool
                    assert not result.error, (prompt, result)


def test_with_version_1_of_the_sdk_the_import_says_to_upgrade() -> None:
    code = (
        "import importlib.metadata as m\n"
        "real = m.version\n"
        "m.version = lambda name: '1.26.0' if name == 'mcp' else real(name)\n"
        "try:\n    import aerix.mcp\nexcept ImportError as exc:\n    print(exc)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "needs version 2 of the MCP SDK, but mcp 1.26.0 is installed: pip install -U 'aerix[mcp]'" in out


def test_empty_text_blocks_do_not_hide_the_structured_content() -> None:
    import mcp_types as types

    from aerix.mcp._results import result_value

    empty = types.TextContent(type="text", text="")
    both = types.CallToolResult(content=[empty], structured_content={"k": 2})
    assert result_value(both) == {"k": 2}  # SPEC 9.5: structuredContent when there is no text
    assert result_value(types.CallToolResult(content=[empty])) == ""
    said = types.CallToolResult(
        content=[empty, types.TextContent(type="text", text="hi")], structured_content={}
    )
    assert result_value(said) == "\nhi"
