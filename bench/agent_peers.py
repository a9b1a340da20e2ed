"""The agent benchmark side by side: aerix and the libraries users would pick instead, on one model.

Run from the repository root (after `python bench/llama_server.py`, which builds
llama.cpp's own server once, and with the peers in .venv-bench: `python3 -m venv
.venv-bench && .venv-bench/bin/pip install smolagents==1.26.0 pydantic-ai==2.62.0
openai-agents==0.24.0`):

    python bench/agent_peers.py [--model smollm2-instruct] [--part report] [--threads 2]
        [--config NAME ...] [--jsonl FILE] [--table-only] [--no-write]

The tasks are bench/agent_tasks.py's (`bench/_agent_tasks`: 36 tasks about an invented
world, one to three tool calls each; odd ids tune, even ids report). Every library gets
the same GGUF, the same tools (by their JSON Schema), no instructions, at most 8 model
requests a run, the engine's default temperature and a seed per task. The configurations:

- `aerix`: `aerix.Agent` on the in-process engine, as shipped (`aerix.load(model)`).
- `aerix-rules-off`: the same with the engine's value rules off (bench/agent_tasks.py's
  `rules-off`).
- `aerix-server`: `aerix.Agent` on `OpenAICompatible` against llama.cpp's `llama-server`
  (`--jinja`): the turn schema as the server's `json_schema` constraint, no value rules.
- `pydantic-ai`, `openai-agents`, `smolagents`: each library in its most direct documented
  way for a local model (`bench/_agent_tasks/peers.py`, `peer_smolagents.py`), against
  `llama-server --jinja` (which makes tool calls for any template, under a grammar), and
  with the suffix `-lcp` against llama-cpp-python's server (`--chat_format
  chatml-function-calling`).

Per configuration and part: tasks solved, runs that ended with a final, tool calls,
generations and seconds per task, and what the server did where a run failed (its
first error). `--jsonl FILE` keeps every outcome and skips what the file holds already,
so an interrupted run goes on where it stopped; `--table-only` makes the table of what it holds.
The outcomes of the published tables are in bench/data/agent_peers/. Writes the table to docs/quality.md
(section "agent-peers-MODEL") unless `--no-write`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _agent_tasks.run import Outcome, run_task, summary_table
from _agent_tasks.tasks import TASKS, part_of
from _report import Progress, machine, write_section
from _servers import served
from agent_tasks import CONFIGS as AERIX_CONFIGS

ROOT = Path(__file__).resolve().parent.parent
PEER_PYTHON = ROOT / ".venv-bench" / "bin" / "python"

SERVERS = {"llama-server": "llama.cpp's `llama-server --jinja`", "lcp": "llama-cpp-python's server"}
CONFIGS: dict[str, tuple[str, str | None]] = {
    "aerix": ("aerix, in process (as shipped)", None),
    "aerix-rules-off": ("aerix, in process, value rules off", None),
    "aerix-server": ("aerix through `OpenAICompatible`", "llama-server"),
    "pydantic-ai": ("pydantic-ai", "llama-server"),
    "openai-agents": ("OpenAI Agents SDK", "llama-server"),
    "smolagents": ("smolagents `ToolCallingAgent`", "llama-server"),
    "pydantic-ai-lcp": ("pydantic-ai", "lcp"),
    "openai-agents-lcp": ("OpenAI Agents SDK", "lcp"),
    "smolagents-lcp": ("smolagents `ToolCallingAgent`", "lcp"),
}
"""Each configuration's label and the server it runs against (`None`: in process)."""


async def run_aerix(
    config: str, args: argparse.Namespace, base_url: str | None, tasks: list[Any]
) -> list[Outcome]:
    """The tasks through `aerix.Agent`: on the in-process engine, or on the server at `base_url`."""
    import aerix
    from aerix.engines import OpenAICompatible

    if base_url is not None:
        engine: Any = OpenAICompatible(base_url, "local", context_window=4096)
    else:
        extra = AERIX_CONFIGS["rules-off"][1] if config == "aerix-rules-off" else {}
        engine = aerix.load(args.model, n_threads=args.threads, **extra)
    out = []
    try:
        for task in tasks:
            generation = {"seed": args.seed + int(task.id.rsplit("_", 1)[1]), "temperature": args.temperature}
            out.append(await run_task(engine, task, config, generation=generation))
    finally:
        if base_url is not None:
            await engine.aclose()
        else:
            engine.close()
    return out


def run_peer(config: str, args: argparse.Namespace, base_url: str, tasks: list[Any]) -> Iterator[Outcome]:
    """The tasks through a peer library, each outcome as it comes."""
    library = config.removesuffix("-lcp")
    common = ["--base-url", base_url, "--config", config, "--seed", str(args.seed)]
    common += ["--temperature", str(args.temperature), *[a for t in tasks for a in ("--task", t.id)]]
    if library == "smolagents":
        script = ROOT / "bench" / "_agent_tasks" / "peer_smolagents.py"
        # llama-cpp-python's chatml-function-calling takes only "auto"; llama-server takes smolagents' own
        extra = ["--tool-choice", "auto" if config.endswith("-lcp") else "required"]
    else:
        script = ROOT / "bench" / "_agent_tasks" / "peers.py"
        extra = ["--library", library]
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    proc = subprocess.Popen(
        [str(PEER_PYTHON), str(script), *common, *extra], stdout=subprocess.PIPE, text=True, env=env
    )
    assert proc.stdout is not None
    for line in proc.stdout:
        yield Outcome(**json.loads(line))
    if proc.wait() != 0:
        raise SystemExit(f"the {library} peer failed (exit {proc.returncode})")


def versions() -> str:
    code = (
        "from importlib.metadata import version as v; "
        "print(', '.join(f'{p} {v(p)}' for p in ('pydantic-ai-slim', 'openai-agents', 'smolagents')))"
    )
    done = subprocess.run([str(PEER_PYTHON), "-c", code], capture_output=True, text=True, check=False)
    return done.stdout.strip() or "the peers' versions unknown"


def what_failed(outcomes: list[Outcome], config: str) -> str | None:
    """How the runs of `config` that ended without a final ended, and the first error's words;
    `None` if every run ended with a final."""
    mine = [o for o in outcomes if o.config == config and o.ending != "final"]
    if not mine:
        return None
    counts: dict[str, int] = {}
    for o in mine:
        counts[o.ending] = counts.get(o.ending, 0) + 1
    said = ", ".join(f"{n} `{e}`" for e, n in sorted(counts.items()))
    errors = [o.final for o in mine if o.ending == "error"]
    return said + (f"; the first error: {errors[0][:160]!r}" if errors else "")


def failures(outcomes: list[Outcome], labels: list[tuple[str, str]]) -> list[str]:
    """The lines on the configurations whose runs did not all end with a final; the others go unnamed."""
    failed = [(label, said) for c, label in labels if (said := what_failed(outcomes, c)) is not None]
    if not failed:
        return ["Every run ended with a final."]
    return [
        "How the runs that did not end with a final ended (every run of the other configurations did):",
        "",
        *[f"- {label}: {said}." for label, said in failed],
    ]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="smollm2-instruct")
    ap.add_argument("--part", choices=["all", "report", "tuning"], default="all")
    ap.add_argument("--config", action="append", choices=list(CONFIGS), help="repeatable; default: all")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--temperature", type=float, default=0.8, help="the engine's default, 0.8")
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--jsonl", type=Path, default=None, help="keep every outcome here; skip those it holds")
    ap.add_argument("--table-only", action="store_true", help="run nothing: the table of what --jsonl holds")
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args(argv)
    from aerix.engines._load import model_path

    gguf = model_path(args.model)
    tasks = [t for t in TASKS if args.part == "all" or part_of(t) == args.part][: args.limit]
    configs = args.config or list(CONFIGS)
    outcomes: list[Outcome] = []
    if args.jsonl is not None and args.jsonl.exists():
        outcomes = [Outcome(**json.loads(line)) for line in args.jsonl.read_text().splitlines() if line]
    done = {(o.id, o.config) for o in outcomes}
    for server in () if args.table_only else (None, "llama-server", "lcp"):
        mine = [c for c in configs if CONFIGS[c][1] == server]
        todo = {c: [t for t in tasks if (t.id, c) not in done] for c in mine}
        if not any(todo.values()):
            continue
        with served(server, gguf, args.threads) if server else contextlib.nullcontext() as base_url:
            for config, left in todo.items():
                if not left:
                    continue
                bar = Progress(len(left), config, right="solved", unit="task")
                if config.startswith("aerix"):
                    got = asyncio.run(run_aerix(config, args, base_url, left))
                else:
                    got = run_peer(config, args, base_url, left)
                for o in got:
                    outcomes.append(o)
                    bar.step(o.solved)
                    if args.jsonl is not None:
                        with args.jsonl.open("a") as f:
                            f.write(json.dumps(asdict(o), default=str) + "\n")
                bar.close()
    chosen = {t.id for t in tasks}
    outcomes = [o for o in outcomes if o.id in chosen and o.config in configs]
    labels = [
        (c, f"{CONFIGS[c][0]}" + (f", {SERVERS[CONFIGS[c][1]]}" if CONFIGS[c][1] else "")) for c in configs
    ]
    minutes = sum(o.seconds for o in outcomes) / 60
    md = "\n".join(
        [
            f"`python bench/agent_peers.py --model {args.model} --part {args.part} --threads {args.threads}"
            f"{'' if args.config is None else ''.join(f' --config {c}' for c in configs)}` "
            f"({machine()}; {minutes:.0f} minutes of runs). {len(tasks)} tasks, {args.model}, temperature "
            f"{args.temperature}, seed {args.seed}+NN for task agent_NN, at most 8 model requests a run; "
            f"{versions()}.",
            "",
            summary_table(labels, outcomes),
            "",
            *failures(outcomes, labels),
        ]
    )
    print(md)
    if not args.no_write:
        print(
            f"written to {write_section(f'agent-peers-{args.model}', md, file='quality.md')}", file=sys.stderr
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
