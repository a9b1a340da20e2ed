"""The hand-over: what the loop tells an engine about the generation it asks for.

The loop wrote every message of the conversation itself (the results, the
retries, the system message), so it reads them back here, once, for the
engines (`aerix.model.Handover`): an engine's rules then never read the
messages' wording. The results are read against `turn.render_results` itself
(what it writes for the same calls, with stand-ins for the ids and texts), so a
change of that wording changes the reading with it.

The reading is lazy: `handover` costs one small object per generation, and the
conversation is read only when an engine asks for a field (most models never do).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import operator
import re
from collections.abc import Callable, Sequence
from functools import cached_property
from typing import Any

from .model import CallMade, ChatMessage, Handover, JsonPath
from .turn import MAX_CALLS, render_results

__all__ = ["INPUT_PATH", "TOOL_PATH", "handover", "own_words", "read"]

TOOL_PATH: JsonPath = ("calls", None, "tool")
"""Where a call's tool name sits in a turn (`turn.calls_shape`)."""
INPUT_PATH: JsonPath = ("calls", None, "input")
"""Where a call's input sits in a turn (`turn.calls_shape`)."""

_ID, _TEXT = "\ue000", "\ue001"
"""Stand-ins for a call's id and result text (private-use characters) in a rendering of results."""
_ERROR = "error: "
"""How the loop opens a result that is an error (`tools.run_tool`, the repeat rule)."""
_NOTE = re.compile(r"\n(?:\(that is the result of [^\n]*\)|\[cut: \d+ more characters\])\Z")
"""A note the loop ends a result with: a repeated call's (the repeat rule), a cut result's
(`tools.cut_result`)."""
_PLACEHOLDER = re.compile(r':[ \t]*"?(<[A-Za-z][^<>\n]{0,78}>)')
"""A placeholder written as a value in a JSON example: a letter and a few words in angle
brackets after a colon (`"final":"<your answer>"`, `"name": "<your name>"`)."""


def handover(system: ChatMessage, history: Sequence[ChatMessage], pending: Sequence[ChatMessage]) -> Handover:
    """The hand-over of the generation that answers `history` and then `pending` (the loop's
    messages not yet kept: a run's prompt); a request to answer again, and the failed turn
    before it, change nothing in it. Read when first asked (`read`), so neither sequence
    may change after this call (the loop gives a fresh copy of what it sends).

    Args:
        system: The system message.
        history: The conversation kept so far.
        pending: The run's messages not yet in it.
    """
    lazy = object.__new__(_Lazy)
    lazy.__dict__["_source"] = (system["content"], history, pending)  # the frozen dataclass's way around
    return lazy


class _Lazy(Handover):
    """A `Handover` that reads its conversation when a field is first asked for: each field
    of `Handover` is a `cached_property` of the whole reading here (set below). Made by
    `handover`, unread (`replace` makes a plain one, read)."""

    _source: tuple[str, Sequence[ChatMessage], Sequence[ChatMessage]]

    @cached_property
    def _whole(self) -> Handover:
        system, history, pending = self._source
        return read(system, [*history, *pending])


for _field in dataclasses.fields(Handover):
    _read = cached_property(operator.attrgetter(f"_whole.{_field.name}"))
    _read.__set_name__(_Lazy, _field.name)
    setattr(_Lazy, _field.name, _read)


def read(system: str, conversation: Sequence[ChatMessage]) -> Handover:
    """The hand-over of the generation that answers `conversation` (the loop's messages, the
    system message aside), read now.

    A user message right after a turn with calls carries their results
    (`turn.render_results`); any other opens a request: a run's prompt, or the
    text `on_final` continues a run with. The calls of the turns since the
    latest request are its calls; the texts are the user's messages and each
    result in the tool's own words.

    Args:
        system: The system message's text.
        conversation: The messages after it, in order, without a retry's.
    """
    request: str | None = None
    first = False
    calls: list[CallMade] = []
    said: list[str] = []
    texts: list[str] = []
    after: list[tuple[str, Any]] | None = None  # the calls of the turn just before, if it made any
    for message in conversation:
        content = message["content"]
        if message["role"] == "assistant":
            after = _calls_of(content)
            if after is not None:
                first = False
                calls += [CallMade(tool=tool, input=given) for tool, given in after]
        elif message["role"] == "user":
            if after is None:
                request, first, calls = content, True, []
                said.append(content)
                texts.append(content)
            else:
                results = _results(content, after)
                if results is None:  # not the loop's rendering: the tools' words are in it somewhere
                    texts.append(content)
                else:
                    texts += results
                    done = len(calls) - len(after)
                    for i, result in enumerate(results):
                        calls[done + i] = dataclasses.replace(calls[done + i], result=result)
            after = None
    return Handover(
        request=request,
        first_turn=first and bool(conversation) and conversation[-1]["role"] == "user",
        calls=tuple(calls),
        said=tuple(said),
        texts=tuple(texts),
        placeholders=tuple(dict.fromkeys(m.group(1) for m in _PLACEHOLDER.finditer(system))),
        tool_path=TOOL_PATH,
        input_path=INPUT_PATH,
    )


def _calls_of(content: str) -> list[tuple[str, Any]] | None:
    """The calls a turn wrote, each its tool and input; `None` for a turn without calls."""
    try:
        written = json.loads(content)
    except ValueError:
        return None
    raw = written.get("calls") if isinstance(written, dict) else None
    if not isinstance(raw, list):
        return None
    return [
        (c["tool"], c.get("input", {})) for c in raw if isinstance(c, dict) and isinstance(c.get("tool"), str)
    ]


def _results(content: str, calls: Sequence[tuple[str, Any]]) -> list[str] | None:
    """Each result of a results message, in the tool's own words (`own_words`), for the calls
    it answers (those beyond `MAX_CALLS` were dropped); `None` if `content` is not the
    loop's rendering of their results."""
    kept = tuple(tool for tool, _ in calls[:MAX_CALLS])
    found = _results_pattern(render_results, kept, len(calls) - len(kept)).fullmatch(content)
    return None if found is None else [own_words(text) for text in found.groups()]


@functools.lru_cache(maxsize=64)
def _results_pattern(
    render: Callable[[Sequence[tuple[str, str, str]], int], str], tools: tuple[str, ...], dropped: int
) -> re.Pattern[str]:
    """What `render` writes for the results of calls of `tools`, as a pattern: any id (on one
    line) and any text (a group each) where it puts them."""
    probe = render([(_ID, tool, _TEXT) for tool in tools], dropped)
    parts = re.split(f"([{_ID}{_TEXT}])", probe)
    return re.compile(
        "".join("[^\n]*?" if p == _ID else "(.*?)" if p == _TEXT else re.escape(p) for p in parts), re.S
    )


def own_words(result: str) -> str:
    """A result's text without what the loop writes around it: the `error: ` it opens an
    error with, the notes it ends a repeated call's or a cut result's with."""
    while result.startswith(_ERROR):
        result = result[len(_ERROR) :]
    while (note := _NOTE.search(result)) is not None:
        result = result[: note.start()]
    return result
