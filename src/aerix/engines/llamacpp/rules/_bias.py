"""Value biases: nudge JSON values towards the user's own words, and optional fields out.

A small model under a JSON schema writes the right shape but often the wrong
values: `1000` where the user wrote `5000`, an optional `"unit": "kg"` that
the user never asked for. Two nudges on the logits, both applied only to the
likeliest tokens the schema allows, address that:

- **copy**: while the model writes a string or number value, each token that
  keeps the value a span of the user's messages gets `copy` added to its
  logit. A span starts and ends at word boundaries (never inside a word or a
  number) and starts with a letter, a digit or a minus sign; a token that
  closes the value is nudged only when the value is a whole span (closing an
  empty string costs `copy`: an empty value copies nothing). Each
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
  after a negation. With `convert_values` (off by default: these write a
  value the model did not choose), a number the messages give only as a
  percentage is written as its fraction, one given in millions as the whole
  number (`starts_number`, `scaled`: the engine decodes it ahead), unless the
  field takes that scale (`kept_scales`); a date in the format its field asks
  for (`starts_date`, `dated`), and a quantity in the unit its field asks for
  ("5ft 10in": 70 in inches; `_units`). A number named for a field ("a
  weight of 70 kg", "a 7 days trip") gets `copy` once more in that field,
  and none in a sibling number field (`near`); a string field next to
  number fields gets none for a number ("from_unit": "pounds", not "2").
  Fields of a series (`mass1`, `mass2`) take the values in order (`_first`,
  `_earliest`); a string the model would end short of its name or phrase
  goes on ("Louvre Museum", `_cut_short`); a copied text is taken whole,
  with its numbers; a span that runs on into a date, or made only of words
  of the tool's name, gets none.
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

from .._sampling import top_tokens
from ._dates import find_dates
from ._json_cursor import NUMBER_CHARS, NUMBER_START, JsonCursor
from ._site import CallSite
from ._spans import (
    Spans,
    cut_short,
    in_series,
    is_function_word,
    mention,
    name_runs,
    named,
    near,
    number_text,
    own_name,
    said,
    scaled_number,
    scales,
    spelled,
)
from ._spans import quoted as quoted_spans
from ._tools import written_call
from ._units import Unit, quantities
from ._written import WrittenValues

__all__ = ["ValueBias"]

Logits = npt.NDArray[np.float32]

_NUMBER = frozenset(NUMBER_CHARS)
_CANDIDATES = 32
"""How many of the likeliest allowed tokens are looked at per step."""
_FIELD = re.compile(r',"((?:[^"\\]|\\.)*)":')
"""The start of another field in compact JSON: `,"key":`."""
_STRING = re.compile(r'"((?:[^"\\]|\\.)*)"')
_DIGITS = re.compile(r"(?<![\w^.])\d+(?:\.\d+)?")
"""A number inside a string value, not right after a letter or a `^` ("2x^2": the first 2)."""
_NUMBER_SPAN = re.compile(r"-?\d+(?:\.\d+)?")
_SERIES_WORD = re.compile(r"[^\W_]{2}")
"""The start of a word a series field's value may be ordered by: two letters or digits."""
_NUMBER_VALUE = re.compile(r"-?[0-9][0-9.eE+-]*(?=[,}\]])")
_PLACEHOLDER = re.compile(r"<[A-Za-z][^<>\n]{0,78}>")
"""Words in angle brackets: a letter and a few words (`<city name>`, `<city name here>`)."""
_HEAD = re.compile(r"<[^\W_]+")


def _head(placeholder: str) -> str:
    """How a placeholder opens: `<` and its first word (`<city` for `<city name>`)."""
    found = _HEAD.match(placeholder)
    return found.group() if found else placeholder


class ValueBias(WrittenValues):
    """One constrained generation's value biases.

    Args:
        source: The text values may be copied from (the user's messages).
        copy: Added to each likely token that keeps a value a span of `source`; 0: off.
            With it and `convert_values`, a percentage of `source` copied into a
            number field is written as the fraction it means, a number of millions
            as the number (see `scaled`).
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
        units: The unit each number field asks for (`field_unit`), and whether it is an
            integer field, by key: a quantity of the messages in another unit of
            the same kind is written converted (see `scaled`).
        series: The string fields that are one of a series (`in_series`): they take
            the values in the order the messages give them.
        constants: The string constants of the schema (a tool's name): a string made
            only of their words is no value.
        constant_keys: The keys of the fields that are such a constant (`tool`).
        enums: The keys of the string fields that take an enum's values: their values copy
            the messages in any case ("Celsius" for `"celsius"`), since the enum, not the
            user, fixes how a value is written.
        tools: The tools a call may name, by name, each as the fit score reads it
            (`tool_texts`): the `ToolPick` hook nudges the name towards those that fit.
        request: The user's request when this generation writes the first turn that
            answers it (`aerix.model.Handover`), else `None`: only that turn's tool is picked.
        made: The calls the turns for the request wrote already (`call_key`s): the
            `NewCalls` hook leans a later turn's tool name away from writing one again.
        quoted: What the user put in quotes (`quoted_values`): a string value in a tool's
            input that copies one of them, from its start, gets the copy bias once more
            (its closing quote only where the whole quoted value is written), even one
            made only of words of its field's name (`'password'` for `password`).
        placeholders: The placeholders of the system message (`Handover.placeholders`): a
            string value that copies one is no value (`copies_placeholder`).
        site: Where a call's tool name and input sit (`CallSite`): the tool pick and the
            rules of a tool's input act there.
        convert_values: Turn on the rules that write a value in a form the user did not
            write it in (`scaled`, `dated`: a percentage as its fraction, millions whole,
            a quantity in its field's unit, "11 PM" as 23, a date in its field's format),
            and read "quarterly" as 4 or "213 million" as 213000000 for the copy bias.
            Off: the rules only nudge towards the user's own words.
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
        units: Mapping[str, tuple[Unit, bool]] | None = None,
        series: Collection[str] = (),
        constants: Collection[str] = (),
        constant_keys: Collection[str] = (),
        enums: Collection[str] = (),
        tools: Mapping[str, str] | None = None,
        request: str | None = None,
        made: Collection[str] = (),
        quoted: Collection[str] = (),
        placeholders: Collection[str] = (),
        site: CallSite | None = None,
        convert_values: bool = False,
    ) -> None:
        self._convert = convert_values
        self._site = site or CallSite()
        self._text = Spans(source)
        self._quoted = quoted_spans(source, frozenset(quoted)) if quoted else {}
        """Where a value the user put in quotes starts in `source`, with its end."""
        self._enums = frozenset(enums)
        self._lowered = Spans(source.lower()) if self._enums else self._text
        """The messages in lower case: what an enum's value copies."""
        numbers = number_text(source, times_a_year=convert_values)
        self._scales = scales(numbers)
        """Where the numbers the messages give with a scale start: the number, and its power of ten."""
        # "213 million" is also the span 213000000, for a model that writes it whole (a conversion).
        whole = [scaled_number(*given) for given in self._scales.values()] if convert_values else []
        self._numbers = Spans("\n".join([numbers, *(w for w in whole if "." not in w)]))
        words = spelled(source, times_a_year=convert_values)
        self._number_starts = [
            m.start()
            for m in _NUMBER_SPAN.finditer(numbers)
            if m.start() not in words and m.start() in self._numbers.free(m.group())
        ]
        """Where the numbers the messages write in digits start, in order."""
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
        self._dates = find_dates(source)
        self._near: dict[str, tuple[frozenset[int], frozenset[int]]] = {}
        self._objects = [(tuple(keys), frozenset(required)) for keys, required in objects]
        self._suggested: set[str] = set()
        self._sealed = False
        """Whether the number in progress was written instead of the model's (`seal`)."""
        self._last_number = -1
        """Where the latest number the values took starts in the messages' numbers."""
        self._units = dict(units or {})
        self._names = name_runs(source)
        self._series = frozenset(series)
        self._constants = tuple(constants)
        self._constant_keys = frozenset(constant_keys)
        self._quantities = quantities(numbers) if self._units and convert_values else []
        self.tools = dict(tools or {})
        """The tools a call may name, by name: `"name(fields)"`."""
        self.request = request
        """The request whose first turn this is, or `None`."""
        self.tool_fits: dict[str, float] | None = None
        """How well each tool fits `request` (the `ToolPick` hook's, once it has scored them)."""
        self.made = frozenset(made)
        """The calls the turns for the request wrote already (`call_key`s)."""
        self.placeholders = tuple(placeholders)
        """The system message's placeholders (`<city name>`): no value copies one."""
        self._placeholder_heads = frozenset(_head(p) for p in self.placeholders)
        """How each placeholder opens: `<` and its first word (`<city`)."""

    def feed(self, data: bytes) -> None:
        """Advance over the bytes of generated (sampled or forced) tokens."""
        self._cursor.feed(self._decoder.decode(data))

    def _use(self, value: str, number: bool) -> None:
        if not number and self._text.match(value, True):
            for digits in _DIGITS.findall(value):  # "2x^2" copied takes the 2 that the user gave
                self._numbers.use(digits)
        at = (self._numbers if number else self._text).use(value)
        if number and at >= 0:
            self._last_number = max(self._last_number, at)
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
    def names_tool(self) -> bool:
        """Whether the next token writes a call's tool name, with two or more tools to name."""
        c = self._cursor
        at_name = self._site.at_tool(c) and (c.in_string_value or c.at_literal)
        return at_name and len(self.tools) > 1

    def may_copy_placeholder(self, piece: str) -> bool:
        """Whether a token, first of a string value, keeps it on the way to a placeholder's
        opening (`<`, `<city`): a value to read ahead (`copies_placeholder`)."""
        hit = self._cursor.candidate(piece)
        if hit is None or hit[2] or not hit[0]:
            return False
        value = hit[0]
        return any(h.startswith(value) or value.startswith(h) for h in self._placeholder_heads)

    def copies_placeholder(self, text: str) -> bool:
        """Whether a string value's text (from its first character; what follows it may come
        after) begins with a placeholder, or with words in angle brackets that open as one
        does (`<city name here>` for `<city name>`)."""
        found = _PLACEHOLDER.match(text)
        return found is not None and _head(found.group()) in self._placeholder_heads

    @property
    def picks_tool(self) -> bool:
        """Whether the next token writes a call's tool name in the first turn for a request,
        with two or more tools to name."""
        return self.request is not None and self.names_tool

    @property
    def names_again(self) -> bool:
        """Whether the next token writes a call's tool name in a later turn for a request (one
        after calls), with two or more tools to name."""
        return bool(self.made) and self.names_tool

    def tools_named(self, piece: str) -> list[str]:
        """The tools whose name a token keeps the call's tool name on the way to, or ends it
        as; `[]` where no tool name is written."""
        if not self.names_tool:
            return []
        found = self._cursor.candidate(piece)
        if found is None or found[2]:
            return []
        value, ended, _ = found
        return [n for n in self.tools if (n == value if ended else n.startswith(value))]

    def call_written(self, text: str) -> str | None:
        """The call (`call_key`) that the tool name in progress and `text` after it write,
        where `text` runs to the end of the call's object; `None` if it is not a whole call."""
        c, key = self._cursor, self._site.input_key
        if key is None:
            return None
        if c.in_string_value:
            return written_call((c.value or "") + text, key)
        return written_call(text[1:], key) if text.startswith('"') else None

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
        return self._site.in_call(c) and c.in_object and (c.may_close or c.in_string_value)

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
        for t in sorted(top_tokens(logits, _CANDIDATES).tolist(), key=lambda t: -logits[t]):
            other = c.split(self._piece(t))
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
            if own_name(value, field.group(1), *self._constants):
                return False  # "method_used": "method" is no value
            return self._text.match(value, True) or said(value, self._text.source)
        if rest[:1] in NUMBER_START:
            number = _NUMBER_VALUE.match(rest)
            if number is None:
                return False
            starts = self._numbers.where(number.group(), True)
            if in_series(field.group(1), self._siblings.get(field.group(1), ())):
                starts = [at for at in starts if at > self._last_number]  # a series in order
            return bool(starts)
        if rest[:1] in "tfn":
            return self._mention(field.group(1)) != 0
        return True

    def suggest(self, piece: str) -> str | None:
        """What to write instead of `piece` when it closes an object in a tool's input
        that has an optional field not written yet whose key the messages name
        ("consider_terrain": "accounting for terrain"): the rest of the value in
        progress, then that field's key (`,"consider_terrain":`); else `None`. Each
        key is offered once; the engine keeps the field only if the messages
        support its value (`supports`).
        """
        c = self._cursor
        if not self._objects or not self._site.in_call(c) or not c.closes(piece):
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

    def _named(self, key: str, value: str, whole: bool) -> int:
        """1 if the number span `value` starts near a mention of field `key` in the
        messages, -1 if only near its sibling number fields' (`near`), else 0."""
        others = self._siblings.get(key)
        if not others:
            return 0
        mine, theirs = self._near_fields(key)
        source = self._numbers.source
        starts = [at + (source[at] == "-") for at in self._numbers.where(value, whole)]
        if any(at in mine for at in starts):
            return 1
        return -1 if starts and all(at in theirs for at in starts) else 0

    def _near_fields(self, key: str) -> tuple[frozenset[int], frozenset[int]]:
        found = self._near.get(key)
        if found is None:
            found = self._near[key] = near(self._numbers.source, key, self._siblings.get(key, ()))
        return found

    def _first(self, key: str, value: str, whole: bool) -> int:
        """1 if the number span `value` starts at the first free number the messages write in
        digits, in a number field of a series (`in_series`): they take the numbers in
        order ("36 and 24": `"number1": 36`), unless the messages name the fields
        (`near`); else 0."""
        if not in_series(key, self._siblings.get(key, ())):
            return 0
        free = [at for at in self._number_starts if self._numbers.is_free(at)]
        mine, theirs = self._near_fields(key)
        if not free or free[0] in theirs or any(at in mine for at in free):
            return 0  # the messages name the fields: names, not order
        return int(free[0] in self._numbers.where(value, whole))

    def _earliest(self, pieces: Mapping[int, str]) -> int | None:
        """Where the earliest free span of the messages starts that one of `pieces` would start
        a string value with (a whole word of two letters or more, no function word), for a field
        of a series (`in_series`): its fields take the values in the order given."""
        starts = []
        for piece in pieces.values():
            hit = self._cursor.candidate(piece)
            if hit is None or hit[2] or not _SERIES_WORD.match(hit[0]) or is_function_word(hit[0]):
                continue
            starts += self._text.where(hit[0], True)  # a whole word: "Ma" could start anything
        return min(starts, default=None)

    def _cut_short(self, value: str, piece: str) -> frozenset[int]:
        """Where the string `value` starts as a whole span of the messages that stops short of
        the name or phrase it is in (`cut_short`), if the model's likeliest token `piece`
        would end the value there or leave the span ("Louvre" of "Louvre Museum",
        "plasma_" of "plasma membrane"); else nothing."""
        hit = self._cursor.candidate(piece)
        if hit is None or hit[2]:
            return frozenset()
        ends = hit[1] and hit[0] == value
        if not ends and self._text.match(hit[0], hit[1]):
            return frozenset()  # the model goes on with the span itself
        source = self._text.source
        spans = self._text.where(value, True)
        return frozenset(at for at in spans if cut_short(source, self._names, at, at + len(value)))

    def _into_date(self, value: str, starts: Collection[int]) -> bool:
        """Whether the string span `value`, where it starts at `starts`, runs on into a date
        of the messages, in a field that asks for no date format ("London 2022/08/16": the
        date is no part of a place)."""
        if self._cursor.key in self._date_formats:
            return False
        return any(at < d.start <= at + len(value) for at in starts for d in self._dates)

    def _uncopied(self, value: str, key: str, bare: bool, quoted: int) -> bool:
        """Whether a string value gets no copy bias: a number, in a field next to number
        fields (`bare`: numbers go to number fields), or made only of words of the
        field's own name ("slope_type": "slope") or of a constant of the schema, such as
        the tool's name ("team": "NFL" for `nfl_data.player_record`), except in a field
        that is such a constant itself (`tool`: the name is chosen as it always was), or
        where the user put the value in quotes (`quoted`: "the password is 'password'")."""
        names = () if key in self._constant_keys else self._constants
        return (bare and value.isdigit()) or (not quoted and own_name(value, key, *names))

    def _in_quotes(self, value: str, whole: bool, starts: Collection[int]) -> int:
        """1 if a string value of a tool's input copies, from its start at one of `starts`
        (free spans), a value the user put in quotes (`whole`: all of it); else 0. Not in
        a field that is a constant of the schema (the tool's name) nor in the turn's own
        fields (a final)."""
        c = self._cursor
        if not self._quoted or not self._site.in_call(c) or c.key in self._constant_keys:
            return 0
        ends = [self._quoted.get(at, -1) - at for at in starts]
        return int(any(len(value) == end if whole else 0 < len(value) <= end for end in ends))

    def _copies(self, value: str, whole: bool, key: str) -> bool:
        """Whether the string `value` starts a span of the messages (`whole`: is one); in any
        case for a field that takes an enum's values (`enums`)."""
        return self._text.match(value, whole) or self._copies_enum(value, whole, key)

    def _copies_enum(self, value: str, whole: bool, key: str) -> bool:
        """Whether a field that takes an enum's values has `value` start one of the messages'
        spans in any case ("burger" for `"BURGER"`)."""
        return key in self._enums and self._lowered.match(value.lower(), whole)

    def _copied(self, value: str, whole: bool, key: str) -> tuple[bool, list[int]]:
        """`_copies` of a string value, and where it starts a free span of the messages
        if it copies (else nothing): the same answers, from one search of the messages."""
        starts = self._text.where(value, whole)
        if (Spans.starts_span(value, whole) and starts) or self._copies_enum(value, whole, key):
            return True, starts
        return False, []

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
        self._sealed = self._sealed and cursor.number
        if self._sealed:  # a number written instead of the model's ends there: "0.05", not "0.050"
            for token in np.flatnonzero(np.isfinite(logits)).tolist():
                if self._piece(token)[:1] in _NUMBER:
                    logits[token] = -np.inf
        pieces = {t: p for t in top_tokens(logits, _CANDIDATES).tolist() if (p := self._piece(t))}
        if self._copy:
            # Once a value is under way as a span, leaving the span costs what copying gains.
            so_far = cursor.value or ""
            if cursor.number:
                stay = bool(so_far) and self._numbers.match(so_far, False)
            else:
                stay = bool(so_far) and self._copies(so_far, False, cursor.key)
            bare = cursor.in_string_value and bool(self._siblings.get(cursor.key))
            # A string the model would end short of its name or phrase goes on ("Louvre Museum"),
            # and a series of string fields takes its values in order ("human", then "chimp").
            short = frozenset[int]()
            if cursor.in_string_value and cursor.value and pieces:
                short = self._cut_short(cursor.value, pieces[max(pieces, key=lambda t: logits[t])])
            earliest = self._earliest(pieces) if cursor.key in self._series and not cursor.value else None
            for token, piece in pieces.items():
                hit = cursor.candidate(piece)
                if hit is None:
                    if stay:
                        logits[token] -= self._copy
                    continue
                value, whole, number = hit
                if whole and not value and not number:
                    logits[token] -= self._copy  # an empty string copies nothing
                    continue
                starts: list[int] = []
                if number:
                    copies = self._numbers.match(value, whole)
                else:
                    copies, starts = self._copied(value, whole, cursor.key)
                quoted = self._in_quotes(value, whole, starts)
                if not number and self._uncopied(value, cursor.key, bare, quoted):
                    continue
                if copies and (number or not self._into_date(value, starts)):
                    if number:
                        more = self._named(cursor.key, value, whole) + self._first(cursor.key, value, whole)
                    else:
                        more = int(value != cursor.value and any(at in short for at in starts))
                        more += int(earliest in starts) + quoted
                    logits[token] += self._copy * (1 + more)
                elif stay:
                    logits[token] -= self._copy
                elif number and self._numbers.taken(value, whole):
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
