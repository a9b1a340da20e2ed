"""The value rules of the llama.cpp engine: nudges on the logits of JSON values.

They read the schema and what the loop hands over of the conversation
(`aerix.model.Handover`: the texts values copy, the request, the calls made,
where a call's tool name and input sit), never the messages' wording, and
belong to this engine alone: `ValueBias` holds the state they share while a
value is decoded; `value_bias` builds it for one generation.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ....model import ChatMessage, Handover
from ._bias import ValueBias
from ._dates import date_format
from ._fields import NUMBER_TYPES, constants, enum_keys, fields, number_siblings, object_keys, string_series
from ._site import CallSite
from ._spans import kept_scales, quoted_values
from ._tools import call_key, tool_texts
from ._units import field_unit

__all__ = ["ValueBias", "handover_of", "quoted_values", "value_bias"]


def handover_of(messages: Sequence[ChatMessage], given: Handover | None) -> Handover:
    """The hand-over the rules read: the one given, else the user's messages as they are
    (values copy from them; no request to pick a tool for, no calls, no placeholders)."""
    if given is not None:
        return given
    said = tuple(m["content"] for m in messages if m["role"] == "user")
    return Handover(said=said, texts=said)


def value_bias(
    schema: Any,
    handover: Handover,
    *,
    copy: float,
    close: float,
    piece: Callable[[int], str],
    check_optional: bool,
    convert_values: bool = False,
    pick: bool = False,
    new_calls: bool = False,
    placeholders: bool = False,
) -> ValueBias:
    """The value biases of one constrained generation under `schema`, copying from the
    hand-over's texts; `convert_values` turns on the rules that write a value in another
    form, `pick` the pick of a call's tool (in the first turn for the request), `new_calls`
    the lean away from writing a call made again, `placeholders` the rule that no value
    copies a placeholder of the system message (`ValueBias`)."""
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
    site = CallSite.of(handover)
    return ValueBias(
        "\n".join(handover.texts),
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
        tools=tool_texts(schema, site),
        request=handover.request if pick and handover.first_turn else None,
        made=frozenset(call_key(c.tool, c.input) for c in handover.calls) if new_calls else (),
        quoted=quoted_values("\n".join(handover.said)) if copy else (),
        placeholders=handover.placeholders if placeholders else (),
        site=site,
        objects=object_keys(schema) if check_optional else (),
        convert_values=convert_values,
    )
