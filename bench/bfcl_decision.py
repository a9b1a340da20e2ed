"""How well SmolLM2 tells a request a tool fits from one no tool serves, under `tool_choice="auto"`.

The tool-fit decision (the default): `LlamaCpp.fit_score`, which an `Agent`
with `tool_choice="auto"` asks before a run's first turn, on every entry, flat
and nested, of simple_python and multiple (a tool fits: the request should
call) and of irrelevance (none does: it should be declined), per part
(`_bfcl.data.part_of`: odd ids tune, even ids report). Prints, for the
engine's rule (the best tool's mean score over its first `HEAD` tokens,
`combine`, at `FIT_THRESHOLD`) and for the mean over every token (up to
`SCORED`, at 0.2, a threshold set on the whole public set), the AUC and the
trade-off curve: for each
threshold, the share of should-call entries that call and the share of
irrelevance entries declined, on the tuning part and on the report part
beside it. `--frames` also scores the tuning part's requests rewritten in
two conversational frames (a greeting and thanks around the question; the
question and one sentence of unrelated context) and prints where each rule's
point moves. Then, on the agent benchmark's 36 tasks (`bench/_agent_tasks`,
each with a fitting tool; not tuned on), how many would call. `--write` puts
it all into docs/quality.md (section "fit-curve"); `--cache FILE` keeps the
scores (JSON lines) so that a rerun scores only what is new.

`--first-key`: the first free token after `{"` under `auto` decides the turn
(`calls` or `final`); for the first N flat entries of simple_python and
irrelevance, the margin between those two tokens' logits after the turn's
prompt, for the turn contract's wording and two other wordings of its last
sentence: per wording the AUC, and for the contract's what a constant logit
offset towards `calls` would give.

`--pick CATEGORY`: on the first N flat entries of a category's tuning part
(`--limit`, default 100), how often the tool with the best fit score is the
one the answer calls, and with `--calls FILE` (a `bench/bfcl.py --jsonl`
file) how often the model's own first call named it.

Run: `python bench/bfcl_decision.py [--frames] [--limit N] [--cache FILE]
[--write] [--threads 1]`, `python bench/bfcl_decision.py --first-key [--limit 40]`
or `python bench/bfcl_decision.py --pick live_multiple --calls FILE`.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import llama_cpp
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import aerix
from _bfcl.data import Entry, in_part, load, to_tools
from _report import machine, write_section
from aerix import Agent
from aerix.engines.llamacpp import FIT_THRESHOLD
from aerix.engines.llamacpp._fit import HEAD, LEAD, FitScorer, combine
from aerix.turn import fit_text

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


def auc(s: list[float], i: list[float]) -> float:
    """The chance that a should-call entry's score is above an irrelevance entry's (ties: half)."""
    return sum((x > y) + 0.5 * (x == y) for x in s for y in i) / (len(s) * len(i))


FRAMES: dict[str, Callable[[str], str]] = {
    "as written": lambda q: q,
    "polite": lambda q: f"Hi! I was wondering, {q[:1].lower()}{q[1:]} Thanks a lot.",
    "with context": lambda q: f"{q} I'm asking because I have a meeting with my team later this week.",
}
"""The requests as written, and rewritten (robustness only) in two conversational frames."""
FORM = "name(fields)"
"""How each tool reads to the score (`aerix.turn.fit_text`); cached scores of another form are
scored again."""
DECOYS = (
    "answer: Answer the user's question.",
    "search: Search for information on a topic.",
    "play_music: Play a song by a given artist.",
    "send_email: Send an email to a recipient.",
)
"""Generic tool texts scored under each request, for a rule compared with the engine's: the best
tool's score less theirs (a request-specific baseline)."""
SHOULD_CALL = ("simple_python", "multiple")
EVERY_THRESHOLD = 0.2
"""The threshold of the mean over every token, set on the whole public set."""
SCORED = 128
"""How many of a text's first tokens this bench scores (the cut of the mean over every token)."""
TIMED = 12
"""For how many newly scored requests the engine's own `fit_score` runs too: timed, and
checked against what this bench reads."""
ROUNDING = 0.01
"""How far the engine's score may be from this bench's for one request: both decode the
prompt alone, then each text on top of it (`FitScorer`), so they differ only where
llama.cpp's logits differ with the number of tokens a decode takes (16 or 128)."""


@dataclass(frozen=True, slots=True)
class Scored:
    """One entry's per-token scores under one frame."""

    id: str
    frame: str
    call: bool
    """Whether a tool fits (simple_python, multiple) or none does (irrelevance)."""
    fits: list[np.ndarray]
    """Each tool's per-token scores (its first `SCORED` tokens)."""
    decoys: list[np.ndarray]
    """Each of `DECOYS`' per-token scores."""


Rule = Callable[[Scored], float]


def head(n: int) -> Rule:
    """The best tool's mean over its first `n` tokens."""
    return lambda r: max(float(np.mean(f[:n])) for f in r.fits)


def less_decoys(r: Scored) -> float:
    return combine(r.fits) - float(np.mean([np.mean(d[:HEAD]) for d in r.decoys]))


ENGINE, EVERY = f"first {HEAD} tokens (the engine's)", f"every token, up to {SCORED}"
RULES: dict[str, Rule] = {
    ENGINE: lambda r: combine(r.fits),
    EVERY: head(SCORED),
    "first 8 tokens": head(8),
    "first 32 tokens": head(32),
    f"first {HEAD} tokens, less the decoys' mean": less_decoys,
}
"""The engine's rule, and the rules it is compared with on the tuning part."""


class Scores:
    """Per-token fit scores of BFCL entries, computed once and kept in a JSON-lines cache."""

    def __init__(self, engine: aerix.engines.LlamaCpp, cache: Path | None) -> None:
        self._engine = engine
        # The engine's scorer reads a text's first HEAD tokens; this one reads SCORED, for the
        # other rules. A token's score does not depend on the tokens after it: the same scores.
        self._scorer = FitScorer(engine._llama, engine._template.render, engine._tokenize, head=SCORED)
        self._cache = cache
        self._kept: dict[tuple[str, str], tuple[list[list[float]], list[list[float]]]] = {}
        self.differences: list[float] = []
        """How far the engine's score is from what this bench reads, for those requests."""
        self.seconds: list[float] = []
        """Seconds of the engine's `fit_score` for the first `TIMED` requests scored (each entry
        has new tools, so their baselines are computed too)."""
        if cache is not None and cache.exists():
            for line in cache.read_text().splitlines():
                r = json.loads(line)
                if r["lead"] == LEAD and r["decoy_texts"] == list(DECOYS) and r.get("form") == FORM:
                    self._kept[r["id"], r["frame"]] = (r["fits"], r["decoys"])

    def get(self, entry: Entry, frame: str, decoys: bool = False) -> Scored:
        """The entry's scores under `frame`; `decoys`: with `DECOYS`' scores too."""
        key = (entry.id, frame)
        if key not in self._kept or (decoys and not self._kept[key][1]):
            tools, _ = to_tools(entry.functions, lambda name, inp: None)
            ask = FRAMES[frame]
            texts = [fit_text(t) for t in tools]
            request = ask(entry.question)
            fits, decoy_scores = self.parts(request, texts, decoys)
            if len(self.seconds) < TIMED:  # what this bench reads is what the engine ships
                t0 = time.perf_counter()
                shipped = asyncio.run(self._engine.fit_score(request, texts))
                self.seconds.append(time.perf_counter() - t0)
                # The same scores but for llama.cpp's rounding, which differs with a batch's shape.
                self.differences.append(abs(combine(fits) - shipped))
                assert self.differences[-1] < ROUNDING, (entry.id, combine(fits), shipped)
            rounded = (
                [[round(float(x), 4) for x in a] for a in fits],
                [[round(float(x), 4) for x in a] for a in decoy_scores],
            )
            self._kept[key] = rounded
            if self._cache is not None:
                with self._cache.open("a") as f:
                    row = {"id": entry.id, "frame": frame, "fits": rounded[0], "decoys": rounded[1]}
                    f.write(
                        json.dumps({**row, "lead": LEAD, "decoy_texts": list(DECOYS), "form": FORM}) + "\n"
                    )
        fits_, decoys_ = self._kept[key]
        call = not entry.id.startswith("irrelevance")
        return Scored(entry.id, frame, call, [np.array(f) for f in fits_], [np.array(d) for d in decoys_])

    def parts(
        self, request: str, texts: list[str], decoys: bool = False
    ) -> tuple[list[np.ndarray], list[np.ndarray]]:
        """The per-token scores of `texts` and (`decoys`) of `DECOYS` under `request` (not kept)."""
        extra = DECOYS if decoys else ()
        scores = self._scorer.token_scores(request, [*texts, *extra])
        return scores[: len(scores) - len(extra)], scores[len(scores) - len(extra) :]

    def close(self) -> None:
        self._scorer.close()


def part_entries(part: str, limit: int | None) -> list[Entry]:
    """The part's entries (flat and nested) of the should-call categories and irrelevance,
    the first `limit` of each, interleaved so that a partial run covers all three."""
    lists = [in_part(load(c), part)[:limit] for c in (*SHOULD_CALL, "irrelevance")]
    return [e for row in itertools.zip_longest(*lists) for e in row if e is not None]


def curve(rows: list[Scored], rule: Rule, t: float) -> tuple[float, float]:
    """The share of should-call entries that call at threshold `t`, and of irrelevance declined."""
    s = [rule(r) for r in rows if r.call]
    i = [rule(r) for r in rows if not r.call]
    return float(np.mean([x >= t for x in s])), float(np.mean([y < t for y in i]))


def rule_auc(rows: list[Scored], rule: Rule) -> float:
    return auc([rule(r) for r in rows if r.call], [rule(r) for r in rows if not r.call])


def pick(rows: list[Scored], rule: Rule, declines: float) -> float:
    """The lowest threshold (a multiple of 0.01) that declines at least `declines` of irrelevance."""
    for t in np.round(np.arange(-2.0, 3.0, 0.01), 2):
        if curve(rows, rule, float(t))[1] >= declines:
            return float(t)
    return 3.0


def curve_table(title: str, rule: Rule, tuning: list[Scored], report: list[Scored], chosen: float) -> str:
    lines = [
        f"{title} (AUC: tuning {rule_auc(tuning, rule):.2f}, report {rule_auc(report, rule):.2f}):\n",
        "| threshold | tuning: calls | tuning: declines | report: calls | report: declines |",
        "|---|---|---|---|---|",
    ]
    for t in sorted({*(round(float(x), 2) for x in np.arange(-0.2, 0.81, 0.1)), chosen}):
        (tc, td), (rc, rd) = curve(tuning, rule, t), curve(report, rule, t)
        cells = [f"{t:+.2f}", f"{tc:.0%}", f"{td:.0%}", f"{rc:.0%}", f"{rd:.0%}"]
        if t == chosen:
            cells = [f"**{c}**" for c in cells]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def profile(rows: list[Scored]) -> str:
    """The mean per-token score of the best tool by position in its text, per kind of entry."""
    buckets = ((0, 8), (8, 16), (16, 32), (32, 64), (64, SCORED))
    lines = [
        "| entries | " + " | ".join(f"tokens {a + 1}-{b}" for a, b in buckets) + " |",
        "|---|" + "---|" * len(buckets),
    ]
    for call, name in ((True, "should call"), (False, "irrelevance")):
        best = [max(r.fits, key=lambda f: float(np.mean(f))) for r in rows if r.call is call]
        cells = []
        for a, b in buckets:
            xs = [x for f in best for x in f[a:b]]
            cells.append(f"{np.mean(xs):+.2f} ({len(xs)})" if xs else "-")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def agent_tasks(scores: Scores) -> tuple[int, int, int]:
    """Of the agent benchmark's tasks, how many would call under the engine's rule and under
    the mean over every token (each task's tools fit it), and how many tasks there are."""
    from _agent_tasks.tasks import TASKS
    from _agent_tasks.world import TOOLS

    calls = every = 0
    for task in TASKS:
        texts = [fit_text(TOOLS[n]) for n in task.tools]
        fits, decoys = scores.parts(task.prompt, texts)
        r = Scored(task.id, "as written", True, fits, decoys)
        calls += RULES[ENGINE](r) >= FIT_THRESHOLD
        every += RULES[EVERY](r) >= EVERY_THRESHOLD
    return calls, every, len(TASKS)


def fit_report(engine: aerix.engines.LlamaCpp, args: argparse.Namespace) -> str:
    """Score the parts, print the curves and return them as markdown."""
    scores = Scores(engine, args.cache)
    # The tuning part first, then the report part, then the tuning part's rewritten entries
    # (the rule is chosen on the tuning part before the report part's scores are looked at).
    rows = {"tuning": [scores.get(e, "as written") for e in part_entries("tuning", args.limit)]}
    print(f"scored tuning: {len(rows['tuning'])} entries", file=sys.stderr, flush=True)
    if args.part == "all":
        rows["report"] = [scores.get(e, "as written") for e in part_entries("report", args.limit)]
        print(f"scored report: {len(rows['report'])} entries", file=sys.stderr, flush=True)
    framed: dict[str, list[Scored]] = {}
    if args.frames is not None:
        subset = part_entries("tuning", args.frame_limit or args.limit)
        for frame in ["as written", *(args.frames or [f for f in FRAMES if f != "as written"])]:
            framed[frame] = [scores.get(e, frame, decoys=True) for e in subset]
            print(f"scored tuning, {frame}: {len(subset)} entries", file=sys.stderr, flush=True)
    tuning = rows["tuning"]
    chosen = {ENGINE: FIT_THRESHOLD, EVERY: EVERY_THRESHOLD}

    def count(rs: list[Scored]) -> str:
        return f"{sum(r.call for r in rs)} should call + {sum(not r.call for r in rs)} irrelevance"

    out = [
        f"Entries: tuning {count(tuning)}"
        + (f", report {count(rows['report'])}" if args.part == "all" else "")
        + (f" (the first {args.limit} of each category in each part)." if args.limit else "."),
    ]
    # Each rule at the lowest threshold declining 90% of the irrelevance entries as written, and
    # how its point moves when the same entries are rewritten. The decoys are scored only there.
    n = len(framed.get("as written", []))
    sets = framed or {"as written": tuning}
    rules = RULES if n else {k: v for k, v in RULES.items() if v is not less_decoys}
    lines = [
        "Each rule at the lowest threshold that declines 90% of the irrelevance entries as written"
        + (f" (the tuning part's first {n}, a third of each kind)" if n else " (the tuning part)")
        + ", and where that point moves when the same entries are rewritten:\n",
        "| rule | threshold | " + " | ".join(f"{f}: AUC, calls / declines" for f in sets) + " |",
        "|---|---|" + "---|" * len(sets),
    ]
    for name, rule in rules.items():
        t = pick(sets["as written"], rule, 0.9)
        cells = [
            f"{rule_auc(rs, rule):.2f}, {c:.0%} / {d:.0%}"
            for rs in sets.values()
            for c, d in [curve(rs, rule, t)]
        ]
        lines.append(f"| {name} | {t:+.2f} | " + " | ".join(cells) + " |")
    # The rules compared and the scores by position are for choosing a rule: printed, not
    # written into the docs.
    printed = ["\n".join(lines)]
    if n:
        lines = [
            f"At the engine's `FIT_THRESHOLD`, and at 0.2 for the mean over every token, the tuning part's "
            f"first {n} entries (a third of each kind), as written and rewritten:\n",
            "| rule | " + " | ".join(f"{f}: calls / declines" for f in sets) + " |",
            "|---|" + "---|" * len(sets),
        ]
        for name, t in chosen.items():
            cells = [f"{c:.0%} / {d:.0%}" for rs in sets.values() for c, d in [curve(rs, RULES[name], t)]]
            lines.append(f"| {name} at {t:+.2f} | " + " | ".join(cells) + " |")
        out.append("\n".join(lines))
    printed.append(
        "The best tool's mean score by position in its text (tuning part, as written; in brackets, "
        "how many tokens):\n\n" + profile(tuning)
    )
    if args.part == "all":
        report = rows["report"]
        out.append(curve_table(ENGINE.capitalize(), RULES[ENGINE], tuning, report, FIT_THRESHOLD))
        printed.append(curve_table(EVERY.capitalize(), RULES[EVERY], tuning, report, EVERY_THRESHOLD))
    if scores.seconds:
        out.append(
            f"Cost of the engine's `fit_score`: {np.median(scores.seconds):.2f} s per request (median of "
            f"{len(scores.seconds)} scored in this run, {args.threads} thread(s); every entry's tools are new, so "
            "their baselines are computed too). This bench reads the scores from texts scored up to "
            f"{SCORED} tokens; on those requests the engine's own score differed from it by at most "
            f"{max(scores.differences):.3f} (llama.cpp's rounding depends on a batch's shape)."
        )
    by_engine, by_every, n = agent_tasks(scores)
    scores.close()
    out.append(
        f"Agent benchmark (`bench/_agent_tasks`, every task has a fitting tool; not tuned on): "
        f"{by_engine} of {n} tasks would call under the engine's rule at {FIT_THRESHOLD:+.2f}, "
        f"{by_every} under the mean over every token at {EVERY_THRESHOLD:+.2f}."
    )
    text = "\n\n".join(out)
    print("\n\n".join([*printed, text]), flush=True)
    return text


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


def first_key_report(engine: aerix.engines.LlamaCpp, limit: int) -> None:
    """The first-key margins: per wording the AUC, and what an offset towards `calls` gives."""
    print(f"first {limit} flat entries of simple_python (should call) and irrelevance (should answer)\n")
    print("| wording | AUC | calls on simple_python | answers on irrelevance |\n|---|---|---|---|")
    kept: tuple[list[float], list[float]] = ([], [])
    for name, word in WORDINGS.items():
        s = margins(engine, "simple_python", limit, word)
        i = margins(engine, "irrelevance", limit, word)
        calls, answers = np.mean([x > 0 for x in s]), np.mean([y <= 0 for y in i])
        print(f"| {name} | {auc(s, i):.2f} | {calls:.0%} | {answers:.0%} |", flush=True)
        if name == "kept":
            kept = (s, i)
    print("\n| logit offset for `calls` (kept wording) | simple_python: calls | irrelevance: answers |")
    print("|---|---|---|")
    s, i = kept
    for off in OFFSETS:
        print(
            f"| {off:+g} | {np.mean([x + off > 0 for x in s]):.0%} | {np.mean([y + off <= 0 for y in i]):.0%} |"
        )


def pick_report(engine: aerix.engines.LlamaCpp, category: str, limit: int, calls: Path | None) -> None:
    """Of a split category's first `limit` flat tuning entries of one user message, how often
    the best-fitting tool (`fit_score`'s tool) is the one the answer calls, and, with `calls`
    (a `bench/bfcl.py --jsonl` file of the same entries), how often the model's first call was."""
    chosen: dict[str, str] = {}
    if calls is not None:
        for line in calls.read_text().splitlines():
            row = json.loads(line)
            if row.get("category") == category and row.get("calls"):
                chosen[row["id"]] = next(iter(row["calls"][0]))
    scorer = FitScorer(engine._llama, engine._template.render, engine._tokenize)
    entries = [e for e in in_part(load(category), "tuning") if e.flat and e.single and e.answers][:limit]
    best = model = fixed = broken = 0
    for e in entries:
        tools, _ = to_tools(e.functions, lambda name, inp: None)
        scores = [float(np.mean(f)) for f in scorer.token_scores(e.question, [fit_text(t) for t in tools])]
        expected = next(iter(e.answers[0]))
        fit_right = e.functions[int(np.argmax(scores))]["name"] == expected
        model_right = chosen.get(e.id) == expected
        best += fit_right
        model += model_right
        fixed += fit_right and not model_right
        broken += model_right and not fit_right
    scorer.close()
    print(
        f"{category}, tuning part, first {len(entries)} flat entries: the best-fitting tool is the answer's on {best}"
    )
    if calls is not None:
        print(
            f"the model's first call named it on {model}; the best-fitting tool is right where the model's was not on {fixed}, wrong where the model's was right on {broken}"
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--first-key", action="store_true", help="the first-key margins instead of the fit score")
    ap.add_argument(
        "--pick",
        metavar="CATEGORY",
        default=None,
        help="how often a category's best-fitting tool is the answer's (tuning part, --limit entries)",
    )
    ap.add_argument(
        "--calls", type=Path, default=None, help="with --pick: a bench/bfcl.py --jsonl file to compare"
    )
    ap.add_argument("--limit", type=int, default=None, help="the first N entries of each category and part")
    ap.add_argument(
        "--frames",
        nargs="*",
        choices=[f for f in FRAMES if f != "as written"],
        default=None,
        help="also score the tuning part's entries rewritten (given frames, or all of them)",
    )
    ap.add_argument("--frame-limit", type=int, default=None, help="rewrite the first N of each category only")
    ap.add_argument("--cache", type=Path, default=None, help="keep the scores here (JSON lines)")
    ap.add_argument(
        "--part", choices=["all", "tuning"], default="all", help="tuning: that part alone, to choose on"
    )
    ap.add_argument("--write", action="store_true", help="write the curves to docs/quality.md")
    ap.add_argument(
        "--model", default="smollm2-instruct", help="a named model or a GGUF path (the curves are its own)"
    )
    ap.add_argument(
        "--section",
        default="fit-curve",
        help='the docs/quality.md section --write writes (default "fit-curve")',
    )
    args = ap.parse_args()
    engine = aerix.load(args.model, n_threads=args.threads)
    try:
        if args.first_key:
            first_key_report(engine, args.limit or 40)
            return
        if args.pick is not None:
            pick_report(engine, args.pick, args.limit or 100, args.calls)
            return
        text = fit_report(engine, args)
    finally:
        engine.close()
    if args.write:
        command = "python bench/bfcl_decision.py"
        command += f" --model {args.model}" if args.model != "smollm2-instruct" else ""
        if args.frames is not None:
            command += " --frames" + "".join(f' "{f}"' for f in args.frames)
        command += f" --frame-limit {args.frame_limit}" if args.frame_limit else ""
        command += f" --limit {args.limit}" if args.limit else ""
        command += f" --part {args.part}" if args.part != "all" else ""
        path = write_section(
            args.section, f"`{command} --threads {args.threads}` ({machine()}).\n\n{text}", file="quality.md"
        )
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
