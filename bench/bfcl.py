"""Tool-use quality on BFCL: the Berkeley Function Calling Leaderboard's simple_python,
multiple, parallel and irrelevance categories, through the real `aerix.Agent`.

Run: `python bench/bfcl.py [--category simple_python] [--limit 60]
[--config constrained-required] [--threads 2]`.

Each BFCL function becomes an aerix tool that records its calls (names mapped
to `^[a-z][a-z0-9_]{0,63}$`, `float` → `number`); entries whose parameters are
not all flat scalars are skipped and counted. The first turn's calls are
checked with BFCL's AST rules (`bench/_bfcl/checker.py`); an irrelevance
entry is right when no tool is called. Greedy decoding (temperature 0).

Prints, per category and configuration: entries run and skipped, the share of
runs that reached a valid first turn (within the retries of the turn
contract) and of first generations that were valid, accuracy, completion
tokens per generation and seconds per entry; writes them to docs/quality.md
(section "bfcl") unless `--no-write`. `--jsonl FILE` keeps every entry's outcome.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _bfcl.data import CATEGORIES, load
from _bfcl.run import Config, Progress, Summary, run_entry, summarise, table
from _report import machine, write_section

CONFIGS = {
    "constrained-required": Config(constrain=True, tool_choice="required"),
    "constrained-auto": Config(constrain=True, tool_choice="auto"),
    "unconstrained-required": Config(constrain=False, tool_choice="required"),
    "unconstrained-auto": Config(constrain=False, tool_choice="auto"),
}


async def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--category", action="append", choices=CATEGORIES, help="repeatable; default: all four")
    ap.add_argument("--config", action="append", choices=list(CONFIGS), help="repeatable; default: all four")
    ap.add_argument("--limit", type=int, default=None, help="the first N flat entries of each category")
    ap.add_argument(
        "--nested",
        action="store_true",
        help="run the entries with arrays, tuples, dicts or `any` (schema tools) instead of the flat ones",
    )
    ap.add_argument("--calls-per-turn", type=int, default=1, help="Agent(calls_per_turn=N), 1-8")
    ap.add_argument("--offset", type=int, default=0, help="skip the first N flat entries of each category")
    ap.add_argument("--max-tokens", type=int, default=256)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--model", default="smollm2-instruct")
    ap.add_argument("--copy-bias", type=float, default=None, help="LlamaCpp's copy_bias (default: its own)")
    ap.add_argument("--close-bias", type=float, default=None, help="LlamaCpp's close_bias (default: its own)")
    ap.add_argument("--no-check-optional", action="store_true", help="LlamaCpp(check_optional=False)")
    ap.add_argument("--instructions", default="", help="the Agent's instructions (default: none)")
    ap.add_argument("--jsonl", type=Path, default=None, help="write every entry's outcome here")
    ap.add_argument("--no-write", action="store_true", help="do not update docs/quality.md")
    ap.add_argument("--section", default="bfcl", help="the docs/quality.md section to write")
    args = ap.parse_args(argv)

    import aerix

    t_load = time.perf_counter()
    biases = {"copy_bias": args.copy_bias, "close_bias": args.close_bias}
    extra: dict[str, object] = {k: v for k, v in biases.items() if v is not None}
    if args.no_check_optional:
        extra["check_optional"] = False
    engine = aerix.load(args.model, n_threads=args.threads, **extra)
    print(f"model {args.model} loaded in {time.perf_counter() - t_load:.1f} s", file=sys.stderr)
    categories = args.category or list(CATEGORIES)
    configs = args.config or list(CONFIGS)
    summaries: list[Summary] = []
    out = args.jsonl.open("w") if args.jsonl else None
    try:
        for category in categories:
            entries = load(category)
            flat = [e for e in entries if e.flat != args.nested]
            skipped = len(entries) - len(flat)
            flat = flat[args.offset :]
            chosen = flat[: args.limit] if args.limit else flat
            for name in configs:
                base = CONFIGS[name]
                config = Config(
                    constrain=base.constrain,
                    tool_choice=base.tool_choice,
                    max_tokens=args.max_tokens,
                    instructions=args.instructions,
                    calls_per_turn=args.calls_per_turn,
                )
                bar = Progress(len(chosen), f"{category} {config.label}")
                outcomes = []
                for entry in chosen:
                    o = await run_entry(engine, entry, config)
                    outcomes.append(o)
                    bar.step(o.check.valid)
                    if out:
                        row = {"category": category, "config": name, **_plain(o)}
                        out.write(json.dumps(row, default=str) + "\n")
                bar.close()
                s = summarise(category, config.label, outcomes, skipped)
                summaries.append(s)
                print(table([s.row()]), flush=True)
    finally:
        if out:
            out.close()
        engine.close()

    kind = "nested" if args.nested else "flat"
    limit = f"{args.limit} {kind} entries of each category" if args.limit else f"every {kind} entry"
    if args.offset:
        limit += f" after the first {args.offset}"
    elif args.limit:
        limit = "the first " + limit
    md = "\n".join(
        [
            f"SmolLM2-135M-Instruct (Q4_1) through `aerix.Agent`, {limit}, temperature 0, "
            f"max_tokens {args.max_tokens}, retries 2; {machine()}, {args.threads} threads.",
            "",
            table([s.row() for s in summaries]),
        ]
    )
    print()
    print(md)
    if not args.no_write:
        path = write_section(args.section, md, file="quality.md")
        print(f"\nwritten to {path}", file=sys.stderr)
    return 0


def _plain(o: object) -> dict[str, object]:
    from dataclasses import asdict

    return asdict(o)  # type: ignore[call-overload, no-any-return]


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
