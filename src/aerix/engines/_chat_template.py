"""Render a conversation with a model's own chat template (Jinja, sandboxed).

GGUF files carry their chat template in the metadata key
`tokenizer.chat_template`. It is rendered the way Hugging Face `transformers`
does: an immutable sandbox, `trim_blocks` and `lstrip_blocks`, the
`raise_exception` and `strftime_now` helpers, `bos_token`, `eos_token`, and
`add_generation_prompt=True`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any, NoReturn

from ..model import ChatMessage

try:
    import jinja2
    from jinja2.sandbox import ImmutableSandboxedEnvironment
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "aerix.engines.LlamaCpp needs jinja2 to render chat templates: pip install 'aerix[llama]'"
    ) from exc

__all__ = ["ChatTemplate"]


def _raise_exception(message: str) -> NoReturn:
    raise jinja2.exceptions.TemplateError(message)


def _strftime_now(fmt: str) -> str:
    return datetime.now().strftime(fmt)


def _tojson(value: Any, indent: int | None = None) -> str:
    return json.dumps(value, ensure_ascii=False, indent=indent)


class ChatTemplate:
    """A compiled chat template.

    Args:
        source: The Jinja source of the template.
        bos_token: The text of the model's BOS token.
        eos_token: The text of the model's EOS token.

    Raises:
        ValueError: The template does not compile.
    """

    def __init__(self, source: str, *, bos_token: str = "", eos_token: str = "") -> None:
        env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
        env.globals["raise_exception"] = _raise_exception
        env.globals["strftime_now"] = _strftime_now
        env.filters["tojson"] = _tojson
        try:
            self._template = env.from_string(source)
        except jinja2.exceptions.TemplateSyntaxError as exc:
            raise ValueError(
                f"the chat template does not compile ({exc.message}, line {exc.lineno}); "
                "pass a working one as LlamaCpp(..., chat_template=...)"
            ) from exc
        self.source = source
        self.bos_token = bos_token
        self.eos_token = eos_token

    def render(self, messages: Sequence[ChatMessage]) -> str:
        """The prompt text for `messages`, ending with the assistant's turn opener.

        Raises:
            ValueError: The template refused the messages (`raise_exception`) or failed.
        """
        try:
            return self._template.render(
                messages=[{"role": m["role"], "content": m["content"]} for m in messages],
                add_generation_prompt=True,
                bos_token=self.bos_token,
                eos_token=self.eos_token,
            )
        except jinja2.exceptions.TemplateError as exc:
            raise ValueError(f"the model's chat template refused the messages: {exc}") from exc
