"""Dates in a field's format (`aerix.engines.llamacpp.rules._dates`, and `dated` of the
value rules, which writes them): pure, no model needed."""

from __future__ import annotations

from datetime import date

import pytest
from _steps import rules_for

from aerix._handover import INPUT_PATH, TOOL_PATH
from aerix.engines.llamacpp.rules import ValueBias, value_bias
from aerix.engines.llamacpp.rules.convert import Found, date_format, day_first, find_dates
from aerix.model import Handover


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
        ("born 16.08.1980", [("16.08.1980", date(1980, 8, 16))]),  # 16 is no month
        ("born 08/16/1980", [("08/16/1980", date(1980, 8, 16))]),  # nor here
        ("on 04/04/2025", [("04/04/2025", date(2025, 4, 4))]),  # either way the same day
        ("on 2025-03-04", [("2025-03-04", date(2025, 3, 4))]),  # ISO: year, month, day
        ("on 3 April 2025", [("3 April 2025", date(2025, 4, 3))]),
        ("on 13/13/2025", []),  # no reading is a date
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
    assert [(text[f.start : f.end], f.readings) for f in find_dates(text)] == [(t, (d,)) for t, d in found]


@pytest.mark.parametrize(
    ("text", "month_first", "day_first_"),
    [
        ("born 01-02-1980", date(1980, 1, 2), date(1980, 2, 1)),
        ("on 03/04/2025", date(2025, 3, 4), date(2025, 4, 3)),
        ("on 12.11.2024", date(2024, 12, 11), date(2024, 11, 12)),
    ],
)
def test_a_date_whose_day_and_month_could_be_either_has_both_readings(
    text: str, month_first: date, day_first_: date
) -> None:
    [found] = find_dates(text)
    assert found.readings == (month_first, day_first_)
    assert found.read(day_first=False) == month_first
    assert found.read(day_first=True) == day_first_
    assert found.read(day_first=None) is None  # the order is not known: no reading
    assert found.year == month_first.year


def test_a_date_with_one_reading_reads_it_in_any_order() -> None:
    found = Found(0, 10, (date(2025, 3, 25),))
    assert [found.read(o) for o in (True, False, None)] == [date(2025, 3, 25)] * 3


@pytest.mark.parametrize(
    ("fmt", "first"),
    [
        ("%d/%m/%Y", True),
        ("%d.%m.%y", True),
        ("%m-%d-%Y", False),
        ("%m/%d/%y", False),
        ("%Y-%m-%d", None),  # the year first: says nothing of "03/04/2025"
        ("%Y/%d/%m", None),
        ("%m-%Y", None),  # no day
        ("%d-%m", None),  # no year
        ("", None),
    ],
)
def test_a_formats_order_of_day_and_month_is_known_only_with_the_year_last(
    fmt: str, first: bool | None
) -> None:
    assert day_first(fmt) is first


# -- a date written in its field's format means what the user said -------------------


def date_bias(description: str, source: str, convert_values: bool) -> ValueBias:
    """The value rules in a string field of `description`, the user's message being `source`,
    at the start of that field's value."""
    schema = {
        "type": "object",
        "properties": {"day": {"type": "string", "description": description}},
        "required": ["day"],
    }
    bias = value_bias(
        schema,
        Handover(texts=(source,), tool_path=TOOL_PATH, input_path=INPUT_PATH),
        copy=2.5,
        close=0.0,
        piece=lambda _: "",
        check_optional=False,
        convert_values=convert_values,
    )
    bias.feed(b'{"calls":[{"tool":"t","input":{"day":"')
    return bias


def dated(description: str, source: str, value: str) -> str | None:
    """What the value rules (with `convert_values`) write in a string field of `description`
    whose value the model starts with `value` (then a closing quote), the user's message
    being `source`."""
    bias = date_bias(description, source, convert_values=True)
    assert bias.convert.starts_date()
    return bias.convert.dated(value + '"}')


DAY_FIRST = "The date in dd/mm/yyyy format."
MONTH_FIRST = "The date, MM-DD-YYYY."
ISO = "The date. Format: yyyy-mm-dd."


@pytest.mark.parametrize(
    ("description", "source", "value", "written"),
    [
        # both numbers could be the month: the field's format gives the order
        (DAY_FIRST, "Book it for 03/04/2025.", "03/04/2025", None),  # copied: kept
        (DAY_FIRST, "Book it for 03/04/2025.", "04/03/2025", "03/04/2025"),
        (DAY_FIRST, "Book it for 03/04/2025.", "2025-04-03", "03/04/2025"),
        (DAY_FIRST, "Book it for 03/04/2025.", "2025-03-04", "03/04/2025"),
        (DAY_FIRST, "Book it for 03-04-2025.", "03-04-2025", "03/04/2025"),  # the field's separator
        ("Use format 'dd.mm.yy'.", "Book it for 03/04/2025.", "03/04/2025", "03.04.25"),
        (MONTH_FIRST, "Book it for 03/04/2025.", "03/04/2025", "03-04-2025"),
        (MONTH_FIRST, "Book it for 03/04/2025.", "04-03-2025", "03-04-2025"),
        ("The date (month-day-year).", "Book it for 03/04/2025.", "04-03-2025", "03-04-2025"),
        # a format that does not tell the order: the date as the user wrote it
        (ISO, "Book it for 03/04/2025.", "03/04/2025", None),
        (ISO, "Book it for 03/04/2025.", "2025-03-04", "03/04/2025"),
        (ISO, "Book it for 03/04/2025.", "2025-04-03", "03/04/2025"),
        ("A date, e.g. 2022-04-28.", "Book it for 11.12.2025.", "2025-12-11", "11.12.2025"),
        # one reading only: read the only way it can be, in any field
        (DAY_FIRST, "Book it for 25/03/2025.", "25/03/2025", None),
        (DAY_FIRST, "Book it for 03/25/2025.", "03/25/2025", "25/03/2025"),
        (MONTH_FIRST, "Book it for 25/03/2025.", "25/03/2025", "03-25-2025"),
        (ISO, "Book it for 25/03/2025.", "25/03/2025", "2025-03-25"),
        (ISO, "Book it for 03/25/2025.", "03/25/2025", "2025-03-25"),
        (DAY_FIRST, "Book it for 04/04/2025.", "2025-04-04", "04/04/2025"),  # the same day either way
        # ISO dates and dates in words are never ambiguous
        (DAY_FIRST, "Book it for 2025-03-04.", "2025-03-04", "04/03/2025"),
        (MONTH_FIRST, "Book it for 2025-03-04.", "2025-03-04", "03-04-2025"),
        (ISO, "Book it for 2025-03-04.", "2025-03-04", None),
        (DAY_FIRST, "Book it for 3 April 2025.", "3 April 2025", "03/04/2025"),
        (DAY_FIRST, "Book it for April 3rd, 2025.", "April 3rd, 2025", "03/04/2025"),
        (MONTH_FIRST, "Book it for 3 April 2025.", "3 April 2025", "04-03-2025"),
        (ISO, "Book it for the 4th of March 2025.", "4th of March 2025", "2025-03-04"),
        (DAY_FIRST, "Book it for March 4, 2025.", "04/03/2025", None),  # the model wrote it already
    ],
)
def test_a_date_is_written_in_its_fields_format_and_keeps_its_meaning(
    description: str, source: str, value: str, written: str | None
) -> None:
    assert dated(description, source, value) == written


@pytest.mark.parametrize("fmt", ["%d/%m/%Y", "%m/%d/%Y", "%d.%m.%Y", "%m-%d-%Y", "%Y-%m-%d"])
@pytest.mark.parametrize("user", ["03/04/2025", "11-12-2024", "25/03/2025", "03/25/2025", "2025-03-04"])
def test_no_date_is_reinterpreted(fmt: str, user: str) -> None:
    """Whatever date the model starts, the one written is the user's own date in the
    field's format, or the user's own text where that format cannot say which it is."""
    [given] = find_dates(user)
    meant = given.read(day_first(fmt))
    for value in ["2025", user, *(d.strftime(fmt) for d in given.readings), "2021-01-01"]:
        bias = rules_for(
            f"on {user} please",
            copy=1.0,
            close=0.0,
            piece=str,
            date_formats={"day": fmt},
            convert_values=True,
        )
        bias.feed(b'{"calls":[{"tool":"t","input":{"day":"')
        written = bias.convert.dated(value + '"') or value  # None: the model's value stays
        if meant is None:
            assert written == user, (value, written)
        else:
            [back] = find_dates(written)
            assert back.read(day_first(fmt)) == meant, (value, written)


@pytest.mark.parametrize("description", [DAY_FIRST, MONTH_FIRST, ISO])
@pytest.mark.parametrize("value", ["03/04/2025", "04/03/2025", "2025-04-03", "2025"])
def test_without_convert_values_no_date_is_rewritten(description: str, value: str) -> None:
    """By default the date rule writes nothing: the model's own value stays, whatever it is."""
    bias = date_bias(description, "Book it for 03/04/2025.", convert_values=False)
    assert not bias.convert.starts_date()
    assert bias.convert.dated(value + '"}') is None
