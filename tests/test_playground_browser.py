"""The playground end to end: Debian's Chromium, driven by Playwright, against uvicorn on loopback.

The scripted tests use a `ScriptedModel` (deterministic); one test uses the
embedded SmolLM2 model when `aerix.load("smollm2-instruct")` works. Set
`AERIX_UPDATE_SCREENSHOT=1` to rewrite docs/assets/playground.png from the
real model's run (look at it before committing).
"""

from __future__ import annotations

import asyncio
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from _embedded import missing

pytest.importorskip("starlette")
sync_api = pytest.importorskip("playwright.sync_api")

import uvicorn  # noqa: E402

import aerix  # noqa: E402
from aerix.demo_tools import DEMO_TOOLS  # noqa: E402
from aerix.playground import create_app  # noqa: E402
from aerix.testing import ScriptedModel, Stall  # noqa: E402

pytestmark = pytest.mark.slow

CHROMIUM = "/usr/bin/chromium"
# The browser never downloads or phones home: Debian's binary, no networking of its own.
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
SCREENSHOT = Path(__file__).parent.parent / "docs" / "assets" / "playground.png"
TOOLS = list(DEMO_TOOLS.values())

if not os.path.exists(CHROMIUM):
    pytest.skip(f"no Chromium at {CHROMIUM} (apt-get install chromium)", allow_module_level=True)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield b
        b.close()


@contextmanager
def served(app: Any) -> Iterator[str]:
    """Serve `app` with uvicorn on a free loopback port, in a thread."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", timeout_graceful_shutdown=5))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        wait_for(lambda: server.started, "uvicorn to start")
        yield f"http://127.0.0.1:{port}/"
    finally:
        server.should_exit = True
        thread.join(15)
        sock.close()


def wait_for(predicate: Callable[[], object], what: str, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


@contextmanager
def page_at(browser: Any, url: str, **options: Any) -> Iterator[Any]:
    options.setdefault("viewport", {"width": 1280, "height": 820})
    context = browser.new_context(**options)
    page = context.new_page()
    page.goto(url)
    page.wait_for_selector("body[data-ready=true]")
    try:
        yield page
    finally:
        context.close()


def ask(page: Any, prompt: str) -> None:
    page.fill("#prompt", prompt)
    page.click("#send")


def scripted_app(*script: Any, **kwargs: Any) -> Any:
    kwargs.setdefault("tools", TOOLS)
    return create_app(lambda: ScriptedModel(script, chunk_size=7), model_name="scripted", **kwargs)


def test_a_run_shows_the_retry_the_calls_their_results_and_the_final(browser: Any) -> None:
    app = scripted_app(
        "Sure! 17 times 23 is",
        '{"thought":"Multiply, convert, and check the time.","calls":['
        '{"tool":"calculator","input":{"expression":"17 * 23"}},'
        '{"tool":"calculator","input":{"expression":"17 / 0"}},'
        '{"tool":"convert","input":{"value":10,"from_unit":"km","to_unit":"mi"}},'
        '{"tool":"clock","input":{}}]}',
        '{"final":"17 × 23 = 391, and 10 km is about 6.2 miles."}',
        hooks={"before_call": lambda call: {"deny": "no clock today"} if call.tool == "clock" else None},
    )
    with served(app) as url, page_at(browser, url) as page:
        ask(page, "What is 17 × 23, and 10 km in miles?")
        page.wait_for_selector(".msg.final")
        assert page.inner_text(".msg.user") == "What is 17 × 23, and 10 km in miles?"
        assert "not JSON" in page.inner_text(".retry")
        assert page.inner_text(".turn .thought") == "Multiply, convert, and check the time."
        tools = page.locator(".call .tool").all_inner_texts()
        assert tools == ["calculator", "calculator", "convert", "clock"]
        assert page.locator(".result.ok").all_inner_texts() == ["391", "10 km = 6.21371 mi"]
        assert page.locator(".result.error").all_inner_texts() == ["error: division by zero"]
        assert page.locator(".result.refused").all_inner_texts() == ["refused: no clock today"]
        assert page.inner_text(".msg.final .answer") == "17 × 23 = 391, and 10 km is about 6.2 miles."
        usage = page.locator(".usage.done").all_inner_texts()
        assert len(usage) == 3 and all("cached" in u for u in usage)
        assert " 0 cached" not in usage[2]  # the third generation reuses the prompt so far
        assert "3 generations" in page.inner_text(".totals")
        assert page.is_enabled("#send") and not page.is_enabled("#stop")


def test_stop_aborts_the_run(browser: Any) -> None:
    app = scripted_app(Stall(text='{"final":"Thinking it over'))
    with served(app) as url, page_at(browser, url) as page:
        ask(page, "Take your time.")
        page.wait_for_selector(".stream:has-text('Thinking it over')")
        assert page.is_enabled("#stop") and not page.is_enabled("#send")
        assert page.inner_text("#status") == "running"
        page.click("#stop")
        ending = page.wait_for_selector('.ending[data-reason="abort"]')
        assert ending.inner_text() == "ended: abort · stopped from the page"
        page.wait_for_selector("#send:enabled")
        assert page.inner_text("#status") == "idle"


def test_a_call_that_the_stop_cut_short_says_so_and_long_lines_keep_the_page_width(browser: Any) -> None:
    @aerix.tool
    async def wait(seconds: int) -> str:
        """Wait a while."""
        await asyncio.sleep(seconds)
        return "waited"

    long = "https://example.com/" + "x" * 600
    app = scripted_app('{"calls":[{"tool":"wait","input":{"seconds":60}}]}', tools=[wait])
    with served(app) as url, page_at(browser, url) as page:
        ask(page, f"Wait a minute, then read {long}")
        page.wait_for_selector(".call[data-state=running]")
        page.click("#stop")
        page.wait_for_selector(".ending")
        assert page.inner_text(".call .badge") == "stopped"
        assert page.inner_text(".call .result") == "no result: the run ended first"
        assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
        assert page.is_visible("#send") and page.is_enabled("#send")


def test_reset_with_the_server_gone_says_it_cannot_be_reached(browser: Any) -> None:
    app = scripted_app('{"final":"hi"}')
    with served(app) as url, page_at(browser, url) as page:
        ask(page, "hi")
        page.wait_for_selector(".msg.final")
        page.route("**/api/reset", lambda route: route.abort())
        page.click("#reset")
        page.wait_for_selector("#notice:not([hidden])")
        assert page.inner_text("#notice").startswith("The playground server cannot be reached")


def test_a_second_run_in_the_same_session_is_refused(browser: Any) -> None:
    app = scripted_app(Stall(text='{"final":"'))
    with served(app) as url:
        context = browser.new_context()
        try:
            first, second = context.new_page(), context.new_page()  # one cookie: one session
            for page in (first, second):
                page.goto(url)
                page.wait_for_selector("body[data-ready=true]")
            ask(first, "Run long.")
            first.wait_for_selector("#stop:enabled")
            (session,) = app.state.sessions
            wait_for(lambda: session.current is not None, "the first run")
            ask(second, "Me too.")
            notice = second.wait_for_selector("#notice[data-kind=busy]")
            assert "already in progress" in notice.inner_text()
            assert second.is_enabled("#send")
            first.click("#stop")
            first.wait_for_selector('.ending[data-reason="abort"]')
        finally:
            context.close()


def test_closing_the_tab_aborts_its_run(browser: Any) -> None:
    app = scripted_app(Stall(text='{"final":"'))
    with served(app) as url:
        with page_at(browser, url) as page:
            ask(page, "Run until I leave.")
            page.wait_for_selector(".stream:has-text('final')")
            (session,) = app.state.sessions
            run = session.runs[-1]
            assert not run.finished
            page.close()
        wait_for(lambda: run.finished, "the run to end")
        assert run.events[-1] == {"type": "end", "reason": "abort", "message": "the page closed the stream"}
        assert not session.busy


def test_limits_are_editable_and_reset_forgets(browser: Any) -> None:
    call = '{"calls":[{"tool":"calculator","input":{"expression":"1 + 1"}}]}'
    models: list[ScriptedModel] = []

    def factory() -> ScriptedModel:
        models.append(ScriptedModel([call, '{"final":"2"}']))
        return models[-1]

    with served(create_app(factory, tools=TOOLS)) as url, page_at(browser, url) as page:
        page.fill("#turns", "1")
        page.fill("#temperature", "0.7")
        page.uncheck("#tools input[value=clock]")
        ask(page, "1 + 1?")
        ending = page.wait_for_selector('.ending[data-reason="turns"]')
        assert "limits.turns" in ending.inner_text()
        assert page.inner_text(".result.ok") == "2"
        opts = models[0].calls[0].opts
        assert opts["temperature"] == 0.7
        assert "clock" not in models[0].calls[0].messages[0]["content"]
        page.click("#reset")
        page.wait_for_selector(".run", state="detached")
        assert page.is_visible("#empty")
        page.reload()
        page.wait_for_selector("body[data-ready=true]")
        assert page.locator(".run").count() == 0
        assert page.input_value("#turns") == "1"  # the session keeps its settings


def test_a_reloaded_page_shows_the_conversation_again(browser: Any) -> None:
    app = scripted_app('{"final":"Hello!"}')
    with served(app) as url, page_at(browser, url) as page:
        ask(page, "Hi")
        page.wait_for_selector(".msg.final")
        page.reload()
        page.wait_for_selector(".msg.final")
        assert page.inner_text(".msg.user") == "Hi"
        assert page.inner_text(".msg.final .answer") == "Hello!"


class Prefilling:
    """A model whose `progress` shows a prefill, then a decode, each until the test lets it go on."""

    def __init__(self) -> None:
        self.progress: Any = None
        self.go_on = [threading.Event(), threading.Event()]

    async def chat(self, messages: Any, opts: Any = None) -> Any:
        from aerix.model import Delta

        counts = {"prompt_tokens": 1100, "cached_tokens": 45, "prefilled_tokens": 384, "generated_tokens": 0}
        self.progress = SimpleNamespace(phase="prefill", seconds=3.2, **counts)
        await asyncio.to_thread(self.go_on[0].wait, 30)
        self.progress = SimpleNamespace(phase="decode", seconds=4.1, **{**counts, "generated_tokens": 12})
        await asyncio.to_thread(self.go_on[1].wait, 30)
        self.progress = None
        yield Delta(text='{"final":"done"}')
        yield Delta(done=True, finish="stop")


def test_the_engines_progress_shows_while_the_run_waits_and_the_page_has_an_icon(browser: Any) -> None:
    model = Prefilling()
    with served(create_app(lambda: model, tools=TOOLS)) as url, page_at(browser, url) as page:
        icon = page.evaluate("fetch('/favicon.ico').then(r => [r.status, r.headers.get('content-type')])")
        assert icon == [200, "image/svg+xml"]
        assert page.get_attribute("link[rel=icon]", "href") == "/static/favicon.svg"
        ask(page, "Long prompt")
        bar = page.wait_for_selector(".run .progress[data-phase=prefill]")
        assert bar.inner_text() == "prefill 384/1055 tokens (45 cached) · 3.2 s"
        model.go_on[0].set()
        page.wait_for_selector(".run .progress[data-phase=decode]")
        assert page.inner_text(".run .progress") == "decoding · 12 tokens · 4.1 s"
        model.go_on[1].set()
        page.wait_for_selector(".msg.final")
        assert page.locator(".progress").count() == 0  # gone with the run's end


def _load_real_model() -> Any:
    if (why := missing()) is not None:
        pytest.skip(f"the embedded model cannot run here: {why}")
    import aerix

    return aerix.load("smollm2-instruct")  # installed, it must load


def test_the_embedded_model_calls_a_tool_and_answers_then_stops(browser: Any, tmp_path: Path) -> None:
    engine = _load_real_model()
    app = create_app(lambda: engine, tools=TOOLS, model_name="smollm2-instruct")
    sharp = {"viewport": {"width": 1100, "height": 700}, "device_scale_factor": 2}
    with served(app) as url, page_at(browser, url, **sharp) as page:
        page.fill("#max_tokens", "128")
        ask(page, "What is 17 * 23?")
        # A busy 2-core machine is slow: generous bounds, never a timing assertion.
        wait_or_explain(page, app, ".msg.final, .ending", "the first run's ending", 360)
        assert page.locator(".call .tool").count() >= 1
        assert page.locator(".result").count() >= 1
        assert page.locator(".msg.final").count() == 1, page.inner_text(".run")
        page.locator(".turn").first.locator("xpath=..").locator(".raw summary").click()  # show a turn's JSON
        page.screenshot(path=str(tmp_path / "playground.png"))
        if os.environ.get("AERIX_UPDATE_SCREENSHOT"):
            SCREENSHOT.parent.mkdir(exist_ok=True)
            page.screenshot(path=str(SCREENSHOT))
        assert (tmp_path / "playground.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

        # A long prompt keeps the engine busy prefilling for a while (it checks the
        # signal between chunks), so Stop lands mid-run even on a fast machine.
        story = "The keeper climbed the stairs and lit the lamp as the storm rolled in from the sea. " * 60
        ask(page, f"Summarize this in one sentence: {story}")
        (session,) = app.state.sessions
        wait_for(lambda: session.current is not None, "the second run to start", timeout=60)
        page.click("#stop")
        wait_or_explain(page, app, '.run:nth-of-type(2) .ending[data-reason="abort"]', "the abort", 120)
        assert page.inner_text(".run:nth-of-type(2) .ending") == "ended: abort · stopped from the page"


def wait_or_explain(page: Any, app: Any, selector: str, what: str, seconds: float) -> None:
    """Wait for `selector`; on a timeout, fail with what the page and the server were doing."""
    try:
        page.wait_for_selector(selector, state="attached", timeout=seconds * 1000)
        return
    except sync_api.TimeoutError:
        pass
    lines = [
        f"status={page.inner_text('#status')!r} notice={page.inner_text('#notice')!r}",
        f"send enabled={page.is_enabled('#send')}",
        "page log tail: " + page.inner_text("#log")[-600:],
    ]
    for session in list(app.state.sessions):
        for run in session.runs:
            lines.append(f"run {run.prompt!r}: {len(run.events)} events, last {run.events[-2:]}")
            if run.task is not None and not run.task.done():
                lines += [f"  {frame.f_code.co_filename}:{frame.f_lineno}" for frame in run.task.get_stack()]
    raise AssertionError(f"timed out waiting for {what}:\n" + "\n".join(lines))


def test_a_paused_run_shows_approve_and_deny_and_the_run_goes_on(browser: Any) -> None:
    turn = (
        '{"calls":[{"tool":"calculator","input":{"expression":"6 * 7"}},'
        '{"tool":"calculator","input":{"expression":"1 + 1"}}]}'
    )
    models: list[ScriptedModel] = []

    def factory() -> ScriptedModel:
        models.append(ScriptedModel([turn, '{"final":"42, and the other was refused."}']))
        return models[-1]

    app = create_app(factory, tools=TOOLS, model_name="scripted")
    with served(app) as url, page_at(browser, url) as page:
        page.check(".ask-first:has(input[data-tool=calculator]) input")
        ask(page, "Two sums, please.")
        page.wait_for_selector('.ending[data-reason="paused"]')
        assert page.locator(".approval").count() == 2
        assert page.locator(".call .badge").all_inner_texts() == ["waiting", "waiting"]
        assert page.locator(".approval .input").all_inner_texts() == [
            '{"expression":"6 * 7"}',
            '{"expression":"1 + 1"}',
        ]
        page.click('.approval[data-id="call_1"] button.approve')
        assert page.is_disabled('.approval[data-id="call_1"] button.deny')
        assert len(models[0].calls) == 1  # nothing sent until each call has its decision
        page.click('.approval[data-id="call_2"] button.deny')
        page.wait_for_selector(".msg.final")
        assert page.inner_text(".msg.resumed") == "resumed: call_1 approved, call_2 denied"
        assert page.locator(".result.ok").all_inner_texts() == ["42"]
        assert page.locator(".result.refused").all_inner_texts() == ["refused: denied"]
        assert page.inner_text(".msg.final .answer") == "42, and the other was refused."
        assert models[0].calls[1].messages[-1]["content"] == (
            "Results:\n[call_1 calculator] 42\n[call_2 calculator] refused: denied"
        )
        page.reload()  # the decided calls can no longer be decided
        page.wait_for_selector(".msg.final")
        assert page.locator(".approvals button:enabled").count() == 0
        assert page.inner_text(".msg.resumed") == "resumed: call_1 approved, call_2 denied"
