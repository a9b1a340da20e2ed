"""Real engines: each is a `Model` (see `aerix.model`).

Engines are imported by path and load their optional dependencies lazily:
`aerix.engines.LlamaCpp` needs the `llama` extra, `aerix.engines.OpenAICompatible`
the `server` extra.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .llamacpp import LlamaCpp
    from .openai import OpenAICompatible

__all__ = ["LlamaCpp", "OpenAICompatible"]


def __getattr__(name: str) -> Any:
    if name == "LlamaCpp":
        from .llamacpp import LlamaCpp

        return LlamaCpp
    if name == "OpenAICompatible":
        from .openai import OpenAICompatible

        return OpenAICompatible
    raise AttributeError(f"module 'aerix.engines' has no attribute {name!r}")
