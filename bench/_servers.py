"""The servers the benchmarks run peers against, each on the same GGUF on a free loopback port.

`served("llama-server", ...)` is llama.cpp's own server with `--jinja` (built by
`bench/llama_server.py`); `served("lcp", ...)` is llama-cpp-python's, with
`--chat_format chatml-function-calling` (its format for tool calls).
"""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from llama_server import where as llama_server_binary

__all__ = ["free_port", "served"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def served(server: str, gguf: Path, threads: int, n_ctx: int = 4096) -> Iterator[str]:
    """A server on `gguf` on a free loopback port, until the block ends; its /v1 URL."""
    port = free_port()
    if server == "llama-server":
        binary = llama_server_binary()
        if binary is None:
            raise SystemExit("llama-server is not built: python bench/llama_server.py builds it")
        command = [str(binary), "-m", str(gguf), "--jinja", "--host", "127.0.0.1", "--port", str(port)]
        command += ["-c", str(n_ctx), "-np", "1", "-t", str(threads), "-tb", str(threads), "--no-webui"]
    else:
        command = [sys.executable, "-m", "llama_cpp.server", "--model", str(gguf), "--host", "127.0.0.1"]
        command += ["--port", str(port), "--chat_format", "chatml-function-calling", "--n_ctx", str(n_ctx)]
        command += ["--n_threads", str(threads), "--n_threads_batch", str(threads)]
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 180
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=5):
                    break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit(f"{server} did not start on port {port}") from None
                time.sleep(1)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        proc.terminate()
        proc.wait(timeout=30)
