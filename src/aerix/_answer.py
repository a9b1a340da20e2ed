"""`Answer`, what `Agent.ask` returns: the final's text and value, and every event of the run."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .errors import AerixError
from .events import _TEXT, AgentEvent, EndEvent, FinalEvent, _short, _tally, _typed

__all__ = ["Answer", "answer_of"]


@dataclass(frozen=True, slots=True)
class Answer:
    """What `ask` returns: the final's text, its value, and every event of the run."""

    text: str
    """The final answer (for an `output` other than `str`, the value's JSON text)."""
    events: tuple[AgentEvent, ...]
    """Every event of the run, the final last."""
    output: Any = _TEXT
    """The answer converted to the agent's `output` type: the text itself for `str`."""

    def __post_init__(self) -> None:
        if self.output is _TEXT:
            object.__setattr__(self, "output", self.text)

    def __repr__(self) -> str:
        value = f", output={_short(self.output)}" if _typed(self.text, self.output) else ""
        return f"Answer(text={_short(self.text)}{value}, events=<{_tally(self.events)}>)"


def answer_of(events: list[AgentEvent]) -> Answer:
    """The answer of a run's events, or (on any ending but a final) `AerixError(kind="end")`."""
    last = events[-1] if events else None
    if isinstance(last, FinalEvent):
        return Answer(text=last.text, events=tuple(events), output=last.output)
    reason = last.reason if isinstance(last, EndEvent) else "error"
    message = last.message if isinstance(last, EndEvent) else "the run produced no ending"
    raise AerixError(
        "end", f"the run ended without a final ({reason}): {message}", reason=reason, events=events
    )
