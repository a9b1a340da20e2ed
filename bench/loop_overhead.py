"""Loop overhead per turn: aerix against pydantic-ai, the OpenAI Agents SDK, smolagents and a floor.

Every library plays the same scenario (see `_peers/scenario.py`): one tool
`add(a: int, b: int) -> int`, and a scripted model that calls it once in each
of 50 turns, then gives a final answer in turn 51. The scripted replies are
built before the clock starts, so a run's wall time is the library's own loop;
overhead per turn is that time divided by 51. After a warm-up, the libraries
take turns run by run (in a shuffled order each round) so that machine noise
hits them alike; each run is checked afterwards (50 right `add` results and
the final text), so a broken run cannot look fast.

`add` is measured twice: as a plain function (which aerix, pydantic-ai and the
OpenAI Agents SDK all run on a worker thread, so each call pays a thread hop)
and as a coroutine function (awaited on the loop). aerix also runs it as a plain
function declared never to block (`tool(add, blocking=False)`: called on the
loop, no thread hop, as the floor calls it). smolagents is synchronous,
runs only plain functions and calls them inline, so it has one row. The
hand-written floor (`floor`) is the least code that plays the scenario: what is
left of any loop, so a row divided by it is that library's own cost.

Run from the repository root:

    python bench/loop_overhead.py [--reps 40] [--only aerix floor smolagents ...]
        [--tools def 'async def'] [--no-write] [--profile]

It prints the table and writes it to the `loop_overhead` section of
docs/benchmarks.md. `--profile` also profiles aerix's runs with cProfile.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import functools
import gc
import importlib
import json
import os
import pstats
import random
import statistics
import sys
import time
import tomllib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any, Literal

import _report
from _peers.scenario import (
    CALL_TURNS,
    FINAL,
    MAX_TURNS,
    PROMPT,
    TOOL_KINDS,
    TURNS,
    Contender,
    ToolKind,
    Trial,
    add_tool,
    call_input,
    expect_results,
)

TARGET = 10.0
"""aerix should have at least this many times less overhead than the fastest peer."""
FLOOR_TARGET = 15.0
"""aerix with a plain-function tool should have at most this many times the floor's overhead."""


def aerix_contender(
    kind: ToolKind = "def",
    *,
    bare: bool = False,
    traced: Literal["sdk", "no-op"] | None = None,
    unpinned: bool = False,
    blocking: bool = True,
) -> Contender:
    """The aerix side: `Agent(model=ScriptedModel(texts), tools=[add])`, `await agent.ask()`.

    Args:
        kind: How `add` is defined.
        bare: Use `BareModel` (which only streams the texts, like the peers' fakes)
            instead of `ScriptedModel` (which also records every call and estimates
            token counts over the whole conversation).
        traced: Trace each run with `aerix.otel.instrument`: `"sdk"` with the SDK's
            `TracerProvider` exporting every span to memory (the spans are checked),
            `"no-op"` with the API's `NoOpTracerProvider` (aerix's own part of the cost).
        unpinned: Run with the worker threads of plain-function tools never pinned to the
            loop's core: what the pin saves, side by side.
        blocking: `False` makes `add` with `tool(add, blocking=False)`: a plain function
            declared never to block, called on the event loop without the thread hop.
    """
    from aerix import Agent, tool
    from aerix.testing import ScriptedModel

    add = tool(add_tool(kind)) if blocking else tool(add_tool(kind), blocking=False)
    texts = [json.dumps({"calls": [{"tool": "add", "input": call_input(i)}]}) for i in range(CALL_TURNS)]
    texts.append(json.dumps({"final": FINAL}))
    model_class = BareModel if bare else ScriptedModel
    spans = None if traced is None else _span_memory(sdk=traced == "sdk")

    def prepare() -> Trial:
        agent = Agent(model=model_class(texts), tools=[add], limits={"turns": MAX_TURNS})

        def run() -> Any:
            return agent.ask(PROMPT)

        if spans is not None:
            run = spans.traced(run)
        if unpinned:
            run = _unpinned(run)

        def check(answer: Any) -> None:
            results = [
                ev.text for ev in answer.events if ev.type == "result" and ev.tool == "add" and not ev.error
            ]
            expect_results("aerix", results, answer.text)
            if spans is not None:
                spans.check()

        return Trial(run=run, awaits=True, check=check)

    model = "BareModel" if bare else "ScriptedModel"
    made = "tool(add)" if blocking else "tool(add, blocking=False)"
    how = f"Agent(model={model}(texts), tools=[{made}]); await agent.ask()"
    if unpinned:
        how += ", worker threads not pinned (aerix._workers._core_reader patched to None)"
    if traced is not None:
        where = "<SDK, in-memory exporter>" if traced == "sdk" else "NoOpTracerProvider()"
        how = f"aerix.otel.instrument(tracer_provider={where}); {how}"
    return Contender(
        name=f"aerix ({model}{'' if traced is None else f', traced ({traced})'}"
        f"{', workers not pinned' if unpinned else ''}{'' if blocking else ', blocking=False'})",
        version=_aerix_version(),
        tool=kind,
        how=how,
        prepare=prepare,
    )


def _unpinned(run: Callable[[], Any]) -> Callable[[], Any]:
    """`run` with aerix's worker threads left where the kernel wakes them (no pin)."""
    import aerix._workers

    async def unpinned_run() -> Any:
        reader = aerix._workers._core_reader
        aerix._workers._core_reader = lambda: None  # type: ignore[assignment]
        try:
            return await run()
        finally:
            aerix._workers._core_reader = reader  # the other contenders' runs are pinned

    return unpinned_run


@dataclass
class _SpanMemory:
    """Where the traced aerix rows send their spans: the SDK's `TracerProvider` with an
    in-memory exporter, or the API's `NoOpTracerProvider` (`exporter` is then `None`)."""

    provider: Any
    exporter: Any

    def traced(self, run: Callable[[], Any]) -> Callable[[], Any]:
        """`run`, instrumented: the observer is added before the clock starts and removed at the end."""
        import aerix.otel

        if self.exporter is not None:
            self.exporter.clear()
        undo = aerix.otel.instrument(tracer_provider=self.provider)

        async def traced_run() -> Any:
            try:
                return await run()
            finally:
                undo()  # the other contenders' runs stay untraced

        return traced_run

    def check(self) -> None:
        """Raise unless the run made its spans: one run, a generation per turn, a call per call turn."""
        if self.exporter is None:  # no-op spans: nothing to see
            return
        names = [s.name for s in self.exporter.get_finished_spans()]
        want = {"invoke_agent": 1, "chat ScriptedModel": TURNS, "execute_tool add": CALL_TURNS}
        got = {name: names.count(name) for name in want}
        if got != want or len(names) != sum(want.values()):
            raise AssertionError(f"aerix (traced): expected spans {want}, got {got} of {len(names)}")


def _span_memory(*, sdk: bool) -> _SpanMemory:
    """Raises ImportError without `opentelemetry-sdk` (the row is then skipped)."""
    if not sdk:
        from opentelemetry.trace import NoOpTracerProvider

        return _SpanMemory(provider=NoOpTracerProvider(), exporter=None)
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    import aerix.otel  # noqa: F401  (its ImportError, if any, skips the row too)

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return _SpanMemory(provider=provider, exporter=exporter)


class BareModel:
    """The least an aerix `Model` can do: stream each scripted text, then a done delta."""

    def __init__(self, texts: list[str]) -> None:
        self._texts = iter(texts)

    async def chat(self, messages: list[Any], opts: Any = None) -> AsyncIterator[Any]:
        """Stream the next text as one delta, then the done delta."""
        from aerix.model import Delta, Usage

        yield Delta(text=next(self._texts))
        yield Delta(done=True, finish="stop", usage=Usage(prompt_tokens=1, completion_tokens=1))


def floor_contender(kind: ToolKind = "def") -> Contender:
    """The hand-written floor: the least an asyncio program does to play the scenario.

    One coroutine streams each text from `BareModel`, parses it with `json.loads`, calls
    `add` (awaited if it is a coroutine function, else called inline: no thread hop), and
    appends the turn and the result to a list of messages. No checks, no events, no hooks:
    what is left of any loop, so a library's row divided by it is its own cost.
    """
    add = add_tool(kind)
    texts = [json.dumps({"calls": [{"tool": "add", "input": call_input(i)}]}) for i in range(CALL_TURNS)]
    texts.append(json.dumps({"final": FINAL}))
    is_async = kind == "async def"

    def prepare() -> Trial:
        model = BareModel(texts)

        async def run() -> tuple[list[Any], str]:
            messages: list[dict[str, str]] = [{"role": "user", "content": PROMPT}]
            results: list[Any] = []
            for _ in range(MAX_TURNS):
                text = "".join([d.text async for d in model.chat(messages)])
                messages.append({"role": "assistant", "content": text})
                turn = json.loads(text)
                if "final" in turn:
                    return results, turn["final"]
                call = turn["calls"][0]
                value = await add(**call["input"]) if is_async else add(**call["input"])
                results.append(value)
                messages.append({"role": "user", "content": f"Results:\n{value}"})
            raise RuntimeError("the floor's scenario had no final")

        def check(outcome: tuple[list[Any], str]) -> None:
            expect_results(FLOOR, *outcome)

        return Trial(run=run, awaits=True, check=check)

    return Contender(
        name=FLOOR,
        version=f"Python {sys.version.split()[0]}",
        tool=kind,
        how="one coroutine: stream the text, json.loads, call add (inline if a plain function), append",
        prepare=prepare,
    )


FLOOR = "hand-written floor"
"""The name of the floor's rows."""


def _aerix_version() -> str:
    try:
        return version("aerix")
    except PackageNotFoundError:  # run from the source tree, not installed
        pyproject = Path(__file__).resolve().parent.parent / "pyproject.toml"
        return f"{tomllib.loads(pyproject.read_text())['project']['version']} (source tree)"


def _peer(module: str) -> Callable[[ToolKind], Contender]:
    def load(kind: ToolKind) -> Contender:
        contender: Callable[[ToolKind], Contender] = importlib.import_module(f"_peers.{module}").contender
        return contender(kind)

    return load


LOADERS: dict[str, Callable[[ToolKind], Contender]] = {
    "aerix": aerix_contender,
    "aerix-bare": functools.partial(aerix_contender, bare=True),
    "aerix-traced": functools.partial(aerix_contender, traced="sdk"),
    "aerix-traced-noop": functools.partial(aerix_contender, traced="no-op"),
    "aerix-unpinned": functools.partial(aerix_contender, unpinned=True),
    "aerix-nonblocking": functools.partial(aerix_contender, blocking=False),
    "floor": floor_contender,
    "pydantic-ai": _peer("pydantic_ai_peer"),
    "openai-agents": _peer("openai_agents_peer"),
    "smolagents": _peer("smolagents_peer"),
}
KINDS: dict[str, tuple[ToolKind, ...]] = {
    "smolagents": ("def",),
    "aerix-unpinned": ("def",),
    "aerix-nonblocking": ("def",),
}
"""Tool kinds a library supports, where not all of them."""


@dataclass
class Timings:
    """Per-turn overheads of one contender's timed runs, in microseconds."""

    contender: Contender
    us_per_turn: list[float] = field(default_factory=list)

    @property
    def median(self) -> float:
        """The median overhead per turn."""
        return statistics.median(self.us_per_turn)

    def deciles(self) -> tuple[float, float]:
        """The p10 and p90."""
        q = statistics.quantiles(self.us_per_turn, n=10, method="inclusive")
        return q[0], q[8]


def time_one(runner: asyncio.Runner, contender: Contender) -> float:
    """Prepare one run (untimed), play it (timed), check it, and return µs per turn."""
    trial = contender.prepare()
    gc.collect()  # a clean start for each run (a cheap one once `measure` froze the heap)
    if trial.awaits:

        async def timed() -> tuple[int, Any]:
            start = time.perf_counter_ns()
            outcome = await trial.run()
            return time.perf_counter_ns() - start, outcome

        elapsed, outcome = runner.run(timed())
    else:
        start = time.perf_counter_ns()
        outcome = trial.run()
        elapsed = time.perf_counter_ns() - start
    trial.check(outcome)
    return elapsed / 1000 / TURNS


def load(names: list[str], kinds: list[ToolKind]) -> tuple[list[Contender], list[str]]:
    """The contenders that import, and a note for each library that does not."""
    loaded, skipped = [], []
    for name in names:
        try:
            loaded += [LOADERS[name](k) for k in kinds if k in KINDS.get(name, TOOL_KINDS)]
        except ImportError as exc:
            skipped.append(f"{name}: not importable ({exc})")
    return loaded, skipped


def measure(contenders: list[Contender], *, reps: int, warmup: int, seed: int = 0) -> list[Timings]:
    """Warm every contender up, then time `reps` runs each, round-robin in shuffled order."""
    timings = [Timings(c) for c in contenders]
    order = list(timings)
    shuffle = random.Random(seed).shuffle
    with asyncio.Runner() as runner:
        for _ in range(warmup):
            for t in timings:
                time_one(runner, t.contender)
        # Park the libraries' imported objects outside the collector: otherwise the
        # collection before each run sweeps the whole heap and leaves the caches cold,
        # which taxes a short run far more than a long one.
        gc.collect()
        gc.freeze()
        for _ in range(reps):
            shuffle(order)
            for t in order:
                t.us_per_turn.append(time_one(runner, t.contender))
    return timings


def profile(contender: Contender, runs: int, top: int) -> None:
    """Profile `runs` runs of one async contender with cProfile and print where the time goes."""
    profiler = cProfile.Profile()

    async def profiled(trial: Trial) -> Any:
        profiler.enable()
        try:
            return await trial.run()
        finally:
            profiler.disable()

    with asyncio.Runner() as runner:
        time_one(runner, contender)  # warm
        for _ in range(runs):
            trial = contender.prepare()
            trial.check(runner.run(profiled(trial)))
    turns = runs * TURNS
    print(
        f"\ncProfile: {runs} runs of {contender.name} with a `{contender.tool}` tool "
        f"({turns} turns; divide by {turns} for per-turn figures)"
    )
    stats = pstats.Stats(profiler, stream=sys.stdout)
    stats.sort_stats("tottime").print_stats(top)
    stats.sort_stats("cumulative").print_stats(top)


HEADLINE = "aerix (ScriptedModel)"
"""The aerix configuration the issue names; the ratio columns divide by its medians."""


def _is_aerix(c: Contender) -> bool:
    return c.name.startswith("aerix")


def _is_peer(c: Contender) -> bool:
    return not _is_aerix(c) and c.name != FLOOR


def _find(timings: list[Timings], name: str, kind: ToolKind) -> Timings | None:
    return next((t for t in timings if t.contender.name == name and t.contender.tool == kind), None)


def table(timings: list[Timings]) -> str:
    """The results as a markdown table: aerix first, then the peers by median."""
    bases = [(k, b) for k in TOOL_KINDS if (b := _find(timings, HEADLINE, k)) is not None]
    head = "| library | version | `add` defined with | median µs/turn | p10 | p90 |"
    rule = "|---|---|---|---:|---:|---:|"
    for kind, _ in bases:
        head += f" ÷ {HEADLINE}, `{kind}` |"
        rule += "---:|"
    rows = [head, rule]
    for t in sorted(timings, key=lambda t: (not _is_aerix(t.contender), t.median)):
        c = t.contender
        p10, p90 = t.deciles()
        row = f"| {c.name} | {c.version} | `{c.tool}` | {t.median:.1f} | {p10:.1f} | {p90:.1f} |"
        for _, base in bases:
            row += f" {t.median / base.median:.1f}× |"
        rows.append(row)
    return "\n".join(rows)


def verdicts(timings: list[Timings]) -> list[str]:
    """For each aerix row, the fastest comparable peer's ratio against the target.

    An aerix row with a `def` tool is compared with the peers' `def` rows; one with
    an `async def` tool with each peer's fastest row (smolagents has only `def`).
    """
    lines = []
    for base in (t for t in timings if _is_aerix(t.contender)):
        kind = base.contender.tool
        if _is_traced(base.contender):  # its line says what tracing adds; the targets are the loop's
            lines += _tracing_cost(timings, base)
            continue
        if _is_unpinned(base.contender):  # its line says what the pin saves
            lines += _pin_saving(timings, base)
            continue
        peers = [
            t for t in timings if _is_peer(t.contender) and (kind == "async def" or t.contender.tool == "def")
        ]
        if peers:
            fastest = min(peers, key=lambda t: t.median)
            ratio = fastest.median / base.median
            met = "met" if ratio >= TARGET else "**not met**"
            lines.append(
                f"- {base.contender.name}, `{kind}` tool ({base.median:.1f} µs/turn): the fastest "
                f"peer, {fastest.contender.name} with `{fastest.contender.tool}` "
                f"({fastest.median:.1f} µs/turn), has {ratio:.1f}× its overhead "
                f"(target ≥ {TARGET:.0f}×: {met})."
            )
        floor = _find(timings, FLOOR, kind)
        if floor is not None:
            times = base.median / floor.median
            target = ""
            if kind == "def":
                met = "met" if times <= FLOOR_TARGET else "**not met**"
                target = f" (target ≤ {FLOOR_TARGET:.0f}×: {met})"
            lines.append(
                f"- {base.contender.name}, `{kind}` tool: {times:.1f}× the overhead of the "
                f"hand-written floor with the same `add` ({floor.median:.1f} µs/turn){target}."
            )
    return lines


def _is_traced(c: Contender) -> bool:
    return c.name.startswith("aerix") and "traced" in c.name


def _is_unpinned(c: Contender) -> bool:
    return c.name.startswith("aerix") and "not pinned" in c.name


def _pin_saving(timings: list[Timings], unpinned: Timings) -> list[str]:
    """What pinning the worker to the loop's core saves: the unpinned row against the default."""
    pinned = _find(timings, HEADLINE, "def")
    if pinned is None:
        return []
    saved = unpinned.median - pinned.median
    return [
        f"- {unpinned.contender.name}, `def` tool ({unpinned.median:.1f} µs/turn): pinning the "
        f"worker to the loop's core for its wake-up saves {saved:.1f} µs a turn ({HEADLINE}, "
        f"{pinned.median:.1f} µs/turn, is {unpinned.median / pinned.median:.2f}× faster)."
    ]


def _tracing_cost(timings: list[Timings], traced: Timings) -> list[str]:
    """What tracing adds to a turn: a traced row against the same run not instrumented."""
    kind = traced.contender.tool
    plain = _find(timings, HEADLINE, kind)
    if plain is None:
        return []
    added = traced.median - plain.median
    return [
        f"- {traced.contender.name}, `{kind}` tool ({traced.median:.1f} µs/turn): tracing adds "
        f"{added:.1f} µs a turn ({traced.median / plain.median:.2f}× {HEADLINE} with the same `add`, "
        f"{plain.median:.1f} µs/turn, not instrumented)."
    ]


def markdown(timings: list[Timings], reps: int, warmup: int, load: tuple[float, float]) -> str:
    """The docs/benchmarks.md section; `load` is the load average before and after the run."""
    seen: dict[str, Contender] = {}
    for t in timings:
        seen.setdefault(t.contender.name, t.contender)
    how = "\n".join(f"- **{c.name}** {c.version}: `{c.how}`" for c in seen.values())
    # every verdict is printed; the page keeps those of the headline rows and the floor's
    results = "\n".join(line for line in verdicts(timings) if line.startswith(f"- {HEADLINE},"))
    return f"""## Loop overhead per turn

`bench/loop_overhead.py`. One tool, `add(a: int, b: int) -> int`, and a scripted model that
answers with {CALL_TURNS} turns, each calling `add` once (arguments varying with the turn, sent
as JSON text the way a provider sends them), then a final answer in turn {TURNS}. The replies
are built before the clock starts, so a run's time is the library's loop: rendering, parsing,
validating, dispatching the tool, bookkeeping. Overhead per turn = wall time / {TURNS}. All
libraries run in one process, the async ones on one event loop: {warmup} warm-up runs each, then
{reps} timed runs, taking turns run by run in a shuffled order, each after a garbage collection
(with the warm-up's objects frozen by `gc.freeze()`). Each run's {CALL_TURNS} results and final
are checked. Each library is used in its most direct documented way:

{how}

`add` is timed as a plain function and as a coroutine function. aerix, pydantic-ai and the
OpenAI Agents SDK run a plain-function tool on a worker thread (it cannot block the event
loop): a thread hop per call; `tool(add, blocking=False)` declares one that never blocks, which
aerix calls on the loop. smolagents is synchronous and calls tools inline: one row. The
**hand-written floor** is the least an asyncio program does: stream each text, `json.loads` it,
call `add`, append the turn and result; a row divided by it is that library's own cost. On Linux
aerix pins an idle worker to the loop's core for its wake-up (*workers not pinned*: without).
`ScriptedModel` also records every call and estimates token counts each turn; `BareModel` only
streams the texts, like the peers' fakes. The *traced* rows run under `aerix.otel.instrument`:
*sdk* with the OpenTelemetry SDK exporting every span to memory, *no-op* with the API's
`NoOpTracerProvider` (what is left is aerix's own part).

Machine: {_report.machine()}; load average {load[0]:.1f} before the run, {load[1]:.1f} after
(with more than {os.cpu_count()}, other processes shared the cores: compare the rows of one table).

{table(timings)}

{results}
"""


def main(argv: list[str] | None = None) -> int:
    """Measure, print, and write the docs section."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--reps", type=int, default=40, help="timed runs per contender")
    parser.add_argument("--warmup", type=int, default=3, help="untimed runs per contender first")
    parser.add_argument("--only", nargs="+", choices=list(LOADERS), default=list(LOADERS))
    parser.add_argument("--tools", nargs="+", choices=TOOL_KINDS, default=list(TOOL_KINDS))
    parser.add_argument("--no-write", action="store_true", help="leave docs/benchmarks.md alone")
    parser.add_argument("--profile", action="store_true", help="also cProfile aerix's runs")
    parser.add_argument("--profile-runs", type=int, default=20)
    parser.add_argument("--profile-top", type=int, default=30)
    args = parser.parse_args(argv)

    contenders, skipped = load(args.only, args.tools)
    for note in skipped:
        print(f"skipped {note}", file=sys.stderr)
    if not contenders:
        return 1
    for c in contenders:
        print(f"{c.name} {c.version} (`{c.tool}` tool): {c.how}")
    print(_report.machine())
    load_before = os.getloadavg()[0]
    timings = measure(contenders, reps=args.reps, warmup=args.warmup)
    loads = (load_before, os.getloadavg()[0])
    print(f"load average {loads[0]:.1f} before, {loads[1]:.1f} after")
    print()
    print(table(timings))
    lines = verdicts(timings)
    print("\n".join(["", *lines]))
    if not any(_is_aerix(t.contender) for t in timings) or not any(_is_peer(t.contender) for t in timings):
        print("not writing docs/benchmarks.md: it needs aerix and at least one peer")
    elif not args.no_write:
        path = _report.write_section("loop_overhead", markdown(timings, args.reps, args.warmup, loads))
        print(f"wrote {path}")
    if args.profile:
        for t in timings:
            if _is_aerix(t.contender):
                profile(t.contender, args.profile_runs, args.profile_top)
    wanted = any(name.startswith("aerix") for name in args.only)
    return 1 if wanted and not any(_is_aerix(c) for c in contenders) else 0


if __name__ == "__main__":
    sys.exit(main())
