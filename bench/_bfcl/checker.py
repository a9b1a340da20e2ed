"""BFCL's AST checker for Python, on flat scalar parameters.

It follows `ast_checker.py` of the Berkeley Function Calling Leaderboard
(ShishirPatil/gorilla, berkeley-function-call-leaderboard, Apache-2.0):

- the function name must match;
- every required parameter must be present;
- every parameter sent must be one the function has and the answer lists;
- types are exact (a `bool` is not an `int`), except that an `int` is accepted
  for a `float` parameter; a value of the answer's own type is accepted too
  (BFCL's "variable" case, where the answer's type differs from the declared one);
- a string is compared after BFCL's normalisation (spaces and `,./-_*^` removed,
  lower case, `'` read as `"`); other values by `==` (so `5 == 5.0`);
- an optional parameter may be absent only when its answers include `""`;
- parallel: the calls match the answers in any order, one call per answer;
- multiple: exactly one call, checked against the one answer.

Only the Python rules are implemented; lists, tuples and dicts never reach it
(entries with such parameters are skipped).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["Check", "check_entry", "check_multiple", "check_parallel", "check_simple", "standardize_string"]

PYTHON_TYPES: dict[str, type] = {"string": str, "integer": int, "float": float, "boolean": bool, "any": str}

Output = Mapping[str, Mapping[str, Any]]
"""One call as BFCL writes it: `{function name: {parameter: value}}`."""
Answer = Mapping[str, Mapping[str, Sequence[Any]]]
"""One expected call: `{function name: {parameter: [allowed values]}}` (`""`: may be absent)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Check:
    """The verdict on one entry's calls."""

    valid: bool
    """Whether the calls are right."""
    error: str = ""
    """Why not (BFCL's error type, then a detail)."""


_OK = Check(valid=True)


def standardize_string(s: str) -> str:
    """BFCL's string normalisation: drop spaces and `,./-_*^`, lower case, `'` → `"`."""
    return re.sub(r"[ ,./\-_*^]", "", s).lower().replace("'", '"')


def _answer_type(allowed: Sequence[Any]) -> type | None:
    for a in allowed:
        if a != "":
            return type(a)
    return None


def _norm(value: Any) -> Any:
    """A value with its strings standardized, at any depth (for lists and dicts)."""
    if isinstance(value, str):
        return standardize_string(value)
    if isinstance(value, list | tuple):
        return [_norm(v) for v in value]
    if isinstance(value, dict):
        return {k: _norm(v) for k, v in value.items()}
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return value


def _check_nested(param: str, value: Any, declared: str, allowed: Sequence[Any]) -> Check:
    """An array, tuple or dict value (BFCL's list and dict checkers, standardized strings)."""
    if declared in ("array", "tuple"):
        if not isinstance(value, list):
            return Check(valid=False, error=f"type_error:nested: {param!r} expected a list, got {value!r}")
        if any(_norm(value) == _norm(a) for a in allowed if a != ""):
            return _OK
        return Check(valid=False, error=f"value_error:list: {param!r}={value!r}, allowed {list(allowed)!r}")
    if not isinstance(value, dict):
        return Check(valid=False, error=f"type_error:nested: {param!r} expected a dict, got {value!r}")
    for option in allowed:
        if not isinstance(option, dict) or not set(value) <= set(option):
            continue
        if all(
            ("" in option[k]) if k not in value else _norm(value[k]) in [_norm(a) for a in option[k]]
            for k in option
        ):
            return _OK
    return Check(valid=False, error=f"value_error:dict: {param!r}={value!r}, allowed {list(allowed)!r}")


def _check_value(param: str, value: Any, declared: str, allowed: Sequence[Any]) -> Check:
    if declared in ("array", "tuple", "dict"):
        return _check_nested(param, value, declared, allowed)
    expected = PYTHON_TYPES.get(declared)
    if expected is None:
        return Check(valid=False, error=f"type_error:unsupported: parameter {param!r} has type {declared!r}")
    if declared == "float" and type(value) is int:
        value = float(value)
    answer_type = _answer_type(allowed)
    is_variable = answer_type is not None and answer_type is not expected
    if type(value) is not expected:
        if answer_type is not None and type(value) is answer_type:
            is_variable = True
        else:
            return Check(
                valid=False,
                error=f"type_error:simple: {param!r} expected {declared}, got {type(value).__name__} {value!r}",
            )
    if expected is str and not is_variable:
        wanted = [standardize_string(a) for a in allowed if isinstance(a, str)]
        if standardize_string(value) not in wanted:
            return Check(
                valid=False, error=f"value_error:string: {param!r}={value!r}, allowed {list(allowed)!r}"
            )
        return _OK
    if value not in allowed:
        return Check(valid=False, error=f"value_error:others: {param!r}={value!r}, allowed {list(allowed)!r}")
    return _OK


def check_simple(function: Mapping[str, Any], output: Output, answer: Answer) -> Check:
    """One call against one expected call (BFCL's `simple_function_checker`).

    Args:
        function: The BFCL function description (`name`, `parameters`).
        output: The call made, `{name: {param: value}}`.
        answer: The expected call, `{name: {param: [allowed values]}}`.
    """
    allowed_by_param = next(iter(answer.values()))
    name = function["name"]
    details = function["parameters"]["properties"]
    if name not in output:
        return Check(valid=False, error=f"wrong_func_name: expected {name!r}, got {list(output)!r}")
    params = output[name]
    for p in function["parameters"].get("required", []):
        if p not in params:
            return Check(valid=False, error=f"missing_required: {p!r}")
    for p, value in params.items():
        if p not in details or p not in allowed_by_param:
            return Check(valid=False, error=f"unexpected_param: {p!r}={value!r}")
        verdict = _check_value(p, value, details[p]["type"], allowed_by_param[p])
        if not verdict.valid:
            return verdict
    for p, allowed in allowed_by_param.items():
        if p not in params and "" not in allowed:
            return Check(valid=False, error=f"missing_optional: {p!r} not sent and not optional")
    return _OK


def _find(functions: Sequence[Mapping[str, Any]], name: str) -> Mapping[str, Any]:
    for f in functions:
        if f["name"] == name:
            return f
    raise KeyError(f"the answer names {name!r}, which is not among the entry's functions")


def check_parallel(
    functions: Sequence[Mapping[str, Any]], outputs: Sequence[Output], answers: Sequence[Answer]
) -> Check:
    """Calls against expected calls in any order (BFCL's `parallel_function_checker_no_order`)."""
    if len(outputs) != len(answers):
        return Check(valid=False, error=f"wrong_count: {len(outputs)} calls, expected {len(answers)}")
    matched: set[int] = set()
    for i, answer in enumerate(answers):
        function = _find(functions, next(iter(answer)))
        last = Check(valid=False, error="no call left")
        for j, output in enumerate(outputs):
            if j in matched:
                continue
            last = check_simple(function, output, answer)
            if last.valid:
                matched.add(j)
                break
        if not last.valid:
            return Check(valid=False, error=f"cannot_find_match for answer {i}: {last.error}")
    return _OK


def check_multiple(
    functions: Sequence[Mapping[str, Any]], outputs: Sequence[Output], answers: Sequence[Answer]
) -> Check:
    """One call among several functions (BFCL's `multiple_function_checker`)."""
    if len(outputs) != len(answers):
        return Check(valid=False, error=f"wrong_count: {len(outputs)} calls, expected {len(answers)}")
    return check_simple(_find(functions, next(iter(answers[0]))), outputs[0], answers[0])


def check_entry(
    category: str,
    functions: Sequence[Mapping[str, Any]],
    outputs: Sequence[Output],
    answers: Sequence[Answer] | None,
) -> Check:
    """The verdict for one entry of `category` (irrelevance: right when nothing is called)."""
    if category in ("irrelevance", "live_irrelevance"):
        if outputs:
            return Check(valid=False, error=f"irrelevance: {len(outputs)} call(s) made")
        return _OK
    assert answers is not None
    if "parallel" in category:
        return check_parallel(functions, outputs, answers)
    if "multiple" in category:
        return check_multiple(functions, outputs, answers)
    if len(outputs) != 1:
        return Check(valid=False, error=f"wrong_count: {len(outputs)} calls, expected 1")
    return check_simple(functions[0], outputs[0], answers[0])
