"""`LlamaCpp`'s constructor options: checked, with the defaults that depend on the machine filled in.

Every check runs before llama.cpp reads the file, so a bad option costs no load
and names the option, what was given and what it takes.
"""

from __future__ import annotations

import difflib
import math
import os
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Literal

from ...errors import AerixError
from . import _llama
from ._open import default_threads, most_threads
from ._slots import SLOT_TOKENS, most_slots
from .rules import check_heuristics

__all__ = ["Options", "check_options"]

_OWN = ("model_path", "n_ctx", "n_threads", "n_batch", "n_ubatch", "verbose")
"""`llama_cpp.Llama`'s arguments that `LlamaCpp` sets itself (`n_ubatch` is `n_batch`)."""

_FIX = (
    "give the path of a .gguf model file, "
    "or use aerix.load('smollm2-instruct') for the embedded default model"
)
"""The fix for a `model_path` that is no GGUF file's."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Options:
    """`LlamaCpp`'s options, checked; each field is the constructor's argument of that name
    (see `LlamaCpp`), the biases as floats."""

    model_path: Path
    n_ctx: int
    kv_slots: int
    n_threads: int | None
    """The threads for decoding, and for prefill unless `n_threads_batch` is given, as given;
    `None`: the engine's (`decode_threads`, `prefill_threads`)."""
    n_batch: int
    prefill_chunk: int
    chat_template: str | None
    jump_forward: bool
    copy_bias: float
    close_bias: float
    check_optional: bool
    string_choices: int
    convert_values: bool
    pick_bias: float
    new_call_bias: float
    no_placeholders: bool
    heuristics: frozenset[str]
    """The names of the heuristics that act (`check_heuristics`)."""
    fit_threshold: float | Literal["calibrated"] | None
    amx: bool
    verbose: bool
    llama_kwargs: dict[str, Any]
    """The rest, for `llama_cpp.Llama` (`n_threads_batch` only when given as a number)."""

    @property
    def decode_threads(self) -> int:
        """The threads for decoding: `n_threads`, else the engine's default (`default_threads`)."""
        return default_threads() if self.n_threads is None else self.n_threads

    @property
    def prefill_threads(self) -> int | None:
        """The threads for prefill: `n_threads_batch`, else `n_threads`; `None` when neither is
        given: chosen for each prefill from the CPUs idle then (`PrefillThreads`)."""
        batch: int | None = self.llama_kwargs.get("n_threads_batch")
        return self.n_threads if batch is None else batch


def check_options(
    model_path: str | os.PathLike[str],
    *,
    n_ctx: int,
    kv_slots: int,
    n_threads: int | None,
    n_batch: int,
    prefill_chunk: int,
    chat_template: str | None,
    jump_forward: bool,
    copy_bias: float,
    close_bias: float,
    check_optional: bool,
    string_choices: int,
    convert_values: bool,
    pick_bias: float,
    new_call_bias: float,
    no_placeholders: bool,
    heuristics: object,
    fit_threshold: float | Literal["calibrated"] | None,
    amx: bool,
    verbose: bool,
    llama_kwargs: dict[str, Any],
) -> Options:
    """`LlamaCpp`'s arguments, checked in the order it lists them (the file first).

    Raises:
        FileNotFoundError: `model_path` is a folder or does not exist.
        AerixError: `kind="options"`: a bad option, named with what it takes.
    """
    path = _check_path(model_path)
    _check_size("n_ctx", n_ctx, 0)
    check_kv_slots(kv_slots, n_ctx)
    _check_size("n_batch", n_batch, 1)
    _check_size("prefill_chunk", prefill_chunk, 1)
    _check_bias("copy_bias", copy_bias)
    _check_bias("close_bias", close_bias)
    _check_bias("pick_bias", pick_bias)
    _check_bias("new_call_bias", new_call_bias)
    _check_flag("check_optional", check_optional)
    _check_flag("convert_values", convert_values)
    _check_flag("no_placeholders", no_placeholders)
    _check_string_choices(string_choices)
    _check_fit_threshold(fit_threshold)
    _check_llama_kwargs(llama_kwargs)
    batch_threads = llama_kwargs.get("n_threads_batch")
    _check_threads("n_threads", n_threads)
    _check_threads("n_threads_batch", batch_threads)
    _check_flag("amx", amx)
    _check_template(chat_template)
    if batch_threads is None:
        llama_kwargs = {k: v for k, v in llama_kwargs.items() if k != "n_threads_batch"}
    return Options(
        model_path=path,
        n_ctx=n_ctx,
        kv_slots=kv_slots,
        n_threads=n_threads,
        n_batch=n_batch,
        prefill_chunk=prefill_chunk,
        chat_template=chat_template,
        jump_forward=jump_forward,
        copy_bias=float(copy_bias),
        close_bias=float(close_bias),
        check_optional=check_optional,
        string_choices=string_choices,
        convert_values=convert_values,
        pick_bias=float(pick_bias),
        new_call_bias=float(new_call_bias),
        no_placeholders=no_placeholders,
        heuristics=check_heuristics(heuristics),
        fit_threshold=fit_threshold if fit_threshold in (None, "calibrated") else float(fit_threshold),
        amx=amx,
        verbose=verbose,
        llama_kwargs=llama_kwargs,
    )


def _check_path(model_path: object) -> Path:
    if not isinstance(model_path, str | os.PathLike) or isinstance(os.fspath(model_path), bytes):
        raise AerixError(
            "options",
            f"model_path must be a str or a Path, got {type(model_path).__name__} {model_path!r}; {_FIX}",
        )
    path = Path(model_path)
    if path.is_dir():
        raise FileNotFoundError(f"{str(path)!r} is a folder, not a GGUF file; {_FIX}")
    if not path.is_file():
        raise FileNotFoundError(f"no GGUF file at {str(path)!r}; {_FIX}")
    return path


def _check_size(name: str, size: object, least: int) -> None:
    # llama.cpp keeps each in 32 bits: a larger one would wrap around
    if isinstance(size, bool) or not isinstance(size, int) or not least <= size < 1 << 31:
        more = " (0: the model's training length)" if name == "n_ctx" else ""
        raise AerixError(
            "options", f"{name} must be a whole number from {least} to {(1 << 31) - 1}{more}, got {size!r}"
        )


def check_kv_slots(kv_slots: object, n_ctx: int, loaded: int | None = None) -> None:
    """`kv_slots`: a whole number from 1 to what a context of `n_ctx` tokens keeps (`most_slots`).
    `n_ctx` 0, the model's training length, is checked against the context once it is made
    (`loaded`: its length).

    Raises:
        AerixError: `kind="options"`, naming kv_slots, the range and the fix.
    """
    size = loaded or n_ctx
    most = most_slots(size) if size else 1 << 31
    if isinstance(kv_slots, bool) or not isinstance(kv_slots, int) or not 1 <= kv_slots <= most:
        context = f"n_ctx={n_ctx}" if n_ctx or not loaded else f"n_ctx=0, the model's {loaded}"
        limit = (
            f"from 1 to {most} (one conversation for each {SLOT_TOKENS} tokens of the context, {context})"
            if size
            else "1 or more"
        )
        raise AerixError(
            "options",
            f"kv_slots must be a whole number {limit}, got {kv_slots!r}; "
            "1 keeps one conversation" + (", or raise n_ctx to keep more" if size else ""),
        )


def _check_bias(name: str, bias: object) -> None:
    if isinstance(bias, bool) or not isinstance(bias, int | float) or not 0 <= bias <= 100:
        raise AerixError("options", f"{name} must be a number from 0 to 100, got {bias!r}")


def _check_string_choices(value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise AerixError("options", f"string_choices must be a whole number, 1 or more, got {value!r}")


def _check_fit_threshold(value: object) -> None:
    if (
        value is not None
        and value != "calibrated"
        and (isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value))
    ):
        raise AerixError("options", f"fit_threshold must be a number, 'calibrated' or None, got {value!r}")


def _check_template(source: object) -> None:
    if source is not None and (not isinstance(source, str) or not source.strip()):
        raise AerixError(
            "options",
            f"chat_template must be a Jinja template's text (None: the model's), got {source!r}",
        )


def _check_flag(name: str, value: object) -> None:
    if not isinstance(value, bool):
        raise AerixError("options", f"{name} must be True or False, got {value!r}")


def _check_threads(name: str, value: object) -> None:
    """`None` (the default) or a whole number up to `most_threads()`."""
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise AerixError("options", f"{name} must be a whole number, 1 or more, got {value!r}")
    most = most_threads()
    if value > most:
        raise AerixError(
            "options",
            f"{name} must be at most {most} (four for each of the machine's {most // 4} "
            f"CPU{'s' if most > 4 else ''}), got {value}; more only slow llama.cpp down "
            f"(None: the engine's default, {default_threads()})",
        )


def _check_llama_kwargs(kwargs: dict[str, Any]) -> None:
    """Refuse a keyword argument that `llama_cpp.Llama` does not take by name (it would ignore
    it) or that `LlamaCpp` sets itself, naming the closest option there is."""
    known = _llama.llama_options() - {"self", *_OWN}
    for name in kwargs:
        if name in known:
            continue
        if name in _OWN:
            raise AerixError("options", f"LlamaCpp sets llama_cpp.Llama's {name} itself; leave {name}= out")
        own = {f.name for f in fields(Options)} - {"llama_kwargs"}
        close = difflib.get_close_matches(name, [*sorted(own), *sorted(known)], n=1)
        hint = f"; did you mean {close[0]}?" if close else ""
        raise AerixError(
            "options",
            f"unknown option {name!r} for LlamaCpp (not one of its own, nor one llama_cpp.Llama takes){hint}",
        )
