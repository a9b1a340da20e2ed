"""What a generation costs (`GenerationStats`) and what the one in progress has done (`Progress`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["GenerationStats", "Progress"]


@dataclass(frozen=True, kw_only=True, slots=True)
class GenerationStats:
    """What one generation cost; `LlamaCpp.last_stats` holds the latest."""

    prompt_tokens: int
    """Tokens in the prompt."""
    cached_tokens: int
    """Prompt tokens reused from the KV cache."""
    prefilled_tokens: int
    """Prompt tokens evaluated (`prompt_tokens - cached_tokens`, fewer if aborted)."""
    completion_tokens: int
    """Tokens generated, forced ones included."""
    forced_tokens: int
    """Generated tokens that the constraint forced (jump-forward), not sampled."""
    unevaluated_tokens: int = 0
    """Generated tokens the KV cache does not hold afterwards: the last one and, where a
    JSON value was completed, the batch that completed it (nothing is sampled after
    them); a next prompt that repeats them prefills them."""
    prefill_s: float
    """Seconds spent rendering, tokenising and prefilling."""
    decode_s: float
    """Seconds spent generating. The tokens a schema forces first (`{"`) are evaluated in
    one batch with the prompt's last tokens; their share of that batch's time, by token
    count, is counted here and not in `prefill_s`."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Progress:
    """What the generation in progress has done so far (`LlamaCpp.progress`)."""

    phase: Literal["prefill", "decode"]
    """Evaluating the prompt, or generating."""
    prompt_tokens: int
    """Tokens in the prompt."""
    cached_tokens: int
    """Prompt tokens reused from the KV cache."""
    prefilled_tokens: int
    """Prompt tokens evaluated so far (of `prompt_tokens - cached_tokens`)."""
    generated_tokens: int
    """Tokens generated so far, forced ones included."""
    seconds: float
    """Seconds since the generation started."""
