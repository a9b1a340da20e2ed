"""Several LlamaCpp engines in one process: one engine's decode speed beside a second engine.

Run: `python bench/threads.py [--reps 7] [--threads 2] [--no-write]`. Prints the
table and writes it to docs/benchmarks.md (section "threads"; not with `--no-write`).

Engine A decodes 96 unconstrained greedy tokens (bench/engine.py's prompt), `--reps`
times; the figure is the median of its tokens per second. Each scenario runs in a
process of its own, since what a scenario does to llama.cpp's OpenMP threads lasts
as long as the thread that called llama.cpp (the main thread lasts as long as the
process):

- *alone*: engine A is the only engine of the process;
- *second engine, shared thread*: engine B is loaded and runs one generation first,
  through aerix (every engine's llama.cpp work runs on the one thread they share);
- *second engine, a thread of its own*: engine B evaluates a few tokens first on a
  worker thread of its own that stays alive while A decodes, as code that calls
  `llama_cpp.Llama` directly from a long-lived thread does. (A thread that has
  exited takes its OpenMP team with it.)

Each scenario runs at `--threads` llama.cpp threads per engine, and at 1 thread.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from _report import machine, write_section

SCENARIOS = {
    "alone": "alone",
    "shared": "second engine, shared thread",
    "own": "second engine, a thread of its own",
}


def _scenario(name: str, threads: int, reps: int) -> float:
    """Engine A's median decode tokens/s in scenario `name` (run in a process of its own)."""
    from aerix.engines._load import load
    from engine import _aerix

    a = load("smollm2-instruct", n_threads=threads, n_ctx=2048)
    others = []
    own: ThreadPoolExecutor | None = None
    if name != "alone":
        b = load("smollm2-instruct", n_threads=threads, n_ctx=2048)
        others.append(b)
        if name == "shared":
            _aerix(b, False)
        else:  # a worker thread of B's own, alive while A decodes, as an engine's was
            own = ThreadPoolExecutor(max_workers=1)
            own.submit(b._llama.eval, [1, 2, 3]).result()
    _aerix(a, False)  # warm up
    rates = []
    for _ in range(reps):
        r = _aerix(a, False)
        rates.append(r["tokens"] / r["decode_s"])
    if own is not None:
        own.shutdown()
    for e in (a, *others):
        e.close()
    return statistics.median(rates)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--no-write", action="store_true", help="print only; leave docs/benchmarks.md")
    parser.add_argument("--scenario", choices=list(SCENARIOS), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.scenario:  # a child: one scenario, its figure on stdout
        print(json.dumps(_scenario(args.scenario, args.threads, args.reps)))
        return 0
    counts = sorted({args.threads, 1}, reverse=True)
    rates: dict[tuple[str, int], float] = {}
    for threads in counts:
        for name in SCENARIOS:
            out = subprocess.run(
                [
                    sys.executable,
                    str(Path(__file__)),
                    "--scenario",
                    name,
                    "--threads",
                    str(threads),
                    "--reps",
                    str(args.reps),
                ],
                capture_output=True,
                text=True,
                check=True,
            ).stdout
            rates[name, threads] = float(out.strip().splitlines()[-1])
            print(f"{SCENARIOS[name]}, {threads} thread(s): {rates[name, threads]:.0f} tokens/s", flush=True)
    head = "| engine A's decode, tokens/s | " + " | ".join(f"{t} thread(s) per engine" for t in counts) + " |"
    rows = [head, "|---|" + "---|" * len(counts)]
    for name, label in SCENARIOS.items():
        cells = " | ".join(f"{rates[name, t]:.0f} ({rates[name, t] / rates['alone', t]:.2f})" for t in counts)
        rows.append(f"| {label} | {cells} |")
    markdown = (
        "## threads: several LlamaCpp engines in one process\n\n"
        f"Machine: {machine()}. Command: `python bench/threads.py --reps {args.reps} "
        f"--threads {args.threads}`.\n\n"
        "Engine A (SmolLM2-135M-Instruct) decodes 96 unconstrained greedy tokens; medians of "
        f"{args.reps} repetitions, each scenario in a process of its own; in brackets, the "
        "ratio to A alone. *Shared thread*: a second engine ran a generation first, through "
        "aerix, whose engines all run on one thread. *A thread of its own*: the second "
        "engine evaluated three tokens first on a worker thread of its own, alive while A "
        "decodes, as in code that calls `llama_cpp.Llama` from a long-lived thread of its own: llama.cpp's "
        "OpenMP teams (one per calling thread) then outnumber the CPUs, and libgomp makes waiting "
        "threads sleep at every barrier of a decode, for as "
        'long as that thread lives (docs/engines.md, "Threads, concurrency and abort").\n\n' + "\n".join(rows)
    )
    print(markdown)
    if not args.no_write:
        print(f"wrote {write_section('threads', markdown)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
