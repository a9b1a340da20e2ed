"""Read a function's docstring: its description and what each parameter means.

`@tool` uses this to describe a tool and its fields. Three styles are
understood, and may even be mixed: Google (`Args:`), NumPy (`Parameters` over
a `----------` underline) and reST (`:param name:`). The description is the
text before the first section; sections other than the parameters are
skipped. The parser is pure and never raises: odd input gives what it can.
"""

from __future__ import annotations

import inspect
import re
from dataclasses import dataclass
from typing import Literal

__all__ = ["Docstring", "parse_docstring"]

_PARAM_SECTIONS = frozenset(
    {"args", "arguments", "parameters", "params", "keyword args", "keyword arguments"}
    | {"other args", "other arguments", "other parameters", "other params"}
)
# Napoleon's Google sections: only these end a description, so a line such as
# "Usage:" in the middle of a description stays part of it.
_GOOGLE_SECTIONS = _PARAM_SECTIONS | {
    "attention", "attributes", "caution", "danger", "error", "example", "examples",
    "hint", "important", "methods", "note", "notes", "raise", "raises", "receive",
    "receives", "references", "return", "returns", "see also", "tip", "todo",
    "warning", "warnings", "warn", "warns", "yield", "yields",
}  # fmt: skip
_PARAM_FIELDS = frozenset({"param", "parameter", "arg", "argument", "key", "keyword"})

_NAME = r"(?:\\?\*){0,2}[^\W\d]\w*"  # stars may be escaped, as in reST: \*args
_GOOGLE_HEADER = re.compile(r"(\S(?:.*\S)?):")
# "Returns: the sum." on one line is common enough to end a description too.
_GOOGLE_INLINE = re.compile(r"(?:returns?|yields?|raises?):\s.*", re.IGNORECASE)
_NUMPY_HEADER = re.compile(r"[^\W\d][\w ]*")
_UNDERLINE = re.compile(r"-{3,}")
# `(?!`)` keeps a role such as :class:`Foo` at the start of a line from
# passing for a field.
_FIELD = re.compile(r":([^:`\s][^:`]*):(?!`)\s*(.*)")
_GOOGLE_ITEM = re.compile(rf"(?P<name>{_NAME})\s*(?:\(.*?\)\s*)?:\s*(?P<desc>.*)")
_NUMPY_ITEM = re.compile(rf"(?P<names>{_NAME}(?:\s*,\s*{_NAME})*)\s*(?::.*)?")

_Kind = Literal["google", "numpy", "rest"]


@dataclass(frozen=True, kw_only=True, slots=True)
class Docstring:
    """What a docstring says about a function and its parameters."""

    description: str
    """The text before the first section, word for word: common indentation
    and surrounding blank lines removed, line breaks kept."""
    params: dict[str, str]
    """Parameter name (stars stripped) to its description; continuation lines
    are joined with single spaces."""


def parse_docstring(doc: str | None, *, attributes: bool = False) -> Docstring:
    """Parse a Google, NumPy or reST docstring.

    Args:
        doc: The docstring, as found in `fn.__doc__`; `None` gives an empty
            `Docstring`.
        attributes: Read an `Attributes` section (and reST `:ivar name:`) as
            parameters too: for a class whose fields are documented there.

    Returns:
        The description and the parameter descriptions found.
    """
    lines = inspect.cleandoc(doc or "").splitlines()
    start = next((i for i in range(len(lines)) if _kind(lines, i)), len(lines))
    params: dict[str, str] = {}
    sections = _PARAM_SECTIONS | {"attributes"} if attributes else _PARAM_SECTIONS
    fields = _PARAM_FIELDS | {"ivar", "var", "cvar"} if attributes else _PARAM_FIELDS
    i = start
    while i < len(lines):
        kind = _kind(lines, i)
        if kind == "rest":
            i = _rest_field(lines, i, params, fields)
        elif kind == "google":
            i = _google_section(lines, i, params, sections)
        elif kind == "numpy":
            i = _numpy_section(lines, i, params, sections)
        else:
            i += 1
    return Docstring(description="\n".join(lines[:start]).strip(), params=params)


def _kind(lines: list[str], i: int) -> _Kind | None:
    """Tell whether `lines[i]` starts a section or a field, and of which style."""
    text = lines[i].strip()
    if _FIELD.fullmatch(text):
        return "rest"
    header = _GOOGLE_HEADER.fullmatch(text)
    if (header and _section_name(header[1]) in _GOOGLE_SECTIONS) or _GOOGLE_INLINE.fullmatch(text):
        return "google"
    if i + 1 < len(lines) and _NUMPY_HEADER.fullmatch(text) and _UNDERLINE.fullmatch(lines[i + 1].strip()):
        return "numpy"
    return None


def _google_section(lines: list[str], i: int, params: dict[str, str], sections: frozenset[str]) -> int:
    """Read the Google section headed at `lines[i]`; return where it ends."""
    end = _block_end(lines, i + 1, _head(lines, i), any_line=True)
    header = _GOOGLE_HEADER.fullmatch(lines[i].strip())
    if header and _section_name(header[1]) in sections:
        _read_items(lines[i + 1 : end], _GOOGLE_ITEM, params)
    return end


def _numpy_section(lines: list[str], i: int, params: dict[str, str], sections: frozenset[str]) -> int:
    """Read the NumPy section headed at `lines[i]`; return where it ends."""
    end = _block_end(lines, i + 2, _head(lines, i), any_line=False)
    if _section_name(lines[i]) in sections:
        _read_items(lines[i + 2 : end], _NUMPY_ITEM, params)
    return end


def _rest_field(lines: list[str], i: int, params: dict[str, str], fields: frozenset[str]) -> int:
    """Read the reST field at `lines[i]` and its continuation lines; return where it ends."""
    end = _block_end(lines, i + 1, _head(lines, i), any_line=True)
    match = _FIELD.fullmatch(lines[i].strip())
    words = match[1].split() if match else []
    if match and len(words) >= 2 and words[0] in fields and re.fullmatch(_NAME, words[-1]):
        params[words[-1].lstrip("\\*")] = _join([match[2], *lines[i + 1 : end]])
    return end


def _block_end(lines: list[str], j: int, head: int, *, any_line: bool) -> int:
    """Find where the block after a header at indent `head` ends, from `lines[j]` on.

    A non-blank line no deeper than the header ends the block if `any_line`,
    or else only if it starts another section.
    """
    while j < len(lines):
        indent = _indent(lines[j])
        shallow = bool(lines[j].strip()) and indent <= max(head, 0)
        if shallow and ((any_line and indent <= head) or _kind(lines, j)):
            return j
        j += 1
    return j


def _read_items(block: list[str], item: re.Pattern[str], params: dict[str, str]) -> None:
    """Read `name: description` items whose descriptions may go on in deeper lines."""
    base = next((_indent(line) for line in block if line.strip()), 0)
    items: list[tuple[list[str], list[str]]] = []
    current: tuple[list[str], list[str]] | None = None
    for line in block:
        if not line.strip():
            continue
        if _indent(line) > base:
            if current:
                current[1].append(line)
            continue
        match = item.fullmatch(line.strip())
        current = None
        if match and "names" in item.groupindex:  # NumPy: the text after ":" is a type
            current = ([n.strip() for n in match["names"].split(",")], [])
        elif match:
            current = ([match["name"]], [match["desc"]])
        if current:
            items.append(current)
    for names, desc in items:
        for name in names:
            params[name.lstrip("\\*")] = _join(desc)


def _head(lines: list[str], i: int) -> int:
    """The indent of the header at `lines[i]`, or -1 on the docstring's first line.

    There cleandoc strips the header's own indent but not its body's, so the
    body may sit at column 0 too.
    """
    return _indent(lines[i]) if i else -1


def _section_name(text: str) -> str:
    return " ".join(text.lower().split())


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _join(parts: list[str]) -> str:
    return " ".join(text for part in parts if (text := part.strip()))
