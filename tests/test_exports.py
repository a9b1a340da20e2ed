"""The public names: documented ones are exported, `__all__` is sorted."""

from __future__ import annotations

import aerix
import aerix.engines
import aerix.model
import aerix.testing

SPEC_EXPORTS = {
    "Agent", "tool", "Field", "Limits", "Hooks", "AerixError", "AbortController", "AbortSignal",
    "AgentEvent", "Call", "EndReason", "Model", "Tool", "load",
    "TextEvent", "UsageEvent", "TurnEvent", "CallEvent", "ResultEvent", "RetryEvent", "FinalEvent", "EndEvent",
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
    assert set(aerix.engines.__all__) == {"LlamaCpp", "OpenAICompatible"}
