"""Units (`aerix.engines.llamacpp.rules._units`): the unit a field asks for, the quantities a request gives."""

from __future__ import annotations

from decimal import Decimal

import pytest

from aerix.engines.llamacpp.rules.convert import CLOCK, Quantity, field_unit, quantities


@pytest.mark.parametrize(
    ("key", "description", "dimension", "factor"),
    [
        ("height", "Height of the person in inches.", "length", "0.0254"),
        ("inductance", "The inductance (L) in henries (H).", "inductance", "1"),
        ("capacitance", "The capacitance (C) in farads (F).", "capacitance", "1"),
        ("track_length", "Length of the mix track in seconds.", "time", "1"),
        ("timeframe", "The number of days for which releases are required.", "time", "86400"),
        ("weight", "Weight of the person in lbs.", "mass", "453.59237"),
        ("height_cm", "", "length", "0.01"),
        ("durationSeconds", "", "time", "1"),
        ("closing", "The closing hour. This is in 24 hour format.", CLOCK.dimension, "1"),
    ],
)
def test_a_field_asks_for_the_unit_its_description_or_name_names(
    key: str, description: str, dimension: str, factor: str
) -> None:
    unit = field_unit(key, description)
    assert unit is not None
    assert (unit.dimension, unit.factor) == (dimension, Decimal(factor))


@pytest.mark.parametrize(
    ("key", "description"),
    [
        ("height", "The height of the object."),  # no unit named
        ("speed", "The speed in m/s."),  # a compound unit
        ("city", "The city in the state."),
        ("x", "A value in m"),  # a one-letter symbol is no unit a description names
        ("price_in", ""),  # "in" ends the name: a word, not inches
        ("cost", "The price per kg."),  # a price per unit is no quantity of it
    ],
)
def test_a_field_asks_for_no_unit_unless_it_names_one(key: str, description: str) -> None:
    assert field_unit(key, description) is None


def test_quantities_are_found_with_their_units() -> None:
    text = "a capacitance of 100µF and an inductance of 50mH, for 3 minutes"
    found = quantities(text)
    assert [(q.number, q.dimension, q.base) for q in found] == [
        ("100", "capacitance", Decimal("0.000100")),
        ("50", "inductance", Decimal("0.050")),
        ("3", "time", Decimal("180")),
    ]
    assert [q.starts for q in found] == [(text.index("100"),), (text.index("50"),), (text.index("3"),)]


def test_a_quantity_after_a_larger_one_of_its_kind_adds_to_it() -> None:
    (height,) = quantities("height 5ft 10in")
    assert height.starts == (7, 11)
    assert height.number == "5"
    assert height.value(field_unit("h", "in inches")) == 70  # type: ignore[arg-type]
    assert [q.base for q in quantities("1 hour 30 minutes")] == [Decimal(5400)]
    assert len(quantities("10 minutes, 2 hours")) == 2  # a larger one after: two quantities


@pytest.mark.parametrize(
    "text",
    [
        "5 in a row",  # a word, not inches
        "dropped from 100 m",  # a one-letter symbol after a blank: maybe a word
        "at 9.8 m/s^2",  # a compound unit
        "CO2 of 5",
        "version 2",
    ],
)
def test_loose_symbols_and_compound_units_are_no_quantities(text: str) -> None:
    assert quantities(text) == []


def test_a_one_letter_symbol_counts_right_after_the_number() -> None:
    assert [(q.number, q.dimension) for q in quantities("a 5m wall, 3 g of salt, 2s")] == [
        ("5", "length"),
        ("2", "time"),
    ]


def test_hours_of_the_day_are_quantities_on_the_24_hour_clock() -> None:
    found = quantities("open from 7:00 a.m. until 11 PM, or 12 am, or noon at 12pm")
    assert [(q.number, q.base) for q in found] == [
        ("7", Decimal(7)),
        ("11", Decimal(23)),
        ("12", Decimal(0)),
        ("12", Decimal(12)),
    ]
    assert all(q.dimension == CLOCK.dimension for q in found)
    assert quantities("11.5 pm") == []  # no hour


def test_a_quantity_converts_within_its_kind() -> None:
    q = Quantity((0,), "2", "time", Decimal(7200))
    minutes = field_unit("t", "in minutes")
    assert minutes is not None
    assert q.value(minutes) == 120
