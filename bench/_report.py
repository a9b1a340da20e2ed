"""Shared helpers for the benchmarks: the machine they ran on, and docs/benchmarks.md."""

from __future__ import annotations

import os
import platform
import re
import statistics
import subprocess
import sys
import time
from datetime import date
from pathlib import Path

DOCS = Path(__file__).resolve().parent.parent / "docs"


def machine() -> str:
    """One line naming the machine: CPU model, cores, memory, Python."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = ""
    try:
        out = subprocess.run(["free", "-g"], capture_output=True, text=True, check=False).stdout
        mem = f", {out.splitlines()[1].split()[1]} GiB"
    except (OSError, IndexError):
        pass
    return (
        f"{cpu}, {os.cpu_count()} cores{mem}, Python {platform.python_version()}, "
        f"{platform.system()} {platform.machine()}, {date.today().isoformat()}"
    )


def median(xs: list[float]) -> float:
    return statistics.median(xs)


def write_section(name: str, markdown: str, file: str = "benchmarks.md") -> Path:
    """Replace the section `name` of docs/<file> (between markers) or append it."""
    path = DOCS / file
    begin, end = f"<!-- bench:{name} -->", f"<!-- /bench:{name} -->"
    block = f"{begin}\n{markdown.strip()}\n{end}"
    text = path.read_text() if path.exists() else "# Benchmarks\n"
    pattern = re.compile(re.escape(begin) + r".*?" + re.escape(end), re.S)
    text = pattern.sub(lambda _: block, text) if pattern.search(text) else f"{text.rstrip()}\n\n{block}\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


class Progress:
    """A one-line progress bar on stderr: `right` names what is counted, `unit` one item."""

    def __init__(self, total: int, label: str, *, right: str = "right", unit: str = "entry") -> None:
        self.total, self.label, self.done, self.right = total, label, 0, 0
        self.noun, self.unit = right, unit
        self.t0 = time.perf_counter()

    def step(self, right: bool) -> None:
        self.done += 1
        self.right += right
        width = 30
        filled = width * self.done // max(self.total, 1)
        rate = (time.perf_counter() - self.t0) / self.done
        sys.stderr.write(
            f"\r{self.label:<40} [{'#' * filled}{'.' * (width - filled)}] "
            f"{self.done}/{self.total} {self.noun} {self.right} ({rate:.1f} s/{self.unit})"
        )
        sys.stderr.flush()

    def close(self) -> None:
        sys.stderr.write("\n")
        sys.stderr.flush()
