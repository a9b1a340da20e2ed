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
  "$2,000,000") and as words up to twenty (`2` copies "two"). Once a value
  is under way as a span, the other tokens get `copy` taken off: leaving a
  span costs what copying gains ("Liverpool", not "Liverly"; `5000`, not
  `500`). A boolean whose key the messages mention (`avoid_tolls`: "toll
  roads avoided") is nudged towards `true`, or `false` after a negation. A
  number the messages give only as a percentage is written as its fraction
  (`starts_number`, `fraction`: the engine decodes it ahead), unless the
  field takes percentages (`takes_percent`).
- **close**: right after a value inside an object that may end there (the
  schema allows `}`: every field left is optional), the closing tokens get
  `close` added, so optional fields are written only when the model is sure
  of them.

Keys and punctuation are otherwise left alone, and the model still chooses
among the nudged tokens: a bias breaks near-ties, it does not dictate.

The engine's check of optional fields uses the same state: `fork` copies it
to decode a field ahead, `supports` judges that field's value against the
messages, and `closer` finds the token that ends the object instead.
"""

from __future__ import annotations

import codecs
import copy
import re
from collections.abc import Callable, Collection, Iterator
from decimal import Decimal

import numpy as np
import numpy.typing as npt

__all__ = ["JsonCursor", "Spans", "ValueBias", "takes_percent"]

Logits = npt.NDArray[np.float32]

_NUMBER_CHARS = "0123456789.eE+-"
_NUMBER = frozenset(_NUMBER_CHARS)
_NUMBER_START = "-0123456789"
"""The characters a JSON number starts with."""
_DECIMAL_POINT = re.compile(r"(?<=\d)\.(?=\d)")
_THOUSANDS = re.compile(r"(?<=\d),(?=\d{3}(?!\d))")
"""A thousands separator: a comma between a digit and exactly three digits."""
_CANDIDATES = 32
"""How many of the likeliest allowed tokens are looked at per step."""
_FIELD = re.compile(r',"((?:[^"\\]|\\.)*)":')
"""The start of another field in compact JSON: `,"key":`."""
_STRING = re.compile(r'"((?:[^"\\]|\\.)*)"')
_NUMBER_VALUE = re.compile(r"-?[0-9][0-9.eE+-]*(?=[,}\]])")
_WORD = re.compile(r"[a-z]+|[A-Z][a-z]*")
_FLAG_WORDS = frozenset(
    {
        "include",
        "includes",
        "with",
        "use",
        "show",
        "enable",
        "allow",
        "return",
        "only",
        "get",
        "has",
        "is",
        "want",
        "need",
    }
)
"""Words of a flag's name that say what it does, not what it is about (`include_`, `with_`)."""
_NEGATION = re.compile(
    r"\b(?:not|no|never|without|don't|dont|do not|doesn't|exclude|excluding)\W+(?:\w+\W+){0,2}$"
)
"""A negation up to three words before a mention."""


_NUMBER_WORDS = {
    w: str(n)
    for n, w in enumerate(
        [
            "zero",
            "one",
            "two",
            "three",
            "four",
            "five",
            "six",
            "seven",
            "eight",
            "nine",
            "ten",
            "eleven",
            "twelve",
            "thirteen",
            "fourteen",
            "fifteen",
            "sixteen",
            "seventeen",
            "eighteen",
            "nineteen",
            "twenty",
        ]
    )
}
_VALUE_WORD = re.compile(r"[^\W_]+")
_SPELLED = re.compile(r"\b(?:" + "|".join(_NUMBER_WORDS) + r")\b", re.IGNORECASE)
"""A number written as a word ("two"), from zero to twenty."""
_PERCENT = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?=\s?(?:%|percent\b|per cent\b))", re.IGNORECASE)
"""A number the messages give as a percentage ("5%", "2.5 percent")."""
_PERCENT_FIELD = re.compile(r"percent|\bpct\b|per cent")
_FRACTION_FIELD = re.compile(r"decimal|fraction")


def takes_percent(key: str, description: str = "") -> bool:
    """Whether a number field takes a percentage as written (5 for "5%"), by its name or
    description ("discount_pct", "as a percentage"), rather than the fraction it means."""
    text = f"{key.replace('_', ' ')} {description}".lower()
    return bool(_PERCENT_FIELD.search(text)) and not _FRACTION_FIELD.search(description.lower())


def _fraction(number: str) -> str:
    """The fraction a percentage means, as JSON: "5" → "0.05", "12.5" → "0.125"."""
    return format(Decimal(number).scaleb(-2).normalize(), "f")


def _stem(word: str) -> str:
    """A word's first letters, all but two and at least four (the whole word if shorter)."""
    return word[: max(4, len(word) - 2)]


def said(value: str, source: str) -> bool:
    """Whether `source` says every word of `value`: a short word (under four characters)
    as a whole word, a longer one by its stem ("detailed" for "in detail")."""
    words = _VALUE_WORD.findall(value.lower())
    source = source.lower()
    return bool(words) and all(
        re.search(rf"\b{re.escape(w)}\b" if len(w) < 4 else rf"\b{re.escape(_stem(w))}", source)
        for w in words
    )


def mention(key: str, source: str) -> int:
    """Whether `source` mentions what the flag `key` is about: 1, negated: -1, not at all: 0.

    A word of the key (`include_tolls`: "tolls") is mentioned where a word of
    `source` starts with its stem (its first letters, all but two, at least four).
    """
    source = source.lower()
    found = 0
    for word in {w.lower() for w in _WORD.findall(key)} - _FLAG_WORDS:
        if len(word) < 3:
            continue
        for hit in re.finditer(rf"\b{re.escape(_stem(word))}", source):
            if _NEGATION.search(source[: hit.start()]):
                return -1
            found = 1
    return found


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
        elif c in _NUMBER_START:
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

    def copy(self, on_value: Callable[[str, bool], object] | None) -> JsonCursor:
        """An independent copy of this cursor, reporting values to `on_value`."""
        other = JsonCursor(on_value)
        other._stack = list(self._stack)
        other._expect_key, other._in_string, other._in_key = self._expect_key, self._in_string, self._in_key
        other._escaped, other.value, other.number = self._escaped, self.value, self.number
        other.after_value, other.key = self.after_value, self.key
        return other

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
        if piece[0] in _NUMBER_START:
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
            rest = piece.lstrip(_NUMBER_CHARS)
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


def _kind(c: str) -> str:
    return "a" if c.isalpha() else "0" if c.isdigit() else c


class Spans:
    """Which texts are spans of a source text: starting (and ending) at word boundaries.

    An occurrence taken by `use` is not matched again.
    """

    def __init__(self, source: str) -> None:
        self.source = source
        self._used: set[int] = set()
        self._points = frozenset(m.start() for m in _DECIMAL_POINT.finditer(source))
        """Where the source has a decimal point between two digits."""

    def copy(self) -> Spans:
        """An independent copy (the occurrences taken so far stay taken)."""
        other = copy.copy(self)
        other._used = set(self._used)
        return other

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
        if i in self._points or i - 1 in self._points:
            return False  # inside a decimal number: "0" is no span of "0.015"
        return not (a == b and a in "a0")

    def match(self, value: str, whole: bool) -> bool:
        """Whether `value` starts a span of the source (`whole`: is one).

        A span starts with a letter, a digit or a minus sign, and does not end with a blank.
        """
        if not value or not (value[0].isalnum() or value[0] == "-") or (whole and value[-1].isspace()):
            return False
        return self._find(value, whole) >= 0

    def free(self, value: str) -> list[int]:
        """Where `value` is a free whole span of the source."""
        return list(self._occurrences(value, whole=True))

    def is_free(self, at: int) -> bool:
        """Whether the occurrence at `at` has not been taken."""
        return at not in self._used

    def take(self, at: int) -> None:
        """Take the occurrence at `at`: it is not offered again."""
        self._used.add(at)

    def _find(self, value: str, whole: bool) -> int:
        return next(self._occurrences(value, whole), -1)

    def _occurrences(self, value: str, whole: bool) -> Iterator[int]:
        s, i = self.source, self.source.find(value)
        while i >= 0:
            if i not in self._used and self._boundary(i) and (not whole or self._boundary(i + len(value))):
                yield i
            i = s.find(value, i + 1)


class ValueBias:
    """One constrained generation's value biases.

    Args:
        source: The text values may be copied from (the user's messages).
        copy: Added to each likely token that keeps a value a span of `source`; 0: off.
            With it, a percentage of `source` copied into a number field is
            written as the fraction it means (see `fraction`).
        close: Added to the tokens that close an object whose remaining fields are
            optional, right after a value; 0: off.
        piece: A token's text.
        percent_keys: The keys of number fields that take a percentage as written
            (`takes_percent`).
    """

    def __init__(
        self,
        source: str,
        *,
        copy: float,
        close: float,
        piece: Callable[[int], str],
        percent_keys: Collection[str] = (),
    ) -> None:
        self._text = Spans(source)
        # "$2,000,000" is the number 2000000, "two nights" the number 2.
        numbers = _SPELLED.sub(lambda m: _NUMBER_WORDS[m.group().lower()], _THOUSANDS.sub("", source))
        self._numbers = Spans(numbers)
        self._percents = {m.start() for m in _PERCENT.finditer(self._numbers.source)}
        """Where the numbers the messages give as percentages start."""
        self._percent_keys = frozenset(percent_keys)
        self._copy = np.float32(copy)
        self._close = np.float32(close)
        self._piece = piece
        self._cursor = JsonCursor(on_value=self._use)
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self.ended = 0
        """How many string or number values have ended so far."""
        self._ahead_of = 0
        self._mentions: dict[str, int] = {}

    def feed(self, data: bytes) -> None:
        """Advance over the bytes of generated (sampled or forced) tokens."""
        self._cursor.feed(self._decoder.decode(data))

    def _use(self, value: str, number: bool) -> None:
        (self._numbers if number else self._text).use(value)
        self.ended += 1

    def fork(self) -> ValueBias:
        """An independent copy, to decode ahead with and throw away."""
        other = copy.copy(self)
        other._text, other._numbers = self._text.copy(), self._numbers.copy()
        other._cursor = self._cursor.copy(on_value=other._use)
        other._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        other._decoder.setstate(self._decoder.getstate())
        # A value in progress ends first; it is not the one looked ahead for.
        other._ahead_of = self.ended + (self._cursor.number or self._cursor.in_string_value)
        return other

    @property
    def depth(self) -> int:
        """How many JSON objects and arrays are open."""
        return self._cursor.depth

    def value_ended(self, depth: int) -> bool:
        """In a fork: whether a new value has ended at `depth` since it was forked."""
        c = self._cursor
        return c.depth == depth and (self.ended > self._ahead_of or c.after_value)

    @property
    def may_end_nested(self) -> bool:
        """Whether the next token may end a nested object after a value (or add a field).

        True right after a value, and while a number or string value is written
        (one token may end it and go on: `","`).
        """
        c = self._cursor
        return c.depth >= 2 and c.in_object and (c.may_close or c.in_string_value)

    def adds_field(self, piece: str) -> bool:
        """Whether a token adds another field to a nested object that could end here instead."""
        if not self.may_end_nested:
            return False
        rest = self._cursor.rest(piece)
        return rest is not None and rest.startswith(",")

    def closer(self, logits: Logits, piece: str) -> int | None:
        """The likeliest allowed token that writes what `piece` adds to the value in progress,
        then only closes (the innermost object, and maybe more: `}}`, `}]}`); `None` if none
        is among the likeliest."""
        c = self._cursor
        parts = c.split(piece)
        if parts is None:
            return None
        n = logits.shape[0]
        k = min(_CANDIDATES, n)
        top = np.argpartition(logits, n - k)[n - k :].tolist()
        for t in sorted(top, key=lambda t: -logits[t]):
            other = c.split(self._piece(t)) if np.isfinite(logits[t]) else None
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
        ("detailed" for "in detail"); `true`, `false` or `null` needs the key
        to be mentioned (`avoid_tolls`: "toll roads avoided"). A nested object
        or array, or text this cannot read, is let through.
        """
        rest = self._cursor.rest(text)
        if rest is None:
            return True
        field = _FIELD.match(rest)
        if field is None:
            return True
        rest = rest[field.end() :]
        if rest.startswith('"'):
            string = _STRING.match(rest)
            if string is None:
                return False
            value = string.group(1)
            return self._text.match(value, True) or said(value, self._text.source)
        if rest[:1] in _NUMBER_START:
            number = _NUMBER_VALUE.match(rest)
            return number is not None and self._numbers.match(number.group(), True)
        if rest[:1] in "tfn":
            return self._mention(field.group(1)) != 0
        return True

    def starts_number(self, piece: str) -> bool:
        """Whether a token starts a number in a tool's input while a percentage of the
        messages is still free, for a field that does not take percentages as written."""
        c = self._cursor
        return (
            bool(self._copy)
            and c.depth >= 2
            and c.at_literal
            and piece[:1] in _NUMBER_START
            and c.key not in self._percent_keys
            and any(self._numbers.is_free(at) for at in self._percents)
        )

    def starts_string(self) -> bool:
        """Whether the next token is the first of a string value in a tool's input."""
        c = self._cursor
        return c.depth >= 2 and c.in_object and c.in_string_value and c.value == ""

    def fraction(self, text: str) -> str | None:
        """The fraction to write instead of the number that `text` starts with, if the
        messages give that number only as a percentage ("5%": "0.05"); else `None`.

        The occurrence is then taken, as if copied.
        """
        number = _NUMBER_VALUE.match(text)
        if number is None:
            return None
        found = self._numbers.free(number.group())
        if not found or not set(found) <= self._percents:
            return None
        self._numbers.take(found[0])
        return _fraction(number.group())

    def _mention(self, key: str) -> int:
        found = self._mentions.get(key)
        if found is None:
            found = self._mentions[key] = mention(key, self._text.source)
        return found

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
            # Once a value is under way as a span, leaving the span costs what copying gains.
            spans = self._numbers if cursor.number else self._text
            stay = bool(cursor.value) and spans.match(cursor.value or "", False)
            for token, piece in pieces.items():
                hit = cursor.candidate(piece)
                if hit is not None and (self._numbers if hit[2] else self._text).match(hit[0], hit[1]):
                    logits[token] += self._copy
                elif stay:
                    logits[token] -= self._copy
            if cursor.at_literal and (told := self._mention(cursor.key)):
                literal = "true" if told > 0 else "false"
                for token, piece in pieces.items():
                    if literal.startswith(piece) or piece.startswith(literal):
                        logits[token] += self._copy
        if self._close and cursor.may_close and pieces:
            # A number may always go on: only once the model ends it, lean to ending the object too.
            best = max(pieces, key=lambda t: logits[t])
            if not cursor.number or pieces[best][0] not in _NUMBER:
                for token, piece in pieces.items():
                    if cursor.closes(piece):
                        logits[token] += self._close
        return logits
