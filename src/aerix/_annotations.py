"""Python annotations as JSON Schema, and converters from checked JSON back to Python values.

`schema_of` maps an annotation that `@tool` takes to the JSON Schema
of its values and a converter: `str`, `int`, `float`, `bool`, `Literal[...]`,
`enum.Enum` classes of str or int values, `list[T]`, `dict[str, T]`,
`TypedDict` classes, dataclasses, Pydantic `BaseModel` classes, `T | None` and
`Annotated[T, "description"]`, nested to any depth. A converter takes a JSON
value that the schema already validated and builds the Python value (Enum
members, dataclass and model instances); where nothing needs building it is
`same`, the identity, so that a flat tool pays nothing.

Pydantic is optional: a class is taken for a `BaseModel` only if pydantic is
already imported (`sys.modules`), so aerix never imports it itself.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import inspect
import sys
import types
import typing
from collections.abc import Callable
from typing import Annotated, Any, Literal, NotRequired, Required, get_args, get_origin

from ._docstring import parse_docstring
from ._schema import check_schema
from ._validate import is_integer, is_number, key_segment
from .errors import AerixError, message_of

__all__ = [
    "ConversionError",
    "Converter",
    "constrained",
    "converted",
    "pydantic_conversion",
    "same",
    "schema_of",
    "unwrap",
]

Converter = Callable[[Any], Any]


class ConversionError(ValueError):
    """A value that passed its schema's check and that its type refused (a pydantic
    validator, a dataclass's `__post_init__`), with the JSON path to it:
    `input.items[1].v: Value error, v must be >= 0`."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}")
        self.path = path
        self.message = message


def converted(path: str, convert: Converter, value: Any) -> Any:
    """`convert(value)`; a refusal from inside it names its JSON path, `path` first."""
    try:
        return convert(value)
    except ConversionError as exc:
        raise ConversionError(path + exc.path, exc.message) from exc
    except Exception as exc:
        where, message = _refusal(exc)
        raise ConversionError(path + where, message) from exc


def _refusal(exc: Exception) -> tuple[str, str]:
    """Where under the value a type's own check failed, and why, in one line: pydantic's
    first error (its location, its message, no link), else the exception's message."""
    errors = getattr(exc, "errors", None)
    if type(exc).__name__ == "ValidationError" and callable(errors):
        try:
            found = errors(include_url=False)
            first = found[0]
            where = "".join(f"[{x}]" if isinstance(x, int) else key_segment(str(x)) for x in first["loc"])
            more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
            return where, " ".join(str(first["msg"]).split()) + more
        except Exception:  # not pydantic's, after all
            pass
    return "", " ".join(message_of(exc).split())


def same(value: Any) -> Any:
    """The identity converter: the JSON value is already the Python value."""
    return value


_SCALARS: dict[Any, str] = {str: "string", int: "integer", float: "number", bool: "boolean"}
ACCEPTED = (
    "str, int, float, bool, a Literal, an Enum of str or int values, list[T], dict[str, T], "
    "a TypedDict, a dataclass, a pydantic BaseModel, Annotated[T, 'description'] or T | None"
)


def _bad(where: str, annotation: object, why: str = "") -> AerixError:
    return AerixError(
        "options",
        f"{where} has annotation {_name(annotation)}{f' ({why})' if why else ''}; use {ACCEPTED}",
    )


def _name(annotation: object) -> str:
    if isinstance(annotation, type):
        return annotation.__qualname__
    return repr(annotation).replace("typing.", "")


def unwrap(annotation: Any, where: str = "") -> tuple[Any, str | None, bool, dict[str, Any], list[object]]:
    """Take `Annotated[...]` and `| None` off an annotation.

    Returns:
        The inner annotation, the description (the first string in
        `Annotated`'s metadata, or a pydantic `Field`'s description), whether
        `None` is allowed, and the bounds the metadata sets (`annotated_types`'
        `Ge(1)`, `MaxLen(5)`, …, or a pydantic `Field(ge=1)`), as `constrained`
        takes them; and the metadata itself, as `pydantic_conversion` takes it.

    Raises:
        AerixError: `kind="options"`, naming `where`, for metadata that is neither.
    """
    description = None
    nullable = False
    bounds: dict[str, Any] = {}
    metadata: list[object] = []
    while True:
        origin = get_origin(annotation)
        if origin is Annotated:
            inner, *meta = get_args(annotation)
            metadata += meta
            level: dict[str, Any] = {}
            for m in meta:  # one `Annotated`'s, inner ones first: a later bound wins
                said, more = _metadata(m, where)
                description = said if description is None else description
                level.update(more)
            bounds = {**level, **bounds}  # an outer `Annotated`'s (met first) wins over an inner one
            annotation = inner
        elif origin is Required or origin is NotRequired:  # a TypedDict key's: read by `_required_key`
            (annotation,) = get_args(annotation)
        elif origin in (typing.Union, types.UnionType):
            args = get_args(annotation)
            rest = [a for a in args if a is not type(None)]
            if len(rest) != 1 or len(args) != 2:
                return annotation, description, nullable, bounds, metadata
            annotation, nullable = rest[0], True
        else:
            return annotation, description, nullable, bounds, metadata


_BOUNDS = ("gt", "ge", "lt", "le", "min_length", "max_length", "pattern")
"""The constraints of `annotated_types` (and pydantic's `Field`) that a schema can say."""
_FIELD_KEEPS = frozenset({"description", "title", "examples", *_BOUNDS})
"""What a pydantic `Field(...)` in `Annotated` may set: its description and bounds (its
`title` and `examples` say nothing the model reads)."""


def _metadata(meta: object, where: str) -> tuple[str | None, dict[str, Any]]:
    """One item of `Annotated`'s metadata: a description (a string, a `Doc`), bounds
    (`annotated_types`', a pydantic `Field`'s or `StringConstraints`'), or nothing the schema
    says (`None`, a validator, `Strict`, a string transform: the conversion applies them).

    Raises:
        AerixError: For a bound no schema keyword here says (`MultipleOf`, a `Predicate`): it
            would be lost without a word.
    """
    if isinstance(meta, str):
        return meta, {}
    kind, module = type(meta).__name__, type(meta).__module__
    if kind == "Doc" and isinstance(getattr(meta, "documentation", None), str):  # PEP 727
        return meta.documentation, {}  # type: ignore[attr-defined]
    if kind == "FieldInfo" and module.startswith("pydantic"):
        given = set(getattr(meta, "_attributes_set", {}))
        if extra := sorted(given - _FIELD_KEEPS):
            raise AerixError(
                "options",
                f"{where}: Field({extra[0]}=...) in Annotated is not supported; a Field there may "
                "give a description and bounds (gt, ge, lt, le, min_length, max_length, pattern); "
                "put a default in the signature",
            )
        bounds: dict[str, Any] = {}
        for m in getattr(meta, "metadata", ()):
            bounds.update(_metadata(m, where)[1])
        said = getattr(meta, "description", None)
        return (said if isinstance(said, str) else None), bounds
    if module.startswith(("annotated_types", "pydantic")):
        if dataclasses.is_dataclass(meta):
            found = {f.name: getattr(meta, f.name) for f in dataclasses.fields(meta)}
        else:
            found = dict(getattr(meta, "__dict__", {}))
        values = {k: v for k, v in found.items() if v is not None}
        if values.get("min_length") == 0:  # `Len()`: at least no items is no bound
            del values["min_length"]
        if kind == "Predicate":
            values["predicate"] = values.pop("func", None)
        if unsaid := sorted(set(values) & _UNSAID):
            raise AerixError(
                "options",
                f"{where}: Annotated metadata {meta!r} is not supported: aerix's schemas have no "
                f"{unsaid[0]}; give bounds of gt, ge, lt, le, min_length, max_length or pattern",
            )
        return None, {k: v for k, v in values.items() if k in _BOUNDS}
    return None, {}  # `None` (conint's), another library's marker: nothing the schema says


_UNSAID = frozenset({"multiple_of", "predicate", "max_digits", "decimal_places"})
"""Bounds of `annotated_types` and pydantic that no keyword of aerix's schemas says (`MultipleOf`,
a `Predicate`, a decimal's digits): refused rather than lost. (A pydantic validator is code that
pydantic runs where it converts, a `BaseModel`'s field: no bound of the schema.)"""


def pydantic_conversion(ann: Any, metadata: list[object], where: str) -> Converter | None:
    """Pydantic's own conversion of `ann` where its `Annotated` metadata (`unwrap`'s) asks for one
    that a schema cannot say (a validator, `strip_whitespace`, `to_lower`): `TypeAdapter(ann)`'s,
    which runs them on the checked value; `None` where there is none."""
    if not any(_converts(m) for m in metadata):
        return None
    from pydantic import TypeAdapter  # imported already: the metadata is pydantic's

    try:
        return TypeAdapter(_unkeyed(ann)).validate_python
    except Exception as exc:  # an annotation pydantic cannot build a validator for
        raise AerixError("options", f"{where}: pydantic cannot apply {_name(ann)}: {exc}") from None


def _unkeyed(ann: Any) -> Any:
    """`ann` without a TypedDict key's `Required`/`NotRequired`, which only a TypedDict takes
    (`Annotated[Required[str], ...]` → `Annotated[str, ...]`)."""
    origin = get_origin(ann)
    if origin is Required or origin is NotRequired:
        return _unkeyed(get_args(ann)[0])
    if origin is Annotated:
        inner, *meta = get_args(ann)
        bare = _unkeyed(inner)
        return ann if bare is inner else Annotated[(bare, *meta)]
    return ann


def _converts(meta: object) -> bool:
    """Whether `meta` is pydantic's and asks for a conversion no schema says: a validator, or a
    string transform (a `Field`'s own metadata included)."""
    module = type(meta).__module__
    if not module.startswith("pydantic"):
        return False
    if type(meta).__name__ == "FieldInfo":
        return any(_converts(m) for m in getattr(meta, "metadata", ()))
    if "validator" in module or type(meta).__name__.endswith("Validator"):
        return True
    return any(getattr(meta, k, None) for k in ("strip_whitespace", "to_lower", "to_upper"))


_BOUND_KEYWORDS = {"gt": "exclusiveMinimum", "ge": "minimum", "lt": "exclusiveMaximum", "le": "maximum"}


def constrained(schema: dict[str, Any], bounds: dict[str, Any], where: str) -> dict[str, Any]:
    """`schema` with the bounds from `unwrap` as JSON Schema keywords, checked for its type:
    `ge` → `minimum`, `min_length` → `minLength` (a string) or `minItems` (an array), …"""
    if not bounds:
        return schema
    kind = schema.get("type")
    out = dict(schema)
    for key, value in bounds.items():
        if key in _BOUND_KEYWORDS and kind in ("integer", "number") and is_number(value):
            out[_BOUND_KEYWORDS[key]] = value
        elif key in ("min_length", "max_length") and kind in ("string", "array") and is_integer(value):
            side = "min" if key == "min_length" else "max"
            out[f"{side}{'Length' if kind == 'string' else 'Items'}"] = value
        elif key == "pattern" and kind == "string" and isinstance(value, str):
            out["pattern"] = value
        else:
            raise AerixError(
                "options", f"{where}: the bound {key}={value!r} does not apply to a value of type {kind}"
            )
    return check_schema(out, where=where)


def schema_of(annotation: object, *, where: str) -> tuple[dict[str, Any], Converter]:
    """The JSON Schema of a Python annotation that `@tool` takes, and a converter.

    Args:
        annotation: The annotation (`typing.get_type_hints(..., include_extras=True)` gives them).
        where: What is annotated, for messages: e.g. `"tool 'f': parameter 'x'"`.

    Returns:
        The schema of the values, and a function from a JSON value (already
        validated against that schema) to the Python value.

    Raises:
        AerixError: `kind="options"`, naming `where` and the annotation, for an
            annotation `@tool` does not take (a recursive type included).
    """
    return _Mapper().schema(annotation, where)


class _Mapper:
    """One mapping: it remembers the classes being mapped, to refuse a recursive type."""

    def __init__(self) -> None:
        self._open: list[type] = []

    def schema(self, ann: Any, where: str) -> tuple[dict[str, Any], Converter]:
        inner, description, nullable, bounds, metadata = unwrap(ann, where)
        schema, convert = self._inner(inner, where)
        schema = constrained(schema, bounds, where)
        if (applied := pydantic_conversion(ann, metadata, where)) is not None:  # its validators, transforms
            return (_nullable(schema) if nullable else schema) | (
                {} if description is None else {"description": description}
            ), applied
        if nullable:
            schema, convert = _nullable(schema), _or_none(convert)
        if description is not None:
            schema = {**schema, "description": description}
        return schema, convert

    def _inner(self, ann: Any, where: str) -> tuple[dict[str, Any], Converter]:
        origin = get_origin(ann)
        if ann in _SCALARS:
            # A number stays as the model wrote it: an int is a float's value as Python types it
            # (PEP 484), and 17 * 23 stays 391 rather than becoming 391.0 in a tool's result.
            return {"type": _SCALARS[ann]}, same
        if origin is Literal:
            return _literal(ann, where), same
        if origin in (typing.Union, types.UnionType):
            raise _bad(where, ann, "a union other than T | None")
        if ann is list or ann is dict:
            origin = ann
        if origin is list:
            (item,) = get_args(ann) or (None,)
            if item is None:
                raise _bad(where, ann, "say what the items are: list[T]")
            items, convert = self.schema(item, f"{where}: items")
            if convert is same:
                return {"type": "array", "items": items}, same
            return {"type": "array", "items": items}, lambda v: [
                converted(f"[{i}]", convert, x) for i, x in enumerate(v)
            ]
        if origin is dict:
            args = get_args(ann)
            if len(args) != 2 or args[0] is not str:
                raise _bad(where, ann, "the keys must be str: dict[str, T]")
            values, convert = self.schema(args[1], f"{where}: values")
            schema = {"type": "object", "additionalProperties": values}
            if convert is same:
                return schema, same
            return schema, lambda v: {k: converted(key_segment(k), convert, x) for k, x in v.items()}
        if not isinstance(ann, type):
            raise _bad(where, ann)
        if issubclass(ann, enum.Enum):
            return _enum(ann, where)
        pydantic = sys.modules.get("pydantic")
        pydantic_dataclasses = sys.modules.get("pydantic.dataclasses")  # only there if one was made
        if (pydantic is not None and issubclass(ann, pydantic.BaseModel)) or (
            pydantic_dataclasses is not None and pydantic_dataclasses.is_pydantic_dataclass(ann)
        ):
            return self._model(ann, where)
        if ann in self._open:
            chain = " -> ".join(c.__qualname__ for c in [*self._open[self._open.index(ann) :], ann])
            raise AerixError("options", f"{where}: {chain} is recursive; recursion is not supported")
        if dataclasses.is_dataclass(ann):
            return self._record(ann, where, dataclass=True)
        if issubclass(ann, dict) and hasattr(ann, "__required_keys__"):
            return self._record(ann, where, dataclass=False)
        raise _bad(where, ann)

    def _model(self, cls: type, where: str) -> tuple[dict[str, Any], Converter]:
        """A pydantic `BaseModel` or pydantic dataclass: pydantic's own schema (its fields'
        `Field(...)` say descriptions, bounds and defaults) and conversion, with the class's
        docstring read as a dataclass's is."""
        import pydantic

        try:
            adapter: pydantic.TypeAdapter[Any] = pydantic.TypeAdapter(cls)
            raw = adapter.json_schema(schema_generator=_documenting())
        except Exception as exc:  # pydantic refuses some types (PydanticInvalidForJsonSchema)
            raise AerixError("options", f"{where}: {cls.__qualname__} has no JSON Schema: {exc}") from None
        schema = check_schema(_undiscriminated(raw), where=f"{where}: {cls.__qualname__}")
        return schema, adapter.validate_python

    def _record(self, cls: type, where: str, *, dataclass: bool) -> tuple[dict[str, Any], Converter]:
        """A dataclass or a TypedDict: an object with a property per field."""
        try:
            hints = typing.get_type_hints(cls, include_extras=True)
        except Exception as exc:  # an unresolvable forward reference
            raise AerixError(
                "options", f"{where}: cannot resolve the type hints of {cls.__qualname__}: {exc}"
            ) from None
        docs = parse_docstring(inspect.getdoc(cls), attributes=True).params
        if dataclass:
            fields = [f for f in dataclasses.fields(cls) if f.init]
            names = [f.name for f in fields]
            _check_init_vars(cls, names, where)
            required = {
                f.name
                for f in fields
                if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
            }
        else:
            names = list(hints)
            required = {n for n in names if _required_key(cls, n, hints[n])}
        self._open.append(cls)
        try:
            properties: dict[str, Any] = {}
            converters: list[tuple[str, Converter]] = []
            for name in names:
                schema, convert = self.schema(hints[name], f"{where}: field {name!r} of {cls.__qualname__}")
                if "description" not in schema and name in docs:
                    schema = {**schema, "description": docs[name]}
                properties[name] = schema
                if convert is not same:
                    converters.append((name, convert))
        finally:
            self._open.pop()
        schema = {
            "type": "object",
            "properties": properties,
            "required": [n for n in names if n in required],
            "additionalProperties": False,
        }
        if dataclass:
            return schema, _build(cls, converters)
        return schema, (_convert_keys(converters) if converters else same)


@functools.cache
def _documenting() -> type:
    """Pydantic's schema generator, with each pydantic class's docstring read as a dataclass's
    (made on first use: pydantic is optional).

    Pydantic gives a class's whole docstring as its object's description, `Attributes:`
    section and all. Here the description is what comes before the sections, and each field
    without a description of its own takes its `Annotated` text or its line of the section
    (written under the field's alias, looked up by its name), nested classes too.
    """
    from pydantic.json_schema import GenerateJsonSchema

    class Documenting(GenerateJsonSchema):
        def model_schema(self, schema: Any) -> Any:
            return _documented(super().model_schema(schema), schema["cls"])

        def dataclass_schema(self, schema: Any) -> Any:
            return _documented(super().dataclass_schema(schema), schema["cls"])

    return Documenting


def _documented(schema: Any, cls: type) -> Any:
    """`schema`, pydantic's for `cls`, with `cls`'s docstring read as a dataclass's (`_documenting`)."""
    properties = schema.get("properties") if isinstance(schema, dict) else None
    if not isinstance(properties, dict):
        return schema
    doc = parse_docstring(inspect.getdoc(cls), attributes=True)
    if doc.description:
        schema["description"] = doc.description
    else:
        schema.pop("description", None)
    for name, field in getattr(cls, "__pydantic_fields__", {}).items():
        alias = field.validation_alias if isinstance(field.validation_alias, str) else field.alias
        prop = properties.get(alias or name)
        text = next((m for m in field.metadata if isinstance(m, str)), doc.params.get(name))
        if isinstance(prop, dict) and text and "description" not in prop:
            prop["description"] = text
    return schema


def _check_init_vars(cls: type, fields: list[str], where: str) -> None:
    """Refuses a dataclass whose `__init__` needs a value that is no field (an `InitVar`
    without a default): no input could give it, so every call would fail."""
    try:
        params = inspect.signature(cls).parameters.values()
    except (TypeError, ValueError):  # no signature to read: nothing to refuse
        return
    for p in params:
        needed = (
            p.default is inspect.Parameter.empty
            and p.kind is not p.VAR_POSITIONAL
            and p.kind is not p.VAR_KEYWORD
        )
        if needed and p.name not in fields:
            raise AerixError(
                "options",
                f"{where}: {cls.__qualname__}.__init__ needs {p.name!r}, which is no field of the "
                "dataclass (an InitVar?), so no input can give it; give it a default, or make it a field",
            )


def _undiscriminated(schema: Any) -> Any:
    """Pydantic's schema without OpenAPI's `discriminator` (a discriminated union's): a hint
    for readers, which the choices' own `const` tags already enforce."""
    if isinstance(schema, list):
        return [_undiscriminated(x) for x in schema]
    if not isinstance(schema, dict):
        return schema
    return {
        k: _undiscriminated(v)
        for k, v in schema.items()
        if not (k == "discriminator" and isinstance(v, dict) and "propertyName" in v)
    }


def _required_key(cls: type, name: str, hint: Any) -> bool:
    """Whether a TypedDict key is required; `Required`/`NotRequired` are read from the hint too,
    since under `from __future__ import annotations` Python 3.11 does not see them."""
    while get_origin(hint) is Annotated:
        hint = get_args(hint)[0]
    if get_origin(hint) is NotRequired:
        return False
    if get_origin(hint) is Required:
        return True
    return name in getattr(cls, "__required_keys__", ())


def _build(cls: type, converters: list[tuple[str, Converter]]) -> Converter:
    if not converters:
        return lambda v: cls(**v)

    def build(v: dict[str, Any]) -> Any:
        args = dict(v)
        for name, convert in converters:
            if name in args:
                args[name] = converted(key_segment(name), convert, args[name])
        return cls(**args)

    return build


def _convert_keys(converters: list[tuple[str, Converter]]) -> Converter:
    def convert(v: dict[str, Any]) -> dict[str, Any]:
        out = dict(v)
        for name, c in converters:
            if name in out:
                out[name] = converted(key_segment(name), c, out[name])
        return out

    return convert


def _literal(ann: Any, where: str) -> dict[str, Any]:
    values = get_args(ann)
    kinds = {_SCALARS.get(type(v)) for v in values}
    if len(kinds) != 1 or None in kinds:
        raise AerixError(
            "options",
            f"{where}: Literal values must all be of one type (str, int, float or bool), got {values!r}",
        )
    (kind,) = kinds
    return {"type": kind, "enum": list(values)}


def _enum(cls: type[enum.Enum], where: str) -> tuple[dict[str, Any], Converter]:
    values = [m.value for m in cls]
    if values and all(isinstance(v, str) for v in values):
        kind = "string"
    elif values and all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        kind = "integer"
    else:
        raise _bad(where, cls, f"its values {values!r} are not all str or all int")
    return {"type": kind, "enum": values}, cls


def _nullable(schema: dict[str, Any]) -> dict[str, Any]:
    """The schema, allowing `null` too: in `type` where that is all it needs, else with `anyOf`."""
    t = schema.get("type")
    if isinstance(t, str) and "enum" not in schema and "const" not in schema:
        return {**schema, "type": [t, "null"]}
    return {"anyOf": [schema, {"type": "null"}]}


def _or_none(convert: Converter) -> Converter:
    if convert is same:
        return same
    return lambda v: None if v is None else convert(v)
