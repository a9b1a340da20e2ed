"""The string choices (`string_choices`): at the first token of a string value in a tool's
input, the likeliest whole value of the likeliest first tokens, decoded ahead."""

from __future__ import annotations

import math

import numpy as np

from .._lookahead import log_norm
from .._sampling import top_tokens
from .._step import DecodeHook, Step

__all__ = ["StringChoices"]


_SURE = math.log(0.5)
"""The log-probability from which a string's first token is kept without choices."""


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
