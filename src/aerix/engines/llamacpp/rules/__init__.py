"""The value rules of the llama.cpp engine: nudges on the logits of JSON values.

They read the schema and what the loop hands over of the conversation
(`aerix.model.Handover`: the texts values copy, the request, the calls made,
where a call's tool name and input sit), never the messages' wording, and
belong to this engine alone. `value_bias` builds one generation's `Context`
and its `ValueBias`, which runs the rules (`ValueRule`) and holds the reading
they share while a value is decoded.

- General rules: the JSON cursor (`_json_cursor`), the schema walk
  (`_schema`), the span matcher (`_spans`), the copy and close biases
  (`_copy`, `_close`), the string choices (`_string_choices`), the tool pick
  (`_tool_pick`, over the tool name's reading in `_tools`), new calls
  (`_new_calls`), the optional-field check (`_optional`), the placeholders
  (`_placeholders`). A rule that acts by choosing or writing tokens is a
  decode hook (`DecodeHook`), listed in order by `.._hooks`.
- `heuristics`: the rules chosen on benchmark entries, each switchable by name.
- `convert`: the opt-in conversions (`convert_values=True`).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from typing import Any

from ....model import ChatMessage, Handover
from ._bias import ValueBias
from ._new_calls import NewCalls
from ._optional import OptionalFieldCheck, OptionalFieldOffer
from ._placeholders import NoPlaceholders
from ._rule import At, Choice, Context, ValueRule
from ._schema import NUMBER_TYPES, constants, enum_keys, fields, number_siblings, object_keys, string_series
from ._site import CallSite
from ._string_choices import StringChoices
from ._tool_pick import ToolPick
from ._tools import call_key, tool_texts
from .convert import date_format, field_unit, kept_scales
from .convert._ahead import DecodedAhead
from .heuristics import HEURISTICS, check_heuristics
from .heuristics.quotes import quoted_values

__all__ = [
    "HEURISTICS",
    "At",
    "Choice",
    "Context",
    "DecodedAhead",
    "NewCalls",
    "NoPlaceholders",
    "OptionalFieldCheck",
    "OptionalFieldOffer",
    "StringChoices",
    "ToolPick",
    "ValueBias",
    "ValueRule",
    "check_heuristics",
    "handover_of",
    "value_bias",
]


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
    heuristics: Collection[str] = frozenset(HEURISTICS),
) -> ValueBias:
    """The value rules of one constrained generation under `schema`, copying from the
    hand-over's texts: `convert_values` turns on the rules that write a value in another
    form, `pick` the pick of a call's tool (in the first turn for the request), `new_calls`
    the lean away from writing a call made again, `placeholders` the rule that no value
    copies a placeholder of the system message; `heuristics` names the heuristics that act
    (`HEURISTICS`; all by default)."""
    kept: dict[str, set[int]] = {}
    for key, description in fields(schema, NUMBER_TYPES):
        kept.setdefault(key, set()).update(kept_scales(key, description))
    names, name_keys = constants(schema)
    site = CallSite.of(handover)
    context = Context(
        source="\n".join(handover.texts),
        copy=copy,
        close=close,
        piece=piece,
        site=site,
        kept_scales=kept,
        siblings=number_siblings(schema),
        date_formats={key: fmt for key, d in fields(schema, ("string",)) if (fmt := date_format(d))},
        objects=object_keys(schema) if check_optional else (),
        units={
            key: (unit, kind == "integer")
            for kind in NUMBER_TYPES
            for key, d in fields(schema, (kind,))
            if (unit := field_unit(key, d))
        },
        series=frozenset(string_series(schema)),
        constants=names,
        constant_keys=frozenset(name_keys),
        enums=frozenset(enum_keys(schema)),
        tools=tool_texts(schema, site),
        request=handover.request if pick and handover.first_turn else None,
        made=frozenset(call_key(c.tool, c.input) for c in handover.calls) if new_calls else frozenset(),
        quoted=tuple(quoted_values("\n".join(handover.said))) if copy and "quotes" in heuristics else (),
        placeholders=handover.placeholders if placeholders else (),
        convert_values=convert_values,
        heuristics=frozenset(heuristics),
    )
    return ValueBias(context)
