"""The conversions (opt-in, `convert_values=True`): values written in the form their field
asks for, where the user wrote them another way. A number given with a scale (`_scales`:
"5%" as 0.05, "213 million" whole), a quantity in its field's unit (`_units`: "5ft 10in" as
70 "in inches"), a date in its field's format (`_dates`); `Conversions` writes them for the
`DecodedAhead` hook."""

from __future__ import annotations

from ._dates import Found, date_format, day_first, find_dates
from ._scales import kept_scales, same_digits, scaled_number, scales, takes_percent
from ._units import CLOCK, Quantity, Unit, field_unit, quantities
from ._written import Conversions

__all__ = [
    "CLOCK",
    "Conversions",
    "Found",
    "Quantity",
    "Unit",
    "date_format",
    "day_first",
    "field_unit",
    "find_dates",
    "kept_scales",
    "quantities",
    "same_digits",
    "scaled_number",
    "scales",
    "takes_percent",
]
