"""What a value rule is: where it acts and how it biases the logits (`ValueRule`), the context
one generation's rules are built from (`Context`), and the step they act at (`At`).

At each step of a constrained generation where a value may be written, the
engine asks each rule of `ValueBias` in turn whether it acts there (`acts`),
and lets those that do change the logits of the likeliest tokens (`bias`).
The copy bias reads each of those tokens as the value it would write
(`Choice`); a rule that weighs copies (the heuristics) changes how much the
copy bias gives a token (`Choice.more`), or that it gives it none, and the copy
bias then writes that into the logits.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

import numpy as np
import numpy.typing as npt

from ._site import CallSite

if TYPE_CHECKING:
    from ._bias import ValueBias
    from ._json_cursor import JsonCursor
    from .convert import Unit

__all__ = ["CANDIDATES", "At", "Choice", "Context", "Logits", "ValueRule"]

Logits = npt.NDArray[np.float32]
CANDIDATES = 32
"""How many of the likeliest allowed tokens the rules look at per step."""


def _all_heuristics() -> frozenset[str]:
    from .heuristics import HEURISTICS

    return frozenset(HEURISTICS)


@dataclass(frozen=True, kw_only=True)
class Context:
    """What one generation's value rules are built from: the texts values copy, the rules'
    weights and switches, what the schema says of its fields, and what the loop handed over
    (`value_bias` reads them from the schema and the `Handover`)."""

    source: str = ""
    """The text values may be copied from (the user's messages and the tools' results)."""
    copy: float = 0.0
    """The copy bias: added to each likely token that keeps a value a span of `source`;
    0: off. With it and `convert_values`, a percentage copied into a number field is
    written as the fraction it means, a number of millions as the number."""
    close: float = 0.0
    """The close bias: added to the tokens that close an object whose remaining fields
    are optional, right after a value; 0: off."""
    piece: Callable[[int], str] = str
    """A token's text."""
    site: CallSite = field(default_factory=CallSite)
    """Where a call's tool name and input sit: the tool pick and the rules of a tool's
    input act there."""
    kept_scales: Mapping[str, Collection[int]] = field(default_factory=dict)
    """The scales in which number fields take numbers as written, by key (`kept_scales`)."""
    siblings: Mapping[str, Collection[str]] = field(default_factory=dict)
    """The number fields of the object each field is in, by the field's key."""
    date_formats: Mapping[str, str] = field(default_factory=dict)
    """The `strftime` format of each string field that names one in its description, by key."""
    objects: Sequence[tuple[Sequence[str], Collection[str]]] = ()
    """The keys of each object of the schema, in order, with its required ones: an optional
    field the messages name is offered before the object closes (`suggest`)."""
    units: Mapping[str, tuple[Unit, bool]] = field(default_factory=dict)
    """The unit each number field asks for (`field_unit`), and whether it is an integer field."""
    series: Collection[str] = ()
    """The string fields that are one of a series (`in_series`)."""
    constants: Collection[str] = ()
    """The string constants of the schema (a tool's name)."""
    constant_keys: Collection[str] = ()
    """The keys of the fields that are such a constant (a call's tool name)."""
    enums: Collection[str] = ()
    """The keys of the string fields that take an enum's values: their values copy the
    messages in any case ("Celsius" for `"celsius"`), since the enum, not the user, fixes
    how a value is written."""
    tools: Mapping[str, str] = field(default_factory=dict)
    """The tools a call may name, by name, each as the fit score reads it (`tool_texts`)."""
    request: str | None = None
    """The user's request when this generation writes the first turn for it, else `None`:
    only that turn's tool is picked (`ToolPick`)."""
    made: Collection[str] = ()
    """The calls the turns for the request wrote already (`call_key`s): `NewCalls` leans a
    later turn's tool name away from writing one again."""
    quoted: Collection[str] = ()
    """What the user put in quotes (`quoted_values`)."""
    placeholders: Collection[str] = ()
    """The placeholders of the system message: no value copies one (`copies_placeholder`)."""
    convert_values: bool = False
    """Turn on the rules that write a value in a form the user did not write it in (a
    percentage as its fraction, millions whole, a quantity in its field's unit, a date in
    its field's format), and read "quarterly" as 4 or "213 million" as 213000000 for the
    copy bias. Off: the rules only nudge towards the user's own words."""
    heuristics: Collection[str] = field(default_factory=_all_heuristics)
    """The heuristics that act, by name (`heuristics.HEURISTICS`): all by default."""


@dataclass(slots=True)
class Choice:
    """One of a step's likeliest tokens, as the value it would write (`JsonCursor.candidate`)."""

    value: str
    """The value so far with the token."""
    whole: bool
    """Whether the token ends the value."""
    number: bool
    """Whether the value is a number."""
    copies: bool
    """Whether the value is (`whole`) or starts a free span of the messages; a rule may
    say it is no copy."""
    starts: list[int] = field(default_factory=list)
    """Where a string value starts a free span of the messages."""
    more: int = 0
    """How many times more the copy bias a copying token gets (or less: a negative number)."""
    quoted: bool = False
    """Whether the value copies one the user put in quotes (the quotes rule says so)."""
    left: bool = False
    """Whether the copy bias leaves the token alone (a rule says the value is no value)."""

    @property
    def empty(self) -> bool:
        """Whether the token closes an empty string: a value that copies nothing."""
        return self.whole and not self.value and not self.number


class At:
    """One step at which the value rules act: the JSON written so far, the likeliest allowed
    tokens, and the copy bias's reading of each (`choices`, once asked for).

    Args:
        bias: The generation's `ValueBias`: the messages as the rules read them.
        logits: The step's logits, masked by the schema.
        pieces: The likeliest allowed tokens' texts, by token.
    """

    def __init__(self, bias: ValueBias, logits: Logits, pieces: Mapping[int, str]) -> None:
        self.bias = bias
        self.cursor: JsonCursor = bias.cursor
        self.context = bias.context
        self.pieces = pieces
        self.best = max(pieces, key=lambda t: logits[t]) if pieces else None
        """The likeliest token before any rule changed the logits."""
        self._choices: dict[int, Choice | None] | None = None

    @property
    def copying(self) -> bool:
        """Whether the copy bias acts here: it is on, and a value may start or go on."""
        return bool(self.context.copy) and self.cursor.at_value

    @property
    def choices(self) -> dict[int, Choice | None]:
        """Each likely token as the value it would write; `None` for one that writes none."""
        if self._choices is None:
            self._choices = {t: self.bias.choice(piece) for t, piece in self.pieces.items()}
        return self._choices

    def values(self) -> list[Choice]:
        """The choices that write a value (not an empty string)."""
        return [c for c in self.choices.values() if c is not None and not c.empty]


class ValueRule(Protocol):
    """A rule on the logits of the JSON value being written."""

    name: str
    """The rule's name (a heuristic's, as `LlamaCpp(heuristics=...)` takes it)."""

    def acts(self, at: At) -> bool:
        """Where: whether the rule has anything to say at this step."""
        ...

    def bias(self, at: At, logits: Logits) -> None:
        """How: change `logits` of the step's likeliest tokens in place, or how much the copy
        bias gives one (`At.choices`: `Choice.more`, `.left`, `.copies`)."""
        ...
