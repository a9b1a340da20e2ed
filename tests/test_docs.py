"""Every Python example in docs/*.md and the README runs.

The ```python blocks of one page run in order in one namespace, as a reader
would type them. A ```text (or ```json) block right after a Python block is its output:
what the block prints must be exactly that (put a sentence between the two
for output that is only an example). A block right after a `<!-- no-run -->`
comment is skipped (for the few that need what a test cannot have, such as a
server of your own).
A page whose examples load the embedded model (`aerix.load`) is a slow test,
skipped when the model cannot load.
"""

from __future__ import annotations

import contextlib
import io
import re
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent
PAGES = sorted([*(ROOT / "docs").glob("*.md"), ROOT / "README.md"])
NO_RUN = "<!-- no-run -->"
FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>```+|~~~+)[ \t]*(?P<info>[^\n`]*)$")
NEEDS_MODEL = re.compile(r"\baerix\.load\(|\bLlamaCpp\(")
SNIPPET = re.compile(r'^[ \t]*--8<--[ \t]+"(?P<path>[^"]+)"[ \t]*$', re.MULTILINE)
"""A `pymdownx.snippets` include (the docs show golden files this way), paths from the repository root."""


@dataclass(frozen=True)
class Block:
    """One fenced code block of a page."""

    line: int
    """The line of its first code line, from 1."""
    code: str
    run: bool
    """False after a `<!-- no-run -->` comment."""
    output: str | None = None
    """The ```text or ```json block right after it, if any: what it must print."""


def python_blocks(text: str) -> list[Block]:
    """The ```python blocks of a Markdown text (indented ones too, e.g. in admonitions)."""
    lines = text.splitlines()
    blocks: list[Block] = []
    previous_python, previous_end = False, -1
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if m is None:
            i += 1
            continue
        indent, fence = m["indent"], m["fence"]
        lang = m["info"].strip().split(" ")[0].lstrip(".").lower() if m["info"].strip() else ""
        end = i + 1
        while end < len(lines) and not (
            lines[end].strip().startswith(fence[0] * len(fence)) and lines[end].strip().strip(fence[0]) == ""
        ):
            end += 1
        body = "\n".join(
            line[len(indent) :] if line.startswith(indent) else line for line in lines[i + 1 : end]
        )
        if lang in ("python", "py"):
            before = [line.strip() for line in lines[:i] if line.strip()]
            run = not (before and before[-1] == NO_RUN)
            blocks.append(Block(line=i + 2, code=textwrap.dedent(body), run=run))
        elif m["info"].strip() in ("text", "json") and blocks and blocks[-1].output is None:
            between = "\n".join(lines[previous_end + 1 : i]).strip()
            if previous_python and not between:
                last = blocks[-1]
                output = SNIPPET.sub(_include, textwrap.dedent(body))
                blocks[-1] = Block(line=last.line, code=last.code, run=last.run, output=output)
        previous_python, previous_end = lang in ("python", "py"), end
        i = end + 1
    return blocks


def _include(m: re.Match[str]) -> str:
    return (ROOT / m["path"]).read_text(encoding="utf-8").rstrip("\n")


def _page_param(page: Path) -> object:
    text = page.read_text(encoding="utf-8")
    slow = any(NEEDS_MODEL.search(b.code) for b in python_blocks(text) if b.run)
    marks = [pytest.mark.slow] if slow else []
    return pytest.param(page, marks=marks, id=str(page.relative_to(ROOT)))


def _model_loads() -> str | None:
    try:
        import aerix

        aerix.load("smollm2-instruct")
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
    return None


@pytest.mark.parametrize("page", [_page_param(p) for p in PAGES if p.exists()])
def test_the_examples_of_a_page_run(page: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocks = [b for b in python_blocks(page.read_text(encoding="utf-8")) if b.run]
    if not blocks:
        pytest.skip("no runnable Python example")
    if any(NEEDS_MODEL.search(b.code) for b in blocks):
        problem = _model_loads()
        if problem is not None:
            pytest.skip(f"the examples need the embedded model, which does not load: {problem}")
    monkeypatch.chdir(ROOT)
    namespace: dict[str, object] = {"__name__": "__docs__"}
    name = page.relative_to(ROOT)
    for block in blocks:
        # Blank lines first, so a traceback's line numbers are the page's.
        code = compile("\n" * (block.line - 1) + block.code, str(name), "exec")
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            exec(code, namespace)
        if block.output is not None:
            assert _lines(printed.getvalue()) == _lines(block.output), (
                f"{name}:{block.line}: the block printed something else than the output shown after it"
            )


def _lines(text: str) -> list[str]:
    return [line.rstrip() for line in text.strip("\n").splitlines()]


def test_the_block_reader_honours_no_run_and_indented_fences() -> None:
    text = (
        "# Page\n\n```python\nx = 1\n```\n\n<!-- no-run -->\n\n```python\nraise SystemExit\n```\n\n"
        "!!! note\n    ```python\n    print(x + 1)\n    ```\n\n    ```text\n    2\n    ```\n\n"
        "```python\nprint(3)\n```\n\nFor example:\n\n```text\n3\n```\n"
    )
    blocks = python_blocks(text)
    assert [(b.line, b.code.strip(), b.run, b.output) for b in blocks] == [
        (4, "x = 1", True, None),
        (10, "raise SystemExit", False, None),
        (15, "print(x + 1)", True, "2"),
        (23, "print(3)", True, None),
    ]
