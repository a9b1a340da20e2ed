"""Does a tool fit the request? The model's own answer, read from its likelihoods.

Under `tool_choice="auto"` a small model decides between calling a tool and
answering by the first key it writes, and that choice barely depends on
whether the tools fit the request. Its likelihoods know better. For each
tool, compare how likely the model finds the tool's text after the request
with how likely it finds it after an empty one, in the model's own chat
template:

    fit(tool) = mean over the first HEAD tokens of "name(fields)" of
                log p(token | request, "A tool for this request:")
              - log p(token | empty request, "A tool for this request:")

A text the request makes more likely (pointwise mutual information, per
token) fits it. The score of a tool set is the best tool's. Only the first
tokens count (`HEAD`): most of the request's evidence sits in the name and the
first words, a fitting tool's later tokens score far less, and a mean over
every token loses more of its calls when the request carries unrelated
context (docs/quality.md measures both). The scores run on a small llama.cpp
context of their own, so the engine's KV cache (and its prefix reuse) is left
alone; its threads are chosen for each scoring as the engine's prefill's are
(`PrefillThreads`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ._llama import ScoringContext

__all__ = ["HEAD", "LEAD", "FitScorer", "combine"]

LEAD = "A tool for this request:\n"
"""The assistant's words before a tool's description is scored."""
HEAD = 16
"""How many of a tool text's first tokens are scored (`combine`)."""
_BASELINES = 1024
"""How many tools' baselines are kept (then they are forgotten and computed again)."""


def combine(fits: Sequence[np.ndarray]) -> float:
    """A tool set's score from its tools' per-token scores (`FitScorer.token_scores`): the best
    tool's mean over its first `HEAD` tokens; -inf without tools."""
    return max((float(np.mean(f[:HEAD])) for f in fits), default=-math.inf)


class FitScorer:
    """Scores how well tools fit a request, on a scoring context of its own.

    Args:
        llama: The engine's model (its weights are shared, not copied).
        render: The chat template: messages to prompt text, ending with the assistant's opener.
        tokenize: Text to tokens (`tokenize(text, add_bos)`, special tokens parsed).
        n_ctx: The scoring context's length; longer requests are cut from the left.
        head: How many of a text's first tokens are scored (at most `n_ctx // 4`). A token's
            score does not depend on the tokens after it, so `combine` reads the same
            scores from a longer head.
        threads: Chooses the threads of a scoring's evaluations when it starts (the
            engine's `PrefillThreads.choose`); `None`: those of `llama` when it was loaded.
    """

    def __init__(
        self,
        llama: Any,
        render: Callable[[list[Any]], str],
        tokenize: Callable[[bytes, bool], list[int]],
        n_ctx: int = 512,
        head: int = HEAD,
        threads: Callable[[], int] | None = None,
    ) -> None:
        self._ctx = ScoringContext(llama, n_ctx)
        self._threads = threads
        self._set_threads = 0
        """The threads the scoring context evaluates on, once `threads` chose them."""
        self._n_ctx = n_ctx
        self._head = min(head, n_ctx // 4)
        self._render = render
        self._tokenize = tokenize
        self._cached: list[int] = []
        """The prefix whose KV the scoring context holds (`_logprobs`)."""
        self._last = np.zeros(0)
        """The logits after the cached prefix's last token."""
        self._empty: list[int] | None = None
        """The prompt of the empty request (the baselines'), once needed."""
        self._baselines: dict[str, np.ndarray] = {}
        """log p(each token of a text | empty request), by text."""

    def close(self) -> None:
        """Free the scoring context."""
        self._ctx.close()

    def score(self, request: str, tools: Sequence[str]) -> float:
        """The fit of `tools` (each a tool's name and description) to `request`; -inf if none."""
        return combine(self.token_scores(request, tools))

    def fits(self, request: str, tools: Sequence[str]) -> list[float]:
        """Each tool's fit to `request`, in order: its mean score over its first `HEAD`
        tokens; 0 (no evidence) for a text that tokenises to nothing."""
        scores = iter(self.token_scores(request, tools))
        empty = [not self._tokenize(t.encode(), False) for t in tools]
        return [0.0 if e else float(np.mean(next(scores)[:HEAD])) for e in empty]

    def token_scores(self, request: str, tools: Sequence[str]) -> list[np.ndarray]:
        """Each tool's per-token scores over its first `head` tokens, log p(token | request) -
        log p(token | empty request); tools that tokenise to nothing are left out."""
        if self._threads is not None and (chosen := self._threads()) != self._set_threads:
            self._ctx.set_threads(chosen)
            self._set_threads = chosen
        given = self._prompt(request)
        targets = [(text, t) for text in tools if (t := self._tokenize(text.encode(), False)[: self._head])]
        # The request's prefix first, for every text (its KV is reused); then the baselines,
        # which do not depend on the request and are kept.
        given_lp = [self._logprobs(given, target) for _, target in targets]
        scores = []
        for (text, target), lp in zip(targets, given_lp, strict=True):
            base = self._baselines.get(text)
            if base is None:
                if len(self._baselines) >= _BASELINES:
                    self._baselines.clear()
                if self._empty is None:
                    self._empty = self._prompt("")
                base = self._baselines[text] = self._logprobs(self._empty, target)
            scores.append(lp - base)
        return scores

    def _prompt(self, request: str) -> list[int]:
        """The tokens before a tool's text: the request in the chat template, then `LEAD`."""
        return self._tokenize((self._render([{"role": "user", "content": request}]) + LEAD).encode(), True)

    def _logprobs(self, prefix: list[int], target: list[int]) -> np.ndarray:
        """log p(each token of target | prefix and the target's tokens before it).

        The prefix is decoded alone, once for the texts that follow it, and each text
        on top of it: llama.cpp's logits differ slightly with a decode's batch shape
        (as when part of a prompt scored before is reused), so each text is scored
        the same way whatever was scored before it.
        """
        prefix = prefix[-(self._n_ctx - len(target)) :]
        if self._cached != prefix or self._ctx.keep(len(prefix)) != len(prefix):
            self._ctx.keep(0)
            self._cached = []  # until the decode succeeds
            self._last = self._ctx.decode(prefix, 0, len(prefix) - 1)[0].astype(np.float64)
            self._cached = prefix
        rows = [self._last[None, :]]
        if len(target) > 1:  # the logits after each target token but the last
            rows.append(self._ctx.decode(target[:-1], len(prefix), len(prefix)).astype(np.float64))
        logits = np.concatenate(rows)
        top = logits.max(axis=1)
        norm = top + np.log(np.exp(logits - top[:, None]).sum(axis=1))
        lp: np.ndarray = logits[np.arange(len(target)), target] - norm
        return lp
