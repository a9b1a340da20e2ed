"""The LlamaCpp engine on SmolLM2-135M-Instruct: constrained decode speed and prefix reuse.

Run: `python bench/engine.py [--reps 5] [--threads 2] [--runs 1] [--no-write]`.
Prints the tables and writes them to docs/benchmarks.md (section "engine"; not
with `--no-write`). With `--runs N` the side-by-side speed measurement is
repeated N times on the same engines and its tables show the run whose
constrained / unconstrained ratio is the median; every run's ratio is listed
(the ratio moves from one run to the next on a shared machine).

1. Decode speed, side by side on one prompt (a system message with two tools
   and a user message), greedy, each path repeated and interleaved:
   - aerix unconstrained;
   - aerix under the turn schema with llguidance's mask only;
   - aerix under the turn schema with the mask and jump-forward, value biases,
     the optional-field check and string choices off, and on (the default, see
     docs/engines.md; a value decoded ahead and dropped costs time but adds no
     token, so compare the wall time per turn too); a constrained generation
     gets the hand-over an `Agent` gives (`GenerateOptions["handover"]`), so the
     rules act as under an agent;
   - llama-cpp-python unconstrained, and with its own grammar sampler
     (`LlamaGrammar.from_json_schema`, `Llama.generate(grammar=...)`), run on the
     thread that aerix's engines share, so that no path slows the others down
     (docs/engines.md, "Threads, concurrency and abort").
   Tokens per second count every generated token; under jump-forward the forced
   tokens are evaluated in batches without sampling, and they count as generated
   tokens (the table shows how many). The tokens forced first are evaluated with
   the prompt's last batch, their share of its time counted as decode time; the
   batch that completes the JSON is not evaluated. Wall time per turn includes a
   full prefill.
2. Prefix reuse over an 8-generation conversation: each generation appends the
   assistant's text exactly as generated and a user message with a tool result
   (as the loop renders it), with the hand-over an `Agent` would give.
   Per generation: prompt, cached and prefilled tokens, and the tokens that are
   new since the last generation; greedy, and sampled at temperature 0.7 (where
   sampled tokens are often not the canonical tokenisation of their text). The
   same run with byte matching turned off (re-tokenising the rendered history,
   common token prefix only) is shown for comparison.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import time
from collections.abc import Callable
from typing import Any

from _report import machine, write_section
from aerix._handover import read
from aerix.engines import LlamaCpp
from aerix.engines._load import load, model_path
from aerix.engines.llamacpp._thread import Lane
from aerix.model import ChatMessage, GenerateOptions, Handover
from aerix.turn import render_results


def _tool(name: str, fields: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "tool": {"const": name},
            "input": {
                "type": "object",
                "properties": fields,
                "required": required,
                "additionalProperties": False,
            },
        },
        "required": ["tool", "input"],
        "additionalProperties": False,
    }


SCHEMA: dict[str, Any] = {
    "anyOf": [
        {
            "type": "object",
            "properties": {
                "thought": {"type": "string"},
                "calls": {
                    "type": "array",
                    "minItems": 1,
                    "maxItems": 1,  # one call a turn, as aerix's turn schema decodes
                    "items": {
                        "anyOf": [
                            _tool(
                                "weather",
                                {"city": {"type": "string"}, "unit": {"enum": ["c", "f"]}},
                                ["city"],
                            ),
                            _tool("search", {"query": {"type": "string"}}, ["query"]),
                        ]
                    },
                },
            },
            "required": ["calls"],
            "additionalProperties": False,
        },
        {
            "type": "object",
            "properties": {"thought": {"type": "string"}, "final": {"type": "string"}},
            "required": ["final"],
            "additionalProperties": False,
        },
    ]
}
"""A tool-call turn schema with two tools (the shape of aerix's turn contract)."""

SYSTEM = (
    "You are a travel helper. Use the tools to answer.\n"
    'Answer with one JSON object: {"calls": [{"tool": "...", "input": {...}}]} '
    'or {"final": "..."}, either with an optional "thought".\n'
    "Tools:\n"
    "- weather: Today's forecast for a city. Fields: city (string, required), unit (c or f)\n"
    "- search: Search the web. Fields: query (string, required)"
)
MESSAGES: list[ChatMessage] = [
    {"role": "system", "content": SYSTEM},
    {"role": "user", "content": "Should I pack an umbrella for Lisbon and for Porto?"},
]
MAX_TOKENS = 96
OFF = "aerix, mask + jump-forward, no value biases, optional check or string choices"
DEFAULT = "aerix, mask + jump-forward (default)"
UNCONSTRAINED = "aerix, unconstrained"


def _handover(messages: list[ChatMessage]) -> Handover:
    """What an `Agent` would hand the engine with this conversation (its rules read it: the
    request a tool is picked for, the calls made, the texts values copy)."""
    return read(messages[0]["content"], messages[1:])


async def _aerix_turn(engine: LlamaCpp, messages: list[ChatMessage], opts: GenerateOptions) -> str:
    return "".join([d.text async for d in engine.chat(messages, opts)])


def _aerix(engine: LlamaCpp, constrained: bool) -> dict[str, Any]:
    engine.reset()
    opts: GenerateOptions = {"max_tokens": MAX_TOKENS, "temperature": 0}
    if constrained:
        opts["constraint"] = {"json": SCHEMA}
        opts["handover"] = _handover(MESSAGES)
    t0 = time.perf_counter()
    text = asyncio.run(_aerix_turn(engine, MESSAGES, opts))
    wall = time.perf_counter() - t0
    s = engine.last_stats
    assert s is not None
    return {
        "tokens": s.completion_tokens,
        "forced": s.forced_tokens,
        "decode_s": s.decode_s,
        "wall_s": wall,
        "text": text,
    }


def _llama_cpp(llama: Any, grammar: Any, prompt: list[int]) -> dict[str, Any]:
    """llama-cpp-python's own loop: `Llama.generate`, optionally with its grammar sampler."""
    llama.reset()
    t0 = time.perf_counter()
    llama.eval(prompt[:-1])  # prefill; generate() then evaluates the last prompt token
    t1 = time.perf_counter()
    tokens: list[int] = []
    for token in llama.generate(prompt, temp=0.0, top_k=1, grammar=grammar, reset=True):
        if token == llama.token_eos() or len(tokens) >= MAX_TOKENS:
            break
        tokens.append(token)
    t2 = time.perf_counter()
    text = llama.detokenize(tokens).decode(errors="replace")
    return {"tokens": len(tokens), "forced": 0, "decode_s": t2 - t1, "wall_s": t2 - t0, "text": text}


def median_run(ratios: list[float]) -> int:
    """The index of the run whose ratio is the median (the lower middle of an even count)."""
    if not ratios:
        raise ValueError("median_run needs at least one run's ratio")
    return sorted(range(len(ratios)), key=lambda i: ratios[i])[(len(ratios) - 1) // 2]


def _measure(paths: dict[str, Callable[[], dict[str, Any]]], reps: int) -> dict[str, Any]:
    """One side-by-side run: every path `reps` times, interleaved; each path's runs, median
    tokens per second and median wall time per turn."""
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in paths}
    for _ in range(reps):
        for name, run in paths.items():
            runs[name].append(run())
    return {
        "runs": runs,
        "rate": {n: statistics.median(r["tokens"] / r["decode_s"] for r in rs) for n, rs in runs.items()},
        "wall": {n: statistics.median(r["wall_s"] for r in rs) for n, rs in runs.items()},
    }


def decode_speed(reps: int, threads: int, runs: int = 1) -> tuple[str, dict[str, float]]:
    import llama_cpp

    engine = load("smollm2-instruct", n_threads=threads, n_ctx=2048)
    mask_only = load("smollm2-instruct", n_threads=threads, n_ctx=2048, jump_forward=False)
    unbiased = load(
        "smollm2-instruct",
        n_threads=threads,
        n_ctx=2048,
        copy_bias=0,
        close_bias=0,
        pick_bias=0,
        new_call_bias=0,
        check_optional=False,
        string_choices=1,
        no_placeholders=False,
    )
    llama = llama_cpp.Llama(str(model_path("smollm2-instruct")), n_ctx=2048, n_threads=threads, verbose=False)
    from llama_cpp.llama_grammar import LlamaGrammar

    grammar = LlamaGrammar.from_json_schema(json.dumps(SCHEMA), verbose=False)
    prompt = llama.tokenize(engine.render(MESSAGES).encode(), add_bos=True, special=True)
    # llama-cpp-python's own loop runs on the thread aerix's engines share: llama.cpp's OpenMP
    # threads slow every engine down once two threads have called into it (engines.md).
    lane = Lane()
    paths: dict[str, Callable[[], dict[str, Any]]] = {
        UNCONSTRAINED: lambda: _aerix(engine, False),
        "aerix, llguidance mask only": lambda: _aerix(mask_only, True),
        OFF: lambda: _aerix(unbiased, True),
        DEFAULT: lambda: _aerix(engine, True),
        "llama-cpp-python, unconstrained": lambda: lane.submit(_llama_cpp, llama, None, prompt).result(),
        "llama-cpp-python, its grammar sampler": lambda: lane.submit(
            _llama_cpp, llama, grammar, prompt
        ).result(),
    }
    for run in paths.values():  # warm up: page the weights in, build the tokenizers
        run()
    measured = [_measure(paths, reps) for _ in range(runs)]
    ratios = [m["rate"][DEFAULT] / m["rate"][UNCONSTRAINED] for m in measured]
    shown = measured[median_run(ratios)]
    by_path, rate, wall = shown["runs"], shown["rate"], shown["wall"]
    base = rate[UNCONSTRAINED]
    rows = [
        "| path | tokens (forced) | decode tokens/s | vs aerix unconstrained | wall per turn |",
        "|---|---|---|---|---|",
    ]
    for name, rs in by_path.items():
        last = rs[-1]
        rows.append(
            f"| {name} | {last['tokens']} ({last['forced']}) | {rate[name]:.0f} | "
            f"{rate[name] / base:.2f} | {wall[name] * 1000:.0f} ms |"
        )
    ours = rate[DEFAULT]
    theirs = rate["llama-cpp-python, its grammar sampler"]
    figures = {
        "constrained_vs_unconstrained": ours / base,
        "mask_only_vs_unconstrained": rate["aerix, llguidance mask only"] / base,
        "biases_vs_no_biases": ours / rate[OFF],
        "biases_wall": wall[DEFAULT] / wall[OFF],
        "constrained_vs_llama_grammar": ours / theirs,
        "llama_grammar_vs_llama_unconstrained": theirs / rate["llama-cpp-python, unconstrained"],
    }
    outputs = "\n".join(
        f"- {name}: `{rs[-1]['text'][:150].replace(chr(10), ' ').replace('`', chr(39))}`"
        for name, rs in by_path.items()
    )
    table = "\n".join(rows)
    figures["runs_median"] = statistics.median(ratios)
    spread = ""
    if runs > 1:
        spread = (
            f"\n\nThe whole measurement was run {runs} times in a row on the same engines; "
            "constrained / unconstrained in each run: "
            + ", ".join(f"{r:.2f}" for r in ratios)
            + f" (median **{figures['runs_median']:.2f}**). The table above is the run with the "
            "median ratio."
        )
    text = (
        f"{table}{spread}\n\nMedians of {reps} interleaved repetitions, greedy, at most {MAX_TOKENS} "
        "tokens; prompt: a system message with two tools and a user message "
        f"({len(prompt)} tokens). 'tokens (forced)' is the last repetition's count of "
        "generated tokens and, in brackets, how many the schema forced (evaluated in "
        "batches, not sampled); they count as generated tokens in tokens/s. The ones the "
        "schema forces first (`{\"`) are evaluated in the prompt's last batch, and their share "
        "of that batch's time (by token count) is counted as decode time; the last batch, "
        "which completes the JSON, is not evaluated (a next turn prefills it). Wall per turn "
        "includes a full prefill. llama-cpp-python's grammar allows whitespace after the JSON "
        "value, so its runs may continue past the value (with whitespace) up to the limit.\n\n"
        f"- constrained (mask + jump-forward) / unconstrained: "
        f"**{figures['constrained_vs_unconstrained']:.2f}**\n"
        f"- mask only / unconstrained: {figures['mask_only_vs_unconstrained']:.2f}\n"
        f"- default (value biases, optional check, string choices) / all off: "
        f"{figures['biases_vs_no_biases']:.2f} in tokens/s, {figures['biases_wall']:.2f} in wall time "
        "per turn (values decoded ahead and dropped take time but add no token)\n"
        f"- constrained / llama-cpp-python's grammar sampler: "
        f"**{figures['constrained_vs_llama_grammar']:.2f}**\n"
        f"- llama-cpp-python grammar / its unconstrained: "
        f"{figures['llama_grammar_vs_llama_unconstrained']:.2f}"
    )
    print(f"Outputs (last repetition):\n{outputs}\n")  # printed, not written: the page keeps the figures
    engine.close()
    mask_only.close()
    unbiased.close()
    lane.shutdown()
    llama.close()
    return text, figures


def _conversation(engine: LlamaCpp, turns: int, temperature: float) -> list[dict[str, Any]]:
    messages = list(MESSAGES)
    rows: list[dict[str, Any]] = []
    for turn in range(1, turns + 1):
        opts: GenerateOptions = {
            "max_tokens": 128,
            "temperature": temperature,
            "seed": turn,
            "constraint": {"json": SCHEMA},
            "handover": _handover(messages),
        }
        t0 = time.perf_counter()
        text = asyncio.run(_aerix_turn(engine, messages, opts))
        wall = time.perf_counter() - t0
        s = engine.last_stats
        assert s is not None
        new = 0
        if turn > 1:
            before = engine.render(messages[:-2]) + messages[-2]["content"]
            rest = engine.render(messages)[len(before) :].encode()
            new = len(engine._tokenize(rest, False))
        rows.append(
            {
                "turn": turn,
                "prompt": s.prompt_tokens,
                "cached": s.cached_tokens,
                "prefilled": s.prefilled_tokens,
                "new": new,
                "completion": s.completion_tokens,
                "wall_s": wall,
            }
        )
        result = render_results([(f"call_{turn}", "weather", f"Rain, {10 + turn}°c")])
        messages += [{"role": "assistant", "content": text}, {"role": "user", "content": result}]
    return rows


def _span(extra: list[int]) -> str:
    lo, hi = min(extra), max(extra)
    count = str(lo) if lo == hi else f"{lo} to {hi}"
    return f"{count} token{'' if hi == 1 else 's'}"


def prefix_reuse(threads: int, temperature: float, turns: int = 8) -> tuple[str, dict[str, float]]:
    engine = load("smollm2-instruct", n_threads=threads, n_ctx=4096)
    retokenise = load("smollm2-instruct", n_threads=threads, n_ctx=4096)
    retokenise._text_reuse = False  # compare: common token prefix of a fresh tokenisation only
    ours = _conversation(engine, turns, temperature)
    theirs = _conversation(retokenise, turns, temperature)
    rows = [
        "| gen | prompt | cached | prefilled | new since last | generated | wall | "
        "re-tokenising: cached | prefilled |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for a, b in zip(ours, theirs, strict=True):
        rows.append(
            f"| {a['turn']} | {a['prompt']} | {a['cached']} | {a['prefilled']} | "
            f"{a['new'] or '-'} | {a['completion']} | {a['wall_s'] * 1000:.0f} ms | "
            f"{b['cached']} | {b['prefilled']} |"
        )
    extra = [a["prefilled"] - a["new"] for a in ours[1:]]
    total = {
        "prefilled": sum(a["prefilled"] for a in ours),
        "prompt": sum(a["prompt"] for a in ours),
        "prefilled_retokenise": sum(b["prefilled"] for b in theirs),
    }
    text = (
        "\n".join(rows) + f"\n\nEvery generation after the first prefilled what was new since the last one "
        f"plus {_span(extra)}: the output's last batch (the token sampled last and the "
        "closing tokens forced after it), which completed the JSON and was never evaluated. "
        f"Total prefilled over {turns} generations: **{total['prefilled']}** tokens of "
        f"{total['prompt']} prompt tokens; re-tokenising the rendered history instead "
        f"(its own conversation, which may differ): {total['prefilled_retokenise']}."
    )
    engine.close()
    retokenise.close()
    return text, {"extra_min": min(extra), "extra_max": max(extra), **total}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument(
        "--runs", type=int, default=1, help="repeat the side-by-side speed run; show the median run"
    )
    parser.add_argument("--no-write", action="store_true", help="print only; leave docs/benchmarks.md")
    args = parser.parse_args(argv)
    load_before = os.getloadavg()[0]
    if args.runs < 1:
        parser.error(f"--runs must be 1 or more, not {args.runs}")
    speed, _ = decode_speed(args.reps, args.threads, args.runs)
    greedy, _ = prefix_reuse(args.threads, 0.0)
    sampled, _ = prefix_reuse(args.threads, 0.7)
    markdown = (
        "## engine: LlamaCpp on SmolLM2-135M-Instruct (Q4_1)\n\n"
        f"Machine: {machine()}; llama.cpp threads: {args.threads}; load average "
        f"{load_before:.1f} before the run, {os.getloadavg()[0]:.1f} after (the machine was "
        "shared: compare the rows of one table, not absolute speeds across runs). "
        f"Command: `python bench/engine.py --reps {args.reps} --threads {args.threads}"
        f"{f' --runs {args.runs}' if args.runs > 1 else ''}`.\n\n"
        f"### Constrained decoding\n\n{speed}\n\n"
        "### Prefix reuse (8 generations)\n\n"
        "A growing conversation under the turn schema: each generation appends the "
        "assistant's text exactly as generated and a user message with a tool result. "
        "'new since last' counts the tokens of the text after the last output (the end of "
        "the assistant turn and the new user message).\n\n"
        f"Greedy (temperature 0):\n\n{greedy}\n\n"
        f"Sampled (temperature 0.7, seed = generation number):\n\n{sampled}\n"
    )
    print(markdown)
    if not args.no_write:
        print(f"wrote {write_section('engine', markdown)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
