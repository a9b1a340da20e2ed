"""The options of one `LlamaCpp.chat` call, checked, with llama.cpp's defaults."""

from __future__ import annotations

from dataclasses import dataclass

from ...abort import AbortSignal
from ...model import ChatMessage, GenerateOptions, Handover, checked_options
from ._sampling import Sampling

__all__ = ["Request", "parse_request"]


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
    handover: Handover | None
    """What the loop hands over of the conversation, for the value rules (`Handover`)."""


def parse_request(messages: list[ChatMessage], opts: GenerateOptions | None) -> Request:
    """Check the options (`checked_options`) and fill in llama.cpp's defaults."""
    o = checked_options(messages, opts)
    defaults = Sampling()
    temperature, top_k, top_p, min_p = o.get("temperature"), o.get("top_k"), o.get("top_p"), o.get("min_p")
    seed, constraint = o.get("seed"), o.get("constraint")
    return Request(
        prompt=list(messages),
        sampling=Sampling(
            temperature=defaults.temperature if temperature is None else float(temperature),
            top_k=defaults.top_k if top_k is None else top_k,
            top_p=defaults.top_p if top_p is None else float(top_p),
            min_p=defaults.min_p if min_p is None else float(min_p),
        ),
        max_tokens=o.get("max_tokens"),
        seed=None if seed is None else seed % (1 << 64),
        stop=tuple(o.get("stop") or ()),
        schema=None if constraint is None else constraint["json"],
        signal=o.get("signal"),
        handover=o.get("handover"),
    )
