"""Tool-use quality on BFCL: the Berkeley Function Calling Leaderboard's simple_python,
multiple, parallel and irrelevance categories, through the real `aerix.Agent`.

Run: `python bench/bfcl.py [--category simple_python] [--part report] [--limit 60]
[--config constrained-required] [--threads 2] [--heuristics-off NAME ...]
[--ablation [NAME ...]]`.

Each BFCL function becomes an aerix tool that records its calls (names mapped
to `^[a-z][a-z0-9_]{0,63}$`, `float` → `number`); entries whose parameters are
not all flat scalars are skipped and counted. The first turn's calls are
checked with BFCL's AST rules (`bench/_bfcl/checker.py`); an irrelevance
entry is right when no tool is called. Greedy decoding (temperature 0).

Every category is split by id (`_bfcl.data.part_of`): odd ids are the tuning
part, even ids the report part. `--part report` (the default) runs the figure
to quote; `--part tuning` the part rules may be chosen on; `--part all` runs
both and prints each part, and the gap between them, beside the whole set.
`--category live_multiple` runs BFCL's real users' requests with two to a
dozen tools, split the same way (by the first number of the id); it is not
among the categories run by default. live_simple and live_irrelevance are
held out whole and run only with `--part held-out`.

Prints, per category and configuration: the part, entries run and skipped, the
share of runs that reached a valid first turn (within the retries of the turn
contract) and of first generations that were valid, accuracy, completion
tokens per generation and seconds per entry; writes them to docs/quality.md
(section "bfcl", or `--section`) unless `--no-write`. `--jsonl FILE` keeps
every entry's outcome.

`--ablation` measures the engine's value rules on one part: the default
engine, then each rule off in turn (`copy_bias=0`, `close_bias=0`,
`pick_bias=0`, `string_choices=1`, `check_optional=False`; "every rule off" also has
`new_call_bias=0`, which acts only in a turn after calls, never in BFCL's, and
`no_placeholders=False`), the copy bias's heuristics off (all of them,
then each by name: `heuristics={name: False}`), the opt-in `convert_values=True`,
and every rule off, each on a model loaded for it alone; it prints, per
configuration, the accuracy, its change against the default in points and
the entries won and lost against the default (by id), and writes that to the
section "bfcl-ablation" (or `--section`). `--ablation NAME ...` runs only the
named configurations (the default always runs).
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
import json
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _bfcl.data import CATEGORIES, HELD_OUT, LIVE_SPLIT, PARTS, Entry, in_part, load, part_of
from _bfcl.run import Config, Outcome, Progress, Summary, run_entry, summarise, table
from _report import machine, write_section
from aerix.engines.llamacpp.rules.heuristics import HEURISTICS

CONFIGS = {
    "constrained-required": Config(constrain=True, tool_choice="required"),
    "constrained-auto": Config(constrain=True, tool_choice="auto"),
    "unconstrained-required": Config(constrain=False, tool_choice="required"),
    "unconstrained-auto": Config(constrain=False, tool_choice="auto"),
}

MODEL_NAMES = {
    "smollm2-instruct": "SmolLM2-135M-Instruct (Q4_1)",
    "gemma3-270m": "Gemma 3 270M (base model, Q4_K_M, aerix's Gemma template)",
}
"""How the docs name the models `aerix.load` knows; any other model is named as given."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Ablation:
    """One engine configuration of the ablation: `LlamaCpp` options over its defaults."""

    label: str
    options: dict[str, Any] = field(default_factory=dict)


RULES_OFF = {
    "copy_bias": 0.0,
    "close_bias": 0.0,
    "pick_bias": 0.0,
    "new_call_bias": 0.0,
    "string_choices": 1,
    "check_optional": False,
    "no_placeholders": False,
}
"""`LlamaCpp`'s options with every value rule off (`convert_values` is off by default)."""

ABLATIONS = {
    "default": Ablation(label="default engine (every rule on)"),
    "no-copy-bias": Ablation(label="copy bias off", options={"copy_bias": 0.0}),
    "no-close-bias": Ablation(label="close bias off", options={"close_bias": 0.0}),
    "no-string-choices": Ablation(label="string choices off", options={"string_choices": 1}),
    "no-tool-pick": Ablation(label="tool pick off", options={"pick_bias": 0.0}),
    "no-check-optional": Ablation(
        label="optional fields not decoded ahead", options={"check_optional": False}
    ),
    "no-heuristics": Ablation(
        label="heuristics off", options={"heuristics": dict.fromkeys(HEURISTICS, False)}
    ),
    **{
        f"no-{name.replace('_', '-')}": Ablation(
            label=f"heuristic {name} off", options={"heuristics": {name: False}}
        )
        for name in HEURISTICS
    },
    "convert-values": Ablation(label="conversions on (opt-in)", options={"convert_values": True}),
    "rules-off": Ablation(label="every rule off", options=dict(RULES_OFF)),
}
"""The ablation's configurations, by the name `--ablation` takes; "default" is the baseline."""


async def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--category",
        action="append",
        choices=[*CATEGORIES, *LIVE_SPLIT, *HELD_OUT],
        help="repeatable; default: the four split ones (live_simple and live_irrelevance are held out: --part held-out)",
    )
    ap.add_argument("--config", action="append", choices=list(CONFIGS), help="repeatable; default: all four")
    ap.add_argument(
        "--part",
        choices=[*PARTS, "all", "held-out"],
        default="report",
        help="which part of each category (odd ids tune, even ids report; default: report, the figure to quote; "
        "held-out: the live categories, whole)",
    )
    ap.add_argument(
        "--limit", type=int, default=None, help="the first N flat entries of each category's part"
    )
    ap.add_argument(
        "--nested",
        action="store_true",
        help="run the entries with arrays, tuples, dicts or `any` (schema tools) instead of the flat ones",
    )
    ap.add_argument("--calls-per-turn", type=int, default=1, help="Agent(calls_per_turn=N), 1-8")
    ap.add_argument(
        "--offset", type=int, default=0, help="skip the first N flat entries of each category's part"
    )
    ap.add_argument("--max-tokens", type=int, default=256)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--model", default="smollm2-instruct")
    ap.add_argument("--copy-bias", type=float, default=None, help="LlamaCpp's copy_bias (default: its own)")
    ap.add_argument("--close-bias", type=float, default=None, help="LlamaCpp's close_bias (default: its own)")
    ap.add_argument("--pick-bias", type=float, default=None, help="LlamaCpp's pick_bias (default: its own)")
    ap.add_argument(
        "--string-choices",
        type=int,
        default=None,
        help="LlamaCpp's string_choices (default: its own; 1 is off)",
    )
    ap.add_argument("--no-check-optional", action="store_true", help="LlamaCpp(check_optional=False)")
    ap.add_argument(
        "--heuristics-off",
        nargs="+",
        choices=list(HEURISTICS),
        default=None,
        help="LlamaCpp(heuristics={NAME: False}) for each NAME: the heuristics of the copy bias to turn off",
    )
    ap.add_argument(
        "--convert-values",
        action="store_true",
        help="LlamaCpp(convert_values=True): the opt-in rules that write percentages, units, dates",
    )
    ap.add_argument(
        "--ablation",
        nargs="*",
        choices=list(ABLATIONS),
        default=None,
        help="run the default engine, then each rule off in turn; with names, only those configurations",
    )
    ap.add_argument(
        "--merge",
        nargs="+",
        type=Path,
        default=None,
        help="with --ablation: build its table from these --jsonl files (runs split over processes), run nothing",
    )
    ap.add_argument("--instructions", default="", help="the Agent's instructions (default: none)")
    ap.add_argument("--jsonl", type=Path, default=None, help="write every entry's outcome here")
    ap.add_argument("--no-write", action="store_true", help="do not update docs/quality.md")
    ap.add_argument(
        "--section",
        default=None,
        help='the docs/quality.md section to write (default: "bfcl", "bfcl-ablation")',
    )
    args = ap.parse_args(argv)

    extra: dict[str, Any] = {}
    for name in ("copy_bias", "close_bias", "pick_bias", "string_choices"):
        if getattr(args, name) is not None:
            extra[name] = getattr(args, name)
    if args.no_check_optional:
        extra["check_optional"] = False
    if args.convert_values:
        extra["convert_values"] = True
    if args.heuristics_off:
        extra["heuristics"] = dict.fromkeys(args.heuristics_off, False)
    if args.ablation is not None and extra:
        flags = ", ".join("--" + k.replace("_", "-") for k in extra)
        ap.error(f"--ablation sets the engine's rules itself; drop {flags}")
    if args.merge is not None and args.ablation is None:
        ap.error("--merge builds an ablation's table: pass --ablation too")
    if args.merge is not None and args.jsonl is not None:
        ap.error("--merge reads --jsonl files and runs nothing: drop --jsonl")
    if args.limit is not None and args.limit < 1:
        ap.error(f"--limit must be 1 or more, got {args.limit}")

    categories = args.category or list(CATEGORIES)
    if args.ablation is not None:
        configs = args.config or ["constrained-required"]
    else:
        configs = args.config or list(CONFIGS)
    chosen: dict[str, list[Entry]] = {}
    for category in categories:
        if (category in HELD_OUT) != (args.part == "held-out"):
            ap.error(
                f"--category {category} with --part {args.part}: the held-out categories "
                f"({', '.join(HELD_OUT)}) run with --part held-out, the others with tuning, report or all"
            )
        entries = in_part(load(category), args.part)
        flat = [e for e in entries if e.flat != args.nested and e.single]
        picked = flat[args.offset :]
        chosen[category] = picked[: args.limit] if args.limit else picked

    out = args.jsonl.open("w") if args.jsonl else None
    try:
        if args.merge is not None:
            md: str | None = _ablation_md(args, read_ablation(args.merge, args.part, args.model))
        elif args.ablation is None:
            md = await _plain_run(args, extra, chosen, configs, out)
        else:
            md = await _ablation(args, chosen, configs, out)
    finally:
        if out:
            out.close()
    if md is None:
        return 0
    print()
    print(md)
    if not args.no_write:
        section = args.section or ("bfcl" if args.ablation is None else "bfcl-ablation")
        path = write_section(section, md, file="quality.md")
        print(f"\nwritten to {path}", file=sys.stderr)
    return 0


async def _plain_run(
    args: argparse.Namespace,
    extra: dict[str, Any],
    chosen: dict[str, list[Entry]],
    configs: Sequence[str],
    out: IO[str] | None,
) -> str:
    """Every chosen category under every configuration, on one engine: the markdown."""
    engine = _load(args, extra)
    summaries: list[Summary] = []
    gaps: list[str] = []
    try:
        for category, entries in chosen.items():
            for name in configs:
                config = _config(args, name)
                tags = {"ablation": "default", "options": {}} if not extra else {}
                outcomes = await _run(engine, entries, config, category, name, out, tags, args.model)
                for part, subset in _parts(args.part, outcomes):
                    s = summarise(category, config.label, subset, _skipped(args, category, part), part)
                    summaries.append(s)
                    print(table([s.row()]), flush=True)
                if args.part == "all":
                    gaps.append(_gap_line(category, config, outcomes))
                    print(gaps[-1], flush=True)
    finally:
        engine.close()
    lines = [_preamble(args, extra), "", table([s.row() for s in summaries])]
    if gaps:
        lines += ["", *gaps]
    return "\n".join(lines)


async def _ablation(
    args: argparse.Namespace,
    chosen: dict[str, list[Entry]],
    configs: Sequence[str],
    out: IO[str] | None,
) -> str | None:
    """The ablation: each configuration on a model loaded for it alone; the markdown (`None`
    when the default engine is not among them: the rows are then only in `--jsonl`, for `--merge`)."""
    names = list(dict.fromkeys(args.ablation or ABLATIONS))
    if "convert_values" not in _engine_options():
        if args.ablation and "convert-values" in args.ablation:
            raise SystemExit("this aerix's LlamaCpp has no convert_values option; drop convert-values")
        if "convert-values" in names:
            names.remove("convert-values")
            print("LlamaCpp has no convert_values option yet: that row is left out", file=sys.stderr)
    results: dict[tuple[str, str, str], list[Scored]] = {}
    for name in names:
        ablation = ABLATIONS[name]
        t0 = time.perf_counter()
        engine = _load(args, ablation.options)
        try:
            for category, entries in chosen.items():
                for config in configs:
                    tags = {"ablation": name, "options": ablation.options}
                    outcomes = await _run(
                        engine, entries, _config(args, config), category, config, out, tags, args.model
                    )
                    results[(name, category, config)] = [
                        Scored(o.id, o.check.valid, o.seconds) for o in outcomes
                    ]
        finally:
            engine.close()
        print(f"{name}: {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    if "default" not in names:
        print(
            "no default run here: merge these --jsonl rows with one (--merge) for the table", file=sys.stderr
        )
        return None
    return _ablation_md(args, results)


@dataclass(frozen=True, slots=True)
class Scored:
    """One entry's outcome, as the ablation compares it."""

    id: str
    right: bool
    seconds: float


def read_ablation(
    paths: Sequence[Path], part: str = "all", model: str | None = None
) -> dict[tuple[str, str, str], list[Scored]]:
    """The ablation rows of `--jsonl` files on `part`, by (configuration, category, decoding): to
    merge the runs of one ablation that ran in separate processes (`--merge`). A plain run of
    the default engine counts as the "default" configuration. Rows of another model than
    `model` are refused."""
    results: dict[tuple[str, str, str], list[Scored]] = {}
    for path in paths:
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if not line.strip():
                continue
            row = json.loads(line)
            if "ablation" not in row:
                raise ValueError(
                    f"{path}:{n}: not an ablation row (no 'ablation' key); pass --ablation runs' --jsonl"
                )
            if model is not None and row.get("model", model) != model:
                raise ValueError(
                    f"{path}:{n}: a run of {row['model']!r}, not {model!r}; pass --model {row['model']}"
                )
            if part != "all" and part_of(row["id"]) != part:
                continue
            key = (row["ablation"], row["category"], row["config"])
            results.setdefault(key, []).append(
                Scored(row["id"], bool(row["check"]["valid"]), float(row["seconds"]))
            )
    return results


def _ablation_md(args: argparse.Namespace, results: dict[tuple[str, str, str], list[Scored]]) -> str:
    names = [n for n in ABLATIONS if any(k[0] == n for k in results)]
    if "default" not in names:
        raise ValueError("the ablation has no default run to compare with; run or merge `default` too")
    categories = list(dict.fromkeys(k[1] for k in results))
    configs = list(dict.fromkeys(k[2] for k in results))
    header = [
        "category",
        "part",
        "engine",
        "options",
        "run",
        "accuracy",
        "change (points)",
        "won",
        "lost",
        "s/entry",
    ]
    rows: list[list[str]] = []
    notes: list[str] = []
    for category in categories:
        for config in configs:
            default = results.get(("default", category, config))
            if default is None:
                raise ValueError(f"no default run of {category} ({config}) to compare with; merge one")
            base = {o.id: o.right for o in default}
            for name in names:
                scored = results.get((name, category, config))
                if scored is None:
                    continue  # not run for this category (the tool pick where one tool is given)
                right = {o.id: o.right for o in scored}
                won, lost = won_lost(base, right)
                n = len(scored) or 1
                accuracy = sum(right.values()) / n
                change = 100 * (accuracy - sum(base.values()) / n)
                options = (
                    ", ".join(f"`{k}={v!r}`" for k, v in ABLATIONS[name].options.items())
                    or "LlamaCpp's defaults"
                )
                rows.append(
                    [
                        category if len(configs) == 1 else f"{category}, {_config(args, config).label}",
                        _part_of_all([o.id for o in scored]),
                        ABLATIONS[name].label,
                        options,
                        str(len(scored)),
                        f"{accuracy:.1%} ({sum(right.values())}/{len(scored)})",
                        "—" if name == "default" else f"{change:+.1f}",
                        "—" if name == "default" else str(len(won)),
                        "—" if name == "default" else str(len(lost)),
                        f"{sum(o.seconds for o in scored) / n:.2f}",
                    ]
                )
                print(table([rows[-1]], header), flush=True)
                if name != "default" and (won or lost):
                    notes.append(
                        f"- {category}, {ABLATIONS[name].label}: won {_ids(won)}; lost {_ids(lost)}."
                    )
    config_labels = ", ".join(_config(args, c).label for c in configs)
    lines = [
        _preamble(args, {}),
        "",
        f"The ablation ({config_labels}): each row is one engine configuration, on a model loaded for it "
        "alone; its accuracy, the change against the default engine in points, and the entries it got "
        "right that the default got wrong (won) and the reverse (lost).",
        "",
        table(rows, header),
    ]
    if notes:
        lines += ["", "The entries won and lost, by the number of their id:", "", *notes]
    return "\n".join(lines)


def _part_of_all(ids: Sequence[str]) -> str:
    parts = {part_of(i) for i in ids}
    return parts.pop() if len(parts) == 1 else "all"


async def _run(
    engine: Any,
    entries: Sequence[Entry],
    config: Config,
    category: str,
    name: str,
    out: IO[str] | None,
    tags: dict[str, Any],
    model: str,
) -> list[Outcome]:
    label = f"{category} {config.label}" + (f" [{tags['ablation']}]" if "ablation" in tags else "")
    bar = Progress(len(entries), label)
    outcomes = []
    for entry in entries:
        o = await run_entry(engine, entry, config)
        outcomes.append(o)
        bar.step(o.check.valid)
        if out:
            row = {
                "model": model,
                "category": category,
                "part": part_of(entry.id),
                "config": name,
                **tags,
                **_plain(o),
            }
            out.write(json.dumps(row, default=str) + "\n")
            out.flush()
    bar.close()
    return outcomes


def _load(args: argparse.Namespace, options: dict[str, Any]) -> Any:
    import aerix

    t_load = time.perf_counter()
    engine = aerix.load(args.model, n_threads=args.threads, **options)
    print(
        f"model {args.model} loaded in {time.perf_counter() - t_load:.1f} s ({options or 'defaults'})",
        file=sys.stderr,
    )
    return engine


def _engine_options() -> set[str]:
    from aerix.engines.llamacpp import LlamaCpp

    return set(inspect.signature(LlamaCpp.__init__).parameters)


def _config(args: argparse.Namespace, name: str) -> Config:
    base = CONFIGS[name]
    return Config(
        constrain=base.constrain,
        tool_choice=base.tool_choice,
        max_tokens=args.max_tokens,
        instructions=args.instructions,
        calls_per_turn=args.calls_per_turn,
    )


def _parts(part: str, outcomes: list[Outcome]) -> list[tuple[str, list[Outcome]]]:
    """The outcomes' rows: one for `part`, or, for "all", the report part, the tuning part and all."""
    if part != "all":
        return [(part, outcomes)]
    return [(p, [o for o in outcomes if part_of(o.id) == p]) for p in ("report", "tuning")] + [
        ("all", outcomes)
    ]


def _skipped(args: argparse.Namespace, category: str, part: str) -> int:
    entries = in_part(load(category), part)
    return sum(e.flat == args.nested or not e.single for e in entries)


def _gap_line(category: str, config: Config, outcomes: Sequence[Outcome]) -> str:
    """The accuracy of each part of one run, and the gap between them, in points."""
    acc = {p: _accuracy([o for o in outcomes if part_of(o.id) == p]) for p in PARTS}
    gap = 100 * (acc["report"] - acc["tuning"])
    return (
        f"- {category}, {config.label}: report part {acc['report']:.1%}, tuning part "
        f"{acc['tuning']:.1%}, gap (report − tuning) {gap:+.1f} points."
    )


def _accuracy(outcomes: Sequence[Outcome]) -> float:
    return sum(o.check.valid for o in outcomes) / (len(outcomes) or 1)


def _preamble(args: argparse.Namespace, extra: dict[str, Any]) -> str:
    kind = "nested" if args.nested else "flat"
    part = {
        "report": "the report part (even ids)",
        "tuning": "the tuning part (odd ids)",
        "all": "both parts (odd ids tune, even ids report)",
        "held-out": "the held-out live categories (never tuned on)",
    }[args.part]
    limit = f"{args.limit} {kind} entries of each category" if args.limit else f"every {kind} entry"
    if args.offset:
        limit += f" after the first {args.offset}"
    elif args.limit:
        limit = "the first " + limit
    options = ", ".join(f"`{k}={v!r}`" for k, v in extra.items())
    engine = f"`LlamaCpp` with {options}" if options else "`LlamaCpp`'s defaults"
    if args.ablation is not None:
        engine = "`LlamaCpp` with each row's options"
    model = MODEL_NAMES.get(args.model, args.model)
    return (
        f"{model} through `aerix.Agent`, {limit} of {part}, {engine}, temperature 0, "
        f"max_tokens {args.max_tokens}, retries 2; {machine()}, {args.threads} threads."
    )


def won_lost(base: dict[str, bool], other: dict[str, bool]) -> tuple[list[str], list[str]]:
    """The ids `other` got right and `base` wrong (won), and the reverse (lost), in `other`'s order.

    Both must hold the same ids: the same entries, run under two configurations.
    """
    if base.keys() != other.keys():
        missing = sorted(base.keys() ^ other.keys())
        raise ValueError(f"the two runs hold different entries: {missing[:5]} in one only; run the same part")
    won = [i for i in other if other[i] and not base[i]]
    lost = [i for i in other if base[i] and not other[i]]
    return won, lost


def _ids(ids: Sequence[str]) -> str:
    return ", ".join(i.rsplit("_", 1)[1] for i in ids) if ids else "none"


def _plain(o: object) -> dict[str, object]:
    from dataclasses import asdict

    return asdict(o)  # type: ignore[call-overload, no-any-return]


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
