"""What the value rules read from a JSON Schema (`aerix.engines.llamacpp.rules._schema`): pure."""

from __future__ import annotations

from aerix.engines.llamacpp.rules._schema import (
    constants,
    fields,
    number_siblings,
    object_keys,
    string_series,
)


def test_the_fields_of_a_schema_are_found_by_type_at_any_depth() -> None:
    schema = {
        "anyOf": [
            {
                "type": "object",
                "properties": {
                    "calls": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "properties": {
                                "input": {
                                    "type": "object",
                                    "properties": {
                                        "rate": {"type": "number", "description": "As a percentage."},
                                        "years": {"type": "integer"},
                                        "name": {"type": "string", "description": "percent"},
                                        "odd": {"type": "number", "description": 5},
                                    },
                                },
                                "other": {
                                    "type": "object",
                                    "properties": {"n": {"type": "integer"}, "day": {"type": "string"}},
                                },
                            },
                        },
                    }
                },
            },
            {"type": "object", "properties": {"final": {"type": "string"}}},
        ]
    }
    numbers = ("number", "integer")
    assert sorted(fields(schema, numbers)) == [
        ("n", ""),
        ("odd", ""),
        ("rate", "As a percentage."),
        ("years", ""),
    ]
    assert sorted(fields(schema, ("string",))) == [("day", ""), ("final", ""), ("name", "percent")]
    assert list(fields({"properties": None}, numbers)) == []
    siblings = number_siblings(schema)  # the number fields of the same object only
    numbers = {"rate", "years", "odd"}
    assert siblings == {
        "rate": numbers,
        "years": numbers,
        "odd": numbers,
        "name": numbers,
        "n": {"n"},
        "day": {"n"},
    }

    assert object_keys(schema)[2:] == [
        (["rate", "years", "name", "odd"], set()),
        (["n", "day"], set()),
        (["final"], set()),
    ]
    assert object_keys({"properties": {"a": {}, "b": {}}, "required": ["a"]}) == [(["a", "b"], {"a"})]


def test_string_fields_in_a_series_and_the_schemas_constants_are_found() -> None:
    schema = {
        "type": "object",
        "properties": {
            "tool": {"const": "genetics.calculate_similarity"},
            "input": {
                "type": "object",
                "properties": {
                    "species1": {"type": "string"},
                    "species2": {"type": "string"},
                    "format": {"type": "string"},
                    "mass1": {"type": "integer"},  # a number: not a string series
                    "mass2": {"type": "integer"},
                },
            },
            "route": {
                "type": "object",
                "properties": {"from_city": {"type": "string"}, "to_city": {"type": "string"}},
            },
            "alone": {"type": "object", "properties": {"city1": {"type": "string"}}},
        },
    }
    assert string_series(schema) == {"species1", "species2", "from_city", "to_city"}
    assert constants(schema) == ({"genetics.calculate_similarity"}, {"tool"})
    assert constants([{"const": "a"}, {"anyOf": [{"const": "b"}, {"const": 3}]}]) == ({"a", "b"}, set())
