"""`json_writer` writes what `json.JSONEncoder.encode` writes, and raises what it raises."""

from __future__ import annotations

import enum
import json
import json.encoder
import math
from collections.abc import Callable
from typing import Any

import pytest

from aerix._json import json_writer


class Color(enum.StrEnum):
    RED = "red"


def _cycle() -> list[Any]:
    c: list[Any] = []
    c.append(c)
    return c


def _deep(n: int) -> list[Any]:
    v: list[Any] = []
    for _ in range(n):
        v = [v]
    return v


VALUES: dict[str, Callable[[], Any]] = {
    "int": lambda: 3,
    "huge int": lambda: 10**40,
    "float": lambda: 1.5,
    "negative zero": lambda: -0.0,
    "string": lambda: 'é\u2028\x00"x',
    "bool and null": lambda: [True, False, None],
    "nested": lambda: {"z": [1, {"b": 2, "a": 3.0}], "a": {"y": None}},
    "str enum": lambda: Color.RED,
    "keys of other types": lambda: {1: "a", False: "b", None: "c", 2.5: "d"},
    "nan": lambda: math.nan,
    "inf in a list": lambda: [1, math.inf],
    "object": object,
    "bytes": lambda: b"x",
    "tuple key": lambda: {(1, 2): 3},
    "cycle": _cycle,
    "too deep": lambda: _deep(100_000),
}

OPTIONS: list[dict[str, Any]] = [
    {"ensure_ascii": False, "allow_nan": False},  # a tool's result
    {"sort_keys": True, "default": repr, "check_circular": False},  # a call's key for the repeat rule
    {"sort_keys": True, "allow_nan": False},
    {},
]


def _outcome(write: Callable[[Any], str], value: Any) -> tuple[str, str]:
    try:
        return "text", write(value)
    except Exception as exc:  # the error's type and message are the outcome
        return type(exc).__name__, str(exc)


@pytest.mark.parametrize("options", OPTIONS, ids=lambda o: ",".join(o) or "defaults")
@pytest.mark.parametrize("name", sorted(VALUES))
def test_the_same_text_and_errors_as_the_standard_encoder(name: str, options: dict[str, Any]) -> None:
    value = VALUES[name]()
    want = _outcome(json.JSONEncoder(**options).encode, value)
    got = _outcome(json_writer(**options), value)  # (one value for both: an object's repr names its address)
    assert got == want


def test_a_cycle_is_named_as_one_at_once() -> None:
    # found where it closes, not by recursing until Python's limit (a wide value beside it
    # would be written again at every level)
    wide: dict[str, Any] = {"items": list(range(1000))}
    wide["self"] = wide
    for value in (_cycle(), wide):
        assert _outcome(json_writer(), value) == ("ValueError", "Circular reference detected")
    seen: list[object] = []
    looped: dict[str, Any] = {"first": object()}
    looped["self"] = looped
    write = json_writer(default=lambda v: seen.append(v) or "x")
    assert _outcome(write, looped)[0] == "ValueError" and len(seen) == 1  # `first` written once
    assert _outcome(json_writer(check_circular=False), _cycle())[0] == "RecursionError"  # as `encode`


def test_each_call_of_a_checking_writer_has_its_own_record() -> None:
    write = json_writer()
    shared = [1, 2]
    assert write([shared, shared]) == "[[1, 2], [1, 2]]"  # one list twice is no cycle
    assert _outcome(write, _cycle())[0] == "ValueError"
    assert write(shared) == "[1, 2]"  # nothing left over from the failed call


def test_without_the_c_encoder_it_is_the_standard_encode(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(json.encoder, "c_make_encoder", None)
    write = json_writer(sort_keys=True)
    assert write({"b": 1, "a": [1.0, "é"]}) == '{"a": [1.0, "\\u00e9"], "b": 1}'
    assert _outcome(write, _cycle()) == ("ValueError", "Circular reference detected")


def test_one_writer_serves_many_calls_and_threads() -> None:
    import concurrent.futures

    values = [{"n": i, "s": "x" * (i % 7), "l": list(range(i % 5))} for i in range(2000)]
    for check_circular in (True, False):
        write = json_writer(sort_keys=True, check_circular=check_circular)
        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            texts = list(pool.map(write, values))
        assert texts == [json.dumps(v, sort_keys=True) for v in values]
