"""`aerix.otel.instrument`: the spans of a run under the GenAI conventions (SPEC 9.6).

Every test runs agents on `ScriptedModel` and reads the spans back from the
SDK's in-memory exporter.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import aclosing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk")

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

import aerix.otel
from aerix import AbortController, AerixError, Agent, tool
from aerix._observe import OBSERVERS, observe
from aerix.events import AgentEvent, FinalEvent
from aerix.model import ChatMessage, Delta, GenerateOptions
from aerix.testing import Cut, Fail, ScriptedModel, Stall

ADD = '{"calls":[{"tool":"add","input":{"a":2,"b":3}}]}'
FINAL = '{"final":"5"}'


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool
async def add_async(a: int, b: int) -> int:
    """Add two integers, awaited."""
    return a + b


@tool
def broken(x: int) -> str:
    """Always fails."""
    raise ValueError(f"no luck with {x}")


@pytest.fixture
def exporter() -> InMemorySpanExporter:
    return InMemorySpanExporter()


@pytest.fixture
def provider(exporter: InMemorySpanExporter) -> TracerProvider:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider


@pytest.fixture
def traced(provider: TracerProvider) -> Iterator[None]:
    """Instrumented with the test's provider, content not captured."""
    undo = aerix.otel.instrument(tracer_provider=provider)
    yield
    undo()
    assert not OBSERVERS


async def play(agent: Agent, prompt: str = "What is 2 + 3?", **kwargs: Any) -> list[AgentEvent]:
    return [ev async for ev in agent.run(prompt, **kwargs)]


def by_name(spans: tuple[ReadableSpan, ...] | list[ReadableSpan], name: str) -> list[ReadableSpan]:
    return [s for s in spans if s.name == name]


def only(spans: tuple[ReadableSpan, ...] | list[ReadableSpan], name: str) -> ReadableSpan:
    (span,) = by_name(spans, name)
    return span


def parent_id(span: ReadableSpan) -> int | None:
    return None if span.parent is None else span.parent.span_id


def span_id(span: ReadableSpan) -> int:
    assert span.context is not None
    return span.context.span_id


def trace_id(span: ReadableSpan) -> int:
    assert span.context is not None
    return span.context.trace_id


# -- a run with calls ------------------------------------------------------------


async def test_a_run_is_one_span_with_a_chat_child_per_generation_and_a_tool_child_per_call(
    traced: None, exporter: InMemorySpanExporter
) -> None:
    agent = Agent(model=ScriptedModel([ADD, FINAL]), tools=[add], name="calculator")
    events = await play(agent)
    spans = exporter.get_finished_spans()
    assert [s.name for s in spans] == [  # in the order they ended
        "chat ScriptedModel",
        "execute_tool add",
        "chat ScriptedModel",
        "invoke_agent calculator",
    ]
    run = only(spans, "invoke_agent calculator")
    assert run.kind == SpanKind.INTERNAL
    assert parent_id(run) is None
    assert dict(run.attributes or {}) == {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": "calculator",
        "gen_ai.provider.name": "_OTHER",
        "gen_ai.request.model": "ScriptedModel",
        "aerix.end_reason": "final",
        "aerix.retries": 0,
    }
    assert run.status.status_code == StatusCode.UNSET
    for child in spans[:-1]:
        assert parent_id(child) == span_id(run)
        assert trace_id(child) == trace_id(run)
        assert run.start_time is not None and child.start_time is not None
        assert run.end_time is not None and child.end_time is not None
        assert run.start_time <= child.start_time <= child.end_time <= run.end_time

    usages = [ev for ev in events if ev.type == "usage"]
    chats = by_name(spans, "chat ScriptedModel")
    for n, (chat, usage) in enumerate(zip(chats, usages, strict=True), start=1):
        assert chat.kind == SpanKind.CLIENT
        assert dict(chat.attributes or {}) == {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": "_OTHER",
            "gen_ai.request.model": "ScriptedModel",
            "gen_ai.request.max_tokens": agent.limits.max_tokens,
            "gen_ai.usage.input_tokens": usage.prompt_tokens,
            "gen_ai.usage.output_tokens": usage.completion_tokens,
            "gen_ai.usage.cache_read.input_tokens": usage.cached_tokens,
            "gen_ai.response.finish_reasons": ("stop",),
            "aerix.turn": n,
        }
    assert usages[1].cached_tokens > 0  # the second prompt reuses the first: the span says how much

    (call,) = [ev for ev in events if ev.type == "call"]
    tool_span = only(spans, "execute_tool add")
    assert tool_span.kind == SpanKind.INTERNAL
    assert dict(tool_span.attributes or {}) == {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "add",
        "gen_ai.tool.call.id": call.id,
        "gen_ai.tool.type": "function",
        "gen_ai.tool.description": "Add two integers.",
    }
    assert tool_span.status.status_code == StatusCode.UNSET
    # one after the other: the second generation starts after the tool's result
    assert chats[0].end_time is not None and tool_span.start_time is not None
    assert chats[0].end_time <= tool_span.start_time
    assert tool_span.end_time is not None and chats[1].start_time is not None
    assert tool_span.end_time <= chats[1].start_time


async def test_an_agent_without_a_name_makes_a_span_named_invoke_agent_without_the_name_attribute(
    traced: None, exporter: InMemorySpanExporter
) -> None:
    await play(Agent(model=ScriptedModel([FINAL])))
    run = only(exporter.get_finished_spans(), "invoke_agent")
    assert "gen_ai.agent.name" not in (run.attributes or {})
    assert (run.attributes or {})["gen_ai.operation.name"] == "invoke_agent"


class NamedModel(ScriptedModel):
    """A model with a `name`, as the engines have one."""

    name = "tiny-model"


async def test_the_chat_spans_are_named_after_the_models_name_attribute(
    traced: None, exporter: InMemorySpanExporter
) -> None:
    await play(Agent(model=NamedModel([FINAL])))
    spans = exporter.get_finished_spans()
    chat = only(spans, "chat tiny-model")
    assert (chat.attributes or {})["gen_ai.request.model"] == "tiny-model"
    assert (only(spans, "invoke_agent").attributes or {})["gen_ai.request.model"] == "tiny-model"


def test_the_engines_have_the_name_and_provider_the_spans_give() -> None:
    pytest.importorskip("httpx")
    from aerix.engines import OpenAICompatible
    from aerix.otel import _model_name, _provider, _server

    engine = OpenAICompatible(base_url="http://127.0.0.1:8123/v1", model="qwen3-4b")
    assert _model_name(engine) == "qwen3-4b"
    assert _provider(engine) == "openai"
    assert _server(engine) == {"server.address": "127.0.0.1", "server.port": 8123}
    assert _model_name(ScriptedModel()) == "ScriptedModel"
    assert _provider(ScriptedModel()) == "_OTHER"
    assert _server(ScriptedModel()) == {}


@dataclass(frozen=True)
class Stats:
    prompt_tokens: int
    completion_tokens: int
    forced_tokens: int
    prefill_s: float
    decode_s: float


class StatsModel(ScriptedModel):
    """Reports what each generation cost in `last_stats`, as `LlamaCpp` does."""

    def __init__(self, *args: Any, stale: bool = False, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.last_stats: Stats | None = None
        self._stale = stale

    async def chat(
        self, messages: list[ChatMessage], opts: GenerateOptions | None = None
    ) -> AsyncIterator[Delta]:
        async for delta in super().chat(messages, opts):
            if delta.done and delta.usage is not None:
                shift = 1 if self._stale else 0  # another generation's counts
                self.last_stats = Stats(
                    prompt_tokens=delta.usage.prompt_tokens + shift,
                    completion_tokens=delta.usage.completion_tokens,
                    forced_tokens=7 + len(self.calls),
                    prefill_s=0.25,
                    decode_s=0.5,
                )
            yield delta


async def test_the_engines_forced_tokens_and_prefill_and_decode_seconds_go_on_the_chat_span(
    traced: None, exporter: InMemorySpanExporter
) -> None:
    await play(Agent(model=StatsModel([ADD, FINAL]), tools=[add]))
    chats = by_name(exporter.get_finished_spans(), "chat StatsModel")
    assert [(c.attributes or {})["aerix.usage.forced_tokens"] for c in chats] == [8, 9]
    for chat in chats:
        assert (chat.attributes or {})["aerix.prefill.duration"] == 0.25
        assert (chat.attributes or {})["aerix.decode.duration"] == 0.5


async def test_stats_of_another_generation_are_left_out(traced: None, exporter: InMemorySpanExporter) -> None:
    await play(Agent(model=StatsModel([FINAL], stale=True)))
    chat = only(exporter.get_finished_spans(), "chat StatsModel")
    assert not {"aerix.usage.forced_tokens", "aerix.prefill.duration"} & set(chat.attributes or {})


# -- errors ---------------------------------------------------------------------


async def test_a_run_that_ends_with_error_has_an_error_status_with_the_message(
    traced: None, exporter: InMemorySpanExporter
) -> None:
    events = await play(Agent(model=ScriptedModel([Fail(text='{"ca', error="the engine exploded")])))
    assert events[-1].type == "end" and events[-1].reason == "error"
    spans = exporter.get_finished_spans()
    run = only(spans, "invoke_agent")
    assert run.status.status_code == StatusCode.ERROR
    assert run.status.description == events[-1].message
    assert "the engine exploded" in (run.status.description or "")
    assert (run.attributes or {})["aerix.end_reason"] == "error"
    assert (run.attributes or {})["error.type"] == "_OTHER"
    chat = only(spans, "chat ScriptedModel")  # the generation that failed
    assert chat.status.status_code == StatusCode.ERROR
    assert (chat.attributes or {})["error.type"] == "_OTHER"  # the conventions ask it of an error
    assert "gen_ai.usage.input_tokens" not in (chat.attributes or {})


async def test_an_engine_that_fails_before_its_first_delta_still_has_its_generation_span(
    traced: None, exporter: InMemorySpanExporter
) -> None:
    await play(Agent(model=ScriptedModel([Fail(error="no connection")])))
    spans = exporter.get_finished_spans()
    assert [s.name for s in spans] == ["chat ScriptedModel", "invoke_agent"]
    assert all(s.status.status_code == StatusCode.ERROR for s in spans)


async def test_a_tool_error_and_a_refusal_give_their_spans_an_error_status(
    traced: None, exporter: InMemorySpanExporter
) -> None:
    model = ScriptedModel(['{"calls":[{"tool":"broken","input":{"x":4}}]}', ADD, FINAL])
    deny = {"before_call": lambda call: {"deny": "add is off today"} if call.tool == "add" else None}
    events = await play(Agent(model=model, tools=[broken, add], hooks=deny))
    results = {ev.tool: ev for ev in events if ev.type == "result"}
    spans = exporter.get_finished_spans()
    failed = only(spans, "execute_tool broken")
    assert results["broken"].error and "no luck with 4" in results["broken"].text
    assert failed.status.status_code == StatusCode.ERROR
    assert failed.status.description == "tool_error"  # the result's text only with content on
    assert (failed.attributes or {})["error.type"] == "tool_error"
    refused = only(spans, "execute_tool add")
    assert refused.status.status_code == StatusCode.ERROR
    assert refused.status.description == "refused"
    assert (refused.attributes or {})["error.type"] == "refused"
    # a tool error is no run error
    assert only(spans, "invoke_agent").status.status_code == StatusCode.UNSET


async def test_a_hook_that_raises_during_a_call_ends_its_span_with_the_runs_error(
    traced: None, exporter: InMemorySpanExporter
) -> None:
    def after_call(call: Any, result: str) -> None:
        raise RuntimeError("hook broke")

    events = await play(Agent(model=ScriptedModel([ADD]), tools=[add], hooks={"after_call": after_call}))
    assert events[-1].type == "end" and events[-1].reason == "error"
    tool_span = only(exporter.get_finished_spans(), "execute_tool add")
    assert tool_span.status.status_code == StatusCode.ERROR
    assert "hook broke" in (tool_span.status.description or "")
    assert (tool_span.attributes or {})["error.type"] == "_OTHER"


# -- retries --------------------------------------------------------------------


async def test_a_retry_is_counted_and_an_event_on_the_run_span(
    traced: None, exporter: InMemorySpanExporter
) -> None:
    events = await play(Agent(model=ScriptedModel(["not json", FINAL])))
    (retry,) = [ev for ev in events if ev.type == "retry"]
    spans = exporter.get_finished_spans()
    run = only(spans, "invoke_agent")
    assert (run.attributes or {})["aerix.retries"] == 1
    (event,) = run.events
    assert event.name == "aerix.retry"
    assert retry.reason.startswith("not JSON")
    # the reason may quote the model's text: only its kind, without content capture
    assert dict(event.attributes or {}) == {"aerix.turn": 1, "aerix.retry.reason": "bad turn"}
    chats = by_name(spans, "chat ScriptedModel")
    assert [(c.attributes or {})["gen_ai.response.finish_reasons"] for c in chats] == [("stop",), ("stop",)]
    assert [(c.attributes or {})["aerix.turn"] for c in chats] == [1, 2]


async def test_a_cut_turn_finishes_with_length(traced: None, exporter: InMemorySpanExporter) -> None:
    await play(Agent(model=ScriptedModel([Cut(), FINAL])))
    chats = by_name(exporter.get_finished_spans(), "chat ScriptedModel")
    assert [(c.attributes or {})["gen_ai.response.finish_reasons"] for c in chats] == [("length",), ("stop",)]


async def test_a_turn_the_model_stopped_on_max_tokens_finishes_with_length_even_if_valid(
    traced: None, exporter: InMemorySpanExporter
) -> None:
    """The model's own finish reason is the span's: a final whose JSON closed on the last token."""
    events = await play(Agent(model=ScriptedModel([Cut(text='{"final":"4"}')])))
    assert events[-1] == FinalEvent(text="4")
    chat = only(exporter.get_finished_spans(), "chat ScriptedModel")
    assert (chat.attributes or {})["gen_ai.response.finish_reasons"] == ("length",)


@pytest.mark.parametrize(("limits", "reason"), [({"turns": 1}, "turns"), ({"retries": 0}, "retries")])
async def test_a_cut_turn_that_ends_the_run_finishes_with_length(
    traced: None, exporter: InMemorySpanExporter, limits: dict[str, int], reason: str
) -> None:
    events = await play(Agent(model=ScriptedModel([Cut()]), limits=limits))
    assert events[-1].type == "end" and events[-1].reason == reason
    spans = exporter.get_finished_spans()
    chat = only(spans, "chat ScriptedModel")
    assert (chat.attributes or {})["gen_ai.response.finish_reasons"] == ("length",)
    run = only(spans, "invoke_agent")
    assert (run.attributes or {})["aerix.end_reason"] == reason
    assert run.status.status_code == StatusCode.UNSET  # a limit is no error


async def test_a_bad_turn_that_ends_the_run_finishes_with_stop(
    traced: None, exporter: InMemorySpanExporter
) -> None:
    await play(Agent(model=ScriptedModel(["not json"]), limits={"turns": 1}))
    chat = only(exporter.get_finished_spans(), "chat ScriptedModel")
    assert (chat.attributes or {})["gen_ai.response.finish_reasons"] == ("stop",)


async def test_a_final_that_on_final_continues_starts_the_next_generations_span_after_it(
    traced: None, exporter: InMemorySpanExporter
) -> None:
    asked: list[str] = []

    def on_final(text: str) -> dict[str, str] | None:
        asked.append(text)
        return {"continue": "Say it again."} if len(asked) == 1 else None

    agent = Agent(model=ScriptedModel(['{"final":"4"}', FINAL]), hooks={"on_final": on_final})
    await play(agent)
    spans = exporter.get_finished_spans()
    chats = by_name(spans, "chat ScriptedModel")
    assert [(c.attributes or {})["aerix.turn"] for c in chats] == [1, 2]
    assert [(c.attributes or {})["gen_ai.response.finish_reasons"] for c in chats] == [("stop",), ("stop",)]
    assert chats[0].end_time is not None and chats[1].start_time is not None
    assert chats[0].end_time <= chats[1].start_time
    assert all(parent_id(c) == span_id(only(spans, "invoke_agent")) for c in chats)


# -- endings that are not the run's own ---------------------------------------------


async def test_an_abort_ends_every_span(traced: None, exporter: InMemorySpanExporter) -> None:
    controller = AbortController()
    agent = Agent(model=ScriptedModel([Stall(text='{"fin')]))
    events: list[AgentEvent] = []
    async for ev in agent.run("Hang", signal=controller.signal):
        events.append(ev)
        if ev.type == "text":
            controller.abort("the user stopped it")
    assert events[-1].type == "end" and events[-1].reason == "abort"
    spans = exporter.get_finished_spans()
    assert [s.name for s in spans] == ["chat ScriptedModel", "invoke_agent"]
    run = spans[-1]
    assert (run.attributes or {})["aerix.end_reason"] == "abort"
    assert run.status.status_code == StatusCode.UNSET


@pytest.mark.parametrize("where", ["tool", "after_call", "consumer"])
async def test_an_abort_after_a_turns_last_result_makes_no_span_for_a_generation_that_never_came(
    traced: None, exporter: InMemorySpanExporter, where: str
) -> None:
    """One `chat` span per generation: an abort by the turn's tool, its `after_call` hook or
    the consumer at its `result` event ends the run before another generation starts."""
    controller = AbortController()

    @tool
    def stop() -> str:
        """Stops the run."""
        if where == "tool":
            controller.abort("stopped")
        return "ok"

    hooks = {"after_call": lambda call, result: controller.abort("stopped")} if where == "after_call" else {}
    model = ScriptedModel(['{"calls":[{"tool":"stop","input":{}}]}', FINAL])
    agent = Agent(model=model, tools=[stop], hooks=hooks)
    async for ev in agent.run("Stop", signal=controller.signal):
        if ev.type == "result" and where == "consumer":
            controller.abort("stopped")
    assert ev.type == "end" and ev.reason == "abort" and len(model.calls) == 1
    spans = exporter.get_finished_spans()
    assert sorted(s.name for s in spans) == ["chat ScriptedModel", "execute_tool stop", "invoke_agent"]


async def test_a_consumer_that_stops_early_still_ends_every_span(
    traced: None, exporter: InMemorySpanExporter
) -> None:
    agent = Agent(model=ScriptedModel([ADD, FINAL]), tools=[add])
    async with aclosing(agent.run("What is 2 + 3?")) as run:
        async for ev in run:
            if ev.type == "call":  # its span is open
                break
    assert not agent.busy  # the run itself was closed too
    spans = exporter.get_finished_spans()
    assert sorted(s.name for s in spans) == ["chat ScriptedModel", "execute_tool add", "invoke_agent"]
    assert "aerix.end_reason" not in (only(spans, "invoke_agent").attributes or {})


async def test_a_consumer_that_stops_right_after_a_usage_event_ends_that_generation(
    traced: None, exporter: InMemorySpanExporter
) -> None:
    agent = Agent(model=ScriptedModel([ADD, FINAL]), tools=[add])
    async with aclosing(agent.run("What is 2 + 3?")) as run:
        async for ev in run:
            if ev.type == "usage":
                break
    chat = only(exporter.get_finished_spans(), "chat ScriptedModel")
    assert (chat.attributes or {})["gen_ai.usage.output_tokens"] > 0
    assert (chat.attributes or {})["gen_ai.response.finish_reasons"] == ("stop",)  # as its done delta said


async def test_a_consumer_that_stops_after_a_usage_event_of_a_model_that_said_no_finish_leaves_it_out(
    traced: None, exporter: InMemorySpanExporter
) -> None:
    class Silent:
        """Says no `finish` on its done delta."""

        async def chat(
            self, messages: list[ChatMessage], opts: GenerateOptions | None = None
        ) -> AsyncIterator[Delta]:
            yield Delta(text=FINAL)
            yield Delta(done=True)

    async with aclosing(Agent(model=Silent()).run("What is 2 + 3?")) as run:
        async for ev in run:
            if ev.type == "usage":
                break
    chat = only(exporter.get_finished_spans(), "chat Silent")
    assert "gen_ai.response.finish_reasons" not in (chat.attributes or {})  # how it finished: unknown


@pytest.mark.parametrize("second", [Fail(), Stall()], ids=["fails", "aborted"])
async def test_a_generation_after_a_continued_final_that_ends_before_its_first_text_has_its_span(
    traced: None, exporter: InMemorySpanExporter, second: Fail | Stall
) -> None:
    controller = AbortController()
    model = ScriptedModel(['{"final":"4"}', second])

    def on_final(text: str) -> dict[str, str]:
        if isinstance(second, Stall):
            asyncio.get_running_loop().call_later(0.05, controller.abort)
        return {"continue": "Say it again."}

    events = await play(Agent(model=model, hooks={"on_final": on_final}), signal=controller.signal)
    assert len(model.calls) == 2 and events[-1].type == "end"
    spans = exporter.get_finished_spans()
    chats = by_name(spans, "chat ScriptedModel")
    assert [(c.attributes or {})["aerix.turn"] for c in chats] == [1, 2]  # one span per generation
    assert all(parent_id(c) == span_id(only(spans, "invoke_agent")) for c in chats)
    if isinstance(second, Fail):
        assert events[-1].reason == "error"
        assert chats[1].status.status_code == StatusCode.ERROR
        assert chats[1].status.description == "scripted engine failure"
    else:
        assert events[-1].reason == "abort" and chats[1].status.status_code == StatusCode.UNSET


async def test_a_run_refused_as_busy_makes_no_span(traced: None, exporter: InMemorySpanExporter) -> None:
    agent = Agent(model=ScriptedModel([FINAL, FINAL]))
    first, second = agent.run("one"), agent.run("two")  # both made while the agent is free
    async with aclosing(first), aclosing(second):
        assert (await first.__anext__()).type == "text"
        with pytest.raises(AerixError) as info:
            await second.__anext__()
        assert info.value.kind == "busy"
        assert [ev.type async for ev in first][-1] == "final"
    spans = exporter.get_finished_spans()
    assert [s.name for s in spans] == ["chat ScriptedModel", "invoke_agent"]  # the first run's alone
    assert only(spans, "invoke_agent").status.status_code == StatusCode.UNSET


async def test_a_cancelled_consumer_still_ends_every_span(
    traced: None, exporter: InMemorySpanExporter
) -> None:
    agent = Agent(model=ScriptedModel([Stall(text='{"fin')]))
    streaming = asyncio.Event()

    async def consume() -> None:
        async for ev in agent.run("Hang"):
            if ev.type == "text":
                streaming.set()

    task = asyncio.create_task(consume())
    await streaming.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert not agent.busy
    assert sorted(s.name for s in exporter.get_finished_spans()) == ["chat ScriptedModel", "invoke_agent"]


# -- content --------------------------------------------------------------------


async def test_capture_content_puts_each_calls_arguments_and_result_on_its_span(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    undo = aerix.otel.instrument(tracer_provider=provider, capture_content=True)
    try:
        model = ScriptedModel([ADD, '{"calls":[{"tool":"broken","input":{"x":1}}]}', FINAL])
        events = await play(Agent(model=model, tools=[add, broken]))
    finally:
        undo()
    results = {ev.tool: ev.text for ev in events if ev.type == "result"}
    spans = exporter.get_finished_spans()
    added = only(spans, "execute_tool add").attributes or {}
    assert json.loads(str(added["gen_ai.tool.call.arguments"])) == {"a": 2, "b": 3}
    assert added["gen_ai.tool.call.result"] == "5" == results["add"]
    failed = only(spans, "execute_tool broken").attributes or {}
    assert json.loads(str(failed["gen_ai.tool.call.arguments"])) == {"x": 1}
    assert failed["gen_ai.tool.call.result"] == results["broken"]
    assert str(failed["gen_ai.tool.call.result"]).startswith("error:")


async def test_with_capture_content_statuses_and_retry_reasons_say_the_text(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    undo = aerix.otel.instrument(tracer_provider=provider, capture_content=True)
    try:
        model = ScriptedModel(["not json", Cut(), '{"calls":[{"tool":"broken","input":{"x":4}}]}', FINAL])
        events = await play(Agent(model=model, tools=[broken]))
    finally:
        undo()
    reasons = [ev.reason for ev in events if ev.type == "retry"]
    (result,) = [ev for ev in events if ev.type == "result"]
    spans = exporter.get_finished_spans()
    assert only(spans, "execute_tool broken").status.description == result.text
    run_events = only(spans, "invoke_agent").events
    assert [(e.attributes or {})["aerix.retry.reason"] for e in run_events] == reasons


async def test_without_capture_content_no_span_quotes_an_input_a_result_or_the_models_text(
    traced: None, exporter: InMemorySpanExporter
) -> None:
    """Error results quote inputs and earlier results, and retry reasons the model's answer:
    none of it reaches a span's status or events unless content capture is on."""
    secret = tool(
        name="lookup",
        description="Look a person up.",
        input={"person": {"type": "string"}},
        run=lambda i: f"record of {i['person']}: SECRET-1",
    )
    call = '{"calls":[{"tool":"lookup","input":{"person":"Alice"}}]}'
    bad_input = '{"calls":[{"tool":"lookup","input":{"person":["SECRET-2"]}}]}'
    model = ScriptedModel([bad_input, call, call, '{"final":"SECRET-3"}', Cut(), '{"final":3}'])
    agent = Agent(model=model, tools=[secret], output=int, constrain=False, limits={"repeats": 0, "turns": 8})
    events = await play(agent)
    assert events[-1].type == "final"
    texts = [ev.text for ev in events if ev.type == "result"] + [
        ev.reason for ev in events if ev.type == "retry"
    ]
    assert all(any(f"SECRET-{n}" in t for t in texts) for n in (1, 2, 3))  # the events do say them
    for span in exporter.get_finished_spans():
        said = [span.status.description or "", json.dumps(dict(span.attributes or {}))]
        said += [json.dumps(dict(e.attributes or {})) for e in span.events]
        assert not any("SECRET" in text for text in said), span.name
    reasons = [
        (e.attributes or {})["aerix.retry.reason"]
        for e in only(exporter.get_finished_spans(), "invoke_agent").events
    ]
    assert reasons == ["bad turn", "cut"]


async def test_a_model_whose_name_property_raises_is_traced_by_its_class_name(
    traced: None, exporter: InMemorySpanExporter
) -> None:
    class Nameless(ScriptedModel):
        @property
        def name(self) -> str:
            raise RuntimeError("no name")

    events = await play(Agent(model=Nameless([FINAL])))
    assert events[-1].type == "final"
    assert only(exporter.get_finished_spans(), "chat Nameless")


async def test_without_capture_content_no_span_carries_an_input_or_a_result(
    traced: None, exporter: InMemorySpanExporter
) -> None:
    await play(Agent(model=ScriptedModel([ADD, FINAL]), tools=[add]))
    spans = exporter.get_finished_spans()
    assert len(spans) == 4
    for span in spans:
        text = json.dumps(dict(span.attributes or {}))
        assert "gen_ai.tool.call.arguments" not in text and "gen_ai.tool.call.result" not in text


# -- instrumenting ----------------------------------------------------------------


async def test_undoing_stops_the_spans_and_leaves_the_runs_events_untouched(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    undo = aerix.otel.instrument(tracer_provider=provider)
    await play(Agent(model=ScriptedModel([FINAL])))
    assert len(exporter.get_finished_spans()) == 2
    undo()
    undo()  # a second time does nothing
    assert not OBSERVERS
    exporter.clear()
    agent = Agent(model=ScriptedModel([FINAL]))
    events = await play(agent)
    assert [ev.type for ev in events] == ["text", "usage", "final"]
    assert exporter.get_finished_spans() == ()


async def test_not_instrumented_observe_hands_back_the_runs_own_iterator() -> None:
    assert not OBSERVERS
    agent = Agent(model=ScriptedModel([FINAL]))

    async def events() -> AsyncIterator[AgentEvent]:
        async for ev in agent.run("Hi"):
            yield ev

    run = events()
    assert observe(agent, run, None) is run  # type: ignore[arg-type]
    await run.aclose()


async def test_instrumented_runs_yield_the_same_events(provider: TracerProvider) -> None:
    def agent() -> Agent:
        return Agent(model=ScriptedModel(["not json", Cut(), ADD, FINAL]), tools=[add])

    plain = [ev.to_dict() for ev in await play(agent())]
    undo = aerix.otel.instrument(tracer_provider=provider, capture_content=True)
    try:
        traced_events = [ev.to_dict() for ev in await play(agent())]
    finally:
        undo()
    assert traced_events == plain
    assert [ev["type"] for ev in plain].count("retry") == 2


def test_bad_options_are_refused_naming_the_option() -> None:
    with pytest.raises(AerixError, match="tracer_provider must be an OpenTelemetry TracerProvider") as info:
        aerix.otel.instrument(tracer_provider="console")  # type: ignore[arg-type]
    assert info.value.kind == "options"
    with pytest.raises(AerixError, match="capture_content must be True or False, got 'yes'"):
        aerix.otel.instrument(capture_content="yes")  # type: ignore[arg-type]
    assert not OBSERVERS


def test_the_global_tracer_provider_is_used_by_default() -> None:
    # set the global provider in a fresh interpreter: it can be set once per process
    code = (
        "import asyncio\n"
        "from opentelemetry import trace\n"
        "from opentelemetry.sdk.trace import TracerProvider\n"
        "from opentelemetry.sdk.trace.export import SimpleSpanProcessor\n"
        "from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter\n"
        "import aerix.otel\n"
        "from aerix import Agent\n"
        "from aerix.testing import ScriptedModel\n"
        "undo = aerix.otel.instrument()\n"  # before the provider is set: looked up when a span starts
        "exporter = InMemorySpanExporter()\n"
        "provider = TracerProvider()\n"
        "provider.add_span_processor(SimpleSpanProcessor(exporter))\n"
        "trace.set_tracer_provider(provider)\n"
        "agent = Agent(model=ScriptedModel(['{\"final\":\"hi\"}']), name='greeter')\n"
        "asyncio.run(agent.ask('Hello'))\n"
        "print([s.name for s in exporter.get_finished_spans()])\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "['chat ScriptedModel', 'invoke_agent greeter']"


def test_without_opentelemetry_importing_aerix_otel_names_the_extra() -> None:
    code = (
        "import sys\n"
        "sys.modules['opentelemetry'] = None\n"  # as if not installed
        "try:\n"
        "    import aerix.otel\n"
        "except ImportError as exc:\n"
        "    print(exc)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "aerix.otel needs OpenTelemetry: pip install 'aerix[otel]'"


# -- context: parents and children ------------------------------------------------------


async def test_a_run_inside_a_span_of_yours_is_its_child(
    traced: None, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    tracer = provider.get_tracer("app")
    with tracer.start_as_current_span("handle request") as outer:
        await play(Agent(model=ScriptedModel([FINAL])))
    run = only(exporter.get_finished_spans(), "invoke_agent")
    assert parent_id(run) == outer.get_span_context().span_id
    assert trace_id(run) == outer.get_span_context().trace_id


SEEN: list[int] = []
"""The current span's id, as each tool saw it."""


@tool
def add_seen(a: int, b: int) -> int:
    """Add two integers (on a worker thread)."""
    SEEN.append(trace.get_current_span().get_span_context().span_id)
    return a + b


@tool
async def add_seen_async(a: int, b: int) -> int:
    """Add two integers (on the loop)."""
    SEEN.append(trace.get_current_span().get_span_context().span_id)
    return a + b


@pytest.mark.parametrize("adder", [add_seen, add_seen_async], ids=["def", "async def"])
async def test_a_tools_own_spans_are_children_of_its_execute_tool_span(
    traced: None, exporter: InMemorySpanExporter, adder: Any
) -> None:
    SEEN.clear()
    call = ADD.replace('"add"', f'"{adder.name}"')
    await play(Agent(model=ScriptedModel([call, call, FINAL]), tools=[adder]))
    tool_spans = by_name(exporter.get_finished_spans(), f"execute_tool {adder.name}")
    assert len(tool_spans) == 2
    assert [span_id(s) for s in tool_spans] == SEEN


class WatchingModel(ScriptedModel):
    """Notes the current span when each generation starts."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.current: list[int] = []

    async def chat(
        self, messages: list[ChatMessage], opts: GenerateOptions | None = None
    ) -> AsyncIterator[Delta]:
        self.current.append(trace.get_current_span().get_span_context().span_id)
        async for delta in super().chat(messages, opts):
            yield delta


async def test_a_generations_span_is_current_while_the_engine_works(
    traced: None, exporter: InMemorySpanExporter
) -> None:
    model = WatchingModel(["not json", ADD, FINAL])
    await play(Agent(model=model, tools=[add]))
    chats = by_name(exporter.get_finished_spans(), "chat WatchingModel")
    assert model.current == [span_id(c) for c in chats]


TWO_CALLS = '{"calls":[{"tool":"add","input":{"a":1,"b":2}},{"tool":"add_async","input":{"a":3,"b":4}}]}'


@pytest.mark.parametrize("concurrent", [False, True], ids=["in turn", "at once"])
async def test_a_turn_with_two_calls_has_a_span_per_call_and_the_next_generation_after_both(
    traced: None, exporter: InMemorySpanExporter, concurrent: bool
) -> None:
    agent = Agent(
        model=ScriptedModel([TWO_CALLS, FINAL]),
        tools=[add, add_async],
        calls_per_turn=2,
        concurrent_calls=concurrent,
    )
    events = await play(agent)
    calls = [ev.id for ev in events if ev.type == "call"]
    spans = exporter.get_finished_spans()
    run = only(spans, "invoke_agent")
    tools = [only(spans, "execute_tool add"), only(spans, "execute_tool add_async")]
    assert [(t.attributes or {})["gen_ai.tool.call.id"] for t in tools] == calls
    assert all(parent_id(t) == span_id(run) for t in tools)
    first, second = by_name(spans, "chat ScriptedModel")
    assert first.end_time is not None and second.start_time is not None
    for t in tools:
        assert t.start_time is not None and t.end_time is not None
        assert first.end_time <= t.start_time and t.end_time <= second.start_time
    if concurrent:  # every call event comes before any tool starts: the spans overlap
        assert tools[1].start_time is not None and tools[0].end_time is not None
        assert tools[1].start_time <= tools[0].end_time


# -- many runs ----------------------------------------------------------------------


async def test_two_agents_running_at_once_each_make_their_own_trace(
    traced: None, exporter: InMemorySpanExporter
) -> None:
    alpha = Agent(model=ScriptedModel([ADD, FINAL], chunk_size=3), tools=[add], name="alpha")
    beta = Agent(model=ScriptedModel([ADD, ADD, FINAL], chunk_size=2), tools=[add], name="beta")
    await asyncio.gather(play(alpha), play(beta))
    spans = exporter.get_finished_spans()
    runs = {s.name: s for s in spans if s.name.startswith("invoke_agent")}
    assert set(runs) == {"invoke_agent alpha", "invoke_agent beta"}
    assert trace_id(runs["invoke_agent alpha"]) != trace_id(runs["invoke_agent beta"])
    for run, chats, tools in ((runs["invoke_agent alpha"], 2, 1), (runs["invoke_agent beta"], 3, 2)):
        children = [s for s in spans if trace_id(s) == trace_id(run) and s is not run]
        assert all(parent_id(s) == span_id(run) for s in children)
        assert len(by_name(children, "chat ScriptedModel")) == chats
        assert len(by_name(children, "execute_tool add")) == tools


async def test_each_run_of_one_agent_is_its_own_trace(traced: None, exporter: InMemorySpanExporter) -> None:
    agent = Agent(model=ScriptedModel([FINAL, FINAL]))
    await agent.ask("One")
    await agent.ask("Two")
    runs = by_name(exporter.get_finished_spans(), "invoke_agent")
    assert len(runs) == 2 and trace_id(runs[0]) != trace_id(runs[1])


def test_run_sync_and_ask_sync_are_traced_too(traced: None, exporter: InMemorySpanExporter) -> None:
    agent = Agent(model=ScriptedModel([ADD, FINAL, FINAL]), tools=[add], name="sync")
    list(agent.run_sync("What is 2 + 3?"))
    agent.ask_sync("And again?")
    names = [s.name for s in exporter.get_finished_spans()]
    assert names.count("invoke_agent sync") == 2
    assert names.count("chat ScriptedModel") == 3
    assert names.count("execute_tool add") == 1


async def test_ask_sync_inside_a_running_loop_keeps_the_callers_span_as_parent(
    traced: None, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    agent = Agent(model=ScriptedModel([FINAL]))
    with provider.get_tracer("app").start_as_current_span("notebook cell") as cell:
        agent.ask_sync("Hi")  # driven on a worker thread: a loop runs here
    run = only(exporter.get_finished_spans(), "invoke_agent")
    assert parent_id(run) == cell.get_span_context().span_id


# -- a real engine --------------------------------------------------------------------


def _write_tiny_gguf(path: Path) -> Path:
    """The engine tests' tiny GGUF (noise weights, a real tokenizer: loads in milliseconds)."""
    spec = importlib.util.spec_from_file_location(
        "_engine_fixtures", Path(__file__).parent / "engines" / "conftest.py"
    )
    assert spec is not None and spec.loader is not None
    fixtures = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fixtures)
    written: Path = fixtures.write_tiny_gguf(path)
    return written


async def test_llamacpp_chat_spans_carry_its_name_and_what_each_generation_cost(
    traced: None, exporter: InMemorySpanExporter, tmp_path: Path
) -> None:
    pytest.importorskip("llama_cpp", reason="needs aerix[llama]")
    pytest.importorskip("gguf", reason="writes a GGUF with the gguf package")
    from aerix.engines import LlamaCpp

    engine = LlamaCpp(_write_tiny_gguf(tmp_path / "tiny-otel.gguf"), n_ctx=2048, n_threads=1)
    try:
        events = await play(Agent(model=engine, limits={"turns": 1, "max_tokens": 24}), "Hello")
    finally:
        engine.close()
    usages = [ev for ev in events if ev.type == "usage"]
    chats = by_name(exporter.get_finished_spans(), "chat tiny-otel")
    assert len(chats) == len(usages) == 1
    for chat, usage in zip(chats, usages, strict=True):
        attrs = chat.attributes or {}
        assert attrs["gen_ai.provider.name"] == "llama_cpp"
        assert attrs["gen_ai.request.model"] == "tiny-otel"
        assert attrs["gen_ai.usage.output_tokens"] == usage.completion_tokens
        forced = attrs["aerix.usage.forced_tokens"]
        assert isinstance(forced, int) and 0 <= forced <= usage.completion_tokens
        for name in ("aerix.prefill.duration", "aerix.decode.duration"):
            seconds = attrs[name]
            assert isinstance(seconds, float) and seconds >= 0


@pytest.mark.parametrize("at_once", [False, True])
async def test_an_agent_tools_run_is_a_child_of_its_calls_execute_tool_span(
    traced: None, exporter: InMemorySpanExporter, at_once: bool
) -> None:
    def inner(word: str) -> Agent:
        return Agent(model=ScriptedModel([json.dumps({"final": word})]), name=word)

    calls = [{"tool": name, "input": {"prompt": "hi"}} for name in ("alpha", "beta")]
    script = [json.dumps({"calls": calls}), FINAL]
    tools = [inner("alpha").as_tool(), inner("beta").as_tool()]
    boss = Agent(
        model=ScriptedModel(script), tools=tools, calls_per_turn=2, concurrent_calls=at_once, name="boss"
    )
    await play(boss)
    spans = exporter.get_finished_spans()
    top = only(spans, "invoke_agent boss")
    for name in ("alpha", "beta"):
        call = only(spans, f"execute_tool {name}")
        run = only(spans, f"invoke_agent {name}")
        assert parent_id(call) == span_id(top)
        assert parent_id(run) == span_id(call)  # its own call's span, even among calls at once
        assert trace_id(run) == trace_id(top)
    inner_chats = [s for s in by_name(spans, "chat ScriptedModel") if parent_id(s) != span_id(top)]
    runs = {span_id(only(spans, f"invoke_agent {name}")) for name in ("alpha", "beta")}
    assert sorted(parent_id(s) for s in inner_chats) == sorted(runs)  # one generation under each


async def test_a_trim_is_an_event_on_the_run_span(traced: None, exporter: InMemorySpanExporter) -> None:
    model = ScriptedModel(['{"final":"first"}', '{"final":"second"}'], context_window=150)
    agent = Agent(model=model, limits={"max_tokens": 32}, name="trimmer")
    await play(agent, "x" * 160)
    exporter.clear()
    await play(agent, "y" * 160)  # with the first exchange, the prompt would not fit
    run = only(exporter.get_finished_spans(), "invoke_agent trimmer")
    (trim,) = [e for e in run.events if e.name == "aerix.trim"]
    assert dict(trim.attributes or {}) == {"aerix.trim.dropped": 2, "aerix.trim.kept": 1}


async def test_a_run_a_hook_of_an_agent_tool_starts_is_not_put_under_a_call_of_the_same_id(
    traced: None, exporter: InMemorySpanExporter
) -> None:
    @tool
    async def slow(x: str) -> str:
        """Slow."""
        await asyncio.sleep(0.05)
        return "one"

    async def audit(call: Any, text: str) -> None:
        if call.id == "call_1":  # the inner agent's first call: an auditor agent looks at it
            await Agent(model=ScriptedModel(['{"final":"ok"}']), name="auditor").ask("audit")

    both = [{"tool": "slow", "input": {"x": "a"}}, {"tool": "add", "input": {"a": 1, "b": 2}}]
    inner = Agent(
        model=ScriptedModel([json.dumps({"calls": both}), FINAL]),
        tools=[slow, add],
        calls_per_turn=2,
        concurrent_calls=True,
        hooks={"after_call": audit},
        name="inner",
    )
    script = [ADD, json.dumps({"calls": [{"tool": "inner", "input": {"prompt": "p"}}]}), FINAL]
    await play(Agent(model=ScriptedModel(script), tools=[inner.as_tool(), add], name="outer"))
    spans = exporter.get_finished_spans()
    # the outer run's call_2 ran the inner agent; the auditor ran in a hook of the inner run, with two
    # of its calls in progress: it belongs under the inner run, not under a call numbered like the outer's
    assert parent_id(only(spans, "invoke_agent auditor")) == span_id(only(spans, "invoke_agent inner"))
