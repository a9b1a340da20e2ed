"""The hook of the conversions: a value decoded ahead and written in the form its field asks for."""

from __future__ import annotations

import json

from ..._step import DecodeHook, Step

__all__ = ["DecodedAhead"]


class DecodedAhead(DecodeHook):
    """A value decoded ahead and written in the form its field asks for: the number a
    scaled one means ("0.05" for "5%", "70" for "5ft 10in" in inches: `Conversions.scaled`),
    which the model may then end but not go on with, or a date in its field's format,
    with the closing quote (`Conversions.dated`). Opt-in (`convert_values`): it writes
    values the model did not choose, and the `ValueBias` too must have been built with
    `convert_values` for it to act."""

    def active(self, step: Step) -> bool:
        return step.bias.active

    def write(self, step: Step, token: int) -> list[int] | None:
        bias = step.bias
        if bias.convert.starts_number(step.piece(token)):
            ahead = step.ahead(token)
            tokens = step.allowed(None if ahead is None else bias.convert.scaled(ahead.text, ahead.ended))
            if tokens:
                bias.convert.seal()  # the model may end it, not add digits to it
            return tokens or None
        if bias.convert.starts_date():
            ahead = step.ahead(token, choice=True)
            day = None if ahead is None else bias.convert.dated(ahead.text)
            return step.allowed(None if day is None else json.dumps(day)[1:]) or None
        return None
