"""The context window on the embedded model: a long conversation kept by trims, against the
same questions asked of a conversation reset every time.

Run: `python bench/context.py [--questions 10] [--n-ctx 4096] [--repeats 1 0] [--threads 2]
[--no-write]`. Prints a table for each `limits.repeats` given and writes them to
docs/benchmarks.md (section "context"; not with `--no-write`).

An agent on SmolLM2-135M-Instruct (`aerix.load("smollm2-instruct")`) with one tool,
`read_report(city)`, whose result is a report of about 3,500 characters, is asked
`--questions` questions, each about another city, greedy (temperature 0):

- *trims*: one conversation. When it outgrows the context (the engine refuses the
  prompt, `ContextExceeded`, or the agent's estimate says it would not fit
  `LlamaCpp.context_window`), the agent stops sending its oldest exchanges (`trim`
  events), in steps that leave room for the next turns, so the prompt's start stays
  the same and the engine's KV cache of it is reused.
- *reset*: the agent's conversation is reset before each question (what an
  application without trimming does to keep going): every question starts from the
  system message alone.

For each question the table gives the generations, the prompt tokens the engine
prefilled (`prompt_tokens - cached_tokens`, summed over the question's generations),
the trims, and how the run ended. Each strategy starts on an engine whose cache is
empty (`LlamaCpp.reset`).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from dataclasses import dataclass, field

from _report import machine, write_section

CITIES = [
    "Porto",
    "Lyon",
    "Ghent",
    "Turin",
    "Krakow",
    "Bergen",
    "Seville",
    "Utrecht",
    "Graz",
    "Tampere",
    "Bilbao",
    "Leipzig",
]
TOPICS = ["harbour", "markets", "schools", "trams", "parks", "museums", "bridges", "festivals"]


def report(city: str) -> str:
    """About 3,500 characters on `city`: a sentence on each topic, again and again, each
    time with other figures, so that no two reports share more than their wording."""
    seed = sum(map(ord, city))
    lines = [f"Report on {city}."]
    k = 0
    while sum(len(line) + 1 for line in lines) < 3500:
        topic = TOPICS[k % len(TOPICS)]
        figure = (seed * (k + 7)) % 9000 + 100
        lines.append(
            f"In {city}, the {topic} counted {figure} visitors in week {k + 1}, as the survey recorded."
        )
        k += 1
    return " ".join(lines)


@dataclass
class Question:
    """One question's run: what the engine did for it."""

    generations: int = 0
    prefilled: int = 0
    cached: int = 0
    trims: int = 0
    dropped: int = 0
    ending: str = ""


@dataclass
class Strategy:
    """One strategy's questions, in order."""

    name: str
    questions: list[Question] = field(default_factory=list)
    seconds: float = 0.0


async def _play(engine: object, questions: int, reset: bool, repeats: int) -> Strategy:
    from aerix import Agent, EndEvent, FinalEvent, TrimEvent, UsageEvent, tool

    @tool
    def read_report(city: str) -> str:
        """Read the long report on a city.

        Args:
            city: The city's name.
        """
        return report(city)

    agent = Agent(
        model=engine,  # type: ignore[arg-type]
        instructions="Answer questions about cities. Read a city's report with read_report first.",
        tools=[read_report],
        generation={"temperature": 0.0},
        limits={"repeats": repeats},
    )
    engine.reset()  # type: ignore[attr-defined]
    out = Strategy("reset" if reset else "trims")
    t0 = time.perf_counter()
    for k in range(questions):
        city = CITIES[k % len(CITIES)]
        if reset:
            agent.reset()
        q = Question()
        async for ev in agent.run(f"What does the report on {city} say about its {TOPICS[k % len(TOPICS)]}?"):
            if isinstance(ev, UsageEvent):
                q.generations += 1
                q.prefilled += ev.prompt_tokens - ev.cached_tokens
                q.cached += ev.cached_tokens
            elif isinstance(ev, TrimEvent):
                q.trims += 1
                q.dropped += ev.dropped
            elif isinstance(ev, FinalEvent):
                q.ending = "final"
            elif isinstance(ev, EndEvent):
                q.ending = ev.reason if ev.reason != "error" else f"error: {ev.message[:60]}"
        out.questions.append(q)
        print(f"  {out.name} question {k + 1}: {q}", file=sys.stderr)
    out.seconds = time.perf_counter() - t0
    return out


def table(trims: Strategy, reset: Strategy) -> str:
    rows = [
        "| question | trims: generations | prefilled | cached | trims (messages left out) | ending "
        "| reset: generations | prefilled | cached | ending |",
        "|---:|---:|---:|---:|---|---|---:|---:|---:|---|",
    ]
    for k, (a, b) in enumerate(zip(trims.questions, reset.questions, strict=True), 1):
        trimmed = f"{a.trims} ({a.dropped})" if a.trims else "0"
        rows.append(
            f"| {k} | {a.generations} | {a.prefilled} | {a.cached} | {trimmed} | {a.ending} "
            f"| {b.generations} | {b.prefilled} | {b.cached} | {b.ending} |"
        )
    a, b = total(trims), total(reset)
    rows.append(
        f"| all | {a.generations} | {a.prefilled} | {a.cached} | {a.trims} ({a.dropped}) | "
        f"| {b.generations} | {b.prefilled} | {b.cached} | |"
    )
    rows.append(
        f"| per generation | | {per(a.prefilled, a)} | {per(a.cached, a)} | | "
        f"| | {per(b.prefilled, b)} | {per(b.cached, b)} | |"
    )
    return "\n".join(rows)


def total(s: Strategy) -> Question:
    qs = s.questions
    return Question(
        generations=sum(q.generations for q in qs),
        prefilled=sum(q.prefilled for q in qs),
        cached=sum(q.cached for q in qs),
        trims=sum(q.trims for q in qs),
        dropped=sum(q.dropped for q in qs),
    )


def per(tokens: int, q: Question) -> str:
    return f"{tokens / max(q.generations, 1):.0f}"


def seconds(s: Strategy) -> str:
    return f"{s.seconds:.0f} s"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, default=10)
    parser.add_argument("--n-ctx", type=int, default=4096)
    parser.add_argument(
        "--repeats", type=int, nargs="+", default=[1, 0], help="limits.repeats, one table each (default: 1 0)"
    )
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--no-write", action="store_true", help="print only; leave docs/benchmarks.md")
    args = parser.parse_args(argv)

    import aerix

    engine = aerix.load("smollm2-instruct", n_ctx=args.n_ctx, n_threads=args.threads)
    tables = []
    try:
        for repeats in args.repeats:
            trims = asyncio.run(_play(engine, args.questions, reset=False, repeats=repeats))
            reset = asyncio.run(_play(engine, args.questions, reset=True, repeats=repeats))
            print(
                f"repeats {repeats}: trims {seconds(trims)}, reset {seconds(reset)} in all", file=sys.stderr
            )
            tables += [
                f"With limits.repeats={repeats}{REPEATS.get(repeats, '')}:",
                "",
                table(trims, reset),
                "",
            ]
    finally:
        engine.close()
    md = "\n".join(
        [
            "## The context window",
            "",
            f"{args.questions} questions, each answered from a tool result of about 3,500 characters, on "
            f"SmolLM2-135M-Instruct at n_ctx {args.n_ctx} (limits.max_tokens 512, temperature 0): one "
            "conversation that the agent trims when it outgrows the context, against the same "
            "questions with the conversation reset before each. *Prefilled*: the prompt tokens the "
            "engine evaluated (prompt_tokens - cached_tokens), summed over the question's generations; "
            "*cached*: those it reused from its KV cache; *trims*: the trim events, with the messages "
            "they stopped sending (a trim that leaves out none shortens the run's own results).",
            "",
            *tables,
            f"{machine()}, {args.threads} threads. Command: `python bench/context.py --questions "
            f"{args.questions} --n-ctx {args.n_ctx} --repeats {' '.join(map(str, args.repeats))}`.",
        ]
    )
    print(md)
    if not args.no_write:
        path = write_section("context", md)
        print(f"\nwritten to {path}", file=sys.stderr)
    return 0


REPEATS = {
    1: " (the agent's default: a call may run twice; the model often calls the tool again)",
    0: " (a repeated call does not run: each question's run holds one long result)",
}


if __name__ == "__main__":
    sys.exit(main())
