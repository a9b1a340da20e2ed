"""The decode hooks: how the value rules reach the decode loop.

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
`no_placeholders=False`). `DecodedAhead`,
the one hook that writes a value in a form the model did not choose, runs only with
`convert_values=True`; the others nudge or choose among the model's own tokens.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ._constraint import Constrained
from ._lookahead import Lookahead, log_norm
from ._sampling import Logits, Sampling, sample, top_tokens
from .rules import ValueBias

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

_SURE = math.log(0.5)
"""The log-probability from which a string's first token is kept without choices."""


@dataclass(slots=True, kw_only=True)
class Step:
    """One decode step, as the hooks see it."""

    bias: ValueBias
    """The rules' reading of the JSON so far and of the user's messages."""
    constrained: Constrained
    """The constraint (the schema's matcher) at this step."""
    lookahead: Lookahead
    """Decodes a value ahead and cuts the KV cache back."""
    piece: Callable[[int], str]
    """A token's visible text."""
    stopped: Callable[[], bool]
    """Whether the generation was aborted (a look-ahead stops at once)."""
    sampling: Sampling
    """The generation's sampling settings."""
    rng: np.random.Generator
    """The generation's random generator."""
    room: int | None
    """Tokens left before `max_tokens` (`None`: no limit)."""
    logits: Any = None
    """The masked logits after `adjust` (set by the loop before `choose`)."""

    def ahead(self, token: int | list[int], choice: bool = False) -> Any:
        """`Lookahead.ahead` from `token`, for this step."""
        return self.lookahead.ahead(self.stopped, self.constrained, self.bias, token, choice)

    def closing(self, token: int) -> Any:
        """`Lookahead.closing` from `token`, for this step: to the end of the object in progress."""
        return self.lookahead.closing(self.stopped, self.constrained, self.bias, token)

    def judged(self, token: int | list[int], judge: Callable[[str], bool]) -> bool | None:
        """`Lookahead.judged` from `token`, for this step: `judge` of the text `ahead` gives."""
        return self.lookahead.judged(self.stopped, self.constrained, self.bias, token, judge)

    def allowed(self, text: str | None) -> list[int]:
        """The tokens of `text` if the schema allows them next and they fit in `room`; else `[]`."""
        return self.lookahead.allowed(self.constrained, text, self.room)


class DecodeHook:
    """A rule of the decode loop; each method's default is "no change"."""

    def active(self, step: Step) -> bool:
        """Whether this hook acts at this step (checked before the others run)."""
        return False

    def adjust(self, step: Step, logits: Logits) -> Logits:
        """Logits in (masked by the schema), logits out; may change them in place."""
        return logits

    def choose(self, step: Step, token: int) -> int:
        """The sampled token in, the token to go on with out."""
        return token

    def write(self, step: Step, token: int) -> list[int] | None:
        """The tokens to write instead of `token` (the schema must allow them), or `None`."""
        return None


class ValueNudges(DecodeHook):
    """The copy and close biases (`ValueBias.apply`): values lean to the user's own words,
    and an object whose remaining fields are optional leans to closing."""

    def active(self, step: Step) -> bool:
        return step.bias.active

    def adjust(self, step: Step, logits: Logits) -> Logits:
        return step.bias.apply(logits)


class StringChoices(DecodeHook):
    """The first token of a string value in a tool's input: of the `n` likeliest first
    tokens, the one whose whole value, decoded ahead, is likeliest (its tokens'
    log-probabilities under the biases, summed); at a temperature above 0, drawn by
    those likelihoods. The sampled token stays if the model gives its likeliest first
    token even odds or more, or if no value ends within the look-ahead.

    Args:
        n: How many first tokens to compare (2 or more).
    """

    def __init__(self, n: int) -> None:
        self.n = n

    def active(self, step: Step) -> bool:
        return step.bias.starts_string()

    def choose(self, step: Step, token: int) -> int:
        logits = step.logits
        norm = log_norm(logits)
        if float(logits.max()) - norm >= _SURE:
            return token  # the model is sure of its first token
        firsts: list[int] = top_tokens(logits, self.n).tolist()
        scores = []
        for t in firsts:
            ahead = step.ahead(t, choice=True)
            if ahead is not None and ahead.ended:
                scores.append((float(logits[t]) - norm + ahead.log_p, t))
        if not scores:
            return token
        temperature = step.sampling.temperature
        if temperature <= 0:
            return max(scores)[1]
        weights = np.exp((np.array([s for s, _ in scores]) - max(scores)[0]) / temperature)
        return scores[int(step.rng.choice(len(scores), p=weights / weights.sum()))][1]


class NoPlaceholders(DecodeHook):
    """The first token of a string value (in a tool's input or the final): where the value
    it starts, decoded ahead, copies a placeholder of the system message (a value of a JSON
    example there, as the loop hands them over: `Handover.placeholders`,
    `ValueBias.copies_placeholder`), that token is left out and another drawn from the rest
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


class OptionalFieldCheck(DecodeHook):
    """Before the model adds an optional field to a tool's input, decode that field ahead
    and close the object instead unless the user's messages give its value
    (`ValueBias.supports`)."""

    def active(self, step: Step) -> bool:
        return step.bias.optional.may_end_nested

    def choose(self, step: Step, token: int) -> int:
        bias, piece = step.bias, step.piece(token)
        if not bias.optional.adds_field(piece):
            return token
        closer = bias.optional.closer(step.logits, piece)
        if closer is None:
            return token
        return closer if step.judged(token, bias.optional.supports) is False else token


class DecodedAhead(DecodeHook):
    """A value decoded ahead and written in the form its field asks for: the number a
    scaled one means ("0.05" for "5%", "70" for "5ft 10in" in inches: `ValueBias.scaled`),
    which the model may then end but not go on with, or a date in its field's format,
    with the closing quote (`ValueBias.dated`). Opt-in (`convert_values`): it writes
    values the model did not choose, and the `ValueBias` too must have been built with
    `convert_values` for it to act."""

    def active(self, step: Step) -> bool:
        return step.bias.active

    def write(self, step: Step, token: int) -> list[int] | None:
        bias = step.bias
        if bias.convert.starts_number(step.piece(token)):
            ahead = step.ahead(token)
            tokens = step.allowed(None if ahead is None else bias.convert.scaled(ahead.text, ahead.ended))
            if tokens:
                bias.convert.seal()  # the model may end it, not add digits to it
            return tokens or None
        if bias.convert.starts_date():
            ahead = step.ahead(token, choice=True)
            day = None if ahead is None else bias.convert.dated(ahead.text)
            return step.allowed(None if day is None else json.dumps(day)[1:]) or None
        return None


class OptionalFieldOffer(DecodeHook):
    """Where the model closes a tool's input, offer an optional field the user's messages
    name that it left out (`ValueBias.suggest`), kept if its value, decoded ahead, is one
    the messages give (`ValueBias.supports`)."""

    def active(self, step: Step) -> bool:
        return step.bias.optional.may_end_nested

    def write(self, step: Step, token: int) -> list[int] | None:
        bias = step.bias
        tokens = step.allowed(bias.optional.suggest(step.piece(token)))
        if not tokens:
            return None
        return tokens if step.judged(tokens, bias.optional.supports) else None


class ToolPick(DecodeHook):
    """While the first turn for a request names a call's tool, with several tools to name:
    each token's logit gets `weight` times the gap between the best fit of the tools it
    keeps the name on the way to and the best fit of all (`ValueBias.tools_named`), so
    the name leans to the tools the request makes likeliest. The fits are the fit score's
    (`FitScorer`, nats per token over a tool's `"name(fields)"`), asked for once a
    generation (`LlamaCpp` keeps the latest requests' fits).
    The model still chooses: a nudge of a few logits, never a name it gave no weight.

    Args:
        weight: Logits per nat of fit.
        score: Each tool text's fit to a request (`score(request, texts)`, in the order given).
    """

    def __init__(self, weight: float, score: Callable[[str, list[str]], list[float]]) -> None:
        self.weight = np.float32(weight)
        self._score = score

    def active(self, step: Step) -> bool:
        return step.bias.tool.picks_tool

    def adjust(self, step: Step, logits: Logits) -> Logits:
        bias = step.bias
        fits = bias.tool.fits
        if fits is None:
            assert bias.tool.request is not None  # `picks_tool` says so
            names = list(bias.tool.tools)
            try:
                scores = self._score(bias.tool.request, [bias.tool.tools[n] for n in names])
            except ValueError:  # a chat template that refuses the scoring prompts: no pick
                scores = []
            fits = bias.tool.fits = dict(zip(names, scores, strict=False))
        if not fits:
            return logits
        best = max(fits.values())
        for t in np.flatnonzero(np.isfinite(logits)):
            named = bias.tool.named(step.piece(int(t)))
            if named:
                logits[t] += self.weight * np.float32(max(fits.get(n, best) for n in named) - best)
        return logits


class NewCalls(DecodeHook):
    """While a later turn for a request names a call's tool, with several tools to name: if
    the likeliest token leads, decoded ahead to the end of the call, to a call that the
    request's turns already wrote (`ValueBias.made`), the tokens that lead only to that
    tool get `weight` taken off, and the next likeliest is read the same way (once per
    tool at most). A small model asked for the population of a country's capital looks
    the capital up, then tends to look it up again; this leans it to the next call of the
    chain, or to its answer. A nudge: the model may still write the call again, and the
    repeat rule (`Limits.repeats`) decides whether it runs.

    Args:
        weight: Logits taken off.
    """

    def __init__(self, weight: float) -> None:
        self.weight = np.float32(weight)

    def active(self, step: Step) -> bool:
        return step.bias.tool.names_again

    def adjust(self, step: Step, logits: Logits) -> Logits:
        bias = step.bias
        read: set[str] = set()
        for _ in bias.tool.tools:
            top = int(np.argmax(logits))
            named = bias.tool.named(step.piece(top))
            if len(named) != 1 or named[0] in read:
                return logits  # a name shared by several tools is read at the next step
            read.add(named[0])
            ahead = step.closing(top)
            call = None if ahead is None or not ahead.ended else bias.tool.call_written(ahead.text)
            if call not in bias.tool.made:
                return logits
            for t in np.flatnonzero(np.isfinite(logits)):
                if bias.tool.named(step.piece(int(t))) == named:
                    logits[t] -= self.weight
        return logits


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
