"""What a `tools/call` answer means to aerix: a result, or an error that the loop shows as one."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import mcp_types as types

__all__ = ["MCPServerError", "MCPToolError", "leaf", "result_value"]


class MCPToolError(Exception):
    """The tool answered with an error (`isError`), or the server refused the call.

    Raised from a tool's `run`, it becomes the call's error result: `error: <its text>`.
    """


class MCPServerError(Exception):
    """The server cannot answer: it exited, broke the connection, cannot be reached, or is closed.

    Raised from a tool's `run`, it becomes the call's error result, and the run goes on.
    """


def result_value(result: types.CallToolResult) -> Any:
    """The result of a call: its text contents joined by newlines; without any (or with only
    empty ones), its structured content; without that either, a note on what it held.

    Raises:
        MCPToolError: The result is an error (`isError`), with its text.
    """
    texts = [text for block in result.content if (text := _text(block)) is not None]
    if result.is_error:
        detail = "\n".join(texts) or _structured(result) or "the tool reported an error and said nothing more"
        raise MCPToolError(detail)
    if result.structured_content is not None and not any(texts):  # no text, or only empty texts
        return result.structured_content
    if texts:
        return "\n".join(texts)
    kinds = sorted({_kind(block) for block in result.content})
    if kinds:
        return f"(the tool returned only {' and '.join(kinds)} content, which aerix does not pass on)"
    return ""


def _text(block: types.ContentBlock) -> str | None:
    if isinstance(block, types.TextContent):
        return block.text
    if isinstance(block, types.EmbeddedResource) and isinstance(block.resource, types.TextResourceContents):
        return block.resource.text
    return None


def _kind(block: types.ContentBlock) -> str:
    if isinstance(block, types.ImageContent | types.AudioContent):
        return f"{block.type} ({block.mime_type})"
    if isinstance(block, types.ResourceLink):
        return f"resource link ({block.uri})"
    return block.type


def _structured(result: types.CallToolResult) -> str | None:
    if result.structured_content is None:
        return None
    try:
        return json.dumps(result.structured_content, ensure_ascii=False)
    except (TypeError, ValueError):
        return repr(result.structured_content)


def leaf(exc: BaseException) -> BaseException:
    """The first exception in a (nested) exception group that is not a cancellation; else the first."""
    if isinstance(exc, BaseExceptionGroup):
        leaves = [leaf(e) for e in exc.exceptions]
        real = [e for e in leaves if not _is_cancel(e)]
        return (real or leaves or [exc])[0]
    return exc


def _is_cancel(exc: BaseException) -> bool:
    return isinstance(exc, asyncio.CancelledError)
