"""Tool definitions (both forms), input checks, running and results."""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Literal

import pytest

from _tools import convert, weather
from aerix import AbortController, AerixError, Field, Tool, ToolContext, tool
from aerix.tools import check_input, cut_result, result_text, run_tool


def cx() -> ToolContext:
    return ToolContext(signal=AbortController().signal, call_id="call_1")


def test_decorator_reads_hints_and_docstring() -> None:
    assert weather.name == "weather"
    assert weather.description == "Today's forecast for a city."
    assert weather.input["city"] == Field("string", "City name", required=True)
    assert weather.input["unit"] == Field("string", "Temperature unit", enum=("c", "f"))
    assert weather.schema == {
        "type": "object",
        "properties": {
            "city": {"type": "string", "description": "City name"},
            "unit": {"type": "string", "enum": ["c", "f"], "description": "Temperature unit"},
        },
        "required": ["city"],
        "additionalProperties": False,
    }


def test_decorator_with_arguments_and_all_scalar_types() -> None:
    @tool(name="calc", description="Custom.")
    def f(a: int, b: float, c: bool, d: Literal[1, 2] = 1, e: str | None = None) -> str:
        """Ignored summary.

        Parameters
        ----------
        a : int
            The first
            operand.
        """
        return ""

    assert f.name == "calc" and f.description == "Custom."
    assert [fl.type for fl in f.input.values()] == ["integer", "number", "boolean", "integer", "string"]
    assert [fl.required for fl in f.input.values()] == [True, True, True, False, False]
    assert f.input["a"].description == "The first operand."
    assert f.input["d"].enum == (1, 2)


def test_decorator_keeps_rest_style_descriptions_word_for_word() -> None:
    @tool
    def g(x: str) -> str:
        """Do g.

        :param x: An *exact*   description.
        """
        return x

    assert g.schema["properties"]["x"]["description"] == "An *exact*   description."


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("def f(x: list) -> str: ...", "parameter 'x'"),
        ("def f(x: dict[str, int]) -> str: ...", "parameter 'x'"),
        ("def f(x) -> str: ...", "needs a type annotation"),
        ("def f(*args: int) -> str: ...", "plain named parameter"),
        ("def f(x: Literal['a', 1]) -> str: ...", "Literal values must all be of one type"),
        ("def Bad(x: int) -> str: ...", "bad tool name 'Bad'"),
    ],
)
def test_decorator_refuses_what_it_cannot_map(source: str, message: str) -> None:
    scope: dict[str, object] = {"Literal": Literal}
    exec(source, scope)
    fn = next(v for k, v in scope.items() if k in ("f", "Bad"))
    with pytest.raises(AerixError) as info:
        tool(fn)  # type: ignore[arg-type]
    assert info.value.kind == "options"
    assert message in info.value.message


def test_context_parameter_is_not_a_field() -> None:
    seen: list[str] = []

    @tool
    def a(x: int, cx: ToolContext) -> str:
        """A."""
        seen.append(cx.call_id)
        return str(x)

    @tool
    def b(ctx: ToolContext) -> str:
        """B."""
        return ctx.call_id

    assert list(a.input) == ["x"] and list(b.input) == []
    assert asyncio.run(run_tool(a, {"x": 1}, cx())) == ("1", False)
    assert asyncio.run(run_tool(b, {}, cx())) == ("call_1", False)
    assert seen == ["call_1"]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"name": "1abc"}, "bad tool name '1abc'"),
        ({"name": "a" * 65}, "bad tool name"),
        ({"name": "has-dash"}, "bad tool name"),
        ({"name": None}, "bad tool name None"),
        ({"run": 3}, "run must be callable"),
        ({"description": 5}, "description must be a string"),
        ({"input": {"x": {"type": "object"}}}, "bad type 'object'"),
        ({"input": {"x": {"type": "array"}}}, "bad type 'array'"),
        ({"input": {"x": {"required": True}}}, "missing 'type'"),
        ({"input": {"x": {"type": "string", "min": 1}}}, "unknown key(s) ['min']"),
        ({"input": {"x": Field("integer", enum=[1, "2"])}}, "enum value '2' is not of type 'integer'"),
        ({"input": {"x": Field("integer", enum=[True])}}, "enum value True"),
        ({"input": {"x": Field("string", enum=[])}}, "enum is empty"),
        ({"input": {"x": Field("string", enum=["a", "a"])}}, "duplicate"),
        ({"input": {"x": Field("string", required="yes")}}, "required must be True or False"),  # type: ignore[arg-type]
        ({"input": {"": Field("string")}}, "bad field name ''"),
        ({"input": {"x": 3}}, "expected a Field or a dict"),
        ({"input": ["x"]}, "input must be a dict"),
    ],
)
def test_explicit_form_refuses_bad_definitions(kwargs: dict[str, object], message: str) -> None:
    base: dict[str, object] = {"name": "t", "description": "T.", "input": {}, "run": lambda i, c: ""}
    with pytest.raises(AerixError) as info:
        tool(**{**base, **kwargs})  # type: ignore[call-overload]
    assert info.value.kind == "options"
    assert message in info.value.message


def test_explicit_form_accepts_run_with_input_only() -> None:
    t = tool(
        name="echo",
        description="Echo.",
        input={"s": {"type": "string", "required": True}},
        run=lambda i: i["s"],
    )
    assert asyncio.run(run_tool(t, {"s": "hi"}, cx())) == ("hi", False)


def test_tool_is_frozen() -> None:
    with pytest.raises(AttributeError):
        weather.name = "x"  # type: ignore[misc]
    with pytest.raises(TypeError):
        weather.input["x"] = Field("string")  # type: ignore[index]


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ({"value": 1, "from_unit": "km", "to_unit": "m"}, None),
        ({"value": 1.5, "from_unit": "km", "to_unit": "m", "precision": 2, "verbose": False}, None),
        ([], "input must be an object, got array"),
        ({"from_unit": "km", "to_unit": "m"}, "missing required field 'value'"),
        ({"value": 1, "from_unit": "km", "to_unit": "m", "x": 1}, "unknown field 'x'"),
        ({"value": "1", "from_unit": "km", "to_unit": "m"}, "field 'value' must be a number, got string"),
        ({"value": True, "from_unit": "km", "to_unit": "m"}, "must be a number, got boolean"),
        ({"value": float("nan"), "from_unit": "km", "to_unit": "m"}, "non-finite"),
        ({"value": 1, "from_unit": "km", "to_unit": "m", "precision": 2.0}, "must be an integer, got number"),
        (
            {"value": 1, "from_unit": "km", "to_unit": "m", "precision": True},
            "must be an integer, got boolean",
        ),
        ({"value": 1, "from_unit": "km", "to_unit": "m", "verbose": 1}, "must be a boolean, got integer"),
        ({"value": 1, "from_unit": "yd", "to_unit": "m"}, 'must be one of ["km", "mi", "m"], got "yd"'),
        ({"value": 1, "from_unit": None, "to_unit": "m"}, "got null"),
    ],
)
def test_check_input(value: object, problem: str | None) -> None:
    got = check_input(convert, value)
    if problem is None:
        assert got is None
    else:
        assert got is not None and problem in got


async def test_sync_tools_run_on_a_worker_thread_and_async_tools_are_awaited() -> None:
    threads: list[str] = []

    @tool
    def sync_tool() -> str:
        """S."""
        threads.append(threading.current_thread().name)
        return "s"

    @tool
    async def async_tool() -> str:
        """A."""
        threads.append(threading.current_thread().name)
        await asyncio.sleep(0)
        return "a"

    assert await run_tool(sync_tool, {}, cx()) == ("s", False)
    assert await run_tool(async_tool, {}, cx()) == ("a", False)
    assert threads[0] != threading.current_thread().name
    assert threads[1] == threading.current_thread().name


async def test_run_gets_exactly_the_fields_sent() -> None:
    got: list[dict[str, object]] = []
    t = tool(
        name="t",
        input={"a": Field("string"), "b": Field("integer")},
        run=lambda i, c: got.append(dict(i)) or "ok",
    )
    await run_tool(t, {"a": "x"}, cx())
    assert got == [{"a": "x"}]


async def test_errors_become_error_results() -> None:
    def boom(i: object, c: object) -> str:
        raise ValueError("no luck")

    t = tool(name="boom", run=boom)
    assert await run_tool(t, {}, cx()) == ("error: ValueError: no luck", True)
    assert await run_tool(t, {"x": 1}, cx()) == ("error: unknown field 'x' (fields: none)", True)


def test_result_text() -> None:
    assert result_text("plain") == ("plain", False)
    assert result_text({"a": [1, "é"]}) == ('{"a": [1, "é"]}', False)
    assert result_text(None) == ("null", False)
    text, error = result_text(object())
    assert error and text.startswith("error: the result cannot be serialised to JSON")
    text, error = result_text(float("nan"))
    assert error
    deep: list[object] = []
    for _ in range(100000):
        deep = [deep]
    assert result_text(deep)[1]


def test_cut_result_says_how_much_was_cut() -> None:
    assert cut_result("abc", 3) == "abc"
    big = "x" * 3_000_000
    cut = cut_result(big, 4000)
    assert cut.startswith("x" * 4000) and cut.endswith("[cut: 2996000 more characters]")
    assert len(cut) < 4100


def test_schema_is_json_and_tool_repr_is_short() -> None:
    json.dumps(convert.schema)
    assert "schema" not in repr(weather)
    assert isinstance(convert, Tool)
