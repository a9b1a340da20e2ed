"""Dates in the format a field asks for: reading one from a field's description, finding
the dates a request gives in words or digits, and writing a date in that format.

A tool whose `date` field says "Format: yyyy-mm-dd" gets "March 11, 2022" from
a user; a small model copies it as written. These pure functions let the
engine write `2022-03-11` instead (`Found.read(...).strftime(date_format(...))`).

No date is ever read in an order the messages do not give: an all-digit date
whose first two numbers could each be the day or the month ("03/04/2025") has
two readings, and only a field's own format picks one (`day_first`): day first
for `dd/mm/yyyy`, month first for `mm-dd-yyyy`; a format that does not tell
(`yyyy-mm-dd`) picks none, and the date is kept as the user wrote it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date

__all__ = ["Found", "date_format", "day_first", "find_dates"]

_MONTHS = {
    name: n
    for n, names in enumerate(
        [
            ("january", "jan"),
            ("february", "feb"),
            ("march", "mar"),
            ("april", "apr"),
            ("may",),
            ("june", "jun"),
            ("july", "jul"),
            ("august", "aug"),
            ("september", "sept", "sep"),
            ("october", "oct"),
            ("november", "nov"),
            ("december", "dec"),
        ],
        start=1,
    )
    for name in names
}
_MONTH = r"(?P<month>" + "|".join(sorted(_MONTHS, key=len, reverse=True)) + r")\b\.?"
_DAY = r"(?P<day>\d{1,2})(?:st|nd|rd|th)?(?!\d)"
_YEAR = r"(?P<year>\d{4})(?!\d)"
_DATES = [
    re.compile(rf"\b{_MONTH}\s*{_DAY},?\s*{_YEAR}", re.IGNORECASE),  # March 11, 2022; March.11, 2022
    re.compile(rf"\b{_DAY}\s+(?:of\s+)?{_MONTH},?\s*{_YEAR}", re.IGNORECASE),  # 1st June 2022
    re.compile(rf"\b{_YEAR}\s+{_MONTH}\s+{_DAY}", re.IGNORECASE),  # 2023 April 4th
    re.compile(
        r"\b(?P<year>\d{4})([-/.])(?P<month>\d{1,2})\2(?P<day>\d{1,2})(?!\d)"
    ),  # 2022-03-11, 2022/08/16
    re.compile(r"\b(?P<first>\d{1,2})([-/.])(?P<second>\d{1,2})\2(?P<year>\d{4})(?!\d)"),  # 03-11-2022
]
_NO_YEAR = [
    re.compile(rf"\b{_MONTH}\s*{_DAY}(?![,\s]*\d)", re.IGNORECASE),  # April 8th
    re.compile(rf"\b{_DAY}\s+(?:of\s+)?{_MONTH}(?![,\s]*\d)", re.IGNORECASE),  # 8th of April
]
"""A day and month with no year: the year of the whole date before it."""
_PART = r"(?:y{2,4}|mm|dd)"
_FORMAT = re.compile(rf"\b({_PART})([-/.])({_PART})(?:\2({_PART}))?\b", re.IGNORECASE)
"""A date format spelled out: yyyy-mm-dd, MM/DD/YYYY, dd.mm.yy, mm-yyyy."""
_WORDS_FORMAT = re.compile(r"\b(year|month|day)-(year|month|day)-(year|month|day)\b", re.IGNORECASE)
"""A date format in words: (month-day-year)."""
_EXAMPLE = re.compile(r"\b\d{4}-\d{2}-\d{2}\b")
"""An ISO date given as an example: "e.g., 2022-04-28"."""
_CODES = {
    "yyyy": "%Y",
    "yyy": "%Y",
    "yy": "%y",
    "mm": "%m",
    "dd": "%d",
    "year": "%Y",
    "month": "%m",
    "day": "%d",
}


@dataclass(frozen=True, slots=True)
class Found:
    """A date the messages give: where its text starts and ends, and how it reads."""

    start: int
    end: int
    readings: tuple[date, ...]
    """The date: its one reading, or two for an all-digit date whose first two numbers
    could each be the day or the month ("03/04/2025": 4 March month first, then
    3 April day first)."""

    @property
    def year(self) -> int:
        """The date's year, the same in every reading."""
        return self.readings[0].year

    def read(self, day_first: bool | None) -> date | None:
        """The date in the order `day_first` gives when it has two readings (the day first:
        `True`, the month first: `False`), its only reading when it has one; `None`
        when it has two and the order is not known (`day_first` is `None`)."""
        if len(self.readings) == 1:
            return self.readings[0]
        return None if day_first is None else self.readings[1 if day_first else 0]


def date_format(description: str) -> str | None:
    """The `strftime` format that a field's description asks dates in, if it names one:
    "Format: yyyy-mm-dd" → `%Y-%m-%d`, "(month-day-year)" → `%m-%d-%Y`, an example
    "e.g., 2022-04-28" → `%Y-%m-%d`; else `None`. A format with no day (`mm-yyyy`) is
    not one: the dates found all have a day, and such a field takes a month."""
    if m := _FORMAT.search(description):
        parts = [p.lower() for p in (m.group(1), m.group(3), m.group(4)) if p]
        if len(parts) == 3 and sorted(p[0] for p in parts) == ["d", "m", "y"]:
            return m.group(2).join(_CODES[p] for p in parts)
        return None
    if m := _WORDS_FORMAT.search(description):
        parts = [m.group(i).lower() for i in (1, 2, 3)]
        return "-".join(_CODES[p] for p in parts) if len(set(parts)) == 3 else None
    return "%Y-%m-%d" if _EXAMPLE.search(description) else None


def day_first(fmt: str) -> bool | None:
    """Whether `strftime` format `fmt` writes the day before the month with the year last:
    `True` for `%d/%m/%Y`, `False` for `%m-%d-%Y`; `None` when it does not tell in
    which order a user's day and month come (`%Y-%m-%d`: the year first)."""
    at = {code: fmt.find(code) for code in ("%d", "%m")}
    year = max(fmt.find("%Y"), fmt.find("%y"))
    if min(at.values()) < 0 or year < max(at.values()):
        return None
    return at["%d"] < at["%m"]


def find_dates(text: str) -> list[Found]:
    """The whole dates (day, month and year) that `text` gives, in words or digits, in order.

    An all-digit date with the year first is read year, month, day (2022-03-11).
    One with the year last is read the only way it can be when one of its first
    two numbers cannot be a month (16/08/2022, 08/16/2022), or when both readings
    are the same day (04/04/2022); else it has both readings, month first then
    day first (03/11/2022: 11 March or 3 November), and is read in neither until
    a field's format tells the order (`Found.read`). A day and month in words
    with no year take the year of the last whole date before them ("from 2023
    April 4th to April 8th").
    """
    found: dict[int, Found] = {}
    for pattern in _DATES:
        for m in pattern.finditer(text):
            if any(f.start <= m.start() < f.end for f in found.values()):
                continue
            parts = m.groupdict()
            year = int(parts["year"])
            if parts.get("first"):
                first, second = int(parts["first"]), int(parts["second"])
                orders = [(first, second), (second, first)]  # (month, day): month first, then day first
            else:
                raw = parts["month"]
                orders = [
                    (int(raw) if raw.isdigit() else _MONTHS[raw.lower().rstrip(".")], int(parts["day"]))
                ]
            readings: list[date] = []
            for month, day in orders:
                try:
                    reading = date(year, month, day)
                except ValueError:
                    continue  # not a date: February 30, a 13th month
                if reading not in readings:
                    readings.append(reading)
            if readings:
                found[m.start()] = Found(m.start(), m.end(), tuple(readings))
    whole = sorted(found.values(), key=lambda f: f.start)
    for pattern in _NO_YEAR:
        for m in pattern.finditer(text):
            before = [f for f in whole if f.end <= m.start()]
            if not before or any(f.start <= m.start() < f.end for f in found.values()):
                continue
            month = _MONTHS[m.group("month").lower().rstrip(".")]
            try:
                reading = date(before[-1].year, month, int(m.group("day")))
            except ValueError:
                continue
            found[m.start()] = Found(m.start(), m.end(), (reading,))
    return [found[k] for k in sorted(found)]
