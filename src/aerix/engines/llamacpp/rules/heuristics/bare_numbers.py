"""Bare numbers (a heuristic chosen on BFCL tuning entries): a string field next to number
fields gets no copy bias for a value of digits alone: numbers go to the number fields
(`"from_unit": "cups"`, not `"2"`, beside an `amount` number field)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._rule import At, Logits

if TYPE_CHECKING:
    from .._bias import ValueBias

__all__ = ["BareNumbers"]


class BareNumbers:
    """The bare-numbers heuristic (module docstring): such a value is left alone (`Choice.left`)."""

    name = "bare_numbers"

    def __init__(self, bias: ValueBias) -> None:
        del bias  # reads nothing ahead

    def acts(self, at: At) -> bool:
        c = at.cursor
        return at.copying and c.in_string_value and bool(at.context.siblings.get(c.key))

    def bias(self, at: At, logits: Logits) -> None:
        for choice in at.values():
            if not choice.number and choice.value.isdigit():
                choice.left = True
