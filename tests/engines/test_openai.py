"""OpenAICompatible against scripted and misbehaving servers on 127.0.0.1.

Every fault must surface as an `EngineError` from the `chat` iterator, naming
the server and the cause, within the (short) configured timeouts.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import math
import socket
import sys
import threading
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
from fault_server import Conn, FaultServer, Handler, chunk, closed_port, sse_body

from aerix.abort import AbortController
from aerix.errors import AerixError
from aerix.model import ChatMessage, ContextExceeded, Delta, GenerateOptions, Usage

pytest.importorskip("httpx")
from aerix.engines.openai import EngineError, OpenAICompatible

MESSAGES: list[ChatMessage] = [
    {"role": "system", "content": "You answer in JSON."},
    {"role": "user", "content": "hi"},
]
SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"final": {"type": "string"}},
    "required": ["final"],
    "additionalProperties": False,
}
GUARD = 10.0
"""Seconds after which a test counts as hung (never a timing assertion)."""


def stream(*payloads: str) -> Callable[[Conn], Awaitable[None]]:
    """A handler that streams these `data:` payloads and ends the body properly."""

    async def handler(conn: Conn) -> None:
        await conn.start_stream()
        for payload in payloads:
            await conn.event(payload)
        await conn.end()

    return handler


@contextlib.asynccontextmanager
async def serving(handler: Handler, **kw: Any) -> AsyncIterator[tuple[FaultServer, OpenAICompatible]]:
    """A fault server running `handler`, and an engine pointed at it."""
    async with FaultServer(handler) as server:
        engine = engine_for(server, **kw)
        try:
            yield server, engine
        finally:
            await engine.aclose()


def engine_for(server: FaultServer, **kw: Any) -> OpenAICompatible:
    kw.setdefault("connect_timeout", 1.0)
    kw.setdefault("read_timeout", 0.3)
    kw.setdefault("retries", 0)
    kw.setdefault("backoff", 0.01)
    return OpenAICompatible(server.base_url, "test-model", **kw)


async def collect(engine: OpenAICompatible, opts: GenerateOptions | None = None) -> list[Delta]:
    async with asyncio.timeout(GUARD):
        return [d async for d in engine.chat(MESSAGES, opts)]


async def fails(engine: OpenAICompatible, opts: GenerateOptions | None = None) -> EngineError:
    """Run one chat that must fail; return its error after checking it names the server."""
    with pytest.raises(EngineError) as info:
        await collect(engine, opts)
    assert engine.base_url in str(info.value)
    assert info.value.base_url == engine.base_url
    return info.value


# -- the good path ---------------------------------------------------------------------------


async def test_stream_becomes_text_deltas_then_one_done_delta_with_usage() -> None:
    usage = {
        "prompt_tokens": 120,
        "completion_tokens": 7,
        "total_tokens": 127,
        "prompt_tokens_details": {"cached_tokens": 96},
    }
    async with serving(stream(*sse_body('{"final"', ': "hi"}', usage=usage))) as (_server, engine):
        deltas = await collect(engine)
    assert [d.text for d in deltas[:-1]] == ['{"final"', ': "hi"}']
    assert not any(d.done for d in deltas[:-1])
    assert deltas[-1] == Delta(
        done=True, finish="stop", usage=Usage(prompt_tokens=120, completion_tokens=7, cached_tokens=96)
    )


@pytest.mark.parametrize(
    ("raw", "mapped"),
    [("stop", "stop"), ("length", "length"), ("tool_calls", "stop"), ("eos", "stop")],
)
async def test_finish_reason_maps_to_stop_or_length(raw: str, mapped: str) -> None:
    async with serving(stream(*sse_body("{", finish=raw))) as (_server, engine):
        deltas = await collect(engine)
    assert deltas[-1].done
    assert deltas[-1].finish == mapped
    assert deltas[-1].usage is None  # this server reported none


async def test_usage_in_the_finish_chunk_and_llama_server_timings() -> None:
    last = chunk(finish="stop")
    last["usage"] = {"prompt_tokens": 50, "completion_tokens": 3}
    last["timings"] = {"cache_n": 40}
    async with serving(stream(json.dumps(chunk("{}")), json.dumps(last), "[DONE]")) as (_server, engine):
        deltas = await collect(engine)
    assert deltas[-1].usage == Usage(prompt_tokens=50, completion_tokens=3, cached_tokens=40)


async def test_a_finished_stream_without_done_marker_is_accepted() -> None:
    payloads = sse_body("{}")[:-1]  # no [DONE], but a finish_reason and a proper end
    async with serving(stream(*payloads)) as (_server, engine):
        deltas = await collect(engine)
    assert deltas[-1].done
    assert deltas[-1].finish == "stop"


async def test_comments_multiline_data_and_crlf_are_read() -> None:
    async def handler(conn: Conn) -> None:
        await conn.start_stream()
        await conn.write(": ping\r\n\r\n")
        await conn.write('data: {"choices": [{"delta": \r\ndata: {"content": "ab"}}]}\r\n\r\n')
        await conn.write(f"data: {json.dumps(chunk(finish='stop'))}\n\ndata: [DONE]")  # no blank
        await conn.end()

    async with serving(handler) as (_server, engine):
        deltas = await collect(engine)
    assert [d.text for d in deltas] == ["ab", ""]
    assert deltas[-1].done


@pytest.mark.parametrize(
    ("dialect", "expected"),
    [
        (
            "json_schema",
            {
                "type": "json_schema",
                "json_schema": {"name": "turn", "schema": SCHEMA, "strict": True},
            },
        ),
        ("json_object", {"type": "json_object", "schema": SCHEMA}),
        ("none", None),
    ],
)
async def test_request_body_carries_options_and_the_schema_in_the_dialect(
    dialect: Any, expected: dict[str, Any] | None
) -> None:
    async with serving(stream(*sse_body("{}")), dialect=dialect, api_key="sk-test") as (server, engine):
        opts: GenerateOptions = {
            "max_tokens": 64,
            "temperature": 0.0,
            "top_p": 0.9,
            "top_k": 40,
            "min_p": 0.05,
            "seed": 7,
            "stop": ["\n\n"],
            "constraint": {"json": SCHEMA},
            "signal": AbortController().signal,
        }
        await collect(engine, opts)
    [request] = server.requests
    assert (request.method, request.path) == ("POST", "/v1/chat/completions")
    assert request.headers["authorization"] == "Bearer sk-test"
    body = request.json()
    assert body.pop("response_format", None) == expected
    assert body == {
        "model": "test-model",
        "messages": MESSAGES,
        "stream": True,
        "stream_options": {"include_usage": True},
        "max_tokens": 64,
        "temperature": 0.0,
        "top_p": 0.9,
        "top_k": 40,
        "min_p": 0.05,
        "seed": 7,
        "stop": ["\n\n"],
    }


async def test_unset_options_are_not_sent_and_extra_body_is_merged() -> None:
    async with FaultServer(stream(*sse_body("{}"))) as server:
        extra = {"chat_template_kwargs": {"enable_thinking": False}}
        async with engine_for(server, extra_body=extra) as engine:
            await collect(engine)
    body = server.requests[0].json()
    assert set(body) == {"model", "messages", "stream", "stream_options", "chat_template_kwargs"}
    assert "authorization" not in server.requests[0].headers


async def test_concurrent_chats_share_the_loops_connections_and_reuse_them() -> None:
    async with serving(stream(*sse_body('{"final": "x"}')), max_connections=4) as (server, engine):
        results = await asyncio.gather(*(collect(engine) for _ in range(20)))
        assert len(engine._lanes) == 1
        for _ in range(5):  # one at a time: each reuses a kept-alive connection
            await collect(engine)
    assert all(r[-1].done and r[0].text == '{"final": "x"}' for r in results)
    assert len(server.requests) == 25
    assert server.connections <= 4


async def test_idle_connections_beyond_the_keepalive_limit_are_closed() -> None:
    async with serving(stream(*sse_body("{}")), max_connections=4, max_keepalive_connections=1) as (
        server,
        engine,
    ):
        await asyncio.gather(*(collect(engine) for _ in range(8)))
        assert engine._loop_lanes().open == 1
        await collect(engine)
    assert len(server.requests) == 9


async def test_event_hooks_see_every_request() -> None:
    seen: list[dict[str, Any]] = []

    async def record(request: Any) -> None:
        seen.append(json.loads(request.content))

    async with serving(stream(*sse_body("{}")), event_hooks={"request": [record]}) as (_server, engine):
        await asyncio.gather(*(collect(engine, {"max_tokens": i + 1}) for i in range(3)))
    assert sorted(body["max_tokens"] for body in seen) == [1, 2, 3]


async def test_a_finished_response_dies_by_refcount_not_by_the_garbage_collector() -> None:
    responses: list[weakref.ref[Any]] = []

    async def record(response: Any) -> None:
        responses.append(weakref.ref(response))

    hooks = {"response": [record]}
    async with serving(stream(*sse_body("{}")), event_hooks=hooks) as (_server, engine):
        await collect(engine)  # a warm connection
        gc.collect()
        gc.disable()  # what a cycle keeps alive stays alive now
        try:
            await collect(engine)
            async with asyncio.timeout(GUARD):
                while engine._tasks:  # the request hands its connection back after the done delta
                    await asyncio.sleep(0)
            assert len(responses) == 2 and responses[1]() is None
        finally:
            gc.enable()


async def test_a_failed_request_leaves_no_reference_cycle() -> None:
    async def handler(conn: Conn) -> None:
        await conn.send(500, json.dumps({"error": {"message": "boom"}}))

    async with serving(handler) as (_server, engine):
        gc.collect()
        gc.disable()  # what a cycle keeps alive stays alive now
        try:
            try:
                await collect(engine)
            except EngineError as exc:
                error = weakref.ref(exc)
            assert error() is None
        finally:
            gc.enable()


async def test_a_given_http_client_is_used_and_left_open() -> None:
    import httpx

    seen: list[str] = []

    async def record(request: httpx.Request) -> None:
        seen.append(request.headers["authorization"])

    client = httpx.AsyncClient(event_hooks={"request": [record]})
    async with serving(stream(*sse_body("{}")), http_client=client, api_key="k") as (_, engine):
        await collect(engine)
    assert not client.is_closed
    await client.aclose()
    assert seen == ["Bearer k"]


async def test_each_event_loop_has_its_own_connections_and_aclose_reopens() -> None:
    async with FaultServer(stream(*sse_body("{}"))) as server:
        engine = engine_for(server)
        await collect(engine)
        await engine.aclose()
        assert not engine._lanes
        await collect(engine)  # usable again after aclose
        seen: list[int] = []

        def other_loop() -> None:
            async def main() -> None:
                engine._loop_lanes()
                seen.append(len(engine._lanes))
                await engine.aclose()

            asyncio.run(main())

        thread = threading.Thread(target=other_loop)
        thread.start()
        await asyncio.to_thread(thread.join, GUARD)
        assert seen == [2]
        assert len(engine._lanes) == 1  # the other loop closed only its own
        await engine.aclose()
        assert not engine._lanes


async def test_a_loops_connections_close_when_the_loop_shuts_down() -> None:
    """Code that makes a loop per call (`asyncio.run`, `ask_sync`) leaks no connection: the
    lanes' clients hold their loop, so they would never go with it otherwise."""
    from aerix import Agent

    async with FaultServer(stream(*sse_body('{"final":"ok"}'))) as server:
        engine = engine_for(server)
        lanes: list[Any] = []

        def loops() -> None:
            for _ in range(3):

                async def main() -> None:
                    await collect(engine)
                    lanes.append(engine._lanes[asyncio.get_running_loop()])
                    assert lanes[-1].open == 1

                asyncio.run(main())
            for _ in range(3):  # the sync API's own loop, shut down after each call
                assert Agent(model=engine).ask_sync("hi").text == "ok"

        await asyncio.to_thread(loops)
        assert len(lanes) == 3 and all(one.open == 0 for one in lanes)  # each closed its connection
        assert not engine._lanes  # nor any loop's lanes left behind
        await collect(engine)  # this loop's own, until its aclose
        assert len(engine._lanes) == 1
        await engine.aclose()
        assert not engine._lanes


# -- faults: each raises EngineError naming the server and the cause ------------------------


def test_connect_failures_of_this_machine_are_named_as_such() -> None:
    import errno

    import httpx

    from aerix.engines.openai._failures import connect_cause

    try:
        try:
            raise OSError(errno.EMFILE, "Too many open files")
        except OSError as exc:
            raise httpx.ConnectError("All connection attempts failed") from exc
    except httpx.ConnectError as exc:
        cause = connect_cause(exc, 0, connect_timeout=5)
    assert cause.startswith("could not be reached: this process has too many open files (EMFILE: ")
    assert cause.endswith("or raise the limit (ulimit -n)") and "refused" not in cause
    plain = connect_cause(httpx.ConnectError("All connection attempts failed"), 0, connect_timeout=5)
    assert plain.startswith("refused the connection (ConnectError: All connection attempts failed)")
    try:
        try:
            raise socket.gaierror(-2, "Name or service not known")
        except OSError as exc:
            raise httpx.ConnectError("[Errno -2] Name or service not known") from exc
    except httpx.ConnectError as exc:
        unresolved = connect_cause(exc, 2, connect_timeout=5)
    assert unresolved.startswith("could not be reached: its host name did not resolve (ConnectError: ")
    assert unresolved.endswith("(after 3 attempts); check the host in base_url"), unresolved


async def test_connection_refused_is_retried_then_named() -> None:
    engine = OpenAICompatible(
        f"http://127.0.0.1:{closed_port()}/v1", "m", retries=2, backoff=0.01, connect_timeout=1
    )
    error = await fails(engine)
    assert "refused the connection" in error.cause
    assert "after 3 attempts" in error.cause
    await engine.aclose()


@pytest.mark.skipif(sys.platform != "linux", reason="relies on Linux dropping SYNs to a full backlog")
async def test_a_server_that_never_accepts_hits_the_connect_timeout() -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(0)
        port = listener.getsockname()[1]
        fillers = [socket.socket() for _ in range(3)]  # fill the accept queue; nobody accepts
        for filler in fillers:
            filler.setblocking(False)
            with contextlib.suppress(BlockingIOError):
                filler.connect(("127.0.0.1", port))
        engine = OpenAICompatible(
            f"http://127.0.0.1:{port}/v1", "m", connect_timeout=0.3, retries=1, backoff=0.01
        )
        try:
            error = await fails(engine)
        finally:
            for filler in fillers:
                filler.close()
    assert "did not accept a connection within connect_timeout=0.3 s (after 2 attempts)" in error.cause


async def test_stall_before_headers_hits_the_read_timeout() -> None:
    async def handler(conn: Conn) -> None:
        await conn.stall()

    async with serving(handler, retries=2) as (server, engine):
        error = await fails(engine)
    assert "sent no response within read_timeout=0.3 s" in error.cause
    assert len(server.requests) == 1  # a stall is not retried


async def test_stall_mid_stream_hits_the_read_timeout_after_the_text_so_far() -> None:
    async def handler(conn: Conn) -> None:
        await conn.start_stream()
        await conn.event(chunk('{"fin'))
        await conn.stall()

    seen: list[Delta] = []
    async with serving(handler) as (server, engine):
        with pytest.raises(EngineError) as info:
            async with asyncio.timeout(GUARD):
                async for delta in engine.chat(MESSAGES):
                    seen.append(delta)
    assert "the stream stalled: no data for read_timeout=0.3 s after 1 chunks" in str(info.value)
    assert server.base_url in str(info.value)
    assert seen == [Delta(text='{"fin')]


async def test_http_500_names_status_and_the_servers_message_without_retry() -> None:
    async def handler(conn: Conn) -> None:
        await conn.send(500, json.dumps({"error": {"message": "CUDA out of memory"}}))

    async with serving(handler, retries=2) as (server, engine):
        error = await fails(engine)
    assert "answered HTTP 500" in error.cause
    assert "CUDA out of memory" in error.cause
    assert len(server.requests) == 1


async def test_503_then_success_is_retried() -> None:
    async def handler(conn: Conn) -> None:
        if len(conn.server.requests) < 3:
            await conn.send(503, "busy", content_type="text/plain", retry_after="0")
        else:
            await stream(*sse_body("{}"))(conn)

    async with serving(handler, retries=2) as (server, engine):
        deltas = await collect(engine)
    assert deltas[-1].done
    assert len(server.requests) == 3


@pytest.mark.parametrize("status", [429, 502, 503, 504])
async def test_transient_statuses_give_up_after_the_retries(status: int) -> None:
    async def handler(conn: Conn) -> None:
        await conn.send(status, "try later", content_type="text/plain")

    async with serving(handler, retries=1) as (server, engine):
        error = await fails(engine)
    assert f"answered HTTP {status}" in error.cause
    assert "after 2 attempts" in error.cause
    assert "raise retries or add replicas" in error.cause
    assert len(server.requests) == 2


@pytest.mark.parametrize(
    ("status", "body", "hint"),
    [
        (404, '{"detail": "Not Found"}', "check base_url (it usually ends in /v1)"),
        (401, '{"error": {"message": "bad key"}}', "check api_key"),
        (
            422,
            '{"detail": [{"loc": ["body", "response_format", "type"], "msg": "bad"}]}',
            "try dialect='json_object'",
        ),
    ],
)
async def test_client_errors_name_the_fix(status: int, body: str, hint: str) -> None:
    async def handler(conn: Conn) -> None:
        await conn.send(status, body)

    async with serving(handler, retries=2) as (server, engine):
        error = await fails(engine, {"constraint": {"json": SCHEMA}})
    assert f"answered HTTP {status}" in error.cause
    assert hint in error.cause
    assert len(server.requests) == 1


# -- choosing the dialect ----------------------------------------------------------------------

LLAMA_CPP_PYTHON_REFUSAL = json.dumps(
    {
        "error": {
            "message": "1 validation error:\n  {'type': 'literal_error', 'loc': ('body', 'response_format', "
            "'type'), 'msg': \"Input should be 'text' or 'json_object'\", 'input': 'json_schema'}",
            "type": "internal_server_error",
        }
    }
)
"""What `python -m llama_cpp.server` (0.3.36) answers, with HTTP 500, to a `json_schema` response format."""


def refusing(*refused: str, body: str = LLAMA_CPP_PYTHON_REFUSAL) -> Handler:
    """A server that refuses these `response_format` types (HTTP 500) and streams a turn otherwise."""

    async def handler(conn: Conn) -> None:
        kind = conn.request.json().get("response_format", {}).get("type")
        if kind in refused:
            await conn.send(500, body)
        else:
            await stream(*sse_body('{"final": "ok"}'))(conn)

    return handler


def formats(server: FaultServer) -> list[str | None]:
    return [r.json().get("response_format", {}).get("type") for r in server.requests]


@pytest.mark.parametrize(
    ("opts", "message"),
    [
        ({"frobnicate": 1}, "unknown option(s) ['frobnicate']"),
        ({"max_tokens": 0}, "max_tokens must be an integer in [1, 2147483647], got 0"),
        ({"temperature": "hot"}, "temperature must be a number in [0.0, 100.0], got 'hot'"),
        ({"constraint": {"regex": "a"}}, 'constraint must be {"json": <JSON Schema>}'),
        (
            {"constraint": {"json": "a schema"}},
            "constraint: 'json' must be a JSON Schema object (a dict), got str",
        ),
        (
            {"constraint": {"json": ["a"]}},
            "constraint: 'json' must be a JSON Schema object (a dict), got list",
        ),
        ({"signal": "nope"}, "signal must be an AbortSignal, got 'nope'"),
        ({"stop": "x"}, "stop must be a list of strings, got 'x'"),
    ],
)
async def test_bad_chat_options_are_refused_before_any_request(opts: dict[str, Any], message: str) -> None:
    # the same checks as LlamaCpp's, so an engine is swapped for another without surprises
    async with serving(stream(*sse_body("{}"))) as (server, engine):
        with pytest.raises(AerixError) as info:
            await collect(engine, opts)  # type: ignore[arg-type]
    assert info.value.kind == "options" and message in info.value.message
    assert server.requests == []


async def test_a_refused_json_schema_is_sent_again_as_json_object_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    opts: GenerateOptions = {"constraint": {"json": SCHEMA}, "max_tokens": 9}
    with caplog.at_level("WARNING", logger="aerix.engines.openai"):
        async with serving(refusing("json_schema"), retries=0) as (server, engine):
            assert engine.dialect == "json_schema"
            first = await collect(engine, opts)
            second = await collect(engine, opts)
    assert "".join(d.text for d in first) == '{"final": "ok"}' and first[-1].done
    assert second[-1].done
    assert formats(server) == ["json_schema", "json_object", "json_object"]
    resent = server.requests[1].json()
    assert resent["response_format"] == {"type": "json_object", "schema": SCHEMA}
    assert {k: v for k, v in resent.items() if k != "response_format"} == {
        k: v for k, v in server.requests[0].json().items() if k != "response_format"
    }  # the same request, in the other dialect
    assert engine.dialect == "json_object"
    assert "dialect='json_object'" in repr(engine)
    (record,) = caplog.records
    assert record.levelname == "WARNING"
    assert server.base_url in record.getMessage()
    assert "refused the json_schema response format (HTTP 500)" in record.getMessage()
    assert "uses dialect='json_object' from now on" in record.getMessage()


async def test_an_explicit_dialect_is_kept_when_the_server_refuses_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level("WARNING", logger="aerix.engines.openai"):
        async with serving(refusing("json_schema"), dialect="json_schema") as (server, engine):
            error = await fails(engine, {"constraint": {"json": SCHEMA}})
    assert formats(server) == ["json_schema"]
    assert engine.dialect == "json_schema"
    assert "answered HTTP 500" in error.cause
    assert "the server may not accept dialect='json_schema': try dialect='json_object'" in error.cause
    assert caplog.records == []


async def test_a_server_that_refuses_both_forms_fails_naming_none() -> None:
    async with serving(refusing("json_schema", "json_object")) as (server, engine):
        error = await fails(engine, {"constraint": {"json": SCHEMA}})
        again = await fails(engine, {"constraint": {"json": SCHEMA}})
    assert formats(server) == ["json_schema", "json_object", "json_object"]
    for e in (error, again):
        assert "refused dialect='json_schema' and then dialect='json_object': try dialect='none'" in e.cause


async def test_an_explicit_json_object_refused_suggests_json_schema() -> None:
    async with serving(refusing("json_object"), dialect="json_object") as (server, engine):
        error = await fails(engine, {"constraint": {"json": SCHEMA}})
    assert formats(server) == ["json_object"]
    assert "may not accept dialect='json_object': try dialect='json_schema'" in error.cause


async def test_no_fallback_once_json_schema_has_worked() -> None:
    async def handler(conn: Conn) -> None:
        if len(conn.server.requests) == 1:
            await stream(*sse_body("{}"))(conn)
        else:
            await conn.send(500, LLAMA_CPP_PYTHON_REFUSAL)

    async with serving(handler) as (server, engine):
        await collect(engine, {"constraint": {"json": SCHEMA}})
        error = await fails(engine, {"constraint": {"json": SCHEMA}})
    assert formats(server) == ["json_schema", "json_schema"]
    assert engine.dialect == "json_schema"
    assert "try dialect='json_object'" in error.cause


@pytest.mark.parametrize(
    ("body", "opts", "extra_body"),
    [
        # A refusal of the schema itself names neither form: not a dialect problem.
        (
            json.dumps(
                {"error": {"message": "Invalid schema for response_format 'turn': 'x' is not allowed"}}
            ),
            {"constraint": {"json": SCHEMA}},
            None,
        ),
        (LLAMA_CPP_PYTHON_REFUSAL, {}, None),  # no constraint was sent
        (
            LLAMA_CPP_PYTHON_REFUSAL,
            {"constraint": {"json": SCHEMA}},
            {"response_format": {"type": "json_schema"}},
        ),
    ],
    ids=["schema-refused", "no-constraint", "callers-own-format"],
)
async def test_other_refusals_are_errors_not_fallbacks(
    body: str, opts: GenerateOptions, extra_body: dict[str, Any] | None
) -> None:
    async def handler(conn: Conn) -> None:
        await conn.send(500, body)

    async with serving(handler, extra_body=extra_body) as (server, engine):
        error = await fails(engine, opts)
    assert len(server.requests) == 1
    assert engine.dialect == "json_schema"
    assert "answered HTTP 500" in error.cause


async def test_concurrent_first_requests_all_fall_back_and_warn_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    opts: GenerateOptions = {"constraint": {"json": SCHEMA}}
    with caplog.at_level("WARNING", logger="aerix.engines.openai"):
        async with serving(refusing("json_schema")) as (server, engine):
            async with asyncio.timeout(GUARD):
                results = await asyncio.gather(*(collect(engine, opts) for _ in range(4)))
    assert all(r[-1].done and r[-1].finish == "stop" for r in results)
    assert formats(server).count("json_object") == 4
    assert engine.dialect == "json_object"
    assert len(caplog.records) == 1


async def test_an_agent_on_a_server_that_refuses_json_schema_gets_its_final() -> None:
    from aerix import Agent

    async with serving(refusing("json_schema")) as (server, engine):
        async with asyncio.timeout(GUARD):
            answer = await Agent(model=engine).ask("hi")
    assert answer.text == "ok"
    assert formats(server) == ["json_schema", "json_object"]


async def test_a_stream_cut_mid_turn_is_an_error() -> None:
    async def handler(conn: Conn) -> None:
        await conn.start_stream()
        await conn.event(chunk('{"final": "'))
        await conn.event(chunk("half"))
        await conn.cut()

    async with serving(handler) as (_server, engine):
        error = await fails(engine)
    assert "the stream broke mid-turn after 2 chunks" in error.cause


async def test_a_connection_closed_before_answering_is_named() -> None:
    async def handler(conn: Conn) -> None:
        await conn.cut()

    async with serving(handler, retries=1) as (server, engine):
        error = await fails(engine)
    assert "closed the connection before answering" in error.cause
    assert len(server.requests) == 2  # retried once: it failed before any token


@pytest.mark.parametrize(
    ("payload", "cause"),
    [
        ('{"choices": [{"delta": {"content": "x"', "sent a chunk that is not JSON"),
        ("[1, 2]", "sent a chunk that is not a JSON object"),
        ('{"hello": "world"}', "sent a chunk with neither `choices` nor `usage`"),
        ('{"choices": [{"delta": {"content": 5}}]}', "`delta.content` is not a string"),
        ('{"error": {"message": "model crashed"}}', "reported an error mid-stream: 'model crashed'"),
        ('{"choices": [], "usage": {"prompt_tokens": "many"}}', "counts that are not integers"),
        ('{"choices": [], "usage": {"prompt_tokens": -5, "completion_tokens": 3}}', "a count below zero"),
    ],
)
async def test_bad_chunks_are_named(payload: str, cause: str) -> None:
    async with serving(stream(json.dumps(chunk("{")), payload, "[DONE]")) as (_server, engine):
        error = await fails(engine)
    assert cause in error.cause
    assert "after 1 chunks" in error.cause


async def test_garbage_that_is_not_sse_ends_without_a_finish() -> None:
    async def handler(conn: Conn) -> None:
        await conn.start_stream()
        await conn.write("<html>502 Bad Gateway</html>\n\n")
        await conn.end()

    async with serving(handler) as (_server, engine):
        error = await fails(engine)
    assert "ended without a finish_reason or [DONE] after 0 chunks" in error.cause


async def test_a_stream_that_never_finishes_is_an_error() -> None:
    async with serving(stream(json.dumps(chunk('{"final": ')), json.dumps(chunk('"x"}')))) as (_s, engine):
        error = await fails(engine)
    assert "the stream ended without a finish_reason or [DONE] after 2 chunks" in error.cause


async def test_done_without_a_finish_reason_is_an_interruption() -> None:
    async with serving(stream(json.dumps(chunk("{")), "[DONE]")) as (_server, engine):
        error = await fails(engine)
    assert "sent [DONE] after 1 chunks without a finish_reason" in error.cause


async def test_an_error_event_is_named() -> None:
    async def handler(conn: Conn) -> None:
        await conn.start_stream()
        await conn.write("event: error\ndata: overloaded\n\n")
        await conn.end()

    async with serving(handler) as (_server, engine):
        error = await fails(engine)
    assert "reported an error mid-stream: 'overloaded'" in error.cause


async def test_a_web_page_instead_of_a_stream_is_named() -> None:
    async def handler(conn: Conn) -> None:
        await conn.send(200, "<html><body>Sign in</body></html>", content_type="text/html; charset=utf-8")

    async with serving(handler) as (_server, engine):
        error = await fails(engine)
    assert "answered with a web page instead of an event stream; is " in error.cause
    assert "/chat/completions the chat completions endpoint" in error.cause and "Sign in" in error.cause


async def test_only_the_first_choice_and_nothing_after_its_finish_is_the_turn() -> None:
    second = chunk("OTHER")
    second["choices"][0]["index"] = 1  # a server asked for n=2 streams both, interleaved
    late = json.dumps(chunk("late"))
    payloads = [
        json.dumps(chunk('{"final":"x"}')),
        json.dumps(second),
        json.dumps(chunk(finish="stop")),
        late,
    ]
    async with serving(stream(*payloads, "[DONE]")) as (_server, engine):
        deltas = await collect(engine)
    assert "".join(d.text for d in deltas) == '{"final":"x"}'
    assert deltas[-1].done and deltas[-1].finish == "stop"


async def test_a_json_answer_instead_of_a_stream_is_named() -> None:
    async def handler(conn: Conn) -> None:
        await conn.send(200, json.dumps({"choices": [{"message": {"content": "{}"}}]}))

    async with serving(handler) as (_server, engine):
        error = await fails(engine)
    assert "answered with JSON instead of an event stream" in error.cause


# -- abort -----------------------------------------------------------------------------------


async def test_abort_mid_stream_closes_the_connection() -> None:
    async def handler(conn: Conn) -> None:
        await conn.start_stream()
        await conn.event(chunk('{"final": "'))
        await conn.stall()

    controller = AbortController()
    seen: list[Delta] = []
    async with serving(handler, read_timeout=GUARD * 3) as (server, engine):
        async with asyncio.timeout(GUARD):
            async for delta in engine.chat(MESSAGES, {"signal": controller.signal}):
                seen.append(delta)
                controller.abort("user")
            await server.disconnected.wait()
    assert seen == [Delta(text='{"final": "'), Delta(done=True, finish="stop")]  # no usage: none came


async def test_abort_from_another_thread_before_headers_closes_the_connection() -> None:
    async def handler(conn: Conn) -> None:
        await conn.stall()

    controller = AbortController()
    async with serving(handler, read_timeout=GUARD * 3) as (server, engine):
        timer = threading.Timer(0.05, controller.abort)
        timer.start()
        deltas = await collect(engine, {"signal": controller.signal})
        async with asyncio.timeout(GUARD):
            await server.disconnected.wait()
    assert deltas == [Delta(done=True, finish="stop")]


async def test_abort_during_retry_backoff_stops_at_once() -> None:
    async def handler(conn: Conn) -> None:
        await conn.send(503, "busy", content_type="text/plain")

    controller = AbortController()
    async with serving(handler, retries=5, backoff=GUARD * 3) as (server, engine):
        asyncio.get_running_loop().call_later(0.1, controller.abort)
        deltas = await collect(engine, {"signal": controller.signal})
    assert deltas == [Delta(done=True, finish="stop")]
    assert len(server.requests) == 1


async def test_an_aborted_signal_sends_no_request() -> None:
    controller = AbortController()
    controller.abort()
    async with serving(stream(*sse_body("{}"))) as (server, engine):
        assert await collect(engine, {"signal": controller.signal}) == [Delta(done=True, finish="stop")]
    assert server.requests == []


async def test_closing_the_iterator_early_closes_the_connection() -> None:
    async def handler(conn: Conn) -> None:
        await conn.start_stream()
        await conn.event(chunk("{"))
        await conn.stall()

    async with serving(handler, read_timeout=GUARD * 3) as (server, engine):
        stream_ = engine.chat(MESSAGES)
        async with asyncio.timeout(GUARD):
            assert (await anext(stream_)).text == "{"
            await stream_.aclose()  # type: ignore[attr-defined]
            await server.disconnected.wait()


# -- options ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "named"),
    [
        ({"base_url": "127.0.0.1:8000"}, "base_url"),
        ({"model": ""}, "model"),
        ({"dialect": "guided_json"}, "dialect"),
        ({"read_timeout": -1}, "read_timeout"),
        ({"connect_timeout": 0}, "connect_timeout"),
        ({"backoff": "1"}, "backoff"),
        ({"retries": -1}, "retries"),
        ({"retries": True}, "retries"),
        ({"max_connections": 0}, "max_connections"),
        ({"headers": "nope"}, "headers must map header names to strings, got 'nope'"),
        ({"headers": {"X-Key": 3}}, "headers must map header names to strings"),
        ({"api_key": 123}, "api_key must be an ASCII string (or None), got int"),
        ({"extra_body": ["x"]}, "extra_body must be a dict"),
        ({"base_url": "http://h/v1?key=1"}, "base_url must be the API's root, without a query or fragment"),
        ({"base_url": "http://"}, "base_url 'http://' names no host; give one"),
        ({"base_url": "http://:8000/v1"}, "base_url 'http://:8000/v1' names no host"),
        ({"base_url": "http://h:99999/v1"}, "base_url 'http://h:99999/v1' is no URL: Port out of range"),
        ({"read_timeout": math.nan}, "read_timeout must be a finite number of seconds > 0, got nan"),
        ({"read_timeout": math.inf}, "read_timeout must be a finite number of seconds > 0, got inf"),
        ({"backoff": math.nan}, "backoff must be a finite number of seconds >= 0, got nan"),
        ({"headers": {"X-A": "café"}}, "headers['X-A'] = 'café': a header name must be one word"),
        (
            {"headers": {"X-A": "a\r\nX-B: 1"}},
            "its value visible ASCII without line breaks or spaces around it",
        ),
        ({"headers": {"bad name": "v"}}, "headers['bad name'] = 'v': a header name must be one word"),
        ({"headers": {"x:y": "v"}}, "headers['x:y']"),
        ({"headers": {"X-A": " lead"}}, "headers['X-A'] = ' lead'"),
        ({"headers": {"X-A": "a\x00b"}}, "headers['X-A'] = 'a\\x00b'"),
        ({"api_key": "sk-€"}, "api_key must be an ASCII string (or None), got a key a header cannot carry"),
        ({"api_key": "a\x00b"}, "got a key a header cannot carry"),
        ({"extra_body": {"x": object()}}, "extra_body must be plain JSON: Object of type object"),
        ({"extra_body": {"x": math.nan}}, "extra_body must be plain JSON: Out of range float"),
        ({"http_client": "client"}, "http_client must be an httpx.AsyncClient, got str"),
        ({"event_hooks": {"reqest": []}}, "event_hooks must map 'request' or 'response' to lists"),
        ({"event_hooks": {"request": 3}}, "event_hooks['request'] must be a list of functions, got 3"),
    ],
)
def test_bad_options_raise_options_errors_naming_the_option(kwargs: dict[str, Any], named: str) -> None:
    args: dict[str, Any] = {"base_url": "http://127.0.0.1:8000/v1", "model": "m", **kwargs}
    with pytest.raises(AerixError) as info:
        OpenAICompatible(**args)
    assert info.value.kind == "options"
    assert named in info.value.message


def test_engine_is_a_model_and_names_its_url() -> None:
    from aerix.model import Model

    engine = OpenAICompatible("http://127.0.0.1:8000/v1/", "m")
    assert isinstance(engine, Model)
    assert engine.url == "http://127.0.0.1:8000/v1/chat/completions"
    assert "http://127.0.0.1:8000/v1" in repr(engine)


# -- a prompt too long for the model's context ------------------------------------------------
#
# Each body below is what the server sends, worded as in its source:
# - vLLM: `TokenizeParams._token_len_check` (vllm/renderers/params.py, the newest renderer,
#   "You passed ..."); the same check from 0.18 on ("... your prompt contains at least ...");
#   `OpenAIServing._validate_input` of 0.10 to 0.17 ("... your request has N input tokens",
#   and "'max_tokens' or 'max_completion_tokens' is too large"); and
#   `_validate_prompt_and_tokenize` before it (vllm/entrypoints/openai/serving_engine.py,
#   "(N in the messages, M in the completion)"), in vLLM's flat error body of then.
# - SGLang: `TokenizerManager._validate_one_request` (python/sglang/srt/managers/
#   tokenizer_manager.py): "The input (N tokens) is longer than the model's context length
#   (M tokens)." and "Requested token count exceeds the model's maximum context length of M
#   tokens. ...", in its `ErrorResponse` (`"object": "error"`, `"type": "BadRequest"`).
# - llama-server: `send_error(..., ERROR_TYPE_EXCEED_CONTEXT_SIZE)` in
#   tools/server/server-context.cpp, whose `server_task_result_error::to_json` adds
#   `n_prompt_tokens` and `n_ctx` (server-task.cpp); older builds said "the request exceeds
#   the available context size, try increasing it" (some without the two fields).
# - llama-cpp-python's server: `ErrorResponseFormatters.context_length_exceeded`
#   (llama_cpp/server/errors.py) rewrites its engine's "Requested tokens (N) exceed context
#   window of M" in OpenAI's words, HTTP 400; a body it cannot parse leaves the engine's
#   words in an HTTP 500.
# - Ollama: `openai.NewError` (openai/openai.go) around the runner's `errorInputTooLong`,
#   "the input length exceeds the context length" (runner/ollamarunner/runner.go, to 0.20),
#   or "the prompt is longer than the context length currently available to the model; ..."
#   (llm/llama_server.go, 0.32), neither with a size.

VLLM_RENDERER = (
    "You passed 4410 input tokens and requested 512 output tokens. However, the model's context length "
    "is only 4096 tokens, resulting in a maximum input length of 3584 tokens. Please reduce the length "
    "of the input prompt. (parameter=input_tokens, value=4410)"
)
VLLM_0_18 = (
    "This model's maximum context length is 4096 tokens. However, you requested 512 output tokens and "
    "your prompt contains at least 3585 input tokens, for a total of at least 4097 tokens. Please reduce "
    "the length of the input prompt or the number of requested output tokens. "
    "(parameter=input_tokens, value=3585)"
)
VLLM_0_10 = (
    "This model's maximum context length is 4096 tokens. However, your request has 4410 input tokens. "
    "Please reduce the length of the input messages."
)
VLLM_0_10_MAX_TOKENS = (
    "'max_tokens' or 'max_completion_tokens' is too large: 512. This model's maximum context length is "
    "4096 tokens and your request has 3700 input tokens (512 > 4096 - 3700)."
)
OPENAI_WORDS = (
    "This model's maximum context length is {window} tokens. However, you requested {total} tokens "
    "({prompt} in the messages, 512 in the completion). Please reduce the length of the messages or "
    "completion."
)
SGLANG_INPUT = "The input (4410 tokens) is longer than the model's context length (4096 tokens)."
SGLANG_TOTAL = (
    "Requested token count exceeds the model's maximum context length of 4096 tokens. You requested a "
    "total of 4922 tokens: 4410 tokens from the input messages and 512 tokens for the completion. Please "
    "reduce the number of tokens in the input messages or the completion to fit within the limit."
)


def _nested(message: str, kind: str, **fields: object) -> str:
    return json.dumps({"error": {"message": message, "type": kind, "param": None, "code": 400, **fields}})


def _flat(message: str, kind: str) -> str:
    return json.dumps({"object": "error", "message": message, "type": kind, "param": None, "code": 400})


CONTEXT_REFUSALS = {
    "vllm-renderer": (400, _nested(VLLM_RENDERER, "BadRequestError"), 4410, 4096),
    "vllm-0.18": (400, _nested(VLLM_0_18, "BadRequestError"), 3585, 4096),
    "vllm-0.10": (400, _nested(VLLM_0_10, "BadRequestError"), 4410, 4096),
    "vllm-0.10-max-tokens": (400, _nested(VLLM_0_10_MAX_TOKENS, "BadRequestError"), 3700, 4096),
    "vllm-0.5": (
        400,
        _flat(OPENAI_WORDS.format(window=4096, total=4922, prompt=4410), "BadRequestError"),
        4410,
        4096,
    ),
    "sglang-input": (400, _flat(SGLANG_INPUT, "BadRequest"), 4410, 4096),
    "sglang-total": (400, _flat(SGLANG_TOTAL, "BadRequest"), 4410, 4096),
    "llama-server": (
        400,
        _nested(
            "request (4476 tokens) exceeds the available context size (4096 tokens), try increasing it",
            "exceed_context_size_error",
            n_prompt_tokens=4476,
            n_ctx=4096,
        ),
        4476,
        4096,
    ),
    "llama-server-older": (
        400,
        _nested(
            "the request exceeds the available context size, try increasing it",
            "exceed_context_size_error",
            n_prompt_tokens=4476,
            n_ctx=4096,
        ),
        4476,
        4096,
    ),
    "llama-cpp-python": (
        400,
        json.dumps(
            {
                "error": {
                    "message": OPENAI_WORDS.format(window=2048, total=2612, prompt=2100),
                    "type": "invalid_request_error",
                    "param": "messages",
                    "code": "context_length_exceeded",
                }
            }
        ),
        2100,
        2048,
    ),
    "llama-cpp-python-bare": (
        500,
        _nested("Requested tokens (2100) exceed context window of 2048", "internal_server_error"),
        2100,
        2048,
    ),
}
"""Each server's refusal: (HTTP status, body, the prompt's size, the context's size)."""

UNSIZED_REFUSALS = {
    "llama-server-oldest": _nested(
        "the request exceeds the available context size, try increasing it", "invalid_request_error"
    ),
    "ollama-runner": _nested("the input length exceeds the context length", "invalid_request_error"),
    "ollama-llama-server": _nested(
        "the prompt is longer than the context length currently available to the model; shorten the "
        "prompt, adjust the context length in settings, or use a model with a longer context length",
        "invalid_request_error",
    ),
}
"""Refusals that give no size: Ollama's, and the oldest llama-server's."""


def sending(status: int, body: str) -> Handler:
    async def handler(conn: Conn) -> None:
        await conn.send(status, body)

    return handler


async def too_long(engine: OpenAICompatible) -> ContextExceeded:
    with pytest.raises(ContextExceeded) as info:
        await collect(engine, {"max_tokens": 512})
    assert engine.base_url in str(info.value)
    return info.value


@pytest.mark.parametrize("server", sorted(CONTEXT_REFUSALS))
async def test_each_servers_context_refusal_is_context_exceeded_with_its_sizes(server: str) -> None:
    status, body, prompt, window = CONTEXT_REFUSALS[server]
    async with serving(sending(status, body), retries=2) as (served, engine):
        refused = await too_long(engine)
    assert (refused.prompt_tokens, refused.context_window) == (prompt, window)
    assert f"({prompt} tokens, context of {window} tokens)" in str(refused)
    assert len(served.requests) == 1  # a refusal for length is not retried


@pytest.mark.parametrize("server", sorted(UNSIZED_REFUSALS))
async def test_a_refusal_without_sizes_takes_the_engines_context_window(server: str) -> None:
    body = UNSIZED_REFUSALS[server]
    async with serving(sending(400, body)) as (_served, engine):
        refused = await too_long(engine)
    assert (refused.prompt_tokens, refused.context_window) == (0, 0)
    assert "its size not given, context size not given" in str(refused)
    async with serving(sending(400, body), context_window=2048) as (_served, engine):
        refused = await too_long(engine)
    assert (refused.prompt_tokens, refused.context_window) == (0, 2048)
    assert json.loads(body)["error"]["message"][:40] in str(refused)


async def test_a_refusal_streamed_as_the_first_event_is_context_exceeded() -> None:
    # SGLang answers a streamed request with HTTP 200, then its refusal as the first event.
    error = {"error": json.loads(_flat(SGLANG_INPUT, "BadRequest"))}
    async with serving(stream(json.dumps(error), "[DONE]")) as (_server, engine):
        refused = await too_long(engine)
    assert (refused.prompt_tokens, refused.context_window) == (4410, 4096)

    async def error_event(conn: Conn) -> None:
        await conn.start_stream()
        await conn.write(f"event: error\ndata: {VLLM_0_10}\n\n")
        await conn.end()

    async with serving(error_event) as (_server, engine):
        refused = await too_long(engine)
    assert (refused.prompt_tokens, refused.context_window) == (4410, 4096)


async def test_a_refusal_after_text_is_an_engine_failure() -> None:
    error = {"error": json.loads(_flat(SGLANG_INPUT, "BadRequest"))}
    seen: list[Delta] = []
    async with serving(stream(json.dumps(chunk('{"fin')), json.dumps(error))) as (_server, engine):
        with pytest.raises(EngineError) as info:
            async with asyncio.timeout(GUARD):
                async for delta in engine.chat(MESSAGES):
                    seen.append(delta)
    assert seen == [Delta(text='{"fin')]
    assert "reported an error mid-stream" in info.value.cause and "4410 tokens" in info.value.cause


@pytest.mark.parametrize(
    "body",
    [
        _nested("Invalid schema for response_format 'turn': 'required' is missing", "BadRequestError"),
        _nested(
            "max_completion_tokens is too large: 9000.This model supports at most 4096 completion tokens.",
            "x",
        ),
        _flat("The model `m` does not exist.", "NotFoundError"),
        "context window full of bees",
    ],
)
async def test_other_refusals_stay_engine_errors(body: str) -> None:
    async with serving(sending(400, body)) as (_server, engine):
        error = await fails(engine, {"max_tokens": 512})
    assert error.cause.startswith("answered HTTP 400 to POST")


def test_the_context_window_is_kept_and_checked() -> None:
    assert OpenAICompatible("http://127.0.0.1:8000/v1", "m").context_window is None
    assert OpenAICompatible("http://127.0.0.1:8000/v1", "m", context_window=8192).context_window == 8192
    for bad in (0, -1, 4096.0, "4096", True):
        with pytest.raises(AerixError) as info:
            OpenAICompatible("http://127.0.0.1:8000/v1", "m", context_window=bad)  # type: ignore[arg-type]
        assert info.value.kind == "options"
        assert "context_window must be the model's context size, a whole number of tokens >= 1 " in (
            info.value.message
        )
        assert f"got {bad!r}" in info.value.message


# -- the connection lanes --------------------------------------------------------------------


def _lanes(size: int, keep: int) -> Any:
    import httpx

    from aerix.engines.openai._lanes import Lanes

    return Lanes(lambda: httpx.AsyncClient(verify=False), size, keep)


async def test_lanes_queue_requests_beyond_the_limit_and_hand_lanes_over() -> None:
    lanes = _lanes(2, 2)
    a, b = await lanes.acquire(), await lanes.acquire()
    assert a is not b and lanes.open == 2
    third = asyncio.create_task(lanes.acquire())
    await asyncio.sleep(0)
    assert not third.done()
    await lanes.release(a)
    assert await third is a  # handed over, not reopened
    await lanes.release(b)
    assert await lanes.acquire() is b  # the most recently used idle lane comes first
    await lanes.aclose()


async def test_lanes_survive_cancelled_waiters() -> None:
    lanes = _lanes(1, 1)
    only = await lanes.acquire()
    gone = asyncio.create_task(lanes.acquire())
    await asyncio.sleep(0)
    gone.cancel()  # cancelled while waiting
    with pytest.raises(asyncio.CancelledError):
        await gone
    late = asyncio.create_task(lanes.acquire())
    await asyncio.sleep(0)
    await lanes.release(only)  # handed to `late`...
    late.cancel()  # ...which is cancelled before it runs: the lane must come back
    with pytest.raises(asyncio.CancelledError):
        await late
    assert await lanes.acquire() is only
    assert lanes.open == 1
    await lanes.release(only)
    await lanes.aclose()
    assert lanes.open == 0 and only.is_closed


async def test_lanes_close_idle_ones_now_and_busy_ones_on_release() -> None:
    lanes = _lanes(3, 3)
    busy, idle = await lanes.acquire(), await lanes.acquire()
    await lanes.release(idle)
    await lanes.aclose()
    assert idle.is_closed and not busy.is_closed
    await lanes.release(busy)
    assert busy.is_closed and lanes.open == 0


# -- with the agent loop ---------------------------------------------------------------------


async def test_an_agent_ends_with_error_naming_the_server_and_cause() -> None:
    from aerix import Agent
    from aerix.events import EndEvent

    async def handler(conn: Conn) -> None:
        await conn.start_stream()
        await conn.event(chunk('{"final": '))
        await conn.cut()

    async with serving(handler) as (server, engine):
        async with asyncio.timeout(GUARD):
            events = [ev async for ev in Agent(model=engine).run("hi")]
    end = events[-1]
    assert isinstance(end, EndEvent)
    assert end.reason == "error"
    assert server.base_url in end.message
    assert "the stream broke mid-turn after 1 chunks" in end.message


async def test_an_agent_abort_mid_stream_ends_with_abort_and_hangs_up() -> None:
    from aerix import Agent
    from aerix.events import EndEvent, TextEvent

    async def handler(conn: Conn) -> None:
        await conn.start_stream()
        await conn.event(chunk('{"final": "'))
        await conn.stall()

    controller = AbortController()
    events = []
    async with serving(handler, read_timeout=GUARD * 3) as (server, engine):
        async with asyncio.timeout(GUARD):
            async for ev in Agent(model=engine).run("hi", signal=controller.signal):
                events.append(ev)
                if isinstance(ev, TextEvent):
                    controller.abort("user")
            await server.disconnected.wait()
    end = events[-1]
    assert isinstance(end, EndEvent)
    assert end.reason == "abort"


async def test_an_agent_trims_its_conversation_when_the_server_refuses_it() -> None:
    from aerix import Agent
    from aerix.events import FinalEvent, TrimEvent

    async def handler(conn: Conn) -> None:
        messages = conn.request.json()["messages"]
        size = sum(len(m["content"]) for m in messages) // 4
        if size + 64 > 600:  # vLLM's refusal of a prompt that leaves no room for max_tokens
            await conn.send(400, _nested(VLLM_0_18.replace("3585", str(size)).replace("4096", "600"), "x"))
        else:
            await stream(*sse_body('{"final": "ok"}'))(conn)

    async with serving(handler) as (server, engine):
        agent = Agent(model=engine, limits={"max_tokens": 64})
        trims = []
        for k in range(6):
            async with asyncio.timeout(GUARD):
                events = [ev async for ev in agent.run(f"question {k}: " + "x" * 600)]
            assert isinstance(events[-1], FinalEvent), events[-1]
            trims += [ev for ev in events if isinstance(ev, TrimEvent)]
    assert trims and all(t.dropped > 0 for t in trims)
    assert len(agent.messages) == 12
    refused = [
        r for r in server.requests if sum(len(m["content"]) for m in r.json()["messages"]) // 4 + 64 > 600
    ]
    assert len(refused) == len(trims)  # one refusal for each trim, none wasted
