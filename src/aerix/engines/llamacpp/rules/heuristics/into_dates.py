"""Into dates (a heuristic chosen on BFCL tuning entries): a string span that runs on into a
date of the messages is no copy in a field that asks for no date format ("Oslo 2024-05-01":
the date is no part of a place)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._rule import At, Logits
from ..convert import find_dates

if TYPE_CHECKING:
    from .._bias import ValueBias

__all__ = ["IntoDates"]


class IntoDates:
    """The into-dates heuristic (module docstring): such a value is no copy (`Choice.copies`)."""

    name = "into_dates"

    def __init__(self, bias: ValueBias) -> None:
        self._dates = find_dates(bias.context.source)

    def acts(self, at: At) -> bool:
        return at.copying and bool(self._dates) and at.cursor.key not in at.context.date_formats

    def bias(self, at: At, logits: Logits) -> None:
        for choice in at.values():
            if choice.number or not choice.copies:
                continue
            end = len(choice.value)
            if any(start < d.start <= start + end for start in choice.starts for d in self._dates):
                choice.copies = False
