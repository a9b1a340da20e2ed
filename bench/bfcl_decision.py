"""How well SmolLM2 tells a relevant tool from an irrelevant one under `tool_choice="auto"`.

Under `auto` the model's first free token after `{"` decides the turn:
`calls` or `final`. For the first N flat entries of simple_python (where a
tool fits) and of irrelevance (where none does), this reads the margin
between the logits of those two tokens after the turn's prompt, for the kept
contract and two other wordings of its last sentence, and prints:

- per wording, the AUC: the chance that a simple_python entry's margin is
  above an irrelevance entry's (0.5: no better than chance);
- for the kept wording, what a constant logit offset towards `calls` would
  give: the share of simple_python entries that call and of irrelevance
  entries that answer.

Then the same for `LlamaCpp.fit_score` (how much more likely the model finds
a tool's description after the request than after an empty one; what an
`Agent` with `tool_choice="auto"` asks before a run's first turn): its AUC,
and what each threshold gives, over the first N entries and, separately,
over the first half and the rest.

Run: `python bench/bfcl_decision.py [--limit 40] [--threads 2] [--fit-only]`.
Prints only; docs/quality.md quotes it.
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Callable

import llama_cpp
import numpy as np

import aerix
from _bfcl.data import load, to_tools
from aerix import Agent

LAST = "If no tool fits the request, give your final answer."
WORDINGS: dict[str, Callable[[str], str]] = {
    "kept": lambda s: s,
    "only when": lambda s: s.replace(
        LAST, "Call a tool only when it can do what the user asks; otherwise give your final answer."
    ),
    "question last": lambda s: (
        s
        + "\n\nIf one of these tools does what the user asks, call it; if none does, give your final answer."
    ),
}
OFFSETS = (3.0, 2.0, 1.0, 0.0, -1.0)
THRESHOLDS = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5)


def auc(s: list[float], i: list[float]) -> float:
    """The chance that a simple_python score is above an irrelevance score (ties: half)."""
    return sum((x > y) + 0.5 * (x == y) for x in s for y in i) / (len(s) * len(i))


async def fit_scores(engine: aerix.engines.LlamaCpp, category: str, limit: int) -> list[float]:
    out = []
    for entry in [e for e in load(category) if e.flat][:limit]:
        tools, _ = to_tools(entry.functions, lambda name, inp: None)
        out.append(await engine.fit_score(entry.question, [f"{t.name}: {t.description}" for t in tools]))
    return out


def fit_report(engine: aerix.engines.LlamaCpp, limit: int) -> None:
    s = asyncio.run(fit_scores(engine, "simple_python", limit))
    i = asyncio.run(fit_scores(engine, "irrelevance", limit))
    halves = {
        f"all ({len(s)} + {len(i)})": (s, i),
        f"first half ({len(s) // 2} + {len(i) // 2})": (s[: len(s) // 2], i[: len(i) // 2]),
        f"second half ({len(s) - len(s) // 2} + {len(i) - len(i) // 2})": (
            s[len(s) // 2 :],
            i[len(i) // 2 :],
        ),
    }
    print("\n`fit_score`: simple_python (should call) against irrelevance (should answer)\n")
    print("| entries | AUC | " + " | ".join(f"t = {t:g}: calls / answers" for t in THRESHOLDS) + " |")
    print("|---|---|" + "---|" * len(THRESHOLDS))
    for name, (a, b) in halves.items():
        cells = [
            f"{np.mean([x >= t for x in a]):.0%} / {np.mean([y < t for y in b]):.0%}" for t in THRESHOLDS
        ]
        print(f"| {name} | {auc(a, b):.2f} | " + " | ".join(cells) + " |", flush=True)


def margins(
    engine: aerix.engines.LlamaCpp, category: str, limit: int, word: Callable[[str], str]
) -> list[float]:
    llama = engine._llama
    base = llama.tokenize(b'{"', add_bos=False, special=True)
    calls = llama.tokenize(b'{"calls', add_bos=False, special=True)[len(base)]
    final = llama.tokenize(b'{"final', add_bos=False, special=True)[len(base)]
    out = []
    for entry in [e for e in load(category) if e.flat][:limit]:
        tools, _ = to_tools(entry.functions, lambda name, inp: None)
        system = word(Agent(model=engine, tools=tools, tool_choice="auto").system)
        prompt = engine.render(
            [{"role": "system", "content": system}, {"role": "user", "content": entry.question}]
        )
        llama.reset()
        llama.eval(llama.tokenize((prompt + '{"').encode(), add_bos=False, special=True))
        logits = np.ctypeslib.as_array(
            llama_cpp.llama_get_logits_ith(llama.ctx, -1), shape=(llama.n_vocab(),)
        )
        out.append(float(logits[calls] - logits[final]))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--limit", type=int, default=40)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--fit-only", action="store_true", help="only the fit_score part")
    args = ap.parse_args()
    engine = aerix.load("smollm2-instruct", n_threads=args.threads)
    if args.fit_only:
        fit_report(engine, args.limit)
        engine.close()
        return
    print(f"first {args.limit} flat entries of simple_python (should call) and irrelevance (should answer)\n")
    print("| wording | AUC | calls on simple_python | answers on irrelevance |\n|---|---|---|---|")
    kept: tuple[list[float], list[float]] = ([], [])
    for name, word in WORDINGS.items():
        s = margins(engine, "simple_python", args.limit, word)
        i = margins(engine, "irrelevance", args.limit, word)
        calls, answers = np.mean([x > 0 for x in s]), np.mean([y <= 0 for y in i])
        print(f"| {name} | {auc(s, i):.2f} | {calls:.0%} | {answers:.0%} |", flush=True)
        if name == "kept":
            kept = (s, i)
    print("\n| logit offset for `calls` (kept wording) | simple_python: calls | irrelevance: answers |")
    print("|---|---|---|")
    for off in OFFSETS:
        s, i = kept
        print(
            f"| {off:+g} | {np.mean([x + off > 0 for x in s]):.0%} | {np.mean([y + off <= 0 for y in i]):.0%} |"
        )
    fit_report(engine, args.limit)
    engine.close()


if __name__ == "__main__":
    main()
