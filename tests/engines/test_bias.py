"""The value biases (`aerix.engines._bias`): pure, no model needed."""

from __future__ import annotations

import numpy as np
import pytest

from aerix.engines._bias import JsonCursor, Spans, ValueBias


def cursor_after(text: str) -> JsonCursor:
    c = JsonCursor()
    c.feed(text)
    return c


@pytest.mark.parametrize(
    ("text", "value", "number"),
    [
        ('{"calls":[{"tool":"weather","input":{"city":"San', "San", False),
        ('{"calls":[{"tool":"weather","input":{"days":1', "1", True),
        ('{"a":-0.5', "-0.5", True),
        ('{"a":"x\\"y', 'x\\"y', False),
        ('{"a":["one","tw', "tw", False),
    ],
)
def test_the_cursor_knows_the_value_being_written(text: str, value: str, number: bool) -> None:
    c = cursor_after(text)
    assert c.value == value
    assert c.number is number
    assert c.at_value


@pytest.mark.parametrize(
    "text",
    [
        '{"ca',  # a key
        '{"calls":[{"tool":"weather","input":{"city":"Boston",',  # before the next key
        '{"a":"b"}',
        '{"a":12,"b',
        '{"a":true',
    ],
)
def test_the_cursor_is_not_in_a_value_in_keys_or_after_one(text: str) -> None:
    assert cursor_after(text).value is None


def test_a_key_or_a_literal_position_is_not_a_value_start() -> None:
    assert not cursor_after('{"a":1,').at_value  # a key comes next
    assert cursor_after('{"a":').at_value
    assert cursor_after('{"a":[1,').at_value  # arrays hold values


@pytest.mark.parametrize(
    ("text", "piece", "expected"),
    [
        ('{"city":"San', " Francisco", ("San Francisco", False, False)),
        ('{"city":"San', '"}', ("San", True, False)),
        ('{"city":"San', '",', ("San", True, False)),
        ('{"n":5', "0", ("50", False, True)),
        ('{"n":5', "}", ("5", True, True)),
        ('{"n":', "42", ("42", False, True)),
        ('{"n":', '"Bos', ("Bos", False, False)),
        ('{"n":', '"a"', ("a", True, False)),
        ('{"n":', "true", None),
        ('{"', "city", None),
    ],
)
def test_a_candidate_token_writes_a_value(
    text: str, piece: str, expected: tuple[str, bool, bool] | None
) -> None:
    assert cursor_after(text).candidate(piece) == expected


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


PIECES = ['{"city":"', "San", "Bos", " Francisco", " Fr", '"}', "ton", "1", "5", "}", "0"]


def bias(text: str, copy: float = 4.0, close: float = 0.0) -> ValueBias:
    b = ValueBias(SOURCE, copy=copy, close=close, piece=PIECES.__getitem__)
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
    b = ValueBias("Zürich", copy=1.0, close=0.0, piece=["Z", "ü", "rich", '"'].__getitem__)
    b.feed(b'{"c":"Z\xc3')
    b.feed(b"\xbc")
    out = b.apply(np.zeros(4, dtype=np.float32))
    assert out.tolist() == [0.0, 0.0, 1.0, 0.0]


@pytest.mark.parametrize(
    ("text", "closable"),
    [
        ('{"city":"Boston"', True),
        ('{"n":5', True),  # a number in progress may end with the object
        ('{"ok":true', True),
        ('{"calls":[{"tool":"t","input":{"a":1}', True),  # after a nested object
        ('{"calls":[{"tool":"t","input":{"a":1}}]', True),  # after an array
        ('{"calls":[{"tool":"t","input":{"a":1}}', False),  # in the array
        ('{"city":"Bos', False),  # inside a string
        ('{"city":', False),
        ('{"a":[1', False),  # in an array
        ('{"a":1,', False),
    ],
)
def test_the_cursor_knows_when_an_object_may_close(text: str, closable: bool) -> None:
    assert cursor_after(text).may_close is closable


def test_the_close_bias_nudges_closing_tokens_after_a_value() -> None:
    pieces = ["}", ',"', "}}", "5}", "0", '"']
    b = ValueBias("", copy=0.0, close=3.0, piece=pieces.__getitem__)
    b.feed(b'{"a":"x"')
    out = b.apply(np.zeros(len(pieces), dtype=np.float32))
    assert out.tolist() == [3.0, 0.0, 3.0, 0.0, 0.0, 0.0]
    b = ValueBias("", copy=0.0, close=3.0, piece=pieces.__getitem__)
    b.feed(b'{"a":1')
    logits = np.array([0, 1, 0, 0, 0, 0], dtype=np.float32)  # the model would end the number
    out = b.apply(logits)
    assert out.tolist() == [3.0, 1.0, 3.0, 3.0, 0.0, 0.0]  # "5}" ends the number, then closes


def test_the_close_bias_does_not_cut_a_number_short() -> None:
    pieces = ["}", ',"', "0", "5}"]
    b = ValueBias("", copy=0.0, close=3.0, piece=pieces.__getitem__)
    b.feed(b'{"a":4')
    logits = np.array([0, 0, 1, 0], dtype=np.float32)  # the model would write 40…
    assert b.apply(logits).tolist() == [0.0, 0.0, 1.0, 0.0]


def test_the_close_bias_waits_for_a_value_to_end() -> None:
    b = ValueBias("", copy=0.0, close=3.0, piece=["}", '"'].__getitem__)
    b.feed(b'{"a":"x')
    assert not b.active
    assert b.apply(np.zeros(2, dtype=np.float32)).tolist() == [0.0, 0.0]


def test_both_biases_off_change_nothing() -> None:
    b = ValueBias(SOURCE, copy=0.0, close=0.0, piece=PIECES.__getitem__)
    b.feed(b'{"city":"')
    assert not b.active
    assert b.apply(np.zeros(len(PIECES), dtype=np.float32)).tolist() == [0.0] * len(PIECES)


def test_each_occurrence_is_copied_once() -> None:
    b = ValueBias("the sides are 4 and 5", copy=1.0, close=0.0, piece=["4", "5", "}"].__getitem__)
    b.feed(b'{"x":4,"y":')
    assert b.apply(np.zeros(3, dtype=np.float32)).tolist() == [0.0, 1.0, 0.0]  # 4 is taken


def test_a_repeated_value_may_be_copied_as_often_as_the_request_repeats_it() -> None:
    spans = Spans("from 4 to 4")
    spans.use("4")
    assert spans.match("4", whole=True)
    spans.use("4")
    assert not spans.match("4", whole=True)


def test_a_string_value_takes_its_occurrence_too() -> None:
    b = ValueBias("Lisbon or Porto", copy=1.0, close=0.0, piece=["Lisbon", "Porto"].__getitem__)
    b.feed(b'{"a":"Lisbon","b":"')
    assert b.apply(np.zeros(2, dtype=np.float32)).tolist() == [0.0, 1.0]


def test_numbers_are_copied_without_thousands_separators() -> None:
    pieces = ["2", "0", "}", ","]
    b = ValueBias("a net income of $2,000,000 in 2,3", copy=1.0, close=0.0, piece=pieces.__getitem__)
    b.feed(b'{"income":200')
    assert b.apply(np.zeros(4, dtype=np.float32)).tolist() == [0.0, 1.0, 0.0, 0.0]  # on to 2000000
    b.feed(b"0000")
    assert b.apply(np.zeros(4, dtype=np.float32)).tolist() == [0.0, 0.0, 1.0, 1.0]  # a whole span
    b = ValueBias("sides 2,3", copy=1.0, close=0.0, piece=pieces.__getitem__)
    b.feed(b'{"a":2')
    assert b.apply(np.zeros(4, dtype=np.float32)).tolist() == [0.0, 0.0, 1.0, 1.0]  # "2,3" is a list
