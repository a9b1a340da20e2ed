"""Values written in the form their field asks for: a scale, a unit, a date format.

The `DecodedAhead` hook decodes a number or a date the model starts, and asks
these rules what to write instead: the fraction a percentage means ("5%":
0.05), a number given in millions written whole, a quantity converted to the
field's unit ("5ft 10in": 70 in inches), a date in the field's format. They
share `ValueBias`'s reading of the messages (it inherits them), and act only
with `convert_values` (`LlamaCpp(..., convert_values=True)`): each writes a
value the model did not choose.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from decimal import Decimal

import numpy as np

from ._dates import Found, day_first, find_dates
from ._json_cursor import NUMBER_START, JsonCursor
from ._site import CallSite
from ._spans import Spans, same_digits, scaled_number
from ._units import Quantity, Unit

__all__ = ["WrittenValues"]

_PLACES = 6
"""The most decimal places of a number converted to a field's unit (1/3 ft is not written)."""
_STRING = re.compile(r'"((?:[^"\\]|\\.)*)"')
_NUMBER_VALUE = re.compile(r"-?[0-9][0-9.eE+-]*(?=[,}\]])")
_DIGITS = re.compile(r"-?[0-9]+")
"""A number's digits so far, where it has not ended."""


class WrittenValues:
    """The rules of values written instead of the model's; `ValueBias` sets the state they read."""

    _cursor: JsonCursor
    _site: CallSite
    _text: Spans
    _numbers: Spans
    _copy: np.float32
    _convert: bool
    _sealed: bool
    _kept: Mapping[str, frozenset[int]]
    _scales: Mapping[int, tuple[str, int]]
    _units: Mapping[str, tuple[Unit, bool]]
    _quantities: list[Quantity]
    _date_formats: Mapping[str, str]
    _dates: list[Found]

    @property
    def starts_any_string(self) -> bool:
        """Whether the next token is the first of a string value: in a tool's input, the
        final, anywhere (its opening quote written)."""
        c = self._cursor
        return c.in_string_value and c.value == ""

    def starts_string(self) -> bool:
        """Whether the next token is the first of a string value in a tool's input."""
        c = self._cursor
        return self._site.in_call(c) and c.in_object and self.starts_any_string

    def starts_number(self, piece: str) -> bool:
        """Whether a token starts a number in a tool's input while a number the messages
        give with a scale ("5%", "213 million") is still free, in a scale that the field
        does not take as written; never without `convert_values`."""
        c = self._cursor
        kept = self._kept.get(c.key, frozenset())
        return (
            self._convert
            and bool(self._copy)
            and self._site.in_call(c)
            and c.at_literal
            and piece[:1] in NUMBER_START
            and (
                any(self._numbers.is_free(at) and e not in kept for at, (_, e) in self._scales.items())
                or any(self._numbers.is_free(q.starts[0]) for q in self._convertible(c.key))
            )
        )

    def _convertible(self, key: str) -> list[Quantity]:
        """The quantities of the messages of the kind that number field `key` asks a unit of."""
        unit = self._units.get(key)
        return [] if unit is None else [q for q in self._quantities if q.dimension == unit[0].dimension]

    def starts_date(self) -> bool:
        """Whether the next token is the first of a string value in a tool's input, for a
        field that asks for dates in a format, while a date of the messages is still free;
        never without `convert_values`."""
        return (
            self._convert
            and bool(self._copy)
            and self.starts_string()
            and self._cursor.key in self._date_formats
            and any(self._text.is_free(d.start) for d in self._dates)
        )

    def dated(self, text: str) -> str | None:
        """The date to write instead of the string value that `text` starts (after its
        opening quote), in the field's format, if that value gives a free date of the
        messages as they wrote it ("March 11, 2022"), as a date ("2022-03-11" for
        "March 11, 2022"), or in part ("2022"); else `None`, also when the value is the
        date in the format already, and always without `convert_values`. A value with
        no closing quote (the look-ahead stopped first) is read as far as it goes. The
        date's occurrence is then taken, and the numbers in it.

        The date means what the messages say, never another day: "03/04/2025" is
        3 April in a `dd/mm/yyyy` field and 4 March in a `mm/dd/yyyy` one, and is
        written as the user wrote it where the format does not tell the order
        (`yyyy-mm-dd`; see `Found.read`).
        """
        fmt = self._date_formats.get(self._cursor.key)
        if fmt is None or not self._convert:
            return None
        string = _STRING.match('"' + text)
        value = text if string is None else string.group(1)  # no end: cut short by the look-ahead
        written = {day for d in find_dates(value) for day in d.readings}
        part = value.strip()
        free = [d for d in self._dates if self._text.is_free(d.start)]
        for d in free:
            given = self._text.source[d.start : d.end]
            if given in value or written.intersection(d.readings) or (part and part in given):
                return self._write(d, fmt, value)
        if free and any(c.isdigit() for c in value):  # some other date ("2023.01.25"): the next one given
            return self._write(free[0], fmt, value)
        return None

    def _write(self, d: Found, fmt: str, value: str) -> str | None:
        """The date `d` in format `fmt` (as the messages wrote it if `fmt` does not tell its
        order of day and month), taken with its numbers; `None` if `value` is it already."""
        read = d.read(day_first(fmt))
        day = self._text.source[d.start : d.end] if read is None else read.strftime(fmt)
        if day == value:
            return None  # copied as it is
        self._text.take(d.start)
        for number in re.findall(r"\d+", self._text.source[d.start : d.end]):  # its day and year too
            self._numbers.use(number)
        return day

    def scaled(self, text: str, ended: bool = True) -> str | None:
        """The number to write instead of the one that `text` starts with, if the messages
        give that number only with a scale that the field does not take as written
        ("5%": "0.05", "213 million": "213000000"), or in another unit than the one
        the field asks for ("5ft 10in": "70" in inches, see `_converted`); else `None`
        (always without `convert_values`).
        A number given in thousands or more also counts when written with zeros of the
        model's own ("850000000" for "8.5 million"), and so do digits that never end
        (`ended=False`: the look-ahead ran out within them, "85000000000…", which would
        run on to `max_tokens`).

        The occurrence is then taken, as if copied.
        """
        number = _NUMBER_VALUE.match(text) if ended else _DIGITS.fullmatch(text)
        if number is None or not self._convert:
            return None
        written = number.group()
        found = self._numbers.free(written) if ended else []  # unended: only a scale's digits
        converted = self._converted(written, found)
        if converted is not None:
            return converted
        kept = self._kept.get(self._cursor.key, ())
        if not found:  # millions not copied as given, but with zeros of the model's own ("850000000")
            found = [
                at
                for at, (given, exponent) in self._scales.items()
                if exponent > 0 and self._numbers.is_free(at) and same_digits(written, given)
            ]
        given = {self._scales.get(at) for at in found}
        scale = given.pop() if len(given) == 1 else None
        if scale is None or scale[1] in kept:
            return None
        self._numbers.take(found[0])
        return scaled_number(*scale)

    def seal(self) -> None:
        """End the number in progress where it is: the engine wrote it instead of the
        model's (`scaled`), and the model may end it or the object next, not add digits
        ("0.05", not "0.050")."""
        self._sealed = True

    def _converted(self, written: str, found: Collection[int]) -> str | None:
        """The number to write instead of `written`, a copy of the first number of a free
        quantity of the messages (at one of `found`) in another unit of the kind the field
        asks for, converted to the field's unit ("5ft 10in": "70" in inches); `None` if
        there is none, or if the converted number is the same, is no integer for an
        integer field, or has more than `_PLACES` decimal places. Its numbers are then taken."""
        target = self._units.get(self._cursor.key)
        if target is None:
            return None
        unit, integer = target
        for q in self._convertible(self._cursor.key):
            if q.starts[0] not in found:
                continue
            value = q.value(unit).normalize()
            if value == Decimal(written) or (integer and value != value.to_integral_value()):
                return None
            if -value.as_tuple().exponent > _PLACES:  # type: ignore[operator]
                return None
            for at in q.starts:
                self._numbers.take(at)
            return format(value, "f")
        return None
