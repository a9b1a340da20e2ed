"""Events: frozen, typed, matchable, and plain JSON through to_dict()."""

from __future__ import annotations

import dataclasses
import enum
import json

import pytest

from aerix import (
    Call,
    CallEvent,
    EndEvent,
    FinalEvent,
    ResultEvent,
    RetryEvent,
    TextEvent,
    TrimEvent,
    TurnEvent,
    UsageEvent,
)

EVENTS = [
    TextEvent(text="{"),
    UsageEvent(prompt_tokens=10, completion_tokens=2, cached_tokens=8),
    TurnEvent(turn=1, calls=(Call(id="call_1", tool="t", input={"a": 1}),), thought="hm"),
    CallEvent(id="call_1", tool="t", input={"a": 1}),
    ResultEvent(id="call_1", tool="t", text="ok", error=False),
    RetryEvent(turn=2, reason="not JSON"),
    TrimEvent(dropped=4, kept=7),
    FinalEvent(text="done", thought=None),
    EndEvent(reason="abort", message="aborted"),
]


@pytest.mark.parametrize("ev", EVENTS, ids=lambda e: e.type)
def test_to_dict_is_plain_json_with_the_type(ev: object) -> None:
    d = ev.to_dict()  # type: ignore[attr-defined]
    assert d["type"] == ev.type  # type: ignore[attr-defined]
    assert json.loads(json.dumps(d)) == d
    fields = {f.name for f in dataclasses.fields(ev)}  # type: ignore[arg-type]
    if isinstance(ev, FinalEvent):  # a text answer's output is its text: not repeated
        fields.discard("output")
    if isinstance(ev, EndEvent) and not ev.pending:  # only a paused run's end has calls waiting
        fields.discard("pending")
    assert set(d) == fields


@pytest.mark.parametrize("ev", EVENTS, ids=lambda e: e.type)
def test_events_are_frozen(ev: object) -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        ev.type = "x"  # type: ignore[attr-defined]


def test_types_and_match() -> None:
    assert [e.type for e in EVENTS] == [
        "text",
        "usage",
        "turn",
        "call",
        "result",
        "retry",
        "trim",
        "final",
        "end",
    ]
    match EVENTS[-1]:
        case EndEvent(reason="abort", message=m):
            assert m == "aborted"
        case _:
            pytest.fail("no match")
    assert EVENTS[2].to_dict()["calls"] == [{"id": "call_1", "tool": "t", "input": {"a": 1}}]


def test_type_cannot_be_passed() -> None:
    with pytest.raises(TypeError):
        FinalEvent(type="end", text="x")  # type: ignore[call-arg]


def test_reprs_are_short_and_leave_out_the_type() -> None:
    assert [repr(e) for e in EVENTS] == [
        "TextEvent(text='{')",
        "UsageEvent(prompt_tokens=10, completion_tokens=2, cached_tokens=8)",
        "TurnEvent(turn=1, calls=(Call(id='call_1', tool='t', input={'a': 1}),), thought='hm')",
        "CallEvent(id='call_1', tool='t', input={'a': 1})",
        "ResultEvent(id='call_1', tool='t', text='ok', error=False)",
        "RetryEvent(turn=2, reason='not JSON')",
        "TrimEvent(dropped=4, kept=7)",
        "FinalEvent(text='done', thought=None)",
        "EndEvent(reason='abort', message='aborted')",
    ]
    assert repr(Call(id="call_1", tool="t", input={})) == "Call(id='call_1', tool='t', input={})"


def test_long_values_are_cut_with_an_ellipsis_in_the_repr_only() -> None:
    text = "y" * 500
    ev = ResultEvent(id="call_1", tool="t", text=text)
    assert repr(ev) == f"ResultEvent(id='call_1', tool='t', text='{'y' * 59}…', error=False)"
    assert ev.text == text and ev.to_dict()["text"] == text
    big = CallEvent(id="call_2", tool="t", input={f"k{i}": i for i in range(50)})
    shown = repr(big)
    assert shown.startswith("CallEvent(id='call_2', tool='t', input={'k0': 0, 'k1': 1,") and shown.endswith(
        "…)"
    )
    assert len(shown) < 120
    many = TurnEvent(turn=1, calls=tuple(Call(id=f"call_{i}", tool="t", input={}) for i in range(8)))
    assert len(repr(many)) < 140 and repr(many).endswith("…, thought=None)")


def test_equality_is_unchanged_by_the_reprs() -> None:
    assert TextEvent(text="a" * 100) == TextEvent(text="a" * 100)
    assert TextEvent(text="a" * 100) != TextEvent(text="a" * 99 + "b")  # same repr, not equal
    assert repr(TextEvent(text="a" * 100)) == repr(TextEvent(text="a" * 99 + "b"))


# -- typed answers (FinalEvent.output) --------------------------------------------------


@dataclasses.dataclass
class Point:
    x: int
    y: int


class Unit(enum.Enum):
    C = "c"
    F = "f"


def test_a_text_final_has_its_text_as_output() -> None:
    ev = FinalEvent(text="done")
    assert ev.output == "done" and ev == FinalEvent(text="done", output="done")
    assert ev != FinalEvent(text="done", output={"x": 1})


def test_a_typed_final_carries_its_output_as_plain_json() -> None:
    ev = FinalEvent(text='{"x": 1, "y": 2}', output=Point(1, 2))
    d = ev.to_dict()
    assert d == {"type": "final", "text": '{"x": 1, "y": 2}', "thought": None, "output": {"x": 1, "y": 2}}
    assert json.loads(json.dumps(d)) == d
    assert repr(ev) == 'FinalEvent(text=\'{"x": 1, "y": 2}\', thought=None, output=Point(x=1, y=2))'


@pytest.mark.parametrize(
    ("output", "plain"),
    [
        (3, 3),
        (None, None),
        ("c", "c"),
        (Unit.F, "f"),
        ([Point(1, 2), Point(3, 4)], [{"x": 1, "y": 2}, {"x": 3, "y": 4}]),
        ({"a": (Unit.C, 1.5)}, {"a": ["c", 1.5]}),
    ],
)
def test_typed_outputs_of_every_kind_become_plain_json(output: object, plain: object) -> None:
    text = json.dumps(plain)
    assert FinalEvent(text=text, output=output).to_dict()["output"] == plain


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


class Colour(enum.StrEnum):
    RED = "red"


@pytest.mark.parametrize(
    ("output", "plain"),
    [(Level.HIGH, 2), (Colour.RED, "red"), ([Level.LOW], [1]), ({"c": Colour.RED}, {"c": "red"})],
)
def test_int_and_str_enum_members_become_their_plain_values(output: object, plain: object) -> None:
    # An IntEnum member is an int and a StrEnum member a str, but not plain JSON: its values are.
    out = FinalEvent(text=json.dumps(plain), output=output).to_dict()["output"]
    assert out == plain and _exactly_plain(out), out


def _exactly_plain(value: object) -> bool:
    """Whether `value` is made of JSON's own Python types only (no subclass of them)."""
    if isinstance(value, list):
        return all(_exactly_plain(v) for v in value)
    if isinstance(value, dict):
        return all(type(k) is str and _exactly_plain(v) for k, v in value.items())
    return type(value) in (str, int, float, bool, type(None))


def test_a_pydantic_output_is_dumped_as_json() -> None:
    pydantic = pytest.importorskip("pydantic")

    class Trip(pydantic.BaseModel):  # type: ignore[name-defined,misc]
        city: str
        days: int

    ev = FinalEvent(text='{"city": "Porto", "days": 3}', output=Trip(city="Porto", days=3))
    assert ev.to_dict()["output"] == {"city": "Porto", "days": 3}


def test_a_pydantic_output_is_dumped_by_its_aliases_as_its_schema_and_text_are() -> None:
    pydantic = pytest.importorskip("pydantic")

    class Person(pydantic.BaseModel):  # type: ignore[name-defined,misc]
        first_name: str = pydantic.Field(alias="firstName")

    ev = FinalEvent(text='{"firstName": "Ann"}', output=Person(firstName="Ann"))
    assert ev.to_dict()["output"] == {"firstName": "Ann"}
    assert Person.model_validate(ev.to_dict()["output"]) == ev.output


def test_a_pydantic_dataclass_output_is_dumped_by_its_aliases_too() -> None:
    pydantic = pytest.importorskip("pydantic")
    dataclasses = pytest.importorskip("pydantic.dataclasses")

    @dataclasses.dataclass
    class Person:
        first_name: str = pydantic.Field(alias="firstName")

    person = pydantic.TypeAdapter(Person).validate_python({"firstName": "Ann"})
    ev = FinalEvent(text='{"firstName": "Ann"}', output=person)
    assert ev.to_dict()["output"] == {"firstName": "Ann"}
