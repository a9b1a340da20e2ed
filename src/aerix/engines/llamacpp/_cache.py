"""The KV cache and the tokens it holds: evaluate, cut back, keep the history in step.

The engine keeps its own record of the cached tokens (`TokenHistory`: the
last prompt's tokens and bytes, then one piece per generated token), so the
next prompt can reuse what it extends. Every change of the cache goes through
here, so the record and llama.cpp's cache never disagree.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from . import _llama
from ._prefix import TokenHistory

__all__ = ["KvCache"]


class KvCache:
    """A loaded `Llama`'s KV cache with its token history.

    Args:
        llama: The loaded `llama_cpp.Llama`.
        n_vocab: The vocabulary's size (the logits' length).
    """

    def __init__(self, llama: Any, n_vocab: int) -> None:
        _llama.fit_input_ids(llama)
        self._llama = llama
        self._n_vocab = n_vocab
        self.n_ctx = int(llama.n_ctx())
        """The context length in tokens."""
        self.history = TokenHistory()
        """The tokens the cache holds, with their bytes."""

    @property
    def n_tokens(self) -> int:
        """How many tokens the cache holds."""
        return _llama.n_evaluated(self._llama)

    def eval(self, tokens: Sequence[int]) -> None:
        """Evaluate `tokens` after the cached ones (the history is the caller's)."""
        if tokens:
            self._llama.eval(tokens)

    def eval_prompt(
        self,
        tokens: Sequence[int],
        prompt: bytes | None = None,
        then: Sequence[int] = (),
        pieces: Sequence[bytes] = (),
    ) -> None:
        """Evaluate prompt tokens and record them.

        Args:
            tokens: The prompt's next tokens.
            prompt: The whole prompt's text, once `tokens` are its last ones.
            then: Generated tokens to evaluate in the same batch, after the prompt's last ones.
            pieces: The bytes of each of `then`.
        """
        self.eval([*tokens, *then])
        self.history.extend_prompt(tokens)
        if prompt is not None:
            self.history.set_prompt(prompt)
            self.history.extend_generated(then, pieces)

    def eval_generated(self, tokens: Sequence[int], pieces: Sequence[bytes]) -> None:
        """Evaluate generated tokens and record them with their bytes."""
        if tokens:
            self.eval(tokens)
            self.history.extend_generated(tokens, pieces[: len(tokens)])

    def logits(self) -> Any:
        """The logits after the last evaluated token (valid until the next eval)."""
        return _llama.last_logits(self._llama, self._n_vocab)

    def save(self) -> Any:
        """A copy of what the cache holds now, for `restore` (`len()` of it: its size in bytes)."""
        return _llama.save_sequence(self._llama)

    def restore(self, history: TokenHistory, state: Any) -> None:
        """Hold again what the cache held when `save` copied `state`, with `history` as its
        history; an empty cache if llama.cpp refuses the state."""
        n = _llama.restore_sequence(self._llama, state, history.tokens)
        self.history = history
        if n < len(history.tokens):
            history.clear()

    def truncate(self, n: int) -> None:
        """Cut the cache (and the history) to its first `n` tokens."""
        if n < self.n_tokens:
            _llama.keep(self._llama, n)
        self.history.truncate(self.n_tokens)

    def cut(self, n: int) -> None:
        """Forget the tokens evaluated after the first `n` (decoded ahead, not in the history)."""
        if self.n_tokens <= n:
            return
        if _llama.keep(self._llama, n) < n:  # a cache that cannot be cut in the middle
            self.eval(self.history.tokens[:n])

    def sync(self) -> None:
        """After a generation, however it ended: the history matches the cache."""
        n = min(self.n_tokens, len(self.history.tokens))
        if _llama.evaluated(self._llama, n) != self.history.tokens[:n]:
            n = 0  # should not happen; start over rather than trust a mismatch
        n = _llama.keep(self._llama, n)
        self.history.truncate(n)
        if n == 0:
            self.history.clear()
