"""Quantities in the unit a field asks for: reading the unit a number field names,
finding the quantities a request gives with units, and converting between them.

A tool whose `height` field says "in inches" gets "5ft 10in" from a user, and
a `capacitance` field "in farads (F)" gets "100µF"; a small model copies the
first number as written. These pure functions let the engine write 70 and
0.0001 instead (`Quantity.value`, `Unit`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal

__all__ = ["CLOCK", "Quantity", "Unit", "field_unit", "quantities"]


@dataclass(frozen=True, slots=True)
class Unit:
    """A unit: what it measures, and how many of that measure's base unit it is."""

    dimension: str
    factor: Decimal


def _unit(dimension: str, factor: str, *names: str) -> dict[str, Unit]:
    return dict.fromkeys(names, Unit(dimension, Decimal(factor)))


_WORDS: dict[str, Unit] = {
    **_unit("length", "0.001", "millimeter", "millimeters", "millimetre", "millimetres"),
    **_unit("length", "0.01", "centimeter", "centimeters", "centimetre", "centimetres"),
    **_unit("length", "1", "meter", "meters", "metre", "metres"),
    **_unit("length", "1000", "kilometer", "kilometers", "kilometre", "kilometres"),
    **_unit("length", "0.0254", "inch", "inches"),
    **_unit("length", "0.3048", "foot", "feet"),
    **_unit("length", "0.9144", "yard", "yards"),
    **_unit("length", "1609.344", "mile", "miles"),
    **_unit("mass", "0.001", "milligram", "milligrams"),
    **_unit("mass", "1", "gram", "grams"),
    **_unit("mass", "1000", "kilogram", "kilograms", "kilo", "kilos"),
    **_unit("mass", "453.59237", "pound", "pounds"),
    **_unit("mass", "28.349523125", "ounce", "ounces"),
    **_unit("time", "0.001", "millisecond", "milliseconds"),
    **_unit("time", "1", "second", "seconds", "sec", "secs"),
    **_unit("time", "60", "minute", "minutes", "mins"),
    **_unit("time", "3600", "hour", "hours", "hrs"),
    **_unit("time", "86400", "day", "days"),
    **_unit("time", "604800", "week", "weeks"),
    **_unit("volume", "0.001", "milliliter", "milliliters", "millilitre", "millilitres"),
    **_unit("volume", "1", "liter", "liters", "litre", "litres"),
    **_unit("capacitance", "1", "farad", "farads"),
    **_unit("inductance", "1", "henry", "henries", "henrys"),
}
"""Units by name, in lower case."""
_SYMBOLS: dict[str, Unit] = {
    **_unit("length", "0.001", "mm"),
    **_unit("length", "0.01", "cm"),
    **_unit("length", "1", "m"),
    **_unit("length", "1000", "km"),
    **_unit("length", "0.0254", "in"),
    **_unit("length", "0.3048", "ft"),
    **_unit("length", "1609.344", "mi"),
    **_unit("mass", "0.001", "mg"),
    **_unit("mass", "1", "g"),
    **_unit("mass", "1000", "kg"),
    **_unit("mass", "453.59237", "lb", "lbs"),
    **_unit("mass", "28.349523125", "oz"),
    **_unit("time", "0.001", "ms"),
    **_unit("time", "1", "s"),
    **_unit("time", "60", "min"),
    **_unit("time", "3600", "h", "hr"),
    **_unit("volume", "0.001", "ml", "mL"),
    **_unit("volume", "1", "l", "L"),
    **_unit("capacitance", "1", "F"),
    **_unit("capacitance", "0.001", "mF"),
    **_unit("capacitance", "0.000001", "µF", "μF", "uF"),
    **_unit("capacitance", "0.000000001", "nF"),
    **_unit("capacitance", "0.000000000001", "pF"),
    **_unit("inductance", "1", "H"),
    **_unit("inductance", "0.001", "mH"),
    **_unit("inductance", "0.000001", "µH", "μH", "uH"),
}
"""Units by symbol, as written (case matters: `mF` is no `MF`)."""
_LOOSE = frozenset({"in", "m", "s", "h", "l", "L", "g", "F", "H"})
"""Symbols that are also words ("5 in a row", "2 h", "F"): a unit only right after
the number ("10in"), or after another quantity ("5ft 10in")."""

_NAMES = "|".join(re.escape(n) for n in sorted(_WORDS, key=len, reverse=True))
_ALL = "|".join(re.escape(n) for n in sorted({*_WORDS, *_SYMBOLS}, key=len, reverse=True))
_QUANTITY = re.compile(
    rf"(?<![\w.])(?P<number>\d+(?:\.\d+)?)(?P<gap>\s?)(?P<unit>{_ALL})(?![\w/^²³])",
    re.IGNORECASE,
)
"""A number and a unit: "100µF", "3 minutes", "5ft"; not "9.8 m/s^2"."""
_FIELD_UNIT = re.compile(rf"\b(?:in|number of)\s+(?:the\s+)?(?P<unit>{_ALL})(?![\w/^²³])", re.IGNORECASE)
"""A unit a description names for its field: "in inches", "in henries (H)", "number of days"."""
_TIME_OF_DAY = re.compile(
    r"(?<![\w.:])(?P<hour>1[0-2]|0?[1-9])(?::00)?\s?(?P<half>[ap])\.?m\b\.?", re.IGNORECASE
)
"""An hour of the day on the 12-hour clock: "11 PM", "3pm", "7:00 a.m."."""
_FIELD_CLOCK = re.compile(r"\b24[- ]?h(?:ours?|r)?\b", re.IGNORECASE)
"""A field that takes hours on the 24-hour clock: "This is in 24 hour format"."""
CLOCK = Unit("hour of the day", Decimal(1))
"""The hours of a day on the 24-hour clock: "11 PM" is 23."""
_KEY_WORD = re.compile(r"[a-z]+|[A-Z][a-z]*")


def _lookup(text: str) -> Unit | None:
    """The unit `text` names: a symbol as written, else a name in any case."""
    return _SYMBOLS.get(text) or _WORDS.get(text.lower())


@dataclass(frozen=True, slots=True)
class Quantity:
    """A quantity the messages give: where each of its numbers starts ("5ft 10in": two),
    the first number as written, and its value in the base unit of its dimension."""

    starts: tuple[int, ...]
    number: str
    dimension: str
    base: Decimal

    def value(self, unit: Unit) -> Decimal:
        """The quantity in `unit` (of its dimension)."""
        return self.base / unit.factor


def field_unit(key: str, description: str = "") -> Unit | None:
    """The unit a number field asks for, if its description names one ("Height in inches",
    "The inductance (L) in henries (H)", "The number of days") or its name ends with one
    (`height_cm`, `duration_seconds`); `CLOCK` if it says it takes hours "in 24 hour
    format"; else `None`."""
    if _FIELD_CLOCK.search(description):
        return CLOCK
    if m := _FIELD_UNIT.search(description):
        unit = _lookup(m.group("unit"))
        if unit is not None and not (m.group("unit") in _LOOSE and len(m.group("unit")) == 1):
            return unit
    words = _KEY_WORD.findall(key)
    if len(words) > 1 and (unit := _lookup(words[-1])) is not None and words[-1] not in _LOOSE:
        return unit
    return None


def quantities(text: str) -> list[Quantity]:
    """The quantities `text` gives with a unit of `_WORDS` or `_SYMBOLS`, or as an hour of
    the day ("11 PM": 23, `CLOCK`), in order; one right after another of the same dimension
    adds to it ("5ft 10in", "1 hour 30 minutes")."""
    found: list[Quantity] = []
    end = -1
    for m in _TIME_OF_DAY.finditer(text):
        hour = int(m.group("hour")) % 12 + (12 if m.group("half")[0].lower() == "p" else 0)
        found.append(Quantity((m.start(),), m.group("hour"), CLOCK.dimension, Decimal(hour)))
    for m in _QUANTITY.finditer(text):
        written = m.group("unit")
        unit = _lookup(written)
        follows = (
            bool(found)
            and not text[end : m.start()].strip(" ,")
            and found[-1].dimension == (unit.dimension if unit else "")
        )
        if unit is None or (written in _LOOSE and m.group("gap") and not follows):
            continue
        base = Decimal(m.group("number")) * unit.factor
        if follows and (last := found[-1]).base > base:  # "5ft 10in": larger unit first
            found[-1] = Quantity((*last.starts, m.start()), last.number, last.dimension, last.base + base)
        else:
            found.append(Quantity((m.start(),), m.group("number"), unit.dimension, base))
        end = m.end()
    return sorted(found, key=lambda q: q.starts)
