"""Many conversations on one engine (`LlamaCpp(kv_slots=...)`), and the time to the first turn.

Run from the repository root:

    python bench/kv_slots.py [--turns 10] [--runs 4] [--reps 3] [--part ...] [--no-write]

It prints the tables and writes them to docs/benchmarks.md (sections "kv_slots" and
"first_turn"; not with `--no-write`).

1. Two agents taking turns (`--part agents`): a travel helper with a weather tool and
   a maths helper with the calculator, each a real `Agent` on SmolLM2-135M-Instruct,
   one engine for both, alternating `--turns` user turns each (greedy). Per turn (one
   `run`, its tool call and answer): the prompt tokens prefilled (the generations'
   prompt tokens less their cached ones) and the wall time, with `kv_slots=4` and
   with `kv_slots=1`, each configuration on an engine of its own, the two run turn by
   turn in lockstep so that a change in the machine's load falls on both.
2. An agent and its sub-agent (`--part subagent`): a trip planner whose tool
   `ask_expert` is another `Agent` (a geography expert with a lookup tool) as a tool
   (`as_tool`: a fresh conversation each call), three calls a run, one for each place of the trip (the
   first forced by `tool_choice`; hooks give each call the next place, refuse a
   fourth and ask for the next place when the planner answers early), `--runs` runs,
   the same figures per run.
3. How a conversation waits (`--part storage`), on raw llama-cpp-python: as one of four
   sequences in one context (llama.cpp's way to keep several conversations: a
   unified KV cache, so each may grow to the whole context), against a copy of its
   KV state out of the context. The cost of a decode and of a prefill chunk for a
   900-token conversation alone and beside three others, and of copying its state
   out and back.
4. The first turn (`--part first`): the demo's first generation (`aerix run "What is
   17 * 23?"`: its tools and instructions) on a freshly loaded engine, against
   llama-cpp-python with its default threads on the same prompt tokens (prefill,
   then as many greedy tokens as the turn took), on the machine as it is and with
   one CPU kept busy by another process (a Python busy loop); each in a process of
   its own, `--reps` times, medians. aerix's default chooses each prefill's threads
   from the CPUs idle then; "aerix, half the CPUs" fixes them at `default_threads()`,
   the engine's decoding default.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import aclosing, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aerix
from _report import machine, write_section
from aerix import Agent, Limits, tool
from aerix.demo_tools import DEMO_TOOLS
from aerix.engines import LlamaCpp
from aerix.engines.llamacpp import _open
from cpu import one_cpu_busy

N_CTX = 4096
GENERATION = {"temperature": 0}
LIMITS = Limits(turns=4, retries=1, max_tokens=96)
CITIES = ["Lisbon", "Porto", "Madrid", "Paris", "Rome", "Berlin", "Oslo", "Vienna", "Prague", "Dublin"]
TRIPS = [
    ("Lisbon", "Porto", "Faro"),
    ("Paris", "Lyon", "Nice"),
    ("Rome", "Milan", "Naples"),
    ("Oslo", "Bergen", "Tromso"),
]


@dataclass
class Generation:
    messages: Any
    prompt: int
    cached: int
    completion: int
    seconds: float
    prefill_s: float
    threads: int
    """The prefill threads the engine took."""


@dataclass
class Metered:
    """An engine as a `Model` that records each generation's tokens and seconds."""

    engine: LlamaCpp
    log: list[Generation] = field(default_factory=list)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.engine, name)

    async def chat(self, messages: Any, opts: Any = None) -> AsyncIterator[Any]:
        t0 = time.perf_counter()
        async for delta in self.engine.chat(messages, opts):
            if delta.done and delta.usage is not None:
                u, stats = delta.usage, self.engine.last_stats
                seconds = time.perf_counter() - t0
                prefill = 0.0 if stats is None else stats.prefill_s
                threads = self.engine._threads.threads
                self.log.append(
                    Generation(
                        messages,
                        u.prompt_tokens,
                        u.cached_tokens,
                        u.completion_tokens,
                        seconds,
                        prefill,
                        threads,
                    )
                )
            yield delta


@dataclass
class Turn:
    prefilled: int
    seconds: float
    generations: int
    note: str = ""


async def measured(model: Metered, work: Any) -> Turn:
    """Run `work` (a coroutine) and what the engine did for it."""
    start = len(model.log)
    t0 = time.perf_counter()
    note = await work
    gens = model.log[start:]
    return Turn(sum(g.prompt - g.cached for g in gens), time.perf_counter() - t0, len(gens), note or "")


@tool
def weather(city: str) -> str:
    """Today's forecast for a city.

    Args:
        city: The city's name
    """
    return f"{city}: light rain, 14°C, wind 20 km/h"


@tool
def lookup(topic: str) -> str:
    """Facts about a place from the atlas.

    Args:
        topic: The place or subject
    """
    return f"{topic}: a coastal city of about 500,000 people, known for its old town and its food."


async def ask(agent: Agent, prompt: str) -> str:
    """One run; its ending as a short note."""
    async with aclosing(agent.run(prompt)) as events:
        async for ev in events:
            if ev.type in ("final", "end"):
                return "" if ev.type == "final" else f"end: {ev.reason}"
    return "no ending"


@contextmanager
def engines() -> Iterator[dict[int, Metered]]:
    """An engine keeping 4 conversations and one keeping 1, metered."""
    models = {n: Metered(aerix.load("smollm2-instruct", n_ctx=N_CTX, kv_slots=n)) for n in (4, 1)}
    try:
        yield models
    finally:
        for m in models.values():
            m.engine.close()


# -- 1. two agents taking turns ----------------------------------------------------------------


async def two_agents(turns: int) -> dict[int, list[tuple[str, Turn]]]:
    results: dict[int, list[tuple[str, Turn]]] = {4: [], 1: []}
    with engines() as models:
        agents = {
            n: {
                "A": Agent(
                    model=m,
                    instructions="You are a travel helper. Use the weather tool, then answer briefly.",
                    tools=[weather],
                    limits=LIMITS,
                    generation=GENERATION,
                ),
                "B": Agent(
                    model=m,
                    instructions="You are a maths helper. Use the calculator, then give the number.",
                    tools=[DEMO_TOOLS["calculator"]],
                    limits=LIMITS,
                    generation=GENERATION,
                ),
            }
            for n, m in models.items()
        }
        for i in range(turns):
            prompts = {
                "A": f"Do I need a coat in {CITIES[i % len(CITIES)]} today?",
                "B": f"What is {17 + i} * {23 + i}?",
            }
            for name in ("A", "B"):
                for n in results:
                    turn = await measured(models[n], ask(agents[n][name], prompts[name]))
                    results[n].append((name, turn))
                    print(f"kv_slots={n} turn {i + 1} agent {name}: {turn}", file=sys.stderr, flush=True)
    return results


def agents_table(results: dict[int, list[tuple[str, Turn]]], every: bool = False) -> str:
    """The two agents' turns side by side: turns 1, 2 and the last, then all of them (`every`:
    each turn, as printed while the benchmark runs)."""
    rows = [
        "| turn | A: prefilled, 4 slots | 1 slot | A: seconds, 4 slots | 1 slot "
        "| B: prefilled, 4 slots | 1 slot | B: seconds, 4 slots | 1 slot |",
        "|---|" + "---:|" * 8,
    ]
    per = {(n, name): [t for a, t in results[n] if a == name] for n in results for name in ("A", "B")}
    last = len(per[4, "A"]) - 1
    for i in range(last + 1):
        if not every and i not in (0, 1, last):
            continue
        cells = []
        for name in ("A", "B"):
            four, one = per[4, name][i], per[1, name][i]
            cells += [str(four.prefilled), str(one.prefilled), f"{four.seconds:.2f}", f"{one.seconds:.2f}"]
        rows.append(f"| {i + 1} | " + " | ".join(cells) + " |")
    totals = []
    for name in ("A", "B"):
        four, one = per[4, name], per[1, name]
        totals += [
            f"**{sum(t.prefilled for t in four)}**",
            f"**{sum(t.prefilled for t in one)}**",
            f"**{sum(t.seconds for t in four):.1f}**",
            f"**{sum(t.seconds for t in one):.1f}**",
        ]
    rows.append("| all | " + " | ".join(totals) + " |")
    gens = {key: sum(t.generations for t in turns) for key, turns in per.items()}
    rows += [
        "",
        f"Generations: agent A {gens[4, 'A']} with 4 slots, {gens[1, 'A']} with 1; agent B {gens[4, 'B']} "
        f"and {gens[1, 'B']}. With one slot, each agent's replies are tokenised again from their text "
        "after the other agent ran, and those tokens can differ from the ones sampled (kept as they "
        "were with 4 slots), which changes what the small model writes next.",
    ]
    return "\n".join(rows)


# -- 2. an agent and its sub-agent ---------------------------------------------------------------


@dataclass
class Planner:
    """The trip planner; its tool's calls in the run under way, and the places of the trip."""

    agent: Agent
    calls: list[int]
    places: list[str]


def planner(model: Metered) -> Planner:
    """The trip planner, with the geography expert as its tool `ask_expert` (`Agent.as_tool`: a
    fresh copy of the expert, a new conversation, each call)."""
    calls = [0]
    expert = Agent(
        model=model,
        instructions="You are a geography expert. Look the place up, then answer in one sentence.",
        tools=[lookup],
        limits=LIMITS,
        generation=GENERATION,
    )
    ask_expert = expert.as_tool(name="ask_expert", description="Ask the geography expert about one place.")

    places: list[str] = []

    def one_place_a_call(call: Any) -> dict[str, Any] | None:
        # The small model asks about the whole trip, call after call: each call asks about the
        # next place, and once every place is asked about, the planner sums up.
        if calls[0] >= len(places):
            return {"deny": "the expert answered about every place: sum up the trip now"}
        calls[0] += 1
        return {"input": {"prompt": f"What is {places[calls[0] - 1]} known for?"}}

    def more(_text: str) -> dict[str, str] | None:
        if calls[0] >= len(places):
            return None
        return {"continue": f"Now ask the expert about {places[calls[0]]}."}

    agent = Agent(
        model=model,
        instructions="You plan trips. Ask the expert about each place, one call each, then sum up.",
        tools=[ask_expert],
        limits=Limits(turns=4, retries=1, max_tokens=96),  # three calls, then the summary
        generation=GENERATION,
        tool_choice="ask_expert",
        hooks={"before_call": one_place_a_call, "on_final": more},
    )
    return Planner(agent, calls, places)


async def sub_agents(runs: int) -> dict[int, list[tuple[int, Turn]]]:
    results: dict[int, list[tuple[int, Turn]]] = {4: [], 1: []}
    with engines() as models:
        planners = {n: planner(m) for n, m in models.items()}
        for i in range(runs):
            trip = TRIPS[i % len(TRIPS)]
            for n in results:
                plan = planners[n]
                plan.places[:] = trip
                plan.calls[0] = 0
                prompt = f"Plan a trip to {', '.join(trip[:-1])} and {trip[-1]}. Ask the expert about {trip[0]} first."
                turn = await measured(models[n], ask(plan.agent, prompt))
                results[n].append((plan.calls[0], turn))
                print(
                    f"kv_slots={n} run {i + 1}: {plan.calls[0]} expert calls, {turn}",
                    file=sys.stderr,
                    flush=True,
                )
    return results


def sub_agents_table(results: dict[int, list[tuple[int, Turn]]], every: bool = False) -> str:
    """The planner's runs side by side: runs 1 and 2, then all of them (`every`: each run)."""
    rows = [
        "| run | expert calls | generations, 4 slots | 1 slot | prefilled, 4 slots | 1 slot "
        "| seconds, 4 slots | 1 slot |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for i, ((c4, four), (c1, one)) in enumerate(zip(results[4], results[1], strict=True)):
        if not every and i > 1:
            continue
        calls = str(c4) if c4 == c1 else f"{c4} / {c1}"
        rows.append(
            f"| {i + 1} | {calls} | {four.generations} | {one.generations} | {four.prefilled} | "
            f"{one.prefilled} | {four.seconds:.2f} | {one.seconds:.2f} |"
        )
    four = [t for _, t in results[4]]
    one = [t for _, t in results[1]]
    rows.append(
        f"| all | | {sum(t.generations for t in four)} | {sum(t.generations for t in one)} | "
        f"**{sum(t.prefilled for t in four)}** | **{sum(t.prefilled for t in one)}** | "
        f"**{sum(t.seconds for t in four):.1f}** | **{sum(t.seconds for t in one):.1f}** |"
    )
    return "\n".join(rows)


# -- 4. how a conversation waits: llama.cpp's sequences, or a copy of its state -----------------


def storage(conversation: int, reps: int) -> str:
    """The costs of the two ways to keep conversations in one llama.cpp context, measured on raw
    llama-cpp-python: four sequences in one context (n_seq_max=4, a unified KV cache, so each
    may grow to the whole context), or one sequence whose state is copied out and back."""
    import ctypes

    import llama_cpp
    import llama_cpp.llama_cpp as bindings

    default = bindings.llama_context_default_params  # what `Llama()` makes its context with

    def four_sequences() -> Any:
        params = default()
        params.n_seq_max, params.kv_unified = 4, True
        return params

    bindings.llama_context_default_params = four_sequences
    try:
        llama = llama_cpp.Llama(
            model_path=str(aerix.model_path("smollm2-instruct")),
            n_ctx=N_CTX,
            n_threads=_open.default_threads(),
            n_threads_batch=_open.default_threads(),
            verbose=False,
        )
    finally:
        bindings.llama_context_default_params = default
    assert llama_cpp.llama_n_seq_max(llama.ctx) == 4
    ctx, mem = llama.ctx, llama_cpp.llama_get_memory(llama.ctx)
    batch = llama_cpp.llama_batch_init(64, 0, 1)
    text = (Path(__file__).resolve().parent.parent / "README.md").read_bytes()
    tokens = llama.tokenize(text, add_bos=True)[: conversation + 64]

    def decode(part: list[int], start: int, seq: int) -> None:
        for j in range(0, len(part), 64):
            chunk = part[j : j + 64]
            batch.n_tokens = len(chunk)
            for i, token in enumerate(chunk):
                batch.token[i], batch.pos[i], batch.n_seq_id[i] = token, start + j + i, 1
                batch.seq_id[i][0], batch.logits[i] = seq, i == len(chunk) - 1
            assert llama_cpp.llama_decode(ctx, batch) == 0

    def best_ms(work: Any) -> float:
        times = []
        for _ in range(reps):
            t0 = time.perf_counter()
            work()
            times.append(time.perf_counter() - t0)
        return 1000 * min(times)

    n = conversation

    def step(count: int) -> Any:
        def work() -> None:
            decode(tokens[n : n + count], n, 0)
            llama_cpp.llama_memory_seq_rm(mem, 0, n, -1)

        return work

    decode(tokens[:n], 0, 0)
    alone = best_ms(step(1)), best_ms(step(64))
    for seq in (1, 2, 3):
        decode(tokens[:n], 0, seq)
    together = best_ms(step(1)), best_ms(step(64))
    for seq in (1, 2, 3):
        llama_cpp.llama_memory_seq_rm(mem, seq, -1, -1)
    size = int(llama_cpp.llama_state_seq_get_size(ctx, 0))
    state = (ctypes.c_uint8 * size)()
    out = best_ms(lambda: llama_cpp.llama_state_seq_get_data(ctx, state, size, 0))

    def back() -> None:
        llama_cpp.llama_memory_seq_rm(mem, 0, -1, -1)
        assert llama_cpp.llama_state_seq_set_data(ctx, state, size, 0)

    into = best_ms(back)
    llama_cpp.llama_batch_free(batch)
    llama.close()
    return "\n".join(
        [
            f"How a conversation of {n} tokens waits while others run (ms, best of {reps}):",
            "",
            "| | one token decoded | 64 tokens prefilled | copied out | put back |",
            "|---|---:|---:|---:|---:|",
            f"| its sequence alone in the context | {alone[0]:.1f} | {alone[1]:.0f} | | |",
            f"| beside three other sequences of {n} tokens | {together[0]:.1f} | {together[1]:.0f} | | |",
            f"| a copy of its state ({size / 2**20:.1f} MiB) | | | {out:.1f} | {into:.1f} |",
        ]
    )


# -- 3. the first turn ---------------------------------------------------------------------------

CONFIGS = {
    "aerix": "aerix's default (threads chosen per prefill)",
    "aerix-half": "aerix, half the CPUs",
    "llama-cpp-python": "llama-cpp-python's defaults",
}
DEMO_PROMPT = "What is 17 * 23?"


async def _first_aerix(fixed: bool) -> dict[str, Any]:
    from aerix._cli_flags import DEFAULT_INSTRUCTIONS

    kwargs: dict[str, Any] = {"n_ctx": N_CTX}
    if fixed:
        kwargs["n_threads_batch"] = _open.default_threads()
    model = Metered(aerix.load("smollm2-instruct", **kwargs))
    tools = list(DEMO_TOOLS.values())
    agent = Agent(model=model, instructions=DEFAULT_INSTRUCTIONS, tools=tools, generation=GENERATION)
    t0 = time.perf_counter()
    async with aclosing(agent.run(DEMO_PROMPT)) as events:
        async for ev in events:
            if ev.type in ("turn", "final", "retry", "end"):
                break
    agent_turn = time.perf_counter() - t0
    first = model.log[0]
    engine = model.engine
    tokens = engine._tokenize(engine.render(first.messages).encode(), True)
    engine.close()
    return {
        "prefill": first.prefill_s,
        "turn": first.seconds,
        "agent": agent_turn,
        "tokens": tokens,
        "generated": first.completion,
        "threads": first.threads,
    }


def _first_raw(tokens: list[int], generated: int) -> dict[str, Any]:
    import llama_cpp

    llama = llama_cpp.Llama(model_path=str(aerix.model_path("smollm2-instruct")), n_ctx=N_CTX, verbose=False)
    t0 = time.perf_counter()
    llama.eval(tokens)
    t1 = time.perf_counter()
    for _ in range(generated - 1):
        logits = llama_cpp.llama_get_logits_ith(llama.ctx, -1)
        token = max(range(llama.n_vocab()), key=lambda t: logits[t])
        llama.eval([token])
    t2 = time.perf_counter()
    threads = llama.n_threads_batch
    llama.close()
    return {"prefill": t1 - t0, "turn": t2 - t0, "threads": threads}


def _child(config: str, tokens_file: str | None) -> dict[str, Any]:
    if config == "llama-cpp-python":
        assert tokens_file is not None
        given = json.loads(Path(tokens_file).read_text())
        return _first_raw(given["tokens"], given["generated"])
    return asyncio.run(_first_aerix(config == "aerix-half"))


def _run_child(config: str, tokens_file: str | None, timeout: float) -> dict[str, Any] | None:
    cmd = [sys.executable, str(Path(__file__)), "--child", config]
    if tokens_file:
        cmd += ["--tokens", tokens_file]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=timeout).stdout
    except subprocess.TimeoutExpired:
        return None
    return dict(json.loads(out.strip().splitlines()[-1]))


def first_turn(reps: int, timeout: float) -> tuple[str, dict[tuple[str, bool], list[dict[str, Any] | None]]]:
    tokens_file = Path("/tmp") / f"aerix-first-turn-{os.getpid()}.json"
    runs: dict[tuple[str, bool], list[dict[str, Any] | None]] = {
        (c, b): [] for b in (False, True) for c in CONFIGS
    }
    for busy in (False, True):
        for _ in range(reps):
            for config in CONFIGS:
                with one_cpu_busy(busy):
                    load = os.getloadavg()[0]
                    r = _run_child(
                        config, str(tokens_file) if config == "llama-cpp-python" else None, timeout
                    )
                if r is not None:
                    r["load"] = load
                if config == "aerix" and r is not None and not tokens_file.exists():
                    tokens_file.write_text(json.dumps({"tokens": r["tokens"], "generated": r["generated"]}))
                runs[config, busy].append(r)
                print(
                    f"{config} {'busy' if busy else 'quiet'}: {r and {k: v for k, v in r.items() if k != 'tokens'}}",
                    file=sys.stderr,
                    flush=True,
                )
    prompt = len(json.loads(tokens_file.read_text())["tokens"])
    tokens_file.unlink()
    return f"{prompt}", runs


def first_table(runs: dict[tuple[str, bool], list[dict[str, Any] | None]], timeout: float) -> str:
    rows = [
        "| | machine | prefill threads | prefill, s | first generation, s | the agent's first turn, s |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for (config, busy), results in runs.items():
        done = [r for r in results if r is not None]
        where = "one CPU busy" if busy else "as it is"
        if not done:
            rows.append(f"| {CONFIGS[config]} | {where} | | > {timeout:.0f} | > {timeout:.0f} | |")
            continue
        late = f" ({len(results) - len(done)} over {timeout:.0f} s)" if len(done) < len(results) else ""
        threads = "/".join(map(str, sorted({r["threads"] for r in done})))
        cells = [
            f"{statistics.median(r[k] for r in done):.2f}{late}" if k in done[0] else ""
            for k in ("prefill", "turn", "agent")
        ]
        rows.append(f"| {CONFIGS[config]} | {where} | {threads} | " + " | ".join(cells) + " |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=10)
    parser.add_argument("--runs", type=int, default=4)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=180)
    parser.add_argument("--part", choices=["agents", "subagent", "storage", "first"], action="append")
    parser.add_argument("--no-write", action="store_true", help="print only; leave docs/benchmarks.md")
    parser.add_argument("--child", choices=list(CONFIGS), help=argparse.SUPPRESS)
    parser.add_argument("--tokens", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(_child(args.child, args.tokens)))
        return 0
    parts = args.part or ["agents", "subagent", "storage", "first"]
    where = (
        f"Machine: {machine()}; its CPUs ran other work too (load average {os.getloadavg()[0]:.1f} when "
        "the run started), so the seconds vary from run to run, the token counts do not."
    )

    def publish(name: str, markdown: str) -> None:
        print(markdown + "\n", flush=True)
        if not args.no_write:
            print(f"wrote {write_section(name, markdown)}", flush=True)

    if {"agents", "subagent", "storage"} & set(parts):
        tables = []
        if "storage" in parts:
            tables.append(storage(900, max(args.reps, 5)))
        if "agents" in parts:
            turns = asyncio.run(two_agents(args.turns))
            print(agents_table(turns, every=True), file=sys.stderr)
            tables.append(
                f"Two agents taking turns on one engine, {args.turns} turns each (prompt tokens prefilled, "
                f"wall seconds; turns 1, 2 and {args.turns}, then all; `bench/kv_slots.py` prints every "
                "turn):\n\n" + agents_table(turns)
            )
        if "subagent" in parts:
            runs = asyncio.run(sub_agents(args.runs))
            print(sub_agents_table(runs, every=True), file=sys.stderr)
            tables.append(
                "An agent whose tool is a sub-agent (`as_tool`: a fresh conversation each call), runs 1 "
                f"and 2, then all {args.runs}:\n\n" + sub_agents_table(runs)
            )
        publish(
            "kv_slots",
            "## kv_slots: many conversations on one engine\n\n"
            f"{where} Command: `python bench/kv_slots.py --turns {args.turns} --runs {args.runs}`.\n\n"
            "SmolLM2-135M-Instruct, greedy, `LlamaCpp(kv_slots=4)` (the default) against "
            "`kv_slots=1`, each on an engine of its own, run turn by turn in lockstep.\n\n"
            + "\n\n".join(tables),
        )
    if "first" in parts:
        prompt, runs = first_turn(args.reps, args.timeout)
        publish(
            "first_turn",
            "## first_turn: the first turn against llama-cpp-python\n\n"
            f"{where} Command: `python bench/kv_slots.py --part first --reps {args.reps}`. "
            f'The demo\'s first generation ({prompt} prompt tokens: `aerix run "{DEMO_PROMPT}"`) on a freshly '
            "loaded engine, and llama-cpp-python with its default threads on the same tokens; each run "
            f"in a process of its own, medians of {args.reps}. *One CPU busy*: another process spins on "
            "one CPU meanwhile.\n\n" + first_table(runs, args.timeout),
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
