"""The command's runs: one prompt (`aerix run`), a conversation (`aerix chat`), and Ctrl-C.

A run that ends paused (calls wait for a decision: `--approve`) is asked about on the
terminal and resumed there; without a terminal the command says how to resume it and
exits with status 3 (`PAUSED`).
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import signal
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from types import FrameType
from typing import Any, TextIO

import aerix
from aerix import AbortController, AbortSignal, Agent

from ._checks import unencodable
from ._cli_approve import ask, on_terminal, resume_hint
from ._cli_flags import cli_hints
from ._console import Printer

__all__ = ["ABORT_REASON", "PAUSED", "CtrlC", "chat", "run_prompt"]

ABORT_REASON = "interrupted (Ctrl-C)"
PAUSED = 3
"""The exit status of a run that ended paused, its calls waiting for a decision."""


class CtrlC:
    """While installed: the first Ctrl-C during a run aborts the run; any other Ctrl-C quits."""

    def __init__(self) -> None:
        self._controller: AbortController | None = None
        self._previous: Any = None
        self._installed = False
        self._holding = False
        self._held = False
        self._previous_hook: Callable[[Any], object] = sys.unraisablehook
        self._quit = False
        """A Ctrl-C asked to quit: its `KeyboardInterrupt` may have been swallowed (raised in a
        ctypes callback while llama.cpp loads a model), so `check` raises it again."""

    def __enter__(self) -> CtrlC:
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGINT, self._on_sigint)
            self._previous_hook = sys.unraisablehook
            sys.unraisablehook = self._unraisable
            self._installed = True
        return self

    def __exit__(self, *exc: object) -> None:
        if self._installed:
            signal.signal(signal.SIGINT, self._previous or signal.default_int_handler)
            sys.unraisablehook = self._previous_hook

    def _unraisable(self, unraisable: Any) -> None:
        """Python prints an exception that a ctypes callback raised, and drops it: a Ctrl-C's
        `KeyboardInterrupt` raised in llama.cpp's log callback while a model loads is not
        printed (`check` quits after the load); anything else goes to the hook that was there."""
        if self._quit and isinstance(unraisable.exc_value, KeyboardInterrupt):
            return
        self._previous_hook(unraisable)

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
        self._quit = True
        raise KeyboardInterrupt

    def check(self) -> None:
        """Quit now if a Ctrl-C asked to and its `KeyboardInterrupt` got lost on the way."""
        if self._quit:
            raise KeyboardInterrupt


async def _drive(events: AsyncIterator[aerix.AgentEvent], printer: Printer) -> aerix.AgentEvent | None:
    """One run, shown as it goes; its last event (the final or the end)."""
    printer.run_started()
    started = time.monotonic()
    last: aerix.AgentEvent | None = None
    async for ev in events:
        printer.event(ev)
        last = ev
    printer.run_done(time.monotonic() - started)
    return last


def _paused(last: aerix.AgentEvent | None) -> bool:
    return isinstance(last, aerix.EndEvent) and last.reason == "paused"


def _settle(
    agent: Agent,
    last: aerix.AgentEvent | None,
    printer: Printer,
    ctrl_c: CtrlC,
    runner: asyncio.Runner,
    session: Mapping[str, str] | None,
) -> aerix.AgentEvent | None:
    """While the run ends paused: ask on the terminal and resume; without one, say how to
    resume (the last event stays the paused ending)."""
    while isinstance(last, aerix.EndEvent) and last.reason == "paused":
        if not on_terminal():
            sys.stderr.write(f"aerix: {resume_hint(last.pending, session)}\n")
            break
        decisions = ask(last.pending, write=printer.note)
        with ctrl_c.run() as signal:
            last = runner.run(_drive(agent.resume(decisions, signal=signal), printer))
    return last


def run_prompt(
    agent: Agent,
    prompt: str | None,
    printer: Printer,
    ctrl_c: CtrlC,
    runner: asyncio.Runner,
    *,
    json: bool,
    decisions: Mapping[str, Any] | None = None,
    session: Mapping[str, str] | None = None,
) -> int:
    """`aerix run`: one run, or (`prompt` `None`) the paused one resumed with `decisions`; the
    exit status (0 for a final, `PAUSED` for a run that ends paused, else 1).

    Args:
        session: `--session` and `--session-id` as given, for the way to resume a paused run.
    """
    with ctrl_c.run() as signal:
        if prompt is None:
            events = agent.resume(decisions or {}, signal=signal)
        else:
            events = agent.run(prompt, signal=signal)
        last = runner.run(_drive(events, printer))
    last = _settle(agent, last, printer, ctrl_c, runner, session)
    if isinstance(last, aerix.FinalEvent):
        return 0
    if json and isinstance(last, aerix.EndEvent) and not _paused(last):  # the human output already said it
        sys.stderr.write(f"aerix: the run ended without a final ({last.reason}): {cli_hints(last.message)}\n")
    return PAUSED if _paused(last) else 1


_COMMAND = re.compile(r"/[a-z]+")
_HELP = "/reset forgets the conversation; /exit (or EOF) ends"


def chat(
    agent: Agent,
    printer: Printer,
    ctrl_c: CtrlC,
    runner: asyncio.Runner,
    *,
    model_name: str,
    json: bool,
    session: Mapping[str, str] | None = None,
) -> int:
    """`aerix chat`: a run per line of stdin, in one conversation, until `/exit` or the end of stdin
    (or, without a terminal, a run that ends paused: exit status `PAUSED`).

    Args:
        model_name: The model, as the banner names it on a terminal.
        json: The events go to stdout as JSON lines, so the `> ` prompt goes to stderr.
        session: `--session` and `--session-id` as given, for the way to resume a paused run.
    """
    interactive = _isatty(sys.stdin)
    if interactive:
        with contextlib.suppress(ImportError):
            import readline  # noqa: F401  (line editing and history for input())
        tools = ", ".join(agent.tools) or "none"
        sys.stderr.write(f"aerix chat · {model_name} · tools: {tools} · {_HELP}\n")
    while True:
        line = _read_line(interactive, to_stderr=json)
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
        if (problem := unencodable(text)) is not None:  # bytes that are not UTF-8, say
            printer.note(f"(not sent: the line{problem})")
            continue
        with ctrl_c.run() as signal:
            last = runner.run(_drive(agent.run(text, signal=signal), printer))
        if _paused(_settle(agent, last, printer, ctrl_c, runner, session)):
            return PAUSED


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
