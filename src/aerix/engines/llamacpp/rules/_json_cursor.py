"""Where a stream of compact JSON text is: in a key, a string value, a number, after a value.

The value rules (`_bias.ValueBias`) follow the generated text with a
`JsonCursor` to know which value a token would write, and whether it would
end it or close an object.
"""

from __future__ import annotations

import re
from collections.abc import Callable

__all__ = ["NUMBER_CHARS", "NUMBER_START", "NUMBER_VALUE", "STRING_VALUE", "JsonCursor"]

NUMBER_CHARS = "0123456789.eE+-"
"""The characters of a JSON number."""
_NUMBER = frozenset(NUMBER_CHARS)
NUMBER_START = "-0123456789"
"""The characters a JSON number starts with."""
STRING_VALUE = re.compile(r'"((?:[^"\\]|\\.)*)"')
"""A JSON string, quotes and all; its text unescaped is group 1's."""
NUMBER_VALUE = re.compile(r"-?[0-9][0-9.eE+-]*(?=[,}\]])")
"""A JSON number that ends (a `,`, `}` or `]` follows it)."""


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
        self.key = ""
        """The raw text of the latest key (of the value being written, once past its colon)."""
        self._keys: list[list[str]] = []
        """The keys written so far in each open object (and an empty list for each array)."""
        self._path: list[str | None] = []
        """Where each open container but the outermost sits in its parent: its key, or `None`
        for an array's item."""

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
                if self._in_key and self._keys:
                    self._keys[-1].append(self.key)
                self._in_string, self.value, self.after_value = False, None, not self._in_key
                return
            if self.value is not None:
                self.value += c
            elif self._in_key:
                self.key += c
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
            if self._in_key:
                self.key = ""
        elif c in NUMBER_START:
            self.number, self.value = True, c
        elif c in "{[":
            if self._stack:
                self._path.append(self.key if self.in_object else None)
            self._stack.append(c)
            self._keys.append([])
            self._expect_key = c == "{"
        elif c in "}]":
            if self._stack:
                self._stack.pop()
                self._keys.pop()
                if self._path:
                    self._path.pop()
            self._expect_key, self.after_value = False, True
        elif c == ",":
            self._expect_key = self.in_object
        elif c == ":":
            self._expect_key = False
        elif c.isalpha():  # true, false, null
            self.after_value = True

    def copy(self, on_value: Callable[[str, bool], object] | None) -> JsonCursor:
        """An independent copy of this cursor, reporting values to `on_value`."""
        other = JsonCursor(on_value)
        other._stack = list(self._stack)
        other._expect_key, other._in_string, other._in_key = self._expect_key, self._in_string, self._in_key
        other._escaped, other.value, other.number = self._escaped, self.value, self.number
        other.after_value, other.key = self.after_value, self.key
        other._keys = [list(keys) for keys in self._keys]
        other._path = list(self._path)
        return other

    @property
    def container(self) -> tuple[str | None, ...]:
        """Where the innermost open object or array sits (`aerix.model.JsonPath`): `()` for the
        outermost, `("calls", None)` for an item of the `calls` array."""
        return tuple(self._path)

    @property
    def path(self) -> tuple[str | None, ...]:
        """Where the value in progress, or the next one, sits (`aerix.model.JsonPath`):
        `("calls", None, "tool")` while a call's tool name is written."""
        return (*self._path, self.key if self.in_object else None)

    @property
    def written(self) -> tuple[str, ...]:
        """The keys written so far in the innermost open object."""
        return tuple(self._keys[-1]) if self._keys else ()

    @property
    def depth(self) -> int:
        """How many objects and arrays are open."""
        return len(self._stack)

    @property
    def in_object(self) -> bool:
        """Whether the innermost open container is an object."""
        return self._stack[-1:] == ["{"]

    @property
    def at_value(self) -> bool:
        """Whether the next token may start or continue a string or number value."""
        return self.value is not None or (not self._in_string and not self._expect_key)

    @property
    def at_literal(self) -> bool:
        """Whether the next token may start a field's value that is a literal (`true`)."""
        return (
            self.value is None
            and not self._in_string
            and not self._expect_key
            and self.in_object
            and not self.after_value
        )

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
        if piece[0] in NUMBER_START:
            return _number("", piece)
        return None

    @property
    def in_string_value(self) -> bool:
        """Whether a string value (not a key) is being written."""
        return self._in_string and self.value is not None

    def split(self, piece: str) -> tuple[str, str] | None:
        """A token's text split where the value in progress ends: what it adds to the
        value (with a string's closing quote) and what comes after. `None` if the value
        goes on past the token; `("", piece)` if no value is in progress."""
        if self.number:
            rest = piece.lstrip(NUMBER_CHARS)
            return (piece[: len(piece) - len(rest)], rest) if rest else None
        if self.in_string_value:
            i = _closing_quote(piece, self._escaped)
            return None if i < 0 else (piece[: i + 1], piece[i + 1 :])
        return "", piece

    def rest(self, piece: str) -> str | None:
        """What a token writes after the value in progress ends; `None` if the value goes on."""
        parts = self.split(piece)
        return None if parts is None else parts[1]

    def closes(self, piece: str) -> bool:
        """Whether a token closes the innermost object (after ending a value in progress)."""
        rest = self.rest(piece)
        return rest is not None and rest.startswith("}")


def _closing_quote(piece: str, escaped: bool = False) -> int:
    """Where the first unescaped `"` of a piece of a JSON string is; -1 if none."""
    if not escaped and "\\" not in piece:
        return piece.find('"')
    for i, c in enumerate(piece):
        if escaped:
            escaped = False
        elif c == "\\":
            escaped = True
        elif c == '"':
            return i
    return -1


def _string(value: str, piece: str) -> tuple[str, bool, bool]:
    i = _closing_quote(piece)
    return (value + piece, False, False) if i < 0 else (value + piece[:i], True, False)


def _number(value: str, piece: str) -> tuple[str, bool, bool] | None:
    end = next((i for i, c in enumerate(piece) if c not in _NUMBER), -1)
    if end < 0:
        return value + piece, False, True
    return (value + piece[:end], True, True) if piece[end] in ",}]" else None
