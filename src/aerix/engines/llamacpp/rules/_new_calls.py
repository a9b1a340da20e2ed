"""New calls (`new_call_bias`): a later turn's tool name leans away from a call the request's
turns already made."""

from __future__ import annotations

import numpy as np

from .._sampling import Logits
from .._step import DecodeHook, Step

__all__ = ["NewCalls"]


class NewCalls(DecodeHook):
    """While a later turn for a request names a call's tool, with several tools to name: if
    the likeliest token leads, decoded ahead to the end of the call, to a call that the
    request's turns already wrote (`ToolNames.made`), the tokens that lead only to that
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
