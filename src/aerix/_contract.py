"""One agent's turn contract: its system message, its turn schemas, and reading its turns.

Built from the agent's tools, answer type (`output`) and `calls_per_turn`, once,
when the agent is built; each turn schema (one per tool choice, and one for
the retry of a cut turn) is built on first use and kept.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ._output import Output
from .tools import Tool
from .turn import BadTurn, Turn, render_system, turn_schema

__all__ = ["Contract"]


class Contract:
    """The turn contract of one agent.

    Args:
        instructions: The start of the system message.
        tools: The agent's tools.
        output: The answer type (see `Output`).
        calls_per_turn: The most calls one turn may hold (checked already).
        max_tokens: The generation's token limit (a short final stays under it).
        decodable: Refuse an answer type the local constraint cannot compile.
    """

    __slots__ = ("_calls_per_turn", "_max_tokens", "_output", "_schemas", "_tools", "system")

    def __init__(
        self,
        instructions: str,
        tools: Sequence[Tool],
        *,
        output: object,
        calls_per_turn: int,
        max_tokens: int,
        decodable: bool,
    ) -> None:
        self._tools = tuple(tools)
        self._output = Output(output, decodable=decodable)
        self._calls_per_turn = calls_per_turn
        self._max_tokens = max_tokens
        self._schemas: dict[tuple[str, bool], dict[str, Any]] = {}
        self.system = render_system(
            instructions, self._tools, output=self._output.schema, calls_per_turn=calls_per_turn
        )
        """The system message."""

    @property
    def output(self) -> Output:
        """The answer type."""
        return self._output

    def schema(self, choice: str, short: bool) -> dict[str, Any]:
        """The turn schema for this tool choice (and a cut turn's retry), built on first use
        (each is dozens of objects to keep)."""
        schema = self._schemas.get((choice, short))
        if schema is None:
            schema = self._schemas[choice, short] = turn_schema(
                self._tools,
                choice,
                short=short,
                max_tokens=self._max_tokens,
                calls_per_turn=self._calls_per_turn,
                output=self._output.schema,
            )
        return schema

    def parse(self, text: str, choice: str) -> Turn | BadTurn:
        """Parse a turn's text; a typed final is checked against the answer type and converted."""
        return self._output.parse(text, self._tools, choice)
