"""The value biases (`aerix.engines.llamacpp.rules._bias`): pure, no model needed."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from _steps import rules_for

from aerix.engines.llamacpp.rules._bias import ValueBias
from aerix.engines.llamacpp.rules._schema import enum_keys
from aerix.engines.llamacpp.rules.convert import field_unit
from aerix.engines.llamacpp.rules.heuristics.quotes import quoted, quoted_values

SOURCE = "What is the weather in San Francisco for 5 days? Budget $5000, units: km."


PIECES = ['{"city":"', "San", "Bos", " Francisco", " Fr", '"}', "ton", "1", "5", "}", "0"]


def bias(text: str, copy: float = 4.0, close: float = 0.0) -> ValueBias:
    b = rules_for(SOURCE, copy=copy, close=close, piece=PIECES.__getitem__)
    b.feed(text.encode())
    return b


def nudged(b: ValueBias, allowed: list[int] | None = None) -> set[int]:
    logits = np.zeros(len(PIECES), dtype=np.float32)
    if allowed is not None:
        logits[[i for i in range(len(PIECES)) if i not in allowed]] = -np.inf
    out = b.apply(logits)
    return {i for i in range(len(PIECES)) if out[i] > 0}


def test_the_bias_nudges_tokens_that_copy_a_span_of_the_request() -> None:
    assert nudged(bias('{"city":"')) == {PIECES.index("San"), PIECES.index("5")}
    assert nudged(bias('{"city":"San')) == {
        PIECES.index(" Francisco"),
        PIECES.index(" Fr"),
        PIECES.index('"}'),
    }
    assert nudged(bias('{"city":"San Fr')) == set()  # "San Frton"… and no close inside a word
    assert nudged(bias('{"days":')) == {PIECES.index("5")}
    assert nudged(bias('{"days":5')) == {PIECES.index("}"), PIECES.index("0")}  # 5 or 50(00)


def test_the_bias_leaves_keys_and_forbidden_tokens_alone() -> None:
    assert nudged(bias('{"')) == set()
    assert nudged(bias('{"city":"'), allowed=[PIECES.index("Bos")]) == set()


def test_the_bias_adds_its_strength_once() -> None:
    b = bias('{"city":"', copy=2.5)
    out = b.apply(np.zeros(len(PIECES), dtype=np.float32))
    assert out[PIECES.index("San")] == pytest.approx(2.5)
    assert b.active


def test_the_bias_follows_split_utf8_characters() -> None:
    b = rules_for("Zürich", copy=1.0, close=0.0, piece=["Z", "ü", "rich", '"'].__getitem__)
    b.feed(b'{"c":"Z\xc3')
    b.feed(b"\xbc")
    out = b.apply(np.zeros(4, dtype=np.float32))
    assert out.tolist() == [-1.0, -1.0, 1.0, -1.0]  # on to "Zürich"; leaving the span costs


def test_the_close_bias_nudges_closing_tokens_after_a_value() -> None:
    pieces = ["}", ',"', "}}", "5}", "0", '"']
    b = rules_for("", copy=0.0, close=3.0, piece=pieces.__getitem__)
    b.feed(b'{"a":"x"')
    out = b.apply(np.zeros(len(pieces), dtype=np.float32))
    assert out.tolist() == [3.0, 0.0, 3.0, 0.0, 0.0, 0.0]
    b = rules_for("", copy=0.0, close=3.0, piece=pieces.__getitem__)
    b.feed(b'{"a":1')
    logits = np.array([0, 1, 0, 0, 0, 0], dtype=np.float32)  # the model would end the number
    out = b.apply(logits)
    assert out.tolist() == [3.0, 1.0, 3.0, 3.0, 0.0, 0.0]  # "5}" ends the number, then closes


def test_the_close_bias_does_not_cut_a_number_short() -> None:
    pieces = ["}", ',"', "0", "5}"]
    b = rules_for("", copy=0.0, close=3.0, piece=pieces.__getitem__)
    b.feed(b'{"a":4')
    logits = np.array([0, 0, 1, 0], dtype=np.float32)  # the model would write 40…
    assert b.apply(logits).tolist() == [0.0, 0.0, 1.0, 0.0]


def test_the_close_bias_waits_for_a_value_to_end() -> None:
    b = rules_for("", copy=0.0, close=3.0, piece=["}", '"'].__getitem__)
    b.feed(b'{"a":"x')
    assert not b.active
    assert b.apply(np.zeros(2, dtype=np.float32)).tolist() == [0.0, 0.0]


def test_both_biases_off_change_nothing() -> None:
    b = rules_for(SOURCE, copy=0.0, close=0.0, piece=PIECES.__getitem__)
    b.feed(b'{"city":"')
    assert not b.active
    assert b.apply(np.zeros(len(PIECES), dtype=np.float32)).tolist() == [0.0] * len(PIECES)


def test_each_occurrence_is_copied_once_and_a_number_given_once_costs_the_second_time() -> None:
    b = rules_for("the sides are 4 and 5", copy=1.0, close=0.0, piece=["4", "5", "}"].__getitem__)
    b.feed(b'{"x":4,"y":')
    assert b.apply(np.zeros(3, dtype=np.float32)).tolist() == [-1.0, 1.0, 0.0]  # 4 is taken
    words = rules_for("the sides are 4 and 5", copy=1.0, close=0.0, piece=["sides", "4", "}"].__getitem__)
    words.feed(b'{"a":"sides","b":"')
    assert words.apply(np.zeros(3, dtype=np.float32)).tolist() == [0.0, 1.0, 0.0]  # strings: no cost


def test_a_string_value_takes_its_occurrence_too() -> None:
    b = rules_for("Lisbon or Porto", copy=1.0, close=0.0, piece=["Lisbon", "Porto"].__getitem__)
    b.feed(b'{"a":"Lisbon","b":"')
    assert b.apply(np.zeros(2, dtype=np.float32)).tolist() == [0.0, 1.0]


def test_numbers_are_copied_without_thousands_separators() -> None:
    pieces = ["2", "0", "}", ","]
    b = rules_for("a net income of $2,000,000 in 2,3", copy=1.0, close=0.0, piece=pieces.__getitem__)
    b.feed(b'{"income":200')
    assert b.apply(np.zeros(4, dtype=np.float32)).tolist() == [-1.0, 1.0, -1.0, -1.0]  # on to 2000000
    b.feed(b"0000")
    assert b.apply(np.zeros(4, dtype=np.float32)).tolist() == [-1.0, -1.0, 1.0, 1.0]  # a whole span
    b = rules_for("sides 2,3", copy=1.0, close=0.0, piece=pieces.__getitem__)
    b.feed(b'{"a":2')
    assert b.apply(np.zeros(4, dtype=np.float32)).tolist() == [-1.0, -1.0, 1.0, 1.0]  # "2,3" is a list


def test_leaving_a_span_under_way_costs_what_copying_gains() -> None:
    pieces = ["pool", "ly", " F", '"', "0", ","]
    b = rules_for("Liverpool F.C. won 5000 to 2", copy=2.5, close=0.0, piece=pieces.__getitem__)
    b.feed(b'{"team":"Liver')
    assert b.apply(np.zeros(6, dtype=np.float32)).tolist() == [2.5, -2.5, -2.5, -2.5, -2.5, -2.5]
    b.feed(b'pool"')
    b.feed(b',"n":500')  # a number cut short: ending it here costs too
    out = b.apply(np.zeros(6, dtype=np.float32))
    assert out[pieces.index("0")] == 2.5 and out[pieces.index(",")] == -2.5
    b.feed(b'0,"m":7')  # not a span: the model's own value is left alone
    assert b.apply(np.zeros(6, dtype=np.float32)).tolist() == [0.0] * 6


def test_an_empty_string_copies_nothing() -> None:
    pieces = ['"', '""', "Vel", "V"]
    b = rules_for("What is the capital of Veloria?", copy=2.5, close=0.0, piece=pieces.__getitem__)
    b.feed(b'{"country":"')
    out = b.apply(np.zeros(4, dtype=np.float32)).tolist()
    assert out[pieces.index('"')] == -2.5  # closing at once: an empty value
    assert out[pieces.index("Vel")] == 2.5 and out[pieces.index("V")] == 2.5
    b = rules_for("What is the capital of Veloria?", copy=2.5, close=0.0, piece=pieces.__getitem__)
    b.feed(b'{"country":')
    assert b.apply(np.zeros(4, dtype=np.float32))[pieces.index('""')] == -2.5
    off = rules_for("What is the capital of Veloria?", copy=0.0, close=2.0, piece=pieces.__getitem__)
    off.feed(b'{"country":"')
    assert off.apply(np.zeros(4, dtype=np.float32)).tolist() == [0.0] * 4  # copy_bias=0: no nudge


# -- flags the request mentions, and optional fields it does not give ---------


FLAGS = ['{"', "true", "tr", "false", "f", "ton", "1", "}"]


def flag_bias(source: str, text: str) -> set[str]:
    b = rules_for(source, copy=4.0, close=0.0, piece=FLAGS.__getitem__)
    b.feed(text.encode())
    out = b.apply(np.zeros(len(FLAGS), dtype=np.float32))
    return {FLAGS[i] for i in range(len(FLAGS)) if out[i] > 0}


def test_the_copy_bias_sets_a_flag_the_request_mentions() -> None:
    assert flag_bias("Route it with toll roads avoided.", '{"avoid_tolls":') == {"true", "tr"}
    assert flag_bias("Don't return full text.", '{"full_text":') == {"false", "f"}
    assert flag_bias("A brief on Interstellar.", '{"extra_info":') == set()
    assert flag_bias("Route it with toll roads avoided.", '{"avoid_tolls":t') == set()  # in a literal


def test_a_fork_is_independent() -> None:
    b = rules_for("sides 4 and 5", copy=4.0, close=2.0, piece=PIECES.__getitem__)
    b.feed(b'{"x":4')
    fork = b.fork()
    fork.feed(b',"y":5,"z":')
    assert fork.depth == 1 and b.depth == 1
    assert b.cursor.value == "4" and fork.cursor.value is None
    assert not fork.optional.supports(',"q":5}')  # the fork took 5…
    assert b.optional.supports(',"q":5}')  # …the original did not
    assert fork.ended == 2 and b.ended == 0


def test_a_fork_tells_when_the_next_value_has_ended() -> None:
    b = rules_for("sides 4 and 5", copy=4.0, close=2.0, piece=PIECES.__getitem__)
    b.feed(b'{"p":{"x":4')
    fork = b.fork()
    fork.feed(b',"y"')  # ends the number 4: not the next value
    assert not fork.value_ended(2)
    fork.feed(b":5")
    assert not fork.value_ended(2)  # 5 may go on
    fork.feed(b"}")
    assert fork.value_ended(2) is False and fork.ended == 2  # …it ended, one level up
    literal = b.fork()
    literal.feed(b',"on":t')
    assert literal.value_ended(2)
    string = b.fork()
    string.feed(b',"name":"Al')
    assert not string.value_ended(2)
    string.feed(b'"')
    assert string.value_ended(2)


@pytest.mark.parametrize(
    ("text", "piece", "adds"),
    [
        ('{"p":{"x":4', ',"', True),  # after a number in a nested object
        ('{"p":{"x":4', '5,"', True),
        ('{"p":{"x":"a"', ",", True),
        ('{"p":{"x":true', ',"', True),
        ('{"p":{"x":4', "}", False),
        ('{"p":{"x":4', "5", False),
        ('{"x":4', ',"', False),  # the top-level object (the turn's own fields) is left alone
        ('{"p":[4', ",", False),  # an array item
        ('{"p":{"x":"a', ',"', False),  # inside a string
        ('{"p":{"x":"a', '",', True),  # one token ends the string and adds a field
        ('{"p":{"x":"a', 'b","', True),
        ('{"p":{"x":"a\\', '",', False),  # an escaped quote: the string goes on
        ('{"p":{"x":"a', '"}', False),
    ],
)
def test_a_token_adds_a_field_after_a_value_in_a_nested_object(text: str, piece: str, adds: bool) -> None:
    b = rules_for("", copy=1.0, close=1.0, piece=PIECES.__getitem__)
    b.feed(text.encode())
    assert b.optional.adds_field(piece) is adds


def test_the_closer_is_the_likeliest_allowed_closing_token() -> None:
    pieces = [",", "}", "}}", "5", '"']
    b = rules_for("", copy=1.0, close=1.0, piece=pieces.__getitem__)
    b.feed(b'{"p":{"x":4')
    logits = np.array([3.0, 1.0, 2.0, 5.0, 0.0], dtype=np.float32)
    assert b.optional.closer(logits, ",") == 2
    logits[2] = -np.inf  # forbidden by the schema
    assert b.optional.closer(logits, ",") == 1
    logits[1] = -np.inf
    assert b.optional.closer(logits, ",") is None


@pytest.mark.parametrize(
    ("text", "supported"),
    [
        (',"unit":"km"}', True),
        (',"unit":"cm"}', False),
        (',"unit":"KM"}', True),  # in another case
        (',"unit":"k', False),  # cut before its end
        (',"days":5}', True),
        (',"days":4,', False),  # 4 was taken by "x"
        (',"days":50}', False),
        (',"days":5', False),  # a number not known to have ended
        (',"avoid_tolls":true}', True),
        (',"avoid_tolls":false}', True),  # the request speaks of tolls: either value stands
        (',"extra_info":true}', False),
        (',"extra":{"a":1}}', True),  # nested: let through
        ("garbage", True),
    ],
)
def test_an_optional_field_is_supported_when_the_request_gives_its_value(text: str, supported: bool) -> None:
    b = rules_for("4 km in 5 days without tolls", copy=1.0, close=1.0, piece=PIECES.__getitem__)
    b.feed(b'{"p":{"x":4,"y":"w"')
    assert b.optional.supports(text) is supported


def test_supports_reads_past_the_rest_of_a_number() -> None:
    b = rules_for("12 km", copy=1.0, close=1.0, piece=PIECES.__getitem__)
    b.feed(b'{"p":{"x":1')
    assert b.optional.supports('2,"unit":"km"}')


def test_supports_and_the_closer_read_past_the_rest_of_a_string() -> None:
    pieces = ['"', '"}', '",', "on"]
    b = rules_for("Lisbon in km", copy=1.0, close=1.0, piece=pieces.__getitem__)
    b.feed(b'{"p":{"city":"Lisb')
    assert b.optional.supports('on","unit":"km"}')
    assert not b.optional.supports('on","unit":"mi"}')
    assert (
        b.optional.closer(np.array([0.0, 1.0, 2.0, 3.0], dtype=np.float32), '",') == 1
    )  # '"}', not '",' or "on"


def test_the_closer_only_closes() -> None:
    pieces = ["}},", "}}", "}"]
    b = rules_for("", copy=1.0, close=1.0, piece=pieces.__getitem__)
    b.feed(b'{"calls":[{"input":{"x":4')
    assert b.optional.closer(np.array([3.0, 2.0, 1.0], dtype=np.float32), ",") == 1  # not `}},`: a new item


def test_the_closer_writes_what_the_token_it_replaces_adds_to_the_value() -> None:
    pieces = ['"}', '.",', '."}', '."']
    b = rules_for("Washington D.C.", copy=1.0, close=1.0, piece=pieces.__getitem__)
    b.feed(b'{"p":{"city":"Washington D.C')
    logits = np.array([3.0, 2.0, 1.0, 0.0], dtype=np.float32)
    assert b.optional.closer(logits, '.",') == 2  # '."}' keeps the period; '"}' would drop it
    logits[2] = -np.inf
    assert b.optional.closer(logits, '.",') is None
    assert b.optional.closer(logits, '",') == 0


def test_an_optional_value_the_request_says_in_other_words_is_supported() -> None:
    b = rules_for(
        "Air quality in San Jose for the next three days, in detail.", copy=1.0, close=1.0, piece=str
    )
    b.feed(b'{"p":{"city":"San Jose"')
    assert b.optional.supports(',"days":3}')  # "three"
    assert not b.optional.supports(',"days":4}')
    assert b.optional.supports(',"level":"detailed"}')
    assert not b.optional.supports(',"level":"basic"}')


def percent_bias(source: str, keys: tuple[str, ...] = (), key: str = "rate") -> ValueBias:
    kept = {k: {-2} for k in keys}
    b = rules_for(
        source, copy=2.5, close=0.0, piece=PIECES.__getitem__, kept_scales=kept, convert_values=True
    )
    b.feed(b'{"calls":[{"tool":"t","input":{"' + key.encode() + b'":')
    return b


@pytest.mark.parametrize(
    ("source", "text", "fraction"),
    [
        ("$5000 at 5% for 7 years", "5,", "0.05"),
        ("a rate of 12.5 percent", "12.5}", "0.125"),
        ("a rate of 10 %", "10}", "0.1"),
        ("all of it: 100%", "100}", "1"),
        ("$5000 at 5% for 7 years", "7,", None),  # not a percentage
        ("$5000 at 5% for 7 years", "500,", None),  # no span at all (and zeros count only for millions)
        ("5% for 5 years", "5,", None),  # which 5? both are free
        ("$5000 at 5% for 7 years", "5", None),  # the value did not end
        ("$5000 at 5% for 7 years", '"5%"', None),  # not a number
    ],
)
def test_a_number_given_only_as_a_percentage_is_written_as_its_fraction(
    source: str, text: str, fraction: str | None
) -> None:
    assert percent_bias(source).convert.scaled(text) == fraction


@pytest.mark.parametrize(
    ("source", "text", "number"),
    [
        ("a population of 213 million on 8.5 million km2", "213,", "213000000"),
        ("a population of 213 million on 8.5 million km2", "8.5}", "8500000"),
        ("a population of 213 million on 8.5 million km2", "850000000}", "8500000"),  # zeros of its own
        ("a population of 213 million on 8.5 million km2", "2130,", "213000000"),
        ("a population of 213 million on 8.5 million km2", "213000000,", None),  # written whole already
        ("a population of 213 million on 8.5 million km2", "21,", None),
        ("a payout of 50 Million USD", "50,", "50000000"),
        ("12 thousand miles a year", "12,", "12000"),
        ("a debt of 1.2 billion", "1.2}", "1200000000"),
        ("3 trillion stars", "3}", "3000000000000"),
        ("8.5 million and 85 thousand", "850,", None),  # which one?
        ("213 million people in 213 towns", "213,", None),  # which 213? both are free
        ("a million people", "1,", None),  # no number is given
    ],
)
def test_a_number_given_only_in_millions_is_written_whole(source: str, text: str, number: str | None) -> None:
    assert percent_bias(source).convert.scaled(text) == number


def test_digits_that_never_end_are_written_whole_only_as_the_digits_of_a_number_in_millions() -> None:
    # The look-ahead ran out within them: the model would write zeros up to max_tokens.
    runaway = "85" + "0" * 46
    assert (
        percent_bias("a population of 213 million on 8.5 million km2").convert.scaled(runaway, ended=False)
        == "8500000"
    )
    assert percent_bias("8.5 million km2").convert.scaled("8" * 48, ended=False) is None  # not its digits
    assert (
        percent_bias("$5000 at 5% for 7 years").convert.scaled("5", ended=False) is None
    )  # no scale's zeros
    assert (
        percent_bias("8.5 million and 85 thousand").convert.scaled(runaway, ended=False) is None
    )  # which one?
    assert (
        percent_bias("8.5 million km2").convert.scaled(runaway + "}", ended=False) is None
    )  # not digits alone


def test_the_percentage_is_taken_once_written_as_a_fraction() -> None:
    b = percent_bias("5% now and 5% later")
    assert b.convert.scaled("5,") == "0.05"  # every free 5 is a percentage
    assert b.convert.scaled("5,") == "0.05"
    assert b.convert.scaled("5,") is None
    b = percent_bias("5% now, then 6%")
    assert b.convert.starts_number("5")
    assert b.convert.scaled("5,") == "0.05"
    assert b.convert.scaled("5,") is None  # taken
    assert b.convert.starts_number("6")
    assert b.convert.scaled("6}") == "0.06"
    assert not b.convert.starts_number("7")  # every percentage is taken


def test_a_percentage_is_only_looked_for_where_a_number_field_may_take_it() -> None:
    b = percent_bias("at 5%")
    assert b.convert.starts_number("5") and b.convert.starts_number("-")
    assert not b.convert.starts_number('"')  # a string
    assert not percent_bias("at 5%", keys=("rate",)).convert.starts_number("5")  # the field takes 5
    assert percent_bias("at 5%", keys=("rate",)).convert.scaled("5}") is None
    kept = percent_bias("at 5% of 2 million", keys=("rate",))
    assert kept.convert.starts_number("2")  # it takes percentages, not millions
    assert kept.convert.scaled("5,") is None and kept.convert.scaled("2}") == "2000000"
    assert not percent_bias("at five").convert.starts_number("5")  # no percentage
    top = rules_for("at 5%", copy=2.5, close=0.0, piece=PIECES.__getitem__, convert_values=True)
    top.feed(b'{"rate":')
    assert not top.convert.starts_number("5")  # not in a tool's input
    off = rules_for("at 5%", copy=0.0, close=2.0, piece=PIECES.__getitem__, convert_values=True)
    off.feed(b'{"calls":[{"tool":"t","input":{"rate":')
    assert not off.convert.starts_number("5")  # the copy bias is off
    b.feed(b"5")
    assert not b.convert.starts_number("0")  # inside a number already


def test_numbers_written_as_words_are_copied_like_digits() -> None:
    pieces = ["2", "1", "5", "}"]
    b = rules_for("Two adults and one child, for five nights.", copy=1.0, close=0.0, piece=pieces.__getitem__)
    b.feed(b'{"adults":')
    assert b.apply(np.zeros(4, dtype=np.float32)).tolist() == [1.0, 1.0, 1.0, 0.0]
    b.feed(b'2,"children":1,"nights":')
    assert b.apply(np.zeros(4, dtype=np.float32)).tolist() == [-1.0, -1.0, 1.0, 0.0]  # each copied once
    assert not rules_for("someone", copy=1.0, close=0.0, piece=str).optional.supports(
        ',"n":1}'
    )  # whole words only


@pytest.mark.parametrize(
    ("text", "starts"),
    [
        ('{"calls":[{"tool":"t","input":{"city":"', True),
        ('{"calls":[{"tool":"t","input":{"city":"Bo', False),  # under way
        ('{"calls":[{"tool":"t","input":{"city":', False),  # before the quote
        ('{"calls":[{"tool":"t","input":{"', False),  # a key
        ('{"final":"', False),  # not in a tool's input
        ('{"calls":[{"tool":"t","input":{"tags":["', False),  # in an array
    ],
)
def test_a_string_value_starts_in_a_tools_input(text: str, starts: bool) -> None:
    b = rules_for("", copy=0.0, close=0.0, piece=str)
    b.feed(text.encode())
    assert b.starts_string() is starts


# -- numbers named for a field -----------------------------------------------------


def test_a_number_named_for_a_field_gets_the_copy_bias_twice_there_and_none_in_a_sibling() -> None:
    pieces = ["70", "175", "5"]
    source = "a weight of 70 kg, a height of 175 cm and 5 more"
    siblings = {"weight": {"weight", "height", "extra"}, "height": {"weight", "height", "extra"}}
    b = rules_for(source, copy=2.5, close=0.0, piece=pieces.__getitem__, siblings=siblings)
    b.feed(b'{"calls":[{"tool":"bmi","input":{"weight":')
    assert b.apply(np.zeros(3, dtype=np.float32)).tolist() == [5.0, 0.0, 2.5]
    b.feed(b'70,"height":')
    assert b.apply(np.zeros(3, dtype=np.float32)).tolist() == [-2.5, 5.0, 2.5]  # 70 is taken
    b.feed(b'175,"extra":')
    assert b.apply(np.zeros(3, dtype=np.float32)).tolist() == [-2.5, -2.5, 2.5]
    plain = rules_for(source, copy=2.5, close=0.0, piece=pieces.__getitem__)  # no siblings: no names
    plain.feed(b'{"calls":[{"tool":"bmi","input":{"weight":')
    assert plain.apply(np.zeros(3, dtype=np.float32)).tolist() == [2.5, 2.5, 2.5]


# -- dates in the format a field asks for ----------------------------------------------


def date_bias(source: str, key: str = "date") -> ValueBias:
    formats = {"date": "%Y-%m-%d"}
    b = rules_for(
        source, copy=2.5, close=0.0, piece=PIECES.__getitem__, date_formats=formats, convert_values=True
    )
    b.feed(b'{"calls":[{"tool":"t","input":{"' + key.encode() + b'":"')
    return b


@pytest.mark.parametrize(
    ("source", "text", "written"),
    [
        ("the price on March 11, 2022.", 'March 11, 2022"}', "2022-03-11"),
        ("the price on March 11, 2022.", 'on March 11, 2022"}', "2022-03-11"),  # the date in a span
        ("the price on March 11, 2022.", '03/11/2022"}', "2022-03-11"),  # the date, as a date
        ("the price on March 11, 2022.", '2022",', "2022-03-11"),  # a part of it
        ("the price on March 11, 2022.", '2022-03-11"}', None),  # already in the format
        ("the price on March 11, 2022.", '2022-03-12"}', "2022-03-11"),  # another date: the one given
        ("the price on March 11, 2022.", 'the price"}', None),
        ("the price on March 11, 2022.", "March 11", "2022-03-11"),  # cut short by the look-ahead
        ("the price on March 11, 2022.", "2022.03.11T11:00:00Z1:1:1", "2022-03-11"),
        ("the price on March 11, 2022.", "", None),
    ],
)
def test_a_date_of_the_messages_is_written_in_the_fields_format(
    source: str, text: str, written: str | None
) -> None:
    assert date_bias(source).convert.dated(text) == written


def test_each_date_is_written_once_and_only_in_date_fields() -> None:
    b = date_bias("from July 10, 2022 to July 20, 2022")
    assert b.convert.starts_date()
    assert b.convert.dated('July 20, 2022"') == "2022-07-20"
    assert b.convert.dated('July 20, 2022"') == "2022-07-10"  # taken: the next date given instead
    assert b.convert.dated('July 10, 2022"') is None
    assert not b.convert.starts_date()  # every date is taken
    assert not date_bias("from July 10, 2022", key="city").convert.starts_date()
    assert not date_bias("on July 10").convert.starts_date()  # no whole date
    b = date_bias("on July 10, 2022")
    b.feed(b"J")
    assert not b.convert.starts_date()  # not at the start of the value
    off = rules_for(
        "on July 10, 2022",
        copy=0.0,
        close=2.0,
        piece=PIECES.__getitem__,
        date_formats={"date": "%Y"},
        convert_values=True,
    )
    off.feed(b'{"calls":[{"tool":"t","input":{"date":"')
    assert not off.convert.starts_date()  # part of the copy bias


def test_a_string_field_next_to_number_fields_does_not_copy_a_number() -> None:
    pieces = ["2", "pounds", "20"]
    siblings = {"quantity": {"quantity"}, "unit": {"quantity"}}
    b = rules_for("2 pounds of butter", copy=2.5, close=0.0, piece=pieces.__getitem__, siblings=siblings)
    b.feed(b'{"calls":[{"tool":"convert","input":{"unit":"')
    assert b.apply(np.zeros(3, dtype=np.float32)).tolist() == [0.0, 2.5, 0.0]
    b.feed(b'pounds","quantity":')
    assert b.apply(np.zeros(3, dtype=np.float32)).tolist() == [2.5, 0.0, 0.0]
    alone = rules_for("2 pounds of butter", copy=2.5, close=0.0, piece=pieces.__getitem__)  # no number fields
    alone.feed(b'{"calls":[{"tool":"convert","input":{"unit":"')
    assert alone.apply(np.zeros(3, dtype=np.float32)).tolist() == [2.5, 2.5, 0.0]


def test_the_numbers_of_a_date_written_in_its_format_are_taken_with_it() -> None:
    pieces = ["10", "2022", "3"]
    b = rules_for(
        "3 nights from July 10, 2022",
        copy=1.0,
        close=0.0,
        piece=pieces.__getitem__,
        date_formats={"day": "%Y-%m-%d"},
        convert_values=True,
    )
    b.feed(b'{"calls":[{"tool":"t","input":{"day":"')
    assert b.convert.dated('July 10, 2022"') == "2022-07-10"
    b.feed(b'2022-07-10","nights":')
    assert b.apply(np.zeros(3, dtype=np.float32)).tolist() == [-1.0, -1.0, 1.0]  # not 10 nights


# -- optional fields the request names ----------------------------------------------


TERRAIN = "Find the distance between New York and Boston, accounting for terrain."
ROUTE = (("origin", "destination", "consider_terrain", "avoid_tolls"), {"origin", "destination"})


def terrain_bias(objects: tuple[tuple[tuple[str, ...], set[str]], ...] = (ROUTE,)) -> ValueBias:
    b = rules_for(TERRAIN, copy=1.0, close=0.0, piece=str, objects=objects)
    b.feed(b'{"calls":[{"tool":"distance","input":{"origin":"New York","destination":"Boston')
    return b


def test_an_optional_field_the_request_names_is_offered_before_the_object_closes() -> None:
    b = terrain_bias()
    assert b.optional.suggest('"}') == '","consider_terrain":'  # the value's closing quote first
    assert b.optional.suggest('"}') is None  # offered once
    b = terrain_bias()
    b.feed(b'"')
    assert b.optional.suggest("}}") == ',"consider_terrain":'
    assert terrain_bias().optional.suggest('",') is None  # not closing: the model adds a field itself
    assert terrain_bias().optional.suggest("ton") is None


def test_no_field_is_offered_that_the_request_does_not_name_or_that_is_written() -> None:
    assert (
        terrain_bias(
            ((("origin", "destination", "avoid_tolls"), {"origin", "destination"}),)
        ).optional.suggest('"}')
        is None
    )
    required = (
        (("origin", "destination", "consider_terrain"), {"origin", "destination", "consider_terrain"}),
    )
    assert terrain_bias(required).optional.suggest('"}') is None  # the object cannot close: no such object
    assert terrain_bias(((("origin", "city"), set()),)).optional.suggest('"}') is None  # another object
    assert terrain_bias(()).optional.suggest('"}') is None  # no objects given: off
    b = rules_for(TERRAIN, copy=1.0, close=0.0, piece=str, objects=(ROUTE,))
    b.feed(b'{"origin":"New York","destination":"Boston')
    assert b.optional.suggest('"}') is None  # not in a tool's input
    negated = rules_for(
        "from A to B, not accounting for terrain", copy=1.0, close=0.0, piece=str, objects=(ROUTE,)
    )
    negated.feed(b'{"calls":[{"tool":"distance","input":{"origin":"A","destination":"B')
    assert negated.optional.suggest('"}') is None


def test_a_string_of_the_fields_own_name_is_no_value() -> None:
    b = rules_for("the method used to discover gravity, monthly", copy=1.0, close=0.0, piece=str)
    b.feed(b'{"calls":[{"tool":"t","input":{"discovery":"gravity"')
    assert not b.optional.supports(',"method_used":"method"}')
    assert not b.optional.supports(',"methodUsed":"Method"}')
    assert b.optional.supports(',"approach":"method"}')  # another field may take the word
    assert b.optional.supports(',"method_used":"gravity"}')


def test_a_string_field_does_not_copy_its_own_name() -> None:
    pieces = ["slope", "hill", "steep"]
    b = rules_for("plants for a hill slope", copy=1.0, close=0.0, piece=pieces.__getitem__)
    b.feed(b'{"calls":[{"tool":"t","input":{"slope_type":"')
    assert b.apply(np.zeros(3, dtype=np.float32)).tolist() == [0.0, 1.0, 0.0]
    b = rules_for("plants for a hill slope", copy=1.0, close=0.0, piece=pieces.__getitem__)
    b.feed(b'{"calls":[{"tool":"t","input":{"terrain":"')
    assert b.apply(np.zeros(3, dtype=np.float32)).tolist() == [1.0, 1.0, 0.0]  # another field may


# -- units, series, names and phrases ------------------------------------------------


def value_bias(source: str, pieces: list[str], text: bytes, **options: Any) -> ValueBias:
    """A `ValueBias` with a copy bias of 1 over `pieces`, fed `text`."""
    b = rules_for(source, copy=1.0, close=0.0, piece=pieces.__getitem__, **options)
    b.feed(text)
    return b


def unit_bias(source: str, description: str, integer: bool = True, key: str = "height") -> ValueBias:
    unit = field_unit(key, description)
    assert unit is not None
    units = {key: (unit, integer)}
    b = rules_for(source, copy=2.5, close=0.0, piece=PIECES.__getitem__, units=units, convert_values=True)
    b.feed(b'{"calls":[{"tool":"t","input":{"' + key.encode() + b'":')
    return b


@pytest.mark.parametrize(
    ("source", "description", "integer", "text", "written"),
    [
        ("weight 150lbs and height 5ft 10in", "in inches", True, "5,", "70"),
        ("capacitance of 100µF", "in farads (F)", False, "100}", "0.0001"),
        ("a duration of 3 minutes", "in seconds", True, "3}", "180"),
        ("2 pounds of flour", "in grams", False, "2}", "907.18474"),
        ("2 pounds of flour", "in grams", True, "2}", None),  # no integer in grams
        ("150lbs", "in kg", False, "150}", None),  # 68.0388555: too many places
        ("10 inches", "in feet", False, "10}", None),  # 0.8333…: too many places
        ("height of 70 inches", "in inches", True, "70}", None),  # the field's unit already
        ("height 5ft 10in", "in inches", True, "10}", None),  # not the quantity's first number
        ("open until 11 PM", "in 24 hour format", True, "11}", "23"),
        ("open until 11 AM", "in 24 hour format", True, "11}", None),  # 11 either way
    ],
)
def test_a_quantity_in_another_unit_is_written_in_the_fields_unit(
    source: str, description: str, integer: bool, text: str, written: str | None
) -> None:
    b = unit_bias(source, description, integer)
    assert b.convert.starts_number(text[0])
    assert b.convert.scaled(text) == written


def test_a_converted_quantity_is_taken_with_its_numbers() -> None:
    b = unit_bias("height 5ft 10in", "in inches")
    assert b.convert.scaled("5,") == "70"
    assert not b.convert.starts_number("5")  # nothing left to convert
    assert b.convert.scaled("10,") is None
    plain = rules_for("height 5ft 10in", copy=2.5, close=0.0, piece=PIECES.__getitem__, convert_values=True)
    plain.feed(b'{"calls":[{"tool":"t","input":{"height":')
    assert not plain.convert.starts_number("5")  # a field that names no unit
    assert plain.convert.scaled("5,") is None


def test_a_number_written_instead_of_the_models_ends_there() -> None:
    b = value_bias("a rate of 5%", ["0", "5", ",", "}", ',"'], b'{"calls":[{"tool":"t","input":{"rate":0.05')
    b.convert.seal()
    assert b.apply(np.zeros(5, dtype=np.float32)).tolist() == [-np.inf, -np.inf, 0.0, 0.0, 0.0]
    b.feed(b',"n":')
    assert np.isfinite(b.apply(np.zeros(5, dtype=np.float32))).all()  # the next number is free


SERIES = "Mix 20 kg of water at 30 degrees with 15 kg at 60 degrees."
SERIES_PIECES = ["20", "15", "30", "60"]


def series_bias(keys: tuple[str, ...]) -> ValueBias:
    siblings = {k: set(keys) for k in keys}
    return rules_for(SERIES, copy=1.0, close=0.0, piece=SERIES_PIECES.__getitem__, siblings=siblings)


def test_number_fields_of_a_series_take_the_numbers_in_order() -> None:
    b = series_bias(("mass1", "temperature1", "mass2", "temperature2"))
    b.feed(b'{"calls":[{"tool":"t","input":{"mass1":')
    assert b.apply(np.zeros(4, dtype=np.float32)).tolist() == [2.0, 1.0, 1.0, 1.0]
    b.feed(b'20,"temperature1":')
    assert b.apply(np.zeros(4, dtype=np.float32)).tolist() == [-1.0, 1.0, 2.0, 1.0]
    b.feed(b'30,"mass2":')
    assert b.apply(np.zeros(4, dtype=np.float32)).tolist() == [-1.0, 2.0, -1.0, 1.0]
    other = series_bias(("mass", "temperature"))  # no series: the model's own order
    other.feed(b'{"calls":[{"tool":"t","input":{"mass":')
    assert other.apply(np.zeros(4, dtype=np.float32)).tolist() == [1.0, 1.0, 1.0, 1.0]


def test_names_come_before_order_in_a_series() -> None:
    siblings = {k: {"base1", "height1"} for k in ("base1", "height1")}
    b = rules_for(
        "a height1 of 10 and 6", copy=1.0, close=0.0, piece=["10", "6"].__getitem__, siblings=siblings
    )
    b.feed(b'{"calls":[{"tool":"t","input":{"base1":')
    assert b.apply(np.zeros(2, dtype=np.float32)).tolist() == [0.0, 1.0]  # 10 is the height's


def test_an_optional_number_of_a_series_comes_after_the_ones_written() -> None:
    siblings = {k: {"x", "y", "z", "count"} for k in ("x", "y", "z", "count")}
    text = b'{"calls":[{"tool":"t","input":{"x":4,"y":5'
    b = value_bias("the other two sides as 4 and 5", [], text, siblings=siblings)
    assert not b.optional.supports(',"z":2}')  # "two" comes before the 5 written
    assert b.optional.supports(',"count":2}')  # not of the series


def test_string_fields_of_a_series_take_the_values_in_order() -> None:
    source = "How similar are a human and a chimp?"
    text = b'{"calls":[{"tool":"t","input":{"species1":"'
    b = value_bias(source, ["chimp", "human", "a"], text, series={"species1", "species2"})
    assert b.apply(np.zeros(3, dtype=np.float32)).tolist() == [1.0, 2.0, 1.0]  # "a" orders nothing
    b.feed(b'human","species2":"')
    assert b.apply(np.zeros(3, dtype=np.float32)).tolist() == [2.0, 0.0, 1.0]


def test_a_string_the_model_would_end_short_of_its_phrase_goes_on() -> None:
    pieces = ['"', " membrane", "_", '"}']
    source = "What are the proteins of the plasma membrane?"
    b = value_bias(source, pieces, b'{"calls":[{"tool":"t","input":{"compartment":"plasma')
    ends = np.array([1.0, 0.0, 0.0, 0.0], dtype=np.float32)  # the model would end the value
    assert b.apply(ends.copy()).tolist() == [2.0, 2.0, -1.0, 1.0]
    leaves = np.array([0.0, 0.0, 1.0, 0.0], dtype=np.float32)  # or leave the span ("plasma_")
    assert b.apply(leaves.copy()).tolist() == [1.0, 2.0, 0.0, 1.0]
    whole = value_bias(source, pieces, b'{"calls":[{"tool":"t","input":{"compartment":"the plasma membrane')
    assert whole.apply(ends.copy()).tolist() == [2.0, -1.0, -1.0, 1.0]  # nothing to go on with


def test_a_string_value_does_not_run_on_into_a_date() -> None:
    source = "What is the air quality index in London 2022/08/16?"
    text = b'{"calls":[{"tool":"t","input":{"location":"London'
    b = value_bias(source, [" 2022", '"', " "], text, date_formats={"date": "%m-%d-%Y"})
    assert b.apply(np.zeros(3, dtype=np.float32)).tolist() == [-1.0, 1.0, -1.0]


def test_a_string_of_the_tools_own_name_is_no_value() -> None:
    text = b'{"calls":[{"tool":"nfl_data.player_record","input":{"player":"Tom Brady"'
    b = value_bias(
        "Tom Brady in the 2020 NFL season", ["NFL", "season"], text, constants={"nfl_data.player_record"}
    )
    assert not b.optional.supports(',"team":"NFL"}')
    b.feed(b',"team":"')
    assert b.apply(np.zeros(2, dtype=np.float32)).tolist() == [0.0, 1.0]
    # The field that is the constant itself chooses it as before: "NFL" is a span there.
    text = b'{"calls":[{"tool":"'
    tool = value_bias(
        "the 2020 NFL season", ["NFL", "season"], text, constants={"NFL"}, constant_keys={"tool"}
    )
    assert tool.apply(np.zeros(2, dtype=np.float32)).tolist() == [1.0, 1.0]


def test_the_numbers_of_a_copied_string_are_taken_with_it() -> None:
    text = b'{"calls":[{"tool":"t","input":{"function":"2x^2","value":'
    b = value_bias("the derivative of 2x^2 at x = 1", ["2", "1"], text)
    assert b.apply(np.zeros(2, dtype=np.float32)).tolist() == [-1.0, 1.0]


def test_an_enum_value_copies_the_messages_in_any_case() -> None:
    # "Celsius" in the request is the enum's "celsius": the enum fixes how the value is
    # written, so its value copies the messages in any case; a free string field does not.
    pieces = ["cel", "dollars", "fahr", "Cel", '"']
    source = "What is 23 degrees Celsius in Fahrenheit?"

    def nudge(key: str, enums: set[str], text: str = "") -> set[str]:
        b = rules_for(source, copy=2.0, close=0.0, piece=pieces.__getitem__, enums=enums)
        b.feed(f'{{"{key}":"{text}'.encode())
        out = b.apply(np.zeros(len(pieces), dtype=np.float32))
        return {pieces[i] for i in range(len(pieces)) if out[i] > 0}

    assert nudge("from_unit", {"from_unit"}) == {"cel", "fahr", "Cel"}
    assert nudge("from_unit", set()) == {"Cel"}  # not an enum: the user's own case only
    assert nudge("note", {"from_unit"}) == {"Cel"}
    # Under way, the value goes on with the span: leaving it costs what copying gains.
    b = rules_for(source, copy=2.0, close=0.0, piece=pieces.__getitem__, enums={"u"})
    b.feed(b'{"u":"cel')
    out = b.apply(np.zeros(len(pieces), dtype=np.float32))
    assert out.tolist() == [-2.0, -2.0, -2.0, -2.0, -2.0]  # "celcel…", "celdollars…": no span


def test_enum_keys_are_the_string_fields_with_an_enum() -> None:
    schema = {
        "type": "object",
        "properties": {
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            "n": {"type": "integer", "enum": [1, 2]},
            "city": {"type": "string"},
            "inner": {"type": "object", "properties": {"mode": {"enum": ["fast", "slow"]}}},
        },
    }
    assert enum_keys(schema) == {"unit", "mode"}


def test_quoted_values_are_what_the_text_puts_in_quotes() -> None:
    text = (
        "Our company's server is called 'EnterpriseDB', the host is \"db.company.com\", "
        "the password 'secure*pwd123'; the users' files; I'd like “Blue Note” and «Paris»."
    )
    assert quoted_values(text) == ["EnterpriseDB", "db.company.com", "secure*pwd123", "Blue Note", "Paris"]
    assert quoted_values("no quotes here, it's fine") == []
    assert quoted_values("' spaced ' and '' and 'a\nb'") == []  # blanks at an end, empty, a line break
    where = quoted(text, {"EnterpriseDB", "Paris"})
    assert {text[a:b] for a, b in where.items()} == {"EnterpriseDB", "Paris"}


def test_a_value_the_user_put_in_quotes_gets_the_copy_bias_once_more() -> None:
    # "a" is a span of the request too; the quoted name gets the bias twice, and its closing
    # quote only where the whole quoted value is written.
    source = "Add a server, and call it 'Enterprise DB' please."
    pieces = ["a", "Enter", "prise", " DB", '"', "please"]

    def out(text: str, quoted: tuple[str, ...] = ("Enterprise DB",)) -> list[float]:
        b = rules_for(source, copy=2.0, close=0.0, piece=pieces.__getitem__, quoted=quoted)
        b.feed(text.encode())
        return b.apply(np.zeros(len(pieces), dtype=np.float32)).tolist()

    start = '{"t":{"name":"'
    assert out(start) == [2.0, 4.0, 0.0, 0.0, -2.0, 2.0]
    assert out(start, quoted=()) == [2.0, 2.0, 0.0, 0.0, -2.0, 2.0]  # as before without it
    assert out(start + "Enter") == [-2.0, -2.0, 4.0, -2.0, -2.0, -2.0]
    # " DB" also goes on with the name the value would end short of (`cut_short`): 2 + 2 + 2.
    assert out(start + "Enterprise") == [-2.0, -2.0, -2.0, 6.0, 2.0, -2.0]  # "Enterprise" alone: once
    assert out(start + "Enterprise DB") == [-2.0, -2.0, -2.0, -2.0, 4.0, -2.0]
    # Not in a final (the turn's own level): there it is one span as any other.
    assert out('{"final":"') == [2.0, 2.0, 0.0, 0.0, -2.0, 2.0]


def test_quotes_reach_a_fields_own_name_but_not_the_tools_name() -> None:
    # A quoted value is one even if it is only the field's name ("the password is
    # 'password'"); the tool's name is chosen as it always was, whatever the quotes.
    source = "The password is 'password' for the 'car-rental' project."
    pieces = ["password", "p", "c", "car", '"']
    text = b'{"calls":[{"tool":"'

    def out(text: bytes) -> list[float]:
        b = rules_for(
            source,
            copy=2.0,
            close=0.0,
            piece=pieces.__getitem__,
            quoted=("password", "car-rental"),
            constants={"contact"},
            constant_keys={"tool"},
        )
        b.feed(text)
        return b.apply(np.zeros(len(pieces), dtype=np.float32)).tolist()

    assert out(b'{"calls":[{"tool":"t","input":{"password":"') == [4.0, 4.0, 4.0, 4.0, -2.0]
    assert out(text) == [2.0, 2.0, 2.0, 2.0, -2.0]  # spans, as before: no quote bonus
