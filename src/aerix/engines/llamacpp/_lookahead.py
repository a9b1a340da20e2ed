"""Decoding ahead: what the model would write from a token on, then back as if nothing happened.

Some decode hooks judge a value by its whole text before the model commits to
it (an optional field the user never gave, the likeliest of several strings,
a number to write in another scale). The look-ahead decodes it greedily, with
the biases, on copies of the constraint and of the biases' state, evaluating
on the real KV cache, and cuts the cache back afterwards.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ._cache import KvCache
from ._constraint import Constrained
from ._sampling import mask_logits
from ._vocab import Vocab
from .rules import ValueBias

__all__ = ["LOOKAHEAD", "Ahead", "Lookahead", "log_norm"]

LOOKAHEAD = 48
"""The most tokens decoded ahead to read a value."""


@dataclass(frozen=True, slots=True)
class Ahead:
    """A value decoded ahead: its text, its log-probability after the first token, and
    whether it ended within the look-ahead."""

    text: str
    log_p: float
    ended: bool


def log_norm(logits: Any) -> float:
    """log Σ exp(logits) over the allowed (finite) logits: a token's log-probability is
    its logit minus this."""
    finite = logits[np.isfinite(logits)]
    top = float(finite.max())
    return top + math.log(float(np.exp(finite - top).sum()))


class Lookahead:
    """Decodes values ahead on a KV cache.

    Args:
        cache: The engine's KV cache.
        vocab: The model's vocabulary.
        tokenize: Text to tokens (`tokenize(text, add_bos)`).
    """

    def __init__(self, cache: KvCache, vocab: Vocab, tokenize: Callable[[bytes, bool], list[int]]) -> None:
        self._cache = cache
        self._vocab = vocab
        self._tokenize = tokenize

    def ahead(
        self,
        stopped: Callable[[], bool],
        constrained: Constrained,
        bias: ValueBias,
        token: int | list[int],
        choice: bool = False,
    ) -> Ahead | None:
        """The value from `token` on, decoded greedily (with the biases) on copies of the
        constraint and the biases, then the KV cache is cut back: to the end of the next
        value in the current object, or for a `choice`, to the end of the value in progress,
        with its log-probability. `None` if the model would end the generation. `stopped`
        (an abort) stops it at once, with what was decoded so far.
        """
        cache = self._cache
        n0, depth, ended = cache.n_tokens, bias.depth, bias.ended
        ahead, fork = constrained.fork(), bias.fork()
        text = b""
        log_p = 0.0
        pending = [token] if isinstance(token, int) else token
        try:
            for _ in range(LOOKAHEAD):
                ahead.consume(pending)
                forced = ahead.forced()
                ahead.consume(forced)
                batch = [*pending, *forced]
                data = b"".join(self._vocab.piece(t)[1] for t in batch)
                fork.feed(data)
                text += data
                if (fork.ended > ended if choice else fork.value_ended(depth)) or ahead.done:
                    return Ahead(text.decode(errors="replace"), log_p, ended=True)
                if cache.n_tokens + len(batch) >= cache.n_ctx or stopped():
                    break
                cache.eval(batch)
                step = fork.apply(mask_logits(cache.logits(), ahead.fill_mask()))
                sampled = int(np.argmax(step))
                if self._vocab.is_end(sampled):
                    return None
                if choice:
                    log_p += float(step[sampled]) - log_norm(step)
                pending = [sampled]
        finally:
            cache.cut(n0)
        return Ahead(text.decode(errors="replace"), log_p, ended=False)

    def allowed(self, constrained: Constrained, text: str | None, room: int | None) -> list[int]:
        """The tokens of `text`, if the schema allows them next and they fit in `room`
        (the tokens left); else (or without a text) `[]`."""
        if text is None:
            return []
        tokens = self._tokenize(text.encode(), False)
        fits = room is None or len(tokens) <= room
        return tokens if fits and constrained.accepts(tokens) else []
