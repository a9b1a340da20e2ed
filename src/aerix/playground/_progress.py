"""What the engine is doing while a run waits on it, for the page: `read_progress(model)`.

An engine may expose a `progress` attribute (`LlamaCpp` does): `None` when it
is idle, else an object with `phase` (`"prefill"` or `"decode"`),
`prompt_tokens` (the whole prompt), `cached_tokens`, `prefilled_tokens`
(evaluated so far), `generated_tokens` and `seconds` (since the generation
started). It is read duck-typed: other models have none, and one that cannot be
read counts as none, so a broken engine never breaks the page's stream.
"""

from __future__ import annotations

import inspect
import math
from typing import Any

__all__ = ["IDLE", "has_progress", "progress_text", "read_progress"]

IDLE: dict[str, Any] = {"type": "progress", "phase": None, "text": ""}
"""The frame that says the engine is not generating (between generations, while tools run)."""
_MISSING = object()


def has_progress(model: object) -> bool:
    """Whether `model` says what it is doing: it has a `progress` attribute (looked up, not read)."""
    return inspect.getattr_static(model, "progress", _MISSING) is not _MISSING


def read_progress(model: object) -> dict[str, Any] | None:
    """The model's progress as plain JSON with a `text` for the page, or `None` when idle or unreadable.

    Example:
        >>> from types import SimpleNamespace
        >>> p = SimpleNamespace(phase="prefill", prompt_tokens=1100, cached_tokens=45,
        ...                     prefilled_tokens=384, generated_tokens=0, seconds=3.21)
        >>> read_progress(SimpleNamespace(progress=p))["text"]
        'prefill 384/1055 tokens (45 cached) · 3.2 s'
    """
    try:
        p = getattr(model, "progress", None)
        if p is None:
            return None
        phase = p.phase
        counts = {
            key: int(getattr(p, key))
            for key in ("prompt_tokens", "cached_tokens", "prefilled_tokens", "generated_tokens")
        }
        seconds = float(p.seconds)
    except Exception:  # not an engine's progress after all
        return None
    if phase not in ("prefill", "decode") or not math.isfinite(seconds):
        return None
    text = progress_text(phase, seconds=seconds, **counts)
    return {"type": "progress", "phase": phase, **counts, "seconds": round(seconds, 2), "text": text}


def progress_text(
    phase: str,
    *,
    prompt_tokens: int,
    cached_tokens: int,
    prefilled_tokens: int,
    generated_tokens: int,
    seconds: float,
) -> str:
    """One line for the page: `prefill 384/1055 tokens · 3.2 s`, or `decoding · 12 tokens · 4.1 s`.

    The prefill counts against the prompt tokens the engine has to evaluate
    (the whole prompt less its cached part).
    """
    took = f"{seconds:.1f} s"
    if phase == "prefill":
        todo = max(prompt_tokens - cached_tokens, 0)
        cached = f" ({cached_tokens} cached)" if cached_tokens else ""
        return f"prefill {min(prefilled_tokens, todo)}/{todo} tokens{cached} · {took}"
    return f"decoding · {generated_tokens} token{'' if generated_tokens == 1 else 's'} · {took}"
