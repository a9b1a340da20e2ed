"""The invented world of the agent benchmark: its facts, and the deterministic tools
that look them up, compute and convert.

Every country, city, person and product here is made up, with made-up numbers,
so that no answer can come from what a model remembers: a run can only be right
by calling the tools and reading what they return. Lookups forgive case and
extra words ("the capital of Quenland" finds Quenland), as a helpful real tool
would; anything they do not know is an error result naming what was given.
"""

from __future__ import annotations

import ast
import operator
import re
from collections.abc import Callable, Mapping
from typing import Literal

from aerix import Tool, tool

__all__ = [
    "CAPITALS",
    "FLIGHTS",
    "HOMES",
    "POPULATIONS",
    "PRICES",
    "RATES",
    "TOOLS",
    "calculate",
    "convert_value",
    "number_text",
]

CAPITALS = {
    "Veloria": "Marest",
    "Quenland": "Tovik",
    "Ostravia": "Belun",
    "Karthane": "Pellamy",
    "Drevania": "Ulmaro",
    "Zentia": "Caskin",
    "Morvath": "Iselle",
    "Lunaris": "Fendral",
}
"""Each country's capital city."""

POPULATIONS = {
    "Marest": 412000,
    "Tovik": 87500,
    "Belun": 1250000,
    "Pellamy": 63200,
    "Ulmaro": 298000,
    "Caskin": 154000,
    "Iselle": 39800,
    "Fendral": 720000,
    "Rivasco": 51300,
    "Oskel": 23900,
}
"""How many people live in each city."""

PRICES = {
    "Zorbix lamp": 42.5,
    "Kelpo kettle": 18.75,
    "Vantor backpack": 64.0,
    "Quibble mug": 7.2,
    "Nimbra headphones": 129.9,
    "Trellis chair": 85.0,
}
"""Each product's price, in dollars."""

FLIGHTS = {
    frozenset({"Marest", "Tovik"}): 3.5,
    frozenset({"Marest", "Belun"}): 1.75,
    frozenset({"Tovik", "Belun"}): 4.25,
    frozenset({"Pellamy", "Ulmaro"}): 2.5,
    frozenset({"Caskin", "Fendral"}): 6.0,
    frozenset({"Iselle", "Marest"}): 5.5,
    frozenset({"Rivasco", "Tovik"}): 1.25,
    frozenset({"Oskel", "Belun"}): 2.75,
}
"""How many hours a direct flight between two cities takes (either way)."""

HOMES = {
    "Ilsa Moravec": "Rivasco",
    "Tomas Quell": "Oskel",
    "Brenna Hollis": "Caskin",
    "Davor Kint": "Iselle",
    "Mira Soltane": "Pellamy",
}
"""The city each person lives in."""

Unit = Literal[
    "kilometers",
    "miles",
    "kilograms",
    "pounds",
    "hours",
    "minutes",
    "celsius",
    "fahrenheit",
    "dollars",
    "crowns",
]
_LINEAR: dict[tuple[str, str], float] = {
    ("kilometers", "miles"): 0.621371,
    ("kilograms", "pounds"): 2.20462,
    ("hours", "minutes"): 60.0,
    ("dollars", "crowns"): 6.4,  # the crown is the invented world's currency
}
RATES: Mapping[tuple[str, str], float] = {
    **_LINEAR,
    **{(b, a): 1 / f for (a, b), f in _LINEAR.items()},
}
"""The factor that converts a value from one unit to another (temperatures aside)."""


def number_text(x: float) -> str:
    """`x` rounded to 4 decimal places, without trailing zeros: 42.5, 1250000, 9.3206."""
    text = f"{round(x, 4):.4f}".rstrip("0").rstrip(".")
    return "0" if text in ("", "-0") else text


def convert_value(value: float, from_unit: str, to_unit: str) -> float:
    """`value` in `from_unit` converted to `to_unit`.

    Raises:
        ValueError: The units are not of one kind (kilometers to pounds).
    """
    if from_unit == to_unit:
        return value
    if (from_unit, to_unit) == ("celsius", "fahrenheit"):
        return value * 9 / 5 + 32
    if (from_unit, to_unit) == ("fahrenheit", "celsius"):
        return (value - 32) * 5 / 9
    factor = RATES.get((from_unit, to_unit))
    if factor is None:
        raise ValueError(f"cannot convert {from_unit} to {to_unit}: they measure different things")
    return value * factor


_OPERATORS: dict[type[ast.AST], Callable[..., float]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.Pow: operator.pow,
    ast.Mod: operator.mod,
    ast.USub: operator.neg,
    ast.UAdd: operator.pos,
}
_WORDS = [
    (re.compile(r"(?<=\d),(?=\d{3}\b)"), ""),  # 1,250,000
    (re.compile(r"\bdivided by\b|÷", re.I), "/"),
    (re.compile(r"\btimes\b|\bmultiplied by\b|×|(?<=\d)\s*x\s*(?=\d)", re.I), "*"),
    (re.compile(r"\bplus\b", re.I), "+"),
    (re.compile(r"\bminus\b", re.I), "-"),
]


def calculate(expression: str) -> float:
    """The value of an arithmetic expression: numbers, + - * / ** % and parentheses
    ("times", "plus", "x" between numbers also read).

    Raises:
        ValueError: `expression` is not such an expression, or divides by zero.
    """
    text = expression.strip().rstrip("=?").strip()
    for pattern, replacement in _WORDS:
        text = pattern.sub(replacement, text)

    def value(node: ast.AST) -> float:
        if (
            isinstance(node, ast.Constant)
            and isinstance(node.value, int | float)
            and not isinstance(node.value, bool)
        ):
            return float(node.value)
        if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
            if isinstance(node.op, ast.Pow) and abs(value(node.right)) > 100:
                raise ValueError("an exponent over 100")
            return _OPERATORS[type(node.op)](value(node.left), value(node.right))
        if isinstance(node, ast.UnaryOp) and type(node.op) in _OPERATORS:
            return _OPERATORS[type(node.op)](value(node.operand))
        raise ValueError("not arithmetic")

    try:
        return value(ast.parse(text, mode="eval").body)
    except (SyntaxError, ValueError, ZeroDivisionError, OverflowError) as exc:
        raise ValueError(
            f"cannot evaluate {expression!r} ({exc}): write numbers with + - * / and parentheses, "
            "e.g. 3 * (4 + 5)"
        ) from None


def _find(given: str, names: list[str], what: str) -> str:
    """The one of `names` that `given` names (any case; the whole name, or its first
    word, within other words).

    Raises:
        ValueError: `given` names none of them.
    """
    text = given.casefold()
    for name in sorted(names, key=len, reverse=True):
        if re.search(rf"\b{re.escape(name.casefold())}\b", text):
            return name
    for name in names:
        if re.search(rf"\b{re.escape(name.split()[0].casefold())}\b", text):
            return name
    raise ValueError(f"no {what} named {given!r}")


@tool
def calculator(expression: str) -> str:
    """Evaluate an arithmetic expression.

    Args:
        expression: The expression, e.g. 3 * (4 + 5)
    """
    return number_text(calculate(expression))


@tool
def convert(value: float, from_unit: Unit, to_unit: Unit) -> str:
    """Convert a value from one unit to another (lengths, weights, durations, temperatures, money).

    Args:
        value: The value to convert
        from_unit: The unit it is in
        to_unit: The unit to convert it to
    """
    return f"{number_text(value)} {from_unit} is {number_text(convert_value(value, from_unit, to_unit))} {to_unit}"


@tool
def capital_of(country: str) -> str:
    """Look up the capital city of a country.

    Args:
        country: The country's name
    """
    name = _find(country, list(CAPITALS), "country")
    return f"The capital of {name} is {CAPITALS[name]}."


@tool
def population_of(city: str) -> str:
    """Look up how many people live in a city.

    Args:
        city: The city's name
    """
    name = _find(city, list(POPULATIONS), "city")
    return f"{name} has {POPULATIONS[name]} inhabitants."


@tool
def price_of(product: str) -> str:
    """Look up the price of a product, in dollars.

    Args:
        product: The product's name
    """
    name = _find(product, list(PRICES), "product")
    return f"The {name} costs {number_text(PRICES[name])} dollars."


@tool
def flight_hours(origin: str, destination: str) -> str:
    """Look up how many hours a direct flight between two cities takes.

    Args:
        origin: The city the flight leaves from
        destination: The city the flight goes to
    """
    cities = list(POPULATIONS)
    a, b = _find(origin, cities, "city"), _find(destination, cities, "city")
    hours = FLIGHTS.get(frozenset({a, b}))
    if hours is None:
        raise ValueError(f"no direct flight between {a} and {b}")
    return f"The flight from {a} to {b} takes {number_text(hours)} hours."


@tool
def home_city(person: str) -> str:
    """Look up the city a person lives in.

    Args:
        person: The person's full name
    """
    name = _find(person, list(HOMES), "person")
    return f"{name} lives in {HOMES[name]}."


TOOLS: dict[str, Tool] = {
    t.name: t for t in (calculator, convert, capital_of, population_of, price_of, flight_hours, home_city)
}
"""Every tool of the benchmark, by name."""
