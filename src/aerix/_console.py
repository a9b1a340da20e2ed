"""How the `aerix` command shows a run: compact human lines, or JSON lines.

`HumanPrinter` writes one short line per step (`turn 1 · thought: …`,
`→ calculator {…}`, `← 84`, `✓ final: …`, then the usage), coloured only on
a terminal and never when `NO_COLOR` is set; a `Spinner` on stderr shows that
something is happening while the model loads or generates. `JsonPrinter`
writes each event's `to_dict()` as one JSON line, and nothing else.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Protocol, TextIO

from .events import (
    AgentEvent,
    CallEvent,
    EndEvent,
    FinalEvent,
    ResultEvent,
    RetryEvent,
    TextEvent,
    TrimEvent,
    TurnEvent,
    UsageEvent,
)
from .tools import readable

__all__ = ["HumanPrinter", "JsonPrinter", "Printer", "Spinner", "Symbols", "use_color"]


def use_color(stream: TextIO, environ: Mapping[str, str] | None = None) -> bool:
    """Colour only on a terminal, and never when `NO_COLOR` is set to anything (no-color.org)."""
    env = os.environ if environ is None else environ
    return not env.get("NO_COLOR") and _isatty(stream)


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # a closed or odd stream
        return False


_FRAMES = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"


@dataclass(frozen=True, kw_only=True, slots=True)
class Symbols:
    """The marks the human output uses; ASCII ones where the stream cannot encode the others."""

    call: str = "→"
    result: str = "←"
    final: str = "✓"
    end: str = "✗"
    retry: str = "↻"
    dot: str = "·"
    frames: str = _FRAMES

    @classmethod
    def for_stream(cls, stream: TextIO) -> Symbols:
        """The Unicode marks if `stream`'s encoding has them, else ASCII ones."""
        fancy = cls()
        try:
            "".join((fancy.call, fancy.result, fancy.final, fancy.end, fancy.retry, fancy.dot)).encode(
                getattr(stream, "encoding", None) or "utf-8"  # None: an in-memory text stream
            )
        except (UnicodeEncodeError, LookupError):
            return cls(call="->", result="<-", final="OK", end="X", retry="~", dot="-", frames="|/-\\")
        return fancy


class Spinner:
    """A spinner on one line of a terminal, drawn by a thread until stopped.

    Args:
        stream: Where to draw (stderr); nothing is drawn unless it is a terminal.
        frames: The animation frames.
    """

    def __init__(self, stream: TextIO, frames: str = _FRAMES) -> None:
        self._stream = stream
        self._frames = frames
        self._enabled = _isatty(stream)
        self._lock = threading.RLock()
        self._label = ""
        self._shown = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self, label: str) -> None:
        """Show `label` beside the spinner (starting it if it is not running)."""
        self._label = label
        if self._enabled and self._thread is None:
            self._stop.clear()
            self._thread = threading.Thread(target=self._spin, name="aerix-spinner", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        """Stop and erase the spinner."""
        thread, self._thread = self._thread, None
        if thread is not None:
            self._stop.set()
            thread.join()
        with self._lock:
            self._erase()

    @contextlib.contextmanager
    def running(self, label: str) -> Iterator[None]:
        """Spin with `label` for the duration of the block."""
        self.start(label)
        try:
            yield
        finally:
            self.stop()

    @contextlib.contextmanager
    def hidden(self) -> Iterator[None]:
        """Erase the spinner while the block prints; it comes back on its next frame."""
        with self._lock:
            self._erase()
            yield

    def _erase(self) -> None:
        if self._shown:
            self._stream.write("\r\x1b[K")
            self._stream.flush()
            self._shown = False

    def _spin(self) -> None:
        i = 0
        while not self._stop.wait(0.1):
            with self._lock:
                self._stream.write(f"\r\x1b[K{self._frames[i % len(self._frames)]} {self._label}")
                self._stream.flush()
                self._shown = True
            i += 1


class Printer(Protocol):
    """Shows the events of runs."""

    def run_started(self) -> None:
        """A run begins."""

    def event(self, ev: AgentEvent) -> None:
        """Show one event."""

    def run_done(self, seconds: float) -> None:
        """The run that the last events belong to has ended, after `seconds`."""

    def note(self, text: str) -> None:
        """A remark of the command itself (not an event)."""


class JsonPrinter:
    """Each event as one line of JSON (`ev.to_dict()`), flushed at once; nothing else."""

    def __init__(self, out: TextIO) -> None:
        self._out = out

    def run_started(self) -> None:
        """Nothing: the events say it all."""

    def event(self, ev: AgentEvent) -> None:
        """Write the event's JSON line."""
        line = json.dumps(ev.to_dict(), ensure_ascii=False)
        if readable(line) is not line:  # a lone surrogate (a model's `"\\ud800"`): JSON escapes it
            line = json.dumps(ev.to_dict())
        self._out.write(line + "\n")
        self._out.flush()

    def run_done(self, seconds: float) -> None:
        """Nothing: the `final` or `end` line already closed the run."""

    def note(self, text: str) -> None:
        """Nothing: stdout holds only events."""


_CODES = {"dim": "2", "bold": "1", "red": "31", "green": "32", "yellow": "33", "cyan": "36"}
_RESULT_CHARS = 400
"""Characters of a tool result shown; the model sees it all (and `--json` shows it all)."""
_THOUGHT_CHARS = 200
"""Characters of a thought shown."""


class HumanPrinter:
    """Compact lines a person reads while the run goes on.

    Args:
        out: Where the lines go (stdout).
        color: Use ANSI colours.
        spinner: Shown while the model generates; hidden while a line prints.
        symbols: The marks to use.
        messages: Rewrites an ending's message before it is shown (the command
            spells the library's hints as its own flags).
    """

    def __init__(
        self,
        out: TextIO,
        *,
        color: bool = False,
        spinner: Spinner | None = None,
        symbols: Symbols | None = None,
        messages: Callable[[str], str] | None = None,
    ) -> None:
        self._out = out
        self._color = color
        self._spinner = spinner
        self._sym = symbols or Symbols.for_stream(out)
        self._messages = messages
        self._reset()

    def _reset(self) -> None:
        self._generation = 0
        self._streamed = 0
        self._prompt = self._cached = self._completion = 0

    def event(self, ev: AgentEvent) -> None:
        """Show the event (text is only counted, beside the spinner)."""
        s = self._sym
        match ev:
            case TextEvent():
                self._streamed += 1
                self._spin(f"turn {self._generation + 1} {s.dot} generating ({self._streamed})")
            case UsageEvent():
                self._generation += 1
                self._streamed = 0
                self._prompt += ev.prompt_tokens
                self._cached += ev.cached_tokens
                self._completion += ev.completion_tokens
            case TurnEvent():
                self._line(self._turn_line(ev.turn, ev.thought))
                self._spin("running tools")
            case CallEvent():
                args = json.dumps(ev.input, ensure_ascii=False, separators=(",", ":"))
                self._line(f"  {self._paint(s.call, 'cyan')} {self._paint(ev.tool, 'bold')} {args}")
            case ResultEvent():
                text = _clip(ev.text, _RESULT_CHARS).replace("\n", "\n    ")
                mark = self._paint(s.result, "red" if ev.error else "green")
                self._line(f"  {mark} {self._paint(text, 'red') if ev.error else text}")
                self._spin(f"turn {self._generation + 1}")
            case RetryEvent():
                self._line(self._paint(f"{s.retry} turn {ev.turn} retried: {ev.reason}", "yellow"))
                self._spin(f"turn {self._generation + 1}")
            case TrimEvent():
                what = f"{ev.dropped} earlier messages left out" if ev.dropped else "long results shortened"
                self._line(self._paint(f"{s.retry} the conversation outgrew the context: {what}", "yellow"))
            case FinalEvent():
                if ev.thought:
                    self._line(self._turn_line(self._generation, ev.thought))
                self._line(f"{self._paint(f'{s.final} final:', 'green')} {ev.text}")
            case EndEvent():
                text = self._messages(ev.message) if self._messages is not None else ev.message
                message = f": {text}" if text else ""
                color = "yellow" if ev.reason == "paused" else "red"
                self._line(self._paint(f"{s.end} end ({ev.reason}){message}", color))
                for call in ev.pending:  # each waiting call as the model wrote it
                    args = json.dumps(call.input, ensure_ascii=False, separators=(",", ":"))
                    self._line(f"  ? {call.id} {self._paint(call.tool, 'bold')} {args}")

    def run_started(self) -> None:
        """A run begins: count afresh and start the spinner."""
        self._reset()
        self._spin("turn 1")

    def run_done(self, seconds: float) -> None:
        """Stop the spinner and show the run's token usage and time."""
        if self._spinner is not None:
            self._spinner.stop()
        took = f"{self._sym.dot} {seconds:.1f} s"
        if self._generation == 0:
            self._line(self._paint(f"usage: no generation finished {took}", "dim"))
            return
        gens = f"{self._generation} generations, " if self._generation != 1 else ""
        if self._prompt == self._completion == 0:  # a server that does not report usage
            self._line(self._paint(f"usage: {gens}no token counts from the engine {took}", "dim"))
            return
        self._line(
            self._paint(
                f"usage: {gens}{self._prompt} prompt ({self._cached} cached) + "
                f"{self._completion} completion tokens {took}",
                "dim",
            )
        )

    def note(self, text: str) -> None:
        """A dim line of the command's own."""
        self._line(self._paint(text, "dim"))

    def _turn_line(self, turn: int, thought: str | None) -> str:
        head = self._paint(f"turn {turn}", "bold")
        return f"{head} {self._sym.dot} thought: {_clip(thought, _THOUGHT_CHARS)}" if thought else head

    def _spin(self, label: str) -> None:
        if self._spinner is not None:
            self._spinner.start(label)

    def _paint(self, text: str, style: str) -> str:
        return f"\x1b[{_CODES[style]}m{text}\x1b[0m" if self._color else text

    def _line(self, text: str) -> None:
        hide = self._spinner.hidden() if self._spinner is not None else contextlib.nullcontext()
        with hide:
            self._out.write(readable(text) + "\n")  # a lone surrogate shows as U+FFFD
            self._out.flush()


def _clip(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… ({len(text) - limit} more characters)"
