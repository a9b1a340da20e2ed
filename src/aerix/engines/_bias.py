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
from collections.abc import Callable, Collection, Mapping, Sequence

import numpy as np
import numpy.typing as npt

from ._dates import find_dates
from ._json_cursor import NUMBER_CHARS, NUMBER_START, JsonCursor
from ._spans import (
    Spans,
    mention,
    named,
    near,
    number_text,
    own_name,
    said,
    same_digits,
    scaled_number,
    scales,
)

__all__ = ["ValueBias"]

Logits = npt.NDArray[np.float32]

_NUMBER = frozenset(NUMBER_CHARS)
_CANDIDATES = 32
"""How many of the likeliest allowed tokens are looked at per step."""
_FIELD = re.compile(r',"((?:[^"\\]|\\.)*)":')
"""The start of another field in compact JSON: `,"key":`."""
_STRING = re.compile(r'"((?:[^"\\]|\\.)*)"')
_NUMBER_VALUE = re.compile(r"-?[0-9][0-9.eE+-]*(?=[,}\]])")


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
        numbers = number_text(source)
        self._scales = scales(numbers)
        """Where the numbers the messages give with a scale start: the number, and its power of ten."""
        # "213 million" is also the span 213000000, for a model that writes it whole.
        whole = [scaled_number(*given) for given in self._scales.values()]
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
            if own_name(value, field.group(1)):
                return False  # "method_used": "method" is no value
            return self._text.match(value, True) or said(value, self._text.source)
        if rest[:1] in NUMBER_START:
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
            and piece[:1] in NUMBER_START
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
                if key not in written and key not in self._suggested and named(key, self._text.source) > 0:
                    self._suggested.add(key)
                    value = c.split(piece)
                    return ("" if value is None else value[0]) + "," + json.dumps(key) + ":"
        return None

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
            given = self._text.source[d.start : d.end]
            if self._text.is_free(d.start) and (
                given in value or d.date in written or (part and part in given)
            ):
                day = d.date.strftime(fmt)
                if day == value:
                    return None  # copied as it is
                self._text.take(d.start)
                for number in re.findall(r"\d+", given):  # its day and year are taken too
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
                if exponent > 0 and self._numbers.is_free(at) and same_digits(written, given)
            ]
        given = {self._scales.get(at) for at in found}
        scale = given.pop() if len(given) == 1 else None
        if scale is None or scale[1] in kept:
            return None
        self._numbers.take(found[0])
        return scaled_number(*scale) + text[number.end()]  # ends where the model's number ended

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
            bare = cursor.in_string_value and bool(self._siblings.get(cursor.key))
            for token, piece in pieces.items():
                hit = cursor.candidate(piece)
                if hit is not None and not hit[2] and _uncopied(hit[0], cursor.key, bare):
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


def _uncopied(value: str, key: str, bare: bool) -> bool:
    """Whether a string value gets no copy bias: a number, in a field next to number fields
    (`bare`: numbers go to number fields), or the field's own name ("slope_type": "slope")."""
    return (bare and value.isdigit()) or own_name(value, key)
