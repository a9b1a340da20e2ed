"""The body of a chat-completions request, built without I/O.

Sampling options map to the request fields of the same name (`top_k` and
`min_p` are not in OpenAI's API, but vLLM, SGLang and both llama.cpp servers
accept them; they are sent only when set). The JSON constraint is sent in the
form that the chosen `Dialect` names.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, get_args

from ...model import ChatMessage, GenerateOptions

__all__ = ["DIALECTS", "SAMPLING_FIELDS", "Dialect", "build_body", "response_format"]

Dialect = Literal["json_schema", "json_object", "none"]
"""How the JSON constraint is sent.

- `"json_schema"`: `response_format={"type": "json_schema", "json_schema":
  {"name": "turn", "schema": ..., "strict": true}}`, OpenAI's structured
  outputs, understood by vLLM, SGLang, llama.cpp's `llama-server`, Ollama and
  OpenAI. The default.
- `"json_object"`: `response_format={"type": "json_object", "schema": ...}`,
  the form that `llama-cpp-python`'s own server (`python -m llama_cpp.server`)
  accepts (it refuses `"json_schema"`); `llama-server` accepts it too.
- `"none"`: the constraint is not sent; aerix's parse-and-retry alone keeps
  turns valid.
"""

DIALECTS: tuple[str, ...] = get_args(Dialect)

SAMPLING_FIELDS = ("max_tokens", "temperature", "top_p", "top_k", "min_p", "seed", "stop")
"""`GenerationOptions` keys copied into the request under the same name."""


def response_format(schema: Mapping[str, Any], dialect: Dialect) -> dict[str, Any] | None:
    """The `response_format` field that asks for JSON valid against `schema`.

    Args:
        schema: The JSON Schema every generation must match.
        dialect: The form the server understands; `"none"` gives `None`.
    """
    if dialect == "json_schema":
        return {
            "type": "json_schema",
            "json_schema": {"name": "turn", "schema": dict(schema), "strict": True},
        }
    if dialect == "json_object":
        return {"type": "json_object", "schema": dict(schema)}
    return None


def build_body(
    model: str,
    messages: list[ChatMessage],
    opts: GenerateOptions,
    *,
    dialect: Dialect,
    extra_body: Mapping[str, Any],
) -> dict[str, Any]:
    """The JSON body of one streamed chat-completions request.

    Args:
        model: The server's model name.
        messages: The conversation, sent unchanged.
        opts: Sampling settings and the constraint (`signal` is not sent).
        dialect: How the constraint is sent.
        extra_body: Server-specific fields merged in last (they win).
    """
    body: dict[str, Any] = {
        "model": model,
        "messages": [{"role": m["role"], "content": m["content"]} for m in messages],
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    for key in SAMPLING_FIELDS:
        if key in opts:
            body[key] = opts[key]  # type: ignore[literal-required]
    constraint = opts.get("constraint")
    if constraint is not None:
        fmt = response_format(constraint["json"], dialect)
        if fmt is not None:
            body["response_format"] = fmt
    body.update(extra_body)
    return body
