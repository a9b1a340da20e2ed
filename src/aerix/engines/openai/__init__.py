"""The OpenAI-compatible server engine: `OpenAICompatible` (vLLM, SGLang, llama.cpp's server, Ollama)."""

from __future__ import annotations

from .engine import Dialect, EngineError, OpenAICompatible

__all__ = ["Dialect", "EngineError", "OpenAICompatible"]
