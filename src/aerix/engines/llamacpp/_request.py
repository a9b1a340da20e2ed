"""The options of one `LlamaCpp.chat` call, checked, with llama.cpp's defaults."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ...abort import AbortSignal
from ...errors import AerixError
from ...model import ChatMessage, GenerateOptions
from ._sampling import Sampling

__all__ = ["Request", "parse_request"]

_OPTION_KEYS = frozenset(GenerateOptions.__optional_keys__)


@dataclass(frozen=True, kw_only=True, slots=True)
class Request:
    """One generation's prompt and settings."""

    prompt: list[ChatMessage]
    sampling: Sampling
    max_tokens: int | None
    seed: int | None
    stop: tuple[str, ...]
    schema: object
    signal: AbortSignal | None


def parse_request(messages: list[ChatMessage], opts: GenerateOptions | None) -> Request:
    """Check the options; the errors name the option, the value and what is allowed."""
    o: dict[str, Any] = dict(opts or {})
    unknown = sorted(set(o) - _OPTION_KEYS)
    if unknown:
        raise AerixError("options", f"unknown option(s) {unknown}; allowed: {sorted(_OPTION_KEYS)}")

    def number(key: str, lo: float, hi: float, kind: type = float) -> Any:
        value = o.get(key)
        if value is None:
            return None
        ok = isinstance(value, int if kind is int else (int, float)) and not isinstance(value, bool)
        if not ok or not lo <= value <= hi:
            kind_name = "an integer" if kind is int else "a number"
            raise AerixError("options", f"{key} must be {kind_name} in [{lo}, {hi}], got {value!r}")
        return value

    defaults = Sampling()
    temperature = number("temperature", 0.0, 100.0)
    top_p = number("top_p", 0.0, 1.0)
    top_k = number("top_k", 0, 1 << 31, int)
    min_p = number("min_p", 0.0, 1.0)
    max_tokens = number("max_tokens", 1, 1 << 31, int)
    seed = number("seed", -(1 << 63), 1 << 64, int)
    stop = o.get("stop") or []
    if not isinstance(stop, list | tuple) or not all(isinstance(s, str) for s in stop):
        raise AerixError("options", f"stop must be a list of strings, got {stop!r}")
    constraint = o.get("constraint")
    if constraint is not None and not (isinstance(constraint, dict) and set(constraint) == {"json"}):
        raise AerixError("options", f'constraint must be {{"json": <JSON Schema>}}, got {constraint!r}')
    signal = o.get("signal")
    if signal is not None and not isinstance(signal, AbortSignal):
        raise AerixError("options", f"signal must be an AbortSignal, got {signal!r}")
    for m in messages:
        if not isinstance(m, dict) or not isinstance(m.get("content"), str):
            raise AerixError("options", f"each message needs a role and a string content, got {m!r}")
    return Request(
        prompt=list(messages),
        sampling=Sampling(
            temperature=defaults.temperature if temperature is None else float(temperature),
            top_k=defaults.top_k if top_k is None else top_k,
            top_p=defaults.top_p if top_p is None else float(top_p),
            min_p=defaults.min_p if min_p is None else float(min_p),
        ),
        max_tokens=max_tokens,
        seed=None if seed is None else seed % (1 << 64),
        stop=tuple(stop),
        schema=None if constraint is None else constraint["json"],
        signal=signal,
    )
