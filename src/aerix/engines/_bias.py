"""Value biases: nudge JSON values towards the user's own words, and optional fields out.

A small model under a JSON schema writes the right shape but often the wrong
values: `1000` where the user wrote `5000`, an optional `"unit": "kg"` that
the user never asked for. Two nudges on the logits, both applied only to the
likeliest tokens the schema allows, address that:

- **copy**: while the model writes a string or number value, each token that
  keeps the value a span of the user's messages gets `copy` added to its
  logit. A span starts and ends at word boundaries (never inside a word or a
  number) and starts with a letter, a digit or a minus sign; a token that
  closes the value is nudged only when the value is a whole span. Each
  occurrence in the messages is copied once: once a value has taken it, it is
  not offered to the next one (`"x": 4, "y": 5` from "sides 4 and 5", not
  `"y": 4`). Numbers match without thousands separators (`2000000` copies
  "$2,000,000").
- **close**: right after a value inside an object that may end there (the
  schema allows `}`: every field left is optional), the closing tokens get
  `close` added, so optional fields are written only when the model is sure
  of them.

Keys and punctuation are otherwise left alone, and the model still chooses
among the nudged tokens: a bias breaks near-ties, it does not dictate.
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Callable

import numpy as np
import numpy.typing as npt

__all__ = ["JsonCursor", "Spans", "ValueBias"]

Logits = npt.NDArray[np.float32]

_NUMBER_CHARS = "0123456789.eE+-"
_NUMBER = frozenset(_NUMBER_CHARS)
_THOUSANDS = re.compile(r"(?<=\d),(?=\d{3}(?!\d))")
"""A thousands separator: a comma between a digit and exactly three digits."""
_CANDIDATES = 32
"""How many of the likeliest allowed tokens are looked at per step."""


class JsonCursor:
    """Where a stream of compact JSON text is: in a string value, a number, after a value.

    Tracks only what the biases need. Keys are told from string values by
    their place (after `{` or `,` in an object).

    Args:
        on_value: Called with the raw text of each string or number value once it
            ends, and whether it is a number.
    """

    def __init__(self, on_value: Callable[[str, bool], object] | None = None) -> None:
        self._on_value = on_value
        self._stack: list[str] = []
        self._expect_key = False
        self._in_string = False
        self._in_key = False
        self._escaped = False
        self.value: str | None = None
        """The raw characters of the string or number value being written, else `None`."""
        self.number = False
        """Whether `value` is a number (else a string, when `value` is set)."""
        self.after_value = False
        """Whether a value (or a literal, or a nested object or array) has just ended."""

    def feed(self, text: str) -> None:
        """Advance over generated text."""
        for c in text:
            self._step(c)

    def _step(self, c: str) -> None:
        if self._in_string:
            if self._escaped:
                self._escaped = False
            elif c == "\\":
                self._escaped = True
            elif c == '"':
                if self.value is not None and self._on_value is not None:
                    self._on_value(self.value, False)
                self._in_string, self.value, self.after_value = False, None, not self._in_key
                return
            if self.value is not None:
                self.value += c
            return
        if self.number:
            if c in _NUMBER:
                self.value = (self.value or "") + c
                return
            if self.value is not None and self._on_value is not None:
                self._on_value(self.value, True)
            self.number, self.value = False, None
        self.after_value = False
        if c == '"':
            self._in_string = True
            self._in_key = self._expect_key and self.in_object
            self.value = None if self._in_key else ""
        elif c in "-0123456789":
            self.number, self.value = True, c
        elif c in "{[":
            self._stack.append(c)
            self._expect_key = c == "{"
        elif c in "}]":
            if self._stack:
                self._stack.pop()
            self._expect_key, self.after_value = False, True
        elif c == ",":
            self._expect_key = self.in_object
        elif c == ":":
            self._expect_key = False
        elif c.isalpha():  # true, false, null
            self.after_value = True

    @property
    def in_object(self) -> bool:
        """Whether the innermost open container is an object."""
        return self._stack[-1:] == ["{"]

    @property
    def at_value(self) -> bool:
        """Whether the next token may start or continue a string or number value."""
        return self.value is not None or (not self._in_string and not self._expect_key)

    @property
    def may_close(self) -> bool:
        """Whether the next token may close the innermost object right after a value."""
        return self.in_object and (self.after_value or self.number)

    def candidate(self, piece: str) -> tuple[str, bool, bool] | None:
        """The value a token would write, whether it would end it, and whether it is a number.

        `None` if the token writes no value.
        """
        if self.value is not None and self._in_string:
            return _string(self.value, piece)
        if self.value is not None:
            return _number(self.value, piece)
        if self._in_string or self._expect_key or not piece:
            return None
        if piece[0] == '"':
            return _string("", piece[1:])
        if piece[0] in "-0123456789":
            return _number("", piece)
        return None

    def closes(self, piece: str) -> bool:
        """Whether a token closes the innermost object (after ending a number in progress)."""
        if self.number:
            piece = piece.lstrip(_NUMBER_CHARS)
        return piece.startswith("}")


def _string(value: str, piece: str) -> tuple[str, bool, bool]:
    escaped = False
    for i, c in enumerate(piece):
        if escaped:
            escaped = False
        elif c == "\\":
            escaped = True
        elif c == '"':
            return value + piece[:i], True, False
    return value + piece, False, False


def _number(value: str, piece: str) -> tuple[str, bool, bool] | None:
    end = next((i for i, c in enumerate(piece) if c not in _NUMBER), -1)
    if end < 0:
        return value + piece, False, True
    return (value + piece[:end], True, True) if piece[end] in ",}]" else None


def _kind(c: str) -> str:
    return "a" if c.isalpha() else "0" if c.isdigit() else c


class Spans:
    """Which texts are spans of a source text: starting (and ending) at word boundaries.

    An occurrence taken by `use` is not matched again.
    """

    def __init__(self, source: str) -> None:
        self.source = source
        self._used: set[int] = set()

    def use(self, value: str) -> None:
        """Take the first free occurrence of `value` as a whole span: it is not offered again."""
        i = self._find(value, whole=True)
        if i >= 0:
            self._used.add(i)

    def _boundary(self, i: int) -> bool:
        s = self.source
        if i <= 0 or i >= len(s):
            return True
        a, b = _kind(s[i - 1]), _kind(s[i])
        return not (a == b and a in "a0")

    def match(self, value: str, whole: bool) -> bool:
        """Whether `value` starts a span of the source (`whole`: is one).

        A span starts with a letter, a digit or a minus sign, and does not end with a blank.
        """
        if not value or not (value[0].isalnum() or value[0] == "-") or (whole and value[-1].isspace()):
            return False
        return self._find(value, whole) >= 0

    def _find(self, value: str, whole: bool) -> int:
        s, i = self.source, self.source.find(value)
        while i >= 0:
            if i not in self._used and self._boundary(i) and (not whole or self._boundary(i + len(value))):
                return i
            i = s.find(value, i + 1)
        return -1


class ValueBias:
    """One constrained generation's value biases.

    Args:
        source: The text values may be copied from (the user's messages).
        copy: Added to each likely token that keeps a value a span of `source`; 0: off.
        close: Added to the tokens that close an object whose remaining fields are
            optional, right after a value; 0: off.
        piece: A token's text.
    """

    def __init__(self, source: str, *, copy: float, close: float, piece: Callable[[int], str]) -> None:
        self._text = Spans(source)
        self._numbers = Spans(_THOUSANDS.sub("", source))  # "$2,000,000" is the number 2000000
        self._copy = np.float32(copy)
        self._close = np.float32(close)
        self._piece = piece
        self._cursor = JsonCursor(on_value=self._use)
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def feed(self, data: bytes) -> None:
        """Advance over the bytes of generated (sampled or forced) tokens."""
        self._cursor.feed(self._decoder.decode(data))

    def _use(self, value: str, number: bool) -> None:
        (self._numbers if number else self._text).use(value)

    @property
    def active(self) -> bool:
        """Whether the next token may be nudged (else `apply` changes nothing)."""
        c = self._cursor
        return bool(self._copy and c.at_value) or bool(self._close and c.may_close)

    def apply(self, logits: Logits) -> Logits:
        """Nudge the likeliest tokens in place (`logits` already masked) and return them."""
        if not self.active:
            return logits
        cursor = self._cursor
        n = logits.shape[0]
        k = min(_CANDIDATES, n)
        top = [t for t in np.argpartition(logits, n - k)[n - k :].tolist() if np.isfinite(logits[t])]
        pieces = {t: p for t in top if (p := self._piece(t))}
        if self._copy:
            for token, piece in pieces.items():
                hit = cursor.candidate(piece)
                if hit is not None and (self._numbers if hit[2] else self._text).match(hit[0], hit[1]):
                    logits[token] += self._copy
        if self._close and cursor.may_close and pieces:
            # A number may always go on: only once the model ends it, lean to ending the object too.
            best = max(pieces, key=lambda t: logits[t])
            if not cursor.number or pieces[best][0] not in _NUMBER:
                for token, piece in pieces.items():
                    if cursor.closes(piece):
                        logits[token] += self._close
        return logits
