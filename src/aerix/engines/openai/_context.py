"""A server's refusal of a prompt too long for its context, read without I/O.

Servers word the refusal each their own way (and change it between versions);
`context_refusal` recognises each wording below and reads the prompt's size and
the context's size where the server gives them:

- vLLM: "This model's maximum context length is 4096 tokens. However, you requested
  512 output tokens and your prompt contains at least 3585 input tokens, ..." (0.18
  on), "... However, your request has 4410 input tokens." (0.10 to 0.17, also with
  "'max_tokens' or 'max_completion_tokens' is too large"), "... However, you requested
  4608 tokens (4096 in the messages, 512 in the completion)." (before 0.10), and "You
  passed 4410 input tokens and requested 512 output tokens. However, the model's
  context length is only 4096 tokens, ..." (its newest renderer).
- SGLang: "The input (4410 tokens) is longer than the model's context length (4096
  tokens)." and "Requested token count exceeds the model's maximum context length of
  4096 tokens. You requested a total of 4922 tokens: 4410 tokens from the input
  messages and 512 tokens for the completion. ..."
- llama.cpp's `llama-server`: an error of type `exceed_context_size_error` with the
  fields `n_prompt_tokens` and `n_ctx` ("request (4410 tokens) exceeds the available
  context size (4096 tokens), try increasing it"; older builds: "the request exceeds
  the available context size, try increasing it", or "input (4410 tokens) is larger
  than the max context size (4096 tokens). skipping").
- llama-cpp-python's server: OpenAI's wording, "This model's maximum context length
  is 4096 tokens. However, you requested 4922 tokens (4410 in the messages, 512 in
  the completion). ..." (code `context_length_exceeded`), made from its engine's
  "Requested tokens (4410) exceed context window of 4096", which also comes bare.
- Ollama, where it refuses at all (by default it drops the oldest messages itself,
  see `OpenAICompatible`): "the input length exceeds the context length", or "the
  prompt is longer than the context length currently available to the model; ...";
  neither gives a size.
- OpenAI: "This model's maximum context length is 128000 tokens. However, your
  messages resulted in 130000 tokens. ..." (code `context_length_exceeded`).
"""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = ["context_refusal"]

_P = r"(?P<prompt>\d[\d,]*)"
"""The prompt's size in a wording (some servers write thousands separators)."""
_W = r"(?P<window>\d[\d,]*)"
"""The context's size in a wording."""
_MAX = rf"maximum context length is {_W} tokens"

_WORDINGS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (server, re.compile(pattern, re.IGNORECASE | re.DOTALL))
    for server, pattern in (
        ("vLLM", rf"you passed {_P} input tokens .*?context length is only {_W} tokens"),
        ("vLLM", rf"{_MAX}.{{0,80}}?your prompt contains (?:at least )?{_P} input tokens"),
        ("vLLM", rf"{_MAX}.{{0,20}}?your request has {_P} input tokens"),
        ("vLLM", rf"{_MAX}.{{0,60}}?\({_P} in the messages"),
        ("vLLM", rf"{_MAX}.{{0,30}}?you requested {_P} tokens in the"),
        ("OpenAI", rf"{_MAX}.{{0,30}}?messages resulted in {_P} tokens"),
        ("OpenAI", _MAX),
        ("SGLang", rf"the input \({_P} tokens\) is longer than the model's context length \({_W} tokens\)"),
        (
            "SGLang",
            rf"exceeds the model's maximum context length of {_W} tokens.{{0,80}}?{_P} tokens from the input",
        ),
        ("llama-server", rf"request \({_P} tokens\) exceeds (?:the available )?context size \({_W} tokens\)"),
        ("llama-server", rf"input \({_P} tokens\) is larger than the max context size \({_W} tokens\)"),
        ("llama-server", r"exceeds the available context size"),
        ("llama-cpp-python", rf"requested tokens \({_P}\) exceed context window of {_W}"),
        ("Ollama", r"the input length exceeds the context length"),
        ("Ollama", r"the prompt is longer than the context length"),
    )
)
"""Each wording of a refusal for length, by server, most specific first."""

_CONTEXT_CODES = frozenset({"context_length_exceeded", "exceed_context_size_error"})
"""Error codes and types that mean the refusal, whatever the message says."""


def context_refusal(body: str) -> tuple[int, int] | None:
    """Whether an error body (or an error event's data) refuses the prompt as too long for
    the model's context, and with which sizes.

    Args:
        body: The error response's body, or a stream error event's data, as sent.

    Returns:
        `(prompt_tokens, context_window)` as the server gives them, each 0 where it gives
        none; `None` for any other error.
    """
    error = _error_object(body)
    fields = error if isinstance(error, dict) else {}
    prompt, window = _count(fields.get("n_prompt_tokens")), _count(fields.get("n_ctx"))
    text = _message(error, body)
    for _server, pattern in _WORDINGS:
        found = pattern.search(text)
        if found is not None:
            sizes = found.groupdict()
            return prompt or _count(sizes.get("prompt")), window or _count(sizes.get("window"))
    if {fields.get("code"), fields.get("type")} & _CONTEXT_CODES:
        return prompt, window
    return None


def _error_object(body: str) -> object:
    """The error object of a JSON body (`{"error": {...}}` or the object itself), or `None`."""
    try:
        obj: Any = json.loads(body)
    except ValueError:
        return None
    if isinstance(obj, dict) and "error" in obj:
        return obj["error"]
    return obj


def _message(error: object, body: str) -> str:
    """The human message of an error: its `message` (or `detail`), else the whole body."""
    if isinstance(error, dict):
        message = error.get("message", error.get("detail"))
        if isinstance(message, str):
            return message
    if isinstance(error, str):
        return error
    return body


def _count(value: object) -> int:
    """A token count read from a field or a match (`"4,096"` too); 0 for anything else."""
    if isinstance(value, bool):
        return 0
    if isinstance(value, int):
        return max(value, 0)
    if isinstance(value, str):
        digits = value.replace(",", "")
        return int(digits) if digits.isdigit() else 0
    return 0
