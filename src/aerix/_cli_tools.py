"""The command's tools: `--tools` (the demo tools, or a module's or a file's own) and `--mcp` servers.

A `--tools` value is comma-separated items, each a demo tool's name (or `none`),
`MODULE:FUNCTION`, `MODULE:*` (every `Tool` of the module), `FILE.py` (every `Tool`
of the file) or `FILE.py:FUNCTION`. A FUNCTION is a `Tool` (a function under `@tool`)
or a typed function, made a tool as `@tool` would. An `--mcp` value is a URL
(streamable HTTP) or a command line, `PREFIX=` first to put `PREFIX_` before its
tools' names; a command whose first word ends in `.py` runs with this Python.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import importlib.util
import inspect
import os
import re
import shlex
import sys
import types
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import AerixError, Tool, ToolContext, tool
from ._cli_flags import cli_hints
from .demo_tools import DEMO_TOOLS
from .errors import a_kind

if TYPE_CHECKING:
    from .mcp import MCPServer

__all__ = ["Refused", "check_unique", "mcp_server", "mcp_tools", "pick_tools"]

_PREFIXED = re.compile(r"^(?P<prefix>[A-Za-z][A-Za-z0-9_.-]*)=(?P<rest>.*)$", re.DOTALL)
_OWN = "for your own tools give MODULE:FUNCTION, MODULE:* or path/to/file.py"


class Refused(Exception):
    """A bad `--tools` or `--mcp` value: the command's message and exit status."""

    def __init__(self, message: str, code: int = 2) -> None:
        super().__init__(message)
        self.message = message
        self.code = code


def pick_tools(values: list[str] | None, *, default: bool) -> list[tuple[Tool, str]]:
    """The tools that the `--tools` values name, each with where it came from.

    Args:
        values: The `--tools` values, or `None` when none was given.
        default: Whether no value means the demo tools (else no tools).
    """
    if values is None:
        return [(t, "the demo tools") for t in DEMO_TOOLS.values()] if default else []
    picked: list[tuple[Tool, str]] = []
    items = [item.strip() for value in values for item in value.split(",") if item.strip()]
    if not items:
        raise Refused("--tools: nothing named; name tools (--tools calculator,clock), or 'none' for no tools")
    if "none" in items and len(set(items)) > 1:
        named = ", ".join(i for i in items if i != "none")
        raise Refused(f"--tools: 'none' means no tools, yet it names {named}")
    for item in items:
        if item == "none":
            continue
        if item in DEMO_TOOLS:
            picked.append((DEMO_TOOLS[item], "the demo tools"))
        elif item.endswith(".py") or ":" in item:
            picked += [(t, repr(item)) for t in _own(item)]
        else:
            raise Refused(
                f"--tools: unknown tool {item!r}; the demo tools are {', '.join(DEMO_TOOLS)} "
                f"(or 'none'); {_OWN}"
            )
    unique: dict[int, tuple[Tool, str]] = {}
    for t, where in picked:  # a tool named twice is given once
        unique.setdefault(id(t), (t, where))
    return list(unique.values())


def check_unique(tools: list[tuple[Tool, str]]) -> None:
    """Refuse two tools with one name, saying where each came from."""
    first: dict[str, str] = {}
    for t, where in tools:
        if t.name in first:
            mcp = "--mcp" in where + first[t.name]
            hint = "; give an MCP server's tools a prefix with --mcp PREFIX=SERVER" if mcp else ""
            raise Refused(f"two tools are named {t.name!r}: from {first[t.name]} and from {where}{hint}")
        first[t.name] = where


def _own(item: str) -> list[Tool]:
    """The tools of one `MODULE:FUNCTION`, `MODULE:*`, `FILE.py` or `FILE.py:FUNCTION` item."""
    if item.endswith(".py"):
        where, name = item, "*"
    else:
        where, _, name = item.rpartition(":")
        if not where or not name:
            raise Refused(f"--tools: {item!r} names no function; give MODULE:FUNCTION, MODULE:* or FILE.py")
    module = _load_file(where, item) if where.endswith(".py") else _import(where, item)
    if name == "*":
        found = [v for v in vars(module).values() if isinstance(v, Tool)]
        if not found:
            raise Refused(f"--tools: {where!r} defines no tools (functions under @aerix.tool)")
        return found
    if not hasattr(module, name):
        tools = [k for k, v in vars(module).items() if isinstance(v, Tool)]
        known = f"; its tools are {', '.join(tools)}" if tools else "; it defines no tools (@aerix.tool)"
        raise Refused(f"--tools: {where!r} has no {name!r}{known}")
    value = getattr(module, name)
    if isinstance(value, Tool):
        return [value]
    if inspect.isroutine(value):
        try:
            return [tool(value)]
        except AerixError as exc:
            raise Refused(f"--tools: {item!r}: {exc.message}") from None
    raise Refused(f"--tools: {item!r} is {a_kind(value)}, not a tool or a function")


def _import(name: str, item: str) -> types.ModuleType:
    try:
        with _on_path(os.getcwd()):
            return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and (name == exc.name or name.startswith(exc.name + ".")):
            raise Refused(
                f"--tools: no module named {name!r} (in {item!r}); run the command from the folder "
                "that holds it, add that folder to PYTHONPATH, or give path/to/file.py"
            ) from None
        raise Refused(f"--tools: importing {name!r} failed: {_line(exc)}") from None
    except Exception as exc:
        raise Refused(f"--tools: importing {name!r} failed: {_line(exc)}") from None


def _load_file(path: str, item: str) -> types.ModuleType:
    file = Path(path)
    if not file.is_file():
        raise Refused(f"--tools: no file {path!r} (in {item!r})")
    name = "aerix_tools_" + re.sub(r"\W", "_", file.stem)
    spec = importlib.util.spec_from_file_location(name, file)
    if spec is None or spec.loader is None:  # pragma: no cover - a .py path always has a loader
        raise Refused(f"--tools: cannot load {path!r} as Python")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses and typing look their module up by name
    try:
        with _on_path(str(file.resolve().parent)):
            spec.loader.exec_module(module)
    except Exception as exc:
        del sys.modules[name]
        raise Refused(f"--tools: loading {path!r} failed: {_line(exc)}") from None
    return module


@contextlib.contextmanager
def _on_path(folder: str) -> Iterator[None]:
    """`folder` first on `sys.path` while a module is imported (its own imports find their siblings)."""
    sys.path.insert(0, folder)
    try:
        yield
    finally:
        with contextlib.suppress(ValueError):
            sys.path.remove(folder)


def _line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


def mcp_tools(server: MCPServer) -> list[Tool]:
    """An entered `--mcp` server's tools, whose error results spell the library's hints as the
    command's (a server that died: run the command again, not "leave its `async with`")."""
    from .mcp import MCPServerError

    def spelled(t: Tool) -> Tool:
        async def run(input: dict[str, Any], cx: ToolContext) -> Any:
            try:
                return await t.run(input, cx)
            except MCPServerError as exc:
                raise MCPServerError(cli_hints(str(exc))) from exc.__cause__

        return dataclasses.replace(t, run=run)

    return [spelled(t) for t in server.tools]


def mcp_server(value: str) -> MCPServer:
    """The MCP server that one `--mcp` value names (not yet entered).

    Raises:
        Refused: The value is empty or malformed, or the `mcp` extra is missing.
    """
    try:
        from .mcp import MCPServer
    except ImportError as exc:
        raise Refused(f"--mcp: {exc}", 1) from None
    prefix = None
    m = _PREFIXED.match(value.strip())
    if m is not None:
        prefix, value = m["prefix"], m["rest"]
    value = value.strip()
    try:
        if value.startswith(("http://", "https://")):
            return MCPServer.http(value, prefix=prefix)
        try:
            words = shlex.split(value)
        except ValueError as exc:
            raise Refused(f"--mcp: cannot read {value!r} as a command line: {exc}") from None
        if not words:
            after = f" after the prefix {prefix}=" if prefix is not None else ""
            raise Refused(f"--mcp: give a command line ('python server.py', or server.py) or a URL{after}")
        command, args = words[0], words[1:]
        if command.endswith(".py"):  # a Python server script: run it with this Python
            command, args = sys.executable, [words[0], *args]
        return MCPServer.stdio(command, args, prefix=prefix)
    except AerixError as exc:
        raise Refused(f"--mcp: {exc.message}") from None
