"""The llama.cpp engine: `LlamaCpp`, a local GGUF model as an aerix `Model`.

The package shows its parts: `engine` (the public class, its worker thread),
the decode loop and its look-ahead, the chat template, the vocabulary, the
prefix reuse, and `rules/`, the value rules behind the decode hooks.
"""

from __future__ import annotations

from ._stats import GenerationStats, Progress
from .engine import CLOSE_BIAS, COPY_BIAS, FIT_THRESHOLD, STRING_CHOICES, LlamaCpp

__all__ = [
    "CLOSE_BIAS",
    "COPY_BIAS",
    "FIT_THRESHOLD",
    "STRING_CHOICES",
    "GenerationStats",
    "LlamaCpp",
    "Progress",
]
