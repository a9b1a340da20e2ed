"""Names cut short (a heuristic chosen on BFCL tuning entries): where the model's likeliest
token would end a string value that is a whole span of the messages, or leave the span,
short of the name or phrase the span is in, the tokens that go on with it get the copy bias
once more ("Golden Gate Bridge", not "Golden"; "king size bed", not "king")."""

from __future__ import annotations

import re
from collections.abc import Collection
from typing import TYPE_CHECKING

from .._rule import At, Logits
from .._spans import is_function_word

if TYPE_CHECKING:
    from .._bias import ValueBias

__all__ = ["CutShort", "cut_short", "name_runs"]

_NAME_WORD = r"[A-Z][\w+#&.-]*"
_CONNECTOR = re.compile(r"(?:of|the|de|la|del|du|von|van)\s")
_NAME_RUN = re.compile(rf"(?<!\w){_NAME_WORD}(?:(?<!\.)\s(?:{_CONNECTOR.pattern}){{0,2}}{_NAME_WORD})+")
_SENTENCE_START = re.compile(r"(?:^|[.?!\n]\s*)$")
_BLANK = re.compile(r"\s")
"""What separates the words of a name (a space, or a line break or tab: `_NAME_RUN` takes any)."""
_NEXT_WORD = re.compile(r" ([^\W\d_]+)")
_SENTENCE_END = re.compile(r"\.(?=\s+[A-Z]|\s*$)")


def name_runs(source: str) -> list[tuple[int, int]]:
    """Where `source` has a name of two or more capitalised words ("Bank of England",
    "New York City"): its start and end; a sentence's first word is no part of one."""
    found = []
    for m in _NAME_RUN.finditer(source):
        start, text = m.start(), m.group()
        if _SENTENCE_START.search(source[:start]):
            cut = _BLANK.search(text).end()  # type: ignore[union-attr]  # a run has two words
            while (connector := _CONNECTOR.match(text, cut)) is not None:
                cut = connector.end()
            start, text = start + cut, text[cut:]
            if _BLANK.search(text) is None:
                continue
        end = start + len(text)
        if _SENTENCE_END.match(source, end - 1):
            end -= 1  # "in New York City." ends the sentence, not the name
        found.append((start, end))
    return found


def cut_short(source: str, names: Collection[tuple[int, int]], start: int, end: int) -> bool:
    """Whether the span `source[start:end]` stops short of the name or phrase it is in: inside
    a name of capitalised words (`names`, as `name_runs` finds them: "Golden" of "Golden Gate
    Bridge in San Francisco", "Bank" of "Bank of England"), or right before another word
    that is no function word ("king" of "king size bed"; not "Paris" of "Paris in May")."""
    if any(a <= start and end < b for a, b in names):
        return True
    if any(b == end for _, b in names):
        return False  # a whole name: "New York time zone" is no longer name
    word = _NEXT_WORD.match(source, end)
    return word is not None and not is_function_word(word.group(1))


class CutShort:
    """The names-cut-short heuristic (module docstring): `Choice.more` for the tokens that go on."""

    name = "cut_short"

    def __init__(self, bias: ValueBias) -> None:
        self._names = name_runs(bias.context.source)

    def acts(self, at: At) -> bool:
        c = at.cursor
        return at.copying and c.in_string_value and bool(c.value) and at.best is not None

    def bias(self, at: At, logits: Logits) -> None:
        value = at.cursor.value or ""
        short = self._short(at, value)
        if not short:
            return
        for choice in at.values():
            if choice.copies and not choice.number and choice.value != value:
                choice.more += any(start in short for start in choice.starts)

    def _short(self, at: At, value: str) -> frozenset[int]:
        """Where the string `value` starts as a whole span of the messages that stops short of
        the name or phrase it is in (`cut_short`), if the likeliest token would end the value
        there or leave the span; else nothing."""
        assert at.best is not None  # `acts` says so
        hit = at.cursor.candidate(at.pieces[at.best])
        if hit is None or hit[2]:
            return frozenset()
        text = at.bias.text
        ends = hit[1] and hit[0] == value
        if not ends and text.match(hit[0], hit[1]):
            return frozenset()  # the model goes on with the span itself
        spans = text.where(value, True)
        return frozenset(s for s in spans if cut_short(text.source, self._names, s, s + len(value)))
