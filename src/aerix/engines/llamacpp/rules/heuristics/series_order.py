"""Series order (a heuristic chosen on BFCL tuning entries): the fields of a series (`mass1`,
`mass2`; `start_city`, `end_city`; `x`, `y`: `in_series`) take the values in the order the
messages give them. A number field of a series gets the copy bias once more for the first
number the messages write in digits that no value took yet, unless the messages name the
fields ("the first side is 3": `near`); a string field of a series, at its first token, for
the tokens that start the earliest free word of the messages ("from Oslo to Rome": Oslo
first)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from .._rule import At, Choice, Logits
from .._schema import in_series
from .._spans import is_function_word, spelled

if TYPE_CHECKING:
    from .._bias import ValueBias

__all__ = ["SeriesOrder"]

_NUMBER_SPAN = re.compile(r"-?\d+(?:\.\d+)?")
_SERIES_WORD = re.compile(r"[^\W_]{2}")
"""The start of a word a series field's value may be ordered by: two letters or digits."""


class SeriesOrder:
    """The series-order heuristic (module docstring): `Choice.more` for the value next in order."""

    name = "series_order"

    def __init__(self, bias: ValueBias) -> None:
        context, numbers = bias.context, bias.convert.numbers
        words = spelled(context.source, times_a_year=context.convert_values)
        self._number_starts = [
            m.start()
            for m in _NUMBER_SPAN.finditer(numbers)
            if m.start() not in words and m.start() in bias.numbers.free(m.group())
        ]
        """Where the numbers the messages write in digits start, in order."""

    def acts(self, at: At) -> bool:
        return at.copying

    def bias(self, at: At, logits: Logits) -> None:
        cursor, context = at.cursor, at.context
        key = cursor.key
        earliest = self._earliest(at) if key in context.series and not cursor.value else None
        numbers = in_series(key, context.siblings.get(key, ()))
        for choice in at.values():
            if not choice.copies:
                continue
            if choice.number:
                choice.more += numbers and self._first(at, key, choice)
            elif earliest is not None:
                choice.more += earliest in choice.starts

    def _first(self, at: At, key: str, choice: Choice) -> bool:
        """Whether the number `choice` writes starts at the first free number the messages
        write in digits, unless the messages name the fields (`near`)."""
        numbers = at.bias.numbers
        free = [s for s in self._number_starts if numbers.is_free(s)]
        mine, theirs = at.bias.near_fields(key)
        if not free or free[0] in theirs or any(s in mine for s in free):
            return False  # the messages name the fields: names, not order
        return free[0] in numbers.where(choice.value, choice.whole)

    def _earliest(self, at: At) -> int | None:
        """Where the earliest free span of the messages starts that one of the step's tokens
        would start a string value with (a whole word of two letters or more, no function word)."""
        starts = []
        for piece in at.pieces.values():
            hit = at.cursor.candidate(piece)
            if hit is None or hit[2] or not _SERIES_WORD.match(hit[0]) or is_function_word(hit[0]):
                continue
            starts += at.bias.text.where(hit[0], True)  # a whole word: "Ma" could start anything
        return min(starts, default=None)
