"""The demo tools of the `aerix` command: calculator, clock and unit converter."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from aerix import AbortController, Agent, ToolContext
from aerix.demo_tools import (
    DEMO_TOOLS,
    MAX_INT_BITS,
    UNITS,
    calculate,
    calculator,
    clock,
    convert,
    convert_units,
    now,
)
from aerix.testing import ScriptedModel


def _cx() -> ToolContext:
    return ToolContext(signal=AbortController().signal, call_id="call_1")


def test_the_demo_tools() -> None:
    assert list(DEMO_TOOLS) == ["calculator", "clock", "convert"]
    assert DEMO_TOOLS["calculator"] is calculator
    assert calculator.schema["required"] == ["expression"]
    assert clock.schema["required"] == []
    assert convert.schema["required"] == ["value", "from_unit", "to_unit"]
    # The units are an enum, so constrained decoding only lets the model name known ones.
    assert convert.schema["properties"]["from_unit"]["enum"] == list(UNITS)


# -- calculator ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expression", "value"),
    [
        ("2+2", 4),
        ("2 + 3 * 4", 14),
        ("(2 + 3) * 4", 20),
        ("10 - 4 - 3", 3),
        ("2 * 3 ** 2", 18),
        ("-3", -3),
        ("+3", 3),
        ("--3", 3),
        ("-2 ** 2", -4),
        ("(-2) ** 2", 4),
        ("2 ** 3 ** 2", 512),
        ("2^10", 1024),
        ("6 × 7", 42),
        ("7 ÷ 2", 3.5),
        ("7 / 2", 3.5),
        ("7 // 2", 3),
        ("-7 // 2", -4),
        ("7 % 3", 1),
        ("2 ** -1", 0.5),
        ("1.5e3 + 1", 1501.0),
        ("  12 * 7  ", 84),
    ],
)
def test_calculate_arithmetic_and_precedence(expression: str, value: float) -> None:
    result = calculate(expression)
    assert result == value
    assert type(result) is type(value)


def test_powers_are_bounded() -> None:
    assert calculate("2 ** 9999") == 2**9999  # 10,000 bits: allowed
    for expression in ("2 ** 10000", "9 ** 9 ** 9", "10 ** 10 ** 10", "(2 ** 5000) * (2 ** 5000)"):
        with pytest.raises(ValueError, match="too large"):
            calculate(expression)
    with pytest.raises(ValueError, match="too large"):
        calculate("10.0 ** 400")
    assert MAX_INT_BITS == 10_000


@pytest.mark.parametrize("expression", ["1 / 0", "5 // 0", "5 % 0", "0 ** -1", "1.0 / 0.0"])
def test_division_by_zero(expression: str) -> None:
    with pytest.raises(ValueError, match="^division by zero$"):
        calculate(expression)


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("x + 1", "names (such as 'x') are not allowed"),
        ("pi", "names (such as 'pi') are not allowed"),
        ("abs(-1)", "function calls are not allowed"),
        ("__import__('os').system('true')", "function calls are not allowed"),
        ("(1).real", "attributes are not allowed"),
        ("'a' * 3", "'a' is not a number"),
        ("True + 1", "True is not a number"),
        ("1j * 2", "1j is not a number"),
        ("[1, 2]", "List is not allowed"),
        ("1,000", "commas (write 1000, not 1,000) are not allowed"),
        ("1 < 2", "Compare is not allowed"),
        ("1 << 2", "the operator LShift is not allowed"),
        ("~1", "the operator Invert is not allowed"),
        ("1 if 1 else 2", "IfExp is not allowed"),
        ("lambda: 1", "Lambda is not allowed"),
        ("2 +", "not an arithmetic expression: '2 +'"),
        ("", "not an arithmetic expression"),
        ("x = 1", "not an arithmetic expression"),
        ("(-8) ** 0.5", "not a real number"),
    ],
)
def test_anything_but_arithmetic_is_refused(expression: str, message: str) -> None:
    with pytest.raises(ValueError) as info:
        calculate(expression)
    assert message in str(info.value)


def test_a_long_expression_is_refused() -> None:
    with pytest.raises(ValueError, match="at most 500"):
        calculate("1+" * 300 + "1")


@pytest.mark.parametrize(
    ("expression", "text"),
    [("2+2", "4"), ("10/2", "5"), ("7/2", "3.5"), ("0.1+0.2", "0.3"), ("1/3", "0.333333333333333")],
)
def test_calculator_tool_result_text(expression: str, text: str) -> None:
    assert calculator.run({"expression": expression}, _cx()) == text


def test_a_calculator_error_is_an_error_result_for_the_model() -> None:
    model = ScriptedModel(
        [
            '{"calls":[{"tool":"calculator","input":{"expression":"1/0"}},'
            '{"tool":"calculator","input":{"expression":"os.system(1)"}},'
            '{"tool":"convert","input":{"value":1,"from_unit":"parsec","to_unit":"m"}}]}',
            '{"final":"cannot"}',
        ]
    )
    answer = Agent(model=model, tools=DEMO_TOOLS.values()).ask_sync("1/0?")
    results = [(ev.text, ev.error) for ev in answer.events if ev.type == "result"]
    assert results[0] == ("error: division by zero", True)
    assert results[1][0].startswith("error: function calls are not allowed") and results[1][1]
    assert results[2][0].startswith("error: input.from_unit: expected one of") and results[2][1]


# -- clock --------------------------------------------------------------------------

MOMENT = datetime(2024, 1, 15, 12, 30, 5, tzinfo=UTC)


@pytest.mark.parametrize(
    ("zone", "text"),
    [
        ("UTC", "Monday 2024-01-15T12:30:05+00:00 (UTC)"),
        ("Asia/Tokyo", "Monday 2024-01-15T21:30:05+09:00 (Asia/Tokyo)"),
        ("America/New_York", "Monday 2024-01-15T07:30:05-05:00 (America/New_York)"),
        ("Pacific/Kiritimati", "Tuesday 2024-01-16T02:30:05+14:00 (Pacific/Kiritimati)"),
    ],
)
def test_now_in_a_time_zone(zone: str, text: str) -> None:
    assert now(zone, at=MOMENT) == text


def test_now_without_a_zone_is_local_time() -> None:
    local = MOMENT.astimezone()
    assert now(at=MOMENT) == f"{local:%A} {local.isoformat(timespec='seconds')} ({local.tzname()})"


@pytest.mark.parametrize("zone", ["Mars/Olympus_Mons", "../../etc/passwd", "not a zone"])
def test_an_unknown_time_zone_is_refused(zone: str) -> None:
    with pytest.raises(ValueError, match=r"unknown time zone .*; use an IANA name such as 'Europe/Paris'"):
        now(zone)


def test_clock_tool_tells_the_current_time() -> None:
    before = datetime.now(UTC).replace(microsecond=0)
    weekday, stamp, zone = clock.run({"timezone": "UTC"}, _cx()).split(" ")
    after = datetime.now(UTC)
    moment = datetime.fromisoformat(stamp)
    assert zone == "(UTC)"
    assert moment.utcoffset() == timedelta(0)
    assert before <= moment <= after
    assert weekday == f"{moment:%A}"
    _, local, _ = clock.run({}, _cx()).split(" ", 2)  # no zone: local time
    assert datetime.fromisoformat(local).utcoffset() == datetime.now().astimezone().utcoffset()


# -- unit converter --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "from_unit", "to_unit", "text"),
    [
        (1, "km", "m", "1 km = 1000 m"),
        (10, "km", "mi", "10 km = 6.21371 mi"),
        (12, "in", "cm", "12 in = 30.48 cm"),
        (3, "ft", "yd", "3 ft = 1 yd"),
        (1, "lb", "g", "1 lb = 453.592 g"),
        (16, "oz", "lb", "16 oz = 1 lb"),
        (1, "gal", "l", "1 gal = 3.78541 l"),
        (250, "ml", "l", "250 ml = 0.25 l"),
        (1.5, "h", "min", "1.5 h = 90 min"),
        (1, "week", "day", "1 week = 7 day"),
        (36, "km/h", "m/s", "36 km/h = 10 m/s"),
        (60, "mph", "km/h", "60 mph = 96.5606 km/h"),
        (100, "celsius", "fahrenheit", "100 celsius = 212 fahrenheit"),
        (32, "fahrenheit", "celsius", "32 fahrenheit = 0 celsius"),
        (-40, "celsius", "fahrenheit", "-40 celsius = -40 fahrenheit"),
        (0, "kelvin", "celsius", "0 kelvin = -273.15 celsius"),
        (5, "m", "m", "5 m = 5 m"),
    ],
)
def test_convert_units(value: float, from_unit: str, to_unit: str, text: str) -> None:
    assert convert_units(value, from_unit, to_unit) == text


def test_convert_tool_gives_the_same_text() -> None:
    assert convert.run({"value": 10, "from_unit": "km", "to_unit": "mi"}, _cx()) == "10 km = 6.21371 mi"


@pytest.mark.parametrize(
    ("from_unit", "to_unit", "message"),
    [
        ("parsec", "m", "unknown unit 'parsec'; known units: mm, cm, m, km"),
        ("m", "KM", "unknown unit 'KM'; known units:"),
        ("km", "kg", r"cannot convert km \(length\) to kg \(mass\)"),
        ("celsius", "s", r"cannot convert celsius \(temperature\) to s \(time\)"),
    ],
)
def test_bad_units_are_refused(from_unit: str, to_unit: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        convert_units(1, from_unit, to_unit)
