"""Many agents on one event loop against one OpenAI-compatible server.

A fake server (`fake_openai_server.py`) runs in a separate process on
127.0.0.1 and streams canned turns: 5 turns that each call the trivial tool
`ping`, then a final. Its CPU is not this process's, so what is measured here
is aerix (the loop, the `OpenAICompatible` engine, httpx) under load. It runs
in two modes:

- paced, like an inference server: each turn streams 8 chunks 10 ms apart
  (80 ms a turn) and at most 32 generations run at once (the rest queue), so
  the server saturates at a known capacity of 32 / 0.08 s = 400 turns/s,
  well below what the client's CPU allows. Throughput should grow with the
  agents until it reaches that capacity, then level off.
- instant: each turn is written at once, so the client's CPU is the limit;
  this measures the client's ceiling (its CPU per turn).

For 1, 16, 64 and 256 concurrent agents (each a closed loop: one run after
another, a fresh `Agent` per run, all sharing one engine), it measures:

- turns/s and runs/s: turns completed per second of the measuring window
  (each run is 6 turns);
- aerix latency per turn, p50 and p99: from the moment the engine yields a
  generation's done delta to the moment the server has read the next request
  of the same run. That span is all of aerix's work between two generations
  (parse the turn, emit events, run the tool, render the result, build,
  encode and send the request), plus the time the task waits for the loop
  while other agents run: the latency aerix adds to each turn;
- client CPU per turn: this process's CPU time over the turns completed;
- the worst event-loop stall: the longest wall time one loop callback (a task
  step) held the loop, garbage collection inside it included, as every other
  task waits that long; the most CPU time one callback took, which the OS
  descheduling a loaded machine's process does not inflate; the longest
  garbage collection, and how often a full one ran.

Three engines take turns: aerix's default (one httpx client per connection),
the same with the garbage-collector settings that docs/servers.md advises,
and one shared httpx client with its own pool. Every figure is the median
over the rounds. Run from the repository root:

    python bench/concurrency.py [--rounds 3] [--seconds 2] [--no-write]

It prints the tables and writes them to the `concurrency` section of
docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import asyncio
import contextvars
import gc
import os
import statistics
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx

import _report
from aerix import Agent, tool
from aerix.engines import OpenAICompatible
from aerix.model import ChatMessage, Delta, GenerateOptions

LEVELS = (1, 16, 64, 256)
CALLS = 5
"""Tool calls per run before its final (so 6 requests per run)."""
TOKENS, PACE, SLOTS = 4, 0.01, 32
"""The paced server: content chunks per turn, seconds per chunk, generations at once."""
TURN_SECONDS = PACE * (TOKENS + 4)
"""One paced turn: the role, content, finish, usage and `[DONE]` chunks, `PACE` apart."""
CAPACITY = SLOTS / TURN_SECONDS
"""The paced server's most turns per second."""
GC_THRESHOLD = (700, 5, 2000)
"""`gc.set_threshold` in the tuned mode, as docs/servers.md advises."""
TARGET = 0.010
"""The longest acceptable stall, in seconds."""
TUNED = "aerix, GC tuned"
ENGINES = {
    ("paced", "aerix"): "aerix's own connections, one client per connection (the default)",
    ("paced", TUNED): (
        f"the same, with `gc.collect(); gc.freeze(); gc.set_threshold{GC_THRESHOLD}` once the "
        "connections are open, as docs/servers.md advises"
    ),
    ("paced", "one httpx client"): "`http_client=httpx.AsyncClient(...)`: one client, httpx's pool of 256",
    ("instant", "aerix"): "",
    ("instant", TUNED): "",
}
"""The (server, engine) pairs measured, with what the engine is."""


@tool
async def ping() -> str:
    """Answer pong."""
    return "pong"


@dataclass
class Timeline:
    """One run's timestamps, reached from the engine's tasks through a context variable."""

    done_at: float | None = None
    gaps: list[float] = field(default_factory=list)


_timeline: contextvars.ContextVar[Timeline] = contextvars.ContextVar("timeline")


class Timed:
    """A `Model` that passes the engine's deltas through, noting when each done delta arrives
    and counting them in `turns`."""

    def __init__(self, engine: OpenAICompatible) -> None:
        self.engine = engine
        self.turns = 0

    async def chat(
        self, messages: list[ChatMessage], opts: GenerateOptions | None = None
    ) -> AsyncIterator[Delta]:
        async for delta in self.engine.chat(messages, opts):
            if delta.done:
                _timeline.get().done_at = time.monotonic()  # the clock the server stamps with
                self.turns += 1
            yield delta


async def on_response(response: httpx.Response) -> None:
    """httpx's response hook, in the engine's request task: time from the last done delta of
    this run to the moment the server had read this request (its `x-received` stamp)."""
    line = _timeline.get(None)
    if line is not None and line.done_at is not None:
        line.gaps.append(float(response.headers["x-received"]) - line.done_at)
        line.done_at = None


@dataclass
class Level:
    """The figures of one concurrency level in one round."""

    agents: int
    turns_per_s: float
    """Turns completed per second of the measuring window."""
    seconds: float
    """The whole level, the runs still going at the end of the window included."""
    turns: int
    """Turns completed in the whole level."""
    gaps: list[float]
    cpu: float
    worst_wall: float
    worst_cpu: float
    longest_gc: float
    full_gcs: int

    @property
    def runs_per_s(self) -> float:
        return self.turns_per_s / (CALLS + 1)


class LoopClock:
    """Times each event-loop callback (a task step is one) and each garbage collection.

    `worst_wall` is the longest wall time one callback held the loop, the
    collections inside it included: every other task waited that long.
    `worst_cpu` is the most CPU time one callback took, collections included;
    unlike wall time, the OS giving the core to another process does not
    inflate it. `longest_gc` is the longest collection (wall time) and
    `full_gcs` counts the full (generation 2) ones.
    """

    def __init__(self) -> None:
        self.worst_wall = 0.0
        self.worst_cpu = 0.0
        self.longest_gc = 0.0
        self.full_gcs = 0
        self._gc_start = 0.0
        self._run = asyncio.events.Handle._run

    def _on_gc(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._gc_start = time.perf_counter()
            return
        self.longest_gc = max(self.longest_gc, time.perf_counter() - self._gc_start)
        self.full_gcs += info["generation"] == 2

    def __enter__(self) -> LoopClock:
        run, clock = self._run, self

        def timed(handle: asyncio.Handle) -> None:
            wall, cpu = time.perf_counter(), time.thread_time()
            run(handle)
            cpu, wall = time.thread_time() - cpu, time.perf_counter() - wall
            clock.worst_wall = max(clock.worst_wall, wall)
            clock.worst_cpu = max(clock.worst_cpu, cpu)

        asyncio.events.Handle._run = timed  # type: ignore[method-assign,assignment]
        gc.callbacks.append(self._on_gc)
        return self

    def __exit__(self, *exc: object) -> None:
        asyncio.events.Handle._run = self._run  # type: ignore[method-assign]
        gc.callbacks.remove(self._on_gc)


async def run_level(model: Timed, agents: int, seconds: float) -> Level:
    """Keep `agents` runs going at once for `seconds`, counting the turns completed meanwhile;
    then let the runs under way finish."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    gaps: list[float] = []

    async def worker() -> None:
        while loop.time() < deadline:
            line = Timeline()
            _timeline.set(line)
            agent = Agent(model=model, tools=[ping], limits={"turns": CALLS + 2})
            answer = await agent.ask("ping until told otherwise")
            if answer.text != "pong":
                raise RuntimeError(f"unexpected answer {answer.text!r}")
            gaps.extend(line.gaps)

    turns0, cpu0, start = model.turns, time.process_time(), time.perf_counter()
    window: list[int] = []
    loop.call_at(deadline, lambda: window.append(model.turns - turns0))
    with LoopClock() as clock:
        await asyncio.gather(*(worker() for _ in range(agents)))
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu0
    return Level(
        agents=agents,
        turns_per_s=window[0] / seconds,
        seconds=elapsed,
        turns=model.turns - turns0,
        gaps=gaps,
        cpu=cpu,
        worst_wall=clock.worst_wall,
        worst_cpu=clock.worst_cpu,
        longest_gc=clock.longest_gc,
        full_gcs=clock.full_gcs,
    )


def start_server(*options: str) -> tuple[subprocess.Popen[str], str]:
    script = Path(__file__).with_name("fake_openai_server.py")
    proc = subprocess.Popen(
        [sys.executable, str(script), "--port", "0", "--calls", str(CALLS), *options],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline().split()
    if line[:1] != ["PORT"]:
        proc.kill()
        raise RuntimeError(f"the fake server did not start: {line}")
    return proc, f"http://127.0.0.1:{line[1]}/v1"


def pct(xs: list[float], q: float) -> float:
    if not xs:
        return float("nan")
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


Results = dict[tuple[str, str, int], list[Level]]


@dataclass
class Census:
    """Objects the garbage collector tracks (and a full collection scans), per connection and
    per agent in the middle of a run."""

    per_connection: float
    per_agent: float


async def census(url: str, agents: int) -> Census:
    """Count tracked objects before and after a new engine opens `agents` connections, and at
    three moments while `agents` runs are under way (their mean)."""
    engine = OpenAICompatible(url, "fake")
    gc.collect()
    before = len(gc.get_objects())
    await run_level(Timed(engine), agents, 0.1)
    gc.collect()
    idle = len(gc.get_objects())
    loop = asyncio.get_running_loop()
    counts: list[int] = []
    for at in (1.0, 2.0, 3.0):
        loop.call_later(at, lambda: counts.append(len(gc.get_objects())))
    await run_level(Timed(engine), agents, 3.0)
    await engine.aclose()
    return Census((idle - before) / agents, (statistics.mean(counts) - idle) / agents)


async def bench(urls: dict[str, str], rounds: int, seconds: float) -> tuple[Results, Census]:
    hooks = {"response": [on_response]}
    lanes = {server: OpenAICompatible(url, "fake", event_hooks=hooks) for server, url in urls.items()}
    client = httpx.AsyncClient(
        event_hooks=hooks,
        limits=httpx.Limits(max_connections=256, max_keepalive_connections=256),
        timeout=httpx.Timeout(120.0, connect=5.0, pool=None),
    )
    pooled = OpenAICompatible(urls["paced"], "fake", http_client=client)
    engines = {key: pooled if key[1] == "one httpx client" else lanes[key[0]] for key in ENGINES}
    for engine in (*lanes.values(), pooled):  # warm-up: open the connections, fill caches
        await run_level(Timed(engine), LEVELS[-1], 0.2)
    default = gc.get_threshold()
    results: Results = {(*key, n): [] for key in ENGINES for n in LEVELS}
    for r in range(rounds):
        for (server, mode), engine in engines.items():
            if mode == TUNED:
                gc.collect()
                gc.freeze()
                gc.set_threshold(*GC_THRESHOLD)
            for n in LEVELS:
                level = await run_level(Timed(engine), n, seconds)
                results[server, mode, n].append(level)
                print(
                    f"round {r + 1} {server:<7} {mode:<16} agents={n:>3}: {level.turns_per_s:6.1f} turns/s, "
                    f"latency/turn p50 {pct(level.gaps, 0.5) * 1e3:.2f} ms "
                    f"p99 {pct(level.gaps, 0.99) * 1e3:.2f} ms, "
                    f"worst stall {level.worst_wall * 1e3:.1f} ms ({level.worst_cpu * 1e3:.1f} ms CPU), "
                    f"longest GC {level.longest_gc * 1e3:.1f} ms",
                    file=sys.stderr,
                )
            if mode == TUNED:
                gc.unfreeze()
                gc.set_threshold(*default)
    for engine in lanes.values():
        await engine.aclose()
    await client.aclose()
    return results, await census(urls["paced"], LEVELS[-1])


def _median(levels: list[Level], figure: Callable[[Level], float]) -> float:
    return statistics.median(figure(lv) for lv in levels)


def table(results: Results, server: str) -> str:
    capacity = server == "paced"
    rows = [
        "| engine | agents | turns/s | runs/s | × 1 agent | of capacity | aerix latency/turn p50 | p99 "
        "| client CPU/turn | worst stall | worst stall, CPU | longest GC | full GCs/s |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for key in ENGINES:
        if key[0] != server:
            continue
        base = _median(results[(*key, LEVELS[0])], lambda lv: lv.turns_per_s)
        for n in LEVELS:
            levels = results[(*key, n)]
            tps = _median(levels, lambda lv: lv.turns_per_s)
            share = f"{tps / CAPACITY:.0%}" if capacity else "–"
            rows.append(
                f"| {key[1]} | {n} | {tps:.0f} | {tps / (CALLS + 1):.1f} | {tps / base:.1f} | {share} "
                f"| {_median(levels, lambda lv: pct(lv.gaps, 0.5)) * 1e3:.2f} ms "
                f"| {_median(levels, lambda lv: pct(lv.gaps, 0.99)) * 1e3:.2f} ms "
                f"| {_median(levels, lambda lv: lv.cpu / lv.turns) * 1e3:.2f} ms "
                f"| {_median(levels, lambda lv: lv.worst_wall) * 1e3:.1f} ms "
                f"| {_median(levels, lambda lv: lv.worst_cpu) * 1e3:.1f} ms "
                f"| {_median(levels, lambda lv: lv.longest_gc) * 1e3:.1f} ms "
                f"| {_median(levels, lambda lv: lv.full_gcs / lv.seconds):.1f} |"
            )
    return "\n".join(rows)


def _and(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def reading(results: Results, heap: Census, load_before: float, load_after: float) -> str:
    """What the tables say, in words computed from them (so it stays true on a rerun)."""

    def fig(server: str, mode: str, n: int, figure: Callable[[Level], float]) -> float:
        return _median(results[server, mode, n], figure)

    def tps(server: str, mode: str, n: int) -> float:
        return fig(server, mode, n, lambda lv: lv.turns_per_s)

    paced = {n: tps("paced", "aerix", n) for n in LEVELS}
    growth = ", ".join(f"{paced[n]:.0f} turns/s with {n}" for n in LEVELS)
    full = [n for n in LEVELS if paced[n] >= 0.9 * CAPACITY]
    if full:
        shares = [paced[n] / CAPACITY for n in LEVELS if n >= full[0]]
        saturation = (
            f"from {full[0]} agents on, the server was saturated ({min(shares):.0%} to "
            f"{max(shares):.0%} of its capacity) and throughput levelled off there"
        )
    else:
        saturation = (
            f"it never reached 90% of the server's capacity (at most {max(paced.values()) / CAPACITY:.0%})"
        )
    cpus = [fig("instant", "aerix", n, lambda lv: lv.cpu / lv.turns) * 1e3 for n in LEVELS]
    ceiling = max(tps("instant", "aerix", n) for n in LEVELS)
    first, last = LEVELS[0], LEVELS[-1]

    def latency(n: int, q: float) -> float:
        return fig("paced", "aerix", n, lambda lv: pct(lv.gaps, q)) * 1e3

    stalls = []
    for server, mode in ENGINES:
        if mode == "one httpx client":
            continue
        walls = {n: fig(server, mode, n, lambda lv: lv.worst_wall) for n in LEVELS}
        met = [str(n) for n in LEVELS if walls[n] <= TARGET]
        missed = [str(n) for n in LEVELS if walls[n] > TARGET]
        verdict = (
            "met at every level"
            if not missed
            else ("met at " + _and(met) + ", not at " if met else "not met at ") + _and(missed)
        )
        each = ", ".join(f"{walls[n] * 1e3:.1f} ms with {n}" for n in LEVELS)
        peak = max((lv for n in LEVELS for lv in results[server, mode, n]), key=lambda lv: lv.worst_wall)
        stalls.append(
            f"  - *{mode}*, {server} server: {each} agents: {verdict} (the worst single round: "
            f"{peak.worst_wall * 1e3:.1f} ms with {peak.agents} agents, where no callback took over "
            f"{peak.worst_cpu * 1e3:.1f} ms of CPU)."
        )

    def gc_at(mode: str, figure: Callable[[Level], float]) -> float:
        return fig("paced", mode, last, figure)

    over = [lv for levels in results.values() for lv in levels if lv.worst_wall > TARGET]
    by_gc = [lv for lv in over if lv.longest_gc >= 0.8 * lv.worst_wall]
    by_os = [lv for lv in over if lv not in by_gc and lv.worst_cpu <= TARGET]
    rest = len(over) - len(by_gc) - len(by_os)
    others = (
        f"; in {rest} a callback took over {TARGET * 1e3:.0f} ms of CPU, less than 80% of it collecting"
        if rest
        else ""
    )
    tuned = [lv for (_, mode, _), levels in results.items() if mode == TUNED for lv in levels]
    tuned_full, tuned_seconds = sum(lv.full_gcs for lv in tuned), sum(lv.seconds for lv in tuned)
    worst_cpu = max(fig(s, m, n, lambda lv: lv.worst_cpu) for s, m in ENGINES for n in LEVELS) * 1e3
    stall_lines = "\n".join(stalls)
    first_saturates = "the paced server" if ceiling > CAPACITY else "the client"
    busy = max(load_before, load_after) > 1.5
    shared = (
        "other work shared the machine's 2 cores, so absolute rates and wall times are noisy; "
        "the engines took turns, so their ratios are less so"
        if busy
        else "the machine was otherwise quiet; the benchmark's own two processes share its 2 cores"
    )
    return f"""Reading it (load average {load_before:.1f} before the run and {load_after:.1f} after:
{shared}):

- Throughput against the paced server (capacity {CAPACITY:.0f} turns/s: {SLOTS} slots, {TURN_SECONDS * 1e3:.0f} ms a
  turn): {growth} agents; {saturation}.
- The client's ceiling, against the instant server: {min(cpus):.2f} to {max(cpus):.2f} ms of CPU per turn,
  at most {ceiling:.0f} turns/s on one core, {ceiling / CAPACITY:.1f}× the paced server's capacity: so
  {first_saturates} saturates first.
- The latency aerix adds per turn (paced server, default settings): p50 {latency(first, 0.5):.2f} ms and p99
  {latency(first, 0.99):.2f} ms with {first} agent, p50 {latency(last, 0.5):.2f} ms and p99 {latency(last, 0.99):.2f} ms with {last}
  (which includes waiting for the loop while other agents' steps run).
- Stalls, against the 10 ms target (each level's worst, median over rounds):
{stall_lines}

  Of the {len(over)} levels (of every engine and round) whose worst stall was over the target, in
  {len(by_gc)} a garbage collection made at least 80% of it, and in {len(by_os)} more no callback took over
  {TARGET * 1e3:.0f} ms of CPU: the OS was running other processes{others}. With {last} agents on the paced server the
  longest collection took {gc_at("aerix", lambda lv: lv.longest_gc) * 1e3:.0f} ms with the default settings and {gc_at(TUNED, lambda lv: lv.longest_gc) * 1e3:.1f} ms tuned; by default
  full collections ran {gc_at("aerix", lambda lv: lv.full_gcs / lv.seconds):.1f} times a second there, and tuned there were {tuned_full} in all
  {tuned_seconds:.0f} s of tuned runs. A full collection scans every live object that is not frozen: with
  {last} agents on the paced server, each agent in the middle of a run held {heap.per_agent:.0f} tracked objects (its
  conversation, its events, the request in flight in httpx and httpcore) and each connection
  {heap.per_connection:.0f}, so the pause grows with the agents; the tuned settings make full collections rare,
  not shorter. The most CPU time any callback took was {worst_cpu:.1f} ms (collections included,
  median over rounds)."""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=2.0, help="per level, engine and round")
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    load_before = os.getloadavg()[0]
    paced_proc, paced_url = start_server("--tokens", str(TOKENS), "--pace", str(PACE), "--slots", str(SLOTS))
    instant_proc, instant_url = start_server()
    try:
        results, heap = asyncio.run(
            bench({"paced": paced_url, "instant": instant_url}, args.rounds, args.seconds)
        )
    finally:
        for proc in (paced_proc, instant_proc):
            proc.terminate()
            proc.wait(timeout=10)
    modes = "\n".join(f"- *{mode}*: {what}." for (_, mode), what in ENGINES.items() if what)
    text = f"""## Concurrency: many agents, one event loop, one server

Machine: {_report.machine()}.

`python bench/concurrency.py --rounds {args.rounds} --seconds {args.seconds:g}`. Closed-loop
agents on one event loop (each runs one `Agent.ask` after another, a fresh `Agent` per run),
sharing one `OpenAICompatible` engine, against a fake OpenAI-compatible server in a separate
process on 127.0.0.1 that streams canned SSE turns: {CALLS} turns that each call an async no-op
tool, then a final (6 requests per run). The *paced* server behaves like an inference server:
each turn streams {TOKENS + 4} chunks {PACE * 1e3:g} ms apart ({TURN_SECONDS * 1e3:.0f} ms a turn) and at most {SLOTS}
generations run at once (the rest queue), so it saturates at {SLOTS} / {TURN_SECONDS:g} s = **{CAPACITY:.0f} turns/s**
({CAPACITY / (CALLS + 1):.1f} runs/s) while waiting costs it no CPU. The *instant* server writes each turn at
once, so the client's CPU is the limit: it measures the client's ceiling. Each figure is the
median of {args.rounds} rounds of {args.seconds:g} s per level (the runs under way at the end finish
outside the throughput window); engines and levels take turns within each round.

{modes}

- *turns/s*, *runs/s*: turns (and runs) completed per second of the window; *of capacity*: turns/s over the
  paced server's {CAPACITY:.0f} turns/s.
- *aerix latency/turn*: from the engine yielding a generation's done delta to the server having
  read the same run's next request (the server stamps it on the shared monotonic clock, before
  the request waits for a slot): parsing the turn, the events, the tool, the result message,
  building, encoding and sending the request through httpx, and waiting for the loop while
  other agents run.
- *client CPU/turn*: this process's CPU time per turn (aerix, httpx, the measuring); with few
  agents on the paced server it includes the idle event loop's own wake-ups.
- *worst stall*: the longest wall time one event-loop callback (one task step) held the loop,
  garbage collection inside it included: every other task waits that long. *worst stall, CPU*:
  the most CPU time one callback took, collections included; unlike wall time, it leaves out
  the OS running other processes.
- *longest GC*: the longest garbage collection (wall time); *full GCs/s*: full (generation 2)
  collections per second, each of which scans every live object.

Paced server ({SLOTS} slots, {TURN_SECONDS * 1e3:.0f} ms a turn, capacity {CAPACITY:.0f} turns/s):

{table(results, "paced")}

Instant server (the client's ceiling):

{table(results, "instant")}

{reading(results, heap, load_before, os.getloadavg()[0])}
"""
    print(text)
    if not args.no_write:
        print("wrote", _report.write_section("concurrency", text))


if __name__ == "__main__":
    main()
