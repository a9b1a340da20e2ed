"""The `aerix` command: run an agent from the shell.

`aerix run "prompt"` runs one prompt and shows the run live; `aerix chat`
keeps one conversation over many prompts read from stdin. The model is the
embedded default (`aerix.load("smollm2-instruct")`), another GGUF
(`--model PATH`), or an OpenAI-compatible server (`--server URL --model
NAME`); the agent gets the demo tools of `aerix.demo_tools`, your own tools
(`--tools module:function`, `--tools path/to/file.py`) or an MCP server's
(`--mcp "COMMAND ARGS"`, `--mcp URL`). The command calls only the public API,
so everything it does a program can do too.

Exit status: 0 when the run ends with a final (and when `chat` ends), 1 when
a run ends otherwise or the model (or an `--mcp` server) cannot be started, 2
for bad usage or a bad option value, 130 when a second Ctrl-C quits.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import re
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from types import FrameType
from typing import TYPE_CHECKING, Any, TextIO

import aerix
import aerix.engines
from aerix import AbortController, AbortSignal, AerixError, Agent, Limits, Model

from ._cli_tools import Refused, check_unique, mcp_server, pick_tools
from ._console import HumanPrinter, JsonPrinter, Printer, Spinner, Symbols, use_color
from .demo_tools import DEMO_TOOLS

if TYPE_CHECKING:
    from .mcp import MCPServer

__all__ = ["API_KEY_ENV", "DEFAULT_INSTRUCTIONS", "DEFAULT_MODEL", "build_parser", "cli_hints", "main"]

DEFAULT_MODEL = "smollm2-instruct"
"""What `--model` loads when it is not given."""
DEFAULT_INSTRUCTIONS = "You are a helpful assistant. Use a tool when it helps, then answer briefly."
"""The agent's instructions when `--instructions` is not given."""
API_KEY_ENV = "AERIX_API_KEY"
"""The environment variable read for `--api-key`."""
ABORT_REASON = "interrupted (Ctrl-C)"

_FLAGS = {
    "limits.turns": "--max-turns",
    "limits.retries": "--retries",
    "limits.max_tokens": "--max-tokens",
    "limits.result_chars": "--result-chars",
    "generation.temperature": "--temperature",
    "generation.top_p": "--top-p",
    "generation.top_k": "--top-k",
    "generation.min_p": "--min-p",
    "generation.seed": "--seed",
    "tool_choice": "--tool-choice",
    "base_url": "--server",
    "dialect": "--dialect",
}
"""Which option a library message is about, by the name it uses."""

_HINTS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"\bdialect='(json_schema|json_object|none)'"), r"--dialect \1"),
    (re.compile(r"\bmodel=('[^']*'|\"[^\"]*\")"), r"--model \1"),
    (re.compile(r"\bbase_url\b"), "--server URL"),
    (re.compile(r"\bapi_key\b"), f"--api-key (or ${API_KEY_ENV})"),
    # The engine's own retries, not --retries (the agent's): the command keeps their default.
    (re.compile(r"\braise retries or add replicas\b"), "try again later or add replicas"),
)
"""The server engine's hints, spelled as its options, and the same hints spelled as the command's flags."""


def cli_hints(message: str) -> str:
    """A library message with the options it names spelled as this command's flags.

    Example:
        >>> cli_hints("try dialect='json_object' (llama-cpp-python's server)")
        "try --dialect json_object (llama-cpp-python's server)"
    """
    for pattern, flag in _HINTS:
        message = pattern.sub(flag, message)
    return message


def main(argv: Sequence[str] | None = None, *, model: Model | None = None) -> int:
    """Run the `aerix` command; return its exit status.

    Args:
        argv: The arguments, without the program name (default: `sys.argv[1:]`).
        model: Use this model instead of loading the one that `--model` or
            `--server` names: the seam for tests (a `ScriptedModel`) and for
            programs that embed the command with a model they already hold.
            The caller keeps it and closes it.

    Must be called where no event loop is running, as a command is.
    """
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:  # --help, --version, bad usage
        return 0 if exc.code is None else exc.code if isinstance(exc.code, int) else 2
    if args.command == "playground":
        return _playground(args, model)
    out, err = sys.stdout, sys.stderr
    spinner = Spinner(err, Symbols.for_stream(err).frames)
    printer: Printer = (
        JsonPrinter(out)
        if args.json
        else HumanPrinter(out, color=use_color(out), spinner=spinner, messages=cli_hints)
    )
    try:
        # The engines' notes (a server engine's dialect change): with --json, stdout holds only events.
        notes = _to_stderr("aerix: ") if args.json else printer.note
        with _CtrlC() as ctrl_c, _engine_notes(notes):
            prompt = _prompt(args.prompt) if args.command == "run" else ""
            runner = asyncio.Runner()
            servers = contextlib.AsyncExitStack()  # the --mcp servers, entered on the runner's loop
            owned: Model | None = None
            try:
                agent, owned = _setup(args, model, spinner, runner, servers)
                if args.command == "run":
                    return _run(agent, prompt, printer, ctrl_c, runner, json=args.json)
                return _chat(agent, printer, ctrl_c, runner, args)
            finally:
                with ctrl_c.held():  # a Ctrl-C must not cut the servers' or the engine's shutdown short
                    try:
                        runner.run(servers.aclose())
                    finally:
                        _shutdown(runner, owned)
    except _Failure as exc:
        err.write(f"aerix: error: {exc.message}\n")
        return exc.code
    except KeyboardInterrupt:
        err.write("\naerix: interrupted\n")
        return 130
    except BrokenPipeError:  # `aerix run … | head`: the reader left
        _silence(out)
        return 1
    finally:
        spinner.stop()


def build_parser() -> argparse.ArgumentParser:
    """The command line: `aerix run PROMPT [options]`, `aerix chat [options]` and `aerix playground`."""
    model_options = argparse.ArgumentParser(add_help=False)
    m = model_options.add_argument_group("model")
    m.add_argument(
        "--model",
        metavar="NAME|PATH",
        help=f"a model name or a GGUF file (default: {DEFAULT_MODEL}); with --server, the served model",
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
    run.add_argument("prompt", help="the prompt, or - to read it from stdin")
    commands.add_parser(
        "chat",
        parents=[common],
        help="a conversation, one prompt per line of stdin",
        description="A conversation: one prompt per line of stdin. /reset forgets it; /exit or EOF ends.",
    )
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


def _playground(args: argparse.Namespace, model: Model | None) -> int:
    """`aerix playground`: serve the page until Ctrl-C."""
    try:
        from .playground import serve
    except ImportError as exc:
        sys.stderr.write(f"aerix: error: {exc}\n")
        return 1
    if not 0 <= args.port <= 65535:
        sys.stderr.write(f"aerix: error: --port: {args.port} is not a port (0 to 65535)\n")
        return 2
    spinner = Spinner(sys.stderr, Symbols.for_stream(sys.stderr).frames)
    try:
        _check_model_flags(args)
        owned = None if model is not None else _open_model(args, spinner)
    except _Failure as exc:
        sys.stderr.write(f"aerix: error: {exc.message}\n")
        return exc.code
    finally:
        spinner.stop()
    engine = model if model is not None else owned
    assert engine is not None
    name = f"{args.model} at {args.server}" if args.server else args.model or DEFAULT_MODEL
    try:
        with _engine_notes(_to_stderr("aerix playground: ")):
            serve(
                model=engine, host=args.host, port=args.port, instructions=args.instructions, model_name=name
            )
    except OSError as exc:  # the port is taken, or the address is not this machine's
        sys.stderr.write(f"aerix: error: cannot listen on {args.host}:{args.port}: {exc.strerror or exc}\n")
        return 1
    except KeyboardInterrupt:
        pass
    finally:
        close = getattr(owned, "close", None)
        if close is not None:
            close()
    return 0


class _Failure(Exception):
    """Ends the command with a message on stderr and an exit status."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.message = message
        self.code = code


def _options_error(exc: AerixError) -> _Failure:
    flag = next((f for name, f in _FLAGS.items() if name in exc.message), None)
    return _Failure(f"{flag}: {exc.message}" if flag else exc.message, 2)


def _setup(
    args: argparse.Namespace,
    model: Model | None,
    spinner: Spinner,
    runner: asyncio.Runner,
    servers: contextlib.AsyncExitStack,
) -> tuple[Agent, Model | None]:
    """The agent the options describe, and the model if the command opened it (to close it).

    The `--mcp` servers are entered into `servers`, on `runner`'s loop, where the runs go.
    """
    try:
        limits = Limits.of(
            {
                key: value
                for key, value in (
                    ("turns", args.max_turns),
                    ("retries", args.retries),
                    ("max_tokens", args.max_tokens),
                    ("result_chars", args.result_chars),
                )
                if value is not None
            }
        )
    except AerixError as exc:
        raise _options_error(exc) from None
    try:
        picked = pick_tools(args.tools, default=not args.mcp)
        mcp = [(value, mcp_server(value)) for value in args.mcp or ()]
    except Refused as exc:
        raise _Failure(exc.message, exc.code) from None
    _check_model_flags(args)
    for value, server in mcp:
        picked += [(t, f"--mcp {value!r}") for t in _enter(server, runner, servers, spinner)]
    try:
        check_unique(picked)
    except Refused as exc:
        raise _Failure(exc.message, exc.code) from None
    tools = [t for t, _ in picked]
    owned = None if model is not None else _open_model(args, spinner)
    engine = model if model is not None else owned
    assert engine is not None
    generation = {
        key: value
        for key, value in (
            ("temperature", args.temperature),
            ("top_p", args.top_p),
            ("top_k", args.top_k),
            ("min_p", args.min_p),
            ("seed", args.seed),
        )
        if value is not None
    }
    try:
        agent = Agent(
            model=engine,
            instructions=args.instructions,
            tools=tools,
            limits=limits,
            generation=generation,
            constrain=args.constrain,
            tool_choice=args.tool_choice,
        )
    except AerixError as exc:
        close = getattr(owned, "close", None)
        if close is not None:
            close()
        raise _options_error(exc) from None
    return agent, owned


def _enter(
    server: MCPServer, runner: asyncio.Runner, servers: contextlib.AsyncExitStack, spinner: Spinner
) -> tuple[aerix.Tool, ...]:
    """Start an `--mcp` server (its handshake, its tool list) and keep it open until the command ends."""
    try:
        with spinner.running(f"starting the MCP server {server.name}…"):
            runner.run(servers.enter_async_context(server))
    except AerixError as exc:
        raise _Failure(f"--mcp: {exc.message}", 1) from None
    return server.tools


def _check_model_flags(args: argparse.Namespace) -> None:
    if args.server:
        if not args.model:
            raise _Failure("--server needs --model NAME: the name of a model the server serves", 2)
        if args.threads is not None:
            raise _Failure("--threads only applies to the local engine: the server sets its own threads", 2)
        return
    for flag, value in (("--api-key", args.api_key), ("--dialect", args.dialect)):
        if value is not None:
            raise _Failure(f"{flag} only applies with --server URL", 2)


def _open_model(args: argparse.Namespace, spinner: Spinner) -> Model:
    if args.server:
        api_key = args.api_key or os.environ.get(API_KEY_ENV) or None
        try:
            return aerix.engines.OpenAICompatible(
                base_url=args.server, model=args.model, api_key=api_key, dialect=args.dialect
            )
        except AerixError as exc:
            raise _options_error(exc) from None
        except ImportError as exc:
            raise _Failure(str(exc), 1) from None
    name = args.model or DEFAULT_MODEL
    engine_kwargs = {} if args.threads is None else {"n_threads": args.threads}
    try:
        with spinner.running(f"loading {name}…"):
            return aerix.load(name, **engine_kwargs)
    except (AerixError, FileNotFoundError) as exc:
        raise _Failure(f"--model: {exc.message if isinstance(exc, AerixError) else exc}", 2) from None
    except (ImportError, OSError, ValueError, RuntimeError) as exc:
        raise _Failure(f"cannot load the model {name!r}: {exc}", 1) from None


def _threads(text: str) -> int:
    """`--threads`: a whole number of threads, at least 1."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number of threads >= 1, got {text!r}")
    return value


class _NoteHandler(logging.Handler):
    """Shows the engines' log messages (a server engine's dialect change) as the command's notes."""

    def __init__(self, write: Callable[[str], None]) -> None:
        super().__init__(logging.INFO)
        self._write = write

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self._write(f"note: {cli_hints(record.getMessage())}")
        except Exception:
            self.handleError(record)


def _to_stderr(prefix: str) -> Callable[[str], None]:
    def write(text: str) -> None:
        sys.stderr.write(f"{prefix}{text}\n")
        sys.stderr.flush()

    return write


@contextlib.contextmanager
def _engine_notes(write: Callable[[str], None]) -> Iterator[None]:
    """While the command runs, the engines' log messages go to `write`, in the command's spelling."""
    logger = logging.getLogger("aerix.engines")
    handler = _NoteHandler(write)
    logger.addHandler(handler)
    propagate, logger.propagate = logger.propagate, False  # shown once, here, not by the root too
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.propagate = propagate


def _shutdown(runner: asyncio.Runner, engine: Model | None) -> None:
    """Close the engine the command opened, and the event loop (ending what a second Ctrl-C left)."""
    try:
        aclose = getattr(engine, "aclose", None)
        if aclose is not None:
            runner.run(aclose())
    finally:
        runner.close()
        close = getattr(engine, "close", None)
        if close is not None:
            close()


def _prompt(text: str) -> str:
    if text == "-":
        text = sys.stdin.read().strip()
    if not text.strip():
        raise _Failure("the prompt is empty", 2)
    return text


class _CtrlC:
    """While installed: the first Ctrl-C during a run aborts the run; any other Ctrl-C quits."""

    def __init__(self) -> None:
        self._controller: AbortController | None = None
        self._previous: Any = None
        self._installed = False
        self._holding = False
        self._held = False

    def __enter__(self) -> _CtrlC:
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGINT, self._on_sigint)
            self._installed = True
        return self

    def __exit__(self, *exc: object) -> None:
        if self._installed:
            signal.signal(signal.SIGINT, self._previous or signal.default_int_handler)

    @contextlib.contextmanager
    def run(self) -> Iterator[AbortSignal]:
        """A signal that the first Ctrl-C aborts, for one run."""
        controller = AbortController()
        self._controller = controller
        try:
            yield controller.signal
        finally:
            self._controller = None

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        """Hold a Ctrl-C until the block ends, then quit."""
        self._holding, self._held = True, False
        try:
            yield
        finally:
            self._holding = False
        if self._held:
            raise KeyboardInterrupt

    def _on_sigint(self, signum: int, frame: FrameType | None) -> None:
        if self._holding:
            self._held = True
            return
        controller = self._controller
        if controller is not None and not controller.signal.aborted:
            controller.abort(ABORT_REASON)
            return
        raise KeyboardInterrupt


async def _drive(agent: Agent, prompt: str, printer: Printer, signal: AbortSignal) -> aerix.AgentEvent | None:
    """One run, shown as it goes; its last event (the final or the end)."""
    printer.run_started()
    started = time.monotonic()
    last: aerix.AgentEvent | None = None
    async for ev in agent.run(prompt, signal=signal):
        printer.event(ev)
        last = ev
    printer.run_done(time.monotonic() - started)
    return last


def _run(
    agent: Agent, prompt: str, printer: Printer, ctrl_c: _CtrlC, runner: asyncio.Runner, *, json: bool
) -> int:
    with ctrl_c.run() as signal:
        last = runner.run(_drive(agent, prompt, printer, signal))
    if isinstance(last, aerix.FinalEvent):
        return 0
    if json and isinstance(last, aerix.EndEvent):  # the human output already said it
        sys.stderr.write(f"aerix: the run ended without a final ({last.reason}): {cli_hints(last.message)}\n")
    return 1


_COMMAND = re.compile(r"/[a-z]+")
_HELP = "/reset forgets the conversation; /exit (or EOF) ends"


def _chat(
    agent: Agent, printer: Printer, ctrl_c: _CtrlC, runner: asyncio.Runner, args: argparse.Namespace
) -> int:
    interactive = _isatty(sys.stdin)
    if interactive:
        with contextlib.suppress(ImportError):
            import readline  # noqa: F401  (line editing and history for input())
        model = args.server or args.model or DEFAULT_MODEL
        tools = ", ".join(agent.tools) or "none"
        sys.stderr.write(f"aerix chat · {model} · tools: {tools} · {_HELP}\n")
    while True:
        line = _read_line(interactive, to_stderr=args.json)
        if line is None:
            return 0
        text = line.strip()
        if not text:
            continue
        if _COMMAND.fullmatch(text):
            if text in ("/exit", "/quit"):
                return 0
            if text == "/reset":
                agent.reset()
                printer.note("(conversation forgotten)")
            else:
                printer.note(f"(unknown command {text}; {_HELP})")
            continue
        with ctrl_c.run() as signal:
            runner.run(_drive(agent, text, printer, signal))


def _read_line(interactive: bool, *, to_stderr: bool) -> str | None:
    """The next line of stdin, or `None` at its end."""
    if not interactive:
        line = sys.stdin.readline()
        return line or None
    prompt = "> "
    if to_stderr:  # with --json, stdout holds only events
        sys.stderr.write(prompt)
        sys.stderr.flush()
        prompt = ""
    try:
        return input(prompt)
    except EOFError:
        sys.stderr.write("\n")
        return None


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def _silence(out: TextIO) -> None:
    """Point stdout at devnull so that the exit's flush does not fail again."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, out.fileno())
