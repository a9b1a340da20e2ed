"""Opening a GGUF: the checks before llama.cpp reads it, the default threads, the AMX guard."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...errors import AerixError
from . import _llama

if TYPE_CHECKING:
    from ._options import Options

__all__ = [
    "check_gguf",
    "default_threads",
    "guard_amx",
    "machine_cpus",
    "most_threads",
    "open_model",
    "usable_cpus",
]


def usable_cpus() -> int:
    """The CPUs this process may run on (at least 1)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # not on Linux
        return os.cpu_count() or 1


def default_threads() -> int:
    """The engine's default threads for decoding, and for prefill where the idle CPUs cannot
    be read (`PrefillThreads`): half the CPUs this process may run on (at least 1).

    llama.cpp's threads spin while they wait for each other; with as many threads as
    CPUs, one busy CPU stalls them all. Half the CPUs leaves room for other work
    (docs/benchmarks.md measures the default against llama-cpp-python's on a busy machine).
    """
    return max(1, usable_cpus() // 2)


def machine_cpus() -> int:
    """The machine's CPUs, or those this process may use if it says more (at least 1)."""
    return max(usable_cpus(), os.cpu_count() or 1)


def most_threads() -> int:
    """The most threads the engine takes: four for each of the machine's CPUs. More only slow
    llama.cpp down (its threads spin while they wait for each other), and thousands make it
    hang or abort the process (`std::bad_alloc`) rather than fail."""
    return 4 * machine_cpus()


_GGUF_MAGIC = b"GGUF"


def check_gguf(path: Path) -> None:
    """Refuse a file that is not a GGUF before llama.cpp reads it.

    Raises:
        ValueError: The file does not start with GGUF's magic bytes, naming what it starts with.
    """
    with path.open("rb") as f:
        head = f.read(4)
    if head != _GGUF_MAGIC:
        raise ValueError(
            f"{str(path)!r} is not a GGUF file (it starts with {head!r}, not b'GGUF'); "
            "LlamaCpp loads .gguf model files: convert the model with llama.cpp's convert_hf_to_gguf.py"
        )


_GUARDED: dict[Path, str | None] = {}
"""The guarded first decodes of this process, by file: what happened (`None`: it worked)."""


def guard_amx(path: Path, threads: int) -> None:
    """With `amx=True` on a CPU with AMX: decode a few tokens in a child process first, and
    raise instead of crashing if llama.cpp's AMX path fails there (ggml-org/llama.cpp#20824).

    Raises:
        AerixError: `kind="options"`, naming the CPU, what happened and the option.
    """
    key = path.resolve()
    if key not in _GUARDED:
        _GUARDED[key] = _llama.probe_decode(path, threads)
    failure = _GUARDED[key]
    if failure is not None:
        raise AerixError(
            "options",
            f"llama.cpp's AMX matrix path failed on this CPU ({_llama.cpu_name()}): a first decode of "
            f"{str(path)!r} in a child process ended with {failure} (ggml-org/llama.cpp#20824); "
            "load it with LlamaCpp(..., amx=False), the default, which keeps llama.cpp off that path",
        )


def open_model(options: Options) -> Any:
    """The loaded `llama_cpp.Llama` for checked options: the file checked as a GGUF first,
    llama.cpp's extra buffer types left off on a CPU where its AMX path crashes (unless
    `options.amx`, after a guarded first decode: `guard_amx`).

    Raises:
        ValueError: The file is not a GGUF, or llama.cpp could not load it or make its
            context; each names the file and the fix.
        AerixError: `kind="options"`: `amx=True` and llama.cpp's AMX path failed here.
    """
    path = options.model_path
    check_gguf(path)
    risky = _llama.amx_risk()
    if options.amx and risky:
        guard_amx(path, options.decode_threads)
    try:
        return _llama.open_llama(
            path,
            extra_buffers=options.amx or not risky,
            n_ctx=options.n_ctx,
            n_threads=options.decode_threads,
            n_batch=options.n_batch,
            n_ubatch=options.n_batch,
            verbose=options.verbose,
            # Until the first prefill chooses its own (`PrefillThreads`), when the user did not.
            **{"n_threads_batch": options.prefill_threads or options.decode_threads, **options.llama_kwargs},
        )
    except (ValueError, MemoryError) as exc:
        if isinstance(exc, MemoryError) or "llama_context" in str(exc):  # the model loaded, not its context
            raise ValueError(
                f"llama.cpp loaded {str(path)!r} but could not make its context of n_ctx={options.n_ctx} "
                f"tokens ({exc}): lower n_ctx (0: the model's training length), or free memory "
                "(LlamaCpp(..., verbose=True) shows llama.cpp's own log)"
            ) from exc
        raise ValueError(
            f"llama.cpp could not load {str(path)!r} ({exc}): the file is a GGUF but may be "
            "truncated or damaged, or of a model architecture this llama-cpp-python does not know; "
            "copy or download it again, or upgrade llama-cpp-python (LlamaCpp(..., verbose=True) "
            "shows llama.cpp's own log)"
        ) from exc
