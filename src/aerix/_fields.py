"""A tool's input fields: `Field`, checking a map of them, and their JSON Schema.

The explicit form of a tool (`tool(input={...})`) spells its input out as
`Field`s or dicts with the same keys, nested to any depth through `items` and
`properties`. `check_fields` checks them (and turns dicts into `Field`s),
`fields_schema` compiles them into the tool's JSON Schema, and `field_of`
describes any schema as a `Field` (for the `Tool.input` of a decorated tool).
"""

from __future__ import annotations

import re
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

from ._validate import validate
from .errors import AerixError

__all__ = ["FIELD_TYPES", "Field", "FieldType", "check_fields", "field_of", "fields_schema"]

FieldType = Literal["string", "number", "integer", "boolean", "array", "object"]
FIELD_TYPES: tuple[FieldType, ...] = ("string", "number", "integer", "boolean", "array", "object")
SCALAR_TYPES = FIELD_TYPES[:4]
FIELD_NAME_PATTERN = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]{0,63}$")
_FIELD_KEYS = ("type", "description", "required", "enum", "items", "properties")

Scalar: TypeAlias = str | int | float | bool


@dataclass(frozen=True, kw_only=True, slots=True)
class Field:
    """One input field of a tool: a scalar, an array of fields or an object of fields.

    Args:
        type: `"string"`, `"number"`, `"integer"`, `"boolean"`, `"array"` or `"object"`.
        description: What the model reads about the field.
        required: Whether the model must send it (inside an object: whether the
            object must have it).
        enum: The only values allowed, all of the field's type (scalars only).
        items: Each element of an `"array"` (a `Field` or a dict); required for one.
        properties: The keys of an `"object"` (name to `Field` or dict); without
            them, any object.
    """

    type: FieldType
    """The JSON type of the value."""
    description: str | None = None
    """Shown to the model, word for word."""
    required: bool = False
    """Whether the model must send this field."""
    enum: tuple[Scalar, ...] | None = None
    """The allowed values, if restricted."""
    items: Field | None = None
    """Each element, for an `"array"`."""
    properties: Mapping[str, Field] | None = None
    """The keys, for an `"object"`."""

    def __init__(
        self,
        type: FieldType,
        description: str | None = None,
        required: bool = False,
        enum: typing.Iterable[Scalar] | None = None,
        items: Field | Mapping[str, Any] | None = None,
        properties: Mapping[str, Field | Mapping[str, Any]] | None = None,
    ) -> None:
        object.__setattr__(self, "type", type)
        object.__setattr__(self, "description", description)
        object.__setattr__(self, "required", required)
        if enum is not None and (
            isinstance(enum, str | bytes | Mapping) or not isinstance(enum, typing.Iterable)
        ):
            raise AerixError("options", f"enum must be a list of values, got {enum!r}")
        if isinstance(enum, set | frozenset):  # no order: the schema and the prompt would change per process
            raise AerixError(
                "options",
                f"enum must be a list of values, got a {enum.__class__.__name__} {enum!r}, whose order "
                "changes from one process to the next; give a list, e.g. sorted(...)",
            )
        object.__setattr__(self, "enum", None if enum is None else tuple(enum))
        object.__setattr__(self, "items", items)
        if isinstance(properties, Mapping):
            properties = types.MappingProxyType(dict(properties))
        object.__setattr__(self, "properties", properties)


def _bad(message: str) -> AerixError:
    return AerixError("options", message)


def _is_type(value: object, ftype: str) -> bool:
    return validate({"type": ftype}, value) is None


def _check_field(where: str, name: object, spec: object) -> Field:
    """A checked `Field` (nested ones too) from a `Field` or a dict; `where` is e.g. `tool 't': field`."""
    at = f"{where} {name!r}"
    if isinstance(spec, Mapping):
        unknown = set(spec) - set(_FIELD_KEYS)
        if unknown:
            raise _bad(f"{at}: unknown key(s) {sorted(unknown)}; allowed: {', '.join(_FIELD_KEYS)}")
        if "type" not in spec:
            raise _bad(f"{at}: missing 'type'; one of {', '.join(FIELD_TYPES)}")
        spec = Field(**spec)
    if not isinstance(spec, Field):
        raise _bad(f"{at}: expected a Field or a dict, got {type(spec).__name__}")
    if spec.type not in FIELD_TYPES:
        raise _bad(f"{at}: bad type {spec.type!r}; one of {', '.join(FIELD_TYPES)}")
    if spec.description is not None and not isinstance(spec.description, str):
        raise _bad(f"{at}: description must be a string, got {type(spec.description).__name__}")
    if not isinstance(spec.required, bool):
        raise _bad(f"{at}: required must be True or False, got {spec.required!r}")
    if spec.enum is not None:
        if spec.type not in SCALAR_TYPES:
            raise _bad(f"{at}: enum is for {', '.join(SCALAR_TYPES)} fields only, not {spec.type!r}")
        if not spec.enum:
            raise _bad(f"{at}: enum is empty; give at least one value or no enum")
        for v in spec.enum:
            if not _is_type(v, spec.type):
                raise _bad(f"{at}: enum value {v!r} is not of type {spec.type!r}")
        if len(set(spec.enum)) != len(spec.enum):
            raise _bad(f"{at}: enum has duplicate values: {list(spec.enum)!r}")
    items, properties = spec.items, spec.properties
    if spec.type == "array":
        if items is None:
            raise _bad(f"{at}: an 'array' field needs items: a Field or a dict (each element)")
        items = _check_field(where, f"{name}[]", items)
    elif items is not None:
        raise _bad(f"{at}: items is for 'array' fields only, not {spec.type!r}")
    if properties is not None:
        if spec.type != "object":
            raise _bad(f"{at}: properties is for 'object' fields only, not {spec.type!r}")
        if not isinstance(properties, Mapping):
            raise _bad(f"{at}: properties must be a dict of fields, got {type(properties).__name__}")
        properties = check_fields(where, properties, f"{name}.")
    return Field(spec.type, spec.description, spec.required, spec.enum, items, properties)


def check_fields(where: str, fields: Mapping[Any, Any], prefix: str = "") -> dict[str, Field]:
    """Check a map of fields (nested ones too), each a `Field` or a dict of its keys.

    Args:
        where: Starts every message, e.g. `"tool 'search': field"`.
        fields: Field name to `Field` or dict.
        prefix: Put before each name in messages (the path of a nested object's fields).

    Returns:
        The fields as `Field`s, by name.

    Raises:
        AerixError: `kind="options"`, naming the field, for a bad name, type, enum,
            `items` or `properties`.
    """
    for n in fields:
        if not isinstance(n, str) or not FIELD_NAME_PATTERN.fullmatch(n):
            raise _bad(
                f"{where} names: bad field name {prefix}{n!r}; "
                "use letters, digits, '_', '.', '-', starting with a letter or '_' (at most 64)"
            )
    return {n: _check_field(where, f"{prefix}{n}", spec) for n, spec in fields.items()}


def _field_schema(f: Field) -> dict[str, Any]:
    prop: dict[str, Any] = {"type": f.type}
    if f.enum is not None:
        prop["enum"] = list(f.enum)
    if f.items is not None:
        prop["items"] = _field_schema(f.items)
    if f.properties is not None:
        prop.update(fields_schema(f.properties))
    if f.description:
        prop["description"] = f.description
    return prop


def fields_schema(fields: Mapping[str, Field]) -> dict[str, Any]:
    """The JSON Schema of an object with these (checked) fields: no other key allowed."""
    return {
        "type": "object",
        "properties": {name: _field_schema(f) for name, f in fields.items()},
        "required": [n for n, f in fields.items() if f.required],
        "additionalProperties": False,
    }


def field_of(schema: Mapping[str, Any], required: bool = False) -> Field:
    """The `Field` that best describes a schema (for `Tool.input`; the schema stays the truth)."""
    described = schema.get("description")
    while "type" not in schema and ("anyOf" in schema or "oneOf" in schema):  # the first non-null choice
        choices = [s for s in schema.get("anyOf", schema.get("oneOf")) if s != {"type": "null"}]
        if not choices or not isinstance(choices[0], dict):
            break
        schema = choices[0]
    t = schema.get("type")
    if isinstance(t, list):
        t = next((x for x in t if x != "null"), None)
    ftype: FieldType = t if t in FIELD_TYPES else "object"
    enum = schema.get("enum") if ftype in SCALAR_TYPES else None
    if enum is not None and not all(_is_type(v, ftype) for v in enum):
        enum = None
    items = props = None
    if ftype == "array":
        items = field_of(schema["items"] if isinstance(schema.get("items"), dict) else {})
    if ftype == "object" and isinstance(schema.get("properties"), dict):
        needed = set(schema.get("required", ()))
        props = {
            n: field_of(s if isinstance(s, dict) else {}, n in needed)
            for n, s in schema["properties"].items()
        }
    return Field(ftype, described or schema.get("description"), required, enum, items, props)
