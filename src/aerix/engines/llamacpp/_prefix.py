"""Prefix reuse: which tokens of a new prompt the KV cache already holds.

The engine keeps the tokens of its KV cache and the bytes they spell: the last
rendered prompt, then one piece per generated token that was evaluated. When
the next rendered prompt starts with those bytes, the new prompt is the cached
tokens plus the tokenisation of the rest. The sampled tokens are kept as they
are: re-tokenising the assistant's text would often split it differently and
lose the match inside the first assistant turn. Otherwise the longest common
token prefix of a fresh tokenisation is reused.

Pure logic, no llama.cpp: the tokenizer is passed in.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

__all__ = ["Plan", "TokenHistory"]

Tokenize = Callable[[bytes, bool], list[int]]
"""`tokenize(text, add_bos)`: special tokens parsed."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Plan:
    """How to prefill one prompt."""

    tokens: list[int]
    """The whole prompt."""
    reuse: int
    """How many leading tokens of `tokens` the cache holds already (< len(tokens))."""


def _common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def _is_continuation(byte: int) -> bool:
    return byte & 0xC0 == 0x80


@dataclass(kw_only=True, slots=True)
class TokenHistory:
    """The tokens in the KV cache, in order, and the bytes they spell.

    Invariant: `tokens[:prompt_len]` is the tokenisation of `prompt`, and
    `tokens[prompt_len:]` are generated tokens whose bytes are `pieces`, one
    each. `prompt is None` when the bytes are unknown (an interrupted prefill).
    """

    tokens: list[int] = field(default_factory=list)
    prompt: bytes | None = None
    prompt_len: int = 0
    pieces: list[bytes] = field(default_factory=list)

    def plan(self, text: bytes, tokenize: Tokenize, *, text_reuse: bool = True) -> Plan:
        """Tokenise the prompt `text`, reusing as much of the cache as possible.

        Args:
            text: The rendered prompt.
            tokenize: The model's tokenizer.
            text_reuse: Whether to match on bytes (exact for byte-level BPE
                vocabularies); if false, only the token prefix is compared.
        """
        if text_reuse and self.prompt is not None and text.startswith(self.prompt):
            pos, k = len(self.prompt), self.prompt_len
            for piece in self.pieces:
                if not piece or not text.startswith(piece, pos):
                    break
                pos, k = pos + len(piece), k + 1
            # The rest must start on a character boundary to be tokenised alone.
            while k > self.prompt_len and pos < len(text) and _is_continuation(text[pos]):
                k -= 1
                pos -= len(self.pieces[k - self.prompt_len])
            rest = text[pos:]
            tokens = self.tokens[:k] + (tokenize(rest, False) if rest else [])
            reuse = k
        else:
            tokens = tokenize(text, True)
            reuse = _common_prefix(self.tokens, tokens)
        if not tokens:
            raise ValueError("the rendered prompt is empty: there is nothing to generate from")
        # At least one token is evaluated, so that its logits are fresh.
        return Plan(tokens=tokens, reuse=min(reuse, len(tokens) - 1))

    def truncate(self, n: int) -> None:
        """Keep only the first `n` tokens (the cache was cut there)."""
        if n >= len(self.tokens):
            return
        del self.tokens[n:]
        if self.prompt is not None:
            if n >= self.prompt_len:
                del self.pieces[n - self.prompt_len :]
            else:
                self.prompt, self.prompt_len, self.pieces = None, 0, []

    def extend_prompt(self, tokens: Sequence[int]) -> None:
        """Record prompt tokens that were evaluated; the bytes are unknown until `set_prompt`."""
        self.tokens.extend(tokens)
        self.prompt, self.prompt_len, self.pieces = None, 0, []

    def set_prompt(self, text: bytes) -> None:
        """Record that all tokens so far spell the prompt `text`."""
        self.prompt, self.prompt_len, self.pieces = text, len(self.tokens), []

    def extend_generated(self, tokens: Sequence[int], pieces: Sequence[bytes]) -> None:
        """Record generated tokens that were evaluated, with their bytes."""
        self.tokens.extend(tokens)
        if self.prompt is not None:
            self.pieces.extend(pieces)

    def clear(self) -> None:
        """Forget everything (the cache was cleared)."""
        self.tokens.clear()
        self.prompt, self.prompt_len, self.pieces = None, 0, []
