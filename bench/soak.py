"""Soak: many runs on one agent, and many agents on one loop, leak nothing.

Two parts, on one event loop:

1. `runs` runs (10,000) on one agent, `reset()` between them. The runs cycle
   through ten scenarios: six ordinary runs (an async tool and a sync tool,
   then a final), a bad turn that is retried, an engine failure mid-stream,
   a stalled generation aborted by the consumer, and a run closed early by
   the consumer (`aclose()`). Every run's ending is checked against its
   scenario.
2. `agents` agents (1,000) running at once with `asyncio.gather`, `rounds`
   times, the same ten scenarios spread over them.

At checkpoints (every `checkpoint_every` runs, and after each round) it
records, after a `gc.collect()`: the Python heap traced by `tracemalloc`, the
process RSS, the event loop's live tasks and the live threads. Memory must be
flat once warm, the tasks the same as before, and the threads at most the
tool pool's size more.

Each generation gets a fresh `ScriptedModel` (through `Swap`): a
`ScriptedModel` records every call it plays, by design, so one model kept for
10,000 runs would measure the test double, not the agent.

Run from the repository root:

    python bench/soak.py [--runs 10000] [--agents 1000] [--rounds 5] [--no-write]

It prints the figures and writes them to the `soak` section of docs/benchmarks.md.
tests/test_reliability.py runs a small version (200 runs, 100 agents).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import sys
import threading
import time
import tracemalloc
import weakref
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from aerix import AbortController, Agent, AgentEvent, ChatMessage, Delta, EndEvent, FinalEvent, tool
from aerix import _workers as aerix_workers
from aerix.testing import Fail, ScriptedModel, Stall

CALLS = '{"calls":[{"tool":"weather","input":{"city":"Lisbon"}},{"tool":"convert","input":{"c":21}}]}'
FINAL = '{"final":"Pack an umbrella."}'

# scenario -> (script, how the consumer behaves, the expected ending)
SCENARIOS: list[tuple[list[Any], str, str]] = [
    *[([CALLS, FINAL], "consume", "final")] * 6,
    (["not json", FINAL], "consume", "final"),
    ([Fail(text='{"final":"Pa', error="engine lost")], "consume", "error"),
    ([Stall(text='{"fi')], "abort-on-text", "abort"),
    ([CALLS, FINAL], "close-after-3", "closed"),
]


@tool
async def weather(city: str) -> str:
    """Today's forecast for a city."""
    await asyncio.sleep(0)
    return f"Rain in {city}"


@tool
def convert(c: int) -> float:
    """Celsius to Fahrenheit (a sync tool: it runs on the tool thread pool)."""
    return c * 9 / 5 + 32


class Swap:
    """A model that plays a fresh `ScriptedModel` per run."""

    def __init__(self) -> None:
        self.inner = ScriptedModel()

    def load(self, script: list[Any]) -> None:
        self.inner = ScriptedModel(script, chunk_size=16)

    def chat(self, messages: list[ChatMessage], opts: Any = None) -> AsyncIterator[Delta]:
        return self.inner.chat(messages, opts)


def new_agent() -> tuple[Agent, Swap]:
    model = Swap()
    agent = Agent(model=model, instructions="Soak.", tools=[weather, convert], limits={"turns": 4})
    LIVE_AGENTS.add(agent)
    return agent, model


PEAK = {"threads": 0}
SHARED = AbortController()
LIVE_AGENTS: weakref.WeakSet[Agent] = weakref.WeakSet()
LIVE_RUNS: weakref.WeakSet[Any] = weakref.WeakSet()


def idle_workers_max() -> int:
    """How many idle worker threads aerix keeps for sync tools (its pool's bound)."""
    workers = getattr(aerix_workers, "_Workers", None)
    return int(getattr(workers, "MAX_IDLE", min(32, (os.cpu_count() or 1) + 4)))


async def one_run(agent: Agent, model: Swap, scenario: int) -> bool:
    """Play one scenario on `agent`; whether it ended as the scenario expects."""
    script, consumer, expected = SCENARIOS[scenario % len(SCENARIOS)]
    model.load(script)
    # one long-lived signal (an app's shutdown switch) for every run that is not aborted: a run
    # that did not stop following it would leave a callback on it per run
    controller = AbortController() if consumer == "abort-on-text" else SHARED
    stream = agent.run("Umbrella?", signal=controller.signal)
    LIVE_RUNS.add(stream)
    events: list[AgentEvent] = []
    async for ev in stream:
        events.append(ev)
        if ev.type == "result":
            PEAK["threads"] = max(PEAK["threads"], threading.active_count())
        if consumer == "abort-on-text" and ev.type == "text":
            controller.abort("soak")
        if consumer == "close-after-3" and len(events) == 3:
            break
    if consumer == "close-after-3":
        await stream.aclose()  # type: ignore[attr-defined]
        return not agent.busy and not any(isinstance(e, FinalEvent | EndEvent) for e in events)
    last = events[-1]
    ok = (
        isinstance(last, FinalEvent)
        if expected == "final"
        else isinstance(last, EndEvent) and last.reason == expected
    )
    return ok and not agent.busy


def rss_kib() -> int:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def traced_files() -> dict[str, int]:
    """Bytes traced by tracemalloc by the file that allocated them, less what this script
    itself allocated (its figures)."""
    snapshot = tracemalloc.take_snapshot().filter_traces(
        [tracemalloc.Filter(False, __file__), tracemalloc.Filter(False, tracemalloc.__file__)]
    )
    return {str(stat.traceback[0].filename): stat.size for stat in snapshot.statistics("filename")}


def traced_growth(before: dict[str, Any], after: dict[str, Any], top: int = 8) -> list[str]:
    """The files whose traced heap grew most from one checkpoint to another: where a leak is."""
    grown = {f: after["files"].get(f, 0) - before["files"].get(f, 0) for f in after["files"]}
    ranked = sorted(grown.items(), key=lambda item: -item[1])[:top]
    return [f"{name}: {size / 1024:+.1f} KiB" for name, size in ranked if size > 0]


def checkpoint(label: str, done: int, started: float) -> dict[str, Any]:
    gc.collect()
    files = traced_files()
    return {
        "label": label,
        "runs": done,
        "traced_kib": round(sum(files.values()) / 1024, 1),
        "files": files,
        "rss_kib": rss_kib(),
        "tasks": len(asyncio.all_tasks()),
        "threads": threading.active_count(),
        "agents": len(LIVE_AGENTS),
        "generators": len(LIVE_RUNS),
        "seconds": round(time.perf_counter() - started, 2),
    }


async def soak(
    *, runs: int = 10_000, agents: int = 1_000, rounds: int = 5, checkpoint_every: int = 1_000
) -> dict[str, Any]:
    """Run both parts; return the figures."""
    started_tracing = not tracemalloc.is_tracing()
    if started_tracing:
        tracemalloc.start()
    try:
        gc.collect()
        tasks_before = len(asyncio.all_tasks())
        threads_before = threading.active_count()
        start = time.perf_counter()
        outcomes_ok = True

        agent, model = new_agent()
        checkpoints = [checkpoint("start", 0, start)]
        for i in range(runs):
            outcomes_ok &= await one_run(agent, model, i)
            agent.reset()
            if (i + 1) % checkpoint_every == 0:
                checkpoints.append(checkpoint(f"after {i + 1} runs", i + 1, start))
        one_agent_seconds = time.perf_counter() - start
        del agent, model

        peak_one_agent = PEAK["threads"]
        PEAK["threads"] = 0
        concurrent = [checkpoint("before", 0, time.perf_counter())]
        start2 = time.perf_counter()
        for r in range(rounds):
            pairs = [new_agent() for _ in range(agents)]
            results = await asyncio.gather(*(one_run(a, m, j) for j, (a, m) in enumerate(pairs)))
            outcomes_ok &= all(results) and not any(a.busy for a, _ in pairs)
            del pairs, results
            concurrent.append(checkpoint(f"after round {r + 1}", agents * (r + 1), start2))
        concurrent_seconds = time.perf_counter() - start2

        await asyncio.sleep(0)
        gc.collect()
        return {
            "runs": runs,
            "agents": agents,
            "rounds": rounds,
            "outcomes_ok": outcomes_ok,
            "checkpoints": checkpoints,
            "concurrent": concurrent,
            "tasks_before": tasks_before,
            "tasks_after": len(asyncio.all_tasks()),
            "threads_before": threads_before,
            "threads_after": threading.active_count(),
            "pool_max": idle_workers_max(),
            "peak_threads_one_agent": peak_one_agent,
            "peak_threads_concurrent": PEAK["threads"],
            "one_agent_seconds": one_agent_seconds,
            "concurrent_seconds": concurrent_seconds,
        }
    finally:
        if started_tracing:
            tracemalloc.stop()


def table(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| checkpoint | runs | traced heap (KiB) | RSS (KiB) | tasks | threads | live agents | live runs |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for c in rows:
        lines.append(
            f"| {c['label']} | {c['runs']} | {c['traced_kib']} | {c['rss_kib']} | {c['tasks']} "
            f"| {c['threads']} | {c['agents']} | {c['generators']} |"
        )
    return "\n".join(lines)


def report(f: dict[str, Any], machine: str) -> str:
    warm = f["checkpoints"][1] if len(f["checkpoints"]) > 1 else f["checkpoints"][0]
    last = f["checkpoints"][-1]
    c0, cn = f["concurrent"][min(2, len(f["concurrent"]) - 1)], f["concurrent"][-1]
    runs_per_s = f["runs"] / f["one_agent_seconds"]
    return f"""## Soak

`python bench/soak.py` on {machine}.

{f["runs"]:,} runs on one agent (`reset()` between them), cycling through ten
scenarios: six ordinary runs (an async tool and a sync tool, then a final), a
retried bad turn, an engine failure mid-stream, a stalled generation aborted by
the consumer, and a run closed early with `aclose()`. Then {f["agents"]:,} agents
at once on one loop, {f["rounds"]} rounds. Every run ended as its scenario
expects: **{"yes" if f["outcomes_ok"] else "NO"}**. Memory is measured after
`gc.collect()`: tracemalloc's traced Python heap (less this script's own figures)
and the process RSS.

One agent, {f["runs"]:,} runs in {f["one_agent_seconds"]:.1f} s ({runs_per_s:,.0f} runs/s):

{table(f["checkpoints"])}

Traced heap from "{warm["label"]}" to "{last["label"]}": {warm["traced_kib"]} → {last["traced_kib"]} KiB
({last["traced_kib"] - warm["traced_kib"]:+.1f} KiB over {last["runs"] - warm["runs"]:,} runs).

{f["agents"]:,} concurrent agents, {f["rounds"]} rounds in {f["concurrent_seconds"]:.1f} s:

{table(f["concurrent"])}

Traced heap after each round: {" → ".join(str(c["traced_kib"]) for c in f["concurrent"][1:])} KiB
(from round 2 to round {f["rounds"]}: {cn["traced_kib"] - c0["traced_kib"]:+.1f} KiB).
No agent and no run outlives its batch of agents ("live agents" counts the soak's `Agent` objects
still alive, "live runs" the runs' async generators, after `gc.collect()`); what stays is the latest
batch's finished `asyncio.gather` and its tasks (held until the next batch replaces them) and the
worker threads' state.
Live tasks before and after: {f["tasks_before"]} → {f["tasks_after"]}. Threads before and after:
{f["threads_before"]} → {f["threads_after"]} (aerix keeps at most {f["pool_max"]} idle worker threads
for sync tools). Peak threads seen: {f["peak_threads_one_agent"]} with one agent,
{f["peak_threads_concurrent"]} with {f["agents"]:,} agents at once (a sync tool call starts a new worker
thread whenever none is idle).
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--agents", type=int, default=1_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--checkpoint-every", type=int, default=1_000)
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import _report

    figures = asyncio.run(
        soak(runs=args.runs, agents=args.agents, rounds=args.rounds, checkpoint_every=args.checkpoint_every)
    )
    text = report(figures, _report.machine())
    print(text)
    if not args.no_write:
        print("wrote", _report.write_section("soak", text))
    leaked = figures["tasks_after"] != figures["tasks_before"]
    return 0 if figures["outcomes_ok"] and not leaked else 1


if __name__ == "__main__":
    raise SystemExit(main())
