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
    prefill_s: float
    """Seconds spent rendering, tokenising and prefilling."""
    decode_s: float
    """Seconds spent generating."""


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
