"""The value rules of the llama.cpp engine: nudges on the logits of JSON values.

They read the request (the user's messages) and the schema, and belong to
this engine alone: `ValueBias` holds the state they share while a value is
decoded; `value_bias` builds it for one generation.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any

from ._bias import ValueBias
from ._dates import date_format
from ._fields import NUMBER_TYPES, constants, enum_keys, fields, number_siblings, object_keys, string_series
from ._spans import kept_scales, quoted_values
from ._tools import calls_made, copy_source, first_request, placeholders, tool_texts, user_words
from ._units import field_unit

__all__ = [
    "ValueBias",
    "calls_made",
    "copy_source",
    "first_request",
    "placeholders",
    "quoted_values",
    "user_words",
    "value_bias",
]


def value_bias(
    schema: Any,
    source: str,
    *,
    copy: float,
    close: float,
    piece: Callable[[int], str],
    check_optional: bool,
    convert_values: bool = False,
    request: str | None = None,
    made: Collection[str] = (),
    quoted: Collection[str] = (),
    placeholders: Collection[str] = (),
) -> ValueBias:
    """The value biases of one constrained generation under `schema`, copying from `source`;
    `convert_values` turns on the rules that write a value in another form, `request` (the
    one whose first turn this is) the pick of a call's tool, `made` (the calls its turns
    wrote) the lean away from writing one again, `quoted` (what the user put in quotes)
    the lean to those values, `placeholders` (the system prompt's `<your answer>`) the
    values no value copies (`ValueBias`)."""
    kept: dict[str, set[int]] = {}
    for key, description in fields(schema, NUMBER_TYPES):
        kept.setdefault(key, set()).update(kept_scales(key, description))
    dates = {key: fmt for key, d in fields(schema, ("string",)) if (fmt := date_format(d))}
    names, name_keys = constants(schema)
    units = {
        key: (unit, kind == "integer")
        for kind in NUMBER_TYPES
        for key, d in fields(schema, (kind,))
        if (unit := field_unit(key, d))
    }
    return ValueBias(
        source,
        copy=copy,
        close=close,
        piece=piece,
        kept_scales=kept,
        siblings=number_siblings(schema),
        date_formats=dates,
        units=units,
        series=string_series(schema),
        constants=names,
        constant_keys=name_keys,
        enums=enum_keys(schema),
        tools=tool_texts(schema),
        request=request,
        made=made,
        quoted=quoted,
        placeholders=placeholders,
        objects=object_keys(schema) if check_optional else (),
        convert_values=convert_values,
    )
