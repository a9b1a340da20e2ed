"""Every example in docs/*.md and the README runs, and prints what the page shows.

How a page shows an example and what it prints:

- The ```python blocks of one page run in order in one namespace, as a reader
  would type them.
- An ```output block is what the ```python block before it prints (prose may
  come between, no other code block): the block's stdout must be exactly that,
  line for line (trailing spaces and blank lines at either end aside). An
  example with no ```output block just has to run.
- In an ```output block, `…` stands for any text within its line. It is the
  one normalisation, for the part of an output that truly varies (how far a
  generation got before a timed abort, a duration); the page says next to it
  what varies and why. Outputs of the embedded model are not normalised: it
  decodes greedily, so they are the same on every run on the machine that
  tests these pages.
- A `--8<-- "path"` line in an ```output block includes that file (the
  `pymdownx.snippets` syntax, paths from the repository root): the turn
  contract page shows golden files this way.
- A ```python block right after a `<!-- no-run -->` comment is skipped (for
  the few that need what a test cannot have, such as a server of your own).
  It may not have an ```output block, which nothing would check.

A shell transcript is a ```console (or bare) block that starts with a `$ `
line: each `$ ` line is a command, and the lines up to the next one are what
it printed (stdout and stderr, as a terminal shows them both), compared the
same way (`…` included). The test runs what a transcript may hold:

- `aerix ...`, in process (`aerix.cli.main`), as on an 80-column terminal,
  with the line's `VAR=value` prefix in the environment and `< FILE` as its
  stdin;
- `cat FILE`: its output is the file (in a fresh folder), for a later `< FILE`;
- `echo $?`: the exit status of the command before.

(`aerix playground` serves until Ctrl-C, so it is no command a transcript
can check.)

A transcript with any other command (`make`, a server of its own) must come
right after `<!-- no-run -->`, and so must one that needs a terminal (a
prompt typed in, a Ctrl-C); the page then says why it is not checked.

A page whose examples load the embedded model (`aerix.load`, `LlamaCpp(`) is
a `slow` test, skipped when the model cannot load; so are the transcripts.

`test_the_pages_show_outputs_in_output_blocks` refuses what would leave an
output unchecked: a ```text or ```json block (or a bare fence) right after a
```python block, or after prose there that speaks of what it prints; an
```output block with no runnable ```python block before it; a `# →`
comment that shows an output inside the code; and a transcript with a
command the test does not run, not marked `<!-- no-run -->`.
"""

from __future__ import annotations

import contextlib
import io
import re
import shlex
import sys
import textwrap
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from _embedded import missing

ROOT = Path(__file__).parent.parent
PAGES = sorted([*(ROOT / "docs").glob("*.md"), ROOT / "README.md"])
NO_RUN = "<!-- no-run -->"
FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>```+|~~~+)[ \t]*(?P<info>[^\n`]*)$")
NEEDS_MODEL = re.compile(r"\baerix\.load\(|\bLlamaCpp\(")
SNIPPET = re.compile(r'^[ \t]*--8<--[ \t]+"(?P<path>[^"]+)"[ \t]*$', re.MULTILINE)
"""A `pymdownx.snippets` include (the docs show golden files this way), paths from the repository root."""
VARIES = "…"
"""In an ```output block, any text within one line (see the module docstring)."""
SPEAKS_OF_OUTPUT = re.compile(r"\b(print|prints|printed|printing|output|outputs)\b", re.IGNORECASE)
OUTPUT_COMMENT = re.compile(r"#\s*(→|->|prints\b|printed\b|output\b)", re.IGNORECASE)
"""A comment in the code that shows what a line prints, instead of an ```output block."""
PYTHON = ("python", "py")
SHELL = ("console", "shell-session", "")
"""The fences a shell transcript may have."""
ENV_PREFIX = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")


@dataclass(frozen=True)
class Fence:
    """One fenced code block of a page."""

    line: int
    """The line of its first code line, from 1."""
    lang: str
    """The first word of its info string, lower case: `python`, `output`, `text`, or `` (bare)."""
    body: str
    """Its code, dedented."""
    run: bool
    """False after a `<!-- no-run -->` comment."""
    prose: str
    """The page's text between the previous code block (or the page's start) and this one."""


@dataclass(frozen=True)
class Block:
    """One ```python block of a page, with the output the page shows for it."""

    line: int
    """The line of its first code line, from 1."""
    code: str
    run: bool
    """False after a `<!-- no-run -->` comment."""
    output: str | None = None
    """Its ```output block, if any: what it must print."""
    output_line: int | None = None
    """The line of the ```output block's first line, from 1."""


def fences(text: str) -> list[Fence]:
    """The fenced code blocks of a Markdown text, in order (indented ones too, e.g. in admonitions)."""
    lines = text.splitlines()
    found: list[Fence] = []
    previous_end = -1
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if m is None:
            i += 1
            continue
        indent, fence = m["indent"], m["fence"]
        info = m["info"].strip()
        lang = info.split(" ")[0].lstrip(".").lower() if info else ""
        end = i + 1
        while end < len(lines) and not (
            lines[end].strip().startswith(fence[0] * len(fence)) and lines[end].strip().strip(fence[0]) == ""
        ):
            end += 1
        body = "\n".join(
            line[len(indent) :] if line.startswith(indent) else line for line in lines[i + 1 : end]
        )
        before = next((line.strip() for line in reversed(lines[:i]) if line.strip()), "")
        run = before != NO_RUN
        prose = "\n".join(lines[previous_end + 1 : i])
        found.append(Fence(line=i + 2, lang=lang, body=textwrap.dedent(body), run=run, prose=prose))
        previous_end = end
        i = end + 1
    return found


def python_blocks(text: str) -> list[Block]:
    """The ```python blocks of a Markdown text, each with its ```output block, if any."""
    blocks: list[Block] = []
    previous = ""
    for fence in fences(text):
        if fence.lang in PYTHON:
            blocks.append(Block(line=fence.line, code=fence.body, run=fence.run))
        elif fence.lang == "output" and previous in PYTHON:
            output = SNIPPET.sub(_include, fence.body)
            blocks[-1] = replace(blocks[-1], output=output, output_line=fence.line)
        previous = fence.lang
    return blocks


@dataclass(frozen=True)
class Command:
    """One `$ ` line of a shell transcript, with what the page shows it printed."""

    line: int
    """Its line, from 1."""
    words: list[str]
    """The command, split as a shell would (quotes removed), without its prefix and redirection."""
    env: dict[str, str]
    """Its `VAR=value` prefix."""
    stdin: str | None
    """The file after `<`, if any."""
    output: str


@dataclass(frozen=True)
class Transcript:
    """A shell transcript: a ```console (or bare) block that starts with a `$ ` line."""

    line: int
    commands: list[Command]
    run: bool
    """False after a `<!-- no-run -->` comment."""


def transcripts(text: str) -> list[Transcript]:
    """The shell transcripts of a Markdown text."""
    found: list[Transcript] = []
    for fence in fences(text):
        lines = fence.body.splitlines()
        starts = [n for n, line in enumerate(lines) if line.startswith("$ ")]
        if fence.lang not in SHELL or not starts or any(line.strip() for line in lines[: starts[0]]):
            continue
        commands: list[Command] = []
        for start, end in zip(starts, [*starts[1:], len(lines)], strict=True):
            try:
                words = shlex.split(lines[start][2:])
            except ValueError:  # unbalanced quotes: no command the test runs
                words = [lines[start][2:]]
            env: dict[str, str] = {}
            while words and ENV_PREFIX.match(words[0]):
                name, value = words.pop(0).split("=", 1)
                env[name] = value
            stdin = None
            if "<" in words[:-1]:
                at = words.index("<")
                stdin, words = words[at + 1], words[:at] + words[at + 2 :]
            output = "\n".join(lines[start + 1 : end])
            commands.append(Command(fence.line + start, words, env, stdin, output))
        found.append(Transcript(line=fence.line, commands=commands, run=fence.run))
    return found


def unrunnable(command: Command) -> str | None:
    """Why the test does not run a transcript's command, or `None` if it does."""
    words, plain = command.words, not command.env and command.stdin is None
    if words[:2] == ["aerix", "playground"]:
        return "`aerix playground` serves until Ctrl-C"
    if words[:1] == ["aerix"] or (
        plain and (words == ["echo", "$?"] or (len(words) == 2 and words[0] == "cat"))
    ):
        return None
    return f"`{shlex.join(words)}` is no command the test runs (aerix ..., cat FILE, echo $?)"


def misplaced_outputs(text: str) -> list[str]:
    """What a page does that would leave an output unchecked, one line each (see the module docstring)."""
    problems: list[str] = []
    found = fences(text)
    for previous, fence in zip([None, *found], found, strict=False):
        after_python = previous is not None and previous.lang in PYTHON
        prose = fence.prose.strip()
        if fence.lang == "output":
            if not after_python:
                problems.append(f"line {fence.line}: an ```output block with no ```python block before it")
            elif previous is not None and not previous.run:
                problems.append(
                    f"line {fence.line}: an ```output block after a no-run ```python block, which nothing checks"
                )
        elif fence.lang in ("text", "json", "") and after_python:
            new_section = any(line.lstrip().startswith("#") for line in prose.splitlines())
            if not prose or (SPEAKS_OF_OUTPUT.search(prose) and not new_section):
                problems.append(
                    f"line {fence.line}: a ```{fence.lang} block after a ```python block: if it is what the "
                    "block prints, make it ```output, so that the test checks it"
                )
        if fence.lang in PYTHON:
            for n, line in enumerate(fence.body.splitlines()):
                if OUTPUT_COMMENT.search(line):
                    problems.append(
                        f"line {fence.line + n}: a comment shows an output in the code; "
                        "print it and show it in an ```output block"
                    )
    for transcript in transcripts(text):
        for command in transcript.commands if transcript.run else []:
            why = unrunnable(command)
            if why is not None:
                problems.append(
                    f"line {command.line}: {why}; put `{NO_RUN}` before the transcript "
                    "and say on the page why it is not checked"
                )
    return problems


def _include(m: re.Match[str]) -> str:
    return (ROOT / m["path"]).read_text(encoding="utf-8").rstrip("\n")


def _page_param(page: Path) -> object:
    text = page.read_text(encoding="utf-8")
    slow = any(NEEDS_MODEL.search(b.code) for b in python_blocks(text) if b.run)
    marks = [pytest.mark.slow] if slow else []
    return pytest.param(page, marks=marks, id=str(page.relative_to(ROOT)))


def _model_loads() -> str | None:
    """Why the embedded model cannot run here (a package missing), else `None`; installed,
    it must load (any other failure is aerix's and fails the test)."""
    why = missing()
    if why is None:
        import aerix

        aerix.load("smollm2-instruct").close()
    return why


def _has_examples(page: Path) -> bool:
    return any(b.run for b in python_blocks(page.read_text(encoding="utf-8")))


def _has_transcripts(page: Path) -> bool:
    return any(t.run for t in transcripts(page.read_text(encoding="utf-8")))


@pytest.mark.parametrize("page", [_page_param(p) for p in PAGES if p.exists() and _has_examples(p)])
def test_the_examples_of_a_page_run_and_print_what_it_shows(
    page: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocks = [b for b in python_blocks(page.read_text(encoding="utf-8")) if b.run]
    if any(NEEDS_MODEL.search(b.code) for b in blocks):
        problem = _model_loads()
        if problem is not None:
            pytest.skip(f"the examples need the embedded model, which cannot run here: {problem}")
    monkeypatch.chdir(ROOT)
    namespace: dict[str, object] = {"__name__": "__docs__"}
    name = page.relative_to(ROOT)
    wrong: list[str] = []
    for block in blocks:
        # Blank lines first, so a traceback's line numbers are the page's; and not this module's
        # `from __future__ import annotations`, which a reader's code does not have.
        code = compile("\n" * (block.line - 1) + block.code, str(name), "exec", dont_inherit=True)
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            exec(code, namespace)
        if block.output is not None and not output_matches(printed.getvalue(), block.output):
            wrong.append(
                f"{name}:{block.output_line}: the block at line {block.line} printed\n"
                f"{printed.getvalue().rstrip()}\n-- but the page shows --\n{block.output.rstrip()}"
            )
    assert not wrong, "\n\n".join(wrong)


@pytest.mark.slow
@pytest.mark.parametrize(
    "page",
    [pytest.param(p, id=str(p.relative_to(ROOT))) for p in PAGES if p.exists() and _has_transcripts(p)],
)
def test_the_transcripts_of_a_page_print_what_it_shows(
    page: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    problem = _model_loads()
    if problem is not None:
        pytest.skip(f"the transcripts need the embedded model, which does not load: {problem}")
    from aerix.cli import main

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("COLUMNS", "80")  # argparse wraps its usage lines to the terminal's width
    name = page.relative_to(ROOT)
    wrong: list[str] = []
    for transcript in transcripts(page.read_text(encoding="utf-8")):
        status: int | None = None
        for command in transcript.commands if transcript.run else []:
            why = unrunnable(command)
            assert why is None, f"{name}:{command.line}: {why}"
            if command.words[0] == "cat":  # the page shows the file: write it
                (tmp_path / command.words[1]).write_text(command.output + "\n", encoding="utf-8")
                continue
            if command.words[0] == "echo":
                printed = f"{status}\n"
            else:
                stdin = (
                    "" if command.stdin is None else (tmp_path / command.stdin).read_text(encoding="utf-8")
                )
                terminal = io.StringIO()
                with monkeypatch.context() as m:
                    for key, value in command.env.items():
                        m.setenv(key, value)
                    m.setattr(sys, "stdin", io.StringIO(stdin))
                    with contextlib.redirect_stdout(terminal), contextlib.redirect_stderr(terminal):
                        status = main(command.words[1:])
                printed = terminal.getvalue()
            if not output_matches(printed, command.output):
                wrong.append(
                    f"{name}:{command.line}: `$ {shlex.join(command.words)}` printed\n{printed.rstrip()}\n"
                    f"-- but the page shows --\n{command.output.rstrip()}"
                )
    assert not wrong, "\n\n".join(wrong)


def output_matches(printed: str, shown: str) -> bool:
    """Whether what a block printed is the output a page shows for it (`…`: any text within a line)."""
    got, want = _lines(printed), _lines(shown)
    return len(got) == len(want) and all(
        re.fullmatch(".*".join(map(re.escape, w.split(VARIES))), g) is not None
        for g, w in zip(got, want, strict=True)
    )


def _lines(text: str) -> list[str]:
    return [line.rstrip() for line in text.strip("\n").splitlines()]


@pytest.mark.parametrize("page", [pytest.param(p, id=str(p.relative_to(ROOT))) for p in PAGES if p.exists()])
def test_the_pages_show_outputs_in_output_blocks(page: Path) -> None:
    problems = misplaced_outputs(page.read_text(encoding="utf-8"))
    assert not problems, f"{page.relative_to(ROOT)}:\n" + "\n".join(problems)


@pytest.mark.parametrize("page", [pytest.param(p, id=str(p.relative_to(ROOT))) for p in PAGES if p.exists()])
def test_every_included_file_is_included_whole(page: Path) -> None:
    """`--8<-- "path"` lines (pymdownx.snippets) name a file that exists, and none was mangled
    (a formatter once turned one into `--8 < --"path"`, which the page then showed as code)."""
    for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
        where = f"{page.relative_to(ROOT)}:{number}"
        assert not re.match(r"\s*--8\s+<", line), f"{where}: a mangled include: {line!r}"
        if included := re.fullmatch(r'\s*--8<-- "([^"]+)"', line):
            assert (ROOT / included[1]).is_file(), f"{where}: no file {included[1]!r}"


def test_the_block_reader_honours_no_run_indented_fences_and_prose_between() -> None:
    text = (
        "# Page\n\n```python\nx = 1\n```\n\n<!-- no-run -->\n\n```python\nraise SystemExit\n```\n\n"
        "!!! note\n    ```python\n    print(x + 1)\n    ```\n\n    ```output\n    2\n    ```\n\n"
        "```python\nprint(3)\n```\n\nIt prints:\n\n```output\n3\n```\n\n"
        "```python\nprint(4)\n```\n\n```console\npip install aerix\n```\n\n```output\n4\n```\n"
    )
    blocks = python_blocks(text)
    assert [(b.line, b.code.strip(), b.run, b.output, b.output_line) for b in blocks] == [
        (4, "x = 1", True, None, None),
        (10, "raise SystemExit", False, None, None),
        (15, "print(x + 1)", True, "2", 19),
        (23, "print(3)", True, "3", 29),
        (33, "print(4)", True, None, None),  # another code block between: not its output
    ]
    assert misplaced_outputs(text) == ["line 41: an ```output block with no ```python block before it"]


def test_an_output_block_includes_a_golden_file() -> None:
    text = '```python\nprint("x")\n```\n\n```output\n--8<-- "tests/golden/results.txt"\n```\n'
    (block,) = python_blocks(text)
    assert block.output == (ROOT / "tests/golden/results.txt").read_text(encoding="utf-8").rstrip("\n")


@pytest.mark.parametrize(
    ("printed", "shown", "matches"),
    [
        ("a\nb\n", "a\nb", True),
        ("a  \n\nb\n\n", "a\n\nb", True),  # trailing spaces and end blank lines aside
        ("a\nb\n", "a\nc", False),
        ("a\n", "a\nb", False),
        ("a\nb\n", "a", False),
        ("a\n\nb\n", "a\nb", False),  # a blank line inside counts
        ("stop 17 tokens\n", "stop … tokens", True),
        ("stop tokens\n", "stop … tokens", False),  # the spaces around … are literal
        ("stop 17\ntokens\n", "stop …tokens", False),  # … stays within its line
        ("stop 17 tokens (a.b)\n", "stop … tokens (a.b)", True),
        ("stop 17 tokens (axb)\n", "stop … tokens (a.b)", False),  # the rest is literal, no regex
        ("call: weather({'city': 'Lisbon'})\n", "call: weather({'city': 'Lisbon', 'unit': 'c'})", False),
    ],
)
def test_an_output_is_compared_line_for_line(printed: str, shown: str, matches: bool) -> None:
    assert output_matches(printed, shown) is matches


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("```python\nprint(1)\n```\n\n```text\n1\n```\n", "line 6: a ```text block after a ```python block"),
        ("```python\nprint(1)\n```\n\n```\n1\n```\n", "line 6: a ``` block after a ```python block"),
        (
            "```python\nprint(1)\n```\n\nIt printed, here:\n\n```json\n1\n```\n",
            "line 8: a ```json block after a ```python block",
        ),
        (
            "```python\nprint(1)\n```\n\nIts output:\n\n```text\n1\n```\n",
            "line 8: a ```text block after a ```python block",
        ),
        ("```python\nx = 1  # → 1\n```\n", "line 2: a comment shows an output in the code"),
        ("```python\nprint(1)  # prints 1\n```\n", "line 2: a comment shows an output in the code"),
        ("Some text.\n\n```output\n1\n```\n", "line 4: an ```output block with no ```python block before it"),
        (
            "<!-- no-run -->\n\n```python\nprint(1)\n```\n\n```output\n1\n```\n",
            "line 8: an ```output block after a no-run ```python block",
        ),
    ],
)
def test_an_unchecked_output_is_refused(text: str, problem: str) -> None:
    problems = misplaced_outputs(text)
    assert len(problems) == 1 and problems[0].startswith(problem), problems


def test_prose_that_is_no_output_is_left_alone() -> None:
    text = (
        "```python\nx = 1  # the count\n```\n\nThat is, in short:\n\n```json\n{}\n```\n\n"
        "```python\nprint(1)\n```\n\n## Next\n\nIt prints output:\n\n```text\nnot the output\n```\n"
    )
    assert misplaced_outputs(text) == []


def test_a_transcript_is_read_command_by_command() -> None:
    text = (
        "```console\npip install aerix\n```\n\n"  # no `$ ` line: no transcript
        "```\n$ cat in.txt\nWhat is 2+2?\n/exit\n$ AERIX_API_KEY=sk-x aerix chat --seed 1 < in.txt\n"
        "✓ final: 4\nusage: … s\n$ echo $?\n0\n```\n"
    )
    (transcript,) = transcripts(text)
    assert transcript.run and transcript.line == 6
    assert [(c.line, c.words, c.env, c.stdin, c.output) for c in transcript.commands] == [
        (6, ["cat", "in.txt"], {}, None, "What is 2+2?\n/exit"),
        (9, ["aerix", "chat", "--seed", "1"], {"AERIX_API_KEY": "sk-x"}, "in.txt", "✓ final: 4\nusage: … s"),
        (12, ["echo", "$?"], {}, None, "0"),
    ]
    assert misplaced_outputs(text) == []


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("```\n$ make demo\nturn 1\n```\n", "line 2: `make demo` is no command the test runs"),
        ("```console\n$ aerix run hi\n$ python -m aerix run hi\n```\n", "line 3: `python -m aerix run hi`"),
        ("```\n$ X=1 echo $?\n0\n```\n", "line 2: `echo '$?'` is no command"),
        ("```\n$ aerix playground --port 9000\n```\n", "line 2: `aerix playground` serves until Ctrl-C"),
    ],
)
def test_a_transcript_the_test_cannot_run_must_be_marked_no_run(text: str, problem: str) -> None:
    problems = misplaced_outputs(text)
    assert len(problems) == 1 and problems[0].startswith(problem), problems
    assert misplaced_outputs(f"{NO_RUN}\n\n{text}") == []
