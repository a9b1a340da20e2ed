"""Running BFCL entries through `aerix.Agent` and summing up the figures."""

from __future__ import annotations

import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from _report import Progress
from aerix import Agent, Limits
from aerix.events import EndEvent, FinalEvent, ResultEvent, RetryEvent, TurnEvent, UsageEvent
from aerix.model import Model

from .checker import Check, check_entry
from .data import Entry, to_tools

__all__ = ["Config", "Outcome", "Progress", "Summary", "run_entry", "summarise"]


@dataclass(frozen=True, kw_only=True, slots=True)
class Config:
    """How the agent is set up for a run of the harness."""

    constrain: bool = True
    tool_choice: str = "required"
    max_tokens: int = 256
    retries: int = 2
    instructions: str = ""
    calls_per_turn: int = 1

    @property
    def label(self) -> str:
        calls = f", {self.calls_per_turn} calls/turn" if self.calls_per_turn > 1 else ""
        return f"{'constrained' if self.constrain else 'unconstrained'}, {self.tool_choice}{calls}"


@dataclass(frozen=True, kw_only=True, slots=True)
class Outcome:
    """What one entry's run gave."""

    id: str
    valid: bool
    """A valid first turn came (within the retries)."""
    first_valid: bool
    """The first generation was already a valid turn."""
    check: Check
    calls: list[dict[str, dict[str, Any]]]
    """The first turn's calls, BFCL-style `{name: {param: value}}`."""
    recorded: int
    """Calls the tools received (after aerix's input check)."""
    generations: int
    tokens: int
    """Completion tokens over the run's generations up to its first valid turn."""
    seconds: float
    end: str = ""
    """The run's end reason and message, when it ended without a first turn."""


async def run_entry(model: Model, entry: Entry, config: Config) -> Outcome:
    """Run one entry's question through an `Agent` up to the first turn's results."""
    recorded: list[tuple[str, dict[str, Any]]] = []
    tools, names = to_tools(entry.functions, lambda name, inp: recorded.append((name, inp)))
    agent = Agent(
        model=model,
        instructions=config.instructions,
        tools=tools,
        limits=Limits(turns=config.retries + 1, retries=config.retries, max_tokens=config.max_tokens),
        generation={"temperature": 0},
        constrain=config.constrain,
        tool_choice=config.tool_choice,
        calls_per_turn=config.calls_per_turn,
    )
    t0 = time.perf_counter()
    tokens = generations = retries = 0
    turn: TurnEvent | None = None
    final = False
    end = ""
    results = 0
    events = agent.run(entry.question)
    try:
        async for ev in events:
            if isinstance(ev, UsageEvent):
                tokens += ev.completion_tokens
                generations += 1
            elif isinstance(ev, RetryEvent):
                retries += 1
            elif isinstance(ev, TurnEvent):
                turn = ev
            elif isinstance(ev, ResultEvent):
                results += 1
                if turn is not None and results == len(turn.calls):
                    break
            elif isinstance(ev, FinalEvent):
                final = True
                break
            elif isinstance(ev, EndEvent):
                end = f"{ev.reason}: {ev.message}"
                break
    finally:
        await events.aclose()  # type: ignore[attr-defined]
    seconds = time.perf_counter() - t0
    calls = [] if turn is None else [{names.get(c.tool, c.tool): dict(c.input)} for c in turn.calls]
    valid = turn is not None or final
    if valid:
        check = check_entry(_category(entry.id), entry.functions, calls, entry.answers)
    else:
        check = Check(valid=False, error=f"no valid turn ({end})")
    return Outcome(
        id=entry.id,
        valid=valid,
        first_valid=valid and retries == 0,
        check=check,
        calls=calls,
        recorded=len(recorded),
        generations=generations,
        tokens=tokens,
        seconds=seconds,
        end=end,
    )


def _category(entry_id: str) -> str:
    return entry_id.rsplit("_", 1)[0]


@dataclass(frozen=True, kw_only=True, slots=True)
class Summary:
    """The figures of one configuration on one category."""

    category: str
    config: str
    part: str = "all"
    """The part of the category run: "tuning", "report" or "all" (`data.part_of`)."""
    run: int
    skipped: int
    valid: float
    first_valid: float
    accuracy: float
    tokens_per_turn: float
    seconds_per_entry: float

    def row(self) -> list[str]:
        return [
            self.category,
            self.part,
            self.config,
            str(self.run),
            str(self.skipped),
            f"{self.valid:.0%}",
            f"{self.first_valid:.0%}",
            f"{self.accuracy:.1%}",
            f"{self.tokens_per_turn:.1f}",
            f"{self.seconds_per_entry:.2f}",
        ]


HEADER = [
    "category",
    "part",
    "decoding, tool_choice",
    "run",
    "skipped",
    "valid turn",
    "valid 1st gen",
    "accuracy",
    "tokens/gen",
    "s/entry",
]


def summarise(
    category: str, config: str, outcomes: Sequence[Outcome], skipped: int, part: str = "all"
) -> Summary:
    n = len(outcomes) or 1
    gens = sum(o.generations for o in outcomes) or 1
    return Summary(
        category=category,
        config=config,
        part=part,
        run=len(outcomes),
        skipped=skipped,
        valid=sum(o.valid for o in outcomes) / n,
        first_valid=sum(o.first_valid for o in outcomes) / n,
        accuracy=sum(o.check.valid for o in outcomes) / n,
        tokens_per_turn=sum(o.tokens for o in outcomes) / gens,
        seconds_per_entry=statistics.fmean([o.seconds for o in outcomes]) if outcomes else 0.0,
    )


def table(rows: Sequence[Sequence[str]], header: Sequence[str] = HEADER) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)
