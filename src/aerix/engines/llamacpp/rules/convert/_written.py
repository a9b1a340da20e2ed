"""Values written in the form their field asks for: a scale, a unit, a date format.

The `DecodedAhead` hook decodes a number or a date the model starts, and asks
`Conversions` what to write instead: the fraction a percentage means ("5%":
0.05), a number given in millions written whole, a quantity converted to the
field's unit ("5ft 10in": 70 in inches), a date in the field's format. They
read the messages as the other value rules do (`ValueBias`), and act only
with `convert_values` (`LlamaCpp(..., convert_values=True)`) and the copy bias
on: each writes a value the model did not choose.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Collection
from decimal import Decimal
from typing import TYPE_CHECKING

import numpy as np

from .._json_cursor import NUMBER_CHARS, NUMBER_START, NUMBER_VALUE, STRING_VALUE
from .._rule import Logits
from ._dates import day_first, find_dates
from ._scales import same_digits, scaled_number, scales
from ._units import Quantity, quantities

if TYPE_CHECKING:
    from .._bias import ValueBias
    from ._dates import Found

__all__ = ["Conversions"]

_PLACES = 6
"""The most decimal places of a number converted to a field's unit (1/3 ft is not written)."""
_DIGITS = re.compile(r"-?[0-9]+")
"""A number's digits so far, where it has not ended."""
_NUMBER = frozenset(NUMBER_CHARS)


class Conversions:
    """The conversions of one generation, bound to its reading of the messages (`ValueBias`).

    Args:
        bias: The reading: the messages' spans and the JSON written so far.
        numbers: The messages' numbers as the rules read them (`number_text`).
    """

    def __init__(self, bias: ValueBias, numbers: str) -> None:
        context = bias.context
        self._bias = bias
        self.on = context.convert_values
        """Whether the conversions act (`convert_values`); a value is looked ahead for only
        with the copy bias on too."""
        self._copy = bool(context.copy)
        self.numbers = numbers
        """The messages' numbers as the rules read them (`number_text`)."""
        self.scales = scales(numbers)
        """Where the numbers the messages give with a scale start: the number, and its power of ten."""
        self._kept = {key: frozenset(kept) for key, kept in context.kept_scales.items()}
        self._units = dict(context.units)
        self._quantities = quantities(numbers) if self._units and context.convert_values else []
        self._date_formats = context.date_formats
        self._site = context.site
        self._dates = find_dates(context.source) if context.convert_values else []
        self.sealed = False
        """Whether the number in progress was written instead of the model's (`seal`)."""

    def fork(self, bias: ValueBias) -> Conversions:
        """These conversions bound to `bias`, a fork of the reading."""
        other = copy.copy(self)
        other._bias = bias
        return other

    def whole_numbers(self) -> list[str]:
        """With `convert_values`, each number given with a scale as the whole number it means
        ("213 million": 213000000), for the copy bias to read too; none with a decimal point."""
        if not self.on:
            return []
        return [w for w in (scaled_number(*given) for given in self.scales.values()) if "." not in w]

    def end_sealed(self, logits: Logits) -> None:
        """At a step of a number written instead of the model's (`seal`): no token adds to it."""
        self.sealed = self.sealed and self._bias.cursor.number
        if not self.sealed:
            return
        piece = self._bias.context.piece
        for token in np.flatnonzero(np.isfinite(logits)).tolist():
            if piece(token)[:1] in _NUMBER:
                logits[token] = -np.inf

    def starts_number(self, piece: str) -> bool:
        """Whether a token starts a number in a tool's input while a number the messages
        give with a scale ("5%", "213 million") is still free, in a scale that the field
        does not take as written; never without `convert_values`."""
        c = self._bias.cursor
        kept = self._kept.get(c.key, frozenset())
        return (
            self.on
            and self._copy
            and self._site.in_call(c)
            and c.at_literal
            and piece[:1] in NUMBER_START
            and (
                any(self._bias.numbers.is_free(at) and e not in kept for at, (_, e) in self.scales.items())
                or any(self._bias.numbers.is_free(q.starts[0]) for q in self._convertible(c.key))
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
            self.on
            and self._copy
            and self._bias.starts_string()
            and self._bias.cursor.key in self._date_formats
            and any(self._bias.text.is_free(d.start) for d in self._dates)
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
        fmt = self._date_formats.get(self._bias.cursor.key)
        if fmt is None or not self.on:
            return None
        string = STRING_VALUE.match('"' + text)
        value = text if string is None else string.group(1)  # no end: cut short by the look-ahead
        written = {day for d in find_dates(value) for day in d.readings}
        part = value.strip()
        spans = self._bias.text
        free = [d for d in self._dates if spans.is_free(d.start)]
        for d in free:
            given = spans.source[d.start : d.end]
            if given in value or written.intersection(d.readings) or (part and part in given):
                return self._write(d, fmt, value)
        if free and any(c.isdigit() for c in value):  # some other date ("2023.01.25"): the next one given
            return self._write(free[0], fmt, value)
        return None

    def _write(self, d: Found, fmt: str, value: str) -> str | None:
        """The date `d` in format `fmt` (as the messages wrote it if `fmt` does not tell its
        order of day and month), taken with its numbers; `None` if `value` is it already."""
        spans = self._bias.text
        read = d.read(day_first(fmt))
        day = spans.source[d.start : d.end] if read is None else read.strftime(fmt)
        if day == value:
            return None  # copied as it is
        spans.take(d.start)
        for number in re.findall(r"\d+", spans.source[d.start : d.end]):  # its day and year too
            self._bias.numbers.use(number)
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
        number = NUMBER_VALUE.match(text) if ended else _DIGITS.fullmatch(text)
        if number is None or not self.on:
            return None
        numbers = self._bias.numbers
        written = number.group()
        found = numbers.free(written) if ended else []  # unended: only a scale's digits
        converted = self._converted(written, found)
        if converted is not None:
            return converted
        kept = self._kept.get(self._bias.cursor.key, ())
        if not found:  # millions not copied as given, but with zeros of the model's own ("850000000")
            found = [
                at
                for at, (given, exponent) in self.scales.items()
                if exponent > 0 and numbers.is_free(at) and same_digits(written, given)
            ]
        given = {self.scales.get(at) for at in found}
        scale = given.pop() if len(given) == 1 else None
        if scale is None or scale[1] in kept:
            return None
        numbers.take(found[0])
        return scaled_number(*scale)

    def seal(self) -> None:
        """End the number in progress where it is: the engine wrote it instead of the
        model's (`scaled`), and the model may end it or the object next, not add digits
        ("0.05", not "0.050")."""
        self.sealed = True

    def _converted(self, written: str, found: Collection[int]) -> str | None:
        """The number to write instead of `written`, a copy of the first number of a free
        quantity of the messages (at one of `found`) in another unit of the kind the field
        asks for, converted to the field's unit ("5ft 10in": "70" in inches); `None` if
        there is none, or if the converted number is the same, is no integer for an
        integer field, or has more than `_PLACES` decimal places. Its numbers are then taken."""
        target = self._units.get(self._bias.cursor.key)
        if target is None:
            return None
        unit, integer = target
        for q in self._convertible(self._bias.cursor.key):
            if q.starts[0] not in found:
                continue
            value = q.value(unit).normalize()
            if value == Decimal(written) or (integer and value != value.to_integral_value()):
                return None
            if -value.as_tuple().exponent > _PLACES:  # type: ignore[operator]
                return None
            for at in q.starts:
                self._bias.numbers.take(at)
            return format(value, "f")
        return None
