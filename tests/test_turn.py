"""The turn contract: system rendering and turn schema (golden), parsing, messages."""

from __future__ import annotations

import json

import pytest

from _tools import TOOL_SETS, clock, convert, weather
from aerix import Field, tool
from aerix.turn import (
    DECODED_CALLS,
    FRACTION_DIGITS,
    MAX_CALLS,
    MAX_INTEGER,
    MAX_THOUGHT,
    RETRY_FINAL_CHARS,
    RETRY_MARGIN_TOKENS,
    RETRY_STRING_CHARS,
    BadTurn,
    Turn,
    input_schema,
    parse_turn,
    render_results,
    render_retry,
    render_system,
    turn_schema,
)

INSTRUCTIONS = "You are a travel helper. Use the tools to answer."


@pytest.mark.parametrize("name", sorted(TOOL_SETS))
def test_system_message_golden(name: str, golden) -> None:  # type: ignore[no-untyped-def]
    golden(f"system_{name}.txt", render_system(INSTRUCTIONS, TOOL_SETS[name]) + "\n")


@pytest.mark.parametrize("name", sorted(TOOL_SETS))
def test_turn_schema_golden(name: str, golden) -> None:  # type: ignore[no-untyped-def]
    golden(f"schema_{name}.json", json.dumps(turn_schema(TOOL_SETS[name]), indent=2) + "\n")


@pytest.mark.parametrize("choice", ["required", "none", "weather"])
def test_turn_schema_tool_choice_golden(choice: str, golden) -> None:  # type: ignore[no-untyped-def]
    schema = turn_schema(TOOL_SETS["many"], choice)
    golden(f"schema_many_{choice}.json", json.dumps(schema, indent=2) + "\n")


def test_short_schema_golden(golden) -> None:  # type: ignore[no-untyped-def]
    golden("schema_many_short.json", json.dumps(turn_schema(TOOL_SETS["many"], short=True), indent=2) + "\n")


def test_results_message_golden(golden) -> None:  # type: ignore[no-untyped-def]
    text = render_results(
        [("call_1", "weather", "Sunny in Lisbon, 21°c"), ("call_2", "clock", "error: boom")], dropped=2
    )
    golden("results.txt", text + "\n")


def test_system_without_instructions_starts_with_the_contract() -> None:
    assert render_system("   ", [weather]).startswith("Answer every turn with one JSON object")


def test_no_tools_means_only_a_final() -> None:
    schema = turn_schema([])
    assert [s["required"] for s in schema["anyOf"]] == [["final"]]
    assert "calls" not in render_system("", [])


def test_schema_has_two_shapes_and_each_call_is_one_tool() -> None:
    schema = turn_schema([weather, clock])
    calls, final = schema["anyOf"]
    assert calls["required"] == ["calls"] and final["required"] == ["final"]
    items = calls["properties"]["calls"]["items"]["anyOf"]
    assert [i["properties"]["tool"] for i in items] == [{"const": "weather"}, {"const": "clock"}]
    assert items[0]["properties"]["input"] == input_schema(weather)
    assert all(i["additionalProperties"] is False for i in items)
    assert calls["properties"]["calls"]["maxItems"] == DECODED_CALLS == 1


def test_the_thought_comes_after_the_calls_or_the_answer() -> None:
    for shape in turn_schema([weather])["anyOf"]:
        assert list(shape["properties"])[-1] == "thought"
    assert all("thought" not in s["properties"] for s in turn_schema([weather], short=True)["anyOf"])


MIXED = tool(
    name="mixed",
    description="Fields out of order.",
    input={
        "note": Field("string"),
        "count": Field("integer", required=True),
        "ratio": Field("number"),
        "size": Field("number", required=True, enum=[1.5, 2.5]),
    },
    run=lambda input: "ok",
)


def test_the_decoded_input_puts_required_fields_first_and_bounds_integers() -> None:
    decoded = input_schema(MIXED)
    assert list(decoded["properties"]) == ["count", "size", "note", "ratio"]
    assert decoded["required"] == MIXED.schema["required"] and decoded["additionalProperties"] is False
    assert decoded["properties"]["count"] == {
        "type": "integer",
        "minimum": -MAX_INTEGER,
        "maximum": MAX_INTEGER,
    }
    assert decoded["properties"]["ratio"] == {"type": "number"}  # free: exponents allowed
    assert decoded["properties"]["size"] == MIXED.schema["properties"]["size"]  # an enum is bound already
    assert list(MIXED.schema["properties"]) == ["note", "count", "ratio", "size"]  # the tool is untouched


def test_a_retry_bounds_numbers_to_a_fixed_number_of_decimals() -> None:
    bounded = input_schema(MIXED, bounded=True)["properties"]["ratio"]
    assert bounded == {
        "type": "number",
        "minimum": -MAX_INTEGER,
        "maximum": MAX_INTEGER,
        "multipleOf": 10.0**-FRACTION_DIGITS,
    }
    assert input_schema(MIXED, bounded=True)["properties"]["note"] == {
        "type": "string",
        "maxLength": RETRY_STRING_CHARS,
    }
    short = turn_schema([MIXED], "required", short=True)["anyOf"][0]
    assert short["properties"]["calls"]["items"]["properties"]["input"]["properties"]["ratio"] == bounded
    final = turn_schema([MIXED], short=True)["anyOf"][1]
    assert final["properties"] == {"final": {"type": "string", "maxLength": RETRY_FINAL_CHARS}}


@pytest.mark.parametrize(
    ("max_tokens", "length"),
    [(None, RETRY_FINAL_CHARS), (512, RETRY_FINAL_CHARS), (256, 256 - RETRY_MARGIN_TOKENS), (8, 1)],
)
def test_a_retrys_final_fits_in_max_tokens_even_at_one_character_a_token(
    max_tokens: int | None, length: int
) -> None:
    final = turn_schema([MIXED], "none", short=True, max_tokens=max_tokens)["anyOf"][0]
    assert final["properties"]["final"] == {"type": "string", "maxLength": length}
    assert (
        "maxLength"
        not in turn_schema([MIXED], "none", max_tokens=max_tokens)["anyOf"][0]["properties"]["final"]
    )


def test_tool_choice_shapes() -> None:
    assert [s["required"] for s in turn_schema([weather], "required")["anyOf"]] == [["calls"]]
    assert [s["required"] for s in turn_schema([weather], "none")["anyOf"]] == [["final"]]
    only = turn_schema([weather, clock], "clock")["anyOf"]
    assert only[0]["properties"]["calls"]["items"]["properties"]["tool"] == {"const": "clock"}


CALL = '{"calls":[{"tool":"weather","input":{"city":"Lisbon"}}]}'


def test_parse_calls_and_final() -> None:
    turn = parse_turn(CALL, [weather])
    assert isinstance(turn, Turn)
    assert turn.calls[0].tool == "weather" and turn.calls[0].input == {"city": "Lisbon"}
    final = parse_turn('{"final":"Yes","thought":"rain"}', [weather])
    assert isinstance(final, Turn) and final.final == "Yes" and final.thought == "rain"


def test_parse_keeps_whitespace_tolerance() -> None:
    assert isinstance(parse_turn("  \n" + CALL + "\n ", [weather]), Turn)


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("", "not JSON"),
        ("Sure! " + CALL, "not JSON"),
        ("[1, 2]", "not a JSON object"),
        ('{"calls":[], "final":"x"}', "not one of the two shapes"),
        ("{}", "not one of the two shapes"),
        ('{"final":"x","extra":1}', "not one of the two shapes"),
        ('{"final": 3}', '"final" must be a string'),
        ('{"final":"x","thought":1}', '"thought" must be a string'),
        ('{"calls":[]}', "empty"),
        ('{"calls":{}}', "must be a list"),
        ('{"calls":[{"tool":"nope","input":{}}]}', "unknown tool"),
        ('{"calls":[{"tool":"weather"}]}', "call 1 must be"),
        ('{"calls":[{"tool":"weather","input":[]}]}', "input must be an object"),
        ("[" * 100000, "not JSON"),
    ],
)
def test_parse_refuses_bad_turns(text: str, reason: str) -> None:
    turn = parse_turn(text, [weather])
    assert isinstance(turn, BadTurn)
    assert reason in turn.reason


def test_parse_keeps_at_most_eight_calls_and_cuts_the_thought() -> None:
    calls = ",".join(['{"tool":"clock","input":{}}'] * 11)
    turn = parse_turn('{"thought":"' + "x" * 700 + '","calls":[' + calls + "]}", [clock])
    assert isinstance(turn, Turn)
    assert len(turn.calls) == MAX_CALLS and turn.dropped == 3
    assert turn.thought == "x" * MAX_THOUGHT


def test_parse_honours_tool_choice() -> None:
    assert isinstance(parse_turn('{"final":"x"}', [weather], "required"), BadTurn)
    assert isinstance(parse_turn(CALL, [weather], "none"), BadTurn)
    assert isinstance(parse_turn(CALL, [weather, clock], "clock"), BadTurn)
    assert isinstance(parse_turn(CALL, [weather, clock], "weather"), Turn)
    assert isinstance(parse_turn(CALL, [], "auto"), BadTurn)


def test_parse_leaves_input_checks_to_the_call() -> None:
    turn = parse_turn('{"calls":[{"tool":"convert","input":{"value":"x"}}]}', [convert])
    assert isinstance(turn, Turn)


def test_retry_messages() -> None:
    assert "cut off at 64 tokens" in render_retry("x", cut=True, max_tokens=64)
    assert "not valid: not JSON" in render_retry("not JSON", cut=False, max_tokens=64)
