"""Multi-step agents on the embedded model: 36 tasks about an invented world, through
the real `aerix.Agent`.

Run: `python bench/agent_tasks.py [--limit N] [--config default] [--threads 1]
[--peer smolagents] [--no-write] [--jsonl FILE]`.

Each task (`bench/_agent_tasks/tasks.py`) asks about invented countries, cities,
people and products, so that no answer comes from the model's memory, and takes
one to three calls of deterministic tools (a calculator, unit conversions,
lookups in small fixed tables; `bench/_agent_tasks/world.py`), often chained:
look up a country's capital, then that city's population. A run is solved when
it ends with a final whose text holds the expected answer (a whole word, or a
number equal to it to two decimal places; `bench/_agent_tasks/score.py`).

The agent is `aerix.Agent(model=aerix.load("smollm2-instruct"), tools=<the task's
tools>, limits=Limits(turns=8))` with the library's defaults otherwise
(instructions none, `tool_choice="auto"`, the engine's sampling at its default
temperature), each task with a fixed seed so that a rerun gives the same runs.
Configurations: `default` (the engine's value rules on, as shipped),
`rules-off` (`copy_bias=0, close_bias=0, pick_bias=0, new_call_bias=0,
string_choices=1, check_optional=False, no_placeholders=False`), `no-new-calls`
(`new_call_bias=0`: the default engine without the lean away from calls already
made) and `no-placeholders` (`no_placeholders=False`: values may copy the
contract's `<your answer>`);
with `--peer smolagents` also smolagents' `ToolCallingAgent` on the same GGUF, served
by `llama_cpp.server` on 127.0.0.1 (`bench/_agent_tasks/peer_smolagents.py`, run
with the Python of `--peer-python`, default .venv-bench, which has smolagents).

The task set is split by id (`part_of`): odd ids are the tuning part, even ids
the report part; rules may be chosen on the tuning part only, and the report
part is the figure to quote. Prints, per configuration and part, the share
solved, the share of runs that ended with a final (not `turns`, `retries` or
`error`), generations and calls per run and seconds per task; writes them to
docs/quality.md (section "agent") unless `--no-write`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _agent_tasks.run import Outcome, run_task, summary_table
from _agent_tasks.tasks import PARTS, TASKS, part_of
from _report import Progress, machine, write_section
from _servers import served

CONFIGS: dict[str, tuple[str, dict[str, Any]]] = {
    "default": ("aerix, default engine", {}),
    "rules-off": (
        "aerix, value rules off",
        {
            "copy_bias": 0,
            "close_bias": 0,
            "pick_bias": 0,
            "new_call_bias": 0,
            "string_choices": 1,
            "check_optional": False,
            "no_placeholders": False,
        },
    ),
    "no-new-calls": ("aerix, new calls off", {"new_call_bias": 0}),
    "no-placeholders": ("aerix, placeholders allowed", {"no_placeholders": False}),
}
"""Each configuration's label and the `aerix.load` options it adds."""


ROOT = Path(__file__).resolve().parent.parent


def run_peer(args: argparse.Namespace, task_ids: list[str], out: Any = None) -> tuple[str, list[Outcome]]:
    """The tasks through smolagents (`peer_smolagents.py` under `args.peer_python`) against
    `llama_cpp.server` serving the same GGUF on 127.0.0.1; its label and outcomes (each
    also written to `out` as it comes, if given)."""
    from aerix.engines._load import model_path

    python = Path(args.peer_python)
    if not python.exists():
        raise SystemExit(
            f"--peer smolagents needs a Python with smolagents at {python}: "
            "python3 -m venv .venv-bench && .venv-bench/bin/pip install smolagents==1.26.0 openai"
        )
    with served("lcp", model_path(args.model), args.threads) as base_url:
        version = subprocess.run(
            [str(python), "-c", "import smolagents; print(smolagents.__version__)"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        temperature = args.temperature if args.temperature is not None else _default_temperature()
        command = [
            str(python),
            str(ROOT / "bench" / "_agent_tasks" / "peer_smolagents.py"),
            "--base-url",
            base_url,
        ]
        command += ["--seed", str(args.seed), "--temperature", str(temperature)]
        command += [a for i in task_ids for a in ("--task", i)]
        env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
        peer = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, env=env)
        assert peer.stdout is not None
        outcomes = []
        bar = Progress(len(task_ids), "smolagents", right="solved", unit="task")
        for line in peer.stdout:
            o = Outcome(**json.loads(line))
            outcomes.append(o)
            bar.step(o.solved)
            if out:
                out.write(json.dumps(asdict(o), default=str) + "\n")
                out.flush()
        bar.close()
        if peer.wait() != 0:
            raise SystemExit(f"the smolagents peer failed (exit {peer.returncode})")
        return f"smolagents {version} `ToolCallingAgent`", outcomes


def _default_temperature() -> float:
    from aerix.engines.llamacpp._sampling import Sampling

    return Sampling().temperature


def _mark(o: Outcome | None) -> str:
    if o is None:
        return ""
    return ("solved" if o.solved else "wrong") + ("" if o.ending == "final" else f", ended `{o.ending}`")


def tuning_details(outcomes: list[Outcome], configs: list[str]) -> str:
    """Each tuning task's outcome under each configuration (the report part's are not
    published: nothing may be tuned on them)."""
    by = {(o.id, o.config): o for o in outcomes}
    labels = [CONFIGS[c][0] if c in CONFIGS else c for c in configs]
    lines = ["| task | question | answer | " + " | ".join(labels) + " |", "|" + "---|" * (3 + len(configs))]
    for task in TASKS:
        if part_of(task) != "tuning" or not any((task.id, c) in by for c in configs):
            continue
        cells = [_mark(by.get((task.id, c))) for c in configs]
        lines.append(f"| {task.id} | {task.prompt} | {task.answer} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


async def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--config", action="append", choices=list(CONFIGS), help="repeatable; default: all of them"
    )
    ap.add_argument("--limit", type=int, default=None, help="the first N tasks only")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0, help="task agent_NN samples with seed SEED+NN")
    ap.add_argument("--temperature", type=float, default=None, help="default: the engine's own")
    ap.add_argument("--model", default="smollm2-instruct")
    ap.add_argument("--jsonl", type=Path, default=None, help="write every run's outcome here")
    ap.add_argument(
        "--peer", choices=["smolagents"], default=None, help="also run the tasks through this library"
    )
    ap.add_argument("--peer-python", default=str(ROOT / ".venv-bench" / "bin" / "python"))
    ap.add_argument(
        "--peer-only", action="store_true", help="run the peer alone (merge its --jsonl later with --merge)"
    )
    ap.add_argument("--part", choices=["all", *PARTS], default="all", help="the tasks of one part only")
    ap.add_argument("--no-write", action="store_true", help="do not update docs/quality.md")
    ap.add_argument(
        "--section", default="agent", help='the docs/quality.md section to write (default "agent")'
    )
    ap.add_argument(
        "--title", default="Multi-step agents: the benchmark of our own", help="the section's heading"
    )
    ap.add_argument(
        "--merge",
        type=Path,
        action="append",
        default=None,
        help="build the tables from this --jsonl file of a run (repeatable: several runs' files); run nothing",
    )
    args = ap.parse_args(argv)
    if args.limit is not None and args.limit < 1:
        ap.error(f"--limit must be 1 or more, got {args.limit}")
    if args.peer_only and args.peer is None:
        ap.error("--peer-only needs --peer smolagents")

    tasks = [t for t in TASKS if args.part == "all" or part_of(t) == args.part]
    tasks = tasks[: args.limit] if args.limit else tasks
    configs = [] if args.peer_only else args.config or list(CONFIGS)
    outcomes: list[Outcome] = []
    if args.merge:
        outcomes = [
            Outcome(**json.loads(line))
            for path in args.merge
            for line in path.read_text().splitlines()
            if line
        ]
        chosen = {t.id for t in tasks}
        outcomes = [o for o in outcomes if o.id in chosen]
        configs = list(dict.fromkeys(o.config for o in outcomes))
        if "smolagents" in configs:
            CONFIGS["smolagents"] = (f"smolagents {_peer_version(args)} `ToolCallingAgent`", {})
        labels = [(c, CONFIGS[c][0]) for c in configs]
        minutes = sum(o.seconds for o in outcomes) / 60
    else:
        labels, minutes = await _run(args, tasks, configs, outcomes)
    return _report(args, tasks, configs, labels, outcomes, minutes)


def _peer_version(args: argparse.Namespace) -> str:
    python = Path(args.peer_python)
    code = "import smolagents; print(smolagents.__version__)"
    done = subprocess.run([str(python), "-c", code], capture_output=True, text=True, check=False)
    return done.stdout.strip() or "?"


async def _run(
    args: argparse.Namespace, tasks: list[Any], configs: list[str], outcomes: list[Outcome]
) -> tuple[list[tuple[str, str]], float]:
    """Run the tasks under each configuration (and the peer), appending to `outcomes`;
    the configurations' names and labels, and the minutes it took."""
    import aerix

    out = args.jsonl.open("w") if args.jsonl else None
    t_all = time.perf_counter()
    try:
        for name in configs:
            extra = CONFIGS[name][1]
            engine = aerix.load(args.model, n_threads=args.threads, **extra)
            try:
                bar = Progress(len(tasks), name, right="solved", unit="task")
                for task in tasks:
                    generation: dict[str, Any] = {"seed": args.seed + int(task.id.rsplit("_", 1)[1])}
                    if args.temperature is not None:
                        generation["temperature"] = args.temperature
                    o = await run_task(engine, task, name, generation=generation)
                    outcomes.append(o)
                    bar.step(o.solved)
                    if out:
                        out.write(json.dumps(asdict(o), default=str) + "\n")
                        out.flush()
                bar.close()
            finally:
                engine.close()
        labels = [(c, CONFIGS[c][0]) for c in configs]
        if args.peer:
            label, peer = run_peer(args, [t.id for t in tasks], out)
            outcomes += peer
            labels.append(("smolagents", label))
            configs.append("smolagents")
            CONFIGS["smolagents"] = (label, {})
    finally:
        if out:
            out.close()
    return labels, (time.perf_counter() - t_all) / 60


def _report(
    args: argparse.Namespace,
    tasks: list[Any],
    configs: list[str],
    labels: list[tuple[str, str]],
    outcomes: list[Outcome],
    minutes: float,
) -> int:
    """Print the tables and write them to docs/quality.md (unless `--no-write`)."""
    import aerix

    limits = aerix.Limits(turns=8)
    from aerix.engines.llamacpp._sampling import Sampling

    t = Sampling()
    sampling = (
        f"the engine's default sampling (temperature {t.temperature}, top_k {t.top_k}, top_p {t.top_p}, "
        f"min_p {t.min_p})"
        if args.temperature is None
        else f"temperature {args.temperature}"
    )
    scope = (
        f"{len(tasks)} of the {len(TASKS)} tasks" if len(tasks) < len(TASKS) else f"all {len(TASKS)} tasks"
    )
    tuned = any(part_of(t) == "tuning" for t in tasks)
    # The tuning part task by task is for choosing rules: printed, not written into the docs.
    details = ["", "The tuning part, task by task:", "", tuning_details(outcomes, configs)] if tuned else []
    md = "\n".join(
        [
            f"## {args.title}",
            "",
            f"`bench/agent_tasks.py`: {len(TASKS)} fixed tasks (`bench/_agent_tasks/tasks.py`) about an invented "
            "world (countries, cities, people, products with made-up numbers, so that no answer comes from "
            "the model's memory), each taking one to three calls of deterministic tools (a calculator, unit "
            "conversions, lookups in small tables), many chained (a country's capital, then that city's "
            "population). A run is solved when it ends with a final whose text holds the expected answer (a "
            "whole word, or the number to two decimal places). Odd ids are the tuning part, even ids the "
            "report part: quote the report part; rules may be chosen on the tuning part only. `Limits` "
            "keeps its default `repeats=1`: a call repeated past it does not run, and the next "
            "generation may only answer.",
            "",
            f"{args.model} through `aerix.Agent`, {scope} ({sum(part_of(t) == 'report' for t in tasks)} "
            f"report, {sum(part_of(t) == 'tuning' for t in tasks)} tuning), `{limits!r}` (the defaults but "
            f"`turns`), instructions none, `tool_choice` auto, {sampling}, seed {args.seed}+NN for task "
            f"agent_NN; {machine()}, {args.threads} thread(s); {minutes:.1f} minutes in all.",
            "",
            summary_table(labels, outcomes),
        ]
    )
    print()
    print("\n".join([md, *details]))
    if not args.no_write:
        path = write_section(args.section, md, file="quality.md")
        print(f"\nwritten to {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
