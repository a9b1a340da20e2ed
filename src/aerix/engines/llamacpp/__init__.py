"""The llama.cpp engine: `LlamaCpp`, a local GGUF model as an aerix `Model`.

The package shows its parts: `engine` (the public class, its worker thread),
the decode loop and its look-ahead, the chat template, the vocabulary, the
prefix reuse, and `rules/`, the value rules behind the decode hooks.
"""

from __future__ import annotations

_NEEDS = {"numpy": "numpy", "llama_cpp": "llama-cpp-python", "llguidance": "llguidance", "jinja2": "jinja2"}
"""The `llama` extra's packages that the engine imports, by module."""

try:
    from ._fit_thresholds import FIT_THRESHOLDS, fit_key
    from ._stats import GenerationStats, Progress
    from .engine import CLOSE_BIAS, COPY_BIAS, FIT_THRESHOLD, STRING_CHOICES, LlamaCpp
except ModuleNotFoundError as exc:  # an extra's package, not aerix's own
    if exc.name not in _NEEDS:
        raise
    raise ImportError(f"aerix.engines.LlamaCpp needs {_NEEDS[exc.name]}: pip install 'aerix[llama]'") from exc

__all__ = [
    "CLOSE_BIAS",
    "COPY_BIAS",
    "FIT_THRESHOLD",
    "FIT_THRESHOLDS",
    "STRING_CHOICES",
    "GenerationStats",
    "LlamaCpp",
    "Progress",
    "fit_key",
]
