"""Typed answers (SPEC 9.2): `Agent(output=T)`, the final decoded under T's schema, checked, converted."""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass
from typing import Annotated, Any, Literal, NotRequired, TypedDict

import pytest

from _tools import weather
from aerix import AerixError, Agent, EndEvent, FinalEvent, RetryEvent
from aerix.testing import ScriptedModel
from aerix.turn import decoded_schema, turn_schema


@dataclass
class Trip:
    """A trip plan.

    Attributes:
        city: Where to go
        days: How many days
    """

    city: str
    days: int


class Unit(enum.Enum):
    C = "c"
    F = "f"


class Forecast(TypedDict):
    city: str
    high: int
    note: NotRequired[str]


def final(value: Any) -> str:
    return json.dumps({"final": value})


def agent_with(*script: Any, **kw: Any) -> tuple[Agent, ScriptedModel]:
    model = ScriptedModel(script)
    return Agent(model=model, **kw), model


async def test_a_dataclass_answer_is_decoded_checked_and_converted() -> None:
    agent, model = agent_with(final({"city": "Porto", "days": 3}), tools=[weather], output=Trip)
    answer = await agent.ask("Plan a trip to Porto.")
    assert answer.output == Trip(city="Porto", days=3)
    assert answer.text == '{"city": "Porto", "days": 3}'
    ev = answer.events[-1]
    assert isinstance(ev, FinalEvent) and ev.output == Trip(city="Porto", days=3) and ev.text == answer.text
    assert ev.to_dict() == {
        "type": "final",
        "text": '{"city": "Porto", "days": 3}',
        "thought": None,
        "output": {"city": "Porto", "days": 3},
    }
    shapes = model.calls[0].opts["constraint"]["json"]["anyOf"]
    assert shapes[1]["properties"]["final"] == decoded_schema(agent._contract.output.schema)  # type: ignore[arg-type]
    assert shapes[1]["properties"]["final"]["properties"]["days"]["type"] == "integer"
    assert agent.messages[-1]["content"] == final({"city": "Porto", "days": 3})  # the reply as it was
    assert repr(answer).startswith(
        'Answer(text=\'{"city": "Porto", "days": 3}\', output=Trip(city=\'Porto\', days=3)'
    )


async def test_the_text_of_a_typed_answer_is_its_json_without_ascii_escapes() -> None:
    agent, _ = agent_with(final(["Grüß", "日本"]), output=list[str])
    answer = await agent.ask("q")
    assert answer.output == ["Grüß", "日本"] and answer.text == '["Grüß", "日本"]'


@pytest.mark.parametrize(
    ("output", "value", "converted"),
    [
        (int, 42, 42),
        (float, 3, 3.0),
        (bool, True, True),
        (list[int], [1, 2], [1, 2]),
        (dict[str, int], {"a": 1}, {"a": 1}),
        (Literal["yes", "no"], "yes", "yes"),
        (Unit, "f", Unit.F),
        (Forecast, {"city": "Lisbon", "high": 21}, {"city": "Lisbon", "high": 21}),
        (list[Trip], [{"city": "Porto", "days": 2}], [Trip("Porto", 2)]),
        (int | None, None, None),
        ({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}, {"n": 1}, {"n": 1}),
        ({"type": "string"}, "abc", "abc"),
    ],
)
async def test_every_kind_of_answer_type(output: Any, value: Any, converted: Any) -> None:
    agent, _ = agent_with(final(value), output=output)
    answer = await agent.ask("q")
    assert answer.output == converted and type(answer.output) is type(converted)
    plain = json.loads(json.dumps(answer.events[-1].to_dict()))["output"]
    assert plain == value
    # the text is the converted value's JSON, as `to_dict` carries it: 3.0 for a float answer of 3
    assert answer.text == json.dumps(plain, ensure_ascii=False)


@pytest.mark.parametrize(
    ("output", "value", "converted", "text"),
    [
        (float | None, 3, 3.0, "3.0"),
        (float | None, None, None, "null"),
        (Annotated[float, "a price"], 3, 3.0, "3.0"),
        (list[float], [3, 1.5], [3.0, 1.5], "[3.0, 1.5]"),
        (dict[str, float], {"a": 3}, {"a": 3.0}, '{"a": 3.0}'),
        (
            list[dict[str, float | None]],
            [{"a": 2, "b": None}],
            [{"a": 2.0, "b": None}],
            '[{"a": 2.0, "b": null}]',
        ),
        (list[int], [3], [3], "[3]"),
    ],
)
async def test_a_float_answer_reads_as_a_float_however_it_is_wrapped(
    output: Any, value: Any, converted: Any, text: str
) -> None:
    agent, _ = agent_with(final(value), output=output)
    answer = await agent.ask("q")
    assert answer.output == converted and json.dumps(answer.output) == text
    assert answer.text == text and answer.events[-1].to_dict()["output"] == converted


async def test_a_pydantic_answer() -> None:
    pydantic = pytest.importorskip("pydantic")

    class Report(pydantic.BaseModel):  # type: ignore[name-defined,misc]
        city: str
        high: int

        @pydantic.field_validator("high")  # type: ignore[untyped-decorator]
        @classmethod
        def plausible(cls, v: int) -> int:
            if v > 60:
                raise ValueError("too hot to be true")
            return v

    agent, model = agent_with(
        final({"city": "Lisbon", "high": 99}), final({"city": "Lisbon", "high": 21}), output=Report
    )
    events = [ev async for ev in agent.run("q")]
    retry = next(e for e in events if isinstance(e, RetryEvent))
    assert retry.reason == "final.high: Value error, too hot to be true"  # its path, one line, no link
    ending = events[-1]
    assert isinstance(ending, FinalEvent) and ending.output == Report(city="Lisbon", high=21)
    assert ending.to_dict()["output"] == {"city": "Lisbon", "high": 21}


async def test_a_final_that_fails_the_type_is_a_bad_turn_retried_with_the_reason() -> None:
    agent, model = agent_with(
        final({"city": "Porto", "days": "3"}),
        final("Porto, 3 days"),
        final({"city": "Porto", "days": 3}),
        output=Trip,
    )
    events = [ev async for ev in agent.run("q")]
    reasons = [e.reason for e in events if isinstance(e, RetryEvent)]
    assert reasons == [
        'final.days: expected integer, got "3"',
        'final: expected object, got "Porto, 3 days"',
    ]
    assert "not valid: final.days: expected integer" in model.calls[1].messages[-1]["content"]
    assert isinstance(events[-1], FinalEvent) and events[-1].output == Trip("Porto", 3)
    assert [m["content"] for m in agent.messages] == [
        "q",
        final({"city": "Porto", "days": 3}),
    ]  # retries forgotten


async def test_bad_typed_finals_count_against_retries() -> None:
    agent, model = agent_with(final("x"), final("y"), final(1), limits={"retries": 1}, output=int)
    events = [ev async for ev in agent.run("q")]
    assert isinstance(events[-1], EndEvent) and events[-1].reason == "retries"
    assert "2 bad turns in a row" in events[-1].message and "final: expected integer" in events[-1].message
    assert len(model.calls) == 2


async def test_on_final_gets_the_text_of_a_typed_answer() -> None:
    seen: list[str] = []

    def on_final(text: str) -> dict[str, str] | None:
        seen.append(text)
        return {"continue": "More days."} if len(seen) == 1 else None

    agent, _ = agent_with(
        final({"city": "Porto", "days": 1}),
        final({"city": "Porto", "days": 4}),
        output=Trip,
        hooks={"on_final": on_final},
    )
    answer = await agent.ask("q")
    assert seen == ['{"city": "Porto", "days": 1}', '{"city": "Porto", "days": 4}']
    assert answer.output == Trip("Porto", 4)


async def test_a_text_answer_is_unchanged() -> None:
    agent, model = agent_with(final("Sunny"), tools=[weather])
    answer = await agent.ask("q")
    assert answer.output == answer.text == "Sunny"
    assert answer.events[-1].to_dict() == {"type": "final", "text": "Sunny", "thought": None}
    assert model.calls[0].opts["constraint"]["json"] == turn_schema([weather], max_tokens=512)


def test_the_system_message_says_what_the_final_must_be(golden) -> None:  # type: ignore[no-untyped-def]
    agent, model = agent_with(
        final({"city": "Porto", "days": 3}), instructions="Plan trips.", tools=[weather], output=Trip
    )
    golden("system_typed.txt", agent.system + "\n")
    agent.ask_sync("q")
    golden("schema_typed.json", json.dumps(model.calls[0].opts["constraint"]["json"], indent=2) + "\n")
    alone, _ = agent_with(output=list[Trip])
    golden("system_typed_no_tools.txt", alone.system + "\n")


@pytest.mark.parametrize(
    ("output", "message"),
    [
        (3, "output=3 is not a type; use str (a text answer, the default), a type that @tool takes"),
        ("str", "output='str' is not a type; use str"),
        (None, "output=None is not a type; use str"),
        ([int], "output=[<class 'int'>] is not a type"),
        (set[int], "output has annotation set[int]; use str, int, float, bool"),
        (object, "output has annotation object; use str, int"),
        (int | str, "output has annotation int | str (a union other than T | None)"),
        (
            {"type": "object", "propertys": {}},
            "output: unsupported JSON Schema keyword 'propertys' at schema",
        ),
        ({"$ref": "#/$defs/nowhere"}, "nowhere"),
    ],
)
def test_an_answer_type_aerix_cannot_take_is_refused_naming_it(output: Any, message: str) -> None:
    with pytest.raises(AerixError) as info:
        Agent(model=ScriptedModel(), output=output)
    assert info.value.kind == "options"
    assert message in info.value.message, info.value.message


def test_an_answer_type_that_the_local_constraint_cannot_decode_is_refused_at_construction() -> None:
    pytest.importorskip("llguidance")
    schema = {"type": "object", "properties": {"a": {"type": "string", "pattern": "(?=a)a"}}}  # look-around
    with pytest.raises(AerixError) as info:
        Agent(model=ScriptedModel(), output=schema)
    assert (
        info.value.kind == "options"
        and "output" in info.value.message
        and "look-around" in info.value.message
    )
    assert Agent(model=ScriptedModel(), output=schema, constrain=False)._contract.output.schema is not None


async def test_an_overlapping_one_of_answer_is_decoded_as_any_of_and_checked_exactly() -> None:
    pytest.importorskip("llguidance")
    objects = [{"type": "object", "properties": {k: {"type": "string"}}} for k in ("a", "b")]
    schema = {"oneOf": objects}  # two shapes that may overlap: llguidance decodes it as anyOf
    model = ScriptedModel(['{"final":{"a":"x","b":"y"}}', '{"final":{"a":"x","b":3}}'])
    agent = Agent(model=model, output=schema)
    events = [ev async for ev in agent.run("q")]
    retry = next(e for e in events if isinstance(e, RetryEvent))
    assert "fits 2 of oneOf's 2 choices" in retry.reason  # {"a","b"} fits both: not exactly one
    assert isinstance(events[-1], FinalEvent) and events[-1].output == {"a": "x", "b": 3}


def test_a_server_gets_the_typed_final_in_its_structured_output() -> None:
    from aerix.engines.openai._chat_request import build_body

    agent, model = agent_with(final({"city": "Porto", "days": 3}), output=Trip)
    agent.ask_sync("q")
    opts = model.calls[0].opts
    body = build_body("m", model.calls[0].messages, opts, dialect="json_schema", extra_body={})  # type: ignore[arg-type]
    sent = body["response_format"]["json_schema"]["schema"]
    assert sent == opts["constraint"]["json"]
    assert sent["anyOf"][0]["properties"]["final"]["properties"]["days"]["type"] == "integer"


async def test_a_described_str_answer_is_text_as_str_is() -> None:
    from typing import Annotated

    model = ScriptedModel(['{"final":"hi"}'])
    agent = Agent(model=model, output=Annotated[str, "a short answer"])
    assert "- final (string; required): a short answer" in agent.system
    events = [ev async for ev in agent.run("go")]
    final = events[-1]
    assert isinstance(final, FinalEvent) and final.text == "hi" and final.output == "hi"
    assert final.to_dict() == {"type": "final", "text": "hi", "thought": None}


@pytest.mark.parametrize(
    "first",
    ['{"final":1e999}', '{"calls":[{"tool":"scale","input":{"factor":-1e999}}]}'],
)
async def test_a_number_too_large_for_a_float_is_a_bad_turn_retried_with_numbers_bounded(first: str) -> None:
    """JSON's grammar takes `1e999`, which Python reads as infinity: neither a final nor a
    call may carry it (no check could take it); the retry bounds numbers, as a cut turn's."""
    from aerix import tool

    @tool
    def scale(factor: float) -> str:
        """Scale by a factor."""
        return f"scaled by {factor}"

    agent, model = agent_with(first, final(2.5), tools=[scale], output=float)
    answer = await agent.ask("Scale it by 1e999.")
    retry = next(ev for ev in answer.events if isinstance(ev, RetryEvent))
    assert retry.reason.startswith("the number ") and "1e999 is too large" in retry.reason
    assert not any(ev.type in ("call", "result") for ev in answer.events)
    assert answer.output == 2.5
    first_schema = json.dumps(model.calls[0].opts["constraint"]["json"])
    again = json.dumps(model.calls[1].opts["constraint"]["json"])
    assert "multipleOf" not in first_schema and "multipleOf" in again  # numbers bounded: no exponent
    assert all(ev.to_dict() == json.loads(json.dumps(ev.to_dict(), allow_nan=False)) for ev in answer.events)
