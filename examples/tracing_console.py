"""Tracing an agent's runs to the console with OpenTelemetry.

`aerix.otel.instrument` makes every run emit spans under the GenAI semantic
conventions: `invoke_agent` for the run, a `chat` child per generation and an
`execute_tool` child per call. The SDK's `ConsoleSpanExporter` prints each
span as it ends (children first), here one line each; an OTLP exporter sends
the same spans to Jaeger, Tempo or Langfuse.

Run it:

    pip install 'aerix[llama,otel]' opentelemetry-sdk
    python examples/tracing_console.py
"""

import sys

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SimpleSpanProcessor

import aerix
import aerix.otel
from aerix import Agent, tool

SHOWN = (
    "gen_ai.usage.input_tokens",
    "gen_ai.usage.output_tokens",
    "gen_ai.tool.call.arguments",
    "gen_ai.tool.call.result",
    "aerix.end_reason",
)


def one_line(span: ReadableSpan) -> str:
    """A span's name and a few of its attributes (the exporter's default is a page of JSON)."""
    attributes = span.attributes or {}
    shown = ", ".join(f"{key}={attributes[key]}" for key in SHOWN if key in attributes)
    return f"{'  ' if span.parent else ''}{span.name}: {shown}\n"


@tool
def multiply(a: int, b: int) -> int:
    """Multiply two integers."""
    return a * b


def main() -> None:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(ConsoleSpanExporter(out=sys.stdout, formatter=one_line)))
    # capture_content: the calls' inputs and results on their spans too (off by default)
    undo = aerix.otel.instrument(tracer_provider=provider, capture_content=True)
    agent = Agent(
        model=aerix.load("smollm2-instruct"),
        tools=[multiply],
        tool_choice="required",
        generation={"temperature": 0},
        name="calculator",
    )
    try:
        answer = agent.ask_sync("What is 17 * 23?")
        print(f"answer: {answer.text}")
    finally:
        undo()  # later runs emit no spans


if __name__ == "__main__":
    main()
