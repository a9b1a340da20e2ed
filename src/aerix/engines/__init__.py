"""Real engines: each is a `Model` (see `aerix.model`).

Engines are imported by path and load their optional dependencies lazily:
`aerix.engines.LlamaCpp` needs the `llama` extra, `aerix.engines.OpenAICompatible`
the `server` extra. `local_models()` lists the models that `aerix.load` takes
without a network; `SHORT_NAMES` the models on the Hugging Face Hub that it
takes by a short name.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._load import SHORT_NAMES, LocalModel, local_models

if TYPE_CHECKING:
    from .llamacpp import LlamaCpp
    from .openai import OpenAICompatible

__all__ = ["SHORT_NAMES", "LlamaCpp", "LocalModel", "OpenAICompatible", "local_models"]


def __getattr__(name: str) -> Any:
    if name == "LlamaCpp":
        from .llamacpp import LlamaCpp

        return LlamaCpp
    if name == "OpenAICompatible":
        from .openai import OpenAICompatible

        return OpenAICompatible
    raise AttributeError(f"module 'aerix.engines' has no attribute {name!r}")
