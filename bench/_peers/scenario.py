"""The scenario every library plays in `bench/loop_overhead.py`.

One tool, `add(a: int, b: int) -> int`, as a plain or a coroutine function. A
scripted model answers the prompt with 50 turns that each call `add` once, with
arguments that vary with the turn index, then a 51st turn whose final answer is
`FINAL`. The model does no work (its replies are built before the clock starts),
so the time of a run is the library's loop: rendering, parsing, validating,
dispatching the tool and bookkeeping."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

CALL_TURNS = 50
"""Turns that call `add`."""
TURNS = CALL_TURNS + 1
"""Generations per run: the calls, then the final answer."""
PROMPT = "add things"
FINAL = "done"
MAX_TURNS = 60
"""The turn limit each library is given: above `TURNS`, so no limit ends a run."""


ToolKind = Literal["def", "async def"]
TOOL_KINDS: tuple[ToolKind, ...] = ("def", "async def")
"""How `add` is defined: a plain function (which the async libraries run on a
worker thread) or a coroutine function (awaited on the loop, no thread hop)."""


def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: The first integer.
        b: The second integer.
    """
    return a + b


def _coroutine_add() -> Callable[[int, int], Awaitable[int]]:
    async def add(a: int, b: int) -> int:
        """Add two integers.

        Args:
            a: The first integer.
            b: The second integer.
        """
        return a + b

    return add


add_async = _coroutine_add()
"""`add` as a coroutine function, also named `add`."""


def add_tool(kind: ToolKind) -> Callable[..., Any]:
    """The `add` function of the given kind."""
    return add if kind == "def" else add_async


def call_input(i: int) -> dict[str, int]:
    """The arguments of the call in turn `i` (from 0)."""
    return {"a": i, "b": 2 * i + 1}


def call_json(i: int) -> str:
    """The arguments of turn `i` as the JSON text a provider would send."""
    return json.dumps(call_input(i))


EXPECTED_RESULTS = [add(**call_input(i)) for i in range(CALL_TURNS)]
"""What the 50 calls must return, in order."""


@dataclass(frozen=True, kw_only=True)
class Trial:
    """One run, prepared: everything is built, only the run is left to time."""

    run: Callable[[], Any]
    """Plays the whole scenario; returns a coroutine when `awaits`."""
    awaits: bool
    """Whether `run` returns a coroutine (to await on the bench's event loop)."""
    check: Callable[[Any], None]
    """Raises unless the run's outcome shows 50 right `add` results and the final."""


@dataclass(frozen=True, kw_only=True)
class Contender:
    """One library in the comparison."""

    name: str
    """The library's name as the table shows it."""
    version: str
    """Its installed version."""
    tool: ToolKind
    """How its `add` is defined."""
    how: str
    """The API the scenario uses, in a few words."""
    prepare: Callable[[], Trial]
    """Builds a fresh agent and scripted model for one run (not timed)."""


def expect_results(library: str, results: Sequence[object], final: object) -> None:
    """Raise unless `results` are the 50 expected `add` results and `final` is `FINAL`.

    Args:
        library: Named in the error.
        results: The tool results the run recorded, in order (ints or their text).
        final: The run's final answer.
    """
    got = [int(str(r).strip()) for r in results]
    if got != EXPECTED_RESULTS:
        raise RuntimeError(
            f"{library}: expected {CALL_TURNS} add results {EXPECTED_RESULTS[:3]}..., "
            f"got {len(got)}: {got[:5]}..."
        )
    if final != FINAL:
        raise RuntimeError(f"{library}: expected the final answer {FINAL!r}, got {final!r}")
