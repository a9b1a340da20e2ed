"""The heuristics: value rules chosen on the BFCL tuning part's entries (`docs/quality.md`).

Each is a `ValueRule` that weighs what the copy bias gives a token, or nudges a
boolean, for a pattern that small models get wrong; each is on by default and
can be turned off by name (`LlamaCpp(heuristics={"series_order": False})`):

- `quotes`: a value the user put in quotes gets the copy bias once more;
- `own_name`: a string made only of words of its field's name, or of the
  tool's name, gets no copy bias;
- `bare_numbers`: a string field next to number fields copies no number;
- `into_dates`: a span that runs on into a date is no copy in a field that
  asks for no date;
- `cut_short`: a string the model would end short of its name or phrase goes on;
- `series_order`: fields of a series take the values in the order given;
- `nearby_fields`: a number named for a field goes to that field, not its siblings;
- `booleans`: a boolean whose key the messages mention leans to `true`, or to
  `false` after a negation.

They run in this order, before the copy bias writes what they weighed (`quotes`
first: `own_name` leaves a quoted value be).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from .....errors import AerixError
from .._rule import ValueRule
from .bare_numbers import BareNumbers
from .booleans import Booleans
from .cut_short import CutShort
from .into_dates import IntoDates
from .nearby_fields import NearbyFields
from .own_name import OwnName
from .quotes import Quotes
from .series_order import SeriesOrder

if TYPE_CHECKING:
    from .._bias import ValueBias

__all__ = ["HEURISTICS", "check_heuristics", "heuristics"]

HEURISTICS = {
    rule.name: rule
    for rule in (Quotes, OwnName, BareNumbers, IntoDates, CutShort, SeriesOrder, NearbyFields, Booleans)
}
"""The heuristics by name, in the order they run."""


def heuristics(bias: ValueBias) -> tuple[ValueRule, ...]:
    """The heuristics a generation's context turns on (`Context.heuristics`), in order, each
    built for its reading."""
    on = bias.context.heuristics
    return tuple(rule(bias) for name, rule in HEURISTICS.items() if name in on)


def check_heuristics(value: object) -> frozenset[str]:
    """The heuristics `LlamaCpp(heuristics=value)` turns on: all of them for `None`, else all
    but those `value` maps to `False` (a name mapped to `True` stays on).

    Raises:
        AerixError: `kind="options"`: `value` is not a dict of names to `True` or `False`,
            or names a heuristic there is not (the error lists those there are).
    """
    if value is None:
        return frozenset(HEURISTICS)
    names = ", ".join(HEURISTICS)
    if not isinstance(value, Mapping):
        raise AerixError(
            "options",
            f"heuristics must be a dict of heuristic names to True or False (heuristics: {names}), "
            f"got {type(value).__name__} {value!r}",
        )
    for name, on in value.items():
        if name not in HEURISTICS:
            raise AerixError(
                "options", f"unknown heuristic {name!r} in heuristics; the heuristics are: {names}"
            )
        if not isinstance(on, bool):
            raise AerixError("options", f"heuristics[{name!r}] must be True or False, got {on!r}")
    return frozenset(name for name in HEURISTICS if value.get(name, True))
