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
mismatch's) and the curve: for each threshold, the share of requests that call and the
share of mismatches declined, with the engine's threshold (`FIT_THRESHOLD`) marked; and
writes it to docs/quality.md (section "fit-live") unless `--no-write`. `--scores FILE`
keeps every score (JSON lines) and reads them back on a rerun.

Run: `python bench/fit_live.py [--limit N] [--threads 2] [--scores FILE] [--no-write]`.
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
from aerix.engines.llamacpp import FIT_THRESHOLD
from aerix.turn import fit_text
from bfcl_decision import auc

THRESHOLDS = (-0.2, -0.1, 0.0, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, FIT_THRESHOLD, 0.4, 0.5)


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


def curve(calls: list[float], declines: list[float]) -> tuple[float, list[str]]:
    """The AUC and the rows of the trade-off table."""
    rows = ["| threshold | requests that call | mismatches declined |", "|---|---|---|"]
    for t in THRESHOLDS:
        called = sum(s >= t for s in calls) / len(calls)
        declined = sum(s < t for s in declines) / len(declines)
        cell = f"{t:+.2f}" + (" (the engine's)" if t == FIT_THRESHOLD else "")
        mark = "**" if t == FIT_THRESHOLD else ""
        rows.append(f"| {mark}{cell}{mark} | {mark}{called:.0%}{mark} | {mark}{declined:.0%}{mark} |")
    return auc(calls, declines), rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--limit", type=int, default=None, help="the first N flat entries of the tuning part")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--scores", type=Path, default=None, help="keep the scores here (JSON lines)")
    ap.add_argument("--no-write", action="store_true", help="do not update docs/quality.md")
    args = ap.parse_args(argv)
    if args.limit is not None and args.limit < 1:
        ap.error(f"--limit must be 1 or more, got {args.limit}")

    entries = [e for e in in_part(load("live_multiple"), "tuning") if e.flat and e.single][: args.limit]
    kept: dict[tuple[str, str], float] = {}
    if args.scores is not None and args.scores.exists():
        for line in args.scores.read_text().splitlines():
            row = json.loads(line)
            kept[row["id"], row["tools"]] = row["score"]
    engine = load_engine("smollm2-instruct", n_threads=args.threads, n_ctx=2048)
    own: list[float] = []
    other: list[float] = []
    try:
        for n, (entry, mismatch) in enumerate(zip(entries, mismatches(entries), strict=True), 1):
            for tools, scores in ((entry, own), (mismatch, other)):
                if tools is None:
                    continue
                key = (entry.id, tools.id)
                if key not in kept:
                    kept[key] = asyncio.run(engine.fit_score(entry.question, texts(tools)))
                    if args.scores is not None:
                        with args.scores.open("a") as f:
                            row = {"id": entry.id, "tools": tools.id, "score": round(kept[key], 4)}
                            f.write(json.dumps(row) + "\n")
                scores.append(kept[key])
            print(f"\r{n}/{len(entries)} scored", end="", file=sys.stderr, flush=True)
    finally:
        engine.close()
    print(file=sys.stderr)

    area, rows = curve(own, other)
    command = "python bench/fit_live.py" + (f" --limit {args.limit}" if args.limit else "")
    md = "\n".join(
        [
            f"`{command} --threads {args.threads}` ({machine()}).",
            "",
            f"live_multiple's tuning part, {len(own)} flat requests with one message, each against its "
            f"own tools (should call) and against another entry's ({len(other)}; should be declined): "
            f"AUC {area:.2f}.",
            "",
            *rows,
        ]
    )
    print(md)
    if not args.no_write:
        path = write_section("fit-live", md, file="quality.md")
        print(f"\nwritten to {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
