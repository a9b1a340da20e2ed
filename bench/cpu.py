"""The local engine on a CPU shared with other work: threads, and the cost of keeping off AMX.

Run: `python bench/cpu.py [--reps 5] [--model smollm2-instruct] [--model gemma3-270m]`.
Prints the tables and writes them to docs/benchmarks.md (section "cpu").

1. Threads. Prefill (a ~500-token prompt, the KV cache reset each time) and
   decode (64 unconstrained greedy tokens) in tokens per second, for
   llama-cpp-python's default threads (decode: half the CPUs, prefill: every
   CPU) and for aerix's default (decode: `default_threads()`, half the CPUs;
   prefill: one thread for each CPU idle when it starts, `PrefillThreads`),
   on a quiet machine and with one CPU kept busy by another process (a Python
   busy loop, started before and stopped after each measurement). The four
   cells of each model run interleaved, `--reps` times; medians.
2. Extra buffer types. llama.cpp loads weights into "extra" buffer types where
   it can: AMX tiles on a CPU with AMX, repacked (interleaved) layouts for
   some quantisations on AVX2/AVX-512. On a CPU with AMX aerix loads without
   them (the AMX path crashes llama.cpp there, ggml-org/llama.cpp#20824), which
   gives up repacking too. The same prefill and decode with and without extra
   buffers, interleaved, measure what that costs on this CPU (quiet machine,
   aerix's threads).
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import statistics
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from _report import machine, write_section
from aerix import load, model_path
from aerix.engines import LlamaCpp
from aerix.engines.llamacpp import _llama, _open

PROMPT = " ".join(
    f"Item {i}: the {w} of the report." for i, w in enumerate(["summary", "scope", "method"] * 17)
)


def _spin() -> None:  # pragma: no cover - runs in a child process
    while True:
        pass


@contextmanager
def one_cpu_busy(on: bool) -> Iterator[None]:
    """Another process keeping one CPU busy while the block runs (or nothing)."""
    if not on:
        yield
        return
    proc = multiprocessing.get_context("spawn").Process(target=_spin, daemon=True)
    proc.start()
    time.sleep(0.3)  # let it get scheduled
    try:
        yield
    finally:
        proc.terminate()
        proc.join()


def engine(name: str, *, threads: str, extra_buffers: bool | None = None) -> LlamaCpp:
    cpus = os.cpu_count() or 1
    kwargs: dict[str, Any] = {"n_ctx": 2048}
    if threads == "llama.cpp":
        kwargs |= {"n_threads": max(cpus // 2, 1), "n_threads_batch": cpus}
    if extra_buffers is None:
        return load(name, **kwargs)
    real = _llama.amx_risk
    _llama.amx_risk = lambda: not extra_buffers  # the engine keeps off extra buffers where AMX is
    try:
        return load(name, **kwargs)
    finally:
        _llama.amx_risk = real


async def measure(e: LlamaCpp) -> tuple[float, float]:
    """Prefill and decode tokens per second for one fresh generation."""
    e.reset()
    messages: Any = [{"role": "user", "content": PROMPT}]
    async for _ in e.chat(messages, {"max_tokens": 64, "temperature": 0}):
        pass
    s = e.last_stats
    assert s is not None
    return s.prefilled_tokens / s.prefill_s, max(s.completion_tokens - 1, 1) / max(s.decode_s, 1e-9)


def cell(values: list[tuple[float, float]]) -> tuple[float, float]:
    return statistics.median(v[0] for v in values), statistics.median(v[1] for v in values)


async def threads_table(name: str, reps: int) -> str:
    configs = [(t, busy) for busy in (False, True) for t in ("llama.cpp", "aerix")]
    engines = {t: engine(name, threads=t) for t in ("llama.cpp", "aerix")}
    runs: dict[tuple[str, bool], list[tuple[float, float]]] = {c: [] for c in configs}
    try:
        for e in engines.values():
            await measure(e)  # warm up
        for _ in range(reps):
            for t, busy in configs:
                with one_cpu_busy(busy):
                    runs[t, busy].append(await measure(engines[t]))
    finally:
        for e in engines.values():
            e.close()
    cpus = os.cpu_count() or 1
    label = {
        "llama.cpp": f"llama-cpp-python's defaults ({max(cpus // 2, 1)} decode / {cpus} prefill threads)",
        "aerix": f"aerix's default ({_open.default_threads()} decode / one a CPU idle for each prefill)",
    }
    rows = [
        f"| {label[t]} | {'one CPU busy' if busy else 'quiet'} | {p:.0f} | {d:.0f} |"
        for (t, busy), v in runs.items()
        for p, d in [cell(v)]
    ]
    q = {t: cell(runs[t, False]) for t in engines}
    b = {t: cell(runs[t, True]) for t in engines}
    ratio = (
        f"With one CPU busy, aerix's default prefills at {b['aerix'][0] / b['llama.cpp'][0]:.1f}x and decodes at "
        f"{b['aerix'][1] / b['llama.cpp'][1]:.1f}x llama-cpp-python's defaults; on the quiet machine, "
        f"at {q['aerix'][0] / q['llama.cpp'][0]:.2f}x and {q['aerix'][1] / q['llama.cpp'][1]:.2f}x."
    )
    return "\n".join(
        [
            f"#### {name}: threads (tokens/s, medians of {reps})",
            "",
            "| threads | machine | prefill | decode |",
            "|---|---|---|---|",
            *rows,
            "",
            ratio,
        ]
    )


async def buffers_table(name: str, reps: int) -> str:
    engines = {on: engine(name, threads="aerix", extra_buffers=on) for on in (True, False)}
    runs: dict[bool, list[tuple[float, float]]] = {True: [], False: []}
    try:
        for e in engines.values():
            await measure(e)
        for _ in range(reps):
            for on, e in engines.items():
                runs[on].append(await measure(e))
    finally:
        for e in engines.values():
            e.close()
    on, off = cell(runs[True]), cell(runs[False])
    return "\n".join(
        [
            f"#### {name}: extra buffer types (tokens/s, medians of {reps}, quiet machine)",
            "",
            "| weights | prefill | decode |",
            "|---|---|---|",
            f"| with extra buffers (llama.cpp's default; aerix's off AMX CPUs) | {on[0]:.0f} | {on[1]:.0f} |",
            f"| without (aerix's default on a CPU with AMX) | {off[0]:.0f} | {off[1]:.0f} |",
            "",
            f"Without extra buffers: prefill at {off[0] / on[0]:.2f}x, decode at {off[1] / on[1]:.2f}x.",
        ]
    )


async def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--model", action="append", help="repeatable; default: smollm2-instruct, gemma3-270m")
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    names = args.model or ["smollm2-instruct", "gemma3-270m"]
    parts = []
    for name in names:
        try:
            model_path(name)
        except (FileNotFoundError, KeyError) as exc:
            print(f"skipping {name}: {exc}")
            continue
        for table in (await threads_table(name, args.reps), await buffers_table(name, args.reps)):
            print(table, "\n")
            parts.append(table)
    system = bytes(_llama.llama_cpp.llama_print_system_info()).decode().strip()
    text = "\n\n".join(
        [
            "## cpu: threads on a busy machine, and the cost of keeping off AMX",
            f"Machine: {machine()}. llama.cpp build: `{system}`. Written by `python bench/cpu.py`.",
            "One CPU busy: another process spins on one CPU during each measurement. Prefill: a "
            "fresh ~500-token prompt; decode: 64 unconstrained greedy tokens. On this CPU (no AMX) the "
            "extra buffer types are what repacks the weights; a CPU with AMX would also use them for AMX.",
            *parts,
        ]
    )
    if not args.no_write:
        print("wrote", write_section("cpu", text))


if __name__ == "__main__":
    asyncio.run(main())
