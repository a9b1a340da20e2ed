"""Running the agent benchmark's tasks through `aerix.Agent` and summing up the figures."""

from __future__ import annotations

import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from aerix import Agent, Limits
from aerix.events import CallEvent, EndEvent, FinalEvent, ResultEvent, UsageEvent
from aerix.model import Model

from .score import solved
from .tasks import PARTS, Part, Task, part_of
from .world import TOOLS

__all__ = ["Outcome", "Summary", "run_task", "summarise", "summary_table"]


@dataclass(frozen=True, kw_only=True, slots=True)
class Outcome:
    """What one task's run gave."""

    id: str
    part: Part
    config: str
    solved: bool
    """The run ended with a final that holds the expected answer."""
    ending: str
    """`final`, or the end reason (`turns`, `retries`, `error`)."""
    final: str
    """The final's text, or the end's message."""
    generations: int
    calls: list[dict[str, Any]] = field(default_factory=list)
    """The calls that ran (or were refused), in order: tool, input, result, error."""
    seconds: float


async def run_task(
    model: Model, task: Task, config: str, *, generation: dict[str, Any] | None = None, instructions: str = ""
) -> Outcome:
    """Run one task through an `Agent` with the tools it needs and `Limits(turns=8)`."""
    agent = Agent(
        model=model,
        instructions=instructions,
        tools=[TOOLS[name] for name in task.tools],
        limits=Limits(turns=8),
        generation=generation,
    )
    calls: list[dict[str, Any]] = []
    inputs: dict[str, tuple[str, dict[str, Any]]] = {}
    generations = 0
    ending, final = "error", "the run yielded no ending"
    t0 = time.perf_counter()
    async for ev in agent.run(task.prompt):
        if isinstance(ev, UsageEvent):
            generations += 1
        elif isinstance(ev, CallEvent):
            inputs[ev.id] = (ev.tool, ev.input)
        elif isinstance(ev, ResultEvent):
            tool, given = inputs.get(ev.id, (ev.tool, {}))
            calls.append({"tool": tool, "input": given, "result": ev.text, "error": ev.error})
        elif isinstance(ev, FinalEvent):
            ending, final = "final", ev.text
        elif isinstance(ev, EndEvent):
            ending, final = ev.reason, ev.message
    seconds = time.perf_counter() - t0
    return Outcome(
        id=task.id,
        part=part_of(task),
        config=config,
        solved=ending == "final" and solved(final, task.answer),
        ending=ending,
        final=final,
        generations=generations,
        calls=calls,
        seconds=seconds,
    )


@dataclass(frozen=True, kw_only=True, slots=True)
class Summary:
    """The figures of one configuration on one part of the task set."""

    config: str
    part: Part
    run: int
    solved: int
    finals: int
    generations: float
    """Mean generations per run."""
    calls: float
    """Mean calls per run."""
    seconds: float
    """Mean seconds per task."""

    @property
    def solved_share(self) -> float:
        return self.solved / self.run if self.run else 0.0

    @property
    def final_share(self) -> float:
        return self.finals / self.run if self.run else 0.0

    def cells(self) -> list[str]:
        if not self.run:  # this configuration did not run this part
            return ["not run"] + ["—"] * (len(_COLUMNS) - 1)
        return [
            f"{self.solved_share:.1%} ({self.solved}/{self.run})",
            f"{self.final_share:.1%} ({self.finals}/{self.run})",
            f"{self.generations:.2f}",
            f"{self.calls:.2f}",
            f"{self.seconds:.2f}",
        ]


def summarise(config: str, part: Part, outcomes: Sequence[Outcome]) -> Summary:
    """The figures of `outcomes`, the runs of `config` on `part`."""
    mine = [o for o in outcomes if o.config == config and o.part == part]
    mean = statistics.fmean
    return Summary(
        config=config,
        part=part,
        run=len(mine),
        solved=sum(o.solved for o in mine),
        finals=sum(o.ending == "final" for o in mine),
        generations=mean([o.generations for o in mine]) if mine else 0.0,
        calls=mean([len(o.calls) for o in mine]) if mine else 0.0,
        seconds=mean([o.seconds for o in mine]) if mine else 0.0,
    )


_COLUMNS = ["solved", "ended with a final", "generations/run", "calls/run", "s/task"]


def summary_table(configs: Sequence[tuple[str, str]], outcomes: Sequence[Outcome]) -> str:
    """One row per configuration (name, label): the report part's figures, the tuning
    part's beside them, and the gap in the share solved (report minus tuning)."""
    # The report part first: it is the figure to quote. A part that did not run has no columns.
    parts = [p for p in PARTS[::-1] if any(o.part == p for o in outcomes)]
    header = ["configuration"]
    for part in parts:
        header += [f"{part}: {c}" for c in _COLUMNS]
    both = len(parts) == 2
    if both:
        header.append("solved: report - tuning")
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for name, label in configs:
        summaries = [summarise(name, p, outcomes) for p in parts]
        if not any(s.run for s in summaries):
            continue
        row = [label, *(cell for s in summaries for cell in s.cells())]
        if both:
            ran = all(s.run for s in summaries)
            gap = summaries[0].solved_share - summaries[1].solved_share
            row.append(f"{100 * gap:+.1f} points" if ran else "—")
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)
