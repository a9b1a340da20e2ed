"""The agent benchmark's tasks through pydantic-ai and the OpenAI Agents SDK (run in .venv-bench).

Each library is used in its most direct documented way for a local model behind an
OpenAI-compatible server: pydantic-ai's `Agent(OpenAIChatModel(name,
provider=OpenAIProvider(base_url=...)), tools=...)`, the Agents SDK's `Agent(name=...,
model=OpenAIChatCompletionsModel(model=name, openai_client=AsyncOpenAI(base_url=...)),
tools=...)` run with `Runner.run`. The tools are the world's (`world.TOOLS`), given to
each library by their JSON Schema (`Tool.from_schema`, `FunctionTool`), each logging its
calls; a tool that raises gives the model its error, as aerix's error result does. At
most 8 model requests a run, as aerix's `Limits(turns=8)`; no instructions, as aerix's
run; the sampling given (`--temperature`, a seed per task) and `max_tokens=512`.

`bench/agent_peers.py` starts the server and runs this with `PYTHONPATH=src`; by hand:
`PYTHONPATH=src .venv-bench/bin/python bench/_agent_tasks/peers.py --library pydantic-ai
--base-url http://127.0.0.1:8765/v1 --task agent_02`. Prints one JSON outcome a line (the
fields of `run.Outcome`) on stdout.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _agent_tasks.score import solved
from _agent_tasks.tasks import TASKS, Task, part_of
from _agent_tasks.world import TOOLS

MAX_REQUESTS = 8
MAX_TOKENS = 512
TASK_SECONDS = 300.0
"""A run that takes longer (a server that keeps generating past `max_tokens`) ends with `error`."""


def _logged(name: str, log: list[dict[str, Any]]) -> Any:
    """The world's tool `name` as a plain function of keyword arguments that logs each call."""
    source = TOOLS[name]

    def run(**kwargs: Any) -> str:
        try:
            result = str(source.run(kwargs, None))
        except Exception as exc:
            log.append({"tool": name, "input": kwargs, "result": f"error: {exc}", "error": True})
            raise
        log.append({"tool": name, "input": kwargs, "result": result, "error": False})
        return result

    return run


def outcome(task: Task, config: str, ending: str, final: str, generations: int, log: list, t0: float) -> dict:
    """A run's figures, as `run.Outcome`'s fields (`t0`: when it started, `time.perf_counter()`)."""
    return {
        "id": task.id,
        "part": part_of(task),
        "config": config,
        "solved": ending == "final" and solved(final, task.answer),
        "ending": ending,
        "final": final,
        "generations": generations,
        "calls": log,
        "seconds": time.perf_counter() - t0,
    }


async def pydantic_ai_task(
    base_url: str, task: Task, config: str, settings: dict[str, Any], log: list[dict[str, Any]]
) -> dict[str, Any]:
    from pydantic_ai import Agent, ModelRetry, Tool, UsageLimits
    from pydantic_ai.exceptions import UsageLimitExceeded
    from pydantic_ai.messages import ModelResponse
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    def tool(name: str) -> Any:
        run = _logged(name, log)

        def call(**kwargs: Any) -> str:
            try:
                return run(**kwargs)
            except Exception as exc:  # pydantic-ai's way to hand a tool's error back to the model
                raise ModelRetry(str(exc)) from exc

        return Tool.from_schema(
            call, name=name, description=TOOLS[name].description, json_schema=TOOLS[name].schema
        )

    model = OpenAIChatModel("local", provider=OpenAIProvider(base_url=base_url, api_key="none"))
    agent = Agent(model, tools=[tool(n) for n in task.tools])
    t0 = time.perf_counter()
    messages: list[Any] = []
    try:
        result = await agent.run(
            task.prompt,
            model_settings={
                "temperature": settings["temperature"],
                "seed": settings["seed"],
                "max_tokens": MAX_TOKENS,
            },
            usage_limits=UsageLimits(request_limit=MAX_REQUESTS),
        )
        messages = result.all_messages()
        ending, final = "final", str(result.output)
    except UsageLimitExceeded as exc:
        ending, final = "turns", str(exc)
    except Exception as exc:  # a run that raises ended with an error
        ending, final = "error", f"{type(exc).__name__}: {exc}"[:300]
    generations = sum(isinstance(m, ModelResponse) for m in messages) if messages else _requests(log, ending)
    return outcome(task, config, ending, final, generations, log, t0)


def _requests(log: list[dict[str, Any]], ending: str) -> int:
    """The model requests of a run that raised, as far as its calls tell: one per call, one more."""
    return MAX_REQUESTS if ending == "turns" else len(log) + 1


async def openai_agents_task(
    base_url: str, task: Task, config: str, settings: dict[str, Any], log: list[dict[str, Any]]
) -> dict[str, Any]:
    from agents import (
        Agent,
        FunctionTool,
        MaxTurnsExceeded,
        ModelSettings,
        OpenAIChatCompletionsModel,
        Runner,
        set_tracing_disabled,
    )
    from openai import AsyncOpenAI

    set_tracing_disabled(True)  # no key to export traces with, and nowhere to send them

    def tool(name: str) -> Any:
        run = _logged(name, log)

        async def invoke(_cx: Any, arguments: str) -> str:
            try:
                return run(**json.loads(arguments or "{}"))
            except Exception as exc:
                return f"error: {exc}"

        schema = TOOLS[name].schema
        return FunctionTool(
            name=name,
            description=TOOLS[name].description,
            params_json_schema=schema,
            on_invoke_tool=invoke,
            strict_json_schema=False,
        )

    client = AsyncOpenAI(base_url=base_url, api_key="none")
    agent = Agent(
        name="Assistant",
        model=OpenAIChatCompletionsModel(model="local", openai_client=client),
        tools=[tool(n) for n in task.tools],
        model_settings=ModelSettings(
            temperature=settings["temperature"], max_tokens=MAX_TOKENS, extra_args={"seed": settings["seed"]}
        ),
    )
    t0 = time.perf_counter()
    generations = 0
    try:
        result = await Runner.run(agent, task.prompt, max_turns=MAX_REQUESTS)
        generations = len(result.raw_responses)
        ending, final = "final", str(result.final_output)
    except MaxTurnsExceeded as exc:
        ending, final, generations = "turns", str(exc), MAX_REQUESTS
    except Exception as exc:
        ending, final = "error", f"{type(exc).__name__}: {exc}"[:300]
        generations = len(log) + 1
    finally:
        await client.close()
    return outcome(task, config, ending, final, generations, log, t0)


RUNNERS = {"pydantic-ai": pydantic_ai_task, "openai-agents": openai_agents_task}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--library", choices=list(RUNNERS), required=True)
    ap.add_argument("--base-url", required=True)
    ap.add_argument(
        "--config", default=None, help="the outcomes' configuration name (default: the library's)"
    )
    ap.add_argument("--task", action="append", help="a task id, repeatable; default: every task")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--temperature", type=float, default=0.8)
    args = ap.parse_args()
    chosen = [t for t in TASKS if args.task is None or t.id in args.task]
    runner = RUNNERS[args.library]
    for task in chosen:
        settings = {"temperature": args.temperature, "seed": args.seed + int(task.id.rsplit("_", 1)[1])}
        config = args.config or args.library
        t0 = time.perf_counter()
        log: list[dict[str, Any]] = []  # the calls, kept when the run is stopped
        try:
            run = runner(args.base_url, task, config, settings, log)
            done = asyncio.run(asyncio.wait_for(run, TASK_SECONDS))
        except TimeoutError:  # its generations: one a call, and the one that did not end
            done = outcome(task, config, "error", f"no end within {TASK_SECONDS:g} s", len(log) + 1, log, t0)
        print(json.dumps(done, default=str), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
