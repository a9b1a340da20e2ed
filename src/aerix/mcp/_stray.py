"""What a server sends that is not MCP: said once, in aerix's words, never as the SDK's traceback.

A stdio server that prints a startup banner on stdout puts a line on the wire that is
no JSON-RPC message. The SDK skips it, hands it to the session as an exception, and
logs it with `logger.exception`, which shows a whole traceback on a program's stderr
when logging is not configured. Within aerix's sessions, a filter on the SDK's two
transport loggers drops the records whose content aerix reports itself: the skipped
lines (logged on `aerix.mcp`, one line each), and an HTTP answer that is no MCP
(the error of the handshake or of the call names it). Every other record, and every
record of a session that a program opens with the SDK itself, passes unchanged.
"""

from __future__ import annotations

import contextvars
import logging

from .._validate import short
from ..errors import describe

__all__ = ["SDK_LOGGERS", "StrayOutput", "in_session", "quiet_sdk_logs"]

log = logging.getLogger("aerix.mcp")

SDK_LOGGERS = ("mcp.client.stdio", "mcp.client.streamable_http")
"""The SDK's loggers that aerix filters (only in its own sessions)."""
_SAID_BY_AERIX = (
    "Failed to parse JSONRPC message from server",  # stdio: a line that is no JSON-RPC message
    "Unexpected content type:",  # HTTP: an answer that is neither JSON nor an event stream
    "Error parsing JSON response",  # HTTP: JSON that is no JSON-RPC message
    "Error parsing SSE message",  # HTTP: an event that is none
)
"""How the SDK's records that aerix reports itself begin: each with a traceback, or twice."""

in_session: contextvars.ContextVar[bool] = contextvars.ContextVar("aerix.mcp.in_session", default=False)
"""Set in the task of an aerix session; the SDK's tasks for it inherit it."""


class _AerixSays(logging.Filter):
    """Drops the SDK's records that aerix reports itself, in aerix's sessions only."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not in_session.get():
            return True
        try:
            return not record.getMessage().startswith(_SAID_BY_AERIX)
        except Exception:  # a record whose message cannot be formatted: not one of those
            return True


_FILTER = _AerixSays()


def quiet_sdk_logs() -> None:
    """Put the filter on the SDK's transport loggers (once: doing it again changes nothing)."""
    for name in SDK_LOGGERS:
        logger = logging.getLogger(name)
        if _FILTER not in logger.filters:
            logger.addFilter(_FILTER)


class StrayOutput:
    """What one session's server sent that is not MCP: the first piece logged as a warning on
    `aerix.mcp`, the others at debug level; counted, the first kept for the errors of the start."""

    def __init__(self, server: str, *, stdio: bool) -> None:
        self._server = server
        self._stdio = stdio
        self.count = 0
        """How many pieces the SDK skipped."""
        self.first: str | None = None
        """The first, short."""

    def note(self, exc: Exception) -> None:
        """The SDK skipped something that it could not read as MCP (`exc` says what)."""
        what = _what(exc)
        self.count += 1
        if self.first is not None:
            log.debug("MCP server %r sent more that is not MCP, skipped: %s", self._server, what)
            return
        self.first = what
        if self._stdio:
            log.warning(
                "MCP server %r wrote a line on stdout that is not MCP, skipped: %s (an MCP server on "
                "stdio writes only MCP messages on stdout, anything else on stderr)",
                self._server,
                what,
            )
        else:
            log.warning("MCP server %r sent a message that is not MCP, skipped: %s", self._server, what)

    def said(self) -> str:
        """`""`, or a clause for an error of the start: what the server sent that is not MCP."""
        if self.first is None:
            return ""
        if self._stdio:
            if self.count == 1:
                return f"; it wrote a line on stdout that is not MCP: {self.first}"
            return f"; it wrote {self.count} lines on stdout that are not MCP, the first {self.first}"
        return f"; it sent {self.count} message(s) that are not MCP, the first {self.first}"


def _what(exc: Exception) -> str:
    """What the server sent, short: the line (a pydantic error keeps it as its `input`), else the error."""
    errors = getattr(exc, "errors", None)
    if callable(errors):
        try:
            got = errors()[0].get("input")
        except Exception:  # not pydantic's: no input to show
            got = None
        if got is not None:
            return short(got, 80)
    return short(describe(exc).splitlines()[0], 80)
