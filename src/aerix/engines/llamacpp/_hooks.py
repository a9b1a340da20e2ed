"""The decode hooks: how the value rules reach the decode loop, in the order it asks them.

Each hook lives with its rule (`rules/`: the string choices, the tool pick,
new calls, the placeholders, the optional-field check, the conversions);
`ValueNudges` runs the value rules of `ValueBias.apply`, and `default_hooks`
lists the hooks of `LlamaCpp`'s options.

At each step of a constrained generation in a tool's input, the decode loop
asks its hooks, in order, three things; a hook answers those it cares about
and inherits "no change" for the rest (`DecodeHook`):

1. `adjust(step, logits)`: logits in, logits out (a nudge; the copy and
   close biases). The loop then samples a token from them.
2. `choose(step, token)`: the sampled token in, a token out (another first
   token of a string, a closing token instead of an optional field).
3. `write(step, token)`: the token in, forced tokens out: what to write
   instead of the value that token starts (a number in the field's scale, a
   date in the field's format, an optional field the request names), or
   `None`; the first hook that writes ends the step.

A hook acts only at the steps where `active(step)` says so, and the loop
skips the masking and the hooks altogether when no hook is active, so a
hook costs nothing where it has nothing to say. The rules' shared reading
of the JSON written so far and of the user's messages is the step's
`ValueBias`; the hooks' look-ahead is the step's `Lookahead`. Each hook can
be tested alone with a fake step, and removed by leaving it out of the list
(`LlamaCpp`'s options do that: `copy_bias=0, close_bias=0`, `pick_bias=0`,
`new_call_bias=0`, `string_choices=1`, `check_optional=False`,
`no_placeholders=False`; and the copy bias's heuristics, by name, within
`ValueNudges`: `heuristics={"series_order": False}`). `DecodedAhead`,
the one hook that writes a value in a form the model did not choose, runs only with
`convert_values=True`; the others nudge or choose among the model's own tokens.
"""

from __future__ import annotations

from collections.abc import Callable

from ._sampling import Logits
from ._step import DecodeHook, Step
from .rules import (
    DecodedAhead,
    NewCalls,
    NoPlaceholders,
    OptionalFieldCheck,
    OptionalFieldOffer,
    StringChoices,
    ToolPick,
)

__all__ = [
    "DecodeHook",
    "DecodedAhead",
    "NewCalls",
    "NoPlaceholders",
    "OptionalFieldCheck",
    "OptionalFieldOffer",
    "Step",
    "StringChoices",
    "ToolPick",
    "ValueNudges",
    "default_hooks",
]


class ValueNudges(DecodeHook):
    """The value rules (`ValueBias.apply`: the heuristics, the copy and close biases): values
    lean to the user's own words, and an object whose remaining fields are optional leans to
    closing."""

    def active(self, step: Step) -> bool:
        return step.bias.active

    def adjust(self, step: Step, logits: Logits) -> Logits:
        return step.bias.apply(logits)


def default_hooks(
    *,
    copy_bias: float,
    close_bias: float,
    string_choices: int,
    check_optional: bool,
    convert_values: bool = False,
    pick_bias: float = 0.0,
    score: Callable[[str, list[str]], list[float]] | None = None,
    new_call_bias: float = 0.0,
    no_placeholders: bool = False,
) -> tuple[DecodeHook, ...]:
    """The hooks of `LlamaCpp`'s options, in the order they run; `DecodedAhead` only with
    `convert_values` (and a copy bias), `ToolPick` only with a `pick_bias` and a `score`,
    `NewCalls` only with a `new_call_bias`, `NoPlaceholders` only with `no_placeholders`."""
    hooks: list[DecodeHook] = []
    if pick_bias and score is not None:
        hooks += [ToolPick(pick_bias, score)]
    if new_call_bias:
        hooks += [NewCalls(new_call_bias)]
    if copy_bias or close_bias:
        hooks += [ValueNudges()]
    if string_choices > 1:
        hooks += [StringChoices(string_choices)]
    if no_placeholders:
        hooks += [NoPlaceholders()]
    if check_optional:
        hooks += [OptionalFieldCheck()]
    if copy_bias and convert_values:
        hooks += [DecodedAhead()]
    if check_optional:
        hooks += [OptionalFieldOffer()]
    return tuple(hooks)
