"""llama-cpp-python as the engine drives it: the one module that reaches below its public API.

Elsewhere the engine calls the methods of the `Llama` class (`tokenize`, `eval`,
`n_ctx`, `metadata`, `token_bos`, `close`) and the `llama_*` functions that
llama-cpp-python binds from `llama.h` (`_vocab` reads the vocabulary with
them). What goes below that lives here, pinned to the versions in `TESTED`
(tests/engines/test_llamacpp_load.py fails on any other):

- loading without llama.cpp's extra buffer types (`llama_model_params.use_extra_bufts`,
  which `Llama()` takes no argument for), which keeps a CPU with AMX off
  llama.cpp's AMX matrix path, where it crashes (ggml-org/llama.cpp#20824);
- `Llama`'s record of the evaluated tokens (`input_ids`, `n_tokens`): resized when
  llama.cpp rounds the context up, read back, and moved back after the KV cache
  was cut (`keep`), or after a conversation's KV state was put back (`restore_sequence`);
- the logits, the KV cache and the threads of `Llama.ctx`: a conversation's KV state
  copied out and back (`save_sequence`, `restore_sequence`), the threads set per call
  (`set_threads`); and a second context on the same weights (`ScoringContext`);
- letting `Llama()` load a GGUF whose chat template its own formatter cannot
  compile (aerix renders templates itself, and reports that one).
"""

from __future__ import annotations

import ctypes
import functools
import inspect
import os
import signal
import subprocess
import sys
import threading
import warnings
from pathlib import Path
from typing import Any

import numpy as np

try:
    import llama_cpp
    import llama_cpp.llama_chat_format as _chat_format
    import llama_cpp.llama_cpp as _bindings
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError("aerix.engines.LlamaCpp needs llama-cpp-python: pip install 'aerix[llama]'") from exc

__all__ = [
    "TESTED",
    "ScoringContext",
    "amx_risk",
    "cpu_name",
    "evaluated",
    "fit_input_ids",
    "keep",
    "last_logits",
    "llama_options",
    "n_evaluated",
    "open_llama",
    "probe_decode",
    "restore_sequence",
    "save_sequence",
    "set_threads",
    "threads",
    "uses_extra_buffers",
]

TESTED = ("0.3.36",)
"""The llama-cpp-python versions this module was tested with."""

VERSION: str = getattr(llama_cpp, "__version__", "unknown")

if VERSION not in TESTED:  # pragma: no cover - depends on the environment
    warnings.warn(
        f"aerix's LlamaCpp engine was tested with llama-cpp-python {', '.join(TESTED)}, not {VERSION}; "
        "it reaches a few of its internals (aerix/engines/llamacpp/_llama.py), which may have changed: "
        f"pip install 'llama-cpp-python=={TESTED[-1]}' if the engine misbehaves",
        RuntimeWarning,
        stacklevel=2,
    )

_PATCH_LOCK = threading.Lock()


@functools.cache
def _system_info() -> str:
    return bytes(llama_cpp.llama_print_system_info()).decode(errors="replace")


@functools.cache
def _cpuinfo() -> str:
    try:
        return Path("/proc/cpuinfo").read_text(errors="replace")
    except OSError:
        return ""


def cpu_name() -> str:
    """The CPU's model name, as the OS reports it (or the platform's word for it)."""
    for line in _cpuinfo().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    import platform

    return platform.processor() or platform.machine() or "this CPU"


def amx_risk() -> bool:
    """Whether llama.cpp would take its AMX matrix path here: built with AMX, on a CPU with AMX.

    Where the CPU's flags cannot be read (no /proc/cpuinfo), a build with AMX
    counts as a risk.
    """
    if "AMX_INT8 = 1" not in _system_info():
        return False
    info = _cpuinfo()
    return not info or "amx_tile" in info or "amx_int8" in info


@functools.cache
def llama_options() -> frozenset[str]:
    """The keyword arguments `llama_cpp.Llama` takes by name (it swallows any other without a
    word, so a misspelt one would do nothing)."""
    params = inspect.signature(llama_cpp.Llama.__init__).parameters
    named = (inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return frozenset(n for n, p in params.items() if p.kind in named)


def open_llama(path: Path, *, extra_buffers: bool, **kwargs: Any) -> Any:
    """`llama_cpp.Llama(model_path=path, **kwargs)`, without llama.cpp's extra buffer
    types (AMX, repacked weights) unless `extra_buffers`.

    `Llama()` also compiles the GGUF's chat templates with its own formatter,
    and a template that does not compile would stop the load; aerix renders
    templates itself (and names a broken one, with the fix), so that compile
    is let fail quietly here.

    Raises:
        ValueError: llama.cpp could not load the file (llama-cpp-python's own error).
    """
    default = _bindings.llama_model_default_params
    formatter = _chat_format.Jinja2ChatFormatter

    def without_extra_buffers() -> Any:
        params = default()
        params.use_extra_bufts = False
        return params

    class Lenient(formatter):  # type: ignore[misc, valid-type]
        def __init__(self, *args: Any, **kw: Any) -> None:
            try:
                super().__init__(*args, **kw)
            except Exception:  # a template that does not compile: aerix reports it itself
                self._environment = None

    # `Llama()` reads both names at load time; they are put back before anyone else loads.
    with _PATCH_LOCK:
        if not extra_buffers:
            _bindings.llama_model_default_params = without_extra_buffers
        _chat_format.Jinja2ChatFormatter = Lenient  # type: ignore[misc]
        try:
            return llama_cpp.Llama(model_path=str(path), **kwargs)
        finally:
            _bindings.llama_model_default_params = default
            _chat_format.Jinja2ChatFormatter = formatter  # type: ignore[misc]


def uses_extra_buffers(llama: Any) -> bool:
    """Whether a loaded `Llama` was given llama.cpp's extra buffer types."""
    return bool(llama.model_params.use_extra_bufts)


def fit_input_ids(llama: Any) -> None:
    """Size `llama.input_ids` by the real context: llama.cpp may round the context up, and
    llama-cpp-python sized its token record by the requested length (it would drop the rest)."""
    n_ctx = int(llama.n_ctx())
    if llama.input_ids.shape[0] < n_ctx:
        llama.input_ids = np.zeros(n_ctx, dtype=np.intc)


def n_evaluated(llama: Any) -> int:
    """How many tokens `llama`'s KV cache holds, by its token record (`Llama.n_tokens`)."""
    return int(llama.n_tokens)


def evaluated(llama: Any, n: int) -> list[int]:
    """The first `n` tokens of `llama`'s token record (`Llama.input_ids`): those the KV cache
    holds, as `eval` recorded them."""
    tokens: list[int] = llama.input_ids[:n].tolist()
    return tokens


def last_logits(llama: Any, n_vocab: int) -> Any:
    """The logits after the last evaluated token (a view, valid until the next eval)."""
    return np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(llama.ctx, -1), shape=(n_vocab,))


def keep(llama: Any, n: int) -> int:
    """Keep the first `n` tokens of the KV cache (and of `llama.n_tokens`); how many are kept:
    `n`, or 0 when the cache cannot be cut in the middle and was cleared."""
    mem = llama_cpp.llama_get_memory(llama.ctx)
    if not llama_cpp.llama_memory_seq_rm(mem, 0, n, -1):
        llama_cpp.llama_memory_clear(mem, True)
        n = 0
    llama.n_tokens = min(n, int(llama.n_tokens))
    return n


def save_sequence(llama: Any) -> Any:
    """A copy of what `llama`'s KV cache holds (llama.cpp's state of its one sequence), for
    `restore_sequence`: a `ctypes` byte array, as long as the tokens it holds need."""
    ctx = llama.ctx
    size = int(llama_cpp.llama_state_seq_get_size(ctx, 0))
    state = (ctypes.c_uint8 * size)()
    if size and not llama_cpp.llama_state_seq_get_data(ctx, state, size, 0):
        raise RuntimeError("llama.cpp could not copy the KV cache of a conversation")
    return state


def restore_sequence(llama: Any, state: Any, tokens: list[int]) -> int:
    """Put back into `llama`'s KV cache a state that `save_sequence` copied while it held
    `tokens`, in place of what it holds; how many tokens it holds then: `len(tokens)`, or 0
    when llama.cpp refused the state (the cache is empty then)."""
    mem = llama_cpp.llama_get_memory(llama.ctx)
    llama_cpp.llama_memory_clear(mem, True)
    llama.n_tokens = 0
    if not tokens or not llama_cpp.llama_state_seq_set_data(llama.ctx, state, len(state), 0):
        llama_cpp.llama_memory_clear(mem, True)
        return 0
    llama.input_ids[: len(tokens)] = tokens
    llama.n_tokens = len(tokens)
    return len(tokens)


def set_threads(llama: Any, n_threads: int, n_threads_batch: int) -> None:
    """The threads `llama`'s context uses from its next evaluation on: `n_threads` for one
    token, `n_threads_batch` for several (a prompt's prefill)."""
    llama_cpp.llama_set_n_threads(llama.ctx, n_threads, n_threads_batch)


def threads(llama: Any) -> tuple[int, int]:
    """The threads `llama`'s context uses now: for one token, and for several."""
    return int(llama_cpp.llama_n_threads(llama.ctx)), int(llama_cpp.llama_n_threads_batch(llama.ctx))


class ScoringContext:
    """A second llama.cpp context on a loaded model's weights (shared, not copied), for scores.

    Args:
        llama: The loaded `Llama`.
        n_ctx: The context's length, and the most tokens one `decode` takes.
    """

    def __init__(self, llama: Any, n_ctx: int) -> None:
        params = llama_cpp.llama_context_default_params()
        params.n_ctx = params.n_batch = params.n_ubatch = n_ctx
        params.n_threads = llama.context_params.n_threads
        params.n_threads_batch = llama.context_params.n_threads_batch
        self.n_vocab = int(llama.n_vocab())
        self._ctx = llama_cpp.llama_init_from_model(llama.model, params)
        if not self._ctx:
            raise RuntimeError("llama.cpp could not create the tool-fit scoring context")
        self._batch = llama_cpp.llama_batch_init(n_ctx, 0, 1)

    def set_threads(self, n_threads_batch: int) -> None:
        """The threads of the context's evaluations of several tokens, from the next on (those
        of one token stay as they are)."""
        llama_cpp.llama_set_n_threads(self._ctx, llama_cpp.llama_n_threads(self._ctx), n_threads_batch)

    def close(self) -> None:
        """Free the context (once)."""
        if self._ctx:
            llama_cpp.llama_batch_free(self._batch)
            llama_cpp.llama_free(self._ctx)
            self._ctx = None

    def keep(self, n: int) -> int:
        """Keep the first `n` cached tokens; how many are kept (`n`, or 0 if it was cleared)."""
        mem = llama_cpp.llama_get_memory(self._ctx)
        if llama_cpp.llama_memory_seq_rm(mem, 0, n, -1):
            return n
        llama_cpp.llama_memory_clear(mem, True)
        return 0

    def decode(self, tokens: list[int], start: int, logits_from: int) -> Any:
        """Evaluate `tokens` at positions `start`... and return the logits of those at
        positions `logits_from` and after (one row each)."""
        batch = self._batch
        batch.n_tokens = len(tokens)
        for i, token in enumerate(tokens):
            batch.token[i], batch.pos[i], batch.n_seq_id[i] = token, start + i, 1
            batch.seq_id[i][0] = 0
            batch.logits[i] = start + i >= logits_from
        if llama_cpp.llama_decode(self._ctx, batch) != 0:
            raise RuntimeError("llama.cpp failed to evaluate a tool-fit prompt")
        rows = start + len(tokens) - max(logits_from, start)
        return np.ctypeslib.as_array(llama_cpp.llama_get_logits(self._ctx), shape=(rows, self.n_vocab))


_PROBE = """
import sys, llama_cpp
llama = llama_cpp.Llama(model_path=sys.argv[1], n_ctx=64, n_batch=64, n_threads=int(sys.argv[2]),
                        n_threads_batch=int(sys.argv[2]), verbose=False)
llama.eval(llama.tokenize(b"The quick brown fox jumps over the lazy dog", add_bos=True))
"""


def probe_decode(path: Path, n_threads: int, timeout: float = 300) -> str | None:
    """Load `path` with llama.cpp's extra buffer types and decode a few tokens in a child
    process; `None` if that worked, else what happened ("SIGSEGV", "exit 1: ...")."""
    env = {**os.environ, "PYTHONFAULTHANDLER": ""}
    try:
        done = subprocess.run(
            [sys.executable, "-c", _PROBE, str(path), str(n_threads)],
            capture_output=True,
            timeout=timeout,
            env=env,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return f"no answer in {timeout:.0f} s"
    if done.returncode == 0:
        return None
    if done.returncode < 0:
        try:
            return signal.Signals(-done.returncode).name
        except ValueError:
            return f"signal {-done.returncode}"
    tail = done.stderr.decode(errors="replace").strip().splitlines()[-1:] or [""]
    return f"exit {done.returncode}: {tail[0]}"
