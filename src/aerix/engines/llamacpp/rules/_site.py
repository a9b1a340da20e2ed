"""Where a call's tool name and input sit in the constraint's JSON, as the rules ask it.

The loop says where (`aerix.model.Handover.tool_path`, `input_path`); the rules
never take a place for a call's from the depth of the JSON or a key's name.
"""

from __future__ import annotations

from dataclasses import dataclass

from ....model import Handover, JsonPath
from ._json_cursor import JsonCursor

__all__ = ["CallSite"]


@dataclass(frozen=True, slots=True)
class CallSite:
    """Where a call's tool name and input sit (`aerix.model.JsonPath`); `None`: no calls are
    known (no hand-over), and every object below the outermost counts as a call's, as
    in a schema of the caller's own whose nested objects hold what a request gives."""

    tool: JsonPath | None = None
    input: JsonPath | None = None

    @classmethod
    def of(cls, handover: Handover | None) -> CallSite:
        """The site a hand-over gives; no calls without one."""
        return cls() if handover is None else cls(handover.tool_path, handover.input_path)

    @property
    def call(self) -> JsonPath | None:
        """Where a call's object sits: the object that holds its tool name and its input."""
        if self.tool is None or self.input is None or self.tool[:-1] != self.input[:-1]:
            return None
        return self.tool[:-1]

    @property
    def input_key(self) -> str | None:
        """The key of a call's input in the call's object."""
        return None if self.call is None or self.input is None else self.input[-1]

    @property
    def tool_key(self) -> str | None:
        """The key of a call's tool name in the call's object."""
        return None if self.call is None or self.tool is None else self.tool[-1]

    def in_call(self, cursor: JsonCursor) -> bool:
        """Whether `cursor` is inside a call's object: at its tool name, in its input at any
        depth; without calls known, inside any object or array below the outermost."""
        call = self.call
        container = cursor.container
        if call is None:
            return bool(container)
        return container[: len(call)] == call

    def at_tool(self, cursor: JsonCursor) -> bool:
        """Whether `cursor` is at a call's tool name (the value in progress, or the next one)."""
        return self.call is not None and cursor.path == self.tool
