"""`convert_values`: the value rules that write a value in a form the user did not write it
in are opt-in; by default the rules only nudge towards the user's own words (pure, no model)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from _steps import rules_for

from aerix._handover import INPUT_PATH, TOOL_PATH
from aerix.engines.llamacpp.rules import ValueBias, value_bias
from aerix.engines.llamacpp.rules.convert import field_unit
from aerix.model import Handover

SOURCE = "A loan at a 5% rate, compounded quarterly, for two years; 213 million people; $2,000,000."
PIECES = ["5", "0.05", "4", "2", "213", "213000000", "2000000", "7"]
NUMBER = b'{"calls":[{"tool":"t","input":{"n":'


def offered(convert_values: bool, source: str = SOURCE) -> dict[str, float]:
    """The copy bias each of `PIECES` gets as the first token of a number value."""
    b = rules_for(source, copy=1.0, close=0.0, piece=PIECES.__getitem__, convert_values=convert_values)
    b.feed(NUMBER)
    return dict(zip(PIECES, b.apply(np.zeros(len(PIECES), dtype=np.float32)).tolist(), strict=True))


def test_by_default_only_the_users_own_numbers_are_spans() -> None:
    spans = offered(convert_values=False)
    # As written: the 5 of "5%", "two", the 213 of "213 million", "$2,000,000" without separators.
    assert spans["5"] == spans["2"] == spans["213"] == spans["2000000"] == 1.0
    # No convention: "quarterly" is no 4, "213 million" no 213000000, "5%" no 0.05.
    assert spans["4"] == spans["213000000"] == spans["0.05"] == 0.0
    assert spans["7"] == 0.0  # not given at all


def test_with_convert_values_the_conventional_readings_are_spans_too() -> None:
    spans = offered(convert_values=True)
    assert spans["4"] == spans["213000000"] == 1.0
    assert spans["5"] == spans["2"] == spans["2000000"] == 1.0
    assert spans["0.05"] == 0.0  # a fraction is written by `scaled`, never offered as a span


@pytest.mark.parametrize(("convert_values", "supported"), [(False, False), (True, True)])
def test_an_optional_field_is_supported_by_quarterly_only_with_convert_values(
    convert_values: bool, supported: bool
) -> None:
    b = rules_for(SOURCE, copy=1.0, close=0.0, piece=str, convert_values=convert_values)
    b.feed(b'{"calls":[{"tool":"t","input":{"rate":5')
    assert b.optional.supports(',"compounds_per_year":4}') is supported
    assert b.optional.supports(',"years":2}')  # "two" either way


def percent(convert_values: bool, source: str = "a loan at a 5% rate") -> ValueBias:
    schema = {"type": "object", "properties": {"rate": {"type": "number"}}, "required": ["rate"]}
    b = value_bias(
        schema,
        Handover(texts=(source,), tool_path=TOOL_PATH, input_path=INPUT_PATH),
        copy=2.5,
        close=0.0,
        piece=PIECES.__getitem__,
        check_optional=False,
        convert_values=convert_values,
    )
    b.feed(b'{"calls":[{"tool":"t","input":{"rate":')
    return b


def test_by_default_a_percentage_is_never_written_as_its_fraction() -> None:
    b = percent(convert_values=False)
    assert not b.convert.starts_number("5")
    assert b.convert.scaled("5,") is None  # the model's 5 stays 5
    assert percent(convert_values=False, source="213 million people").convert.scaled("213,") is None
    assert (
        percent(convert_values=False, source="8.5 million km2").convert.scaled("85" + "0" * 46, ended=False)
        is None
    )


def test_with_convert_values_a_percentage_is_written_as_its_fraction() -> None:
    b = percent(convert_values=True)
    assert b.convert.starts_number("5")
    assert b.convert.scaled("5,") == "0.05"
    assert percent(convert_values=True, source="213 million people").convert.scaled("213,") == "213000000"
    assert (
        percent(convert_values=True, source="8.5 million km2").convert.scaled("85" + "0" * 46, ended=False)
        == "8500000"
    )


@pytest.mark.parametrize(
    ("source", "description", "integer", "text", "converted"),
    [
        ("open until 11 PM", "in 24 hour format", True, "11}", "23"),
        ("capacitance of 100µF", "in farads (F)", False, "100}", "0.0001"),
        ("weight 150lbs and height 5ft 10in", "in inches", True, "5,", "70"),
    ],
)
@pytest.mark.parametrize("convert_values", [False, True])
def test_a_unit_or_clock_conversion_only_with_convert_values(
    source: str, description: str, integer: bool, text: str, converted: str, convert_values: bool
) -> None:
    unit = field_unit("height", description)
    assert unit is not None
    units: dict[str, Any] = {"height": (unit, integer)}
    b = rules_for(source, copy=2.5, close=0.0, piece=str, units=units, convert_values=convert_values)
    b.feed(b'{"calls":[{"tool":"t","input":{"height":')
    assert b.convert.starts_number(text[0]) is convert_values
    assert b.convert.scaled(text) == (converted if convert_values else None)


@pytest.mark.parametrize("convert_values", [False, True])
def test_a_date_is_reformatted_only_with_convert_values(convert_values: bool) -> None:
    b = rules_for(
        "the price on March 11, 2022.",
        copy=2.5,
        close=0.0,
        piece=str,
        date_formats={"date": "%Y-%m-%d"},
        convert_values=convert_values,
    )
    b.feed(b'{"calls":[{"tool":"t","input":{"date":"')
    assert b.convert.starts_date() is convert_values
    assert b.convert.dated('March 11, 2022"}') == ("2022-03-11" if convert_values else None)
