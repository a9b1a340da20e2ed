"""The input check and the schema work: what they cost.

Measures, per call, `check_input` (the check every tool call goes through
before `run`) on a flat input (`add(a, b)`) and on a 20-field nested input (an
order: a customer object, three items of five fields, a shipping object with a
nested address, two scalars), both when it passes and when it fails deep
inside; the same nested check with `jsonschema` (Draft 2020-12, the validator
compiled once), for the choice that docs/tools.md explains; and what defining
tools costs: a nested explicit tool, a schema tool (with its llguidance
compile, first time and cached) and importing llguidance. The target: the
20-field nested check costs at most 50 µs.

Run from the repository root:

    python bench/schema.py [--no-write]

It prints the table and writes it to the `schema` section of docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
import sys
import timeit
from collections.abc import Callable
from typing import Any

import _report
from aerix import Field, tool
from aerix import _schema as schema_module
from aerix.tools import check_input

TARGET_US = 50.0
"""The 20-field nested check should cost at most this (SPEC 9.1's issue)."""

ORDER: dict[str, Any] = {
    "customer": Field(
        "object",
        required=True,
        properties={
            "name": Field("string", required=True),
            "email": Field("string", required=True),
            "vip": Field("boolean"),
            "age": Field("integer"),
        },
    ),
    "items": Field(
        "array",
        required=True,
        items=Field(
            "object",
            properties={
                "sku": Field("string", required=True),
                "qty": Field("integer", required=True),
                "price": Field("number", required=True),
                "gift": Field("boolean"),
                "note": Field("string"),
            },
        ),
    ),
    "shipping": Field(
        "object",
        required=True,
        properties={
            "speed": Field("string", enum=["slow", "fast", "overnight"], required=True),
            "address": Field(
                "object",
                required=True,
                properties={
                    "street": Field("string", required=True),
                    "city": Field("string", required=True),
                    "zip": Field("string", required=True),
                    "country": Field("string", required=True),
                },
            ),
        },
    ),
    "coupon": Field("string"),
    "total": Field("number", required=True),
}
"""20 fields: 5 in `customer` (itself included), 6 in `items`, 7 in `shipping`, 2 scalars."""

LINE = {"sku": "A1", "qty": 2, "price": 9.5, "gift": False, "note": "blue"}
GOOD: dict[str, Any] = {
    "customer": {"name": "Ana", "email": "ana@example.com", "vip": True, "age": 41},
    "items": [LINE, {**LINE, "sku": "B2"}, {**LINE, "sku": "C3", "qty": 1}],
    "shipping": {
        "speed": "fast",
        "address": {"street": "Rua A 1", "city": "Porto", "zip": "4000", "country": "PT"},
    },
    "coupon": "SPRING",
    "total": 28.5,
}
BAD: dict[str, Any] = {**GOOD, "items": [LINE, LINE, {**LINE, "qty": "3"}]}


def count_fields(fields: dict[str, Field]) -> int:
    n = 0
    for f in fields.values():
        n += 1
        while f.items is not None:
            f = f.items
        n += count_fields(dict(f.properties or {}))
    return n


def per_call_us(fn: Callable[[], object], number: int) -> float:
    """The median over 7 repeats of the time per call, in µs."""
    return _report.median([t / number * 1e6 for t in timeit.repeat(fn, number=number, repeat=7)])


def import_llguidance_ms() -> float | None:
    if importlib.util.find_spec("llguidance") is None:
        return None
    code = "import time; t = time.perf_counter(); import llguidance; print(time.perf_counter() - t)"
    times = [
        float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout)
        for _ in range(5)
    ]
    return _report.median(times) * 1e3


def rows() -> list[tuple[str, float, str]]:
    assert count_fields(ORDER) == 20
    add = tool(
        name="add",
        input={"a": Field("integer", required=True), "b": Field("integer", required=True)},
        run=lambda i: i["a"] + i["b"],
    )
    order = tool(name="order", input=ORDER, run=lambda i: "ok")
    assert check_input(order, GOOD) is None
    assert check_input(order, BAD) == 'input.items[2].qty: expected integer, got "3"'
    out = [
        ("`check_input`, flat `add(a, b)`, passes", per_call_us(lambda: check_input(add, {"a": 1, "b": 2}), 200_000), "µs"),
        ("`check_input`, 20-field nested order, passes", per_call_us(lambda: check_input(order, GOOD), 20_000), "µs"),
        ("`check_input`, 20-field nested order, fails at `items[2].qty`", per_call_us(lambda: check_input(order, BAD), 20_000), "µs"),
    ]  # fmt: skip
    if importlib.util.find_spec("jsonschema") is not None:
        import jsonschema  # type: ignore[import-untyped]

        validator = jsonschema.Draft202012Validator(order.schema)
        assert validator.is_valid(GOOD) and not validator.is_valid(BAD)
        out.append(("jsonschema 4 `is_valid`, the same order, passes", per_call_us(lambda: validator.is_valid(GOOD), 2_000), "µs"))  # fmt: skip
        first = lambda: next(validator.iter_errors(BAD))  # noqa: E731
        out.append(("jsonschema 4 first error, the same order, fails", per_call_us(first, 2_000), "µs"))
    out.append(("define the nested order tool (`tool(input=...)`)", per_call_us(lambda: tool(name="order", input=ORDER, run=lambda i: ""), 500), "µs"))  # fmt: skip
    mcp_like = json.loads(json.dumps(order.schema))
    if schema_module._matcher():

        def first_compile() -> object:
            schema_module._decodable.clear()
            return tool(name="order", schema=mcp_like, run=lambda i: "")

        out.append(("define it from its JSON Schema (`tool(schema=...)`), llguidance compile included", per_call_us(first_compile, 200), "µs"))  # fmt: skip
        out.append(("the same, llguidance's answer cached (the next tool with that schema)", per_call_us(lambda: tool(name="order", schema=mcp_like, run=lambda i: ""), 500), "µs"))  # fmt: skip
        ms = import_llguidance_ms()
        if ms is not None:
            out.append(("import llguidance (once, at the first schema tool or model)", ms, "ms"))
    else:
        out.append(("define it from its JSON Schema (`tool(schema=...)`), llguidance not installed", per_call_us(lambda: tool(name="order", schema=mcp_like, run=lambda i: ""), 500), "µs"))  # fmt: skip
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--no-write", action="store_true", help="print only; leave docs/benchmarks.md as it is"
    )
    args = parser.parse_args(argv)
    measured = rows()
    table = ["| what | median | unit |", "|---|---:|---|"]
    table += [f"| {what} | {value:.1f} | {unit} |" for what, value, unit in measured]
    nested = measured[1][1]
    verdict = "met" if nested <= TARGET_US else "**not met**"
    text = "\n".join(
        [
            "## Input checks and schemas",
            "",
            "`bench/schema.py`. The input check that every tool call goes through before `run`, on a",
            "flat input and on a 20-field nested one (a customer object, three items of five fields, a",
            "shipping object with a nested address, two scalars), passing and failing deep inside; the",
            "same nested check with `jsonschema` (its validator built once); and what defining tools",
            "costs. Each figure is the median of 7 repeats.",
            "",
            f"Machine: {_report.machine()}",
            "",
            *table,
            "",
            f"- the 20-field nested check: {nested:.1f} µs (target ≤ {TARGET_US:.0f} µs: {verdict}).",
        ]
    )
    print(text)
    if not args.no_write:
        print(f"\nwrote {_report.write_section('schema', text)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
