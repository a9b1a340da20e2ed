"""A llama.cpp vocabulary: token bytes, end-of-generation tokens, llguidance's tokenizer."""

from __future__ import annotations

import ctypes
import warnings
from typing import Any

try:
    import llama_cpp
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError("aerix.engines.LlamaCpp needs llama-cpp-python: pip install 'aerix[llama]'") from exc

__all__ = ["Vocab"]

_PROBE = "x  y\n\tz é".encode()
"""A text to tokenise alone: spaces, control characters and a two-byte character."""


class Vocab:
    """The vocabulary of a loaded model.

    Args:
        model: The `llama_model` pointer.
    """

    def __init__(self, model: Any) -> None:
        self.ptr = llama_cpp.llama_model_get_vocab(model)
        self.size = int(llama_cpp.llama_vocab_n_tokens(self.ptr))
        """Tokens in the vocabulary (the logits' length)."""
        self.byte_level = llama_cpp.llama_vocab_type(self.ptr) == llama_cpp.LLAMA_VOCAB_TYPE_BPE
        """Whether the tokens are byte-level BPE: any piece of text tokenises alone exactly."""
        spm = llama_cpp.llama_vocab_type(self.ptr) == llama_cpp.LLAMA_VOCAB_TYPE_SPM
        self.exact_pieces = self.byte_level or (spm and self.spells_alone(_PROBE))
        """Whether any piece of text tokenises alone into tokens that spell it exactly, so
        that the new part of a prompt can be tokenised after the cached bytes
        (`TokenHistory.plan(text_reuse=True)`): byte-level BPE, or a SentencePiece
        vocabulary that adds no leading space (Gemma's; Llama 2's adds one)."""
        self._pieces: dict[int, tuple[bytes, bytes]] = {}
        self._texts: dict[int, str] = {}
        self._longest: int | None = None

    @property
    def longest(self) -> int:
        """The most bytes one token spells (read once, when first asked): a text of `n` bytes
        has at least `n / longest` tokens."""
        if self._longest is None:
            self._longest = max(1, *(len(self.raw_piece(t)) for t in range(self.size)))
        return self._longest

    def piece(self, token: int) -> tuple[bytes, bytes]:
        """The token's bytes: (with special tokens spelled out, as shown to the user)."""
        cached = self._pieces.get(token)
        if cached is None:
            raw = self.raw_piece(token)
            control = llama_cpp.llama_vocab_get_attr(self.ptr, token) & llama_cpp.LLAMA_TOKEN_ATTR_CONTROL
            cached = (raw, b"" if control else raw)
            self._pieces[token] = cached
        return cached

    def piece_text(self, token: int) -> str:
        """The token's visible text (a partial UTF-8 character dropped), cached."""
        cached = self._texts.get(token)
        if cached is None:
            cached = self._texts[token] = self.piece(token)[1].decode(errors="ignore")
        return cached

    def raw_piece(self, token: int) -> bytes:
        """The token's bytes, special tokens spelled out (`<|im_end|>`)."""
        size = 64
        while True:
            buf = ctypes.create_string_buffer(size)
            n = int(llama_cpp.llama_token_to_piece(self.ptr, token, buf, size, 0, True))
            if n >= 0:
                return buf.raw[:n]
            size = -n

    def spells_alone(self, text: bytes) -> bool:
        """Whether `text`, tokenised on its own (no BOS, no special tokens), spells `text` again."""
        room = len(text) + 8
        tokens = (llama_cpp.llama_token * room)()
        n = int(llama_cpp.llama_tokenize(self.ptr, text, len(text), tokens, room, False, False))
        return n >= 0 and b"".join(self.raw_piece(t) for t in tokens[:n]) == text

    def text(self, token: int) -> str:
        """The token as text; `""` for -1 (no such token)."""
        return "" if token < 0 else self.raw_piece(token).decode(errors="replace")

    def is_end(self, token: int) -> bool:
        """Whether the token ends a generation (EOS, end of turn)."""
        return bool(llama_cpp.llama_vocab_is_eog(self.ptr, token))

    def lltokenizer(self) -> Any:
        """llguidance's tokenizer for this vocabulary (takes a while for a large one)."""
        from llguidance.llamacpp import lltokenizer_from_vocab

        ends = [t for t in range(self.size) if self.is_end(t)]
        with warnings.catch_warnings():  # it calls a llama_cpp function deprecated in 0.3.x
            warnings.simplefilter("ignore", DeprecationWarning)
            return lltokenizer_from_vocab(self.ptr, n_vocab=self.size, eos_token=ends or None)
