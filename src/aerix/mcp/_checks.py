"""The checks of what `MCPServer.stdio` and `MCPServer.http` are given: each refuses a bad value
with `AerixError(kind="options")`, naming the value and the fix, before anything starts."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from urllib.parse import urlsplit

from .._validate import short
from ..errors import AerixError
from ..tools import NAME_PATTERN
from ._names import MAX_NAME, mapped_prefix

__all__ = [
    "bad",
    "check_headers",
    "check_names",
    "check_prefix",
    "check_timeout",
    "check_url",
    "is_str_map",
    "without_userinfo",
]

_EXAMPLE_URL = "'http://127.0.0.1:8000/mcp'"
_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
"""A header name (RFC 9110's token)."""
_VALUE_CHAR = re.compile(r"[\x20-\x7e\t]")
"""A character a header value may hold: visible ASCII, a space or a tab."""


def bad(message: str) -> AerixError:
    """The error for a bad argument of `MCPServer`'s, `kind="options"`."""
    return AerixError("options", message)


def check_url(url: object) -> str:
    """An MCP endpoint: `http://` or `https://`, a host, and a port from 1 to 65535 if one is given."""
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        raise bad(f"MCPServer.http: url must start with http:// or https://, got {url!r}")
    shown = without_userinfo(url)  # a password stays out of the message
    if (at := next((i for i, c in enumerate(shown) if not c.isprintable() or c.isspace()), None)) is not None:
        raise bad(
            f"MCPServer.http: url {shown!r} holds {shown[at]!r} (at index {at}), which a URL cannot carry; "
            "percent-encode it (a space is %20)"
        )
    if any(not c.isprintable() or c.isspace() for c in url):  # in the user or password, not shown
        raise bad(
            f"MCPServer.http: the user or password of url {shown!r} holds a character a URL cannot "
            "carry; percent-encode it (a space is %20)"
        )
    try:
        parts = urlsplit(url)
        host = parts.hostname
    except ValueError as exc:  # an unclosed `[` of an IPv6 address
        raise bad(f"MCPServer.http: url {shown!r} is no URL ({exc}); give one as in {_EXAMPLE_URL}") from None
    if not host:
        raise bad(f"MCPServer.http: url {shown!r} names no host; give one, as in {_EXAMPLE_URL}")
    try:
        port = parts.port
    except ValueError:  # not a number, or past 65535
        port = -1
    if port is not None and not 1 <= port <= 65535:
        given = parts.netloc.rpartition("@")[2].rpartition("]")[2].partition(":")[2]
        raise bad(
            f"MCPServer.http: url {shown!r} has the port {given!r}; a port is a number from 1 to 65535, "
            f"as in {_EXAMPLE_URL} (or none: 80 for http, 443 for https)"
        )
    return url


def check_headers(headers: object) -> dict[str, str]:
    """Headers that HTTP can carry: each name one token, each value visible ASCII on one line.

    A value is never shown whole (it is often a secret): only its first bad character.
    """
    if headers is None:
        return {}
    if not is_str_map(headers):
        raise bad(f"MCPServer.http: headers must map names to strings, got {headers!r}")
    assert isinstance(headers, Mapping)
    for name, value in headers.items():
        if not _TOKEN.fullmatch(name):
            raise bad(
                f"MCPServer.http: headers: {name!r} is no header name; a name is one word of ASCII "
                "letters, digits and -_.!#$%&'*+^`|~"
            )
        at = next((i for i, c in enumerate(value) if not _VALUE_CHAR.fullmatch(c)), None)
        if at is not None:
            raise bad(
                f"MCPServer.http: headers[{name!r}] holds {value[at]!r} (at index {at}), which an HTTP "
                "header cannot carry: a value is visible ASCII on one line; encode anything else "
                "(as base64, say)"
            )
        if value != value.strip(" \t"):
            raise bad(
                f"MCPServer.http: headers[{name!r}] starts or ends with a space or tab, which HTTP "
                "drops; strip it"
            )
    return dict(headers)


def check_prefix(prefix: object) -> str | None:
    """`prefix`: `None`, or a string that leaves some of it, and room for a name, in a tool's name."""
    if prefix is None:
        return None
    if not isinstance(prefix, str) or not prefix.strip():
        raise bad(f"MCPServer: prefix must be a non-empty string, got {prefix!r}")
    head = mapped_prefix(prefix)
    if not head.strip("_"):  # nothing of it is left in a tool's name
        raise bad(f"MCPServer: prefix {prefix!r} has no letter or digit; a tool name keeps a-z, 0-9 and _")
    if len(head) > MAX_NAME - 2:
        raise bad(
            f"MCPServer: prefix {short(prefix, 40)} maps to {len(head)} characters; a tool name has at most "
            f"{MAX_NAME}, so it would leave no room for the tool's own name"
        )
    return prefix


def check_timeout(timeout: object) -> float:
    """`timeout`: a positive, finite number of seconds."""
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not 0 < timeout < math.inf:
        raise bad(f"MCPServer: timeout must be a positive number of seconds, got {timeout!r}")
    return float(timeout)


def check_names(names: object) -> Mapping[str, str | None]:
    """`names`: MCP tool names to aerix tool names, or to `None` (leave the tool out)."""
    if names is None:
        return {}
    if not isinstance(names, Mapping):
        raise bad(f"MCPServer: names must map MCP tool names to aerix names (or None), got {names!r}")
    for key, value in names.items():
        good = value is None or (isinstance(value, str) and NAME_PATTERN.fullmatch(value) is not None)
        if not isinstance(key, str) or not good:
            raise bad(
                f"MCPServer: names[{key!r}] = {value!r}: give an aerix tool name "
                "(^[a-z][a-z0-9_]{0,63}$), or None to leave the tool out"
            )
    return dict(names)


def is_str_map(value: object) -> bool:
    """Whether `value` maps strings to strings (`env`, `headers`)."""
    if not isinstance(value, Mapping):
        return False
    return all(isinstance(k, str) and isinstance(v, str) for k, v in value.items())


def without_userinfo(url: str) -> str:
    """The URL without a `user:password@` (errors and results show the name)."""
    scheme, sep, rest = url.partition("://")
    end = next((i for i, c in enumerate(rest) if c in "/?#"), len(rest))  # the authority ends there
    authority, tail = rest[:end], rest[end:]
    return f"{scheme}{sep}{authority.rpartition('@')[2]}{tail}"
