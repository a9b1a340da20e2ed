"""Nearby field names (a heuristic chosen on BFCL tuning entries): a number the messages name
for a field ("a width of 4 and a depth of 9") gets the copy bias once more in that field,
and once less in a sibling number field whose name is nearer to it (`near`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._rule import At, Choice, Logits

if TYPE_CHECKING:
    from .._bias import ValueBias

__all__ = ["NearbyFields"]


class NearbyFields:
    """The nearby-field-names heuristic (module docstring): `Choice.more`, one up or down."""

    name = "nearby_fields"

    def __init__(self, bias: ValueBias) -> None:
        del bias  # reads the fields' names as the values come (`ValueBias.near_fields`)

    def acts(self, at: At) -> bool:
        return at.copying and bool(at.context.siblings.get(at.cursor.key))

    def bias(self, at: At, logits: Logits) -> None:
        for choice in at.values():
            if choice.number and choice.copies:
                choice.more += self._named(at, choice)

    def _named(self, at: At, choice: Choice) -> int:
        """1 if the number starts near a mention of the field in the messages, -1 if only near
        its sibling number fields', else 0."""
        mine, theirs = at.bias.near_fields(at.cursor.key)
        numbers = at.bias.numbers
        source = numbers.source
        starts = [s + (source[s] == "-") for s in numbers.where(choice.value, choice.whole)]
        if any(s in mine for s in starts):
            return 1
        return -1 if starts and all(s in theirs for s in starts) else 0
