"""Dates in the format a field asks for: reading one from a field's description, finding
the dates a request gives in words or digits, and writing a date in that format.

A tool whose `date` field says "Format: yyyy-mm-dd" gets "March 11, 2022" from
a user; a small model copies it as written. These pure functions let the
engine write `2022-03-11` instead (`Found.date.strftime(date_format(...))`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date

__all__ = ["Found", "date_format", "find_dates"]

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
    """A date the messages give: where its text starts and ends, and the date."""

    start: int
    end: int
    date: date


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


def find_dates(text: str) -> list[Found]:
    """The whole dates (day, month and year) that `text` gives, in words or digits, in order.

    All-digit dates with the year last are read month first (03-11-2022 is
    March 11) unless the first number cannot be a month (16/08/2022). A day
    and month in words with no year take the year of the last whole date
    before them ("from 2023 April 4th to April 8th").
    """
    found: dict[int, Found] = {}
    for pattern in _DATES:
        for m in pattern.finditer(text):
            if any(f.start <= m.start() < f.end for f in found.values()):
                continue
            parts = m.groupdict()
            if parts.get("first"):
                first, second = int(parts["first"]), int(parts["second"])
                month, day = (second, first) if first > 12 else (first, second)
            else:
                raw = parts["month"]
                month = int(raw) if raw.isdigit() else _MONTHS[raw.lower().rstrip(".")]
                day = int(parts["day"])
            try:
                found[m.start()] = Found(m.start(), m.end(), date(int(parts["year"]), month, day))
            except ValueError:
                continue  # not a date: February 30
    whole = sorted(found.values(), key=lambda f: f.start)
    for pattern in _NO_YEAR:
        for m in pattern.finditer(text):
            before = [f for f in whole if f.end <= m.start()]
            if not before or any(f.start <= m.start() < f.end for f in found.values()):
                continue
            month = _MONTHS[m.group("month").lower().rstrip(".")]
            try:
                found[m.start()] = Found(
                    m.start(), m.end(), date(before[-1].date.year, month, int(m.group("day")))
                )
            except ValueError:
                continue
    return [found[k] for k in sorted(found)]
