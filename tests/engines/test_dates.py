"""Dates in a field's format (`aerix.engines.llamacpp.rules._dates`): pure, no model needed."""

from __future__ import annotations

from datetime import date

import pytest

from aerix.engines.llamacpp.rules._dates import date_format, find_dates


@pytest.mark.parametrize(
    ("description", "fmt"),
    [
        ("Date of when to get the stock price. Format: yyyy-mm-dd.", "%Y-%m-%d"),
        ("The birth date. Must be in MM-DD-YYYY format.", "%m-%d-%Y"),
        ("In the format of MM-DD-YYY.", "%m-%d-%Y"),  # a typo for YYYY
        ("Check-in date. Format - DD/MM/YY.", "%d/%m/%y"),
        ("Use format 'dd.mm.yyyy'.", "%d.%m.%Y"),
        ("The date (month-day-year) you want.", "%m-%d-%Y"),
        ("Accepts a standard date, e.g., 2022-04-28.", "%Y-%m-%d"),
        ("Date in mm-yyyy format.", None),  # a month, not a day
        ("mm-mm-dd", None),
        ("The start date of the booking.", None),
        ("", None),
    ],
)
def test_a_date_format_is_read_from_a_description(description: str, fmt: str | None) -> None:
    assert date_format(description) == fmt


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("closing March.11, 2022.", [("March.11, 2022", date(2022, 3, 11))]),
        ("on March 17, 1915?", [("March 17, 1915", date(1915, 3, 17))]),
        ("from 1st June 2022", [("1st June 2022", date(2022, 6, 1))]),
        ("from 15th October,2023.", [("15th October,2023", date(2023, 10, 15))]),
        ("the 4th of July 1776", [("4th of July 1776", date(1776, 7, 4))]),
        (
            "from 2023 April 4th to April 8th",
            [("2023 April 4th", date(2023, 4, 4)), ("April 8th", date(2023, 4, 8))],
        ),
        ("from April 4th to May 8, 2023", [("May 8, 2023", date(2023, 5, 8))]),  # no year before it: no date
        (
            "on March 1, 2020 and the 2nd of March",
            [("March 1, 2020", date(2020, 3, 1)), ("2nd of March", date(2020, 3, 2))],
        ),
        ("in May 5 times", []),
        ("London 2022/08/16?", [("2022/08/16", date(2022, 8, 16))]),
        ("born 01-02-1980", [("01-02-1980", date(1980, 1, 2))]),  # month first
        ("born 16.08.1980", [("16.08.1980", date(1980, 8, 16))]),  # 16 is no month
        (
            "Sept 9, 2021 and Dec. 25, 2021",
            [("Sept 9, 2021", date(2021, 9, 9)), ("Dec. 25, 2021", date(2021, 12, 25))],
        ),
        ("Feb 30, 2020", []),  # no such day
        ("in May 2022 I may go 5 times", []),
        ("a 2022-13-01 typo", []),
        ("2022.03.11T11:00:00Z", [("2022.03.11", date(2022, 3, 11))]),  # a timestamp's date
        ("12345-01-01 or 2022-01-011", []),
    ],
)
def test_whole_dates_are_found_in_words_and_digits(text: str, found: list[tuple[str, date]]) -> None:
    assert [(text[f.start : f.end], f.date) for f in find_dates(text)] == found
