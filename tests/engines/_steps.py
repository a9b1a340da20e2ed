"""A decode step for hook tests: a model-free `Step` over a fixed list of token pieces."""

from __future__ import annotations

from typing import Any

import numpy as np

from aerix._handover import INPUT_PATH, TOOL_PATH
from aerix.engines.llamacpp._hooks import Step
from aerix.engines.llamacpp._sampling import Sampling
from aerix.engines.llamacpp.rules import Context, ValueBias
from aerix.engines.llamacpp.rules._site import CallSite
from aerix.model import Handover

AGENT = Handover(tool_path=TOOL_PATH, input_path=INPUT_PATH)
"""An agent's hand-over with nothing in it but where a turn's calls sit."""
SITE = CallSite.of(AGENT)
"""Where an agent's turn puts a call's tool name and input."""


def fake_step(bias: ValueBias, pieces: list[str], lookahead: Any = None, temperature: float = 0.0) -> Step:
    """A `Step` whose token `i` is `pieces[i]`, with `lookahead` (a fake, or `None` for a hook
    that never decodes ahead) and no constraint (the fakes never read it)."""
    return Step(
        bias=bias,
        constrained=None,  # type: ignore[arg-type]
        lookahead=lookahead,
        piece=pieces.__getitem__,
        stopped=lambda: False,
        sampling=Sampling(temperature=temperature),
        rng=np.random.default_rng(0),
        room=None,
    )


def rules_for(source: str = "", **options: Any) -> ValueBias:
    """One generation's value rules copying from `source`, with `options` (`Context`'s fields)."""
    return ValueBias(Context(source=source, **options))
