"""Reading the user's messages (`aerix.engines.llamacpp.rules._spans`): pure, no model needed."""

from __future__ import annotations

import re

import pytest

from aerix.engines.llamacpp.rules._schema import in_series
from aerix.engines.llamacpp.rules._spans import (
    Spans,
    is_function_word,
    mention,
    near,
    number_text,
    said,
    spelled,
)
from aerix.engines.llamacpp.rules.convert import kept_scales, takes_percent
from aerix.engines.llamacpp.rules.heuristics.cut_short import cut_short, name_runs

SOURCE = "What is the weather in San Francisco for 5 days? Budget $5000, units: km."


@pytest.mark.parametrize(
    ("value", "whole", "expected"),
    [
        ("San", False, True),
        ("San", True, True),
        ("San Fran", False, True),
        ("San Fran", True, False),  # ends inside a word
        ("an", False, False),  # starts inside a word
        ("5", True, True),
        ("500", False, True),
        ("500", True, False),  # inside the number 5000
        ("5000", True, True),
        ("km", True, True),
        ("Boston", False, False),
        ("", False, False),
        (" San", False, False),  # a value does not start or end with a blank
        ("San ", True, False),
    ],
)
def test_spans_start_and_end_at_word_boundaries(value: str, whole: bool, expected: bool) -> None:
    assert Spans(SOURCE).match(value, whole) is expected


def test_a_number_next_to_a_unit_is_a_whole_span() -> None:
    assert Spans("a 5km run").match("5", whole=True)


def test_a_number_right_after_letters_is_no_span() -> None:
    spans = Spans("CO2 of case XYZ123, a 12x18 print")
    assert not spans.match("2", whole=True)  # of CO2
    assert not spans.match("123", whole=True)  # of XYZ123
    assert spans.match("XYZ123", whole=True) and spans.match("CO2", whole=True)
    assert spans.match("12", whole=True) and spans.match("12x18", whole=True)
    assert not spans.match("18", whole=True)  # of 12x18


def test_a_decimal_point_is_not_a_word_boundary() -> None:
    spans = Spans("a rate of 0.015, then 9.8 m/s^2 for 5. Done.")
    assert spans.match("0.015", whole=True) and spans.match("9.8", whole=True)
    assert not spans.match("0", whole=True)  # the start of 0.015, not the number 0
    assert not spans.match("015", whole=False) and not spans.match("8", whole=False)
    assert spans.match("5", whole=True)  # a full stop after a number ends it
    assert not spans.match("2", whole=True)  # an exponent: s^2
    assert spans.match("Done", whole=True)


@pytest.mark.parametrize(
    ("key", "source", "expected"),
    [
        ("include_precipitation", "the next 72 hours including the precipitation?", 1),
        ("avoid_tolls", "the fastest route with toll roads avoided", 1),  # a stem: "toll"
        ("withVerdict", "the lawsuit in Los Angeles court with verdict", 1),  # camelCase
        ("full_text", "Find case 123456 in Texas. Don't return full text", -1),
        ("full_text", "no doubt, return the full text", 1),  # a negation more than three words back
        ("extra_info", "Give me a brief on movie 'Interstellar'", 0),
        ("include_with", "include it, with everything", 0),  # only words about what, not how
        ("is_ok", "it is ok", 0),  # words under three letters
    ],
)
def test_a_flag_is_mentioned_when_a_word_of_its_name_is(key: str, source: str, expected: int) -> None:
    assert mention(key, source) == expected


@pytest.mark.parametrize(
    ("value", "source", "expected"),
    [
        ("detailed", "the punishments for theft in California in detail.", True),  # by its stem
        ("historical records", "the earliest reference from historical record?", True),
        ("Pediatrics", "a hospital with a pediatrics department", True),
        ("New York", "in new york city", True),
        ("km", "50 kilometers in 2 hours", False),  # a short word must be there whole
        ("cm", "a radius of 4 inches", False),
        ("Homo sapiens", "the mutation type of rs6034464", False),
        ("24h", "in 24 hour format", False),
        ("", "anything", False),
    ],
)
def test_a_value_is_said_when_each_of_its_words_is(value: str, source: str, expected: bool) -> None:
    assert said(value, source) is expected


@pytest.mark.parametrize(
    ("key", "description", "expected"),
    [
        ("annual_rate", "The interest rate for a year as a percentage.", True),
        ("discount_pct", "", True),
        ("discountPercent", "", True),
        ("tax", "The tax rate, in per cent.", True),
        ("rate", "The annual interest rate. Enter as a decimal. E.g, 5% is 0.05", False),
        ("rate", "The rate as a fraction, not a percentage.", False),
        ("annual_interest_rate", "The annual interest rate.", False),
        ("rate", "", False),
    ],
)
def test_a_field_takes_a_percentage_when_its_name_or_description_says_so(
    key: str, description: str, expected: bool
) -> None:
    assert takes_percent(key, description) is expected


@pytest.mark.parametrize(
    ("key", "description", "expected"),
    [
        ("rate", "The rate as a percentage.", {-2}),
        ("revenue", "The revenue in millions of dollars.", {6}),
        ("population_thousands", "", {3}),
        ("cap", "Market cap, in billions or trillions.", {9, 12}),
        ("rate", "Enter as a decimal.", set()),
        ("population", "The population.", set()),
    ],
)
def test_a_field_keeps_the_scales_its_name_or_description_names(
    key: str, description: str, expected: set[int]
) -> None:
    assert kept_scales(key, description) == expected


def words_near(source: str, key: str, others: tuple[str, ...]) -> tuple[list[str], list[str]]:
    mine, theirs = near(source, key, others)
    word = re.compile(r"\w+")
    return [word.match(source, at).group() for at in sorted(mine)], [  # type: ignore[union-attr]
        word.match(source, at).group()
        for at in sorted(theirs)  # type: ignore[union-attr]
    ]


def test_a_number_is_near_the_field_it_is_named_for() -> None:
    source = "a person with a weight of 70 kg and a height of 175 cm."
    assert words_near(source, "weight", ("height",)) == (["a", "of", "70", "kg"], ["a", "of", "175", "cm"])
    assert words_near(source, "height", ("weight",)) == (["a", "of", "175", "cm"], ["a", "of", "70", "kg"])


@pytest.mark.parametrize(
    ("source", "key", "others", "mine", "theirs"),
    [
        (
            "a 7 days trip with daily budgets up to $100",
            "days",
            ("daily_budget",),
            ["7", "trip"],
            ["with", "daily", "budgets", "up", "to", "100"],
        ),
        ("heated to 100 C", "final_temperature", (), [], []),  # not named
        ("the area is 5, the depth 3", "area", ("depth",), ["the", "is", "5"], ["the", "3"]),  # one clause
        ("rate is 5 and years 3", "rate", ("years",), ["is", "5"], ["3"]),  # "and" ends a clause
        (
            "start city 1 and end city 2",
            "start_city",
            ("end_city",),
            ["city", "1"],
            ["city", "2"],
        ),  # not "city"
        ("the name and type", "hotel_name", ("room_type",), [], []),  # generic words name nothing
    ],
)
def test_nearness_needs_a_word_of_the_key_in_the_same_clause(
    source: str, key: str, others: tuple[str, ...], mine: list[str], theirs: list[str]
) -> None:
    assert words_near(source, key, others) == (mine, theirs)


def test_a_repeated_value_may_be_copied_as_often_as_the_request_repeats_it() -> None:
    spans = Spans("from 4 to 4")
    spans.use("4")
    assert spans.match("4", whole=True)
    spans.use("4")
    assert not spans.match("4", whole=True)


def test_a_value_takes_the_whole_text_it_copied() -> None:
    spans = Spans("flights on 2022-04-27 afternoon, 04-27")
    assert spans.use("2022-04-27") == 11
    assert not spans.match("04-27", whole=True) or spans.where("04-27", True) == [33]
    assert spans.where("04-27", True) == [33]  # not the part of the date taken
    assert spans.use("Paris") == -1


def test_the_number_under_a_fraction_is_no_span_of_its_own() -> None:
    spans = Spans("rated above 4/5, on 08/16/2022, 24/7")
    assert spans.match("4", whole=True)
    assert not spans.match("5", whole=True)
    assert spans.match("16", whole=True)  # a date is no fraction
    assert not spans.match("7", whole=True)


def test_numbers_written_as_words_are_found_where_number_text_puts_them() -> None:
    source = "two sides of 1,000 and three more"
    numbers = number_text(source)
    assert numbers == "2 sides of 1000 and 3 more"
    assert spelled(source) == {0, numbers.index("3")}
    assert number_text("compounded quarterly, paid monthly, twice") == "compounded 4, paid 12, 2"


@pytest.mark.parametrize(
    ("source", "names"),
    [
        ("When did the Treaty of Tordesillas take place?", ["Treaty of Tordesillas"]),
        ("Find the Louvre Museum in Paris.", ["Louvre Museum"]),
        ("Book at the Hilton Hotel in New York City.", ["Hilton Hotel", "New York City"]),
        ("Calculate the Body Mass Index.", ["Body Mass Index"]),  # "Calculate" starts the sentence
        ("Find Italian food.", []),  # the sentence's first word is no part of a name
        (
            "The game 'The Legend of Zelda: Breath of the Wild'.",
            ["The Legend of Zelda", "Breath of the Wild"],
        ),
        ("A vintage Super Mario Bros. game", ["Super Mario Bros."]),
        ("a paper by Albert Einstein's team", ["Albert Einstein"]),
        ("the King of France. Paris", ["King of France"]),
        # words split by a line break or a tab, at a sentence's start (a retry's text starts so)
        ("Turn cut.\nRetry Now\tPlease Hold", ["Now\tPlease Hold"]),
        ("Hello\nWorld", []),
    ],
)
def test_names_of_capitalised_words_are_found(source: str, names: list[str]) -> None:
    assert [source[a:b] for a, b in name_runs(source)] == names


@pytest.mark.parametrize(
    ("source", "value", "short"),
    [
        ("the Louvre Museum in Paris", "Louvre", True),  # inside a name
        ("the Louvre Museum in Paris", "Louvre Museum", False),
        ("the Treaty of Tordesillas", "Treaty", True),
        ("proteins in the plasma membrane?", "plasma", True),  # before another word
        ("proteins in the plasma membrane?", "plasma membrane", False),  # the end of the text
        ("a king size bed in Paris", "Paris", False),
        ("a room in New York for two", "New", True),
        ("from New York time zone", "New York", False),  # a whole name: "time zone" is no more of it
        ("rock concerts in Boston", "Boston", False),
        ("the 19th century", "19th", True),
    ],
)
def test_a_span_is_cut_short_inside_a_name_or_before_another_word(
    source: str, value: str, short: bool
) -> None:
    start = source.index(value)
    assert cut_short(source, name_runs(source), start, start + len(value)) is short


@pytest.mark.parametrize(
    ("key", "others", "series"),
    [
        ("mass1", {"mass1", "mass2", "temperature1"}, True),
        ("initial_temperature", {"initial_temperature", "final_temperature", "mass"}, True),
        ("from_timezone", {"from_timezone", "to_timezone"}, True),
        ("x", {"x", "y", "z"}, True),
        ("numberOne", {"numberOne", "numberTwo"}, False),  # no order words
        ("trials", {"trials", "successes"}, False),
        ("number", {"number", "dice_number"}, False),
        ("mass1", {"mass1", "volume"}, False),  # alone in its series
    ],
)
def test_fields_of_a_series_differ_only_by_a_number_or_an_order_word(
    key: str, others: set[str], series: bool
) -> None:
    assert in_series(key, others) is series


def test_function_words_end_phrases() -> None:
    assert is_function_word(" The ")
    assert not is_function_word("theory")
