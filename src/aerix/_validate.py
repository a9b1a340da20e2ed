"""Validating a value against a JSON Schema: the input check of every tool call.

`compile_validator` turns a schema (one without `$ref`s, as `check_schema`
gives it) into a tree of small closures, once; checking a value then walks the
value, and names the JSON path of the first thing wrong
(`input.items[2].qty: expected integer, got "3"`). No path string is built
unless a check fails: a failure collects its path segments as it unwinds.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping
from typing import Any

from .errors import AerixError

__all__ = [
    "Validator",
    "compile_validator",
    "is_integer",
    "is_number",
    "json_type",
    "key_segment",
    "schema_regex",
    "short",
    "validate",
]

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def key_segment(name: str) -> str:
    """A property name as a path segment: `.name`, or `["odd name"]`."""
    return f".{name}" if _IDENTIFIER.fullmatch(name) else f"[{json.dumps(name, ensure_ascii=False)}]"


_ECMA_SPACE = r"\s\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"
r"""ECMAScript's `\s` (JSON Schema's regexes are ECMAScript's): Python's ASCII one and the rest."""
_ECMA_NON_SPACE = (
    r"\x00-\x08\x0e-\x1f\x21-\x9f\xa1-\u167f\u1681-\u1fff\u200b-\u2027\u202a-\u202e"
    r"\u2030-\u205e\u2060-\u2fff\u3001-\ufefe\uff00-\U0010ffff"
)
r"""ECMAScript's `\S`, spelled out: every character but `_ECMA_SPACE`'s, for inside a class."""
_ECMA_DOT = r"[^\n\r\u2028\u2029]"
"""ECMAScript's `.`: any character but a line terminator (Python's `.` takes `\r` and U+2028)."""


def schema_regex(pattern: str) -> re.Pattern[str]:
    r"""A JSON Schema `pattern` compiled to match as ECMAScript's regexes do, which JSON
    Schema's are: `$` only at the very end (Python's also before a final line break), `.`
    no line terminator, `\d` and `\w` ASCII only, `\s` Unicode's spaces; raises `re.error`,
    about `pattern` as written.

    Example:
        >>> bool(schema_regex("^[0-9]{3}$").search("123\n")), bool(schema_regex(r"^\d+$").search("١٢"))
        (False, False)
    """
    try:  # a pattern that sets `(?s)` means its `.` to take line breaks too
        dotall = bool(re.compile(pattern).flags & re.DOTALL)
    except re.error:
        dotall = False
    out: list[str] = []
    in_class = False
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\" and i + 1 < len(pattern):
            n = pattern[i + 1]
            if n == "s":
                out.append(_ECMA_SPACE if in_class else f"[{_ECMA_SPACE}]")
            elif n == "S":
                out.append(_ECMA_NON_SPACE if in_class else f"[^{_ECMA_SPACE}]")
            else:
                out.append(pattern[i : i + 2])
            i += 2
            continue
        if in_class:
            in_class = c != "]"
        elif c == "[":
            in_class = True
            opening = "[^" if pattern.startswith("[^", i) else "["
            if pattern.startswith("]", i + len(opening)):  # a `]` first is a member, as Python reads it
                out.append(opening + "]")
                i += len(opening) + 1
                continue
        elif c == "$":
            c = r"\Z"
        elif c == "." and not dotall:
            c = _ECMA_DOT
        out.append(c)
        i += 1
    try:
        return re.compile("".join(out), re.ASCII)
    except re.error:
        re.compile(pattern)  # the error as written, where there is one
        raise


class _Fail:
    """A failed check: what is wrong, and the path to it, built backwards as it unwinds."""

    __slots__ = ("expected", "message", "missing", "segments", "tag", "unknown")

    def __init__(
        self,
        message: str,
        expected: tuple[str, ...] | None = None,
        *,
        tag: bool = False,
        unknown: int = 0,
        missing: str | None = None,
    ) -> None:
        self.message = message
        self.segments: list[str] = []
        self.expected = expected
        """What a type, `const` or `enum` check wanted, when that is what failed (anyOf merges them)."""
        self.tag = tag
        """A `const` or `enum` check failed: below the root of an anyOf's choice, the value
        names another choice (`"kind": "dog"` against the cat's)."""
        self.unknown = unknown
        """How many keys of an object its schema does not take, when that is what failed: in an
        anyOf, the more, the likelier the value is another choice's shape."""
        self.missing = missing
        """The required keys an object lacks (`"a and b"`), when that is what failed."""

    def at(self, segment: str) -> _Fail:
        self.segments.append(segment)
        return self

    def text(self, path: str) -> str:
        return f"{path}{''.join(reversed(self.segments))}: {self.message}"


_Check = Callable[[Any], "_Fail | None"]
Validator = Callable[[object], "str | None"]
"""`validator(value)`: `None` if the value fits, else `'input.<path>: <what is wrong>'`."""


def compile_validator(schema: dict[str, Any] | bool, path: str = "input") -> Validator:
    """Compile a schema (from `check_schema`, or a `Tool.schema`) into a validator, once.

    Args:
        schema: A schema without `$ref`s.
        path: The name of the value's root in messages.
    """
    check = _compile(schema)

    def validator(value: object) -> str | None:
        fail = check(value)
        return None if fail is None else fail.text(path)

    return validator


_cache: dict[int, tuple[object, _Check]] = {}


def validate(schema: dict[str, Any], value: object, path: str = "input") -> str | None:
    """Check a value against a schema (one without `$ref`s, as `check_schema` returns).

    The schema is compiled on first use and kept (by identity) for the next calls.

    Returns:
        `None` if the value fits, else the first failure as `'<path>: <what>'`, e.g.
        `'input.items[2].qty: expected integer, got "3"'` (`True` is not an integer;
        an integer is a number).
    """
    hit = _cache.get(id(schema))
    if hit is None or hit[0] is not schema:
        if len(_cache) >= 256:
            _cache.clear()
        hit = _cache[id(schema)] = (schema, _compile(schema))
    fail = hit[1](value)
    return None if fail is None else fail.text(path)


def is_integer(v: object) -> bool:
    """A JSON integer: an `int`, but not a `bool`."""
    return isinstance(v, int) and not isinstance(v, bool)


def is_number(v: object) -> bool:
    """A JSON number: an integer or a finite `float`."""
    if isinstance(v, float):
        return math.isfinite(v)
    return isinstance(v, int) and not isinstance(v, bool)


_TYPE_TESTS: dict[str, Callable[[object], bool]] = {
    "string": lambda v: isinstance(v, str),
    "integer": is_integer,
    "number": is_number,
    "boolean": lambda v: isinstance(v, bool),
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "null": lambda v: v is None,
}


def _compile(schema: dict[str, Any] | bool) -> _Check:
    if schema is True:
        return _nothing
    if schema is False:
        return lambda v: _Fail(f"no value is allowed here, got {short(v)}")
    if "$ref" in schema:
        raise AerixError("options", "a schema with a $ref must go through check_schema first")
    checks: list[_Check] = []
    objects = "properties" in schema or "required" in schema or "additionalProperties" in schema
    if "type" in schema and not (objects and schema["type"] == "object"):  # else the object check's
        checks.append(_type_check(schema["type"]))
    if "const" in schema:
        checks.append(_const_check(schema["const"]))
    if "enum" in schema:
        checks.append(_enum_check(schema["enum"]))
    checks += _number_checks(schema) + _string_checks(schema)
    if "items" in schema or "minItems" in schema or "maxItems" in schema:
        checks.append(_array_check(schema))
    if objects:
        checks.append(_object_check(schema, typed=schema.get("type") == "object"))
    if "anyOf" in schema:
        checks.append(_any_of([_compile(s) for s in schema["anyOf"]]))
    if "oneOf" in schema:
        checks.append(_one_of([_compile(s) for s in schema["oneOf"]]))
    if not checks:
        return _nothing
    if len(checks) == 1:
        return checks[0]
    if len(checks) == 2:
        first, second = checks

        def both(v: Any) -> _Fail | None:
            return first(v) or second(v)

        return both
    every = tuple(checks)

    def each(v: Any) -> _Fail | None:
        for c in every:
            fail = c(v)
            if fail is not None:
                return fail
        return None

    return each


def _nothing(v: Any) -> _Fail | None:
    return None


def _type_check(t: str | list[str]) -> _Check:
    names = tuple(t) if isinstance(t, list) else (t,)
    wanted = " or ".join(names)
    if len(names) == 1:
        test = _TYPE_TESTS[names[0]]
        if names[0] == "string":  # the common cases, without a call

            def string_check(v: Any) -> _Fail | None:
                return None if isinstance(v, str) else _Fail(f"expected string, got {short(v)}", names)

            return string_check
        if names[0] == "integer":

            def integer_check(v: Any) -> _Fail | None:
                if type(v) is int or (isinstance(v, int) and not isinstance(v, bool)):
                    return None
                return _Fail(f"expected integer, got {short(v)}", names)

            return integer_check
    else:
        tests = tuple(_TYPE_TESTS[n] for n in names)

        def test(v: object) -> bool:
            return any(f(v) for f in tests)

    def check(v: Any) -> _Fail | None:
        return None if test(v) else _Fail(f"expected {wanted}, got {short(v)}", names)

    return check


def _tag(v: object) -> object:
    """A hashable key under which JSON-equal values meet (`1 == 1.0`, but `True != 1`)."""
    if isinstance(v, bool):
        return ("b", v)
    if isinstance(v, int | float):
        return ("n", v)
    if isinstance(v, str):
        return ("s", v)
    if v is None:
        return ("z",)
    if isinstance(v, list):
        return ("l", tuple(_tag(x) for x in v))
    if isinstance(v, dict):
        return ("d", frozenset((k, _tag(x)) for k, x in v.items()))
    return ("?", id(v))


def _const_check(const: object) -> _Check:
    key = _tag(const)
    text = short(const)

    def check(v: Any) -> _Fail | None:
        return None if _tag(v) == key else _Fail(f"expected {text}, got {short(v)}", (text,), tag=True)

    return check


def _enum_check(values: list[Any]) -> _Check:
    keys = frozenset(_tag(x) for x in values)
    text = short(values, 200)

    def check(v: Any) -> _Fail | None:
        return (
            None
            if _tag(v) in keys
            else _Fail(f"expected one of {text}, got {short(v)}", (f"one of {text}",), tag=True)
        )

    return check


def _number_checks(schema: Mapping[str, Any]) -> list[_Check]:
    out: list[_Check] = []
    for name, words, ok in (
        ("minimum", "at least", lambda v, m: v >= m),
        ("exclusiveMinimum", "more than", lambda v, m: v > m),
        ("maximum", "at most", lambda v, m: v <= m),
        ("exclusiveMaximum", "less than", lambda v, m: v < m),
    ):
        if name in schema:
            out.append(_bound(schema[name], words, ok))
    return out


def _bound(limit: float, words: str, ok: Callable[[float, float], bool]) -> _Check:
    def check(v: Any) -> _Fail | None:
        if is_number(v) and not ok(v, limit):
            return _Fail(f"expected {words} {short(limit)}, got {short(v)}")
        return None

    return check


def _string_checks(schema: Mapping[str, Any]) -> list[_Check]:
    out: list[_Check] = []
    low, high = schema.get("minLength"), schema.get("maxLength")
    if low is not None or high is not None:
        lo, hi = low or 0, math.inf if high is None else high

        def length(v: Any) -> _Fail | None:
            if isinstance(v, str) and not lo <= len(v) <= hi:
                n = len(v)
                words = f"at least {lo}" if n < lo else f"at most {hi}"
                return _Fail(f"expected {words} characters, got {n}: {short(v)}")
            return None

        out.append(length)
    if "pattern" in schema:
        search = schema_regex(schema["pattern"]).search
        text = json.dumps(schema["pattern"], ensure_ascii=False)

        def pattern(v: Any) -> _Fail | None:
            if isinstance(v, str) and search(v) is None:
                return _Fail(f"expected a string matching the pattern {text}, got {short(v)}")
            return None

        out.append(pattern)
    return out


def _array_check(schema: Mapping[str, Any]) -> _Check:
    item = _compile(schema["items"]) if "items" in schema else None
    if item is _nothing:
        item = None
    lo, hi = schema.get("minItems", 0), schema.get("maxItems", math.inf)

    def check(v: Any) -> _Fail | None:
        if not isinstance(v, list):
            return None
        if not lo <= len(v) <= hi:
            words = f"at least {lo}" if len(v) < lo else f"at most {hi}"
            return _Fail(
                f"expected {words} item{'' if (lo if len(v) < lo else hi) == 1 else 's'}, got {len(v)}"
            )
        if item is not None:
            for i, x in enumerate(v):
                fail = item(x)
                if fail is not None:
                    return fail.at(f"[{i}]")
        return None

    return check


def _object_check(schema: Mapping[str, Any], *, typed: bool) -> _Check:
    """The object keywords' check; `typed`: a value that is not an object fails too."""
    props = {k: _compile(s) for k, s in schema.get("properties", {}).items()}
    fields = tuple((k, c, key_segment(k)) for k, c in props.items() if c is not _nothing)
    required = tuple(schema.get("required", ()))
    extra = schema.get("additionalProperties", True)
    closed = extra is False
    extra_check = None if isinstance(extra, bool) else _compile(extra)
    allowed = ", ".join(props) or "none"

    known = props.keys()
    needed = frozenset(required)

    def check(v: Any) -> _Fail | None:
        if not isinstance(v, dict):
            return _Fail(f"expected object, got {short(v)}", ("object",)) if typed else None
        if closed and not v.keys() <= known:
            unknown = [key for key in v if key not in props]
            return _Fail(f"unknown field {unknown[0]!r} (fields: {allowed})", unknown=len(unknown))
        if not needed <= v.keys():
            missing = [key for key in required if key not in v]
            return _Fail(f"missing required field {missing[0]!r}", missing=" and ".join(missing))
        for key, c, segment in fields:
            if key in v:
                fail = c(v[key])
                if fail is not None:
                    return fail.at(segment)
        if extra_check is not None:
            for key, x in v.items():
                if key not in props:
                    fail = extra_check(x)
                    if fail is not None:
                        return fail.at(key_segment(key))
        return None

    return check


def _merge(fails: list[_Fail], value: object, choices: int) -> _Fail:
    """One failure for a value that fits none of anyOf's (or oneOf's) choices."""
    past_type = [f for f in fails if f.expected is None or f.segments]
    missing = list(dict.fromkeys(f.missing for f in fails if f.missing is not None and not f.segments))
    if len(missing) > 1 and len(missing) == len(fails):  # "id or name": each choice lacks its own key
        return _Fail(f"missing a required field: give {' or '.join(missing)}")
    if past_type:  # a choice whose type fits says best what is wrong (the deepest, not one whose
        # tag or keys are another choice's)
        return max(past_type, key=lambda f: (not (f.tag and f.segments), len(f.segments), -f.unknown))
    wanted = list(dict.fromkeys(t for f in fails for t in f.expected or ()))
    if len(wanted) <= 4:
        return _Fail(f"expected {' or '.join(wanted)}, got {short(value)}", tuple(wanted))
    return _Fail(f"expected a value matching one of the {choices} choices, got {short(value)}", ("a choice",))


def _any_of(choices: list[_Check]) -> _Check:
    def check(v: Any) -> _Fail | None:
        fails: list[_Fail] = []
        for c in choices:
            fail = c(v)
            if fail is None:
                return None
            fails.append(fail)
        return _merge(fails, v, len(choices))

    return check


def _one_of(choices: list[_Check]) -> _Check:
    def check(v: Any) -> _Fail | None:
        fails = [c(v) for c in choices]
        fits = sum(f is None for f in fails)
        if fits == 1:
            return None
        if fits > 1:
            return _Fail(
                f"fits {fits} of oneOf's {len(choices)} choices, got {short(v)}; it must fit exactly one"
            )
        return _merge([f for f in fails if f is not None], v, len(choices))

    return check


# -- words ---------------------------------------------------------------------------------


def json_type(v: object) -> str:
    """The JSON type of a value, in words."""
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int):
        return "integer"
    if isinstance(v, float):
        return "number" if math.isfinite(v) else "non-finite number"
    if isinstance(v, str):
        return "string"
    if v is None:
        return "null"
    if isinstance(v, list):
        return "array"
    if isinstance(v, dict):
        return "object"
    return type(v).__name__


def short(v: object, limit: int = 60) -> str:
    """A value as short JSON text, cut at `limit` characters."""
    try:
        s = json.dumps(v, ensure_ascii=False)
    except (TypeError, ValueError):
        s = repr(v)
    if isinstance(v, float) and not math.isfinite(v):
        s += " (not a finite number)"
    return s if len(s) <= limit else s[: limit - 1] + "…"
