"""The tool pick (`pick_bias`): the first turn's tool name leans to the tools that fit the
request, by the fit score."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from .._sampling import Logits
from .._step import DecodeHook, Step

__all__ = ["ToolPick"]


class ToolPick(DecodeHook):
    """While the first turn for a request names a call's tool, with several tools to name:
    each token's logit gets `weight` times the gap between the best fit of the tools it
    keeps the name on the way to and the best fit of all (`ToolNames.named`), so
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
