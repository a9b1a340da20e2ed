"""llama.cpp's own server, `llama-server`, built once from the llama.cpp that llama-cpp-python carries.

Run from the repository root:

    python bench/llama_server.py           # build it (minutes), or say where it is
    python bench/llama_server.py --where   # print its path if it is built, else exit 1

The benchmarks that run peers through a server (`bench/agent_tasks.py --peers`) and the
test `tests/engines/test_openai_llama_server.py` use it; nothing else needs it. It is
built from the source distribution of the llama-cpp-python version that pyproject.toml
pins (its `vendor/llama.cpp`), so it runs the same llama.cpp as the in-process engine,
for any CPU of the machine's family (`GGML_NATIVE=OFF`, as `make setup` builds the
wheel), and kept beside pip's cache, like that wheel: only the first build on a
machine pays for it. The registry (PyPI) is the one network it reaches, at build time.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CMAKE = ["-DGGML_NATIVE=OFF", "-DLLAMA_CURL=OFF", "-DBUILD_SHARED_LIBS=OFF", "-DLLAMA_BUILD_SERVER=ON"]


def pinned() -> str:
    """The llama-cpp-python version pyproject.toml pins."""
    found = re.search(r"llama-cpp-python==([0-9.]+)", (ROOT / "pyproject.toml").read_text())
    if found is None:
        raise SystemExit("pyproject.toml pins no llama-cpp-python version")
    return found.group(1)


def cache_dir() -> Path:
    """Where the binary is kept: beside pip's cache, named by version and machine."""
    pip_cache = subprocess.run(
        [sys.executable, "-m", "pip", "cache", "dir"], capture_output=True, text=True, check=False
    ).stdout.strip()
    base = Path(pip_cache) if pip_cache else Path.home() / ".cache" / "pip"
    return base / "aerix-llama-server" / f"{pinned()}-{platform.machine()}"


def where() -> Path | None:
    """The built `llama-server`, if it is in the cache (the environment's `AERIX_LLAMA_SERVER`
    names another binary to use instead)."""
    given = os.environ.get("AERIX_LLAMA_SERVER")
    if given:
        return Path(given) if Path(given).is_file() else None
    binary = cache_dir() / "llama-server"
    return binary if binary.is_file() else None


def build(jobs: int) -> Path:
    """Download the pinned source distribution, build `llama-server` from it, cache it."""
    target = cache_dir()
    with tempfile.TemporaryDirectory(prefix="aerix-llama-server-") as tmp:
        work = Path(tmp)
        spec = f"llama-cpp-python=={pinned()}"
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "-q",
                "--no-deps",
                "--no-binary",
                ":all:",
                "-d",
                tmp,
                spec,
            ],
            check=True,
        )
        (sdist,) = work.glob("llama_cpp_python-*.tar.gz")
        with tarfile.open(sdist) as tar:
            tar.extractall(work, filter="data")
        (source,) = work.glob("llama_cpp_python-*/vendor/llama.cpp")
        out = work / "build"
        subprocess.run(
            ["cmake", "-S", str(source), "-B", str(out), "-DCMAKE_BUILD_TYPE=Release", *CMAKE], check=True
        )
        subprocess.run(
            ["cmake", "--build", str(out), "--target", "llama-server", "-j", str(jobs)], check=True
        )
        target.mkdir(parents=True, exist_ok=True)
        shutil.copy2(out / "bin" / "llama-server", target / "llama-server")
    return target / "llama-server"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--where", action="store_true", help="print the binary's path if built, else exit 1")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args(argv)
    found = where()
    if args.where:
        if found is None:
            print(f"not built; run: python bench/llama_server.py (it goes to {cache_dir()})", file=sys.stderr)
            return 1
        print(found)
        return 0
    print(found if found is not None else build(args.jobs))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
