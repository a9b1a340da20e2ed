"""The demo tools the `aerix` command gives its agent: a calculator, a clock and a unit converter.

They are small and safe on purpose: the calculator walks the `ast` of an
arithmetic expression (never `eval`), and no tool reaches the network or
writes a file. Each is also a plain function (`calculate`, `now`,
`convert_units`) that raises `ValueError` with a message saying what is
wrong and what is allowed; the tools turn that into an `error: …` result.

Examples:
    >>> calculate("2 + 3 * 4")
    14
    >>> convert_units(10, "km", "mi")
    '10 km = 6.21371 mi'
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable, Mapping
from datetime import datetime
from types import MappingProxyType
from typing import Literal, TypeAlias, get_args
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from .tools import Tool, tool

__all__ = ["DEMO_TOOLS", "calculate", "calculator", "clock", "convert", "convert_units", "now"]

# -- the calculator -------------------------------------------------------------

MAX_EXPRESSION_CHARS = 500
"""The longest expression the calculator reads."""
MAX_INT_BITS = 10_000
"""The largest integer result (about 3,000 digits): `9**9**9` is refused, not computed."""

Number: TypeAlias = int | float

_BINARY: dict[type[ast.operator], Callable[[Number, Number], Number]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY: dict[type[ast.unaryop], Callable[[Number], Number]] = {
    ast.UAdd: operator.pos,
    ast.USub: operator.neg,
}
_ALLOWED = "numbers, + - * / // % ** (or ^) and parentheses"


def calculate(expression: str) -> Number:
    """Evaluate an arithmetic expression safely.

    Numbers, `+ - * / // %`, `**` (also written `^`), unary minus and
    parentheses; `×` and `÷` are read as `*` and `/`. Names, calls,
    attributes and everything else are refused. Integer results are bounded
    (`MAX_INT_BITS`), so a huge power is refused instead of computed.

    Args:
        expression: The expression, such as `"(2 + 3) * -4 ** 2"`.

    Raises:
        ValueError: The expression is not plain arithmetic, divides by zero,
            or its result is too large or not a real number.
    """
    if len(expression) > MAX_EXPRESSION_CHARS:
        raise ValueError(
            f"the expression is {len(expression)} characters long; at most {MAX_EXPRESSION_CHARS}"
        )
    text = expression.replace("^", "**").replace("×", "*").replace("÷", "/")
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except (SyntaxError, RecursionError, MemoryError) as exc:
        raise ValueError(f"not an arithmetic expression: {expression!r}; use {_ALLOWED}") from exc
    return _eval(tree.body)


def _eval(node: ast.expr) -> Number:
    if isinstance(node, ast.Constant):
        if isinstance(node.value, bool) or not isinstance(node.value, int | float):
            raise ValueError(f"{node.value!r} is not a number; use {_ALLOWED}")
        return node.value
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_eval(node.operand))
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _eval(node.left), _eval(node.right)
        if isinstance(node.op, ast.Pow):
            _check_power(left, right)
        try:
            value = _BINARY[type(node.op)](left, right)
        except ZeroDivisionError:
            raise ValueError("division by zero") from None
        except OverflowError:
            raise ValueError("the result is too large") from None
        return _check_result(value)
    raise ValueError(f"{_describe(node)} not allowed; use {_ALLOWED}")


def _check_power(base: Number, exponent: Number) -> None:
    # |base| ** exponent has at least (bit_length - 1) * exponent bits.
    if (
        isinstance(base, int)
        and isinstance(exponent, int)
        and (abs(base).bit_length() - 1) * exponent > MAX_INT_BITS
    ):
        raise ValueError(f"{base} ** {exponent} is too large (more than {MAX_INT_BITS} bits)")


def _check_result(value: object) -> Number:
    if isinstance(value, int):
        if value.bit_length() > MAX_INT_BITS:
            raise ValueError(f"the result is too large (more than {MAX_INT_BITS} bits)")
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError("the result is too large")
        return value
    raise ValueError("the result is not a real number")  # complex: a negative base, a fractional power


def _describe(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return f"names (such as {node.id!r}) are"
    if isinstance(node, ast.Call):
        return "function calls are"
    if isinstance(node, ast.Attribute):
        return "attributes are"
    if isinstance(node, ast.Tuple):
        return "commas (write 1000, not 1,000) are"
    if isinstance(node, ast.BinOp | ast.UnaryOp):
        return f"the operator {type(node.op).__name__} is"
    return f"{type(node).__name__} is"


def _format_number(value: Number) -> str:
    if isinstance(value, float):
        if value.is_integer() and abs(value) < 1e15:
            return str(int(value))
        return format(value, ".15g")
    return str(value)


@tool
def calculator(expression: str) -> str:
    """Evaluate an arithmetic expression and return the number.

    Args:
        expression: Arithmetic with numbers, + - * / // % ** and parentheses, e.g. "(12 + 3) * 7"
    """
    return _format_number(calculate(expression))


# -- the clock -------------------------------------------------------------------


def now(timezone: str | None = None, *, at: datetime | None = None) -> str:
    """The date and time, in a time zone or the machine's own.

    Args:
        timezone: An IANA time zone name such as `"Europe/Paris"` or `"UTC"`;
            `None` for the machine's local time.
        at: The moment to show instead of now (for tests); a naive value is
            taken as local time.

    Raises:
        ValueError: The time zone is unknown.
    """
    moment = (at or datetime.now()).astimezone()
    if timezone:
        try:
            zone = ZoneInfo(timezone)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(
                f"unknown time zone {timezone!r}; use an IANA name such as 'Europe/Paris' or 'UTC'"
            ) from None
        moment = moment.astimezone(zone)
        name = timezone
    else:
        name = moment.tzname() or "local time"
    return f"{moment.strftime('%A')} {moment.isoformat(timespec='seconds')} ({name})"


@tool
def clock(timezone: str | None = None) -> str:
    """Tell the current date, weekday and time.

    Args:
        timezone: IANA time zone such as "Europe/Paris" or "UTC"; leave out for local time
    """
    return now(timezone)


# -- the unit converter ----------------------------------------------------------

Unit: TypeAlias = Literal[
    "mm", "cm", "m", "km", "in", "ft", "yd", "mi",
    "mg", "g", "kg", "oz", "lb",
    "ml", "l", "gal",
    "s", "min", "h", "day", "week",
    "m/s", "km/h", "mph",
    "celsius", "fahrenheit", "kelvin",
]  # fmt: skip
"""The units `convert` knows (US gallons)."""

_FACTORS: dict[str, dict[str, float]] = {
    "length": {"mm": 1e-3, "cm": 1e-2, "m": 1.0, "km": 1e3,
               "in": 0.0254, "ft": 0.3048, "yd": 0.9144, "mi": 1609.344},
    "mass": {"mg": 1e-6, "g": 1e-3, "kg": 1.0, "oz": 0.028349523125, "lb": 0.45359237},
    "volume": {"ml": 1e-3, "l": 1.0, "gal": 3.785411784},
    "time": {"s": 1.0, "min": 60.0, "h": 3600.0, "day": 86400.0, "week": 604800.0},
    "speed": {"m/s": 1.0, "km/h": 1 / 3.6, "mph": 0.44704},
}  # fmt: skip
_TEMPERATURES = ("celsius", "fahrenheit", "kelvin")
_DIMENSION = {u: d for d, units in _FACTORS.items() for u in units}
_DIMENSION.update(dict.fromkeys(_TEMPERATURES, "temperature"))
UNITS: tuple[str, ...] = get_args(Unit)
assert set(UNITS) == set(_DIMENSION)


def convert_units(value: float, from_unit: str, to_unit: str) -> str:
    """Convert a quantity between two units of the same kind.

    Args:
        value: The quantity, in `from_unit`.
        from_unit: One of `UNITS`.
        to_unit: One of `UNITS`, of the same kind (length, mass, volume,
            time, speed or temperature).

    Returns:
        The conversion in words, such as `"10 km = 6.21371 mi"`.

    Raises:
        ValueError: An unknown unit, or two units of different kinds.
    """
    for unit in (from_unit, to_unit):
        if unit not in _DIMENSION:
            raise ValueError(f"unknown unit {unit!r}; known units: {', '.join(UNITS)}")
    kind, other = _DIMENSION[from_unit], _DIMENSION[to_unit]
    if kind != other:
        raise ValueError(f"cannot convert {from_unit} ({kind}) to {to_unit} ({other})")
    if kind == "temperature":
        result = _from_kelvin(_to_kelvin(value, from_unit), to_unit)
    else:
        result = value * _FACTORS[kind][from_unit] / _FACTORS[kind][to_unit]
    return f"{_short(value)} {from_unit} = {_short(result)} {to_unit}"


def _to_kelvin(value: float, unit: str) -> float:
    if unit == "celsius":
        return value + 273.15
    if unit == "fahrenheit":
        return (value - 32) * 5 / 9 + 273.15
    return value


def _from_kelvin(value: float, unit: str) -> float:
    if unit == "celsius":
        return value - 273.15
    if unit == "fahrenheit":
        return (value - 273.15) * 9 / 5 + 32
    return value


def _short(value: float) -> str:
    text = format(value, ".6g")
    return "0" if text == "-0" else text


@tool
def convert(value: float, from_unit: Unit, to_unit: Unit) -> str:
    """Convert a quantity to another unit of the same kind: length, mass, volume, time, speed, temperature.

    Args:
        value: The quantity to convert
        from_unit: The unit of the value
        to_unit: The unit to convert to
    """
    return convert_units(value, from_unit, to_unit)


DEMO_TOOLS: Mapping[str, Tool] = MappingProxyType({t.name: t for t in (calculator, clock, convert)})
"""The demo tools by name, in the order `aerix run --tools` lists them."""
