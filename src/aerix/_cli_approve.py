"""The command's approvals: which calls ask first (`--approve`), asking on the terminal, and
the decisions that resume a paused run (`--resume --yes ID --no ID`).

Which calls ask before they run:

- a call of a tool made with `needs_approval=True`, always;
- a call of an `--mcp` server's tool whose annotations say `destructiveHint: true`
  (and not `readOnlyHint: true`), unless `--approve none` is given;
- a call of each tool that `--approve TOOL` names; `--approve all`: every call.

On a terminal the command asks (y/n, the call's input shown) and the run goes on;
without one, the run ends paused (exit status 3) and the command says how to resume
it: with `--session FILE`, the waiting calls are kept there, and
`aerix run --session FILE --resume --yes ID --no ID` decides them in a later process.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from . import Call, Tool
from ._cli_tools import Refused

__all__ = [
    "ALL",
    "NONE",
    "answer",
    "approving",
    "ask",
    "destructive",
    "flag_decisions",
    "on_terminal",
    "resume_decisions",
    "resume_hint",
]

ALL = "all"
"""`--approve all`: every call asks."""
NONE = "none"
"""`--approve none`: the destructive tools of `--mcp` servers do not ask."""


def destructive(t: Tool) -> bool:
    """Whether a tool's MCP annotations say it is destructive: `destructiveHint` true, and
    not `readOnlyHint` true (MCP leaves `destructiveHint` meaningless for a read-only tool)."""
    hints = t.annotations
    return hints.get("destructiveHint") is True and hints.get("readOnlyHint") is not True


def approving(tools: Sequence[Tool], approve: Sequence[str] | None) -> list[Tool]:
    """The tools, those whose calls ask first marked `needs_approval`.

    Args:
        tools: The agent's tools.
        approve: The `--approve` values (tool names, `all`, `none`), or `None` when none was given.

    Raises:
        Refused: A value that names no tool.
    """
    names = set(approve or ())
    known = {t.name for t in tools}
    if unknown := sorted(names - known - {ALL, NONE}):
        have = ", ".join(sorted(known)) or "none"
        raise Refused(
            f"--approve: no tool is named {', '.join(map(repr, unknown))}; give a tool's name, "
            f"{ALL} (every call asks) or {NONE} (an --mcp server's destructive tools do not ask); "
            f"the tools: {have}"
        )

    def asks(t: Tool) -> bool:
        return ALL in names or t.name in names or (destructive(t) and NONE not in names)

    return [
        dataclasses.replace(t, needs_approval=True) if asks(t) and not t.needs_approval else t for t in tools
    ]


def on_terminal() -> bool:
    """Whether the command can ask a person: its stdin is a terminal."""
    try:
        return sys.stdin.isatty()
    except (AttributeError, ValueError):
        return False


def answer(question: str) -> str:
    """A line typed on the terminal after `question`, which goes to stderr (with --json,
    stdout holds only events); `""` at the end of stdin."""
    sys.stderr.write(question)
    sys.stderr.flush()
    return sys.stdin.readline()


def _shown(call: Call) -> str:
    return f"{call.id} {call.tool} {json.dumps(call.input, ensure_ascii=False, separators=(',', ':'))}"


def ask(
    pending: Sequence[Call], read: Callable[[str], str] = answer, write: Callable[[str], None] | None = None
) -> dict[str, Any]:
    """Ask on the terminal, call by call, whether each waiting call may run.

    Args:
        pending: The calls that wait.
        read: Reads one answer after showing its question (`input`).
        write: Shows a line of the command's own.

    Returns:
        The decisions, by call id: `True` for y (or yes), `False` for anything else.
    """
    decisions: dict[str, Any] = {}
    for call in pending:
        said = read(f"{_shown(call)}: run it? [y/N] ").strip().lower()
        decisions[call.id] = said in ("y", "yes")
        if not decisions[call.id] and write is not None:
            write(f"(refused {call.id})")
    return decisions


def flag_decisions(yes: Sequence[str], no: Sequence[str], pending: Sequence[Call]) -> dict[str, Any]:
    """The decisions that `--yes ID` and `--no ID[=REASON]` give (`all` for every waiting call).

    Raises:
        Refused: An id given twice, or one that no call waits with.
    """
    waiting = [c.id for c in pending]
    decisions: dict[str, Any] = {}
    given: list[tuple[str, Any]] = []
    for value in yes:
        given += [(i, True) for i in (waiting if value == ALL else [value])]
    for value in no:
        call_id, _, reason = value.partition("=")
        decision: Any = {"deny": reason} if reason else False
        given += [(i, decision) for i in (waiting if call_id == ALL else [call_id])]
    for call_id, decision in given:
        if call_id not in waiting:
            raise Refused(f"no call waits with the id {call_id!r}; the waiting calls: {', '.join(waiting)}")
        if call_id in decisions:
            raise Refused(f"{call_id} is given two decisions (--yes and --no); give it one")
        decisions[call_id] = decision
    return decisions


def resume_decisions(
    pending: Sequence[Call], yes: Sequence[str], no: Sequence[str], session: Mapping[str, str]
) -> dict[str, Any]:
    """The decisions that `aerix run --resume` goes on with: `--yes` and `--no`, and on a
    terminal the calls they leave out, asked there.

    Args:
        pending: The calls that wait in the session.
        yes: The `--yes` values.
        no: The `--no` values.
        session: `--session` and `--session-id` as given, to name the session.

    Raises:
        Refused: No call waits; a bad `--yes` or `--no`; calls left undecided with no terminal.
    """
    where = " ".join(f"{flag} {value}" for flag, value in session.items())
    if not pending:
        raise Refused(f"no call waits for a decision in {where}: nothing to resume; run a prompt")
    decisions = flag_decisions(yes, no, pending)
    left = [c for c in pending if c.id not in decisions]
    if left and not on_terminal():
        raise Refused(
            f"no decision for {', '.join(c.id for c in left)}, and no terminal to ask on: give each "
            f"--yes ID or --no ID (the waiting calls: {'; '.join(_shown(c) for c in pending)})"
        )
    return {**decisions, **ask(left)} if left else decisions


def resume_hint(pending: Sequence[Call], session: Mapping[str, str] | None) -> str:
    """What the command says when a run ends paused without a terminal to ask on.

    Args:
        pending: The calls that wait.
        session: `--session` and `--session-id` as given (`None` without a session).
    """
    waiting = "; ".join(_shown(c) for c in pending)
    if session is None:
        return (
            f"the run is paused, its calls waiting for a decision: {waiting}; with no terminal to ask "
            "on and no --session to keep them, they are dropped: run on a terminal, or with "
            "--session FILE to resume them later"
        )
    where = " ".join(f"{flag} {value}" for flag, value in session.items())
    ids = " ".join(f"--yes {c.id}" for c in pending)
    return (
        f"the run is paused, its calls waiting for a decision: {waiting}; resume it with "
        f"aerix run {where} --resume {ids} (or --no ID to refuse one, --no ID=REASON to say why)"
    )
