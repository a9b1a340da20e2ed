"""An MCP tool's name as an aerix tool name, and the check that no two tools get one name."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from ..errors import AerixError

__all__ = ["MAX_NAME", "aerix_name", "map_names", "mapped_prefix"]

_OTHER = re.compile(r"[^a-z0-9_]")
MAX_NAME = 64
"""The longest aerix tool name (`^[a-z][a-z0-9_]{0,63}$`)."""


def mapped_prefix(prefix: str) -> str:
    """A prefix as tool names carry it: lower case, every other character `_`, leading `_`s dropped."""
    return _OTHER.sub("_", prefix.lower()).lstrip("_")


def aerix_name(name: str, prefix: str | None = None) -> str:
    """The aerix name of an MCP tool: `prefix_` first, lower case, every other character `_`.

    A name must start with a letter: leading underscores are dropped, and `tool_`
    goes before a leading digit (or stands for a name with no letter or digit at
    all). Names longer than 64 characters are cut.

    Args:
        name: The tool's name on the MCP server.
        prefix: Put before the name (`prefix_name`), mapped the same way; `None` for none.

    Examples:
        >>> aerix_name("Get-Weather.v2"), aerix_name("search", "GitHub"), aerix_name("3d_render")
        ('get_weather_v2', 'github_search', 'tool_3d_render')
    """
    mapped = _OTHER.sub("_", name.lower()).lstrip("_")  # the name's own leading `_`s go, prefix or not
    head = mapped_prefix(prefix) if prefix else ""
    if head:
        mapped = f"{head}_{mapped or 'tool'}"
    if not mapped:
        mapped = "tool"
    elif not mapped[0].isalpha():
        mapped = f"tool_{mapped}"
    return mapped[:MAX_NAME]


def map_names(
    server: str, names: Sequence[str], prefix: str | None, chosen: Mapping[str, str | None]
) -> dict[str, str]:
    """The aerix name of each of a server's tools (by its MCP name), leaving out those `chosen` drops.

    Args:
        server: The server, as errors name it.
        names: Its tools' MCP names, in its order.
        prefix: Put before every mapped name.
        chosen: MCP name → the aerix name to use instead of the mapped one, or `None` to
            leave the tool out.

    Raises:
        AerixError: `kind="options"`: two tools map to one name, the server lists one name
            twice, or `chosen` names a tool the server does not have.
    """
    unknown = [n for n in chosen if n not in names]
    if unknown:
        raise AerixError(
            "options",
            f"MCP server {server!r}: names= gives {unknown[0]!r}, which is none of its tools; "
            f"its tools are {', '.join(map(repr, names)) or 'none'}",
        )
    out: dict[str, str] = {}
    owner: dict[str, str] = {}
    for name in names:
        new = chosen[name] if name in chosen else aerix_name(name, prefix)
        if new is None:
            continue
        if name in out:  # listed twice: names= goes by MCP name, so it cannot tell the two apart
            raise AerixError(
                "options",
                f"MCP server {server!r} lists two tools named {name!r}, and names= (keyed by MCP name) "
                "cannot tell them apart: have the server give them different names, or leave both "
                f"out with names={{{name!r}: None}}",
            )
        if new in owner:
            first = owner[new]
            raise AerixError(
                "options",
                f"MCP server {server!r}: its tools {first!r} and {name!r} both map to the aerix name "
                f"{new!r}; give one another name with names={{{name!r}: 'another_name'}}, "
                f"or leave it out with names={{{name!r}: None}}",
            )
        owner[new] = name
        out[name] = new
    return out
