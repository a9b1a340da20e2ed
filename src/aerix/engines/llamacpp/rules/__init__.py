"""The value rules of the llama.cpp engine: nudges on the logits of JSON values.

They read the request (the user's messages) and the schema, and belong to
this engine alone: `ValueBias` holds the state they share while a value is
decoded; `value_bias` builds it for one generation.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any

from ._bias import ValueBias
from ._dates import date_format
from ._fields import NUMBER_TYPES, constants, enum_keys, fields, number_siblings, object_keys, string_series
from ._spans import kept_scales, quoted_values
from ._tools import calls_made, copy_source, first_request, placeholders, tool_texts, user_words
from ._units import Unit, field_unit

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


@dataclass(frozen=True, slots=True)
class _SchemaFacts:
    """What the rules read from a schema alone, kept across the generations under it."""

    kept: dict[str, set[int]]
    dates: dict[str, str]
    names: set[str]
    name_keys: set[str]
    units: dict[str, tuple[Unit, bool]]
    siblings: dict[str, set[str]]
    series: set[str]
    enums: set[str]
    tools: dict[str, str]
    objects: list[tuple[list[str], set[str]]]


_FACTS: OrderedDict[str, _SchemaFacts] = OrderedDict()
"""The facts of the last few schemas, by their JSON text: an agent's turns share one schema."""
_FACTS_KEPT = 16


def _facts(schema: Any) -> _SchemaFacts:
    """`schema`'s facts, read once per schema (the walks cost a few milliseconds a turn)."""
    text = json.dumps(schema)
    facts = _FACTS.get(text)
    if facts is not None:
        _FACTS.move_to_end(text)
        return facts
    kept: dict[str, set[int]] = {}
    for key, description in fields(schema, NUMBER_TYPES):
        kept.setdefault(key, set()).update(kept_scales(key, description))
    names, name_keys = constants(schema)
    facts = _SchemaFacts(
        kept=kept,
        dates={k: fmt for k, d in fields(schema, ("string",)) if (fmt := date_format(d))},
        names=names,
        name_keys=name_keys,
        units={
            k: (unit, kind == "integer")
            for kind in NUMBER_TYPES
            for k, d in fields(schema, (kind,))
            if (unit := field_unit(k, d))
        },
        siblings=number_siblings(schema),
        series=string_series(schema),
        enums=enum_keys(schema),
        tools=tool_texts(schema),
        objects=object_keys(schema),
    )
    _FACTS[text] = facts
    if len(_FACTS) > _FACTS_KEPT:
        _FACTS.popitem(last=False)
    return facts


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
    facts = _facts(schema)
    return ValueBias(
        source,
        copy=copy,
        close=close,
        piece=piece,
        kept_scales=facts.kept,
        siblings=facts.siblings,
        date_formats=facts.dates,
        units=facts.units,
        series=facts.series,
        constants=facts.names,
        constant_keys=facts.name_keys,
        enums=facts.enums,
        tools=facts.tools,
        request=request,
        made=made,
        quoted=quoted,
        placeholders=placeholders,
        objects=facts.objects if check_optional else (),
        convert_values=convert_values,
    )
