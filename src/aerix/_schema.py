"""JSON Schema, the subset aerix takes: checking a schema, and whether llguidance can decode it.

`check_schema` refuses any keyword outside `SUPPORTED_KEYWORDS` (naming it and its
JSON path) and inlines local `$ref`s, so that every schema aerix decodes or
checks is one self-contained tree. `check_decodable` compiles a schema on
llguidance, when it is installed, so that a schema the local constraint cannot
take is refused when it is defined rather than at the first turn. Validating a
value against a schema is `_validate`'s (re-exported here).
"""

from __future__ import annotations

import json
import re
from typing import Any
from urllib.parse import unquote

from ._validate import (
    Validator,
    compile_validator,
    is_integer,
    is_number,
    json_type,
    key_segment,
    schema_regex,
    short,
    validate,
)
from .errors import AerixError

__all__ = [
    "SUPPORTED_KEYWORDS",
    "Validator",
    "check_decodable",
    "check_schema",
    "compile_validator",
    "json_type",
    "short",
    "validate",
]

SUPPORTED_KEYWORDS: frozenset[str] = frozenset(
    {"type", "properties", "required", "additionalProperties", "items", "enum", "const"}
    | {"anyOf", "oneOf", "$ref", "$defs", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"}
    | {"minLength", "maxLength", "pattern", "minItems", "maxItems", "format", "default"}
    | {"description", "title"}
)
"""The JSON Schema keywords aerix takes; any other is refused."""

JSON_TYPES = ("string", "number", "integer", "boolean", "object", "array", "null")
_ANNOTATIONS = frozenset({"description", "title", "default", "format"})
_ROOT_ONLY = frozenset({"$schema"})
"""Taken at the root only, and dropped: the dialect a schema is written in (MCP servers send it)."""
_SUBSCHEMA_KEYS = ("properties", "additionalProperties", "items", "anyOf", "oneOf")


def _bad(message: str) -> AerixError:
    return AerixError("options", message)


# -- checking a schema --------------------------------------------------------------------


def check_schema(schema: object, *, where: str, decodable: bool = True) -> dict[str, Any]:
    """Check a JSON Schema against `SUPPORTED_KEYWORDS` and inline its local `$ref`s.

    Args:
        schema: The schema, a dict (as MCP servers and `model_json_schema()` give it).
        where: Prefixes every message, e.g. `"tool 'search'"`.
        decodable: Also compile the result on llguidance, when it is installed
            (`check_decodable`), so that the local constraint can take it.

    Returns:
        The schema to decode and check with: a new dict, `$ref`s replaced by what
        they point to, `$defs` and a root `$schema` dropped.

    Raises:
        AerixError: `kind="options"`: a keyword outside the list (named with its
            JSON path, e.g. `schema.properties.items.items.foo`), a bad value for
            a keyword, a `$ref` that points nowhere, a recursive schema, or one
            that llguidance cannot compile.
    """
    if not isinstance(schema, dict):
        raise _bad(f"{where}: a schema must be a dict (a JSON Schema object), got {json_type(schema)}")
    try:
        return _checked(schema, where, decodable)
    except RecursionError:
        raise _bad(f"{where}: the schema is nested too deeply for Python to walk; flatten it") from None


def _checked(schema: dict[str, Any], where: str, decodable: bool) -> dict[str, Any]:
    _check_node(schema, "schema", where)
    defs = schema.get("$defs", {})
    for name, sub in defs.items():
        _check_node(sub, f"schema.$defs{key_segment(name)}", where)
    resolved = _inline(schema, schema, "schema", where, ())
    if not isinstance(resolved, dict):
        raise _bad(f"{where}: the schema's root points to a boolean schema; use a schema object")
    resolved.pop("$schema", None)
    if decodable:
        check_decodable(resolved, where=where)
    return resolved


_NOTES = frozenset({"examples", "deprecated", "readOnly", "writeOnly", "$comment", "contentMediaType"})
"""Keywords that only annotate a value (JSON Schema's meta-data): nothing is lost without them."""

_TUPLE = "give one `items` schema for every item, and `minItems`/`maxItems` for the length"


def _unsupported(where: str, path: str, name: str) -> str:
    fix = ""
    if name in _NOTES:
        fix = "; it only annotates the value: remove it"
    elif name == "prefixItems":
        fix = f"; a tuple is not supported: {_TUPLE}"
    return (
        f"{where}: unsupported JSON Schema keyword {name!r} at {path}{fix}; "
        f"supported: {', '.join(sorted(SUPPORTED_KEYWORDS))}"
    )


def _check_node(node: object, path: str, where: str) -> None:
    """Check one subschema and, recursively, those under it (not `$defs`' own: the caller does)."""
    if isinstance(node, bool):
        return
    if not isinstance(node, dict):
        tuple_items = isinstance(node, list) and path.endswith(".items")  # draft 7's tuple form
        fix = f"; a tuple is not supported: {_TUPLE}" if tuple_items else ""
        raise _bad(f"{where}: {path} must be a schema (a dict or true/false), got {_short_type(node)}{fix}")
    at = f"{where}: {path}"
    for name in node:
        if name not in SUPPORTED_KEYWORDS and not (path == "schema" and name in _ROOT_ONLY):
            raise _bad(_unsupported(where, f"{path}.{name}", name))
    if "type" in node:
        t = node["type"]
        types = t if isinstance(t, list) else [t]
        if not types or any(x not in JSON_TYPES for x in types) or len(set(map(str, types))) != len(types):
            raise _bad(f"{at}.type: bad type {t!r}; one of {', '.join(JSON_TYPES)}, or a list of them")
    for name in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
        if name in node and not is_number(node[name]):
            raise _bad(f"{at}.{name} must be a number, got {short(node[name])}")
    for name in ("minLength", "maxLength", "minItems", "maxItems"):
        if name in node and not (is_integer(node[name]) and node[name] >= 0):
            raise _bad(f"{at}.{name} must be a non-negative integer, got {short(node[name])}")
    for low, high in (("minimum", "maximum"), ("minLength", "maxLength"), ("minItems", "maxItems")):
        if low in node and high in node and node[low] > node[high]:
            raise _bad(f"{at}: {low} ({node[low]}) is above {high} ({node[high]}); no value can fit")
    for name in ("description", "title", "format", "$ref"):
        if name in node and not isinstance(node[name], str):
            raise _bad(f"{at}.{name} must be a string, got {short(node[name])}")
    if "pattern" in node:
        if not isinstance(node["pattern"], str):
            raise _bad(f"{at}.pattern must be a string, got {short(node['pattern'])}")
        try:
            schema_regex(node["pattern"])
        except re.error as exc:
            raise _bad(f"{at}.pattern {node['pattern']!r} is not a valid regular expression: {exc}") from None
    if "enum" in node and not (isinstance(node["enum"], list) and node["enum"]):
        raise _bad(f"{at}.enum must be a non-empty list of values, got {short(node['enum'])}")
    if "required" in node:
        req = node["required"]
        if not isinstance(req, list) or not all(isinstance(r, str) for r in req) or len(set(req)) != len(req):
            raise _bad(f"{at}.required must be a list of distinct property names, got {short(req)}")
        listed = node.get("properties", {})
        forbidden = [r for r in req if r not in listed] if node.get("additionalProperties") is False else []
        if forbidden and isinstance(listed, dict) and "anyOf[" not in path and "oneOf[" not in path:
            # no value fits here (within a choice of an `anyOf`, another choice may)
            raise _bad(
                f"{at}.required names {forbidden[0]!r}, which properties does not list and "
                "additionalProperties (false) forbids; no value can fit"
            )
    for name in ("properties", "$defs"):
        if name in node and not (
            isinstance(node[name], dict) and all(isinstance(k, str) for k in node[name])
        ):
            raise _bad(f"{at}.{name} must map names to schemas, got {_short_type(node[name])}")
    if "$defs" in node and path != "schema":
        raise _bad(f"{at}.$defs: $defs is taken at the root of a schema only")
    for name, sub in node.get("properties", {}).items():
        _check_node(sub, f"{path}.properties{key_segment(name)}", where)
    for name in ("additionalProperties", "items"):
        if name in node:
            _check_node(node[name], f"{path}.{name}", where)
    for name in ("anyOf", "oneOf"):
        if name in node:
            subs = node[name]
            if not isinstance(subs, list) or not subs:
                raise _bad(f"{at}.{name} must be a non-empty list of schemas, got {_short_type(subs)}")
            for i, sub in enumerate(subs):
                _check_node(sub, f"{path}.{name}[{i}]", where)


def _inline(node: Any, root: dict[str, Any], path: str, where: str, seen: tuple[str, ...]) -> Any:
    """A copy of `node` with every `$ref` replaced by what it points to."""
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    if "$ref" in node:
        ref = node["$ref"]
        if ref in seen:
            chain = " -> ".join([*seen[seen.index(ref) :], ref])
            raise _bad(f"{where}: the schema is recursive ({chain}); recursion is not supported")
        target = _inline(_resolve(ref, root, f"{path}.$ref", where), root, path, where, (*seen, ref))
        if isinstance(target, bool):  # `true` or `false`
            if len(node) > 1:
                raise _bad(f"{where}: {path}.$ref {ref!r} points to a boolean schema; use a schema object")
            return target
        out.update(target)
        for name, value in node.items():
            if name == "$ref":
                continue
            if name in out and name not in _ANNOTATIONS and out[name] != value:
                raise _bad(
                    f"{where}: {path}: {name!r} beside $ref {ref!r} conflicts with the target's; "
                    f"move it into the schema that {ref!r} points to"
                )
            out[name] = _inline_value(name, value, root, path, where, seen)
        return out
    for name, value in node.items():
        if name == "$defs":
            continue
        out[name] = _inline_value(name, value, root, path, where, seen)
    return out


def _inline_value(
    name: str, value: Any, root: dict[str, Any], path: str, where: str, seen: tuple[str, ...]
) -> Any:
    if name == "properties":
        return {
            k: _inline(v, root, f"{path}.properties{key_segment(k)}", where, seen) for k, v in value.items()
        }
    if name in ("anyOf", "oneOf"):
        return [_inline(v, root, f"{path}.{name}[{i}]", where, seen) for i, v in enumerate(value)]
    if name in ("additionalProperties", "items"):
        return _inline(value, root, f"{path}.{name}", where, seen)
    return value


def _resolve(ref: str, root: dict[str, Any], path: str, where: str) -> Any:
    """What a local `$ref` (`#`, `#/$defs/Name`, any JSON pointer into the root) points to."""
    if not ref.startswith("#"):
        raise _bad(f"{where}: {path} {ref!r} is not a local reference; only '#/...' references are supported")
    node: Any = root
    pointer = ref[1:]
    if pointer and not pointer.startswith("/"):
        raise _bad(f"{where}: {path} {ref!r} is not a JSON pointer; write '#/$defs/<name>'")
    for raw in pointer.split("/")[1:] if pointer else ():
        part = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and part not in node:  # a URI fragment's %-escapes (`c%20d`)
            part = unquote(raw).replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            defs = ", ".join(f"#/$defs/{d}" for d in root.get("$defs", {})) or "none"
            raise _bad(f"{where}: {path} {ref!r} points nowhere (definitions: {defs})")
    if not isinstance(node, dict | bool):
        raise _bad(f"{where}: {path} {ref!r} points to {_short_type(node)}, not a schema")
    return node


def _short_type(v: object) -> str:
    return f"{json_type(v)} {short(v, 40)}" if isinstance(v, str | int | float | list) else json_type(v)


# -- llguidance -----------------------------------------------------------------------------

_decodable: dict[str, str | None] = {}
_llguidance: Any = None


def _matcher() -> Any:
    """llguidance's `LLMatcher`, or `False` when llguidance is not installed."""
    global _llguidance
    if _llguidance is None:
        try:
            import llguidance
        except ImportError:
            _llguidance = False
        else:
            _llguidance = llguidance.LLMatcher
    return _llguidance


def _llguidance_error(schema: object) -> str | None:
    """Why llguidance cannot compile a schema, or `None` (cached by the schema's JSON)."""
    key = json.dumps(schema, sort_keys=False)
    if key in _decodable:
        return _decodable[key]
    matcher = _matcher()
    try:
        grammar = matcher.grammar_from_json_schema(key, defaults={"whitespace_flexible": False})
        failed, messages = matcher.validate_grammar_with_warnings(grammar, None)
        if failed:  # as the engine does: an overlapping oneOf as anyOf, an unknown format undecoded
            lenient = {"whitespace_flexible": False, "lenient": True}
            grammar = matcher.grammar_from_json_schema(key, defaults=lenient)
            failed = matcher.validate_grammar_with_warnings(grammar, None)[0]
        error = messages[0] if failed else None
    except ValueError as exc:
        error = str(exc)
    if len(_decodable) >= 1024:
        _decodable.clear()
    _decodable[key] = error
    return error


def check_decodable(schema: dict[str, Any], *, where: str) -> None:
    """Refuse a schema that llguidance (the local engines' constraint) cannot compile.

    Skipped when llguidance is not installed. Compiled once per schema (cached by
    its JSON text); a failure names the deepest part of the schema that fails alone.

    Raises:
        AerixError: `kind="options"`, with llguidance's reason and the JSON path.
    """
    if not _matcher():
        return
    error = _llguidance_error(schema)
    if error is None:
        return
    path = _failing_part(schema, "schema") or "schema"
    raise _bad(
        f"{where}: the local constraint (llguidance) cannot decode {path}: {error.strip()}; "
        "change or remove that keyword"
    )


def _failing_part(node: object, path: str) -> str | None:
    """The deepest subschema that llguidance refuses on its own, if any."""
    if not isinstance(node, dict):
        return None
    for name in _SUBSCHEMA_KEYS:
        value = node.get(name)
        if name == "properties" and isinstance(value, dict):
            subs = [(f"{path}.properties{key_segment(k)}", v) for k, v in value.items()]
        elif isinstance(value, list):
            subs = [(f"{path}.{name}[{i}]", v) for i, v in enumerate(value)]
        elif isinstance(value, dict):
            subs = [(f"{path}.{name}", value)]
        else:
            continue
        for sub_path, sub in subs:
            deeper = _failing_part(sub, sub_path)
            if deeper is not None:
                return deeper
    return path if _llguidance_error(node) is not None else None
