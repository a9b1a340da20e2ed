"""The command's flags: the parser, early checks, and library messages spelled as flags.

`loop_options` checks the values that the library would only see once the model is
loaded (an `Agent` needs one), so that a bad one costs no load; `cli_hints` and
`FLAGS` turn the library's option names in its messages into the flags that set them.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path
from typing import Any

import aerix
from aerix import Limits
from aerix.turn import MAX_CALLS

from .demo_tools import DEMO_TOOLS

__all__ = [
    "API_KEY_ENV",
    "DEFAULT_INSTRUCTIONS",
    "DEFAULT_MODEL",
    "FLAGS",
    "Failure",
    "build_parser",
    "cli_hints",
    "loop_options",
]

DEFAULT_MODEL = "smollm2-instruct"
"""What `--model` loads when it is not given."""
DEFAULT_INSTRUCTIONS = "You are a helpful assistant. Use a tool when it helps, then answer briefly."
"""The agent's instructions when `--instructions` is not given."""
API_KEY_ENV = "AERIX_API_KEY"
"""The environment variable read for `--api-key`."""

FLAGS = {
    "limits.turns": "--max-turns",
    "limits.retries": "--retries",
    "limits.max_tokens": "--max-tokens",
    "limits.result_chars": "--result-chars",
    "limits.repeats": "--repeats",
    "calls_per_turn": "--calls-per-turn",
    "output": "--output",
    "generation.temperature": "--temperature",
    "generation.top_p": "--top-p",
    "generation.top_k": "--top-k",
    "generation.min_p": "--min-p",
    "generation.seed": "--seed",
    "tool_choice": "--tool-choice",
    "base_url": "--server",
    "dialect": "--dialect",
    "read_timeout": "--read-timeout",
}
"""Which option a library message is about, by the name it uses."""

_HINTS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"\bdialect='(json_schema|json_object|none)'"), r"--dialect \1"),
    (re.compile(r"\bmodel=('[^']*'|\"[^\"]*\")"), r"--model \1"),
    (re.compile(r"\bbase_url\b"), "--server URL"),
    (re.compile(r"\bapi_key\b"), f"--api-key (or ${API_KEY_ENV})"),
    (re.compile(r"\bread_timeout=(\S+) s\b"), r"\1 s (--read-timeout)"),
    (re.compile(r"\braise read_timeout\b"), "raise --read-timeout SECONDS"),
    (re.compile(r"\(None: the engine's default, (\d+)\)"), r"(without --threads: the engine's, \1)"),
    # The engine's own retries, not --retries (the agent's): the command keeps their default.
    (re.compile(r"\braise retries or add replicas\b"), "try again later or add replicas"),
    # An --mcp server that died stays dead for the command's life: its `async with` is the command.
    (re.compile(r"leave its `async with` and enter again"), "run the aerix command again to restart it"),
)
"""The library's hints, spelled as its options (the server engine's) or as Python (an MCP server's),
and the same hints spelled as the command's flags, or as what to do with the command."""


class Failure(Exception):
    """Ends the command with a message on stderr and an exit status."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.message = message
        self.code = code


def cli_hints(message: str) -> str:
    """A library message with the options it names spelled as this command's flags.

    Example:
        >>> cli_hints("try dialect='json_object' (llama-cpp-python's server)")
        "try --dialect json_object (llama-cpp-python's server)"
    """
    for pattern, flag in _HINTS:
        message = pattern.sub(flag, message)
    return message


def loop_options(args: argparse.Namespace) -> dict[str, Any]:
    """The `Agent` options that `--calls-per-turn`, `--concurrent-calls` and `--output` give,
    checked.

    They and `--repeats` are checked here, before an `--mcp` server starts or the
    model loads, and refused in the command's own words.
    """
    calls = 1 if args.calls_per_turn is None else args.calls_per_turn
    if not 1 <= calls <= MAX_CALLS:
        raise Failure(f"--calls-per-turn must be 1 to {MAX_CALLS}, got {calls}", 2)
    if args.concurrent_calls and calls == 1:
        raise Failure(
            "--concurrent-calls needs --calls-per-turn N with N of 2 or more: "
            "one call a turn has nothing to run beside it",
            2,
        )
    if args.repeats is not None and args.repeats < 0:
        raise Failure(f"--repeats must be 0 or more, got {args.repeats}", 2)
    options: dict[str, Any] = {"calls_per_turn": calls, "concurrent_calls": args.concurrent_calls}
    if args.output is not None:
        options["output"] = args.output
    return options


_TYPES: dict[str, type] = {"str": str, "int": int, "float": float, "bool": bool}


def _output(value: str) -> type | dict[str, Any]:
    """`--output`: a type's name, a JSON Schema, or `@FILE` holding one."""
    if value in _TYPES:
        return _TYPES[value]
    text = value
    if value.startswith("@"):
        if not value[1:]:
            raise argparse.ArgumentTypeError("@ needs a file name: @schema.json")
        try:
            text = Path(value[1:]).read_text(encoding="utf-8")
        except OSError as exc:
            raise argparse.ArgumentTypeError(f"cannot read {value[1:]!r}: {exc.strerror or exc}") from None
        except UnicodeDecodeError as exc:
            raise argparse.ArgumentTypeError(f"{value[1:]!r} is not UTF-8 text: {exc.reason}") from None
    try:
        schema = json.loads(text)
    except (ValueError, RecursionError):  # not JSON, or nested past what Python parses
        schema = None
    if not isinstance(schema, dict):
        shown = repr(value) if len(value) <= 80 else repr(value[:77] + "...")
        raise argparse.ArgumentTypeError(
            f"{shown} is none of {', '.join(_TYPES)}, a JSON Schema object or @FILE holding one"
        )
    return schema


def build_parser() -> argparse.ArgumentParser:
    """The command line: `aerix run PROMPT [options]`, `aerix chat [options]`, `aerix models` and
    `aerix playground`."""
    model_options = argparse.ArgumentParser(add_help=False)
    m = model_options.add_argument_group("model")
    m.add_argument(
        "--model",
        metavar="NAME|PATH",
        help=f"a model name (default: {DEFAULT_MODEL}; `aerix models` lists those at hand), a GGUF "
        "file, or a GGUF on the Hugging Face Hub: hf:OWNER/REPO[:QUANT] or a short name (qwen2.5-1.5b, "
        "…), fetched on first use; with --server, the served model",
    )
    m.add_argument(
        "--server", metavar="URL", help="an OpenAI-compatible server, e.g. http://127.0.0.1:8000/v1"
    )
    m.add_argument("--api-key", metavar="KEY", help=f"the server's API key (default: ${API_KEY_ENV})")
    m.add_argument(
        "--dialect",
        choices=("json_schema", "json_object", "none"),
        help="how the server gets the turn schema (default: json_schema, or json_object once the "
        "server refuses json_schema)",
    )
    m.add_argument(
        "--read-timeout",
        type=_seconds,
        metavar="SECONDS",
        help="with --server, how long to wait for the server's answer, and then for each part of it "
        "(default: the engine's, 120)",
    )
    m.add_argument(
        "--threads",
        type=_threads,
        metavar="N",
        help="CPU threads of the local engine, for decoding and prefill (default: the engine's)",
    )
    common = argparse.ArgumentParser(add_help=False, parents=[model_options])
    a = common.add_argument_group("agent")
    a.add_argument(
        "--instructions", metavar="TEXT", default=DEFAULT_INSTRUCTIONS, help="the system instructions"
    )
    a.add_argument(
        "--tools",
        metavar="TOOLS",
        action="append",
        help="demo tools, comma-separated, or 'none'; your own: MODULE:FUNCTION, MODULE:* or "
        f"path/to/file.py; repeatable (default: {','.join(DEMO_TOOLS)}, or none with --mcp)",
    )
    a.add_argument(
        "--mcp",
        metavar="SERVER",
        action="append",
        help="an MCP server's tools: a command line ('python server.py', or server.py) or a URL "
        "(streamable HTTP), PREFIX= first to prefix its tools' names; repeatable (needs: pip install "
        "'aerix[mcp]')",
    )
    a.add_argument(
        "--approve",
        metavar="TOOL",
        action="append",
        help="ask before each call of TOOL (on a terminal: y/n; else the run ends paused, exit status 3); "
        "all: before every call; none: not before the calls of --mcp tools annotated destructive, which "
        "ask by default; repeatable (a tool made with needs_approval=True always asks)",
    )
    a.add_argument(
        "--session",
        metavar="FILE",
        help="keep the conversation in this SQLite file, and continue the one kept there (made if it "
        "does not exist); another process with the same --session goes on from it",
    )
    a.add_argument(
        "--session-id",
        metavar="ID",
        help="which conversation of the --session file (default: default)",
    )
    a.add_argument(
        "--tool-choice",
        metavar="CHOICE",
        default="auto",
        help="first turn of each run: auto, required, none or a tool's name (default: auto)",
    )
    a.add_argument(
        "--no-constrain",
        dest="constrain",
        action="store_false",
        help="do not decode under the turn schema; only parse and retry",
    )
    a.add_argument(
        "--calls-per-turn",
        type=int,
        metavar="N",
        help=f"the most calls one turn may hold, 1 to {MAX_CALLS} (default: 1)",
    )
    a.add_argument(
        "--concurrent-calls",
        action="store_true",
        help="run the calls of a turn at once (with --calls-per-turn 2 or more)",
    )
    a.add_argument(
        "--output",
        type=_output,
        metavar="TYPE",
        help="the answer's type: str (the default), int, float, bool, a JSON Schema "
        '(\'{"type": "array", ...}\') or @FILE holding one; the final is then that value\'s JSON',
    )
    lim = common.add_argument_group("limits")
    d = Limits()
    lim.add_argument("--max-turns", type=int, metavar="N", help=f"generations per run (default: {d.turns})")
    lim.add_argument(
        "--retries",
        type=int,
        metavar="N",
        help=f"extra attempts after a bad or cut turn (default: {d.retries})",
    )
    lim.add_argument(
        "--max-tokens", type=int, metavar="N", help=f"tokens per generation (default: {d.max_tokens})"
    )
    lim.add_argument(
        "--result-chars",
        type=int,
        metavar="N",
        help=f"characters of one tool result (default: {d.result_chars})",
    )
    lim.add_argument(
        "--repeats",
        type=int,
        metavar="N",
        help="how many times one identical call may run again in a run; past it the call does not "
        f"run and the model may only answer (default: {d.repeats})",
    )
    gen = common.add_argument_group("sampling (default: greedy; the rest the engine's)")
    gen.add_argument(
        "--temperature",
        type=float,
        metavar="T",
        default=0.0,
        help="0 (the default) for greedy decoding, the steadiest for a small model",
    )
    gen.add_argument("--top-p", type=float, metavar="P", help="nucleus sampling")
    gen.add_argument("--top-k", type=int, metavar="K", help="sample from the K likeliest tokens")
    gen.add_argument("--min-p", type=float, metavar="P", help="drop tokens below P times the likeliest")
    gen.add_argument("--seed", type=int, metavar="N", help="a seed, for repeatable sampling")
    o = common.add_argument_group("output")
    o.add_argument("--json", action="store_true", help="print the events as JSON lines, nothing else")

    parser = argparse.ArgumentParser(
        prog="aerix",
        description="Run an agent on a local language model, one JSON turn at a time.",
    )
    parser.add_argument("--version", action="version", version=f"aerix {aerix.__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    run = commands.add_parser(
        "run",
        parents=[common],
        help="run one prompt and show the run",
        description="Run one prompt and show the run: turns, calls, results, the final and the usage.",
    )
    run.add_argument("prompt", nargs="?", help="the prompt, or - to read it from stdin (none with --resume)")
    r = run.add_argument_group("a paused run")
    r.add_argument(
        "--resume",
        action="store_true",
        help="go on with the run that ended paused in --session FILE: its waiting calls get --yes or --no, "
        "or are asked on the terminal",
    )
    r.add_argument(
        "--yes", metavar="ID", action="append", default=[], help="with --resume: run call ID (all: every one)"
    )
    r.add_argument(
        "--no",
        metavar="ID[=REASON]",
        action="append",
        default=[],
        help="with --resume: refuse call ID, saying why if REASON is given (all: every one)",
    )
    commands.add_parser(
        "chat",
        parents=[common],
        help="a conversation, one prompt per line of stdin",
        description="A conversation: one prompt per line of stdin. /reset forgets it; /exit or EOF ends.",
    )
    models = commands.add_parser(
        "models",
        help="list the models that load without a network",
        description="List the models that --model loads without a network, with their sizes: the "
        "embedded ones, and the GGUFs in the Hugging Face Hub's cache (HF_HUB_CACHE, or HF_HOME/hub).",
    )
    models.add_argument("--json", action="store_true", help="one JSON object per model, nothing else")
    playground = commands.add_parser(
        "playground",
        parents=[model_options],
        help="serve the playground page on 127.0.0.1",
        description="Serve a page that runs an agent with the demo tools and shows its runs as they "
        "stream, on 127.0.0.1 (needs: pip install 'aerix[playground]').",
    )
    p = playground.add_argument_group("page")
    p.add_argument(
        "--port", type=int, default=8000, metavar="N", help="the port (default: 8000; 0: any free one)"
    )
    p.add_argument(
        "--host",
        default="127.0.0.1",
        metavar="ADDRESS",
        help="the address to listen on (default: 127.0.0.1); any other lets the network use the model "
        "and the tools",
    )
    p.add_argument(
        "--instructions", metavar="TEXT", default=DEFAULT_INSTRUCTIONS, help="the default instructions"
    )
    return parser


def _seconds(text: str) -> float:
    """`--read-timeout`: a number of seconds above 0."""
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be a number of seconds above 0, got {text!r}")
    return value


def _threads(text: str) -> int:
    """`--threads`: a whole number of threads, at least 1."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number of threads >= 1, got {text!r}")
    return value
