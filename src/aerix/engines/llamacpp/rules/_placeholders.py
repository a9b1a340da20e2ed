"""Placeholders are no values (`no_placeholders`): a string value that begins with a
placeholder of the system message (a value of a JSON example there, as the loop hands them
over: `Handover.placeholders`), or with words in angle brackets that open as one does, is
left out by the `NoPlaceholders` hook."""

from __future__ import annotations

import copy
import re
from typing import TYPE_CHECKING

import numpy as np

from .._sampling import sample
from .._step import DecodeHook, Step

if TYPE_CHECKING:
    from ._bias import ValueBias

__all__ = ["NoPlaceholders", "Placeholders"]

_PLACEHOLDER = re.compile(r"<[A-Za-z][^<>\n]{0,78}>")
"""Words in angle brackets: a letter and a few words (`<city name>`, `<city name here>`)."""
_HEAD = re.compile(r"<[^\W_]+")


def _head(placeholder: str) -> str:
    """How a placeholder opens: `<` and its first word (`<city` for `<city name>`)."""
    found = _HEAD.match(placeholder)
    return found.group() if found else placeholder


class Placeholders:
    """The system message's placeholders, bound to a generation's reading (`ValueBias`)."""

    def __init__(self, bias: ValueBias) -> None:
        self._bias = bias
        self.placeholders = tuple(bias.context.placeholders)
        """The placeholders (`<city name>`): no value copies one."""
        self._heads = frozenset(_head(p) for p in self.placeholders)
        """How each placeholder opens: `<` and its first word (`<city`)."""

    def fork(self, bias: ValueBias) -> Placeholders:
        """These placeholders bound to `bias`, a fork of the reading."""
        other = copy.copy(self)
        other._bias = bias
        return other

    def may_copy(self, piece: str) -> bool:
        """Whether a token, first of a string value, keeps it on the way to a placeholder's
        opening (`<`, `<city`): a value to read ahead (`copies`)."""
        hit = self._bias.cursor.candidate(piece)
        if hit is None or hit[2] or not hit[0]:
            return False
        value = hit[0]
        return any(h.startswith(value) or value.startswith(h) for h in self._heads)

    def copies(self, text: str) -> bool:
        """Whether a string value's text (from its first character; what follows it may come
        after) begins with a placeholder, or with words in angle brackets that open as one
        does (`<city name here>` for `<city name>`)."""
        found = _PLACEHOLDER.match(text)
        return found is not None and _head(found.group()) in self._heads


class NoPlaceholders(DecodeHook):
    """The first token of a string value (in a tool's input or the final): where the value
    it starts, decoded ahead, copies a placeholder of the system message (a value of a JSON
    example there, as the loop hands them over: `Handover.placeholders`,
    `Placeholders.copies`), that token is left out and another drawn from the rest
    of the same logits, up to `tries` times. A small model often copies such a placeholder
    whole as its answer; it then writes what it would have written next. Only tokens on
    the way to a placeholder (`<`, `<city`) are read ahead,
    so a value that merely starts with `<` ("<5 ms") costs a short look-ahead and stays.

    Args:
        tries: The most tokens left out at one step.
    """

    def __init__(self, tries: int = 4) -> None:
        self.tries = tries

    def active(self, step: Step) -> bool:
        return bool(step.bias.holders.placeholders) and step.bias.starts_any_string

    def choose(self, step: Step, token: int) -> int:
        bias, logits = step.bias, None
        for _ in range(self.tries):
            if not bias.holders.may_copy(step.piece(token)):
                return token
            ahead = step.ahead(token, choice=True)
            if ahead is None or not bias.holders.copies(ahead.text):
                return token
            logits = step.logits.copy() if logits is None else logits
            logits[token] = -np.inf
            if not np.isfinite(logits).any():
                return token
            token = sample(logits, step.sampling, step.rng)
        return token
