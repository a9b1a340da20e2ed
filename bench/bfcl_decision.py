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

Run: `python bench/bfcl_decision.py [--limit 40] [--threads 2]`. Prints only;
docs/quality.md quotes it.
"""

from __future__ import annotations

import argparse
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
    args = ap.parse_args()
    engine = aerix.load("smollm2-instruct", n_threads=args.threads)
    print(f"first {args.limit} flat entries of simple_python (should call) and irrelevance (should answer)\n")
    print("| wording | AUC | calls on simple_python | answers on irrelevance |\n|---|---|---|---|")
    kept: tuple[list[float], list[float]] = ([], [])
    for name, word in WORDINGS.items():
        s = margins(engine, "simple_python", args.limit, word)
        i = margins(engine, "irrelevance", args.limit, word)
        auc = sum((x > y) + 0.5 * (x == y) for x in s for y in i) / (len(s) * len(i))
        calls, answers = np.mean([x > 0 for x in s]), np.mean([y <= 0 for y in i])
        print(f"| {name} | {auc:.2f} | {calls:.0%} | {answers:.0%} |", flush=True)
        if name == "kept":
            kept = (s, i)
    print("\n| logit offset for `calls` (kept wording) | simple_python: calls | irrelevance: answers |")
    print("|---|---|---|")
    for off in OFFSETS:
        s, i = kept
        print(
            f"| {off:+g} | {np.mean([x + off > 0 for x in s]):.0%} | {np.mean([y + off <= 0 for y in i]):.0%} |"
        )
    engine.close()


if __name__ == "__main__":
    main()
