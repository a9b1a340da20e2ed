"""JSON Schema, the subset of SPEC 9.1: checking schemas, validating values, and llguidance."""

from __future__ import annotations

import importlib.util
import json
from typing import Any

import pytest

from aerix import AerixError, _schema, _validate
from aerix._schema import SUPPORTED_KEYWORDS, check_decodable, check_schema, compile_validator, validate

HAS_LLGUIDANCE = importlib.util.find_spec("llguidance") is not None


def refused(schema: object, **kwargs: Any) -> str:
    with pytest.raises(AerixError) as info:
        check_schema(schema, where="tool 't'", **kwargs)
    assert info.value.kind == "options"
    assert info.value.message.startswith("tool 't': ")
    return info.value.message


# -- checking a schema ----------------------------------------------------------------------


def test_the_keywords_are_spec_9_1s() -> None:
    assert {
        "type", "properties", "required", "additionalProperties", "items", "enum", "const", "anyOf",
        "oneOf", "$ref", "$defs", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
        "minLength", "maxLength", "pattern", "minItems", "maxItems", "format", "default",
        "description", "title",
    } == SUPPORTED_KEYWORDS  # fmt: skip


EVERY_KEYWORD: dict[str, Any] = {
    "type": "object",
    "title": "Order",
    "description": "An order.",
    "$defs": {"Qty": {"type": "integer", "minimum": 1, "maximum": 99}},
    "properties": {
        "items": {
            "type": "array",
            "minItems": 1,
            "maxItems": 5,
            "items": {
                "type": "object",
                "properties": {
                    "sku": {"type": "string", "pattern": "^[A-Z]+$"},
                    "qty": {"$ref": "#/$defs/Qty"},
                },
                "required": ["sku", "qty"],
                "additionalProperties": False,
            },
        },
        "note": {"type": ["string", "null"], "minLength": 1, "maxLength": 80, "default": None},
        "when": {"type": "string", "format": "date"},
        "price": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1000},
        "kind": {"enum": ["a", "b"]},
        "version": {"const": 2},
        "ref": {"anyOf": [{"type": "integer"}, {"type": "string"}]},
        "flag": {"oneOf": [{"type": "boolean"}, {"type": "null"}]},
        "extra": {"type": "object", "additionalProperties": {"type": "integer"}},
    },
    "required": ["items"],
    "additionalProperties": False,
}


def test_every_supported_keyword_is_taken_and_refs_are_inlined() -> None:
    given = json.loads(json.dumps(EVERY_KEYWORD))
    checked = check_schema(given, where="tool 't'")
    assert given == EVERY_KEYWORD  # not changed in place
    assert "$defs" not in checked
    assert checked["properties"]["items"]["items"]["properties"]["qty"] == {
        "type": "integer",
        "minimum": 1,
        "maximum": 99,
    }
    rest = {k: v for k, v in EVERY_KEYWORD.items() if k not in ("$defs", "properties")}
    assert {k: v for k, v in checked.items() if k != "properties"} == rest
    assert checked["properties"]["note"] == EVERY_KEYWORD["properties"]["note"]
    assert json.dumps(checked)  # plain JSON


@pytest.mark.parametrize(
    ("schema", "path"),
    [
        ({"type": "object", "foo": 1}, "schema.foo"),
        (
            {"type": "object", "properties": {"items": {"type": "array", "items": {"foo": 1}}}},
            "schema.properties.items.items.foo",
        ),
        (
            {"type": "object", "properties": {"a b": {"uniqueItems": True}}},
            'schema.properties["a b"].uniqueItems',
        ),
        ({"anyOf": [{"type": "string"}, {"not": {}}]}, "schema.anyOf[1].not"),
        ({"type": "object", "additionalProperties": {"allOf": []}}, "schema.additionalProperties.allOf"),
        ({"$defs": {"A": {"multipleOf": 2}}, "type": "object"}, "schema.$defs.A.multipleOf"),
        ({"type": "object", "properties": {"a": {"$schema": "x"}}}, "schema.properties.a.$schema"),
    ],
)
def test_any_other_keyword_is_refused_with_its_json_path(schema: dict[str, Any], path: str) -> None:
    message = refused(schema)
    keyword = path.rpartition(".")[2]
    assert f"unsupported JSON Schema keyword {keyword!r} at {path}" in message
    assert "supported: $defs, $ref, additionalProperties" in message


@pytest.mark.parametrize(
    ("schema", "fix"),
    [
        ({"type": "object", "properties": {"q": {"type": "string", "examples": ["x"]}}}, "remove it"),
        ({"type": "object", "properties": {"q": {"type": "string", "deprecated": True}}}, "remove it"),
        (
            {"type": "object", "properties": {"xy": {"type": "array", "prefixItems": [{"type": "number"}]}}},
            "a tuple is not supported: give one `items` schema for every item",
        ),
        (
            {"type": "object", "properties": {"xy": {"type": "array", "items": [{"type": "number"}]}}},
            "a tuple is not supported: give one `items` schema for every item",
        ),
    ],
)
def test_a_refused_annotation_or_tuple_says_the_fix(schema: dict[str, Any], fix: str) -> None:
    assert fix in refused(schema)


def test_a_root_schema_dialect_is_taken_and_dropped() -> None:
    given = {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object"}
    assert check_schema(given, where="t") == {"type": "object"}


@pytest.mark.parametrize(
    ("schema", "message"),
    [
        ([], "a schema must be a dict (a JSON Schema object), got array"),
        ({"type": "list"}, "schema.type: bad type 'list'"),
        ({"type": []}, "schema.type: bad type []"),
        ({"type": ["string", "string"]}, "bad type ['string', 'string']"),
        ({"minimum": "1"}, 'schema.minimum must be a number, got "1"'),
        ({"maximum": True}, "schema.maximum must be a number, got true"),
        ({"minLength": -1}, "schema.minLength must be a non-negative integer, got -1"),
        ({"maxItems": 1.5}, "schema.maxItems must be a non-negative integer"),
        ({"minimum": 5, "maximum": 2}, "minimum (5) is above maximum (2); no value can fit"),
        ({"minLength": 3, "maxLength": 2}, "minLength (3) is above maxLength (2)"),
        ({"pattern": "("}, "schema.pattern '(' is not a valid regular expression"),
        # the error is about the pattern as written, not as aerix spells it for Python
        ({"pattern": r"^\s+(abc$"}, "unterminated subpattern at position 4"),
        ({"pattern": 3}, "schema.pattern must be a string"),
        ({"enum": []}, "schema.enum must be a non-empty list of values"),
        ({"required": "a"}, "schema.required must be a list of distinct property names"),
        ({"required": ["a", "a"]}, "schema.required must be a list of distinct property names"),
        ({"properties": []}, "schema.properties must map names to schemas"),
        (
            {"properties": {"a": 3}},
            "schema.properties.a must be a schema (a dict or true/false), got integer",
        ),
        ({"items": [{"type": "string"}]}, "schema.items must be a schema"),
        ({"anyOf": []}, "schema.anyOf must be a non-empty list of schemas"),
        ({"oneOf": {"type": "string"}}, "schema.oneOf must be a non-empty list of schemas"),
        ({"description": 3}, "schema.description must be a string"),
        ({"format": None}, "schema.format must be a string"),
        ({"properties": {"a": {"$defs": {}}}}, "schema.properties.a.$defs: $defs is taken at the root"),
    ],
)
def test_bad_keyword_values_are_refused(schema: object, message: str) -> None:
    assert message in refused(schema)


@pytest.mark.parametrize(
    ("schema", "message"),
    [
        (
            {
                "type": "object",
                "$defs": {"A": {"type": "string"}},
                "properties": {"a": {"$ref": "#/$defs/B"}},
            },
            "schema.properties.a.$ref '#/$defs/B' points nowhere (definitions: #/$defs/A)",
        ),
        ({"$ref": "#/nothing"}, "schema.$ref '#/nothing' points nowhere (definitions: none)"),
        ({"$ref": "other.json#/A"}, "'other.json#/A' is not a local reference"),
        ({"$ref": "#A"}, "'#A' is not a JSON pointer"),
        ({"$ref": 3}, "schema.$ref must be a string"),
        (
            {
                "$defs": {"N": {"type": "object", "properties": {"next": {"$ref": "#/$defs/N"}}}},
                "$ref": "#/$defs/N",
            },
            "the schema is recursive (#/$defs/N -> #/$defs/N); recursion is not supported",
        ),
        (
            {
                "$defs": {"A": {"items": {"$ref": "#/$defs/B"}}, "B": {"anyOf": [{"$ref": "#/$defs/A"}]}},
                "properties": {"x": {"$ref": "#/$defs/A"}},
            },
            "(#/$defs/A -> #/$defs/B -> #/$defs/A); recursion is not supported",
        ),
        ({"properties": {"x": {"$ref": "#"}}}, "the schema is recursive (# -> #)"),
        (
            {
                "$defs": {"A": {"type": "string"}},
                "properties": {"x": {"$ref": "#/$defs/A", "type": "integer"}},
            },
            "schema.properties.x: 'type' beside $ref '#/$defs/A' conflicts with the target's",
        ),
    ],
)
def test_refs_that_point_nowhere_or_loop_are_refused(schema: dict[str, Any], message: str) -> None:
    assert message in refused(schema)


def test_a_ref_keeps_the_descriptions_beside_it_and_may_point_anywhere_in_the_root() -> None:
    schema = {
        "$defs": {"Item": {"type": "object", "title": "Item", "properties": {"sku": {"type": "string"}}}},
        "type": "object",
        "properties": {
            "first": {"$ref": "#/$defs/Item", "description": "The first", "title": "First"},
            "same": {"$ref": "#/properties/first"},
            "any": {"$ref": "#/$defs/Item/properties/sku"},
        },
    }
    checked = check_schema(schema, where="t")
    item = {
        "type": "object",
        "title": "First",
        "properties": {"sku": {"type": "string"}},
        "description": "The first",
    }
    assert checked["properties"]["first"] == item
    assert checked["properties"]["same"] == item
    assert checked["properties"]["any"] == {"type": "string"}


def test_boolean_subschemas() -> None:
    checked = check_schema({"type": "object", "properties": {"a": True, "b": False}}, where="t")
    assert validate(checked, {"a": [1, {"x": None}]}) is None
    assert validate(checked, {"b": 1}) == "input.b: no value is allowed here, got 1"


# -- validating a value ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("schema", "value", "problem"),
    [
        ({"type": "string"}, "x", None),
        ({"type": "string"}, 3, "input: expected string, got 3"),
        ({"type": "integer"}, 3, None),
        ({"type": "integer"}, True, "input: expected integer, got true"),
        ({"type": "integer"}, 3.0, "input: expected integer, got 3.0"),
        ({"type": "number"}, 3, None),
        ({"type": "number"}, 2.5, None),
        ({"type": "number"}, False, "input: expected number, got false"),
        ({"type": "number"}, float("inf"), "input: expected number, got Infinity (not a finite number)"),
        ({"type": "boolean"}, 1, "input: expected boolean, got 1"),
        ({"type": "null"}, None, None),
        ({"type": "null"}, 0, "input: expected null, got 0"),
        ({"type": "array"}, (1,), "input: expected array, got [1]"),
        ({"type": "object"}, [], "input: expected object, got []"),
        ({"type": ["string", "null"]}, None, None),
        ({"type": ["string", "null"]}, 1, "input: expected string or null, got 1"),
        ({"enum": ["a", 1, None]}, None, None),
        ({"enum": [1]}, 1.0, None),
        ({"enum": [1]}, True, "input: expected one of [1], got true"),
        ({"enum": [[1, 2], {"a": 1}]}, {"a": 1}, None),
        ({"enum": [[1, 2]]}, [2, 1], "input: expected one of [[1, 2]], got [2, 1]"),
        ({"const": "x"}, "x", None),
        ({"const": False}, 0, "input: expected false, got 0"),
        ({"minimum": 1}, 1, None),
        ({"minimum": 1}, 0.5, "input: expected at least 1, got 0.5"),
        ({"exclusiveMinimum": 0}, 0, "input: expected more than 0, got 0"),
        ({"maximum": 10}, 11, "input: expected at most 10, got 11"),
        ({"exclusiveMaximum": 10}, 10, "input: expected less than 10, got 10"),
        ({"minimum": 1}, "0", None),  # bounds are for numbers only
        ({"minLength": 2}, "a", 'input: expected at least 2 characters, got 1: "a"'),
        ({"maxLength": 2}, "abc", 'input: expected at most 2 characters, got 3: "abc"'),
        ({"maxLength": 1}, "é", None),  # characters, not bytes
        ({"pattern": "^[a-z]+$"}, "abc", None),
        ({"pattern": "b"}, "abc", None),  # anywhere in the string, as JSON Schema says
        (
            {"pattern": "^[a-z]+$"},
            "ab1",
            'input: expected a string matching the pattern "^[a-z]+$", got "ab1"',
        ),
        # patterns match as ECMAScript's (JSON Schema's regexes): $ only at the very end,
        # \d and \w ASCII only, \s Unicode's spaces
        (
            {"pattern": "^[0-9]{3}$"},
            "123\n",
            'input: expected a string matching the pattern "^[0-9]{3}$", got "123\\n"',
        ),
        ({"pattern": "^[0-9]{3}$"}, "123", None),
        (
            {"pattern": r"^\d+$"},
            "\u0661\u0662",
            r'input: expected a string matching the pattern "^\\d+$", got "١٢"',
        ),
        ({"pattern": r"^\w+$"}, "é", r'input: expected a string matching the pattern "^\\w+$", got "é"'),
        ({"pattern": r"^a\sb$"}, "a\u00a0b", None),
        (
            {"pattern": r"^a\Sb$"},
            "a\u3000b",
            'input: expected a string matching the pattern "^a\\\\Sb$", got "a\u3000b"',
        ),
        ({"pattern": r"^[\s$]+$"}, "$\u2028", None),  # inside a class: $ itself, and \s's spaces
        ({"pattern": r"^cost\$$"}, "cost$", None),
        ({"pattern": r"^a[^\S\n]b$"}, "a\u00a0b", None),  # \S in a class: ECMAScript's too
        (
            {"pattern": r"^[\S]$"},
            "\u3000",
            'input: expected a string matching the pattern "^[\\\\S]$", got "\u3000"',
        ),
        ({"pattern": r"^a.b$"}, "a\rb", 'input: expected a string matching the pattern "^a.b$", got "a\\rb"'),
        ({"pattern": r"^a.b$"}, "a-b", None),
        ({"pattern": r"(?s)^a.b$"}, "a\nb", None),  # a pattern that sets (?s) keeps its dot's line breaks
        ({"pattern": r"^[]$]+$"}, "$]", None),  # a ] first in a class is a member, as Python reads it
        ({"minItems": 1}, [], "input: expected at least 1 item, got 0"),
        ({"maxItems": 2}, [1, 2, 3], "input: expected at most 2 items, got 3"),
        ({"items": {"type": "integer"}}, [1, "2"], 'input[1]: expected integer, got "2"'),
        ({"format": "date", "description": "d", "title": "t", "default": 1}, "not a date", None),
        ({}, {"anything": [1]}, None),
    ],
)
def test_validate(schema: dict[str, Any], value: object, problem: str | None) -> None:
    assert validate(check_schema(schema, where="t"), value) == problem


ORDER = {
    "type": "object",
    "properties": {
        "items": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"sku": {"type": "string"}, "qty": {"type": "integer"}},
                "required": ["sku", "qty"],
                "additionalProperties": False,
            },
        },
        "odd key": {"type": "object", "additionalProperties": {"type": "number"}},
    },
    "required": ["items"],
    "additionalProperties": False,
}


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ({"items": [{"sku": "a", "qty": 1}], "odd key": {"x": 1.5}}, None),
        (
            {"items": [{"sku": "a", "qty": 1}, {"sku": "b", "qty": 2}, {"sku": "c", "qty": "3"}]},
            'input.items[2].qty: expected integer, got "3"',
        ),
        ({"items": [{"sku": "a"}]}, "input.items[0]: missing required field 'qty'"),
        (
            {"items": [{"sku": "a", "qty": 1, "size": 2}]},
            "input.items[0]: unknown field 'size' (fields: sku, qty)",
        ),
        ({"items": []}, None),
        ({}, "input: missing required field 'items'"),
        ({"items": [], "more": 1}, "input: unknown field 'more' (fields: items, odd key)"),
        ({"items": [], "odd key": {"x": "1"}}, 'input["odd key"].x: expected number, got "1"'),
        ({"items": [], "odd key": {"a.b": None}}, 'input["odd key"]["a.b"]: expected number, got null'),
    ],
)
def test_a_failure_names_its_json_path(value: object, problem: str | None) -> None:
    assert validate(ORDER, value) == problem


def test_additional_properties_default_to_allowed() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}
    assert validate(schema, {"a": "x", "b": 1}) is None
    assert validate(schema, {"a": 1}) == "input.a: expected string, got 1"


@pytest.mark.parametrize(
    ("schema", "value", "problem"),
    [
        ({"anyOf": [{"type": "string"}, {"type": "null"}]}, None, None),
        ({"anyOf": [{"type": "string"}, {"type": "null"}]}, 3, "input: expected string or null, got 3"),
        (
            {"anyOf": [{"type": "string", "maxLength": 2}, {"type": "integer"}]},
            "abc",  # the choice whose type fits says what is wrong
            'input: expected at most 2 characters, got 3: "abc"',
        ),
        (
            {"anyOf": [{"type": "object", "properties": {"a": {"type": "integer"}}}, {"type": "null"}]},
            {"a": "x"},
            'input.a: expected integer, got "x"',
        ),
        (
            {"anyOf": [{"const": 1}, {"const": 2}]},
            3,
            "input: expected 1 or 2, got 3",
        ),
        ({"oneOf": [{"type": "integer"}, {"type": "string"}]}, "x", None),
        (
            {"anyOf": [{"type": "string", "enum": ["a", "b"]}, {"type": "null"}]},
            "c",
            'input: expected one of ["a", "b"] or null, got "c"',
        ),
        (
            {"anyOf": [{"const": n} for n in range(6)]},
            9,
            "input: expected a value matching one of the 6 choices, got 9",
        ),
        (
            {"oneOf": [{"type": "integer"}, {"type": "string"}]},
            None,
            "input: expected integer or string, got null",
        ),
        (
            {"oneOf": [{"type": "integer"}, {"type": "number"}]},
            1,
            "input: fits 2 of oneOf's 2 choices, got 1; it must fit exactly one",
        ),
        ({"oneOf": [{"type": "integer"}, {"type": "number"}]}, 1.5, None),
    ],
)
def test_any_of_and_one_of(schema: dict[str, Any], value: object, problem: str | None) -> None:
    assert validate(schema, value) == problem


def test_validate_keeps_a_compiled_schema_and_a_validator_can_name_its_root() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}}
    assert validate(schema, {"n": "1"}, path="final") == 'final.n: expected integer, got "1"'
    assert _validate._cache[id(schema)][0] is schema
    validator = compile_validator(schema, path="output")
    assert validator({"n": 1}) is None
    assert validator({"n": True}) == "output.n: expected integer, got true"
    with pytest.raises(AerixError, match="through check_schema"):
        compile_validator({"$ref": "#/$defs/A"})


def test_a_long_value_is_cut_in_the_message() -> None:
    problem = validate({"type": "integer"}, "x" * 500)
    assert problem is not None and problem.endswith("…") and len(problem) < 100


# -- llguidance -------------------------------------------------------------------------------


@pytest.mark.skipif(not HAS_LLGUIDANCE, reason="llguidance is not installed")
@pytest.mark.parametrize(
    ("schema", "path", "reason"),
    [
        (
            {
                "type": "object",
                "properties": {"a": {"type": "array", "items": {"type": "string", "pattern": "(?=a)a"}}},
            },
            "schema.properties.a.items",
            "look-around",
        ),
        (
            {"type": "object", "properties": {"d": {"type": "string", "pattern": "(?<!x)y"}}},
            "schema.properties.d",
            "look-around",
        ),
    ],
)
def test_a_schema_llguidance_cannot_take_is_refused_naming_the_part(
    schema: dict[str, Any], path: str, reason: str
) -> None:
    message = refused(schema)
    assert f"the local constraint (llguidance) cannot decode {path}: " in message and reason in message
    assert check_schema(schema, where="t", decodable=False)  # without the llguidance check


@pytest.mark.skipif(not HAS_LLGUIDANCE, reason="llguidance is not installed")
@pytest.mark.parametrize(
    "field",
    [
        {"type": "string", "format": "wobble"},  # a format llguidance does not know: not decoded
        {"oneOf": [{"type": "integer"}, {"type": "number", "minimum": 5}]},  # overlapping: as anyOf
    ],
)
def test_what_llguidance_takes_only_approximately_is_accepted(field: dict[str, Any]) -> None:
    schema = {"type": "object", "properties": {"x": field}}
    check_decodable(check_schema(schema, where="t"), where="t")  # refuses nothing


@pytest.mark.skipif(not HAS_LLGUIDANCE, reason="llguidance is not installed")
def test_every_supported_keyword_compiles_on_llguidance() -> None:
    check_decodable(check_schema(EVERY_KEYWORD, where="t"), where="t")


def test_without_llguidance_the_check_is_skipped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_schema, "_llguidance", False)
    monkeypatch.setattr(_schema, "_decodable", {})
    schema = {"type": "object", "properties": {"d": {"type": "string", "format": "wobble"}}}
    check_decodable(schema, where="t")
    assert check_schema(schema, where="t") == schema


def test_a_percent_escaped_ref_fragment_is_read() -> None:
    schema = {
        "type": "object",
        "properties": {"x": {"$ref": "#/$defs/c%20d"}, "y": {"$ref": "#/$defs/100%"}},
        "$defs": {"c d": {"type": "integer"}, "100%": {"type": "string"}},
    }
    resolved = check_schema(schema, where="t")
    assert resolved["properties"] == {"x": {"type": "integer"}, "y": {"type": "string"}}


def test_a_failed_any_of_names_the_choice_whose_tag_fits() -> None:
    cat = {
        "type": "object",
        "properties": {"kind": {"const": "cat"}, "meow": {"type": "integer"}},
        "required": ["kind", "meow"],
    }
    dog = {
        "type": "object",
        "properties": {"kind": {"const": "dog"}, "bark": {"type": "string"}},
        "required": ["kind", "bark"],
    }
    check = compile_validator({"type": "object", "properties": {"pet": {"anyOf": [cat, dog]}}})
    assert check({"pet": {"kind": "dog", "meow": 1}}) == "input.pet: missing required field 'bark'"
    assert check({"pet": {"kind": "dog", "bark": 3}}) == "input.pet.bark: expected string, got 3"
    assert check({"pet": {"kind": "cat", "meow": "x"}}) == 'input.pet.meow: expected integer, got "x"'


def test_a_failed_any_of_names_the_choice_whose_keys_fit() -> None:
    """GitHub's review comment: `position` or `line`. A value with `line` is the second shape;
    what it lacks is said, not the first shape's "unknown field"."""
    fields = {"path": {"type": "string"}, "body": {"type": "string"}}
    by_position = {
        "type": "object",
        "properties": {**fields, "position": {"type": "number"}},
        "required": ["path", "position", "body"],
        "additionalProperties": False,
    }
    by_line = {
        **by_position,
        "properties": {**fields, "line": {"type": "number"}},
        "required": ["path", "line", "body"],
    }
    check = compile_validator({"type": "array", "items": {"anyOf": [by_position, by_line]}})
    assert check([{"path": "a.py", "line": 3}]) == "input[0]: missing required field 'body'"
    assert check([{"path": "a.py", "position": 3}]) == "input[0]: missing required field 'body'"
    assert check([{"path": "a.py", "line": 3, "body": "b", "x": 1}]) == (
        "input[0]: unknown field 'x' (fields: path, body, line)"
    )


def test_a_failed_id_or_name_says_give_either() -> None:
    schema = {
        "type": "object",
        "properties": {"id": {"type": "integer"}, "name": {"type": "string"}},
        "anyOf": [{"required": ["id"]}, {"required": ["name"]}],
    }
    check = compile_validator(schema)
    assert check({}) == "input: missing a required field: give id or name"
    assert check({"name": 3}) == "input.name: expected string, got 3"
    assert check({"id": 3}) is None
