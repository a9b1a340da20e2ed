"""Render a conversation with a model's own chat template, as Hugging Face does.

GGUF files carry their chat template in the metadata key
`tokenizer.chat_template`. It is rendered the way `transformers`'
`apply_chat_template` renders it: an immutable sandbox with `trim_blocks`,
`lstrip_blocks` and the loop controls (`{% break %}`, `{% continue %}`); a
`tojson` filter that is `json.dumps` with its `indent`, `separators`,
`sort_keys` and `ensure_ascii` arguments (not Jinja's HTML-escaping one); the
`raise_exception` and `strftime_now` helpers; HF's `namespace()` (no name that
starts with `_`) and `dict`; the `{% generation %}` block,
which renders its body; and the variables `messages`, `tools` and `documents`
(both `None`), `bos_token`, `eos_token` and `add_generation_prompt`.

llama-cpp-python's `Jinja2ChatFormatter` renders nearly the same way in
0.3.36 (HF's `tojson`, loop controls, a pass-through `generation` tag; no
`documents`), though its older releases used Jinja's own `tojson`; but it only
formats a prompt: it cannot tell that a template refused the system role, nor
name the template and the fix when one fails, so aerix keeps its own renderer.

A template that refuses the `system` role (Mistral's and Gemma's older ones
call `raise_exception` on it) gets the system text at the head of the first
user message, followed by a blank line, as the models' authors intend. This is
decided once per template, at the first conversation with a system message,
and kept, so that prompts stay prefix-stable from one turn to the next.
"""

from __future__ import annotations

import json
import traceback
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, NoReturn

from ...model import ChatMessage

try:
    import jinja2
    import jinja2.ext
    import jinja2.nodes
    import jinja2.parser
    from jinja2.exceptions import SecurityError
    from jinja2.sandbox import ImmutableSandboxedEnvironment
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "aerix.engines.LlamaCpp needs jinja2 to render chat templates: pip install 'aerix[llama]'"
    ) from exc

__all__ = ["ChatTemplate"]

_FIX = "pass one that works as LlamaCpp(..., chat_template=...)"
_REFUSED = "change the messages, or pass a template that takes them as LlamaCpp(..., chat_template=...)"
"""The fix for a template's own refusal (`raise_exception`): the messages may be what is wrong."""


class _Refusal(jinja2.exceptions.TemplateError):
    """The template called `raise_exception`: it refuses the conversation."""


def _raise_exception(message: str) -> NoReturn:
    raise _Refusal(message)


def _strftime_now(fmt: str) -> str:
    return datetime.now().strftime(fmt)


def _tojson(
    value: Any,
    ensure_ascii: bool = False,
    indent: int | str | None = None,
    separators: tuple[str, str] | None = None,
    sort_keys: bool = False,
) -> str:
    return json.dumps(
        value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys
    )


class _Generation(jinja2.ext.Extension):
    """HF's `{% generation %}...{% endgeneration %}`: renders its body (HF also
    records where it falls, to mask training losses; a prompt needs only the text)."""

    tags = {"generation"}  # noqa: RUF012 - Jinja's own class attribute

    def parse(self, parser: jinja2.parser.Parser) -> jinja2.nodes.Node:
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        # A call block, as HF's: the body gets its own scope, like a macro.
        call = jinja2.nodes.CallBlock(self.call_method("_body"), [], [], body)
        return call.set_lineno(lineno)

    def _body(self, caller: Callable[[], str]) -> str:
        return caller()


class _Namespace(jinja2.utils.Namespace):
    """HF's `namespace()`: no name that starts with `_` (a `__html__` there would be called by
    `|e` outside the sandbox's checks)."""

    def __init__(*args: Any, **kwargs: Any) -> None:  # Jinja's own signature: `namespace(self=...)` works
        self, args = args[0], args[1:]
        attrs = dict(*args, **kwargs)
        for name in attrs:
            _Namespace._check(name)
        jinja2.utils.Namespace.__init__(self, attrs)

    def __setitem__(self, name: str, value: Any) -> None:
        _Namespace._check(name)
        jinja2.utils.Namespace.__setitem__(self, name, value)

    @staticmethod
    def _check(name: object) -> None:
        if isinstance(name, str) and name.startswith("_"):
            raise SecurityError(f"a namespace takes no name that starts with '_', got {name!r}")


class _Dict:
    """HF's `dict`: makes dicts, with nothing of the `dict` type itself to reach through."""

    def __call__(self, *args: Any, **kwargs: Any) -> dict[Any, Any]:
        return dict(*args, **kwargs)

    def fromkeys(self, *args: Any, **kwargs: Any) -> dict[Any, Any]:
        return dict.fromkeys(*args, **kwargs)


def _environment() -> ImmutableSandboxedEnvironment:
    env = ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[_Generation, jinja2.ext.loopcontrols]
    )
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = _strftime_now
    env.globals["namespace"] = _Namespace
    env.globals["dict"] = _Dict()
    env.filters["tojson"] = _tojson
    return env


def _template_line(exc: BaseException) -> int | None:
    """The template's line where `exc` was raised (Jinja maps its frames to `<template>`)."""
    lines = [f.lineno for f in traceback.extract_tb(exc.__traceback__) if f.filename == "<template>"]
    return lines[-1] if lines else None


def _plain(value: Any) -> Any:
    """A str as a plain `str` (a subclass's own methods are no template's to call); anything
    else as it is, for the template to take or refuse."""
    return str.__str__(value) if isinstance(value, str) else value


def _leading_system(messages: list[dict[str, str]]) -> int:
    """How many system messages `messages` starts with."""
    n = 0
    while n < len(messages) and messages[n]["role"] == "system":
        n += 1
    return n


def _merge_system(messages: list[dict[str, str]]) -> list[dict[str, str]] | None:
    """`messages` with the leading system text at the head of the first user message,
    or `None` when there is no leading system message or no user message to take it."""
    n = _leading_system(messages)
    first_user = next((i for i in range(n, len(messages)) if messages[i]["role"] == "user"), None)
    if n == 0 or first_user is None:
        return None
    texts = [m["content"] for m in messages[:n] if m["content"]]
    merged = list(messages)
    merged[first_user] = {"role": "user", "content": "\n\n".join([*texts, messages[first_user]["content"]])}
    return merged[n:]


class ChatTemplate:
    """A compiled chat template.

    Args:
        source: The Jinja source of the template.
        bos_token: The text of the model's BOS token.
        eos_token: The text of the model's EOS token.
        name: What errors call the template, e.g. `"the chat template of 'model.gguf'"`.

    Raises:
        ValueError: The template does not compile.
    """

    def __init__(
        self, source: str, *, bos_token: str = "", eos_token: str = "", name: str = "the chat template"
    ) -> None:
        try:
            self._template = _environment().from_string(source)
        except jinja2.exceptions.TemplateSyntaxError as exc:
            raise ValueError(f"{name} does not compile (line {exc.lineno}: {exc.message}); {_FIX}") from exc
        except SyntaxError as exc:  # Jinja parsed it, Python's compiler refused it (`{% break %}` alone)
            raise ValueError(f"{name} does not compile ({exc.msg}); {_FIX}") from exc
        except RecursionError as exc:  # Jinja's parser and compiler recurse once a level
            raise ValueError(f"{name} does not compile (it nests too deeply to parse); {_FIX}") from exc
        self.source = source
        """The Jinja source of the template."""
        self.bos_token = bos_token
        """The text of the model's BOS token."""
        self.eos_token = eos_token
        """The text of the model's EOS token."""
        self.name = name
        """What errors call the template."""
        self._merges_system: bool | None = None

    @property
    def merges_system(self) -> bool | None:
        """Whether the system text goes into the first user message, because the template
        refuses the `system` role; `None` until a conversation with a system message is rendered."""
        return self._merges_system

    def render(self, messages: Sequence[ChatMessage], *, add_generation_prompt: bool = True) -> str:
        """The prompt text for `messages`, ending with the assistant's turn opener.

        Args:
            messages: The conversation.
            add_generation_prompt: End with the assistant's turn opener (where the
                template writes one).

        Raises:
            ValueError: The template refused the messages (`raise_exception`) or failed on them.
        """
        # plain strs: a str subclass's own methods (numpy's `str_.tofile`) are no template's to call
        conversation = [{"role": _plain(m["role"]), "content": _plain(m["content"])} for m in messages]
        merged = _merge_system(conversation)
        if self._merges_system and merged is not None:
            conversation, merged = merged, None
        try:
            text = self._render(conversation, add_generation_prompt)
        except Exception as exc:  # a template is a program: any failure is the template's
            if self._merges_system is not None or merged is None:
                raise self._error(exc) from exc
            try:
                text = self._render(merged, add_generation_prompt)
            except Exception as again:
                raise self._error(exc, again) from exc
            if _leading_system(conversation) == 1:  # the system role is what it refused, not
                self._merges_system = True  # two system messages (`roles must alternate`)
            return text
        if self._merges_system is None and merged is not None:
            self._merges_system = False  # it took a system message as it is
        return text

    def _render(self, messages: list[dict[str, str]], add_generation_prompt: bool) -> str:
        text: str = self._template.render(
            messages=messages,
            tools=None,
            documents=None,
            add_generation_prompt=add_generation_prompt,
            bos_token=self.bos_token,
            eos_token=self.eos_token,
        )
        return text

    def _error(self, exc: Exception, merged: Exception | None = None) -> ValueError:
        """The error for a render that failed with `exc` (and, with the system text
        merged into the first user message, with `merged`)."""
        what = self._describe(exc)
        if merged is not None and self._describe(merged) != what:
            what += f", and with the system text in the first user message {self._describe(merged)}"
        return ValueError(f"{self.name} {what}; {_REFUSED if isinstance(exc, _Refusal) else _FIX}")

    @staticmethod
    def _describe(exc: Exception) -> str:
        if isinstance(exc, _Refusal):
            return f"refused the messages: {str(exc)!r}"
        line = _template_line(exc)
        where = "" if line is None else f"line {line}: "
        if isinstance(exc, SecurityError):
            return f"was refused by the sandbox ({where}{exc})"
        return f"failed on the messages ({where}{type(exc).__name__}: {exc})"
