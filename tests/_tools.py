"""Tool sets shared by the tests (the golden files are rendered from these)."""

from __future__ import annotations

from typing import Literal

from aerix import Field, Tool, tool


@tool
def weather(city: str, unit: Literal["c", "f"] | None = None) -> str:
    """Today's forecast for a city.

    Args:
        city: City name
        unit: Temperature unit
    """
    return f"Sunny in {city}, 21°{unit or 'c'}"


@tool
def clock() -> str:
    """The time now, as HH:MM."""
    return "12:00"


convert = tool(
    name="convert",
    description="Convert a quantity between units.",
    input={
        "value": Field("number", "The quantity", required=True),
        "from_unit": {"type": "string", "enum": ["km", "mi", "m"], "required": True},
        "to_unit": Field("string", enum=["km", "mi", "m"], required=True),
        "precision": Field("integer", "Decimal places"),
        "verbose": Field("boolean"),
    },
    run=lambda input, cx: input["value"],
)

TOOL_SETS: dict[str, list[Tool]] = {
    "none": [],
    "one": [weather],
    "no_input": [clock],
    "enums": [convert],
    "many": [weather, clock, convert],
}
