"""Pick the next token from logits, and turn token bytes into safe text.

Sampling follows llama.cpp's default chain: top-k, top-p and min-p on the
distribution at temperature 1, then temperature; temperature 0 is greedy. An
optional token mask (llguidance's bitmask: one bit per token, set when
allowed) removes the tokens a constraint forbids.
"""

from __future__ import annotations

import codecs
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

__all__ = ["Sampling", "TextStream", "allowed_bits", "mask_logits", "sample"]

Logits = npt.NDArray[np.float32]
Bitmask = npt.NDArray[np.int32]


@dataclass(frozen=True, kw_only=True, slots=True)
class Sampling:
    """Sampling settings (llama.cpp's defaults)."""

    temperature: float = 0.8
    """0 is greedy."""
    top_k: int = 40
    """Keep the k likeliest tokens; 0 keeps all."""
    top_p: float = 0.95
    """Keep the likeliest tokens whose probabilities sum to p; 1 keeps all."""
    min_p: float = 0.05
    """Drop tokens less likely than min_p times the likeliest; 0 keeps all."""


def _allowed(mask: Bitmask, token: int) -> bool:
    return bool((int(mask[token >> 5]) >> (token & 31)) & 1)


def allowed_bits(mask: Bitmask, n: int) -> npt.NDArray[np.bool_]:
    """The mask's first `n` bits, one bool per token (a view of the unpacked bytes)."""
    return np.unpackbits(mask.view(np.uint8), count=n, bitorder="little").view(np.bool_)


def mask_logits(logits: Logits, mask: Bitmask) -> Logits:
    """A copy of the logits with the tokens the mask forbids at minus infinity."""
    out = np.full_like(logits, -np.inf)
    np.copyto(out, logits, where=allowed_bits(mask, logits.shape[0]))
    return out


def top_tokens(logits: Logits, k: int) -> npt.NDArray[np.intp]:
    """The `k` tokens of highest logit among those not at minus infinity (all of them if
    fewer), in token order.

    It partitions the allowed tokens alone: `np.argpartition` over a masked vector, minus
    infinity nearly everywhere, is many times slower than over one with none masked, and
    this runs for every nudged token.
    """
    allowed = np.flatnonzero(np.isfinite(logits))
    if k <= 0:
        return allowed[:0]
    if allowed.size > k:
        cut = allowed.size - k
        allowed = np.sort(allowed[np.argpartition(logits[allowed], cut)[cut:]])
    return allowed


def sample(logits: Logits, s: Sampling, rng: np.random.Generator, mask: Bitmask | None = None) -> int:
    """The next token.

    Args:
        logits: The model's logits for the next position (not modified).
        s: The sampling settings.
        rng: The random generator (seeded for reproducible sampling).
        mask: Allowed tokens, one bit each; `None` allows all.
    """
    if s.temperature <= 0:
        best = int(np.argmax(logits))
        if mask is None or _allowed(mask, best):
            return best
        return int(np.argmax(mask_logits(logits, mask)))
    work = logits if mask is None else mask_logits(logits, mask)
    idx = top_tokens(work, s.top_k if s.top_k > 0 else work.shape[0])
    cand = work[idx].astype(np.float64)
    if idx.size == 0:
        raise RuntimeError("no token is allowed: the constraint left nothing to sample")
    order = np.argsort(-cand, kind="stable")
    idx, cand = idx[order], cand[order]
    p = np.exp(cand - cand[0])
    p /= p.sum()
    keep = np.ones(idx.size, dtype=bool)
    if s.top_p < 1.0:
        keep &= (np.cumsum(p) - p) < s.top_p
    if s.min_p > 0.0:
        keep &= p >= s.min_p * p[0]
    keep[0] = True
    idx, cand = idx[keep], cand[keep]
    q = np.exp((cand - cand[0]) / s.temperature)
    q /= q.sum()
    return int(idx[rng.choice(idx.size, p=q)])


class TextStream:
    """Token bytes in, text out: UTF-8 safe across tokens, cut at stop strings.

    A character split over two tokens comes out whole with the second one; text
    that may be the start of a stop string is held back until it is known not
    to be one.

    Args:
        stops: Stop strings; the text ends before the first one to be complete.
    """

    def __init__(self, stops: Sequence[str] = ()) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._stops = [s for s in stops if s]
        self._held = ""
        self.stopped = False
        """Whether a stop string appeared."""

    def push(self, data: bytes) -> str:
        """Feed the bytes of new tokens; return the text that may be shown now."""
        if self.stopped:
            return ""
        return self._scan(self._held + self._decoder.decode(data))

    def flush(self) -> str:
        """The text still held back, at the end of the generation. The first bytes of a
        character whose last ones never came (the generation stopped between them) are
        left out, not shown as U+FFFD."""
        if self.stopped:
            return ""
        self._decoder.reset()
        out = self._scan(self._held)
        if self.stopped:
            return out
        out, self._held = out + self._held, ""
        return out

    def _scan(self, buf: str) -> str:
        # The stop string completed first wins (the earliest end), as when streaming token by token.
        hits = [(i + len(s), i) for s in self._stops if (i := buf.find(s)) >= 0]
        if hits:
            self.stopped, self._held = True, ""
            return buf[: min(hits)[1]]
        hold = 0
        for s in self._stops:
            for k in range(min(len(s) - 1, len(buf)), hold, -1):
                if buf.endswith(s[:k]):
                    hold = k
                    break
        self._held = buf[len(buf) - hold :]
        return buf[: len(buf) - hold]
