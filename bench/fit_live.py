"""The tool-fit decision on real requests: live_multiple's tuning part, each request against
its own tools (a tool fits: it should call) and against another entry's tools (none fits: it
should be declined).

BFCL's simple_python and irrelevance (the curve of `bench/bfcl_decision.py`) are textbook
requests against near-miss tools; the requests users send are longer and looser, and score
lower against the tools that fit them. live_multiple holds
such requests, each with two to a dozen functions, and only its tuning part is read here
(`_bfcl.data.part_of`: odd first numbers tune). A request's "mismatch" is the same request
against the tools of the next entry (in file order, wrapping round) whose function names
share no word with its own: a real request that no tool of the list serves.

Prints the AUC (the chance that a request's score against its own tools is above a
mismatch's), the curve (for each threshold, the share of requests that call and the
share of mismatches declined) and the threshold this part chooses for the model: the
lowest, in steps of 0.01, that declines at least 85% of the mismatches (so the most
requests call), which is the model's default `fit_threshold` in `FIT_THRESHOLDS`.
Writes it to docs/quality.md (section "fit-live-MODEL") unless `--no-write`. The scores
are kept in bench/data/fit_scores/MODEL.jsonl (JSON lines) and read back on a rerun, so
the choice can be checked without scoring again.

Run: `python bench/fit_live.py [--model smollm2-instruct] [--limit N] [--threads 2] [--no-write]`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _bfcl.data import Entry, in_part, load, to_tools
from _report import machine, write_section
from aerix.engines._load import load as load_engine
from aerix.engines.llamacpp import FIT_THRESHOLDS, fit_key
from aerix.turn import fit_text
from bfcl_decision import auc

THRESHOLDS = (0.0, 0.1, 0.2, 0.3, 0.4)
"""The curve's rows; the chosen threshold and the engine's default get a row too."""
DECLINES = 0.85
"""The share of mismatches a model's default threshold declines at least."""
SCORES = Path(__file__).resolve().parent / "data" / "fit_scores"


def words(entry: Entry) -> set[str]:
    """The lower-case words of an entry's function names (`api.weather`: "api", "weather")."""
    return {w.lower() for f in entry.functions for w in re.findall(r"[A-Za-z]+", f["name"])}


def mismatches(entries: list[Entry]) -> list[Entry | None]:
    """For each entry, the next one (wrapping round) whose function names share no word with
    its own; `None` if there is none."""
    out: list[Entry | None] = []
    for i, entry in enumerate(entries):
        mine = words(entry)
        others = entries[i + 1 :] + entries[:i]
        out.append(next((o for o in others if not mine & words(o)), None))
    return out


def texts(entry: Entry) -> list[str]:
    tools, _ = to_tools(entry.functions, lambda name, inp: None)
    return [fit_text(t) for t in tools]


def choose(calls: list[float], declines: list[float]) -> float:
    """The lowest threshold, in steps of 0.01, that declines at least `DECLINES` of the mismatches."""
    for step in range(-100, 301):
        t = step / 100
        if sum(s < t for s in declines) / len(declines) >= DECLINES:
            return t
    return 3.0


def curve(calls: list[float], declines: list[float], chosen: float, default: float | None) -> list[str]:
    """The rows of the trade-off table: the chosen threshold in bold, the engine's marked."""
    rows = ["| threshold | requests that call | mismatches declined |", "|---|---|---|"]
    marks = {chosen: "chosen here", **({} if default is None else {default: "the engine's default"})}
    if chosen == default:
        marks[chosen] = "chosen here: the engine's default"
    for t in sorted({*THRESHOLDS, *marks}):
        called = sum(s >= t for s in calls) / len(calls)
        declined = sum(s < t for s in declines) / len(declines)
        cell = f"{t:+.2f}" + (f" ({marks[t]})" if t in marks else "")
        bold = "**" if t == chosen else ""
        rows.append(f"| {bold}{cell}{bold} | {bold}{called:.0%}{bold} | {bold}{declined:.0%}{bold} |")
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--limit", type=int, default=None, help="the first N flat entries of the tuning part")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--model", default="smollm2-instruct", help="a model name aerix.load takes")
    ap.add_argument("--no-write", action="store_true", help="do not update docs/quality.md")
    args = ap.parse_args(argv)
    if args.limit is not None and args.limit < 1:
        ap.error(f"--limit must be 1 or more, got {args.limit}")

    entries = [e for e in in_part(load("live_multiple"), "tuning") if e.flat and e.single][: args.limit]
    kept: dict[tuple[str, str], float] = {}
    scores_file = SCORES / f"{args.model.replace(':', '_').replace('/', '_')}.jsonl"
    if scores_file.exists():
        for line in scores_file.read_text().splitlines():
            row = json.loads(line)
            kept[row["id"], row["tools"]] = row["score"]
    scores_file.parent.mkdir(parents=True, exist_ok=True)
    engine = load_engine(args.model, n_threads=args.threads, n_ctx=2048)
    default = FIT_THRESHOLDS.get(fit_key(engine.metadata))
    own: list[float] = []
    other: list[float] = []
    try:
        for n, (entry, mismatch) in enumerate(zip(entries, mismatches(entries), strict=True), 1):
            for tools, scores in ((entry, own), (mismatch, other)):
                if tools is None:
                    continue
                key = (entry.id, tools.id)
                if key not in kept:
                    score = asyncio.run(engine.fit_score(entry.question, texts(tools)))
                    kept[key] = round(score, 4)
                    with scores_file.open("a") as f:
                        f.write(json.dumps({"id": entry.id, "tools": tools.id, "score": kept[key]}) + "\n")
                scores.append(kept[key])
            print(f"\r{n}/{len(entries)} scored", end="", file=sys.stderr, flush=True)
    finally:
        engine.close()
    print(file=sys.stderr)

    chosen = choose(own, other)
    command = f"python bench/fit_live.py --model {args.model}" + (
        f" --limit {args.limit}" if args.limit else ""
    )
    md = "\n".join(
        [
            f"`{command} --threads {args.threads}` ({machine()}): live_multiple's tuning part, "
            f"{len(own)} flat requests with one message, each "
            f"against its own tools (should call) and against another entry's ({len(other)}; should be "
            f"declined): AUC {auc(own, other):.2f}. The lowest threshold declining at least "
            f"{DECLINES:.0%} of the mismatches: **{chosen:+.2f}**.",
            "",
            *curve(own, other, chosen, default),
        ]
    )
    print(md)
    if not args.no_write:
        path = write_section(f"fit-live-{args.model}", md, file="quality.md")
        print(f"\nwritten to {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
