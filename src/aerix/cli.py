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
for bad usage or a bad option value, 3 when a run ends paused with no terminal
to ask on (its calls wait for a decision: `--approve`, `--resume`), 130 when a
second Ctrl-C quits.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, TextIO

import aerix
import aerix.engines
from aerix import AerixError, Agent, Limits, Model
from aerix.sessions import SQLiteSession

from ._checks import unencodable
from ._cli_approve import approving, resume_decisions
from ._cli_flags import (
    API_KEY_ENV,
    DEFAULT_INSTRUCTIONS,
    DEFAULT_MODEL,
    FLAGS,
    Failure,
    build_parser,
    cli_hints,
    loop_options,
)
from ._cli_models import list_models
from ._cli_runs import CtrlC, chat, run_prompt
from ._cli_tools import Refused, check_unique, mcp_server, mcp_tools, pick_tools
from ._console import HumanPrinter, JsonPrinter, Printer, Spinner, Symbols, use_color

if TYPE_CHECKING:
    import argparse

    from .mcp import MCPServer

__all__ = ["API_KEY_ENV", "DEFAULT_INSTRUCTIONS", "DEFAULT_MODEL", "build_parser", "cli_hints", "main"]


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
    if args.command == "models":
        return list_models(sys.stdout, as_json=args.json)
    out, err = sys.stdout, sys.stderr
    spinner = Spinner(err, Symbols.for_stream(err).frames)
    printer: Printer = (
        JsonPrinter(out)
        if args.json
        else HumanPrinter(out, color=use_color(out), spinner=spinner, messages=cli_hints)
    )
    try:
        # The library's notes (a server engine's dialect change, an --mcp server's stray stdout
        # line): with --json, stdout holds only events.
        notes = _to_stderr("aerix: ") if args.json else printer.note
        with CtrlC() as ctrl_c, _library_notes(notes):
            prompt = _run_prompt(args) if args.command == "run" else ""
            runner = asyncio.Runner()
            servers = contextlib.AsyncExitStack()  # the --mcp servers, entered on the runner's loop
            owned: Model | None = None
            try:
                agent, owned = _setup(args, model, spinner, runner, servers)
                ctrl_c.check()  # a Ctrl-C while the model loaded
                shown = {"json": args.json, "session": _session_flags(args)}
                if args.command == "run":
                    decided = _resume(agent, args) if prompt is None else None  # --resume
                    return run_prompt(agent, prompt, printer, ctrl_c, runner, decisions=decided, **shown)
                name = args.server or args.model or DEFAULT_MODEL
                return chat(agent, printer, ctrl_c, runner, model_name=name, **shown)
            finally:
                with ctrl_c.held():  # a Ctrl-C must not cut the servers' or the engine's shutdown short
                    try:
                        runner.run(servers.aclose())
                    finally:
                        _shutdown(runner, owned)
    except Failure as exc:
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
    except Failure as exc:
        sys.stderr.write(f"aerix: error: {exc.message}\n")
        return exc.code
    finally:
        spinner.stop()
    engine = model if model is not None else owned
    assert engine is not None
    name = f"{args.model} at {args.server}" if args.server else args.model or DEFAULT_MODEL
    try:
        with _library_notes(_to_stderr("aerix playground: ")):
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


def _options_error(exc: AerixError) -> Failure:
    flag = next((f for name, f in FLAGS.items() if name in exc.message), None)
    return Failure(f"{flag}: {exc.message}" if flag else exc.message, 2)


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
    loop = loop_options(args)
    try:
        limits = Limits.of(
            {
                key: value
                for key, value in (
                    ("turns", args.max_turns),
                    ("retries", args.retries),
                    ("max_tokens", args.max_tokens),
                    ("result_chars", args.result_chars),
                    ("repeats", args.repeats),
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
        raise Failure(exc.message, exc.code) from None
    _check_model_flags(args)
    for value, server in mcp:
        picked += [(t, f"--mcp {value!r}") for t in _enter(server, runner, servers, spinner)]
    try:
        check_unique(picked)
        tools = approving([t for t, _ in picked], args.approve)
    except Refused as exc:
        raise Failure(exc.message, exc.code) from None
    try:
        session = _session(args)  # before the model loads: a bad file is said at once
    except AerixError as exc:
        raise _options_error(exc) from None
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
            session=session,
            **loop,
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
        raise Failure(f"--mcp: {exc.message}", 1) from None
    return tuple(mcp_tools(server))


def _check_model_flags(args: argparse.Namespace) -> None:
    for flag, value, what in (
        ("--server", args.server, "an OpenAI-compatible server's URL, e.g. http://127.0.0.1:8000/v1"),
        (
            "--model",
            args.model,
            "a model's name (smollm2-instruct) or the path of a .gguf file, or hf:OWNER/REPO[:QUANT]",
        ),
    ):
        if value is not None and not value.strip():
            raise Failure(f"{flag} needs {what}, got {value!r}", 2)
    if args.server:
        if not args.model:
            raise Failure("--server needs --model NAME: the name of a model the server serves", 2)
        if args.threads is not None:
            raise Failure("--threads only applies to the local engine: the server sets its own threads", 2)
        return
    for flag, value in (
        ("--api-key", args.api_key),
        ("--dialect", args.dialect),
        ("--read-timeout", args.read_timeout),
    ):
        if value is not None:
            raise Failure(f"{flag} only applies with --server URL", 2)


def _open_model(args: argparse.Namespace, spinner: Spinner) -> Model:
    if args.server:
        api_key = args.api_key or os.environ.get(API_KEY_ENV) or None
        try:
            timeout = {} if args.read_timeout is None else {"read_timeout": args.read_timeout}
            return aerix.engines.OpenAICompatible(
                base_url=args.server, model=args.model, api_key=api_key, dialect=args.dialect, **timeout
            )
        except AerixError as exc:
            if "api_key" in exc.message:  # the key's flag, or the variable it came from
                source = "--api-key" if args.api_key else f"${API_KEY_ENV}"
                raise Failure(f"{source}: {exc.message}", 2) from None
            raise _options_error(exc) from None
        except ImportError as exc:
            raise Failure(str(exc), 1) from None
    name = args.model or DEFAULT_MODEL
    engine_kwargs = {} if args.threads is None else {"n_threads": args.threads}
    try:
        found = _fetched(name)
        with spinner.running(f"loading {name}…"):
            return aerix.load(found, **engine_kwargs)
    except (AerixError, FileNotFoundError) as exc:
        # The default model not installed could not be loaded (1); a bad --model value is bad usage (2).
        code = 1 if isinstance(exc, FileNotFoundError) and args.model is None else 2
        message = exc.message if isinstance(exc, AerixError) else str(exc)
        if args.threads is not None and message.startswith("n_threads "):
            raise Failure(f"--threads: {cli_hints(message)}", 2) from None
        raise Failure(f"--model: {message}", code) from None
    except (ImportError, OSError, ValueError, RuntimeError) as exc:
        raise Failure(f"cannot load the model {name!r}: {exc}", 1) from None


def _fetched(name: str) -> str:
    """The GGUF file of a model on the Hugging Face Hub, from the Hub's cache or downloaded there
    (before the spinner: a download draws its own progress bar); any other name as it is."""
    if not (name.startswith("hf:") or name in aerix.engines.SHORT_NAMES):
        return name
    try:
        return str(aerix.model_path(name))
    except (PermissionError, ConnectionError, ImportError) as exc:  # the repo is right; its access is not
        raise Failure(f"--model: {exc}", 1) from None


_NOTED = ("aerix.engines", "aerix.mcp")
"""The loggers whose messages the command shows as its notes: they say what the library did about
a server (a server engine's dialect change, an MCP server's stray stdout line)."""


class _NoteHandler(logging.Handler):
    """Shows the library's log messages (`_NOTED`) as the command's notes, one line each."""

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
def _library_notes(write: Callable[[str], None]) -> Iterator[None]:
    """While the command runs, the library's log messages (`_NOTED`) go to `write`, in the
    command's spelling."""
    handler = _NoteHandler(write)
    loggers = [logging.getLogger(name) for name in _NOTED]
    propagates = [logger.propagate for logger in loggers]
    for logger in loggers:
        logger.addHandler(handler)
        logger.propagate = False  # shown once, here, not by the root too
    try:
        yield
    finally:
        for logger, propagate in zip(loggers, propagates, strict=True):
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


def _run_prompt(args: argparse.Namespace) -> str | None:
    """`aerix run`'s prompt, checked; `None` with `--resume`, which takes none."""
    if args.resume:
        if args.prompt is not None:
            raise Failure("--resume takes no prompt: it goes on with the paused run's own", 2)
        if _session_flags(args) is None:
            raise Failure("--resume needs --session FILE: the session where the paused run's calls wait", 2)
        return None
    if args.yes or args.no:
        raise Failure("--yes and --no decide the calls of a paused run: give them with --resume", 2)
    if args.prompt is None:
        raise Failure("the following arguments are required: prompt (or --resume, with --session FILE)", 2)
    return _prompt(args.prompt)


def _session(args: argparse.Namespace) -> SQLiteSession | None:
    """The `--session` file's conversation (`--session-id`), or `None` without `--session`."""
    path, conversation = getattr(args, "session", None), getattr(args, "session_id", None)
    if path is None:
        if conversation is not None:
            raise AerixError("options", "--session-id needs --session FILE: the file that keeps it")
        return None
    return SQLiteSession(path, id="default" if conversation is None else conversation)


def _session_flags(args: argparse.Namespace) -> dict[str, str] | None:
    """`--session` and `--session-id` as given (`None` without a session), to say them back."""
    path = getattr(args, "session", None)
    if path is None:
        return None
    flags = {"--session": path}
    if getattr(args, "session_id", None) not in (None, "default"):
        flags["--session-id"] = args.session_id
    return flags


def _resume(agent: Agent, args: argparse.Namespace) -> dict[str, Any]:
    """The decisions on the paused run's calls: `--yes` and `--no`, the rest asked on the terminal."""
    try:
        return resume_decisions(agent.pending, args.yes, args.no, _session_flags(args) or {})
    except Refused as exc:
        raise Failure(exc.message, exc.code) from None


def _prompt(text: str) -> str:
    if text == "-":
        text = sys.stdin.read().strip()
    if not text.strip():
        raise Failure("the prompt is empty", 2)
    if (problem := unencodable(text)) is not None:  # bytes that are not UTF-8, say
        raise Failure(f"the prompt{problem}", 2)
    return text


def _silence(out: TextIO) -> None:
    """Point stdout at devnull so that the exit's flush does not fail again."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, out.fileno())
