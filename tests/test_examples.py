"""Every program in examples/ runs and prints what it should.

Each program runs as `python examples/NAME.py` would run it (as `__main__`, in
this process, its stdout and stderr captured), in one of two ways:

- With the model's turns scripted: where a program loads the embedded model,
  `aerix.load` hands it a `ScriptedModel` that plays the turns listed here; a
  program that takes a server's URL (`server_engine.py`) gets the URL of a
  local OpenAI-compatible server that plays them. A program that needs neither
  (`testing_agent.py`) runs as it is.
- With the embedded model (`slow`): every program that calls `aerix.load`, as it
  is. Greedy decoding makes its output the same on every run; the tool calls and
  results are pinned whole, a model's free text by the fact it must hold.

What each prints is compared line for line with `EXPECTED` (`…` stands for any
text within a line, as in the docs' output blocks), so a new program fails
until its expected output is added. A program that defines `test_` functions
also passes under pytest. Files named `*_server.py` are servers that the
programs start, not programs of their own.
"""

from __future__ import annotations

import contextlib
import http.server
import json
import runpy
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import aerix
from _embedded import missing
from aerix.testing import ScriptedModel
from test_docs import output_matches

ROOT = Path(__file__).parent.parent
PROGRAMS = sorted(p for p in (ROOT / "examples").glob("*.py") if not p.name.endswith("_server.py"))
OPTIONAL = {"httpx", "mcp", "opentelemetry", "pydantic"}
"""Packages of extras that a program may need: where one is not installed, its test skips."""


@dataclass(frozen=True)
class Expected:
    """What a program prints."""

    turns: tuple[str, ...] = ()
    """The model's turns, scripted: played by a `ScriptedModel` that `aerix.load` returns, or
    by the local server for a program that takes a server's URL (`serve`)."""
    prints: str = ""
    """Its output with those turns."""
    real: str | None = None
    """Its output with the embedded model (for a program that calls `aerix.load`)."""
    serve: bool = False
    """The program takes a server's base URL and model name as its arguments."""


EXPECTED = {
    "tool_agent.py": Expected(
        turns=(
            '{"calls":[{"tool":"weather","input":{"city":"Lisbon"}}]}',
            '{"final":"Sunny, 21°C: no umbrella needed."}',
            '{"calls":[{"tool":"weather","input":{"city":"Porto"}}]}',
            '{"final":"Light rain in Porto, 16°C."}',
        ),
        prints="""
call: weather({'city': 'Lisbon'})
result: sunny, 21°C
final: Sunny, 21°C: no umbrella needed.
follow-up: Light rain in Porto, 16°C.
""",
        real="""
call: weather({'city': 'Lisbon'})
result: sunny, 21°C
final: …21°C…
follow-up: …16°C…
""",
    ),
    "typed_answer.py": Expected(
        turns=('{"final":{"city":"Lisbon","nights":3}}',),
        prints="""
Trip(city='Lisbon', nights=3)
Lisbon: 3 nights, 4 days
as JSON: {"city": "Lisbon", "nights": 3}
""",
        real="""
Trip(city='Lisbon', nights=3)
Lisbon: 3 nights, 4 days
as JSON: {"city": "Lisbon", "nights": 3}
""",
    ),
    "mcp_tools.py": Expected(
        turns=('{"calls":[{"tool":"stock","input":{"product":"lamp"}}]}', '{"final":"12 lamps."}'),
        prints="""
tool stock: How many of a product are in stock.
tool price: The price of a quantity of a product, in euros.
{'type': 'call', 'id': 'call_1', 'tool': 'stock', 'input': {'product': 'lamp'}}
{'type': 'result', 'id': 'call_1', 'tool': 'stock', 'text': '12 lamps in stock', 'error': False}
final: 12 lamps.
""",
        real="""
tool stock: How many of a product are in stock.
tool price: The price of a quantity of a product, in euros.
{'type': 'call', 'id': 'call_1', 'tool': 'stock', 'input': {'product': 'lamp'}}
{'type': 'result', 'id': 'call_1', 'tool': 'stock', 'text': '12 lamps in stock', 'error': False}
final: …12…
""",
    ),
    "tracing_console.py": Expected(
        turns=('{"calls":[{"tool":"multiply","input":{"a":17,"b":23}}]}', '{"final":"391"}'),
        prints="""
  chat ScriptedModel: gen_ai.usage.input_tokens=…, gen_ai.usage.output_tokens=…
  execute_tool multiply: gen_ai.tool.call.arguments={"a": 17, "b": 23}, gen_ai.tool.call.result=391
  chat ScriptedModel: gen_ai.usage.input_tokens=…, gen_ai.usage.output_tokens=…
invoke_agent calculator: aerix.end_reason=final
answer: 391
""",
        real="""
  chat SmolLM2…: gen_ai.usage.input_tokens=…, gen_ai.usage.output_tokens=…
  execute_tool multiply: gen_ai.tool.call.arguments={"a": 17, "b": 23}, gen_ai.tool.call.result=391
  chat SmolLM2…: gen_ai.usage.input_tokens=…, gen_ai.usage.output_tokens=…
invoke_agent calculator: aerix.end_reason=final
answer: …391…
""",
    ),
    "server_engine.py": Expected(
        turns=('{"calls":[{"tool":"weather","input":{"city":"Porto"}}]}', '{"final":"Yes: rain, 16°C."}'),
        serve=True,
        # the local server counts 100 prompt tokens a request so far, all but the new ones cached
        prints="""
calls: weather({'city': 'Porto'})
tokens: 300 in (100 from the server's cache), 20 out, in 2 generations
final: Yes: rain, 16°C.
""",
    ),
    "testing_agent.py": Expected(
        prints="""
passed: test_a_small_refund_runs
passed: test_a_large_refund_is_refused_and_the_model_is_told
passed: test_a_turn_cut_at_max_tokens_is_asked_again
""",
    ),
}


def _ids(paths: list[Path]) -> list[str]:
    return [p.name for p in paths]


def _expected(program: Path) -> Expected:
    assert program.name in EXPECTED, (
        f"examples/{program.name} has no expected output: add what it prints to EXPECTED in {__file__}"
    )
    return EXPECTED[program.name]


def _loads_the_model(program: Path) -> bool:
    return "aerix.load(" in program.read_text(encoding="utf-8")


def run(
    program: Path, args: list[str], monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> str:
    """Run a program as `python examples/NAME.py ARGS` would; what it printed (it prints nothing on stderr)."""
    monkeypatch.setattr(sys, "argv", [str(program), *args])
    try:
        runpy.run_path(str(program), run_name="__main__")
    except ModuleNotFoundError as e:
        if (e.name or "").split(".")[0] not in OPTIONAL:
            raise
        pytest.skip(f"examples/{program.name} needs {e.name}, which is not installed")
    out, err = capfd.readouterr()
    assert err == "", f"examples/{program.name} wrote on stderr:\n{err}"
    return out


@pytest.mark.parametrize("program", PROGRAMS, ids=_ids(PROGRAMS))
def test_an_example_prints_what_it_should_with_scripted_turns(
    program: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    expected = _expected(program)
    models: list[ScriptedModel] = []

    def load(name: str) -> ScriptedModel:
        assert name == "smollm2-instruct", f"examples/{program.name} loads {name!r}, not the embedded model"
        assert expected.turns and not expected.serve, f"no turns scripted for examples/{program.name}"
        models.append(ScriptedModel(expected.turns))
        return models[-1]

    monkeypatch.setattr(aerix, "load", load)
    with serving(expected.turns) if expected.serve else contextlib.nullcontext() as server:
        printed = run(program, [server.url, "test-model"] if server else [], monkeypatch, capfd)
    assert output_matches(printed, expected.prints), f"examples/{program.name} printed\n{printed}"
    if server:
        assert [r["model"] for r in server.requests] == ["test-model"] * len(expected.turns)
        assert all(r["response_format"]["type"] == "json_schema" for r in server.requests), server.requests
    elif expected.turns:
        assert len(models) == 1, f"examples/{program.name} loaded the model {len(models)} times"
        assert models[0].remaining == 0, f"examples/{program.name} left {models[0].remaining} turns unplayed"


REAL = [p for p in PROGRAMS if _loads_the_model(p)]


@pytest.mark.slow
@pytest.mark.parametrize("program", REAL, ids=_ids(REAL))
def test_an_example_prints_what_it_should_on_the_embedded_model(
    program: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    expected = _expected(program)
    assert expected.real is not None, f"add what examples/{program.name} prints on the embedded model"
    if (problem := missing()) is not None:
        pytest.skip(f"the embedded model cannot run here: {problem}")
    printed = run(program, [], monkeypatch, capfd)
    assert output_matches(printed, expected.real), f"examples/{program.name} printed\n{printed}"


TESTED = [p for p in PROGRAMS if "\ndef test_" in p.read_text(encoding="utf-8")]


@pytest.mark.parametrize("program", TESTED, ids=_ids(TESTED))
def test_an_example_of_tests_passes_under_pytest(program: Path) -> None:
    tests = program.read_text(encoding="utf-8").count("\ndef test_")
    done = subprocess.run(
        [sys.executable, "-m", "pytest", str(program), "-q", "-p", "no:cacheprovider"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0 and f"{tests} passed" in done.stdout, done.stdout + done.stderr


def test_the_examples_are_the_ones_the_docs_show() -> None:
    """docs/examples.md shows every program, and every program has its expected output."""
    page = (ROOT / "docs" / "examples.md").read_text(encoding="utf-8")
    for program in PROGRAMS:
        assert f'--8<-- "examples/{program.name}"' in page, f"docs/examples.md does not show {program.name}"
    assert len(PROGRAMS) >= 6 and set(EXPECTED) == {p.name for p in PROGRAMS}


@dataclass
class Server:
    """A local OpenAI-compatible server that plays scripted turns, one a request."""

    url: str
    requests: list[dict[str, Any]]


@contextlib.contextmanager
def serving(turns: tuple[str, ...]) -> Iterator[Server]:
    """A chat-completions server on 127.0.0.1 (a free port) that streams `turns` in order,
    with `usage` as a server with a prefix cache reports it."""
    requests: list[dict[str, Any]] = []
    left = list(turns)

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            requests.append(json.loads(self.rfile.read(int(self.headers["content-length"]))))
            if not left:
                self.send_error(500, "no scripted turn left")
                return
            n = len(requests)
            usage = {
                "prompt_tokens": 100 * n,
                "completion_tokens": 10,
                "prompt_tokens_details": {"cached_tokens": 100 * (n - 1)},
            }
            events: list[object] = [
                {"choices": [{"index": 0, "delta": {"content": left.pop(0)}}]},
                {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
                {"choices": [], "usage": usage},
            ]
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.end_headers()  # HTTP/1.0: the body ends when the connection closes
            for event in events:
                self.wfile.write(f"data: {json.dumps(event)}\n\n".encode())
            self.wfile.write(b"data: [DONE]\n\n")

        def log_message(self, format: str, *args: object) -> None:
            pass  # the test checks stderr: nothing there but what a program writes

    with http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler) as httpd:
        thread = threading.Thread(target=httpd.serve_forever, daemon=True)
        thread.start()
        try:
            yield Server(f"http://127.0.0.1:{httpd.server_address[1]}/v1", requests)
        finally:
            httpd.shutdown()
            thread.join()


def test_the_local_server_plays_its_turns_and_refuses_past_them() -> None:
    pytest.importorskip("httpx")
    import httpx

    with serving(('{"final":"a"}',)) as server:
        first = httpx.post(f"{server.url}/chat/completions", json={"model": "m", "messages": []})
        past = httpx.post(f"{server.url}/chat/completions", json={"model": "m", "messages": []})
    assert '"content": "{\\"final\\":\\"a\\"}"' in first.text and first.text.endswith("data: [DONE]\n\n")
    assert past.status_code == 500 and len(server.requests) == 2
