"""Quotes (a heuristic chosen on BFCL tuning entries): a string value in a tool's input that
copies, from its start, a value the user put in quotes gets the copy bias once more (its
closing quote only where the whole quoted value is written): "call the branch 'main'"
leans `"branch": "main"` to the quoted word. Not in a field that is a constant of the
schema (the tool's name), nor at the turn's own level (a final)."""

from __future__ import annotations

import re
from collections.abc import Collection
from typing import TYPE_CHECKING

from .._rule import At, Logits

if TYPE_CHECKING:
    from .._bias import ValueBias

__all__ = ["Quotes", "quoted", "quoted_values"]

_QUOTED = re.compile(
    r"""(?<!\w)'(\S(?:[^'\n]{0,98}\S)?)'(?!\w)"""
    r"""|(?<!\w)"(\S(?:[^"\n]{0,98}\S)?)"(?!\w)"""
    r"|[‘`](\S(?:[^’`\n]{0,98}\S)?)[’`]"
    r"|“(\S(?:[^”\n]{0,98}\S)?)”"
    r"|«\s?(\S(?:[^»\n]{0,98}\S)?)\s?»"
    r"|„(\S(?:[^“”\n]{0,98}\S)?)[“”]"
    r"|「(\S(?:[^」\n]{0,98}\S)?)」"
)
"""A quoted value: up to 100 characters in quotes, no line break, no blank at either end.
A straight quote opens only where no letter or digit is before it, and closes only where
none follows ("company's" and "users'" hold no quote)."""


def quoted_values(text: str) -> list[str]:
    """What a text puts in quotes, in order: `'main'`, `"v2 draft"`, `“Blue Note”`."""
    return [next(g for g in m.groups() if g is not None) for m in _QUOTED.finditer(text)]


def quoted(source: str, values: Collection[str]) -> dict[int, int]:
    """Where each of `values` stands in quotes in `source`: its start, with its end."""
    found: dict[int, int] = {}
    for m in _QUOTED.finditer(source):
        start = next(i for i in range(1, len(m.groups()) + 1) if m.group(i) is not None)
        if m.group(start) in values:
            found[m.start(start)] = m.end(start)
    return found


class Quotes:
    """The quotes heuristic (module docstring): `Choice.quoted`, and once more the copy bias."""

    name = "quotes"

    def __init__(self, bias: ValueBias) -> None:
        given = bias.context.quoted
        self._quoted = quoted(bias.context.source, frozenset(given)) if given else {}
        """Where a value the user put in quotes starts in the messages, with its end."""

    def acts(self, at: At) -> bool:
        c = at.cursor
        return (
            at.copying
            and bool(self._quoted)
            and at.context.site.in_call(c)
            and c.key not in at.context.constant_keys
        )

    def bias(self, at: At, logits: Logits) -> None:
        for choice in at.values():
            value, whole = choice.value, choice.whole
            ends = [self._quoted.get(start, -1) - start for start in choice.starts]
            if any(len(value) == end if whole else 0 < len(value) <= end for end in ends):
                choice.quoted = True
                choice.more += 1
