"""The optional-field check (`check_optional`): an optional field of a tool's input is written
only where the messages give its value.

Before the model adds an optional field, the `OptionalFieldCheck` hook decodes
that field ahead and asks `supports` whether the messages give its value, and
`closer` for the token that ends the object instead; before the model closes
the object, the `OptionalFieldOffer` hook asks `suggest` for an optional field
the messages name that the model left out.
"""

from __future__ import annotations

import copy
import json
import re
from typing import TYPE_CHECKING

from .._sampling import top_tokens
from .._step import DecodeHook, Step
from ._json_cursor import NUMBER_START, NUMBER_VALUE, STRING_VALUE
from ._rule import CANDIDATES, Logits
from ._schema import in_series
from ._spans import named, own_name, said

if TYPE_CHECKING:
    from ._bias import ValueBias

__all__ = ["OptionalFieldCheck", "OptionalFieldOffer", "OptionalFields"]

_FIELD = re.compile(r',"((?:[^"\\]|\\.)*)":')
"""The start of another field in compact JSON: `,"key":`."""


class OptionalFields:
    """The optional-field check of one generation, bound to its reading (`ValueBias`)."""

    def __init__(self, bias: ValueBias) -> None:
        self._bias = bias
        self._objects = [(tuple(keys), frozenset(required)) for keys, required in bias.context.objects]
        self._suggested: set[str] = set()

    def fork(self, bias: ValueBias) -> OptionalFields:
        """This check bound to `bias`, a fork of the reading (the fields offered stay offered)."""
        other = copy.copy(self)
        other._bias, other._suggested = bias, set(self._suggested)
        return other

    @property
    def may_end_nested(self) -> bool:
        """Whether the next token may end a nested object after a value (or add a field).

        True right after a value, and while a number or string value is written
        (one token may end it and go on: `","`).
        """
        c = self._bias.cursor
        return self._bias.context.site.in_call(c) and c.in_object and (c.may_close or c.in_string_value)

    def adds_field(self, piece: str) -> bool:
        """Whether a token adds another field to a nested object that could end here instead."""
        if not self.may_end_nested:
            return False
        rest = self._bias.cursor.rest(piece)
        return rest is not None and rest.startswith(",")

    def closer(self, logits: Logits, piece: str) -> int | None:
        """The likeliest allowed token that writes what `piece` adds to the value in progress,
        then only closes (the innermost object, and maybe more: `}}`, `}]}`); `None` if none
        is among the likeliest."""
        c, token_piece = self._bias.cursor, self._bias.context.piece
        parts = c.split(piece)
        if parts is None:
            return None
        for t in sorted(top_tokens(logits, CANDIDATES).tolist(), key=lambda t: -logits[t]):
            other = c.split(token_piece(t))
            if (
                other is not None
                and other[0] == parts[0]
                and other[1][:1] == "}"
                and not other[1].strip("}]")
            ):
                return int(t)  # only closes: `}},` would also start an item the model did not choose
        return None

    def supports(self, text: str) -> bool:
        """Whether the user's messages give the value of the field that `text` adds.

        `text` is compact JSON from the token that adds the field (`,"key":value`,
        after the rest of a value in progress) to the end of its value. A
        number must be a free span of the messages (numbers written as words
        included: "three"); a string a free span, or `said` by them
        ("detailed" for "in detail"), and not only words of the key
        ("method_used": "method"); `true`, `false` or `null` needs the key
        to be mentioned (`include_images`: "with images"). A nested object
        or array, or text this cannot read, is let through.
        """
        bias = self._bias
        rest = bias.cursor.rest(text)
        if rest is None:
            return True
        field = _FIELD.match(rest)
        if field is None:
            return True
        key, rest = field.group(1), rest[field.end() :]
        if rest.startswith('"'):
            string = STRING_VALUE.match(rest)
            if string is None:
                return False
            value = string.group(1)
            if own_name(value, key, *bias.context.constants):
                return False  # "method_used": "method" is no value
            return bias.text.match(value, True) or said(value, bias.text.source)
        if rest[:1] in NUMBER_START:
            number = NUMBER_VALUE.match(rest)
            if number is None:
                return False
            starts = bias.numbers.where(number.group(), True)
            if in_series(key, bias.context.siblings.get(key, ())):
                starts = [at for at in starts if at > bias.last_number]  # a series in order
            return bool(starts)
        if rest[:1] in "tfn":
            return bias.mention(key) != 0
        return True

    def suggest(self, piece: str) -> str | None:
        """What to write instead of `piece` when it closes an object in a tool's input that
        has an optional field not written yet whose key the messages name ("with_tolls":
        "with tolls"): the rest of the value in progress, then that field's key
        (`,"with_tolls":`); else `None`. Each key is offered once; the engine keeps the
        field only if the messages support its value (`supports`).
        """
        bias = self._bias
        c = bias.cursor
        if not self._objects or not bias.context.site.in_call(c) or not c.closes(piece):
            return None
        written = set(c.written)
        for keys, required in self._objects:
            if not written <= set(keys) or not required <= written:
                continue
            for key in keys:
                if key not in written and key not in self._suggested and named(key, bias.text.source) > 0:
                    self._suggested.add(key)
                    value = c.split(piece)
                    return ("" if value is None else value[0]) + "," + json.dumps(key) + ":"
        return None


class OptionalFieldCheck(DecodeHook):
    """Before the model adds an optional field to a tool's input, decode that field ahead
    and close the object instead unless the user's messages give its value
    (`OptionalFields.supports`)."""

    def active(self, step: Step) -> bool:
        return step.bias.optional.may_end_nested

    def choose(self, step: Step, token: int) -> int:
        bias, piece = step.bias, step.piece(token)
        if not bias.optional.adds_field(piece):
            return token
        closer = bias.optional.closer(step.logits, piece)
        if closer is None:
            return token
        return closer if step.judged(token, bias.optional.supports) is False else token


class OptionalFieldOffer(DecodeHook):
    """Where the model closes a tool's input, offer an optional field the user's messages
    name that it left out (`OptionalFields.suggest`), kept if its value, decoded ahead, is one
    the messages give (`OptionalFields.supports`)."""

    def active(self, step: Step) -> bool:
        return step.bias.optional.may_end_nested

    def write(self, step: Step, token: int) -> list[int] | None:
        bias = step.bias
        tokens = step.allowed(bias.optional.suggest(step.piece(token)))
        if not tokens:
            return None
        return tokens if step.judged(tokens, bias.optional.supports) else None
