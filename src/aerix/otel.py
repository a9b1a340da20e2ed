"""OpenTelemetry traces of agent runs, under the GenAI semantic conventions.

```python
import aerix.otel

undo = aerix.otel.instrument()  # spans go to the global tracer provider
...
undo()
```

From then on every run is a span `invoke_agent {name}` with a child
`chat {model}` per generation and a child `execute_tool {tool}` per call. The
spans are made from the run's events and from when the consumer asks for
them: the loop itself has no tracing code (see `aerix._observe`). Needs the
extra `aerix[otel]` (`opentelemetry-api`; an SDK to export the spans).
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncGenerator, Callable, Mapping
from contextlib import aclosing, suppress
from contextvars import ContextVar
from importlib.metadata import PackageNotFoundError, version
from typing import Any
from urllib.parse import urlsplit

try:
    from opentelemetry import context as otel_context
    from opentelemetry import trace
    from opentelemetry.context import Context
    from opentelemetry.trace import Span, SpanKind, Status, StatusCode, Tracer, TracerProvider
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError("aerix.otel needs OpenTelemetry: pip install 'aerix[otel]'") from exc

from ._observe import CALL, OBSERVERS
from .abort import AbortSignal
from .errors import AerixError, describe
from .events import (
    AgentEvent,
    CallEvent,
    EndEvent,
    FinalEvent,
    ResultEvent,
    RetryEvent,
    TextEvent,
    TrimEvent,
    TurnEvent,
    UsageEvent,
)

__all__ = ["instrument"]

_CUT = "cut: "
"""How a retry reason (or an ending's message) says the turn reached `max_tokens`."""
_PROVIDERS = {"LlamaCpp": "llama_cpp", "OpenAICompatible": "openai"}
"""`gen_ai.provider.name` of aerix's engines (OpenAICompatible speaks the OpenAI API)."""
_OUTER: ContextVar[_RunSpans | None] = ContextVar("aerix_otel_run", default=None)
"""The traced run whose events are being made in this context: a run made in one of its
tools finds the call's span there (`CALL` says which call)."""

_STATS = (
    ("forced_tokens", "aerix.usage.forced_tokens"),
    ("prefill_s", "aerix.prefill.duration"),
    ("decode_s", "aerix.decode.duration"),
)
"""The engine's `last_stats` fields that go on a chat span, and their attributes."""


def instrument(
    *, tracer_provider: TracerProvider | None = None, capture_content: bool = False
) -> Callable[[], None]:
    """Trace every run from now on; return a function that stops it.

    Each run emits a span `invoke_agent {name}` (`invoke_agent` for an agent
    without a name), a child `chat {model}` per generation and a child
    `execute_tool {tool}` per call, with the GenAI conventions' attributes and
    aerix's own (`aerix.retries`, `aerix.end_reason`, the engine's timings).
    A run started inside a span of yours is its child; a tool's own spans are
    children of its `execute_tool` span.

    Args:
        tracer_provider: Where the spans go; `None`: the global one
            (`opentelemetry.trace.set_tracer_provider`), looked up when a span starts.
        capture_content: Also record each call's input
            (`gen_ai.tool.call.arguments`) and result (`gen_ai.tool.call.result`)
            on its span. Off by default: tool inputs and results may hold
            personal data.

    Returns:
        A function that undoes this call (calling it again does nothing).

    Raises:
        AerixError: `kind="options"` for a `tracer_provider` without
            `get_tracer` or a `capture_content` that is not a bool.
    """
    if tracer_provider is not None and not callable(getattr(tracer_provider, "get_tracer", None)):
        raise AerixError(
            "options",
            "tracer_provider must be an OpenTelemetry TracerProvider (or None for the global one), "
            f"got {tracer_provider!r}",
        )
    if not isinstance(capture_content, bool):
        raise AerixError("options", f"capture_content must be True or False, got {capture_content!r}")
    tracer = trace.get_tracer("aerix", _version(), tracer_provider=tracer_provider)

    def observer(
        agent: Any, events: AsyncGenerator[AgentEvent, None], signal: AbortSignal | None
    ) -> AsyncGenerator[AgentEvent, None]:
        # the parent is the caller's span when the run is made (`run_sync` drives it on another
        # thread); a run made in a tool of a traced run: that call's span, even among calls at once
        spans = _RunSpans(tracer, agent, capture_content, signal)
        outer, call = _OUTER.get(), CALL.get()
        parent = outer.call_context(call) if outer is not None and call is not None else None
        return _traced(spans, events, otel_context.get_current() if parent is None else parent)

    OBSERVERS.append(observer)

    def uninstrument() -> None:
        with suppress(ValueError):  # already undone
            OBSERVERS.remove(observer)

    return uninstrument


async def _traced(
    spans: _RunSpans, events: AsyncGenerator[AgentEvent, None], parent: Context
) -> AsyncGenerator[AgentEvent, None]:
    """The run's events, unchanged, with its spans made from them on the way."""
    if spans.refused():  # the agent is busy: the run is refused at its first event, and is no run
        async with aclosing(events):
            async for ev in events:
                yield ev
        return
    try:
        spans.start(parent)
        while True:
            spans.asking()
            # the span in progress is current while the run works: the engine's and tools' spans nest in it
            # this run's spans, and no call of it yet (`_calls` sets `CALL` while a tool runs)
            token, outer, call = otel_context.attach(spans.current), _OUTER.set(spans), CALL.set(None)
            try:
                ev = await events.__anext__()
            except StopAsyncIteration:
                return
            finally:
                CALL.reset(call)
                _OUTER.reset(outer)
                otel_context.detach(token)
            spans.see(ev)
            yield ev
    except Exception as exc:
        spans.fail(exc)
        raise
    finally:  # the consumer stopped early (break, aclose, cancellation) or the run ended
        spans.close()
        await events.aclose()


class _RunSpans:
    """The spans of one run, made from its events as they pass.

    A generation's span starts when the consumer asks for the first event after
    the previous generation's last one (that is when the loop starts the next
    generation) and ends at its usage event; a call's span runs from its call
    event to its result event. Where the loop surely generates next (a run's
    start, after a retry, after a turn's last result with `limits.turns` not
    reached) the span starts then and is current while the engine works;
    elsewhere (after a final that `on_final` continued) it starts at the first
    event of the generation, dated back to when that event was asked for.
    """

    def __init__(self, tracer: Tracer, agent: Any, capture: bool, signal: AbortSignal | None) -> None:
        self._tracer = tracer
        self._capture = capture
        self._signal = signal
        """The run's own signal: once aborted, the run ends with no other generation."""
        name = getattr(agent, "name", None)
        self._name: str | None = name if isinstance(name, str) and name else None
        self._model = getattr(agent, "model", None)
        model = _model_name(self._model)
        self._chat_name = f"chat {model}"
        self._model_attrs: dict[str, Any] = {
            "gen_ai.provider.name": _provider(self._model),
            "gen_ai.request.model": model,
        }
        self._chat_attrs: dict[str, Any] = {
            "gen_ai.operation.name": "chat",
            **self._model_attrs,
            **_server(self._model),
        }
        max_tokens = getattr(getattr(agent, "limits", None), "max_tokens", None)
        if isinstance(max_tokens, int):
            self._chat_attrs["gen_ai.request.max_tokens"] = max_tokens
        turns = getattr(getattr(agent, "limits", None), "turns", None)
        self._max_turns = turns if isinstance(turns, int) else 0
        specs = getattr(agent, "tools", None)
        self._specs: Mapping[str, Any] = specs if isinstance(specs, Mapping) else {}
        self._run: Span = trace.INVALID_SPAN
        self._run_ctx = Context()
        self.current = self._run_ctx
        """The context to make current while the run works: the span in progress."""
        self._agent = agent
        self._chat: Span | None = None
        """The generation in progress: started, its usage event not seen yet."""
        self._finish: str | None = None
        """Why the last generation stopped, as the model's done delta said (if it said)."""
        self._used: Span | None = None
        """The last generation, ended at its usage event, until the next event says how it finished."""
        self._used_at = 0
        self._tools: dict[str, tuple[Span, Context]] = {}
        """The calls in progress, by id, with their contexts."""
        self._asked = 0
        """When the consumer last asked for an event that may start a generation (ns since the epoch)."""
        self._calls_left = 0
        """Calls of the current turn whose results are still to come."""
        self._generating = True
        """Whether the loop surely starts a generation when the consumer next asks for an event
        (unless the run's signal is aborted by then: the run then ends)."""
        self._turns = 0
        """Generations with a span so far."""
        self._state: Any = None
        """The agent's state of this run, which counts its generations (an aerix Agent's)."""
        self._retries = 0
        self._done = False

    def refused(self) -> bool:
        """Whether the run will be refused at its first event: its agent is running another."""
        return getattr(self._agent, "busy", False) is True

    def start(self, parent: Context) -> None:
        """Start the run's span, a child of `parent`'s span if it has one."""
        attrs: dict[str, Any] = {"gen_ai.operation.name": "invoke_agent", **self._model_attrs}
        name = "invoke_agent"
        if self._name is not None:
            attrs["gen_ai.agent.name"] = self._name
            name = f"invoke_agent {self._name}"
        self._run = self._tracer.start_span(name, context=parent, kind=SpanKind.INTERNAL, attributes=attrs)
        self._run_ctx = self.current = trace.set_span_in_context(self._run, parent)

    def asking(self) -> None:
        """The consumer asks for the next event."""
        if self._chat is None and self._calls_left == 0:
            self._asked = time.time_ns()
            if self._generating and not (self._signal is not None and self._signal.aborted):
                self._generating = False
                self._open_chat()

    def see(self, ev: AgentEvent) -> None:
        """Update the spans for one event of the run."""
        if self._state is None:  # the run is under way now: its state is the agent's current one
            self._state = getattr(self._agent, "_current", None)
        if self._used is not None:
            self._finish_used(ev)
        handle = _HANDLERS.get(type(ev))
        if handle is not None:
            handle(self, ev)

    def _text(self, ev: TextEvent) -> None:
        if self._chat is None:
            self._open_chat()

    def _turn(self, ev: TurnEvent) -> None:
        self._calls_left = len(ev.calls)

    def _retry(self, ev: RetryEvent) -> None:
        self._retries += 1
        self._generating = True
        # A reason may quote the model's text (`expected integer, got "…"`): only with content on.
        reason = (
            ev.reason if self._capture else _CUT.strip(": ") if ev.reason.startswith(_CUT) else "bad turn"
        )
        self._run.add_event("aerix.retry", {"aerix.turn": ev.turn, "aerix.retry.reason": reason})

    def _trim(self, ev: TrimEvent) -> None:
        self._run.add_event("aerix.trim", {"aerix.trim.dropped": ev.dropped, "aerix.trim.kept": ev.kept})

    def _caught_up(self) -> None:
        """A span for a generation the loop started that no event showed yet (one after a final
        that `on_final` continued, which failed or was aborted before its first text)."""
        generations = getattr(self._state, "generation", None)
        if self._chat is None and isinstance(generations, int) and generations > self._turns:
            self._open_chat()

    def fail(self, exc: Exception) -> None:
        """The run raised `exc` (not a cancellation, not the consumer leaving)."""
        if not self._done:
            self._run.record_exception(exc)
            self._run.set_attribute("error.type", type(exc).__qualname__)
            self._run.set_status(Status(StatusCode.ERROR, describe(exc)))

    def close(self) -> None:
        """End every span still open, the run's last (once)."""
        if self._done:
            return
        self._done = True
        if self._used is not None:  # the consumer left right after it: finished as the model said, if it did
            if self._finish is not None:
                self._used.set_attribute("gen_ai.response.finish_reasons", (self._finish,))
            self._used.end(end_time=self._used_at)
        if self._chat is not None:
            self._chat.end()
        for span, _ in self._tools.values():
            span.end()
        self._tools.clear()
        self._run.set_attribute("aerix.retries", self._retries)
        self._run.end()

    def _open_chat(self) -> Span:
        self._turns += 1
        span = self._tracer.start_span(
            self._chat_name,
            context=self._run_ctx,
            kind=SpanKind.CLIENT,
            attributes={**self._chat_attrs, "aerix.turn": self._turns},
            start_time=self._asked,
        )
        self._chat = span
        self.current = trace.set_span_in_context(span, self._run_ctx)
        return span

    def _usage(self, ev: UsageEvent) -> None:
        span = self._chat or self._open_chat()
        span.set_attributes(
            {
                "gen_ai.usage.input_tokens": ev.prompt_tokens,
                "gen_ai.usage.output_tokens": ev.completion_tokens,
                "gen_ai.usage.cache_read.input_tokens": ev.cached_tokens,
            }
        )
        self._engine_stats(span, ev)
        # the run's reply is the one this usage event is of (a run of an aerix Agent; else unknown)
        finish = getattr(getattr(getattr(self._agent, "_current", None), "reply", None), "finish", None)
        self._finish = finish if isinstance(finish, str) else None
        self._chat, self._used, self._used_at = None, span, time.time_ns()
        self.current = self._run_ctx

    def _engine_stats(self, span: Span, ev: UsageEvent) -> None:
        """What the engine says the generation cost (`LlamaCpp.last_stats`), where it says it."""
        stats = _attr(self._model, "last_stats")
        if stats is None:
            return
        # on an engine shared by several agents another generation may have ended since: only this one's
        if getattr(stats, "prompt_tokens", ev.prompt_tokens) != ev.prompt_tokens or (
            getattr(stats, "completion_tokens", ev.completion_tokens) != ev.completion_tokens
        ):
            return
        for field, attr in _STATS:
            value = getattr(stats, field, None)
            if isinstance(value, int | float) and not isinstance(value, bool):
                span.set_attribute(attr, value)

    def _finish_used(self, ev: AgentEvent) -> None:
        """End the last generation's span, now that the event after its usage says how it finished."""
        assert self._used is not None
        finish = self._finish
        if finish is None:  # the model did not say: a turn cut on `max_tokens` is asked again or ends the run
            cut = (isinstance(ev, RetryEvent) and ev.reason.startswith(_CUT)) or (
                isinstance(ev, EndEvent) and ev.reason in ("turns", "retries") and f": {_CUT}" in ev.message
            )
            finish = "length" if cut else "stop"
        self._used.set_attribute("gen_ai.response.finish_reasons", (finish,))
        self._used.end(end_time=self._used_at)
        self._used = None

    def _call(self, ev: CallEvent) -> None:
        attrs: dict[str, Any] = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": ev.tool,
            "gen_ai.tool.call.id": ev.id,
            "gen_ai.tool.type": "function",
        }
        description = getattr(self._specs.get(ev.tool), "description", None)
        if isinstance(description, str) and description:
            attrs["gen_ai.tool.description"] = description
        if self._capture:
            attrs["gen_ai.tool.call.arguments"] = _json(ev.input)
        span = self._tracer.start_span(
            f"execute_tool {ev.tool}", context=self._run_ctx, kind=SpanKind.INTERNAL, attributes=attrs
        )
        self._tools[ev.id] = (span, trace.set_span_in_context(span, self._run_ctx))
        self._current_tool()

    def _result(self, ev: ResultEvent) -> None:
        self._calls_left = max(0, self._calls_left - 1)
        span = self._tools.pop(ev.id, (trace.INVALID_SPAN, self._run_ctx))[0]
        if self._capture:
            span.set_attribute("gen_ai.tool.call.result", ev.text)
        if ev.error:
            kind = "refused" if ev.text.startswith("refused:") else "tool_error"
            span.set_attribute("error.type", kind)
            # The result may quote the input or an earlier result: only with content on.
            span.set_status(Status(StatusCode.ERROR, ev.text if self._capture else kind))
        span.end()
        self._current_tool()
        if self._calls_left == 0 and self._turns < self._max_turns:
            self._generating = True

    def call_context(self, call_id: str) -> Context | None:
        """The context of the call in progress with this id (its `execute_tool` span), if any."""
        found = self._tools.get(call_id)
        return None if found is None else found[1]

    def _current_tool(self) -> None:
        """A lone call in progress is current (its tool's spans nest in it); several at once: the run."""
        if len(self._tools) == 1:
            self.current = next(iter(self._tools.values()))[1]
        else:
            self.current = self._run_ctx

    def _ending(self, ev: FinalEvent | EndEvent) -> None:
        reason = "final" if isinstance(ev, FinalEvent) else ev.reason
        if isinstance(ev, EndEvent):
            self._caught_up()
        if isinstance(ev, EndEvent) and ev.reason == "error":
            status = Status(StatusCode.ERROR, ev.message)
            for span in (self._chat, *(s for s, _ in self._tools.values())):
                if span is not None:
                    span.set_attribute("error.type", "_OTHER")
                    span.set_status(status)
            self._run.set_attribute("error.type", "_OTHER")
            self._run.set_status(status)
        self._run.set_attribute("aerix.end_reason", reason)
        self.close()


_HANDLERS: dict[type, Callable[[_RunSpans, Any], None]] = {
    TextEvent: _RunSpans._text,
    UsageEvent: _RunSpans._usage,
    TurnEvent: _RunSpans._turn,
    CallEvent: _RunSpans._call,
    ResultEvent: _RunSpans._result,
    RetryEvent: _RunSpans._retry,
    TrimEvent: _RunSpans._trim,
    FinalEvent: _RunSpans._ending,
    EndEvent: _RunSpans._ending,
}
"""What each kind of event does to the spans (one dict look-up per event)."""


def _attr(model: object, name: str) -> Any:
    """A model's attribute, or `None`, also where its property raises: tracing never fails a run."""
    try:
        return getattr(model, name, None)
    except Exception:
        return None


def _model_name(model: object) -> str:
    """`{model}` in `chat {model}`: the model's `name` attribute, else its class name."""
    name = _attr(model, "name")
    return name if isinstance(name, str) and name else type(model).__name__


def _provider(model: object) -> str:
    """`gen_ai.provider.name`: known for aerix's engines, `_OTHER` for any other model."""
    kind = type(model)
    if kind.__module__.startswith("aerix.engines"):
        return _PROVIDERS.get(kind.__name__, "_OTHER")
    return "_OTHER"


def _server(model: object) -> dict[str, Any]:
    """`server.address` and `server.port` of a model behind a URL (`base_url`), else nothing."""
    url = _attr(model, "base_url")
    if not isinstance(url, str):
        return {}
    try:
        parts = urlsplit(url)
        port = parts.port or {"https": 443, "http": 80}.get(parts.scheme)
    except ValueError:
        return {}
    if not parts.hostname:
        return {}
    return {"server.address": parts.hostname} | ({"server.port": port} if port else {})


def _json(value: object) -> str:
    try:
        return json.dumps(value, ensure_ascii=False, default=repr)
    except ValueError:  # a circular structure from a `before_call` hook
        return repr(value)


def _version() -> str | None:
    try:
        return version("aerix")
    except PackageNotFoundError:  # run from a source tree
        return None
