"""Many agents on one event loop against one OpenAI-compatible server.

A fake server (`fake_openai_server.py`) runs in a separate process on
127.0.0.1 and streams canned turns: 5 turns that each call the trivial tool
`ping`, then a final. Its CPU is not this process's, so what is measured here
is aerix (the loop, the `OpenAICompatible` engine, httpx) under load.

For 1, 16, 64 and 256 concurrent agents (each a closed loop: one run after
another, a fresh `Agent` per run, all sharing one engine), it measures:

- runs/s: completed runs per second of wall time (each run is 6 requests);
- aerix latency per turn, p50 and p99: from the moment the engine yields a
  generation's done delta to the moment the server has read the next request
  of the same run. That span is all of aerix's work between two generations
  (parse the turn, emit events, run the tool, render the result, build,
  encode and send the request), plus the time the task waits for the loop
  while other agents run: the latency aerix adds to each turn;
- client CPU per turn: this process's CPU time over the requests sent;
- event-loop stalls: the lateness of a ticker task that awaits
  `asyncio.sleep(0.001)` in a loop, and, to explain it, the longest CPU time
  of one loop callback and the longest garbage-collector pause.

Three engines take turns: aerix's default (one httpx client per connection),
the same after `gc.freeze()`, and one shared httpx client with its own pool.
Every figure is the median over the rounds. Run from the repository root:

    python bench/concurrency.py [--rounds 3] [--seconds 2] [--no-write]

It prints the table and writes it to the `concurrency` section of
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
from collections.abc import AsyncIterator
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
    """A `Model` that passes the engine's deltas through, noting when each done delta arrives."""

    def __init__(self, engine: OpenAICompatible) -> None:
        self.engine = engine

    async def chat(
        self, messages: list[ChatMessage], opts: GenerateOptions | None = None
    ) -> AsyncIterator[Delta]:
        async for delta in self.engine.chat(messages, opts):
            if delta.done:
                _timeline.get().done_at = time.monotonic()  # the clock the server stamps with
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
    runs: int
    seconds: float
    requests: int
    gaps: list[float]
    stalls: list[float]
    cpu: float
    longest_cpu: float
    longest_gc: float
    server_busy: float

    @property
    def runs_per_s(self) -> float:
        return self.runs / self.seconds


class LoopClock:
    """Times the event loop's callbacks (a task step is one) and Python's garbage collections.

    `longest_cpu` is the most CPU time one callback took, less the collections
    that ran inside it: aerix's (and httpx's) own longest blocking step, which
    neither the OS descheduling this process nor the collector inflates.
    `longest_gc` is the longest collection.
    """

    def __init__(self) -> None:
        self.longest_cpu = 0.0
        self.longest_gc = 0.0
        self._gc_total = 0.0
        self._gc_start = 0.0
        self._run = asyncio.events.Handle._run

    def _on_gc(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._gc_start = time.thread_time()
        else:
            took = time.thread_time() - self._gc_start
            self._gc_total += took
            self.longest_gc = max(self.longest_gc, took)

    def __enter__(self) -> LoopClock:
        run, clock = self._run, self

        def timed(handle: asyncio.Handle) -> None:
            start, gc0 = time.thread_time(), clock._gc_total
            run(handle)
            took = time.thread_time() - start - (clock._gc_total - gc0)
            if took > clock.longest_cpu:
                clock.longest_cpu = took

        asyncio.events.Handle._run = timed  # type: ignore[method-assign]
        gc.callbacks.append(self._on_gc)
        return self

    def __exit__(self, *exc: object) -> None:
        asyncio.events.Handle._run = self._run  # type: ignore[method-assign]
        gc.callbacks.remove(self._on_gc)


async def ticker(stalls: list[float], stop: asyncio.Event) -> None:
    while not stop.is_set():
        start = time.perf_counter()
        await asyncio.sleep(0.001)
        stalls.append(time.perf_counter() - start - 0.001)


def cpu_seconds(pid: int) -> float:
    """CPU time (user + system) a process has used so far, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def run_level(model: Timed, agents: int, seconds: float, counter: list[int], server: int) -> Level:
    """Keep `agents` runs going at once for about `seconds`; count what completes."""
    deadline = time.perf_counter() + seconds
    gaps: list[float] = []
    runs = 0

    async def worker() -> None:
        nonlocal runs
        while time.perf_counter() < deadline:
            line = Timeline()
            _timeline.set(line)
            agent = Agent(model=model, tools=[ping], limits={"turns": CALLS + 2})
            answer = await agent.ask("ping until told otherwise")
            if answer.text != "pong":
                raise RuntimeError(f"unexpected answer {answer.text!r}")
            runs += 1
            gaps.extend(line.gaps)

    stalls: list[float] = []
    stop = asyncio.Event()
    tick = asyncio.create_task(ticker(stalls, stop))
    server0 = cpu_seconds(server)
    requests0, cpu0, start = counter[0], time.process_time(), time.perf_counter()
    with LoopClock() as clock:
        await asyncio.gather(*(worker() for _ in range(agents)))
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu0
    server_busy = (cpu_seconds(server) - server0) / elapsed
    stop.set()
    await tick
    return Level(
        agents=agents,
        runs=runs,
        seconds=elapsed,
        requests=counter[0] - requests0,
        gaps=gaps,
        stalls=stalls,
        cpu=cpu,
        longest_cpu=clock.longest_cpu,
        longest_gc=clock.longest_gc,
        server_busy=server_busy,
    )


def start_server() -> tuple[subprocess.Popen[str], str]:
    script = Path(__file__).with_name("fake_openai_server.py")
    proc = subprocess.Popen(
        [sys.executable, str(script), "--port", "0", "--calls", str(CALLS)],
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


MODES = {
    "aerix (lanes)": "aerix's own connections, one client per connection (the default)",
    "aerix + gc.freeze()": "the same, after `gc.collect(); gc.freeze()` at start-up",
    "one httpx client": "`http_client=httpx.AsyncClient(...)`: one client, httpx's pool of 256",
}


async def bench(
    base_url: str, server: int, rounds: int, seconds: float
) -> dict[tuple[str, int], list[Level]]:
    counter = [0]

    async def count(request: httpx.Request) -> None:
        counter[0] += 1

    hooks = {"request": [count], "response": [on_response]}
    lanes = OpenAICompatible(base_url, "fake", event_hooks=hooks)
    client = httpx.AsyncClient(
        event_hooks=hooks,
        limits=httpx.Limits(max_connections=256, max_keepalive_connections=256),
        timeout=httpx.Timeout(120.0, connect=5.0, pool=None),
    )
    pooled = OpenAICompatible(base_url, "fake", http_client=client)
    engines = {"aerix (lanes)": lanes, "aerix + gc.freeze()": lanes, "one httpx client": pooled}
    for engine in (lanes, pooled):  # warm-up: connections, imports, caches
        await run_level(Timed(engine), 16, 0.5, counter, server)
    results: dict[tuple[str, int], list[Level]] = {(m, n): [] for m in MODES for n in LEVELS}
    for r in range(rounds):
        for mode, engine in engines.items():
            frozen = "freeze" in mode
            if frozen:
                gc.collect()
                gc.freeze()
            for n in LEVELS:
                level = await run_level(Timed(engine), n, seconds, counter, server)
                results[mode, n].append(level)
                print(
                    f"round {r + 1} {mode:<20} agents={n:>3}: {level.runs_per_s:6.1f} runs/s, "
                    f"latency/turn p50 {pct(level.gaps, 0.5) * 1e3:.2f} ms "
                    f"p99 {pct(level.gaps, 0.99) * 1e3:.2f} ms, "
                    f"worst tick lateness {max(level.stalls) * 1e3:.1f} ms, "
                    f"longest callback {level.longest_cpu * 1e3:.2f} ms CPU, "
                    f"longest GC {level.longest_gc * 1e3:.1f} ms, "
                    f"server busy {level.server_busy:.0%}",
                    file=sys.stderr,
                )
            if frozen:
                gc.unfreeze()
    await lanes.aclose()
    await client.aclose()
    return results


def table(results: dict[tuple[str, int], list[Level]]) -> str:
    med = statistics.median
    rows = [
        "| engine | agents | runs/s | × 1 agent | turns/s | aerix latency/turn p50 | p99 "
        "| client CPU/turn | worst tick lateness | p99 tick lateness | longest callback (CPU, no GC) "
        "| longest GC pause | server CPU |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for mode in MODES:
        base = med(lv.runs_per_s for lv in results[mode, LEVELS[0]])
        for n in LEVELS:
            levels = results[mode, n]
            rps = med(lv.runs_per_s for lv in levels)
            rows.append(
                f"| {mode} | {n} | {rps:.1f} | {rps / base:.2f} | {rps * (CALLS + 1):.0f} "
                f"| {med(pct(lv.gaps, 0.5) for lv in levels) * 1e3:.2f} ms "
                f"| {med(pct(lv.gaps, 0.99) for lv in levels) * 1e3:.2f} ms "
                f"| {med(lv.cpu / lv.requests for lv in levels) * 1e3:.2f} ms "
                f"| {med(max(lv.stalls) for lv in levels) * 1e3:.1f} ms "
                f"| {med(pct(lv.stalls, 0.99) for lv in levels) * 1e3:.2f} ms "
                f"| {med(lv.longest_cpu for lv in levels) * 1e3:.2f} ms "
                f"| {med(lv.longest_gc for lv in levels) * 1e3:.1f} ms "
                f"| {med(lv.server_busy for lv in levels):.0%} |"
            )
    return "\n".join(rows)


def reading(results: dict[tuple[str, int], list[Level]], load_before: float, load_after: float) -> str:
    """What the table says, in words computed from it (so it stays true on a rerun)."""
    med = statistics.median

    def rps(mode: str, n: int) -> float:
        return med(lv.runs_per_s for lv in results[mode, n])

    lanes, single = "aerix (lanes)", "one httpx client"
    best = max(LEVELS, key=lambda n: rps(lanes, n))
    vs_single = ", ".join(f"{rps(lanes, n) / rps(single, n):.1f}× at {n}" for n in LEVELS[1:])
    callback = max(med(lv.longest_cpu for lv in results[m, n]) for m in MODES for n in LEVELS) * 1e3
    outlier = max(lv.longest_cpu for levels in results.values() for lv in levels) * 1e3
    worst = max(med(max(lv.stalls) for lv in results[m, n]) for m in MODES for n in LEVELS) * 1e3
    gc_default = med(lv.longest_gc for lv in results[lanes, LEVELS[-1]]) * 1e3
    gc_frozen = med(lv.longest_gc for lv in results["aerix + gc.freeze()", LEVELS[-1]]) * 1e3
    server = max(med(lv.server_busy for lv in results[m, n]) for m in MODES for n in LEVELS)
    cpus = [med(lv.cpu / lv.requests for lv in results[lanes, n]) * 1e3 for n in LEVELS]
    cpu_lo, cpu_hi = min(cpus), max(cpus)
    verdict = "under" if worst < 10 else "over"
    p99_one = med(pct(lv.stalls, 0.99) for lv in results[lanes, LEVELS[0]]) * 1e3
    return f"""Reading it (load average {load_before:.1f} before the run and {load_after:.1f} after:
other work shared the machine, so absolute rates are noisy; the engines took turns, so their
ratios are less so):

- Throughput: aerix's connections peaked at {best} agents; against one shared httpx client they
  did {vs_single} agents. The fake server never used more than {server:.0%} of a core, so
  it is not what limits throughput: the client is, at {cpu_lo:.2f} to {cpu_hi:.2f} ms of CPU per turn
  with aerix's connections (a profile puts most of it in httpx and httpcore).
- Stalls: the median worst tick lateness reached {worst:.0f} ms ({verdict} the 10 ms target). No
  single callback of aerix or httpx took more than {callback:.2f} ms of CPU (median over rounds;
  the largest one seen was {outlier:.2f} ms); the lateness is the garbage collector (its longest
  pause at {LEVELS[-1]} agents: {gc_default:.0f} ms, {gc_frozen:.0f} ms after `gc.freeze()`) and, once
  the client's core is saturated, every other ready agent's step in the same loop iteration.
  With one agent the p99 tick lateness was {p99_one:.1f} ms."""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=2.0, help="per level, engine and round")
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    load_before = os.getloadavg()[0]
    proc, base_url = start_server()
    try:
        results = asyncio.run(bench(base_url, proc.pid, args.rounds, args.seconds))
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    modes = "\n".join(f"- *{mode}*: {what}." for mode, what in MODES.items())
    text = f"""## Concurrency: many agents, one event loop, one server

Machine: {_report.machine()}.

`python bench/concurrency.py --rounds {args.rounds} --seconds {args.seconds:g}`. Closed-loop
agents on one event loop (each runs one `Agent.ask` after another, a fresh `Agent` per run),
sharing one `OpenAICompatible` engine, against a fake OpenAI-compatible server in a separate
process on 127.0.0.1 that streams canned SSE turns: {CALLS} turns that each call an async no-op
tool, then a final (6 requests per run). Each figure is the median of {args.rounds} rounds of
{args.seconds:g} s per level; engines and levels take turns within each round.

{modes}

- *aerix latency/turn*: from the engine yielding a generation's done delta to the server having
  read the same run's next request (the server stamps it on the shared monotonic clock):
  parsing the turn, the events, the tool, the result message, building, encoding and sending
  the request through httpx, and waiting for the loop while other agents run.
- *client CPU/turn*: this process's CPU time per request (aerix, httpx, the measuring).
- *tick lateness*: how late a task awaiting `asyncio.sleep(0.001)` in a loop wakes up (the
  brief's stall measure). It counts everything ahead of the ticker: garbage collection, and,
  once the client's CPU is saturated, every other agent's ready work in the same loop
  iteration.
- *longest callback*: the most CPU time one event-loop callback (one task step) took, garbage
  collection taken out: the longest that aerix or httpx code ever held the loop.
- *longest GC pause*: Python's cyclic garbage collector, which stops the loop while it scans.
- *server CPU*: the fake server process's CPU time over the wall time (100% = one core).

{table(results)}

{reading(results, load_before, os.getloadavg()[0])}
"""
    print(text)
    if not args.no_write:
        print("wrote", _report.write_section("concurrency", text))


if __name__ == "__main__":
    main()
