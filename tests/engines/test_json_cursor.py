"""The JSON cursor of the value rules (`aerix.engines.llamacpp.rules._json_cursor`): pure, no model needed."""

from __future__ import annotations

import pytest

from aerix.engines.llamacpp.rules._json_cursor import JsonCursor


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


def test_the_cursor_keeps_the_latest_key() -> None:
    c = cursor_after('{"calls":[{"tool":"route","input":{"avoid_tolls":')
    assert c.key == "avoid_tolls"
    assert c.at_literal
    assert not cursor_after('{"a":1').at_literal
    assert not cursor_after('{"a":"').at_literal
    assert not cursor_after('{"a":[').at_literal  # an array item, not a field


def test_the_cursor_knows_the_keys_written_in_the_innermost_object() -> None:
    c = cursor_after('{"calls":[{"tool":"t","input":{"origin":"New York","destination":"Bo')
    assert c.written == ("origin", "destination")
    c.feed('ston"}')
    assert c.written == ("tool", "input")  # back in the call
    assert cursor_after('{"a":[1,').written == ()
    assert cursor_after("").written == ()


@pytest.mark.parametrize(
    ("text", "container", "path"),
    [
        ("{", (), ("",)),
        ('{"calls":[{"tool":"wea', ("calls", None), ("calls", None, "tool")),
        (
            '{"calls":[{"tool":"weather","input":{"city":',
            ("calls", None, "input"),
            ("calls", None, "input", "city"),
        ),
        (
            '{"calls":[{"tool":"w","input":{"a":{"b":[1,[2',
            ("calls", None, "input", "a", "b", None),
            ("calls", None, "input", "a", "b", None, None),
        ),
        ('{"calls":[{"tool":"w","input":{"a":{"b":1}}}],"thought":"', (), ("thought",)),
        ('{"calls":[{"tool":"w","input":{}},{"tool":"', ("calls", None), ("calls", None, "tool")),
        ('{"final":"', (), ("final",)),
    ],
)
def test_the_cursor_knows_where_it_is(
    text: str, container: tuple[str | None, ...], path: tuple[str | None, ...]
) -> None:
    c = cursor_after(text)
    assert c.container == container and c.path == path
    assert c.copy(None).path == path
