"""`ValueBias`: one generation's value rules, and the reading they share.

A small model under a JSON schema writes the right shape but often the wrong
values: `1000` where the user wrote `5000`, an optional `"unit": "kg"` that
the user never asked for. The value rules nudge the logits of the likeliest
tokens the schema allows (`ValueRule`, run in order at each step):

- the heuristics (`heuristics.HEURISTICS`), each on unless turned off by name,
  weigh what the copy bias gives a token, or nudge a boolean;
- the copy bias (`CopyBias`) leans values towards spans of the user's
  messages and the tools' results;
- the close bias (`CloseBias`) leans an object whose remaining fields are
  optional towards closing right after a value.

Keys and punctuation are otherwise left alone, and the model still chooses
among the nudged tokens: a bias breaks near-ties, it does not dictate.

The decode hooks read the same state: `fork` copies it to decode ahead, and
`optional` (the optional-field check), `convert` (the opt-in conversions),
`tool` (the tool name's rules) and `holders` (the placeholders) answer them,
each bound to this reading.
"""

from __future__ import annotations

import codecs
import copy
import re

from .._sampling import top_tokens
from ._close import CloseBias
from ._copy import CopyBias
from ._json_cursor import JsonCursor
from ._optional import OptionalFields
from ._placeholders import Placeholders
from ._rule import CANDIDATES, At, Choice, Context, Logits, ValueRule
from ._spans import Spans, mention, near, number_text
from ._tools import ToolNames
from .convert import Conversions
from .heuristics import heuristics

__all__ = ["ValueBias"]

_DIGITS = re.compile(r"(?<![\w^.])\d+(?:\.\d+)?")
"""A number inside a string value, not right after a letter or a `^` ("2x^2": the first 2)."""


class ValueBias:
    """One constrained generation's value rules, and the reading of the messages and of the
    JSON written so far that they share.

    Args:
        context: What the rules are built from (`Context`).
    """

    def __init__(self, context: Context) -> None:
        self.context = context
        source = context.source
        self.text = Spans(source)
        """The messages' spans (`Spans`): an occurrence a value took is not offered again."""
        self.lowered = Spans(source.lower()) if context.enums else self.text
        """The messages in lower case: what an enum's value copies."""
        self.convert = Conversions(self, number_text(source, times_a_year=context.convert_values))
        """The opt-in conversions (`convert_values`)."""
        self.numbers = Spans("\n".join([self.convert.numbers, *self.convert.whole_numbers()]))
        """The numbers of the messages as the rules read them (`number_text`), with the whole
        numbers that the conversions read a scaled one as."""
        self.cursor = JsonCursor(on_value=self._use)
        """Where the JSON written so far is."""
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self.ended = 0
        """How many string or number values have ended so far."""
        self._ahead_of = 0
        self.last_number = -1
        """Where the latest number the values took starts in the messages' numbers."""
        self._mentions: dict[str, int] = {}
        self._near: dict[str, tuple[frozenset[int], frozenset[int]]] = {}
        self.optional = OptionalFields(self)
        """The optional-field check (`check_optional`)."""
        self.tool = ToolNames(self)
        """The rules of a call's tool name: the tool pick and new calls."""
        self.holders = Placeholders(self)
        """The placeholders of the system message, which no value copies."""
        self.rules: tuple[ValueRule, ...] = (*heuristics(self), CopyBias(), CloseBias())
        """The rules `apply` runs, in order: the heuristics, the copy bias, the close bias."""

    def feed(self, data: bytes) -> None:
        """Advance over the bytes of generated (sampled or forced) tokens."""
        self.cursor.feed(self._decoder.decode(data))

    def _use(self, value: str, number: bool) -> None:
        if not number and self.text.match(value, True):
            for digits in _DIGITS.findall(value):  # "2x^2" copied takes the 2 that the user gave
                self.numbers.use(digits)
        at = (self.numbers if number else self.text).use(value)
        if number and at >= 0:
            self.last_number = max(self.last_number, at)
        self.ended += 1

    def fork(self) -> ValueBias:
        """An independent copy, to decode ahead with and throw away."""
        other = copy.copy(self)
        other.text, other.numbers = self.text.copy(), self.numbers.copy()
        if self.lowered is self.text:
            other.lowered = other.text
        other.cursor = self.cursor.copy(on_value=other._use)
        other._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        other._decoder.setstate(self._decoder.getstate())
        # A value in progress ends first; it is not the one looked ahead for.
        other._ahead_of = self.ended + (self.cursor.number or self.cursor.in_string_value)
        other.optional = self.optional.fork(other)
        other.convert = self.convert.fork(other)
        other.tool = self.tool.fork(other)
        other.holders = self.holders.fork(other)
        return other

    # -- the reading -----------------------------------------------------------------

    def choice(self, piece: str) -> Choice | None:
        """The value a token would write, as the copy bias reads it; `None` for one that
        writes no value."""
        hit = self.cursor.candidate(piece)
        if hit is None:
            return None
        value, whole, number = hit
        if whole and not value and not number:
            return Choice(value, whole, number, copies=False)
        if number:
            return Choice(value, whole, number, copies=self.numbers.match(value, whole))
        copies, starts = self.copied(value, whole, self.cursor.key)
        return Choice(value, whole, number, copies=copies, starts=starts)

    def copies(self, value: str, whole: bool, key: str) -> bool:
        """Whether the string `value` starts a span of the messages (`whole`: is one); in any
        case for a field that takes an enum's values (`Context.enums`)."""
        return self.text.match(value, whole) or self._copies_enum(value, whole, key)

    def _copies_enum(self, value: str, whole: bool, key: str) -> bool:
        return key in self.context.enums and self.lowered.match(value.lower(), whole)

    def copied(self, value: str, whole: bool, key: str) -> tuple[bool, list[int]]:
        """`copies` of a string value, and where it starts a free span of the messages if it
        copies (else nothing): the same answers, from one search of the messages."""
        starts = self.text.where(value, whole)
        if (Spans.starts_span(value, whole) and starts) or self._copies_enum(value, whole, key):
            return True, starts
        return False, []

    def mention(self, key: str) -> int:
        """Whether the messages mention what the flag `key` is about (`mention`): 1, negated: -1."""
        found = self._mentions.get(key)
        if found is None:
            found = self._mentions[key] = mention(key, self.text.source)
        return found

    def near_fields(self, key: str) -> tuple[frozenset[int], frozenset[int]]:
        """Where values of the number field `key` likely start in the messages' numbers, and
        where those of its sibling number fields do (`near`)."""
        found = self._near.get(key)
        if found is None:
            siblings = self.context.siblings.get(key, ())
            found = self._near[key] = near(self.numbers.source, key, siblings)
        return found

    @property
    def starts_any_string(self) -> bool:
        """Whether the next token is the first of a string value: in a tool's input, the
        final, anywhere (its opening quote written)."""
        c = self.cursor
        return c.in_string_value and c.value == ""

    def starts_string(self) -> bool:
        """Whether the next token is the first of a string value in a tool's input."""
        c = self.cursor
        return self.context.site.in_call(c) and c.in_object and self.starts_any_string

    @property
    def depth(self) -> int:
        """How many JSON objects and arrays are open."""
        return self.cursor.depth

    def value_ended(self, depth: int) -> bool:
        """In a fork: whether a new value has ended at `depth` since it was forked."""
        c = self.cursor
        return c.depth == depth and (self.ended > self._ahead_of or c.after_value)

    # -- the rules -------------------------------------------------------------------

    @property
    def active(self) -> bool:
        """Whether the next token may be nudged (else `apply` changes nothing)."""
        c = self.cursor
        return bool(self.context.copy and c.at_value) or bool(self.context.close and c.may_close)

    def apply(self, logits: Logits) -> Logits:
        """Nudge the likeliest tokens in place (`logits` already masked) and return them."""
        if not self.active:
            return logits
        self.convert.end_sealed(logits)
        pieces = {t: p for t in top_tokens(logits, CANDIDATES).tolist() if (p := self.context.piece(t))}
        at = At(self, logits, pieces)
        for rule in self.rules:
            if rule.acts(at):
                rule.bias(at, logits)
        return logits
