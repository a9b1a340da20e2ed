"""Python annotations as JSON Schema, and converters from checked JSON back to Python values.

`schema_of` maps an annotation that `@tool` takes (SPEC 9.1) to the JSON Schema
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
import inspect
import sys
import types
import typing
from collections.abc import Callable
from typing import Annotated, Any, Literal, NotRequired, Required, get_args, get_origin

from ._docstring import parse_docstring
from ._schema import check_schema
from .errors import AerixError

__all__ = ["Converter", "same", "schema_of", "unwrap"]

Converter = Callable[[Any], Any]


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


def unwrap(annotation: Any) -> tuple[Any, str | None, bool]:
    """Take `Annotated[...]` and `| None` off an annotation.

    Returns:
        The inner annotation, the description (the first string in
        `Annotated`'s metadata) and whether `None` is allowed.
    """
    description = None
    nullable = False
    while True:
        origin = get_origin(annotation)
        if origin is Annotated:
            inner, *meta = get_args(annotation)
            if description is None:
                description = next((m for m in meta if isinstance(m, str)), None)
            annotation = inner
        elif origin is Required or origin is NotRequired:  # a TypedDict key's: read by `_required_key`
            (annotation,) = get_args(annotation)
        elif origin in (typing.Union, types.UnionType):
            args = get_args(annotation)
            rest = [a for a in args if a is not type(None)]
            if len(rest) != 1 or len(args) != 2:
                return annotation, description, nullable
            annotation, nullable = rest[0], True
        else:
            return annotation, description, nullable


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
            annotation outside SPEC 9.1's list (a recursive type included).
    """
    return _Mapper().schema(annotation, where)


class _Mapper:
    """One mapping: it remembers the classes being mapped, to refuse a recursive type."""

    def __init__(self) -> None:
        self._open: list[type] = []

    def schema(self, ann: Any, where: str) -> tuple[dict[str, Any], Converter]:
        inner, description, nullable = unwrap(ann)
        schema, convert = self._inner(inner, where)
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
            return {"type": "array", "items": items}, lambda v: [convert(x) for x in v]
        if origin is dict:
            args = get_args(ann)
            if len(args) != 2 or args[0] is not str:
                raise _bad(where, ann, "the keys must be str: dict[str, T]")
            values, convert = self.schema(args[1], f"{where}: values")
            schema = {"type": "object", "additionalProperties": values}
            if convert is same:
                return schema, same
            return schema, lambda v: {k: convert(x) for k, x in v.items()}
        if not isinstance(ann, type):
            raise _bad(where, ann)
        if issubclass(ann, enum.Enum):
            return _enum(ann, where)
        pydantic = sys.modules.get("pydantic")
        if pydantic is not None and issubclass(ann, pydantic.BaseModel):
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
        try:
            raw = cls.model_json_schema()  # type: ignore[attr-defined]
        except Exception as exc:  # pydantic refuses some types (PydanticInvalidForJsonSchema)
            raise AerixError("options", f"{where}: {cls.__qualname__} has no JSON Schema: {exc}") from None
        return check_schema(raw, where=f"{where}: {cls.__qualname__}"), cls.model_validate  # type: ignore[attr-defined]

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
                args[name] = convert(args[name])
        return cls(**args)

    return build


def _convert_keys(converters: list[tuple[str, Converter]]) -> Converter:
    def convert(v: dict[str, Any]) -> dict[str, Any]:
        out = dict(v)
        for name, c in converters:
            if name in out:
                out[name] = c(out[name])
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
