"""The same BFCL entries through smolagents' `ToolCallingAgent` (run in .venv-bench).

The model is the same GGUF served by `python -m llama_cpp.server` (llama-cpp-python,
`--chat_format chatml-function-calling`, SmolLM2's own prompt format with
llama-cpp-python's tool-calling grammar) on 127.0.0.1, reached with smolagents'
`OpenAIServerModel` at temperature 0. Each BFCL function becomes a smolagents
`Tool` that records its calls. The first step with tool calls (within 3 steps,
smolagents retrying a step it cannot parse) is checked as aerix's first turn is.

Run: `.venv-bench/bin/python bench/_bfcl/peer_smolagents.py --port 8765 --limit 20`
with the server already listening, started with `--n_ctx 4096` (smolagents' prompt
is longer than the default 2048 tokens; every step would fail with HTTP 400). Prints the table rows, same columns as bench/bfcl.py.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _bfcl.checker import Check, check_entry
from _bfcl.data import CATEGORIES, FLAT_TYPES, Entry, load, tool_name
from _bfcl.run import Outcome, Progress, summarise, table


def smol_tools(entry: Entry, record: list[Any]) -> tuple[list[Any], dict[str, str]]:
    from smolagents import Tool

    taken: set[str] = {"final_answer"}
    tools, names = [], {}
    for f in entry.functions:
        props = f["parameters"].get("properties", {})
        required = set(f["parameters"].get("required", []))
        inputs = {}
        for p, spec in props.items():
            d: dict[str, Any] = {
                "type": FLAT_TYPES[spec["type"]],
                "description": spec.get("description") or p,
            }
            if spec.get("enum"):
                d["enum"] = spec["enum"]
            if p not in required:
                d["nullable"] = True
            inputs[p] = d
        name = tool_name(f["name"], taken)
        names[name] = f["name"]

        def forward(self: Any, **kwargs: Any) -> str:
            record.append((self.name, kwargs))
            return "recorded"

        cls = type(
            f"T_{name}",
            (Tool,),
            {
                "name": name,
                "description": f.get("description") or name,
                "inputs": inputs,
                "output_type": "string",
                "skip_forward_signature_validation": True,
                "forward": forward,
            },
        )
        tools.append(cls())
    return tools, names


def run_entry(model: Any, entry: Entry) -> Outcome:
    from smolagents import ActionStep, LogLevel, ToolCallingAgent

    recorded: list[Any] = []
    tools, names = smol_tools(entry, recorded)
    agent = ToolCallingAgent(tools=tools, model=model, max_steps=3, verbosity_level=LogLevel.OFF)
    t0 = time.perf_counter()
    tokens = generations = 0
    calls: list[dict[str, dict[str, Any]]] | None = None
    first_valid = False
    try:
        for step in agent.run(entry.question, stream=True):
            if not isinstance(step, ActionStep):
                continue
            generations += 1
            if step.token_usage is not None:
                tokens += step.token_usage.output_tokens
            if step.tool_calls:
                first_valid = generations == 1
                calls = [
                    {
                        names[c.name]: dict(c.arguments)
                        if isinstance(c.arguments, dict)
                        else {"?": c.arguments}
                    }
                    for c in step.tool_calls
                    if c.name in names
                ]
                break
    except Exception as exc:  # a run that fails is a run without a valid turn
        print(f"\n{entry.id}: {type(exc).__name__}: {exc}"[:300], file=sys.stderr)
    seconds = time.perf_counter() - t0
    valid = calls is not None
    category = entry.id.rsplit("_", 1)[0]
    check = check_entry(category, entry.functions, calls, entry.answers) if valid else Check(valid=False)
    return Outcome(
        id=entry.id,
        valid=valid,
        first_valid=first_valid,
        check=check,
        calls=calls or [],
        recorded=len(recorded),
        generations=generations,
        tokens=tokens,
        seconds=seconds,
    )


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, default=8765)
    ap.add_argument("--limit", type=int, default=20)
    ap.add_argument("--category", action="append", choices=CATEGORIES)
    args = ap.parse_args()
    from importlib.metadata import version

    from smolagents import OpenAIServerModel

    model = OpenAIServerModel(
        model_id="smollm2",
        api_base=f"http://127.0.0.1:{args.port}/v1",
        api_key="none",
        flatten_messages_as_text=True,  # llama_cpp.server takes only string contents
        temperature=0,
        max_tokens=256,
        # smolagents asks for "required"; llama-cpp-python's chatml-function-calling takes only "auto".
        tool_choice="auto",
    )
    rows = []
    for category in args.category or list(CATEGORIES):
        entries = load(category)
        flat = [e for e in entries if e.flat]
        chosen = flat[: args.limit]
        bar = Progress(len(chosen), f"{category} smolagents")
        outcomes = []
        for e in chosen:
            o = run_entry(model, e)
            outcomes.append(o)
            bar.step(o.check.valid)
        bar.close()
        s = summarise(category, f"smolagents {version('smolagents')}", outcomes, len(entries) - len(flat))
        rows.append(s.row())
        print(table([s.row()]), flush=True)
    print()
    print(table(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
