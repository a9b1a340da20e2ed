"""The public names: documented ones are exported, `__all__` is sorted."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import aerix
import aerix.engines
import aerix.model
import aerix.testing

SPEC_EXPORTS = {
    "Agent", "tool", "Field", "Limits", "Hooks", "AerixError", "AbortController", "AbortSignal",
    "AgentEvent", "Call", "EndReason", "Model", "Tool", "load",
    "TextEvent", "UsageEvent", "TurnEvent", "CallEvent", "ResultEvent", "RetryEvent", "FinalEvent", "EndEvent",
    "TrimEvent",
}  # fmt: skip


def test_spec_names_are_exported() -> None:
    assert set(aerix.__all__) >= SPEC_EXPORTS
    for name in aerix.__all__:
        assert getattr(aerix, name) is not None, name


def test_all_is_sorted() -> None:
    assert aerix.__all__ == sorted(aerix.__all__)
    assert aerix.model.__all__ == sorted(aerix.model.__all__)


def test_model_types() -> None:
    for name in (
        "ChatMessage",
        "GenerationOptions",
        "GenerateOptions",
        "Usage",
        "Delta",
        "Model",
        "Constraint",
    ):
        assert hasattr(aerix.model, name)
    assert isinstance(aerix.testing.ScriptedModel(), aerix.Model)
    assert aerix.model.Delta().done is False


def test_engines_are_lazy() -> None:
    assert set(aerix.engines.__all__) == {
        "LlamaCpp",
        "OpenAICompatible",
        "LocalModel",
        "SHORT_NAMES",
        "local_models",
    }


def test_model_path_is_public_and_finds_a_models_gguf_or_names_the_fix(tmp_path: Path) -> None:
    assert "model_path" in aerix.__all__
    gguf = tmp_path / "tiny.gguf"
    gguf.write_bytes(b"GGUF")
    assert aerix.model_path(str(gguf)) == gguf
    with pytest.raises(FileNotFoundError, match="no GGUF file at"):
        aerix.model_path(str(tmp_path / "missing.gguf"))


def test_importing_aerix_and_its_model_path_loads_no_engine() -> None:
    code = (
        "import sys, aerix; from aerix import model_path; "
        "assert callable(aerix.load) and callable(model_path); "
        "print(sorted(m for m in sys.modules if m.startswith(('llama_cpp', 'llguidance', 'httpx'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
