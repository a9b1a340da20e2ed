"""The playground's ASGI app, in process: httpx's ASGI transport and a `ScriptedModel`."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from types import SimpleNamespace
from typing import Any

import httpx
import pytest

pytest.importorskip("starlette")

from aerix import AerixError, Limits, tool
from aerix.demo_tools import DEMO_TOOLS
from aerix.model import Delta, Usage
from aerix.playground import _serve as serve_module
from aerix.playground import create_app, serve
from aerix.playground._session import Session, SessionStore
from aerix.testing import ScriptedModel, Stall

CALL = '{"calls":[{"tool":"add","input":{"a":2,"b":3}}]}'
FINAL = '{"final":"5","thought":"2 + 3 is 5"}'


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool
def boom() -> str:
    """Always fails."""
    raise RuntimeError("no luck")


def frames(text: str) -> list[tuple[str, dict[str, Any]]]:
    """The SSE frames of a response body: (event name, JSON data)."""
    out = []
    for frame in text.split("\n\n"):
        name, data = "message", []
        for line in frame.splitlines():
            if line.startswith("event:"):
                name = line[6:].strip()
            elif line.startswith("data:"):
                data.append(line[5:].strip())
        if data:
            out.append((name, json.loads("\n".join(data))))
    return out


def events(text: str) -> list[dict[str, Any]]:
    return [data for name, data in frames(text) if name == "message"]


@pytest.fixture
def scripted() -> Callable[..., tuple[Any, list[ScriptedModel]]]:
    """An app whose agents each get a fresh ScriptedModel with `script`."""

    def make(*script: Any, **kwargs: Any) -> tuple[Any, list[ScriptedModel]]:
        models: list[ScriptedModel] = []

        def factory() -> ScriptedModel:
            models.append(ScriptedModel(script))
            return models[-1]

        kwargs.setdefault("tools", [add, boom])
        return create_app(factory, **kwargs), models

    return make


@pytest.fixture
async def client_for() -> AsyncIterator[Callable[[Any], httpx.AsyncClient]]:
    clients: list[httpx.AsyncClient] = []

    def make(app: Any) -> httpx.AsyncClient:
        clients.append(
            httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://testserver")
        )
        return clients[-1]

    yield make
    for c in clients:
        await c.aclose()


async def until(predicate: Callable[[], bool]) -> None:
    async def wait() -> None:
        while not predicate():
            await asyncio.sleep(0.005)

    await asyncio.wait_for(wait(), 10)


def only_session(app: Any) -> Session:
    (session,) = list(app.state.sessions)
    return session


async def test_page_sets_a_session_cookie_and_serves_its_assets(scripted, client_for) -> None:
    app, _ = scripted()
    client = client_for(app)
    page = await client.get("/")
    assert page.status_code == 200
    assert 'id="stop"' in page.text and "/static/app.js" in page.text
    cookie = page.headers["set-cookie"]
    assert cookie.startswith("aerix_session=") and "HttpOnly" in cookie and "SameSite=strict" in cookie
    for asset, kind in (("app.js", "javascript"), ("style.css", "css")):
        r = await client.get(f"/static/{asset}")
        assert r.status_code == 200 and kind in r.headers["content-type"]
    again = await client.get("/")
    assert "set-cookie" not in again.headers  # the same session


async def test_config_lists_the_pickable_tools_and_the_defaults(scripted, client_for) -> None:
    app, _ = scripted(limits=Limits(turns=3), temperature=0.5, model_name="scripted")
    config = (await client_for(app).get("/api/config")).json()
    assert config["model"] == "scripted"
    assert [t["name"] for t in config["tools"]] == ["add", "boom"]
    assert config["tools"][0]["fields"]["a"] == {"type": "integer", "required": True, "description": None}
    assert config["defaults"]["tools"] == ["add", "boom"]
    assert config["defaults"]["limits"]["turns"] == 3
    assert config["defaults"]["temperature"] == 0.5


async def test_the_demo_tools_are_the_default(client_for) -> None:
    app = create_app(ScriptedModel)
    config = (await client_for(app).get("/api/config")).json()
    assert [t["name"] for t in config["tools"]] == list(DEMO_TOOLS)


async def test_a_run_streams_each_event_as_one_sse_json_frame(scripted, client_for) -> None:
    app, models = scripted(CALL, FINAL)
    r = await client_for(app).post("/api/run", json={"prompt": "What is 2 + 3?"})
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/event-stream")
    got = frames(r.text)
    assert got[0] == ("session", {"type": "session", "conversation": "same"})
    evs = [data for _, data in got[1:]]
    assert [e["type"] for e in evs] == [
        "text", "usage", "turn", "call", "result", "text", "usage", "final",
    ]  # fmt: skip
    assert evs[0] == {"type": "text", "text": CALL}
    assert evs[3] == {"type": "call", "id": "call_1", "tool": "add", "input": {"a": 2, "b": 3}}
    assert evs[4] == {"type": "result", "id": "call_1", "tool": "add", "text": "5", "error": False}
    assert evs[6]["cached_tokens"] > 0  # the second generation reuses the first prompt
    assert evs[-1] == {"type": "final", "text": "5", "thought": "2 + 3 is 5"}
    (model,) = models
    assert model.calls[0].messages[-1] == {"role": "user", "content": "What is 2 + 3?"}


async def test_the_settings_reach_the_agent(scripted, client_for) -> None:
    app, models = scripted(FINAL)
    settings = {
        "instructions": "Be terse.",
        "tools": ["add"],
        "limits": {"max_tokens": 77},
        "temperature": 0.3,
    }
    r = await client_for(app).post("/api/run", json={"prompt": "hi", "settings": settings})
    assert events(r.text)[-1]["type"] == "final"
    call = models[0].calls[0]
    system = call.messages[0]["content"]
    assert system.startswith("Be terse.") and "- add:" in system and "boom" not in system
    assert call.opts["max_tokens"] == 77 and call.opts["temperature"] == 0.3
    session = (await client_for(app).get("/api/session")).json()
    assert session["settings"]["tools"] == ["add", "boom"]  # another client: another session


async def test_the_conversation_continues_until_the_settings_change(scripted, client_for) -> None:
    app, models = scripted(FINAL, FINAL, FINAL)
    client = client_for(app)
    await client.post("/api/run", json={"prompt": "one"})
    second = await client.post("/api/run", json={"prompt": "two"})
    assert frames(second.text)[0] == ("session", {"type": "session", "conversation": "same"})
    assert len(models) == 1 and len(models[0].calls[1].messages) == 4  # system, one, answer, two
    third = await client.post("/api/run", json={"prompt": "three", "settings": {"limits": {"turns": 2}}})
    assert frames(third.text)[0] == ("session", {"type": "session", "conversation": "new"})
    assert len(models) == 2 and len(models[1].calls[0].messages) == 2
    assert [r["prompt"] for r in (await client.get("/api/session")).json()["runs"]] == ["three"]


async def test_error_and_refused_results_are_marked(client_for) -> None:
    model = ScriptedModel(['{"calls":[{"tool":"boom","input":{}},{"tool":"add","input":{"a":1}}]}', FINAL])
    app = create_app(lambda: model, tools=[add, boom])
    r = await client_for(app).post("/api/run", json={"prompt": "x"})
    results = [e for e in events(r.text) if e["type"] == "result"]
    assert results[0]["error"] and results[0]["text"] == "error: no luck"
    assert results[1]["error"] and results[1]["text"].startswith("error: input: missing required field 'b'")


@pytest.mark.parametrize(
    ("settings", "words"),
    [
        ({"limits": {"turns": 0}}, "limits.turns must be at least 1"),
        ({"limits": {"max_tokens": 3_000_000_000}}, "limits.max_tokens must be at most 2147483647"),
        ({"limits": {"speed": 3}}, "unknown limit 'speed'"),
        ({"tools": ["rm"]}, "unknown tool 'rm'"),
        ({"temperature": 9}, "temperature must be a number from 0 to 2"),
        ({"temperature": "hot"}, "temperature must be a number from 0 to 2"),
        ({"colour": "red"}, "unknown setting 'colour'"),
        ([], "settings must be an object"),
    ],
)
async def test_bad_settings_get_400_naming_the_setting(scripted, client_for, settings, words) -> None:
    app, models = scripted(FINAL)
    r = await client_for(app).post("/api/run", json={"prompt": "hi", "settings": settings})
    assert r.status_code == 400
    assert words in r.json()["error"]
    assert not models  # nothing ran


async def test_an_empty_prompt_or_a_bad_body_gets_400(scripted, client_for) -> None:
    app, _ = scripted()
    client = client_for(app)
    r = await client.post("/api/run", json={"prompt": "  "})
    assert r.status_code == 400 and "empty" in r.json()["error"]
    r = await client.post("/api/run", content=b"{", headers={"content-type": "application/json"})
    assert r.status_code == 400 and "JSON" in r.json()["error"]
    as_json = {"content-type": "application/json"}
    for body, said in [
        (b"[" * 100_000 + b"]" * 100_000, "the body must be JSON"),  # too deep for Python's parser
        (b"[1, 2]", "the body must be a JSON object"),
        (b"null", "the body must be a JSON object"),
        (b'{"prompt": 5}', "prompt must be a string, got int"),
    ]:
        r = await client.post("/api/run", content=body, headers=as_json)
        assert r.status_code == 400 and said in r.json()["error"], (body[:20], r.text)


async def test_a_body_over_the_limit_gets_413_unread(scripted, client_for) -> None:
    from aerix.playground._app import MAX_BODY

    app, models = scripted(FINAL)
    client = client_for(app)
    big = json.dumps({"prompt": "x" * (MAX_BODY + 1)}).encode()
    r = await client.post("/api/run", content=big, headers={"content-type": "application/json"})
    assert r.status_code == 413 and "larger than 4 MiB" in r.json()["error"]

    async def chunks():  # no content-length: read up to the limit, no further
        for _ in range(MAX_BODY // 65536 + 2):
            yield b" " * 65536

    r = await client.post("/api/run", content=chunks(), headers={"content-type": "application/json"})
    assert r.status_code == 413
    assert not models  # nothing ran
    r = await client.post("/api/run", json={"prompt": "hi"})
    assert r.status_code == 200  # the server goes on


async def test_a_second_run_while_busy_gets_409_and_stop_aborts_the_first(scripted, client_for) -> None:
    app, _ = scripted(Stall(text='{"final":"wait'), FINAL)
    client = client_for(app)
    await client.get("/")
    first = asyncio.create_task(client.post("/api/run", json={"prompt": "slow"}))
    await until(lambda: bool(app.state.sessions and only_session(app).current))
    await until(lambda: bool(only_session(app).current.events))  # type: ignore[union-attr]

    second = await client.post("/api/run", json={"prompt": "again"})
    assert second.status_code == 409
    assert "already in progress" in second.json()["error"]
    reset = await client.post("/api/reset")
    assert reset.status_code == 409 and "Stop" in reset.json()["error"]

    stop = await client.post("/api/stop")
    assert stop.json() == {"stopped": True}
    evs = events((await asyncio.wait_for(first, 10)).text)
    assert evs[0] == {"type": "text", "text": '{"final":"wait'}
    assert evs[-1] == {"type": "end", "reason": "abort", "message": "stopped from the page"}
    assert (await client.post("/api/stop")).json() == {"stopped": False}

    third = await client.post("/api/run", json={"prompt": "now"})
    assert events(third.text)[-1]["type"] == "final"


async def test_sessions_are_separate(scripted, client_for) -> None:
    app, models = scripted(lambda messages: Stall() if messages[-1]["content"] == "slow" else FINAL)
    one, two = client_for(app), client_for(app)
    await one.get("/")
    stalled = asyncio.create_task(one.post("/api/run", json={"prompt": "slow"}))
    await until(lambda: bool(models and models[0].calls))
    r = await two.post("/api/run", json={"prompt": "fast"})
    assert r.status_code == 200
    assert len(app.state.sessions) == 2
    await one.post("/api/stop")
    assert events((await asyncio.wait_for(stalled, 10)).text)[-1]["reason"] == "abort"


async def test_shutting_down_aborts_the_runs_in_progress(scripted, client_for) -> None:
    app, models = scripted(Stall(text='{"final":"wait'))
    client = client_for(app)
    async with app.router.lifespan_context(app):  # what an ASGI server runs around serving
        await client.get("/")
        stalled = asyncio.create_task(client.post("/api/run", json={"prompt": "slow"}))
        await until(lambda: bool(models and models[0].calls))
        run = only_session(app).current
        assert run is not None and not run.finished
    assert run.task is not None and run.task.done()
    assert run.events[-1] == {"type": "end", "reason": "abort", "message": "the server is shutting down"}
    assert events((await asyncio.wait_for(stalled, 10)).text)[-1]["reason"] == "abort"


async def test_closing_the_stream_aborts_the_run(scripted) -> None:
    app, _ = scripted(Stall(text='{"final":"'))
    body = json.dumps({"prompt": "hi"}).encode()
    incoming = [{"type": "http.request", "body": body, "more_body": False}]
    closed, streaming = asyncio.Event(), asyncio.Event()

    async def receive() -> dict[str, Any]:
        if incoming:
            return incoming.pop(0)
        await closed.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        if b'"type": "text"' in message.get("body", b""):
            streaming.set()

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/api/run",
        "raw_path": b"/api/run",
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", b"testserver"), (b"content-type", b"application/json")],
        "client": ("127.0.0.1", 50000),
        "server": ("testserver", 80),
    }
    request = asyncio.create_task(app(scope, receive, send))
    await asyncio.wait_for(streaming.wait(), 10)
    closed.set()  # the tab is closed
    await asyncio.wait_for(request, 10)
    session = only_session(app)
    run = session.runs[-1]
    assert run.task is not None
    await asyncio.wait_for(run.task, 10)
    assert run.events[-1] == {"type": "end", "reason": "abort", "message": "the page closed the stream"}
    assert not session.busy and not session.agent.busy  # type: ignore[union-attr]


async def test_reset_forgets_the_conversation_and_the_log(scripted, client_for) -> None:
    app, models = scripted(FINAL, FINAL)
    client = client_for(app)
    await client.post("/api/run", json={"prompt": "one"})
    assert len((await client.get("/api/session")).json()["runs"]) == 1
    assert (await client.post("/api/reset")).json() == {"reset": True}
    assert (await client.get("/api/session")).json()["runs"] == []
    await client.post("/api/run", json={"prompt": "two"})
    assert [m["role"] for m in models[0].calls[1].messages] == ["system", "user"]


async def test_the_session_replays_its_runs(scripted, client_for) -> None:
    app, _ = scripted(CALL, FINAL)
    client = client_for(app)
    r = await client.post("/api/run", json={"prompt": "add"})
    session = (await client.get("/api/session")).json()
    assert session["busy"] is False
    assert session["runs"] == [{"prompt": "add", "events": events(r.text)}]


async def test_a_failing_model_factory_gets_500(client_for) -> None:
    def factory() -> ScriptedModel:
        raise FileNotFoundError("no model here")

    app = create_app(factory, tools=[add])
    r = await client_for(app).post("/api/run", json={"prompt": "hi"})
    assert r.status_code == 500 and "FileNotFoundError: no model here" in r.json()["error"]


@pytest.mark.parametrize(
    ("made", "words"),
    [
        (
            AerixError("busy", "the engine pool is exhausted"),
            "AerixError: [busy] the engine pool is exhausted",
        ),
        (AerixError("options", "n_ctx must be at least 1"), "AerixError: [options] n_ctx must be at least 1"),
        (None, "the model factory returned NoneType, not a Model (no chat method)"),
    ],
)
async def test_a_factory_that_raises_an_aerix_error_or_gives_no_model_gets_500(
    made: Any, words: str, client_for: Any
) -> None:
    def factory() -> Any:
        if isinstance(made, Exception):
            raise made
        return made

    app = create_app(factory, tools=[add])
    client = client_for(app)
    r = await client.post("/api/run", json={"prompt": "hi"})
    assert r.status_code == 500 and r.json()["error"] == f"could not make the model: {words}"
    assert (await client.get("/api/session")).json()["busy"] is False


def test_a_new_session_is_kept_when_every_other_one_is_busy() -> None:
    store = SessionStore(limit=2)
    busy = [store.create(), store.create()]
    for s in busy:
        s.starting = True  # busy
    new = store.create()
    assert store.get(new.id) is new and len(store) == 3  # over the limit until one is idle
    busy[0].starting = False
    newest = store.create()
    # the idle ones go, least recently used first, down to the limit; the newest and the busy stay
    assert store.get(busy[0].id) is None and store.get(new.id) is None
    assert store.get(busy[1].id) is busy[1] and store.get(newest.id) is newest and len(store) == 2


async def test_an_async_model_factory_is_awaited(client_for) -> None:
    async def factory() -> ScriptedModel:
        return ScriptedModel([FINAL])

    r = await client_for(create_app(factory, tools=[add])).post("/api/run", json={"prompt": "hi"})
    assert events(r.text)[-1]["text"] == "5"


async def test_cross_site_and_non_json_posts_are_refused(scripted, client_for) -> None:
    app, models = scripted(FINAL)
    client = client_for(app)
    r = await client.post("/api/run", json={"prompt": "hi"}, headers={"origin": "http://evil.example"})
    assert r.status_code == 403
    r = await client.post("/api/stop", headers={"origin": "http://evil.example"})
    assert r.status_code == 403
    r = await client.post("/api/run", data={"prompt": "hi"})
    assert r.status_code == 415
    r = await client.post("/api/run", json={"prompt": "hi"}, headers={"origin": "http://testserver"})
    assert r.status_code == 200 and models
    body = json.dumps({"prompt": "hi"}).encode()
    r = await client.post(
        "/api/run", content=body, headers={"content-type": "Application/JSON; charset=UTF-8"}
    )
    assert r.status_code == 200  # a media type is case-insensitive


async def test_allowed_hosts_refuse_other_host_names(client_for) -> None:
    app = create_app(ScriptedModel, tools=[add], allowed_hosts=["127.0.0.1", "localhost"])
    assert (await client_for(app).get("/")).status_code == 400  # Host: testserver
    local = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1:8000")
    async with local:
        assert (await local.get("/")).status_code == 200


@pytest.mark.parametrize(
    ("base", "status"),
    [("http://[::1]:8000", 200), ("http://[::1]", 200), ("http://localhost:8000", 200),
     ("http://127.0.0.2:8000", 200), ("http://127.0.0.3:8000", 400), ("http://evil.example", 400),
     ("http://localhost.evil.example", 400)],
)  # fmt: skip
async def test_loopback_hosts_are_read_with_their_port_and_brackets(base: str, status: int) -> None:
    """`[::1]:8000` is `::1`: the Host check reads an IPv6 literal whole (Starlette's cut it at ':')."""
    app = create_app(ScriptedModel, tools=[add], allowed_hosts=["127.0.0.1", "localhost", "::1", "127.0.0.2"])
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=base) as client:
        assert (await client.get("/")).status_code == status


@pytest.mark.parametrize(
    ("header", "host"),
    [("[::1]:8000", "::1"), ("[::1]", "::1"), ("::1", "::1"), ("LOCALHOST:80", "localhost"),
     ("[::1]evil.example", ""), ("[::1", ""), ("", "")],
)  # fmt: skip
def test_a_host_header_is_read_as_one_host(header: str, host: str) -> None:
    from aerix.playground._app import _host_of

    assert _host_of(header) == host


async def test_allowed_hosts_take_wildcards_and_the_first_host_header() -> None:
    app = create_app(ScriptedModel, tools=[add], allowed_hosts=["*.corp.example", "localhost"])
    for base, status in (
        ("http://a.corp.example", 200),
        ("http://corp.example", 400),
        ("http://evil.example", 400),
    ):
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=base) as client:
            assert (await client.get("/")).status_code == status, base
    sent: list[Any] = []

    async def receive() -> Any:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: Any) -> None:
        sent.append(message)

    scope = {"type": "http", "method": "GET", "path": "/", "raw_path": b"/", "query_string": b"",
             "headers": [(b"host", b"evil.example"), (b"host", b"localhost")], "http_version": "1.1",
             "scheme": "http", "server": ("127.0.0.1", 80), "client": ("127.0.0.1", 1), "root_path": ""}  # fmt: skip
    await app(scope, receive, send)
    assert sent[0]["status"] == 400  # the first Host, as Starlette and the app read it


async def test_every_response_says_it_may_not_be_framed_nor_load_from_elsewhere(client_for) -> None:
    client = client_for(create_app(ScriptedModel, tools=[add]))
    for path in ("/", "/api/config", "/static/app.js"):
        r = await client.get(path)
        assert r.headers["x-frame-options"] == "DENY", path
        assert "frame-ancestors 'none'" in r.headers["content-security-policy"]
        assert "default-src 'self'" in r.headers["content-security-policy"]
        assert r.headers["x-content-type-options"] == "nosniff"
    app = create_app(ScriptedModel, tools=[add], allowed_hosts=["127.0.0.1"])
    refused = await client_for(app).get("/")
    assert refused.status_code == 400 and refused.headers["x-frame-options"] == "DENY"


async def test_a_lone_surrogate_in_a_result_or_a_final_keeps_the_session_usable(scripted, client_for) -> None:
    """A file name `os.fsdecode` could not decode: the result reads U+FFFD; a model's `"\\udce9"`
    in a final travels JSON-escaped; the session and its reload keep working."""
    from aerix import tool as make_tool

    listing = make_tool(
        name="list_files", description="List the files.", input={}, run=lambda i: "caf\udce9.txt"
    )
    app, _ = scripted(
        '{"calls":[{"tool":"list_files","input":{}}]}', '{"final":"caf\\udce9"}', tools=[listing]
    )
    client = client_for(app)
    r = await client.post("/api/run", json={"prompt": "files?"})
    events = [json.loads(line[6:]) for line in r.text.splitlines() if line.startswith("data: ")]
    assert [e["text"] for e in events if e["type"] == "result"] == ["caf\ufffd.txt"]
    assert events[-1] == {"type": "final", "text": "caf\udce9", "thought": None}
    session = await client.get("/api/session")
    assert session.status_code == 200 and session.json()["runs"][0]["events"][-1]["type"] == "final"


async def test_stop_while_the_run_starts_ends_it_with_abort(client_for) -> None:
    """The model factory is slow (a model loading): a Stop then is kept for the run it makes."""
    import threading
    import time

    entered = threading.Event()

    def slow_factory() -> ScriptedModel:
        entered.set()
        time.sleep(0.3)
        return ScriptedModel([Stall(text='{"final":"long answer')])

    client = client_for(create_app(slow_factory, tools=[add]))
    await client.get("/")
    running = asyncio.create_task(client.post("/api/run", json={"prompt": "go"}))
    await asyncio.to_thread(entered.wait, 5)
    assert (await client.post("/api/stop")).json() == {"stopped": True}
    r = await asyncio.wait_for(running, 10)
    last = json.loads([line for line in r.text.splitlines() if line.startswith("data: ")][-1][6:])
    assert last == {"type": "end", "reason": "abort", "message": "stopped from the page"}
    assert (await client.get("/api/session")).json()["busy"] is False


async def test_the_apps_default_limits_keep_repeats(scripted, client_for) -> None:
    from aerix import Limits

    app, _ = scripted(
        '{"calls":[{"tool":"add","input":{"a":1,"b":2}}]}',
        '{"calls":[{"tool":"add","input":{"a":1,"b":2}}]}',
        '{"final":"3"}',
        limits=Limits(repeats=0),
    )
    client = client_for(app)
    assert (await client.get("/api/config")).json()["defaults"]["limits"]["repeats"] == 0
    r = await client.post("/api/run", json={"prompt": "add"})
    results = [json.loads(line[6:]) for line in r.text.splitlines() if line.startswith("data: ")]
    texts = [e["text"] for e in results if e["type"] == "result"]
    assert texts[0] == "3" and texts[1].startswith("error: 3\n(that is the result of call_1")


def test_bad_app_options_are_refused() -> None:
    from aerix import AerixError

    with pytest.raises(AerixError, match="two tools are named 'add'"):
        create_app(ScriptedModel, tools=[add, add])
    with pytest.raises(AerixError, match="temperature must be a number from 0 to 2"):
        create_app(ScriptedModel, tools=[add], temperature=-1)


@pytest.mark.parametrize(
    ("host", "loopback"),
    [("127.0.0.1", True), ("localhost", True), ("::1", True), ("[::1]", True), ("0.0.0.0", False),
     ("192.168.1.5", False), ("example.com", False)],
)  # fmt: skip
def test_is_loopback(host: str, loopback: bool) -> None:
    assert serve_module.is_loopback(host) is loopback


class FakeServer:
    def __init__(self, config: Any) -> None:
        self.config = config

    def run(self, sockets: Any = None) -> None:
        FakeServer.seen = (self.config, sockets)


def test_serve_binds_loopback_and_guards_the_host_header(monkeypatch, capsys) -> None:
    import uvicorn

    monkeypatch.setattr(uvicorn, "Server", FakeServer)
    model = ScriptedModel()
    serve(model=model, port=0, tools=[add])
    config, (sock,) = FakeServer.seen
    try:
        host, port = sock.getsockname()
        assert host == "127.0.0.1" and port > 0
        out, err = capsys.readouterr()
        assert f"http://127.0.0.1:{port}/" in out and err == ""
        middleware = [m.kwargs for m in config.app.user_middleware]
        assert middleware == [{"hosts": ["127.0.0.1", "localhost", "::1"]}]
    finally:
        sock.close()


def test_serve_warns_on_a_host_that_is_not_loopback(monkeypatch, capsys) -> None:
    import uvicorn

    bound: list[tuple[str, int]] = []

    class FakeSocket:
        def getsockname(self) -> tuple[str, int]:
            return bound[-1]

    def fake_bind(host: str, port: int) -> FakeSocket:
        bound.append((host, port or 1234))
        return FakeSocket()

    monkeypatch.setattr(uvicorn, "Server", FakeServer)
    monkeypatch.setattr(serve_module, "_bind", fake_bind)
    serve(model=ScriptedModel(), host="0.0.0.0", port=0, tools=[add])
    out, err = capsys.readouterr()
    assert "warning: listening on 0.0.0.0, not on loopback" in err
    assert "http://0.0.0.0:1234/" in out
    assert bound == [("0.0.0.0", 1234)]
    config, _ = FakeServer.seen
    assert [m.kwargs for m in config.app.user_middleware] == [{"hosts": None}]  # headers only


async def test_a_quiet_stream_gets_keep_alive_comments_and_loses_no_event(
    scripted, client_for, monkeypatch
) -> None:
    from aerix.playground import _app

    monkeypatch.setattr(_app, "HEARTBEAT_S", 0.001)
    app, _ = scripted(Stall(text='{"final":"'))
    client = client_for(app)
    await client.get("/")
    running = asyncio.create_task(client.post("/api/run", json={"prompt": "wait"}))
    await until(lambda: bool(app.state.sessions and only_session(app).current))
    await asyncio.sleep(0.05)
    await client.post("/api/stop")
    text = (await asyncio.wait_for(running, 10)).text
    assert ": keep-alive" in text
    assert events(text) == [
        {"type": "text", "text": '{"final":"'},
        {"type": "end", "reason": "abort", "message": "stopped from the page"},
    ]


# -- the engine's progress -------------------------------------------------------------


def state(phase: str, **counts: float) -> SimpleNamespace:
    """A progress object as `LlamaCpp.progress` gives one."""
    fields = {
        "prompt_tokens": 0,
        "cached_tokens": 0,
        "prefilled_tokens": 0,
        "generated_tokens": 0,
        "seconds": 0.0,
    }
    return SimpleNamespace(phase=phase, **{**fields, **counts})


class Progressing:
    """A model that reports `progress`: each state (`None`: idle) stays until the stream has read it; then its turn."""

    def __init__(self, states: list[Any], turn: str = FINAL) -> None:
        self._states = states
        self._turn = turn
        self._now: Any = None
        self._read = asyncio.Event()

    @property
    def progress(self) -> Any:
        self._read.set()
        return self._now

    async def chat(self, messages: list[Any], opts: Any = None) -> AsyncIterator[Delta]:
        for s in self._states:
            self._now = s
            self._read.clear()
            await asyncio.wait_for(self._read.wait(), 10)
        yield Delta(text=self._turn)
        yield Delta(done=True, finish="stop", usage=Usage(prompt_tokens=1100, completion_tokens=9))


def progress_frames(text: str) -> list[dict[str, Any]]:
    return [data for name, data in frames(text) if name == "progress"]


async def test_a_run_streams_the_engines_progress_between_its_events(client_for, monkeypatch) -> None:
    from aerix.playground import _app

    monkeypatch.setattr(_app, "PROGRESS_S", 0.005)
    states = [
        state("prefill", prompt_tokens=1100, cached_tokens=45, prefilled_tokens=0, seconds=0.1),
        state("prefill", prompt_tokens=1100, cached_tokens=45, prefilled_tokens=384, seconds=3.21),
        state(
            "decode",
            prompt_tokens=1100,
            cached_tokens=45,
            prefilled_tokens=1055,
            generated_tokens=12,
            seconds=4.5,
        ),
        None,
    ]
    model = Progressing(states)
    app = create_app(lambda: model, tools=[add])
    client = client_for(app)
    r = await client.post("/api/run", json={"prompt": "hi"})
    texts = [p["text"] for p in progress_frames(r.text)]
    assert texts == [
        "prefill 0/1055 tokens (45 cached) · 0.1 s",
        "prefill 384/1055 tokens (45 cached) · 3.2 s",
        "decoding · 12 tokens · 4.5 s",
        "",  # idle again: the page hides the line
    ]
    second = progress_frames(r.text)[1]
    assert second == {
        "type": "progress",
        "phase": "prefill",
        "prompt_tokens": 1100,
        "cached_tokens": 45,
        "prefilled_tokens": 384,
        "generated_tokens": 0,
        "seconds": 3.21,
        "text": "prefill 384/1055 tokens (45 cached) · 3.2 s",
    }
    names = [name for name, _ in frames(r.text)]
    assert names.index("progress") < names.index("message")  # the prefill shows before any text
    assert events(r.text)[-1] == {"type": "final", "text": "5", "thought": "2 + 3 is 5"}
    replay = (await client.get("/api/session")).json()["runs"][0]["events"]
    assert all(e["type"] != "progress" for e in replay)  # progress is live only, not part of the run


async def test_an_unreadable_progress_shows_nothing_and_the_run_goes_on(client_for, monkeypatch) -> None:
    from aerix.playground import _app

    monkeypatch.setattr(_app, "PROGRESS_S", 0.005)
    model = Progressing([state("warming-up", seconds=1.0), SimpleNamespace(phase="prefill"), None])
    app = create_app(lambda: model, tools=[add])
    r = await client_for(app).post("/api/run", json={"prompt": "hi"})
    assert progress_frames(r.text) == []
    assert events(r.text)[-1]["type"] == "final"


@pytest.mark.parametrize(
    ("progress", "text"),
    [
        (
            state("prefill", prompt_tokens=1055, prefilled_tokens=384, seconds=3.2),
            "prefill 384/1055 tokens · 3.2 s",
        ),
        (
            state("prefill", prompt_tokens=10, cached_tokens=4, prefilled_tokens=9, seconds=1),
            "prefill 6/6 tokens (4 cached) · 1.0 s",
        ),
        (state("decode", generated_tokens=1, seconds=0.04), "decoding · 1 token · 0.0 s"),
        (state("decode", generated_tokens=12, seconds=4.06), "decoding · 12 tokens · 4.1 s"),
        (None, None),
        (state("thinking"), None),
        (state("decode", seconds=float("nan")), None),
        (SimpleNamespace(phase="decode", seconds=1.0), None),  # counts missing
        (state("decode", generated_tokens="many"), None),  # not a count
    ],
)
def test_read_progress_gives_the_pages_line_or_none(progress: Any, text: str | None) -> None:
    from aerix.playground._progress import read_progress

    got = read_progress(SimpleNamespace(progress=progress))
    assert (got and got["text"]) == text if text is not None else got is None


def test_models_without_progress_or_with_a_broken_one_have_none() -> None:
    from aerix.playground._progress import has_progress, read_progress

    class Broken:
        @property
        def progress(self) -> Any:
            raise RuntimeError("engine gone")

    assert not has_progress(ScriptedModel())
    assert read_progress(ScriptedModel()) is None
    assert has_progress(Broken()) and read_progress(Broken()) is None  # looked up, never read
    assert has_progress(SimpleNamespace(progress=None))


# -- the icon and the public loader ----------------------------------------------------


async def test_the_page_links_an_icon_served_at_favicon_ico(scripted, client_for) -> None:
    app, _ = scripted()
    client = client_for(app)
    page = await client.get("/")
    assert '<link rel="icon" href="/static/favicon.svg" type="image/svg+xml">' in page.text
    for path in ("/favicon.ico", "/static/favicon.svg"):
        r = await client.get(path)
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("image/svg+xml")
        assert r.text.lstrip().startswith("<svg")


def test_serve_loads_a_named_model_with_the_public_loader(monkeypatch, capsys) -> None:
    import uvicorn

    import aerix

    loaded: list[str] = []
    model = ScriptedModel()

    def load(name: str) -> ScriptedModel:
        loaded.append(name)
        return model

    monkeypatch.setattr(aerix, "load", load)
    monkeypatch.setattr(uvicorn, "Server", FakeServer)
    serve(model="some-model", port=0, tools=[add])
    config, (sock,) = FakeServer.seen
    sock.close()
    assert loaded == ["some-model"]
    assert "http://127.0.0.1:" in capsys.readouterr().out


# --- approvals ---------------------------------------------------------------------------------


@tool(needs_approval=True)
def wipe(path: str) -> str:
    """Delete a file."""
    return f"deleted {path}"


async def test_config_says_which_tools_ask_first(scripted, client_for) -> None:
    app, _ = scripted(tools=[add, wipe])
    config = (await client_for(app).get("/api/config")).json()
    assert [t["needs_approval"] for t in config["tools"]] == [False, True]
    assert config["defaults"]["approve"] == ["wipe"]  # a tool made so always asks


async def test_a_tool_the_page_asks_first_for_pauses_the_run_and_approve_resumes_it(
    scripted, client_for
) -> None:
    app, models = scripted(CALL, FINAL)
    client = client_for(app)
    r = await client.post("/api/run", json={"prompt": "add", "settings": {"approve": ["add"]}})
    end = events(r.text)[-1]
    assert end == {
        "type": "end",
        "reason": "paused",
        "message": "waiting for a decision: call_1 add (needs approval)",
        "pending": [{"id": "call_1", "tool": "add", "input": {"a": 2, "b": 3}}],
    }
    session = (await client.get("/api/session")).json()
    assert session["pending"] == end["pending"] and session["settings"]["approve"] == ["add"]
    busy = await client.post("/api/run", json={"prompt": "more", "settings": {"approve": ["add"]}})
    assert busy.status_code == 409
    assert "waiting for a decision: call_1 add (needs approval)" in busy.json()["error"]
    r = await client.post("/api/resume", json={"decisions": {"call_1": True}})
    assert r.status_code == 200
    assert frames(r.text)[0] == ("session", {"type": "session", "conversation": "same"})
    assert [e["type"] for e in events(r.text)] == ["call", "result", "text", "usage", "final"]
    assert events(r.text)[1]["text"] == "5"
    session = (await client.get("/api/session")).json()
    assert session["pending"] == []
    assert session["runs"][1]["prompt"] is None and session["runs"][1]["decisions"] == {"call_1": True}
    assert len(models) == 1  # one agent: the same conversation


async def test_deny_refuses_the_call(scripted, client_for) -> None:
    app, models = scripted(CALL, FINAL)
    client = client_for(app)
    await client.post("/api/run", json={"prompt": "add", "settings": {"approve": ["add"]}})
    r = await client.post("/api/resume", json={"decisions": {"call_1": False}})
    result = [e for e in events(r.text) if e["type"] == "result"][0]
    assert result == {
        "type": "result",
        "id": "call_1",
        "tool": "add",
        "text": "refused: denied",
        "error": True,
    }
    assert models[0].calls[1].messages[-1]["content"] == "Results:\n[call_1 add] refused: denied"


@pytest.mark.parametrize(
    ("body", "status", "words"),
    [
        ({"decisions": {}}, 400, "bad decisions: no decision for call_1"),
        ({"decisions": {"call_1": True, "call_7": True}}, 400, "no call waits with the id 'call_7'"),
        ({"decisions": {"call_1": "yes"}}, 400, "call_1: 'yes' is not a decision"),
        ({"decisions": [True]}, 400, "decisions must be an object of call ids"),
        ({}, 400, "decisions must be an object of call ids"),
        ([], 400, "the body must be a JSON object"),
    ],
)
async def test_bad_decisions_get_400_and_the_calls_still_wait(
    scripted, client_for, body, status, words
) -> None:
    app, _ = scripted(CALL, FINAL)
    client = client_for(app)
    await client.post("/api/run", json={"prompt": "add", "settings": {"approve": ["add"]}})
    r = await client.post("/api/resume", json=body)
    assert r.status_code == status and words in r.json()["error"], r.json()
    assert (await client.get("/api/session")).json()["pending"] == [
        {"id": "call_1", "tool": "add", "input": {"a": 2, "b": 3}}
    ]


async def test_resume_with_nothing_waiting_gets_400_and_reset_forgets_the_waiting_calls(
    scripted, client_for
) -> None:
    app, _ = scripted(CALL, FINAL)
    client = client_for(app)
    r = await client.post("/api/resume", json={"decisions": {"call_1": True}})
    assert r.status_code == 400 and "no call waits for a decision in this session" in r.json()["error"]
    await client.post("/api/run", json={"prompt": "add", "settings": {"approve": ["add"]}})
    assert (await client.post("/api/reset")).json() == {"reset": True}
    assert (await client.get("/api/session")).json()["pending"] == []
    r = await client.post("/api/resume", json={"decisions": {"call_1": True}})
    assert r.status_code == 400


async def test_approve_must_name_the_apps_tools(scripted, client_for) -> None:
    app, models = scripted(FINAL)
    for approve, words in ((["rm"], "unknown tool 'rm'"), ("add", "approve must be a list of tool names")):
        r = await client_for(app).post("/api/run", json={"prompt": "hi", "settings": {"approve": approve}})
        assert r.status_code == 400 and words in r.json()["error"]
    assert not models


async def test_a_resume_request_from_another_site_or_not_json_is_refused(scripted, client_for) -> None:
    app, _ = scripted(CALL, FINAL)
    client = client_for(app)
    r = await client.post("/api/resume", json={"decisions": {}}, headers={"Origin": "http://evil.example"})
    assert r.status_code == 403
    r = await client.post("/api/resume", content=b'{"decisions": {}}', headers={"Content-Type": "text/plain"})
    assert r.status_code == 415
