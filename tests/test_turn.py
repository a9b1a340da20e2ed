"""The turn contract: system rendering and turn schema (golden), parsing, messages."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Annotated, Any

import pytest

from _tools import TOOL_SETS, clock, convert, weather
from aerix import AerixError, Field, Tool, tool
from aerix._schema import check_decodable
from aerix.tools import check_input
from aerix.turn import (
    DECODED_CALLS,
    FRACTION_DIGITS,
    MAX_CALLS,
    MAX_INTEGER,
    MAX_THOUGHT,
    RETRY_FINAL_CHARS,
    RETRY_ITEMS,
    RETRY_MARGIN_TOKENS,
    RETRY_STRING_CHARS,
    BadTurn,
    Turn,
    decoded_schema,
    fit_text,
    input_schema,
    parse_turn,
    render_results,
    render_retry,
    render_system,
    render_tool,
    turn_schema,
)

INSTRUCTIONS = "You are a travel helper. Use the tools to answer."


@pytest.mark.parametrize(
    ("field", "bounded", "decoded"),
    [
        # a range past the bound keeps its own: clamped, it would allow no value at all
        ({"type": "integer", "minimum": 10**17}, False, {"type": "integer", "minimum": 10**17}),
        ({"type": "integer", "maximum": -(10**17)}, True, {"type": "integer", "maximum": -(10**17)}),
        (
            {"type": "number", "minimum": 1e17},
            True,
            {"type": "number", "minimum": 1e17, "multipleOf": 10.0**-FRACTION_DIGITS},
        ),
        # a range that holds no multiple of the retry's step gets no step
        (
            {"type": "number", "minimum": 1e-7, "maximum": 5e-7},
            True,
            {"type": "number", "minimum": 1e-7, "maximum": 5e-7},
        ),
        (
            {"type": "number", "exclusiveMinimum": 0, "maximum": 1},
            True,
            {
                "type": "number",
                "exclusiveMinimum": 0,
                "minimum": -MAX_INTEGER,
                "maximum": 1,
                "multipleOf": 10.0**-FRACTION_DIGITS,
            },
        ),
    ],
)
def test_bounds_never_make_a_number_field_impossible(field: Any, bounded: bool, decoded: Any) -> None:
    t = tool(
        name="t",
        description="d",
        schema={"type": "object", "properties": {"n": field}, "required": ["n"]},
        run=lambda i: "ok",
    )
    assert input_schema(t, bounded=bounded)["properties"]["n"] == decoded
    check_decodable(turn_schema([t], "required", short=bounded), where="turn")


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


def test_fit_text_is_the_name_and_the_top_level_fields() -> None:
    assert fit_text(convert) == "convert(value, from_unit, to_unit, precision, verbose)"
    assert fit_text(clock) == "clock()"
    assert fit_text(clock, clock.description) == f"clock(): {clock.description}"  # a description if given
    nested = tool(
        name="book",
        description="Book rooms.",
        schema={
            "type": "object",
            "properties": {"rooms": {"type": "array", "items": {"type": "object", "properties": {"n": {}}}}},
            "$defs": {"unused": {"type": "string"}},
        },
        run=lambda i, cx: "ok",
    )
    assert fit_text(nested) == "book(rooms)"  # only the top level: nested keys are not the tool's
    assert fit_text(nested, "Reserve rooms in a hotel.") == "book(rooms): Reserve rooms in a hotel."
    keyed = tool(name="tag", description="", schema={"type": "object", "additionalProperties": {}}, run=print)
    assert fit_text(keyed) == "tag()" and fit_text(keyed, "") == "tag(): "


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
        ('{"calls":[{"tool":"weather","input":{"city":NaN}}]}', "not JSON (NaN is not a JSON value)"),
        ('{"final":"x","thought":"t","n":-Infinity}', "not JSON (-Infinity is not a JSON value)"),
    ],
)
def test_parse_refuses_bad_turns(text: str, reason: str) -> None:
    turn = parse_turn(text, [weather])
    assert isinstance(turn, BadTurn)
    assert reason in turn.reason


@pytest.mark.parametrize(
    ("tools", "tool_choice", "expected"),
    [
        ([weather], "auto", 'expected {"calls":[...]} or {"final":"..."}'),
        ([weather], "none", 'expected {"final":"..."}'),
        ([], "auto", 'expected {"final":"..."}'),
        ([weather], "required", 'expected {"calls":[...]}'),
        ([weather, clock], "clock", 'expected {"calls":[...]}'),
        ([weather], "auto", 'expected {"calls":[...]} or {"final":<a value of the answer type>}'),
        ([weather], "none", 'expected {"final":<a value of the answer type>}'),
    ],
)
def test_a_bad_turn_names_only_the_shapes_it_may_take(
    tools: list[Tool], tool_choice: str, expected: str
) -> None:
    typed = "answer type" in expected
    for text in ("junk", "[1]", "{}"):
        turn = parse_turn(text, tools, tool_choice, typed=typed)
        assert isinstance(turn, BadTurn)
        assert turn.reason.endswith("; " + expected), turn.reason


@pytest.mark.parametrize(
    ("typed", "shape"), [(False, '{"final":"..."}'), (True, '{"final":<a value of the answer type>}')]
)
def test_a_call_where_only_a_final_may_come_names_the_final_it_takes(typed: bool, shape: str) -> None:
    for tools, tool_choice in (([weather], "none"), ([], "auto")):
        turn = parse_turn(CALL, tools, tool_choice, typed=typed)
        assert isinstance(turn, BadTurn)
        assert turn.reason == f"this turn must be a final answer: {shape}"


def test_parse_keeps_at_most_eight_calls_and_cuts_the_thought() -> None:
    calls = ",".join(['{"tool":"clock","input":{}}'] * 11)
    turn = parse_turn('{"thought":"' + "x" * 700 + '","calls":[' + calls + "]}", [clock])
    assert isinstance(turn, Turn)
    assert len(turn.calls) == MAX_CALLS and turn.dropped == 3
    assert turn.thought == "x" * MAX_THOUGHT


def test_parse_honours_tool_choice() -> None:
    assert isinstance(parse_turn('{"final":"x"}', [weather], "required"), BadTurn)
    assert isinstance(parse_turn(CALL, [weather], "none"), BadTurn)
    assert parse_turn(CALL, [weather, clock], "clock") == BadTurn(
        reason='call 1: this turn must call clock, not "weather"'
    )
    assert "unknown tool" in str(parse_turn(CALL.replace("weather", "nope"), [weather, clock], "clock"))
    assert isinstance(parse_turn(CALL, [weather, clock], "weather"), Turn)
    assert isinstance(parse_turn(CALL, [], "auto"), BadTurn)


def test_parse_leaves_input_checks_to_the_call() -> None:
    turn = parse_turn('{"calls":[{"tool":"convert","input":{"value":"x"}}]}', [convert])
    assert isinstance(turn, Turn)


def test_retry_messages() -> None:
    assert "cut off at 64 tokens" in render_retry("x", cut=True, max_tokens=64)
    assert render_retry("x", cut=True, max_tokens=64).endswith(
        "one JSON object, at most one call, no thought."
    )
    assert render_retry("x", cut=True, max_tokens=64, final_only=True).endswith(
        "one JSON object, a shorter final answer, no thought."
    )
    assert "not valid: not JSON" in render_retry("not JSON", cut=False, max_tokens=64)


# -- inputs of any shape (SPEC 9.1) -----------------------------------------------------


@dataclass
class Line:
    """One line of an order.

    Attributes:
        sku: The product code
        qty: How many
    """

    sku: str
    qty: int
    note: str | None = None


@tool
def order(
    items: list[Line],
    customer: Annotated[str, "Who orders"],
    rush: bool = False,
    tags: dict[str, int] | None = None,
) -> str:
    """Place an order.

    Args:
        items: The lines of the order
    """
    return "ok"


SEARCH_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "filters": {"type": "array", "items": {"$ref": "#/$defs/filter"}, "maxItems": 3},
        "query": {"type": "string", "minLength": 1, "description": "The words to look for"},
        "page": {"type": "integer", "minimum": 1, "default": 1},
        "since": {"type": "string", "format": "date"},
    },
    "required": ["query"],
    "additionalProperties": False,
    "$defs": {
        "filter": {
            "type": "object",
            "properties": {
                "value": {"anyOf": [{"type": "string", "pattern": "^[a-z]+$"}, {"type": "null"}]},
                "field": {"enum": ["author", "year"], "description": "What to filter on"},
            },
            "required": ["field", "value"],
            "additionalProperties": False,
        }
    },
}
search = tool(name="search", description="Search the library.", schema=SEARCH_SCHEMA, run=lambda input: "[]")

SHAPED = {"nested": [order], "schema_tool": [search]}


@pytest.mark.parametrize("name", sorted(SHAPED))
def test_system_message_golden_for_inputs_of_any_shape(name: str, golden) -> None:  # type: ignore[no-untyped-def]
    golden(f"system_{name}.txt", render_system(INSTRUCTIONS, SHAPED[name]) + "\n")


@pytest.mark.parametrize("name", sorted(SHAPED))
@pytest.mark.parametrize("short", [False, True], ids=["", "short"])
def test_turn_schema_golden_for_inputs_of_any_shape(name: str, short: bool, golden) -> None:  # type: ignore[no-untyped-def]
    schema = turn_schema(SHAPED[name], short=short)
    golden(f"schema_{name}{'_short' if short else ''}.json", json.dumps(schema, indent=2) + "\n")


def test_the_turn_schema_carries_a_schema_tools_input_with_its_refs_inlined() -> None:
    decoded = input_schema(search)
    filters = decoded["properties"]["filters"]
    assert filters["items"]["properties"]["field"] == {
        "enum": ["author", "year"],
        "description": "What to filter on",
    }
    assert "$defs" not in decoded and "$ref" not in json.dumps(decoded)
    assert search.schema == SEARCH_SCHEMA  # the tool keeps its schema as given


def test_required_fields_come_first_at_every_depth_and_integers_are_bounded_everywhere() -> None:
    schema = {
        "type": "object",
        "properties": {
            "a": {"type": "string"},
            "rows": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {"x": {"type": "number"}, "n": {"type": ["integer", "null"]}},
                    "required": ["n"],
                },
            },
            "pick": {"anyOf": [{"type": "integer", "minimum": 0}, {"type": "integer", "enum": [5]}]},
            "map": {"type": "object", "additionalProperties": {"type": "integer", "maximum": 10}},
        },
        "required": ["rows"],
    }
    before = json.dumps(schema)
    decoded = decoded_schema(schema)
    assert json.dumps(schema) == before  # untouched
    assert list(decoded["properties"]) == ["rows", "a", "pick", "map"]
    row = decoded["properties"]["rows"]["items"]
    assert list(row["properties"]) == ["n", "x"]
    # keys an object's schema names are the only ones decoded, unless it says otherwise
    assert row["additionalProperties"] is False and decoded["additionalProperties"] is False
    assert "additionalProperties" not in schema["properties"]["rows"]["items"]
    # one that names no key is any object, as without `properties`; a tool's input so is no input
    free = {
        "type": "object",
        "properties": {"q": {"type": "string"}, "vars": {"type": "object", "properties": {}}},
    }
    assert "additionalProperties" not in decoded_schema(free)["properties"]["vars"]
    bare = tool(name="bare", description="d", schema={"type": "object", "properties": {}}, run=lambda i: "ok")
    assert input_schema(bare) == {"type": "object", "properties": {}, "additionalProperties": False}
    assert decoded_schema({"type": "object", "properties": {}}) == {"type": "object", "properties": {}}
    assert decoded["properties"]["map"]["additionalProperties"] == {
        "type": "integer",
        "minimum": -MAX_INTEGER,
        "maximum": 10,
    }
    assert row["properties"]["n"] == {
        "type": ["integer", "null"],
        "minimum": -MAX_INTEGER,
        "maximum": MAX_INTEGER,
    }
    assert row["properties"]["x"] == {"type": "number"}  # free unless bounded
    assert decoded["properties"]["pick"]["anyOf"] == [
        {"type": "integer", "minimum": 0, "maximum": MAX_INTEGER},  # its own bound is kept
        {"type": "integer", "enum": [5]},  # an enum is bound already
    ]
    assert decoded["properties"]["map"]["additionalProperties"] == {
        "type": "integer",
        "maximum": 10,
        "minimum": -MAX_INTEGER,
    }


def test_a_retry_bounds_numbers_strings_and_arrays_at_every_depth() -> None:
    schema = {
        "type": "array",
        "items": {
            "type": "object",
            "properties": {
                "ratio": {"type": "number"},
                "name": {"type": "string", "maxLength": 500},
                "code": {"type": "string", "pattern": "^[A-Z]{3}$"},
                "day": {"type": "string", "format": "date"},
                "long": {"type": "string", "minLength": RETRY_STRING_CHARS + 1},
                "few": {"type": "array", "items": {"type": "string"}, "maxItems": 2},
                "many": {"type": "array", "items": {"type": "integer"}, "minItems": RETRY_ITEMS + 1},
            },
        },
    }
    bounded = decoded_schema(schema, bounded=True)
    assert bounded["maxItems"] == RETRY_ITEMS
    fields = bounded["items"]["properties"]
    assert fields["ratio"]["multipleOf"] == 10.0**-FRACTION_DIGITS
    assert fields["name"] == {"type": "string", "maxLength": RETRY_STRING_CHARS}
    assert fields["code"] == {"type": "string", "pattern": "^[A-Z]{3}$"}  # a pattern bounds it already
    assert fields["day"] == {"type": "string", "format": "date"}
    assert "maxLength" not in fields["long"]  # the schema asks for more than the cap: left as it is
    assert fields["few"]["maxItems"] == 2 and fields["few"]["items"]["maxLength"] == RETRY_STRING_CHARS
    assert "maxItems" not in fields["many"]


def test_nested_fields_render_with_their_kinds_notes_and_sub_fields() -> None:
    text = render_tool(order)
    assert text.splitlines() == [
        "- order: Place an order.",
        "  input:",
        "  - items (array of object; required): The lines of the order",
        "    - sku (string; required): The product code",
        "    - qty (integer; required): How many",
        "    - note (string or null; optional)",
        "  - customer (string; required): Who orders",
        "  - rush (boolean; optional)",
        "  - tags (object of any keys, each integer; optional)",
    ]


@pytest.mark.parametrize(
    ("schema", "line"),
    [
        ({"type": "integer", "minimum": 1, "maximum": 9}, "- f (integer; required; at least 1; at most 9)"),
        (
            {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1},
            "- f (number; required; more than 0; less than 1)",
        ),
        (
            {"type": "string", "minLength": 1, "maxLength": 8},
            "- f (string; required; at least 1 character; at most 8 characters)",
        ),
        (
            {"type": "array", "items": {"type": "integer"}, "minItems": 2},
            "- f (array of integer; required; at least 2 items)",
        ),
        (
            {"type": "array", "items": {"enum": ["a", "b"]}},
            '- f (array of string; required; each one of "a", "b")',
        ),
        (
            {"type": "array", "items": {"type": "array", "items": {"type": "number"}}},
            "- f (array of array of number; required)",
        ),
        ({"const": "v1"}, '- f (string; required; always "v1")'),
        ({"type": "string", "pattern": "^[a-z]+$"}, "- f (string; required; matching ^[a-z]+$)"),
        (
            {"type": "string", "format": "date", "default": "2025-01-01"},
            '- f (string; required; format date; default "2025-01-01")',
        ),
        ({"anyOf": [{"type": "integer"}, {"type": "string"}]}, "- f (integer or string; required)"),
        # choices under a type are of that type too, and each has its own notes
        (
            {"type": "string", "anyOf": [{"minLength": 8}, {"pattern": "^X"}]},
            "- f (string; required; at least 8 characters, or matching ^X)",
        ),
        (
            {"type": "string", "anyOf": [{"type": "string", "minLength": 8}, {"pattern": "^X"}]},
            "- f (string; required; at least 8 characters, or matching ^X)",
        ),
        (
            {"type": "array", "items": {"type": "string"}, "anyOf": [{"minItems": 1}, {"maxItems": 0}]},
            "- f (array of string; required; at least 1 item, or at most 0 items)",
        ),
        (
            {"anyOf": [{"type": "string", "maxLength": 5}, {"type": "null"}]},
            "- f (string or null; required; at most 5 characters)",
        ),
        (
            {"anyOf": [{"type": "integer", "minimum": 1, "maximum": 9}, {"type": "string", "minLength": 2}]},
            "- f (integer or string; required; at least 1 and at most 9, or at least 2 characters)",
        ),
        ({}, "- f (any JSON value; required)"),
    ],
)
def test_each_keyword_renders_as_a_note(schema: dict[str, Any], line: str) -> None:
    t = tool(
        name="t", schema={"type": "object", "properties": {"f": schema}, "required": ["f"]}, run=lambda i: ""
    )
    assert render_tool(t).splitlines()[2] == "  " + line


def rendered(name: str, field: dict[str, Any]) -> list[str]:
    """The system message's lines for one optional field of a schema tool."""
    t = tool(name="t", schema={"type": "object", "properties": {name: field}}, run=lambda i: "")
    return render_tool(t).splitlines()[2:]


def test_shapes_of_an_any_of_render_each_with_its_fields() -> None:
    either = {
        "anyOf": [
            {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
            {"type": "object", "properties": {"lat": {"type": "number"}, "lon": {"type": "number"}}},
        ]
    }
    assert rendered("where", either) == [
        "  - where (one of 2 shapes; optional)",
        "    - shape 1 (object)",
        "      - city (string; required)",
        "    - shape 2 (object)",
        "      - lat (number; optional)",
        "      - lon (number; optional)",
    ]


def test_shapes_that_name_no_type_take_their_parents() -> None:
    shapes = [
        {
            "properties": {"kind": {"const": "card"}, "number": {"type": "string"}},
            "required": ["kind", "number"],
        },
        {"properties": {"kind": {"const": "iban"}, "iban": {"type": "string"}}, "required": ["kind", "iban"]},
    ]
    method = {"type": "object", "oneOf": shapes}
    t = tool(name="t", schema={"type": "object", "properties": {"method": method}}, run=lambda i: "")
    assert render_tool(t).splitlines()[2:] == [
        "  - method (one of 2 shapes; optional)",  # not "object, or one of 2 shapes"
        "    - shape 1 (object)",  # not "any JSON value"
        '      - kind (string; required; always "card")',
        "      - number (string; required)",
        "    - shape 2 (object)",
        '      - kind (string; required; always "iban")',
        "      - iban (string; required)",
    ]


def test_choices_that_narrow_the_parents_fields_read_with_what_the_parent_says_of_them() -> None:
    schema = {
        "type": "object",
        "properties": {
            "mode": {"type": "string", "enum": ["file", "url"]},
            "path": {"type": "string"},
            "url": {"type": "string"},
        },
        "required": ["mode"],
        "oneOf": [
            {"properties": {"mode": {"const": "file"}}, "required": ["path"]},
            {"properties": {"mode": {"const": "url"}}, "required": ["url"]},
        ],
    }
    t = tool(name="t", schema=schema, run=lambda i: "")
    assert render_tool(t).splitlines()[2:] == [
        "  - shape 1 (object)",
        '    - mode (string; optional; always "file")',
        "    - path (string; required)",  # not "any JSON value": the parent says it is a string
        "  - shape 2 (object)",
        '    - mode (string; optional; always "url")',
        "    - url (string; required)",
        '  - mode (string; required; one of "file", "url")',
        "  - path (string; optional)",
        "  - url (string; optional)",
    ]


def test_choices_of_a_map_keep_its_other_keys() -> None:
    counts = {
        "type": "object",
        "additionalProperties": {"type": "integer"},
        "anyOf": [{"properties": {"a": {"type": "integer"}}}, {"properties": {"b": {"type": "integer"}}}],
    }
    assert rendered("counts", counts) == [
        "  - counts (one of 2 shapes; optional)",
        "    - shape 1 (object)",
        "      - a (integer; optional)",
        "      - any other key (integer)",
        "    - shape 2 (object)",
        "      - b (integer; optional)",
        "      - any other key (integer)",
    ]


def test_a_schema_tool_without_properties_has_no_input() -> None:
    for schema in ({"type": "object"}, {"type": "object", "properties": {}}):
        t = tool(name="t", description="T.", schema=schema, run=lambda i: "")
        assert render_tool(t) == "- t: T.\n  input: none"


def test_boolean_sub_schemas_render_decode_and_check() -> None:
    # `true` (any value) and `false` (no value) are JSON Schemas too, as MCP servers write them.
    schema = {
        "type": "object",
        "properties": {"a": True, "b": False, "c": {"type": "object", "properties": {"d": True}}},
        "$defs": {"any": True},
        "required": ["a"],
    }
    schema["properties"]["e"] = {"$ref": "#/$defs/any"}
    t = tool(name="t", description="T.", schema=schema, run=lambda i: "")
    assert render_tool(t).splitlines()[2:] == [
        "  - a (any JSON value; required)",
        "  - b (no value: leave it out; optional)",
        "  - c (object; optional)",
        "    - d (any JSON value; optional)",
        "  - e (any JSON value; optional)",
    ]
    decoded = input_schema(t)
    assert decoded["properties"]["a"] is True and decoded["properties"]["b"] is False
    assert decoded["properties"]["c"]["properties"] == {"d": True}
    check_decodable(turn_schema([t]), where="t")
    assert check_input(t, {"a": [1, {"x": None}], "c": {"d": "z"}}) is None
    assert "input.b" in str(check_input(t, {"a": 1, "b": 2}))


# -- typed answers and several calls (SPEC 9.2, 9.3) ---------------------------------------------

ANSWER: dict[str, Any] = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "days": {"type": "integer", "minimum": 1}},
    "required": ["city", "days"],
    "additionalProperties": False,
}


def test_a_typed_answer_changes_the_final_shape_and_the_contract() -> None:
    final = turn_schema([weather], output=ANSWER)["anyOf"][1]
    assert final["properties"]["final"] == decoded_schema(ANSWER)
    text = render_system("", [weather], output=ANSWER)
    assert '{"final":<your answer, a JSON value of the answer type below>}' in text
    assert '"<your answer>"' not in text
    assert text.endswith(
        "Answer type:\n- final (object; required)\n  - city (string; required)\n  - days (integer; required; at least 1)"
    )
    alone = render_system("", [], output={"type": "integer"})
    assert alone.startswith('Answer with one JSON object and nothing else:\n{"final":<your answer, a JSON')
    assert alone.endswith("Answer type:\n- final (integer; required)")


def test_a_short_typed_final_is_bounded_not_cut_to_a_length() -> None:
    final = turn_schema([weather], "none", short=True, output={"type": "array", "items": {"type": "string"}})
    assert final["anyOf"][0]["properties"] == {
        "final": {
            "type": "array",
            "items": {"type": "string", "maxLength": RETRY_STRING_CHARS},
            "maxItems": RETRY_ITEMS,
        }
    }


@pytest.mark.parametrize("n", [1, 3, 8])
def test_calls_per_turn_is_the_schemas_max_items_and_a_short_retry_allows_one(n: int) -> None:
    for choice in ("auto", "required", "weather"):
        calls = turn_schema([weather, clock], choice, calls_per_turn=n)["anyOf"][0]["properties"]["calls"]
        assert calls["maxItems"] == n
        short = turn_schema([weather, clock], choice, short=True, calls_per_turn=n)["anyOf"][0]
        assert short["properties"]["calls"]["maxItems"] == 1
    text = render_system("", [weather], calls_per_turn=n)
    assert ("One turn may hold up to" in text) == (n > 1)
    if n > 1:
        assert f"One turn may hold up to {n} calls. Either object may" in text


def test_parse_a_typed_final_of_any_json_value() -> None:
    for value in ({"city": "Porto", "days": 3}, [1, 2], 3, None, "Grüß"):
        turn = parse_turn(json.dumps({"final": value}), [weather], typed=True)
        assert isinstance(turn, Turn)
        assert turn.value == value and turn.final == json.dumps(value, ensure_ascii=False)
    untyped = parse_turn('{"final": 3}', [weather])
    assert isinstance(untyped, BadTurn) and untyped.reason == '"final" must be a string'
    text = parse_turn('{"final": "x"}', [weather])
    assert isinstance(text, Turn) and text.final == text.value == "x"


@pytest.mark.parametrize("tools", [*TOOL_SETS.values(), *SHAPED.values()], ids=[*TOOL_SETS, *SHAPED])
@pytest.mark.parametrize("output", [None, ANSWER], ids=["text", "typed"])
def test_every_turn_schema_compiles_on_the_local_constraint(tools: list[Tool], output: Any) -> None:
    pytest.importorskip("llguidance")
    for choice in ("auto", "required", "none"):
        for short in (False, True):
            schema = turn_schema(tools, choice, short=short, max_tokens=64, calls_per_turn=3, output=output)
            check_decodable(schema, where="the turn schema")  # raises if llguidance cannot take it


def test_a_required_key_the_properties_leave_out_is_decoded_and_rendered() -> None:
    """A `required` key with no `properties` entry takes what `additionalProperties` allows:
    the closed object that is decoded still admits it, and the system message lists it."""
    any_value = tool(
        name="t",
        description="d",
        schema={"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["b"]},
        run=lambda i: "",
    )
    decoded = input_schema(any_value)
    assert list(decoded["properties"]) == ["b", "a"] and decoded["properties"]["b"] is True
    assert decoded["additionalProperties"] is False and decoded["required"] == ["b"]
    check_decodable(decoded, where="t")
    assert render_tool(any_value).splitlines()[2:] == [
        "  - a (integer; optional)",
        "  - b (any JSON value; required)",
    ]
    typed = tool(
        name="u",
        description="d",
        schema={"type": "object", "required": ["b"], "additionalProperties": {"type": "string"}},
        run=lambda i: "",
    )
    assert render_tool(typed).splitlines()[1:3] == ["  input:", "  - b (string; required)"]


def test_a_required_key_that_additional_properties_forbids_is_refused() -> None:
    schema = {"type": "object", "properties": {"a": {}}, "required": ["b"], "additionalProperties": False}
    with pytest.raises(AerixError, match=r"schema.required names 'b', which properties does not list and "):
        tool(name="t", description="d", schema=schema, run=lambda i: "")
    nested = {"type": "object", "properties": {"x": schema}, "required": ["x"]}  # below the root too
    with pytest.raises(AerixError, match=r"schema.properties.x.required names 'b'"):
        tool(name="t", description="d", schema=nested, run=lambda i: "")


def test_a_nullable_container_reads_apart_from_nullable_items() -> None:
    def kind(schema: dict[str, Any]) -> str:
        return render_tool(
            tool(
                name="t",
                description="d",
                schema={"type": "object", "properties": {"x": schema}},
                run=lambda i: "",
            )
        ).splitlines()[2]

    point = {"type": "object", "properties": {"p": {"type": "integer"}}}
    assert kind({"type": ["array", "null"], "items": point}) == "  - x (array of object, or null; optional)"
    assert kind({"type": ["array", "null"], "items": {**point, "type": ["object", "null"]}}) == (
        "  - x (array of (object or null), or null; optional)"
    )
    assert kind({"type": ["object", "null"], "additionalProperties": {"type": "integer"}}) == (
        "  - x (object of any keys, each integer, or null; optional)"
    )
    assert (
        kind({"type": "array", "items": {"type": ["string", "null"]}})
        == "  - x (array of (string or null); optional)"
    )


def test_choices_that_only_require_keys_speak_of_their_parents_fields() -> None:
    """`anyOf: [{"required": ["id"]}, {"required": ["name"]}]` ("id or name"): the fields are
    listed once, as the object's; a choice no input can take is no reason to refuse the tool."""
    either = tool(
        name="search",
        description="d",
        schema={
            "type": "object",
            "properties": {"id": {"type": "string"}, "name": {"type": "string"}},
            "anyOf": [{"required": ["id"]}, {"required": ["name"]}],
        },
        run=lambda i: "",
    )
    assert render_tool(either).splitlines()[2:] == [
        "  - id (string; optional)",
        "  - name (string; optional)",
        "  (give id or name)",
    ]
    nested = tool(
        name="n",
        description="d",
        schema={
            "type": "object",
            "properties": {
                "q": {
                    "type": "object",
                    "properties": either.schema["properties"],
                    "oneOf": either.schema["anyOf"],
                }
            },
        },
        run=lambda i: "",
    )
    assert render_tool(nested).splitlines()[2] == "  - q (object; optional; give id or name)"
    impossible = {"type": "object", "properties": {}, "required": ["z"], "additionalProperties": False}
    optional = tool(
        name="s2",
        description="d",
        schema={"type": "object", "properties": {"o": {"anyOf": [{"type": "string"}, impossible]}}},
        run=lambda i: "",
    )
    assert render_tool(optional).splitlines()[2:] == ["  - o (string or object; optional)"]
    check_decodable(input_schema(optional), where="s2")
    assert check_input(optional, {"o": "x"}) is None


def test_a_description_of_several_lines_stays_under_its_entry() -> None:
    """An MCP server's description of several lines: none of its lines reads as a tool or
    field of its own (`- write_file: …`), and its words are kept as they are."""
    t = tool(
        name="read_file",
        description="Read a file.\n\nArgs:\n  path: the path\n- write_file: not a tool",
        run=lambda i: "",
        schema={
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "Path to it.\n- mode (string): no field"}
            },
            "required": ["path"],
        },
    )
    assert render_tool(t).splitlines() == [
        "- read_file: Read a file.",
        "",
        "    Args:",
        "      path: the path",
        "    - write_file: not a tool",
        "  input:",
        "  - path (string; required): Path to it.",
        "      - mode (string): no field",
    ]


def test_bounds_at_javascripts_safe_integers_are_left_unsaid() -> None:
    """zod's `.int()` bounds every integer by ±(2**53 - 1): no more than "an integer"."""
    n = {"type": "integer", "minimum": -(2**53 - 1), "maximum": 2**53 - 1}
    t = tool(name="t", description="d", run=lambda i: "", schema={"type": "object", "properties": {"n": n}})
    assert render_tool(t).splitlines()[-1] == "  - n (integer; optional)"
    n = {**n, "exclusiveMinimum": 0}
    t = tool(name="t", description="d", run=lambda i: "", schema={"type": "object", "properties": {"n": n}})
    assert render_tool(t).splitlines()[-1] == "  - n (integer; optional; more than 0)"


def test_an_optional_object_reads_as_object_or_null_with_its_fields() -> None:
    """pydantic's `Address | None` (`anyOf` of the object and null) reads as one object that
    may be null, its fields under it, not as two shapes."""
    address = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    schema = {
        "type": "object",
        "properties": {"addr": {"anyOf": [address, {"type": "null"}], "default": None}},
    }
    t = tool(name="t", description="d", run=lambda i: "", schema=schema)
    assert render_tool(t).splitlines()[2:] == [
        "  - addr (object or null; optional; default null)",
        "    - city (string; required)",
    ]
    # two shapes with fields of their own stay shapes
    other = {"type": "object", "properties": {"zip": {"type": "string"}}, "required": ["zip"]}
    t = tool(
        name="t",
        description="d",
        run=lambda i: "",
        schema={"type": "object", "properties": {"at": {"anyOf": [address, other]}}},
    )
    assert render_tool(t).splitlines()[2:4] == [
        "  - at (one of 2 shapes; optional)",
        "    - shape 1 (object)",
    ]


def test_only_an_object_or_null_is_read_as_one_shape() -> None:
    fielded = {"type": "object", "properties": {"x": {"type": "string"}}, "required": ["x"]}
    for other in ({"type": "string", "maxLength": 3}, {"type": "object"}):
        schema = {"type": "object", "properties": {"a": {"anyOf": [fielded, other]}}}
        t = tool(name="t", description="d", run=lambda i: "", schema=schema)
        assert render_tool(t).splitlines()[2] == "  - a (one of 2 shapes; optional)"
    whole = {"type": ["integer", "null"], "enum": [1.0, 2.0]}  # whole floats are integers
    t = tool(
        name="t", description="d", run=lambda i: "", schema={"type": "object", "properties": {"n": whole}}
    )
    assert render_tool(t).splitlines()[2] == "  - n (integer; optional; one of 1.0, 2.0)"
