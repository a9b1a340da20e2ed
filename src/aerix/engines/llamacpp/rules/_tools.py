"""Which tool a call names: the tools of a turn's schema, and the calls already made.

A small model with several tools often names the wrong one, while the tool
the request makes likeliest by the fit score is more often the answer's
(`docs/quality.md`, "tool pick"). `ToolPick` nudges the tool name towards the
tools that fit; `tool_texts` says which tools a schema offers, found where
the hand-over says a call's tool name and input sit (`CallSite`).

In a later turn, the same model often writes the call it just made again
instead of the next one of a chain (the capital of a country looked up twice,
not the population of that capital). `NewCalls` leans such a turn's tool name
away from a call that already ran (`aerix.model.Handover.calls`, each as
`call_key`); `written_call` reads the call a turn writes.
"""

from __future__ import annotations

import copy
import json
from typing import TYPE_CHECKING

from ._schema import at_path
from ._site import CallSite

if TYPE_CHECKING:
    from ._bias import ValueBias

__all__ = ["ToolNames", "call_key", "tool_texts", "written_call"]


def tool_texts(schema: object, site: CallSite) -> dict[str, str]:
    """The tools a schema offers, by name, each as the fit score reads it from the schema
    alone: `"name(fields)"` (the input's top-level fields, in order).

    A tool is a call's object where `site` says calls sit, with a constant tool name
    and an input object (`aerix.turn.calls_shape`); without calls, a schema offers none.
    """
    found: dict[str, str] = {}
    if site.call is None:
        return found
    for node in at_path(schema, site.call):
        properties = node.get("properties")
        if not isinstance(properties, dict):
            continue
        tool, given = properties.get(site.tool_key), properties.get(site.input_key)
        if isinstance(tool, dict) and isinstance(tool.get("const"), str) and isinstance(given, dict):
            fields = given.get("properties")
            names = ", ".join(fields) if isinstance(fields, dict) else ""
            found.setdefault(tool["const"], f"{tool['const']}({names})")
    return found


def call_key(tool: str, given: object) -> str:
    """One call as a string that two calls share when they name the same tool with the same
    input (its keys in any order)."""
    return json.dumps([tool, given], sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def written_call(text: str, input_key: str) -> str | None:
    """The `call_key` of a call written as compact JSON from its tool name's first
    character on, with its input under `input_key`
    (`capital_of","input":{"country":"Norway"}}`); `None` for text that is not such a call."""
    name, quote, rest = text.partition('"')
    field = json.dumps(input_key) + ":"
    at = rest.find(field)
    if not quote or at < 0:
        return None
    try:
        given, _ = json.JSONDecoder().raw_decode(rest, at + len(field))
    except ValueError:
        return None
    return call_key(name, given)


class ToolNames:
    """The rules of a call's tool name in one generation (the tool pick, new calls), bound to
    its reading of the JSON written so far (`ValueBias`)."""

    def __init__(self, bias: ValueBias) -> None:
        context = bias.context
        self._bias = bias
        self.tools = dict(context.tools)
        """The tools a call may name, by name: `"name(fields)"`."""
        self.request = context.request
        """The request whose first turn this is, or `None`."""
        self.made = frozenset(context.made)
        """The calls the turns for the request wrote already (`call_key`s)."""
        self.fits: dict[str, float] | None = None
        """How well each tool fits `request` (the `ToolPick` hook's, once it has scored them)."""

    def fork(self, bias: ValueBias) -> ToolNames:
        """These rules bound to `bias`, a fork of the reading."""
        other = copy.copy(self)
        other._bias = bias
        return other

    @property
    def names_tool(self) -> bool:
        """Whether the next token writes a call's tool name, with two or more tools to name."""
        c = self._bias.cursor
        at_name = self._bias.context.site.at_tool(c) and (c.in_string_value or c.at_literal)
        return at_name and len(self.tools) > 1

    @property
    def picks_tool(self) -> bool:
        """Whether the next token writes a call's tool name in the first turn for a request,
        with two or more tools to name."""
        return self.request is not None and self.names_tool

    @property
    def names_again(self) -> bool:
        """Whether the next token writes a call's tool name in a later turn for a request (one
        after calls), with two or more tools to name."""
        return bool(self.made) and self.names_tool

    def named(self, piece: str) -> list[str]:
        """The tools whose name a token keeps the call's tool name on the way to, or ends it
        as; `[]` where no tool name is written."""
        if not self.names_tool:
            return []
        found = self._bias.cursor.candidate(piece)
        if found is None or found[2]:
            return []
        value, ended, _ = found
        return [n for n in self.tools if (n == value if ended else n.startswith(value))]

    def call_written(self, text: str) -> str | None:
        """The call (`call_key`) that the tool name in progress and `text` after it write,
        where `text` runs to the end of the call's object; `None` if it is not a whole call."""
        c, key = self._bias.cursor, self._bias.context.site.input_key
        if key is None:
            return None
        if c.in_string_value:
            return written_call((c.value or "") + text, key)
        return written_call(text[1:], key) if text.startswith('"') else None
