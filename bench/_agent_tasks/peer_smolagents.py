"""The agent benchmark's tasks through smolagents' `ToolCallingAgent` (run in .venv-bench).

The model is the same GGUF served by `python -m llama_cpp.server` (llama-cpp-python,
`--chat_format chatml-function-calling`) on 127.0.0.1, reached with smolagents'
`OpenAIServerModel` at the engine's default temperature, as bench/_bfcl/peer_smolagents.py
does. Each tool of `world` becomes a smolagents `Tool` calling the same function;
`max_steps=8`, as aerix's `Limits(turns=8)`. A run that reaches `max_steps` (smolagents
then asks the model for an answer once more) ended with `turns`, not with a final.

`bench/agent_tasks.py --peer smolagents` starts the server and runs this with
`PYTHONPATH=src` (for `aerix.tool`, which `world` uses); by hand:
`PYTHONPATH=src .venv-bench/bin/python bench/_agent_tasks/peer_smolagents.py --port 8765
--task agent_01 --task agent_02`. Prints one JSON outcome a line (the fields of
`run.Outcome`) on stdout.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _agent_tasks.peers import outcome
from _agent_tasks.tasks import TASKS, Task
from _agent_tasks.world import TOOLS

CONFIG = "smolagents"
"""The outcomes' configuration name, unless `--config` gives another."""
_TYPES = {"string": "string", "number": "number", "integer": "integer", "boolean": "boolean"}


def smol_tool(name: str, log: list[dict[str, Any]]) -> Any:
    """The world's tool `name` as a smolagents `Tool` that logs its calls in `log`."""
    from smolagents import Tool

    source = TOOLS[name]
    schema = source.schema
    inputs: dict[str, dict[str, Any]] = {}
    for key, spec in schema["properties"].items():
        d: dict[str, Any] = {"type": _TYPES[spec["type"]], "description": spec.get("description") or key}
        if "enum" in spec:
            d["enum"] = spec["enum"]
            d["description"] += " (one of: " + ", ".join(spec["enum"]) + ")"
        inputs[key] = d

    def forward(self: Any, **kwargs: Any) -> str:
        try:
            result = str(source.run(kwargs, None))
        except Exception as exc:  # the error goes back to the model, as aerix's error result does
            log.append({"tool": name, "input": kwargs, "result": f"error: {exc}", "error": True})
            raise
        log.append({"tool": name, "input": kwargs, "result": result, "error": False})
        return result

    cls = type(
        f"T_{name}",
        (Tool,),
        {
            "name": name,
            "description": source.description,
            "inputs": inputs,
            "output_type": "string",
            "skip_forward_signature_validation": True,
            "forward": forward,
        },
    )
    return cls()


def run_task(model: Any, task: Task, config: str = CONFIG) -> dict[str, Any]:
    """One task's run through `ToolCallingAgent`, as a `run.Outcome`'s fields."""
    from smolagents import ActionStep, LogLevel, ToolCallingAgent

    log: list[dict[str, Any]] = []
    agent = ToolCallingAgent(
        tools=[smol_tool(n, log) for n in task.tools], model=model, max_steps=8, verbosity_level=LogLevel.OFF
    )
    t0 = time.perf_counter()
    ending, final = "error", ""
    try:
        result = agent.run(task.prompt, return_full_result=True)
        final = str(result.output)
        ending = "final" if result.state == "success" else "turns"
    except Exception as exc:  # a run that raises ended with an error
        final = f"{type(exc).__name__}: {exc}"[:300]
    steps = [s for s in agent.memory.steps if isinstance(s, ActionStep)]
    generations = len(steps)  # one model call each, the answer asked for past max_steps included
    return outcome(task, config, ending, final, generations, log, t0)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--port", type=int, default=8765)
    ap.add_argument("--base-url", default=None, help="the server's /v1 URL (default: 127.0.0.1 at --port)")
    ap.add_argument("--config", default=CONFIG, help="the outcomes' configuration name")
    ap.add_argument(
        "--tool-choice",
        default="auto",
        help='"auto" (llama-cpp-python\'s chatml-function-calling takes no other) or "required" (smolagents\' own)',
    )
    ap.add_argument("--task", action="append", help="a task id, repeatable; default: every task")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--temperature", type=float, default=0.8)
    args = ap.parse_args()
    from smolagents import OpenAIServerModel

    chosen = [t for t in TASKS if args.task is None or t.id in args.task]
    for task in chosen:
        model = OpenAIServerModel(
            model_id="smollm2",
            api_base=args.base_url or f"http://127.0.0.1:{args.port}/v1",
            api_key="none",
            flatten_messages_as_text=True,  # llama_cpp.server takes only string contents
            temperature=args.temperature,
            seed=args.seed + int(task.id.rsplit("_", 1)[1]),
            max_tokens=512,
            tool_choice=args.tool_choice,
        )
        print(json.dumps(run_task(model, task, args.config), default=str), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
