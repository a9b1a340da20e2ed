"""Decoding ahead: what the model would write from a token on, then back as if nothing happened.

Some decode hooks judge a value by its whole text before the model commits to
it (an optional field the user never gave, the likeliest of several strings,
a number to write in another scale). The look-ahead decodes it greedily, with
the biases, on copies of the constraint and of the biases' state, evaluating
on the real KV cache, and cuts the cache back afterwards. A hook that only
judges the value (`judged`) gets its answer without a model evaluation where
every token the schema allows next ends the value with the same answer (an
enum, `true` or `false`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from ._cache import KvCache
from ._constraint import Constrained
from ._sampling import allowed_bits, mask_logits
from ._vocab import Vocab

if TYPE_CHECKING:
    from .rules import ValueBias

__all__ = ["LOOKAHEAD", "Ahead", "Lookahead", "log_norm"]

LOOKAHEAD = 48
"""The most tokens decoded ahead to read a value."""
CALL_AHEAD = 96
"""The most tokens decoded ahead to read the rest of a call (`closing`)."""
SETTLE = 32
"""The most tokens the schema may allow next for `judged` to try each of them instead of
evaluating the model."""


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
        found = self._decode(stopped, constrained, bias, token, "choice" if choice else "value", None)
        assert not isinstance(found, bool)
        return found

    def closing(
        self, stopped: Callable[[], bool], constrained: Constrained, bias: ValueBias, token: int
    ) -> Ahead | None:
        """Like `ahead`, but to the end of the object in progress (a call, from its tool
        name on), within `CALL_AHEAD` tokens."""
        found = self._decode(stopped, constrained, bias, token, "object", None)
        assert not isinstance(found, bool)
        return found

    def judged(
        self,
        stopped: Callable[[], bool],
        constrained: Constrained,
        bias: ValueBias,
        token: int | list[int],
        judge: Callable[[str], bool],
    ) -> bool | None:
        """`judge` of the text of `ahead(stopped, constrained, bias, token)`; `None` where that
        is `None`. The same answer, sooner: where every token the schema allows next ends
        the value and `judge` gives them all the same answer, that is the answer, with no
        model evaluation (the value of an optional enum or boolean field).
        """
        found = self._decode(stopped, constrained, bias, token, "value", judge)
        return found if found is None or isinstance(found, bool) else judge(found.text)

    def _decode(
        self,
        stopped: Callable[[], bool],
        constrained: Constrained,
        bias: ValueBias,
        token: int | list[int],
        until: Literal["value", "choice", "object"],
        judge: Callable[[str], bool] | None,
    ) -> Ahead | bool | None:
        cache = self._cache
        n0, depth, ended = cache.n_tokens, bias.depth, bias.ended
        ahead, fork = constrained.fork(), bias.fork()
        text = b""
        log_p = 0.0
        pending = [token] if isinstance(token, int) else token
        choice = until == "choice"
        steps = CALL_AHEAD if until == "object" else LOOKAHEAD
        try:
            for i in range(steps):
                ahead.consume(pending)
                forced = ahead.forced()
                ahead.consume(forced)
                batch = [*pending, *forced]
                data = b"".join(self._vocab.piece(t)[1] for t in batch)
                fork.feed(data)
                text += data
                if until == "object":
                    done = fork.depth < depth
                else:
                    done = fork.ended > ended if choice else fork.value_ended(depth)
                if done or ahead.done:
                    return Ahead(text.decode(errors="replace"), log_p, ended=True)
                if cache.n_tokens + len(batch) >= cache.n_ctx or stopped():
                    break
                mask = ahead.fill_mask()
                if judge is not None and i < steps - 1:  # at the last step, no next token is read
                    settled = self._settled(ahead, bias, depth, text, judge)
                    if settled is not None:
                        return settled
                cache.eval(batch)
                step = fork.apply(mask_logits(cache.logits(), mask))
                sampled = int(np.argmax(step))
                if self._vocab.is_end(sampled):
                    return None
                if choice:
                    log_p += float(step[sampled]) - log_norm(step)
                pending = [sampled]
        finally:
            cache.cut(n0)
        return Ahead(text.decode(errors="replace"), log_p, ended=False)

    def _settled(
        self, ahead: Constrained, bias: ValueBias, depth: int, text: bytes, judge: Callable[[str], bool]
    ) -> bool | None:
        """The answer of `judge` if every token allowed next (`ahead.mask`, filled) ends the
        value with the same answer, as the look-ahead's next token would; else `None`."""
        allowed = np.flatnonzero(allowed_bits(ahead.mask, self._vocab.size))
        if not 0 < allowed.size <= SETTLE:
            return None
        answer: bool | None = None
        for token in allowed.tolist():
            if self._vocab.is_end(token):
                return None
            after, fork = ahead.fork(), bias.fork()
            after.consume([token])
            forced = after.forced()
            after.consume(forced)
            batch = [token, *forced]
            data = text + b"".join(self._vocab.piece(t)[1] for t in batch)
            fork.feed(data)
            if not (fork.value_ended(depth) or after.done):
                return None
            verdict = judge(data.decode(errors="replace"))
            if answer is not None and verdict != answer:
                return None
            answer = verdict
        return answer

    def allowed(self, constrained: Constrained, text: str | None, room: int | None) -> list[int]:
        """The tokens of `text`, if the schema allows them next and they fit in `room`
        (the tokens left); else (or without a text) `[]`."""
        if text is None:
            return []
        tokens = self._tokenize(text.encode(), False)
        fits = room is None or len(tokens) <= room
        return tokens if fits and constrained.accepts(tokens) else []
