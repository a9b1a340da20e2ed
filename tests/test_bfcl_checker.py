"""The BFCL harness's pure logic: BFCL's AST rules, name mapping, flat entries."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))

from _bfcl.checker import check_entry, check_parallel, check_simple, standardize_string
from _bfcl.data import field_name, is_flat, to_tools, tool_name

AREA: dict[str, Any] = {
    "name": "geometry.Area_circle",
    "description": "Area of a circle.",
    "parameters": {
        "type": "dict",
        "properties": {
            "radius": {"type": "float", "description": "The radius."},
            "sides": {"type": "integer", "description": "Sides."},
            "units": {
                "type": "string",
                "description": "Units.",
                "enum": ["meters", "feet"],
                "default": "meters",
            },
            "exact": {"type": "boolean", "description": "Exact."},
        },
        "required": ["radius", "sides"],
    },
}
ANSWER = {"geometry.Area_circle": {"radius": [10.0], "sides": [3], "units": ["meters", ""], "exact": [True]}}


def call(**params: Any) -> dict[str, dict[str, Any]]:
    return {"geometry.Area_circle": params}


def test_a_right_call_is_valid() -> None:
    assert check_simple(AREA, call(radius=10.0, sides=3, units="meters", exact=True), ANSWER).valid


def test_int_is_accepted_for_float_and_equal_numbers_match() -> None:
    assert check_simple(AREA, call(radius=10, sides=3, exact=True), ANSWER).valid
    float_for_int = check_simple(AREA, call(radius=10, sides=3.0, exact=True), ANSWER)
    assert not float_for_int.valid and "type_error" in float_for_int.error


def test_bool_is_not_an_integer() -> None:
    answer = {"geometry.Area_circle": {"radius": [1.0], "sides": [1], "units": [""], "exact": [""]}}
    assert check_simple(AREA, call(radius=1.0, sides=1), answer).valid
    assert not check_simple(AREA, call(radius=1.0, sides=True), answer).valid


def test_strings_are_normalised_as_bfcl_does() -> None:
    assert standardize_string("New York, N.Y.") == "newyorkny"
    assert standardize_string("It's") == 'it"s'
    assert check_simple(AREA, call(radius=10, sides=3, units=" Meters.", exact=True), ANSWER).valid
    wrong = check_simple(AREA, call(radius=10, sides=3, units="feet", exact=True), ANSWER)
    assert not wrong.valid and "value_error:string" in wrong.error


def test_optional_absent_only_when_allowed() -> None:
    missing_exact = check_simple(AREA, call(radius=10, sides=3, units="meters"), ANSWER)
    assert not missing_exact.valid and "missing_optional" in missing_exact.error
    assert check_simple(AREA, call(radius=10, sides=3, exact=True), ANSWER).valid


def test_missing_required_wrong_value_unexpected_param_and_name() -> None:
    assert "missing_required" in check_simple(AREA, call(radius=10, exact=True), ANSWER).error
    assert "value_error" in check_simple(AREA, call(radius=11, sides=3, exact=True), ANSWER).error
    answer = {"geometry.Area_circle": {"radius": [10.0], "sides": [3]}}
    extra = check_simple(AREA, call(radius=10, sides=3, exact=True), answer)
    assert not extra.valid and "unexpected_param" in extra.error
    assert "wrong_func_name" in check_simple(AREA, {"area": {"radius": 10, "sides": 3}}, ANSWER).error


def test_parallel_matches_in_any_order_one_call_per_answer() -> None:
    answers = [
        {"geometry.Area_circle": {"radius": [1.0], "sides": [1], "units": [""], "exact": [""]}},
        {"geometry.Area_circle": {"radius": [2.0], "sides": [2], "units": [""], "exact": [""]}},
    ]
    a, b = call(radius=1, sides=1), call(radius=2, sides=2)
    assert check_parallel([AREA], [b, a], answers).valid
    assert check_parallel([AREA], [a, b], answers).valid
    assert not check_parallel([AREA], [a, a], answers).valid
    assert "wrong_count" in check_parallel([AREA], [a], answers).error


def test_entry_categories() -> None:
    assert check_entry("irrelevance", [AREA], [], None).valid
    assert not check_entry("irrelevance", [AREA], [call(radius=1, sides=1)], None).valid
    twice = check_entry("simple_python", [AREA], [call(radius=10, sides=3, exact=True)] * 2, [ANSWER])
    assert not twice.valid and "wrong_count" in twice.error
    assert check_entry("multiple", [AREA], [call(radius=10, sides=3, exact=True)], [ANSWER]).valid


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("math.factorial", "math_factorial"),
        ("Geometry.AreaCircle", "geometry_areacircle"),
        ("3d_plot", "f_3d_plot"),
        ("x" * 80, "x" * 64),
    ],
)
def test_tool_names_are_mapped_to_the_pattern(name: str, expected: str) -> None:
    assert tool_name(name, set()) == expected


def test_a_parameter_name_aerix_refuses_is_mapped_and_the_call_recorded_by_its_own() -> None:
    assert field_name("año_vehiculo") == "ano_vehiculo"
    assert field_name("user_id") == "user_id" and field_name("2nd") == "f_2nd"
    quote = {
        "name": "cotizar",
        "parameters": {
            "properties": {"año_vehiculo": {"type": "integer"}, "modelo": {"type": "string"}},
            "required": ["año_vehiculo"],
        },
    }
    calls: list[tuple[str, dict[str, Any]]] = []
    (made,), _ = to_tools([quote], lambda name, given: calls.append((name, given)))
    assert set(made.schema["properties"]) == {"ano_vehiculo", "modelo"}
    made.run({"ano_vehiculo": 2020, "modelo": "X"}, None)
    assert calls == [("cotizar", {"año_vehiculo": 2020, "modelo": "X"})]


def test_enum_values_of_another_type_are_read_as_the_fields_or_dropped() -> None:
    def enum_of(kind: str, values: list[Any]) -> list[Any] | None:
        spec = {"name": "f", "parameters": {"properties": {"v": {"type": kind, "enum": values}}}}
        (made,), _ = to_tools([spec], lambda *_: None)
        return made.schema["properties"]["v"].get("enum")

    assert enum_of("boolean", ["True", "false"]) == [True, False]
    assert enum_of("integer", ["1", "2", 3]) == [1, 2, 3]
    assert enum_of("integer", ["Group A", "1"]) is None  # not an integer: the field goes without
    assert enum_of("string", ["a", "b"]) == ["a", "b"]


def test_mapped_names_stay_unique() -> None:
    taken: set[str] = set()
    assert [tool_name(n, taken) for n in ("a.b", "a_b", "A.B")] == ["a_b", "a_b_2", "a_b_3"]


def test_non_flat_entries_are_skipped() -> None:
    nested = {
        "name": "f",
        "parameters": {"properties": {"xs": {"type": "array", "items": {"type": "integer"}}}},
    }
    anything = {"name": "g", "parameters": {"properties": {"v": {"type": "any"}}}}
    assert is_flat([AREA])
    assert not is_flat([AREA, nested])
    assert not is_flat([anything])


def test_tools_record_their_calls_and_map_types() -> None:
    seen: list[tuple[str, dict[str, Any]]] = []
    tools, names = to_tools([AREA], lambda name, inp: seen.append((name, inp)))
    (t,) = tools
    assert t.name == "geometry_area_circle" and names == {t.name: "geometry.Area_circle"}
    assert {n: f.type for n, f in t.input.items()} == {
        "radius": "number",
        "sides": "integer",
        "units": "string",
        "exact": "boolean",
    }
    assert t.input["units"].enum == ("meters", "feet")
    assert t.input["units"].description == 'Units. Default: "meters".'
    assert [n for n, f in t.input.items() if f.required] == ["radius", "sides"]
    assert t.run({"radius": 1.0, "sides": 3}, None) == "recorded"
    assert seen == [("geometry.Area_circle", {"radius": 1.0, "sides": 3})]


NESTED: dict[str, Any] = {
    "name": "stats.mean",
    "description": "Mean of numbers.",
    "parameters": {
        "type": "dict",
        "properties": {
            "numbers": {"type": "array", "items": {"type": "float"}, "description": "The numbers."},
            "options": {
                "type": "dict",
                "properties": {"round": {"type": "integer"}, "label": {"type": "string"}},
                "required": ["round"],
            },
            "anything": {"type": "any"},
        },
        "required": ["numbers"],
    },
}


def test_nested_entries_become_schema_tools_that_aerix_takes() -> None:
    assert not is_flat([NESTED])
    tools, names = to_tools([NESTED], lambda name, inp: None)
    schema = tools[0].schema
    assert names == {"stats_mean": "stats.mean"} and tools[0].input == {}
    assert schema["properties"]["numbers"] == {
        "type": "array",
        "description": "The numbers.",
        "items": {"type": "number"},
    }
    assert schema["properties"]["options"]["required"] == ["round"]
    assert schema["properties"]["anything"] == {}  # `any`: no type
    assert schema["additionalProperties"] is False


def test_lists_and_dicts_are_checked_with_standardized_strings() -> None:
    answer = {"stats.mean": {"numbers": [[1.0, 2.5]], "options": ["", {"round": [2], "label": ["Mean", ""]}]}}
    ok = {"stats.mean": {"numbers": [1, 2.5], "options": {"round": 2, "label": "mean"}}}
    assert check_simple(NESTED, ok, answer).valid
    assert check_simple(NESTED, {"stats.mean": {"numbers": [1, 2.5]}}, answer).valid  # options optional
    wrong_list = {"stats.mean": {"numbers": [2.5, 1]}}
    assert check_simple(NESTED, wrong_list, answer).error.startswith("value_error:list")
    wrong_dict = {"stats.mean": {"numbers": [1, 2.5], "options": {"round": 3}}}
    assert check_simple(NESTED, wrong_dict, answer).error.startswith("value_error:dict")
    not_a_list = {"stats.mean": {"numbers": "1, 2.5"}}
    assert check_simple(NESTED, not_a_list, answer).error.startswith("type_error:nested")
