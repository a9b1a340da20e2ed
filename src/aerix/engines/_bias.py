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
  `"y": 4`), and a number whose every occurrence is taken gets `copy` taken
  off. Numbers match without thousands separators (`2000000` copies
  "$2,000,000") and as words up to twenty (`2` copies "two", and "twice"),
  but not right after a letter or a `^` (`2` is no span of "CO2" or "s^2").
  Once a value is under way as a span, the other tokens get `copy` taken
  off: leaving a span costs what copying gains ("Liverpool", not "Liverly";
  `5000`, not `500`). A boolean whose key the messages mention
  (`avoid_tolls`: "toll roads avoided") is nudged towards `true`, or `false`
  after a negation. A number the messages give only as a percentage is
  written as its fraction, one given in millions as the whole number
  (`starts_number`, `scaled`: the engine decodes it ahead), unless the field
  takes that scale (`kept_scales`); a date in the format its field asks for
  (`starts_date`, `dated`). A number named for a field ("a weight of 70
  kg", "a 7 days trip") gets `copy` once more in that field, and none in a
  sibling number field (`near`); a string field next to number fields gets
  none for a number ("from_unit": "pounds", not "2").
- **close**: right after a value inside an object that may end there (the
  schema allows `}`: every field left is optional), the closing tokens get
  `close` added, so optional fields are written only when the model is sure
  of them.

Keys and punctuation are otherwise left alone, and the model still chooses
among the nudged tokens: a bias breaks near-ties, it does not dictate.

The engine's check of optional fields uses the same state: `fork` copies it
to decode a field ahead, `supports` judges that field's value against the
messages, `closer` finds the token that ends the object instead, and
`suggest` offers an optional field the messages name before the object ends.
"""

from __future__ import annotations

import codecs
import copy
import json
import re
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from decimal import Decimal

import numpy as np
import numpy.typing as npt

from ._dates import find_dates

__all__ = ["JsonCursor", "Spans", "ValueBias", "kept_scales", "near", "takes_percent"]

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
_KEY_NOUNS = frozenset({"name", "type", "value", "values", "number", "num", "info", "data", "level"})
"""Words of a field's name that say what kind of value it is, not which one (`hotel_name`)."""
_AFTER = 3
"""How many words after a mention of a field's name a value of that field may start."""
_BEFORE = 1
"""How many words before a mention of a field's name a value of that field may start."""
_CLAUSE_BREAK = re.compile(r"[,.;:!?()\n]")
_CONJUNCTIONS = frozenset({"and", "or", "but"})
_SOURCE_WORD = re.compile(r"\d+(?:\.\d+)?|[^\W\d_]+")
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
} | {"twice": "2", "thrice": "3"}
_VALUE_WORD = re.compile(r"[^\W_]+")
_SPELLED = re.compile(r"\b(?:" + "|".join(_NUMBER_WORDS) + r")\b", re.IGNORECASE)
"""A number written as a word ("two"), from zero to twenty, or as "twice" or "thrice"."""
_SCALED = re.compile(
    r"(?<![\w.])-?\d+(?:\.\d+)?(?=\s?(%|percent\b|per cent\b|thousand\b|million\b|billion\b|trillion\b))",
    re.IGNORECASE,
)
"""A number the messages give with a scale: "5%", "2.5 percent", "213 million"."""
_EXPONENTS = {
    "%": -2,
    "percent": -2,
    "per cent": -2,
    "thousand": 3,
    "million": 6,
    "billion": 9,
    "trillion": 12,
}
"""The power of ten each scale means."""
_PERCENT_FIELD = re.compile(r"percent|\bpct\b|per cent")
_FRACTION_FIELD = re.compile(r"decimal|fraction")
_SCALE_FIELD = re.compile(r"thousand|million|billion|trillion")


def takes_percent(key: str, description: str = "") -> bool:
    """Whether a number field takes a percentage as written (5 for "5%"), by its name or
    description ("discount_pct", "as a percentage"), rather than the fraction it means."""
    text = f"{key.replace('_', ' ')} {description}".lower()
    return bool(_PERCENT_FIELD.search(text)) and not _FRACTION_FIELD.search(description.lower())


def kept_scales(key: str, description: str = "") -> frozenset[int]:
    """The scales, as powers of ten, in which a number field takes numbers as written:
    -2 if it takes percentages (`takes_percent`), 6 if its name or description says
    millions ("revenue in millions"), and so on for thousands, billions and trillions."""
    text = f"{key.replace('_', ' ')} {description}".lower()
    kept = {_EXPONENTS[m.group()] for m in _SCALE_FIELD.finditer(text)}
    return frozenset(kept | ({-2} if takes_percent(key, description) else set()))


def _scaled(number: str, exponent: int) -> str:
    """The number a scaled one means, as JSON: "5" at -2 → "0.05", "8.5" at 6 → "8500000"."""
    return format(Decimal(number).scaleb(exponent).normalize(), "f")


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


def mention(key: str, source: str, generic: Collection[str] = _FLAG_WORDS) -> int:
    """Whether `source` mentions what the flag `key` is about: 1, negated: -1, not at all: 0.

    A word of the key (`include_tolls`: "tolls") is mentioned where a word of
    `source` starts with its stem (its first letters, all but two, at least four).
    """
    source = source.lower()
    found = 0
    for word in {w.lower() for w in _WORD.findall(key)} - set(generic):
        if len(word) < 3:
            continue
        for hit in re.finditer(rf"\b{re.escape(_stem(word))}", source):
            if _NEGATION.search(source[: hit.start()]):
                return -1
            found = 1
    return found


def _key_words(key: str) -> set[str]:
    """The words of a field's name that a mention of it is found by (`daily_budget`: "daily",
    "budget"); none of `_KEY_NOUNS` or `_FLAG_WORDS`, none under three letters."""
    return {w.lower() for w in _WORD.findall(key) if len(w) >= 3} - _KEY_NOUNS - _FLAG_WORDS


def near(source: str, key: str, others: Collection[str]) -> tuple[frozenset[int], frozenset[int]]:
    """Where values of field `key` likely start in `source`, by where it names the fields.

    A field is named where a word of `source` starts with the stem of a word
    of its key that no sibling's key has ("weight of 70 kg": `weight`; "a 7
    days trip": `days`; "end city 2": `end_city`, not `start_city`). The
    `_AFTER` words after a name and the `_BEFORE` words before it are near
    that field, within one clause (no punctuation or "and" between), and
    belong to the nearest one among `key` and its siblings `others`.
    Returns the start offsets of the words nearest `key` (or tied), and of
    those nearer another field.
    """
    words = [(m.start(), m.group().lower()) for m in _SOURCE_WORD.finditer(source)]
    breaks = [0] * len(words)  # clause breaks before each word
    for i in range(1, len(words)):
        gap = source[words[i - 1][0] + len(words[i - 1][1]) : words[i][0]]
        breaks[i] = breaks[i - 1] + bool(_CLAUSE_BREAK.search(gap) or words[i][1] in _CONJUNCTIONS)
    far = _AFTER + _BEFORE + 1
    fields = {key, *others}
    named = {k: _key_words(k) for k in fields}

    def distances(k: str) -> list[int]:
        shared = set().union(*(named[o] for o in fields - {k}))
        stems = [_stem(w) for w in named[k] - shared]
        out = [far] * len(words)
        for j in [j for j, (_, w) in enumerate(words) if any(w.startswith(st) for st in stems)]:
            for i in range(max(0, j - _BEFORE), min(len(words), j + _AFTER + 1)):
                if i != j and breaks[i] == breaks[j] and words[i][1] not in _CONJUNCTIONS:
                    out[i] = min(out[i], abs(i - j))
        return out

    own = distances(key)
    rival = [far] * len(words)
    for other in set(others) - {key}:
        rival = [min(a, b) for a, b in zip(rival, distances(other), strict=True)]
    mine = frozenset(at for (at, _), d, r in zip(words, own, rival, strict=True) if d < far and d <= r)
    theirs = frozenset(at for (at, _), d, r in zip(words, own, rival, strict=True) if r < d)
    return mine, theirs


def _same_digits(written: str, given: str) -> bool:
    """Whether a written number is a given one at another power of ten: the same digits
    but for zeros at either end ("850000000" and "8.5"); an integer written, a number given."""

    def digits(n: str) -> str:
        return n.lstrip("-").replace(".", "").strip("0")

    return written.lstrip("-").isdigit() and bool(digits(given)) and digits(written) == digits(given)


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
        elif c in _NUMBER_START:
            self.number, self.value = True, c
        elif c in "{[":
            self._stack.append(c)
            self._keys.append([])
            self._expect_key = c == "{"
        elif c in "}]":
            if self._stack:
                self._stack.pop()
                self._keys.pop()
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
        return other

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
        if b == "0" and (a == "a" or s[i - 1] == "^"):
            return False  # "2" of "CO2" or of "m/s^2" is no number the user gave
        return not (a == b and a in "a0")

    def match(self, value: str, whole: bool) -> bool:
        """Whether `value` starts a span of the source (`whole`: is one).

        A span starts with a letter, a digit or a minus sign, and does not end with a blank.
        """
        if not value or not (value[0].isalnum() or value[0] == "-") or (whole and value[-1].isspace()):
            return False
        return self._find(value, whole) >= 0

    def where(self, value: str, whole: bool) -> list[int]:
        """Where `value` starts a free span of the source (`whole`: is one)."""
        return list(self._occurrences(value, whole))

    def free(self, value: str) -> list[int]:
        """Where `value` is a free whole span of the source."""
        return list(self._occurrences(value, whole=True))

    def taken(self, value: str, whole: bool) -> bool:
        """Whether `value` starts a span of the source (`whole`: is one) that a value has taken."""
        return next(self._occurrences(value, whole, taken=True), -1) >= 0

    def is_free(self, at: int) -> bool:
        """Whether the occurrence at `at` has not been taken."""
        return at not in self._used

    def take(self, at: int) -> None:
        """Take the occurrence at `at`: it is not offered again."""
        self._used.add(at)

    def _find(self, value: str, whole: bool) -> int:
        return next(self._occurrences(value, whole), -1)

    def _occurrences(self, value: str, whole: bool, taken: bool = False) -> Iterator[int]:
        s, i = self.source, self.source.find(value)
        while i >= 0:
            if (
                (i in self._used) is taken
                and self._boundary(i)
                and (not whole or self._boundary(i + len(value)))
            ):
                yield i
            i = s.find(value, i + 1)


class ValueBias:
    """One constrained generation's value biases.

    Args:
        source: The text values may be copied from (the user's messages).
        copy: Added to each likely token that keeps a value a span of `source`; 0: off.
            With it, a percentage of `source` copied into a number field is
            written as the fraction it means, a number of millions as the number
            (see `scaled`).
        close: Added to the tokens that close an object whose remaining fields are
            optional, right after a value; 0: off.
        piece: A token's text.
        kept_scales: The scales in which number fields take numbers as written, by
            key (`kept_scales`).
        siblings: The number fields of the object each field is in, by the field's key:
            a number named for one number field is not offered to another (`near`),
            and a string field next to number fields does not copy a number.
        date_formats: The `strftime` format of each string field that names one in
            its description (`date_format`), by key: a date of the messages is
            written in it (see `dated`).
        objects: The keys of each object of the schema, in order, with its required
            ones: an optional field the messages name is offered before the
            object closes (see `suggest`).
    """

    def __init__(
        self,
        source: str,
        *,
        copy: float,
        close: float,
        piece: Callable[[int], str],
        kept_scales: Mapping[str, Collection[int]] | None = None,
        siblings: Mapping[str, Collection[str]] | None = None,
        date_formats: Mapping[str, str] | None = None,
        objects: Sequence[tuple[Sequence[str], Collection[str]]] = (),
    ) -> None:
        self._text = Spans(source)
        # "$2,000,000" is the number 2000000, "two nights" the number 2.
        numbers = _SPELLED.sub(lambda m: _NUMBER_WORDS[m.group().lower()], _THOUSANDS.sub("", source))
        self._scales = {
            m.start(): (m.group(), _EXPONENTS[m.group(1).lower()]) for m in _SCALED.finditer(numbers)
        }
        """Where the numbers the messages give with a scale start: the number, and its power of ten."""
        # "213 million" is also the span 213000000, for a model that writes it whole.
        whole = [_scaled(*given) for given in self._scales.values()]
        self._numbers = Spans("\n".join([numbers, *(w for w in whole if "." not in w)]))
        self._kept = {key: frozenset(kept) for key, kept in (kept_scales or {}).items()}
        self._copy = np.float32(copy)
        self._close = np.float32(close)
        self._piece = piece
        self._cursor = JsonCursor(on_value=self._use)
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self.ended = 0
        """How many string or number values have ended so far."""
        self._ahead_of = 0
        self._mentions: dict[str, int] = {}
        self._siblings = siblings or {}
        self._date_formats = dict(date_formats or {})
        self._dates = find_dates(source) if self._date_formats else []
        self._near: dict[str, tuple[frozenset[int], frozenset[int]]] = {}
        self._objects = [(tuple(keys), frozenset(required)) for keys, required in objects]
        self._suggested: set[str] = set()

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
        other._suggested = set(self._suggested)
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
        ("detailed" for "in detail"), and not only words of the key
        ("method_used": "method"); `true`, `false` or `null` needs the key
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
            words = {w.lower() for w in _VALUE_WORD.findall(value)}
            if words and words <= {w.lower() for w in _WORD.findall(field.group(1))}:
                return False  # the field's own name ("method_used": "method") is no value
            return self._text.match(value, True) or said(value, self._text.source)
        if rest[:1] in _NUMBER_START:
            number = _NUMBER_VALUE.match(rest)
            return number is not None and self._numbers.match(number.group(), True)
        if rest[:1] in "tfn":
            return self._mention(field.group(1)) != 0
        return True

    def starts_number(self, piece: str) -> bool:
        """Whether a token starts a number in a tool's input while a number the messages
        give with a scale ("5%", "213 million") is still free, in a scale that the field
        does not take as written."""
        c = self._cursor
        kept = self._kept.get(c.key, frozenset())
        return (
            bool(self._copy)
            and c.depth >= 2
            and c.at_literal
            and piece[:1] in _NUMBER_START
            and any(self._numbers.is_free(at) and e not in kept for at, (_, e) in self._scales.items())
        )

    def starts_string(self) -> bool:
        """Whether the next token is the first of a string value in a tool's input."""
        c = self._cursor
        return c.depth >= 2 and c.in_object and c.in_string_value and c.value == ""

    def suggest(self, piece: str) -> str | None:
        """What to write instead of `piece` when it closes an object in a tool's input
        that has an optional field not written yet whose key the messages name
        ("consider_terrain": "accounting for terrain"): the rest of the value in
        progress, then that field's key (`,"consider_terrain":`); else `None`. Each
        key is offered once; the engine keeps the field only if the messages
        support its value (`supports`).
        """
        c = self._cursor
        if not self._objects or c.depth < 2 or not c.closes(piece):
            return None
        written = set(c.written)
        for keys, required in self._objects:
            if not written <= set(keys) or not required <= written:
                continue
            for key in keys:
                if key not in written and key not in self._suggested and self._named_key(key) > 0:
                    self._suggested.add(key)
                    value = c.split(piece)
                    return ("" if value is None else value[0]) + "," + json.dumps(key) + ":"
        return None

    def _named_key(self, key: str) -> int:
        return mention(key, self._text.source, _FLAG_WORDS | _KEY_NOUNS)

    def starts_date(self) -> bool:
        """Whether the next token is the first of a string value in a tool's input, for a
        field that asks for dates in a format, while a date of the messages is still free."""
        return (
            bool(self._copy)
            and self.starts_string()
            and self._cursor.key in self._date_formats
            and any(self._text.is_free(d.start) for d in self._dates)
        )

    def dated(self, text: str) -> str | None:
        """The date to write instead of the string value that `text` starts (after its
        opening quote), in the field's format, if that value gives a free date of the
        messages as they wrote it ("March 11, 2022"), as a date ("2022-03-11" for
        "March 11, 2022"), or in part ("2022"); else `None`, also when the value is the
        date in the format already. A value with no closing quote (the look-ahead
        stopped first) is read as far as it goes. The date's occurrence is then taken,
        and the numbers in it.
        """
        fmt = self._date_formats.get(self._cursor.key)
        if fmt is None:
            return None
        string = _STRING.match('"' + text)
        value = text if string is None else string.group(1)  # no end: cut short by the look-ahead
        written = {d.date for d in find_dates(value)}
        part = value.strip()
        for d in self._dates:
            said = self._text.source[d.start : d.end]
            if self._text.is_free(d.start) and (
                said in value or d.date in written or (part and part in said)
            ):
                day = d.date.strftime(fmt)
                if day == value:
                    return None  # copied as it is
                self._text.take(d.start)
                for number in re.findall(r"\d+", said):  # its day and year are taken too
                    self._numbers.use(number)
                return day
        return None

    def scaled(self, text: str) -> str | None:
        """The number to write instead of the one that `text` starts with, if the messages
        give that number only with a scale that the field does not take as written
        ("5%": "0.05", "213 million": "213000000"), with the character after it in
        `text` (`,` or `}`: the number ends there); else `None`. A number given in
        thousands or more also counts when written with zeros of the model's own
        ("850000000" for "8.5 million").

        The occurrence is then taken, as if copied.
        """
        number = _NUMBER_VALUE.match(text)
        if number is None:
            return None
        written = number.group()
        kept = self._kept.get(self._cursor.key, ())
        found = self._numbers.free(written)
        if not found:  # millions not copied as given, but with zeros of the model's own ("850000000")
            found = [
                at
                for at, (given, exponent) in self._scales.items()
                if exponent > 0 and self._numbers.is_free(at) and _same_digits(written, given)
            ]
        scales = {self._scales.get(at) for at in found}
        scale = scales.pop() if len(scales) == 1 else None
        if scale is None or scale[1] in kept:
            return None
        self._numbers.take(found[0])
        return _scaled(*scale) + text[number.end()]  # and the character that ends it, as the model wrote

    def _named(self, key: str, value: str, whole: bool) -> int:
        """1 if the number span `value` starts near a mention of field `key` in the
        messages, -1 if only near its sibling number fields' (`near`), else 0."""
        others = self._siblings.get(key)
        if not others:
            return 0
        found = self._near.get(key)
        if found is None:
            found = self._near[key] = near(self._numbers.source, key, others)
        mine, theirs = found
        source = self._numbers.source
        starts = [at + (source[at] == "-") for at in self._numbers.where(value, whole)]
        if any(at in mine for at in starts):
            return 1
        return -1 if starts and all(at in theirs for at in starts) else 0

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
            # A number belongs in a number field: a string field next to one does not copy it.
            bare = cursor.in_string_value and bool(self._siblings.get(cursor.key))
            for token, piece in pieces.items():
                hit = cursor.candidate(piece)
                if bare and hit is not None and hit[0].isdigit():
                    continue
                if hit is not None and (self._numbers if hit[2] else self._text).match(hit[0], hit[1]):
                    named = self._named(cursor.key, hit[0], hit[1]) if hit[2] else 0
                    logits[token] += self._copy * (1 + named)
                elif stay:
                    logits[token] -= self._copy
                elif hit is not None and hit[2] and self._numbers.taken(hit[0], hit[1]):
                    logits[token] -= self._copy  # a number given once is not written twice
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
