"""A conversation given to an agent (`Agent(messages=...)`, `reset(messages=...)`) and the
session that keeps it (`Agent(session=...)`): the messages' check, and `Store`, which drives a
session's methods whether they are sync or async."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any, TypeVar

from .errors import AerixError, a_kind
from .model import ChatMessage
from .sessions import Session
from .tools import surrogate_at

__all__ = ["Store", "check_messages"]

_ROLES = ("user", "assistant")

T = TypeVar("T")


def check_messages(messages: object, where: str = "messages") -> list[ChatMessage]:
    """`messages` as the agent's own list of plain messages, once checked.

    Raises:
        AerixError: `kind="options"`, naming the index and the fault: not a list of dicts,
            a key other than `role` and `content`, a role other than user or assistant (the
            system message is the agent's own), or a content that is not a string.
    """
    if isinstance(messages, str | bytes | dict) or not isinstance(messages, Iterable):
        raise AerixError(
            "options", f"{where} must be a list of {{'role', 'content'}} dicts, got {a_kind(messages)}"
        )
    kept: list[ChatMessage] = []
    for i, m in enumerate(messages):
        at = f"{where}[{i}]"
        if not isinstance(m, dict):
            raise AerixError("options", f"{at} must be a dict with 'role' and 'content', got {a_kind(m)}")
        if set(m) != {"role", "content"}:
            extra = sorted(map(str, set(m) - {"role", "content"}))
            missing = sorted({"role", "content"} - set(m))
            fault = f"has unknown key(s) {extra}" if extra else f"lacks {' and '.join(missing)}"
            raise AerixError("options", f"{at} {fault}; a message has exactly 'role' and 'content'")
        role, content = m["role"], m["content"]
        if role not in _ROLES:
            raise AerixError(
                "options",
                f"{at}: role must be 'user' or 'assistant', got {role!r} (the system message is the "
                "agent's own: give instructions= instead)",
            )
        if not isinstance(content, str):
            raise AerixError("options", f"{at}: content must be a string, got {a_kind(content)}")
        if (bad := surrogate_at(content)) is not None:
            raise AerixError("options", f"{at}: content holds a lone surrogate at index {bad}")
        kept.append(ChatMessage(role=role, content=str.__str__(content)))
    return kept


async def settle(value: T | Awaitable[T]) -> T:
    """`value`, awaited if a session's method gave an awaitable (its methods may be sync or async)."""
    if inspect.isawaitable(value):
        return await value
    return value


def is_async(method: Any) -> bool:
    """Whether a session's method is a coroutine function (its work happens only when awaited)."""
    return inspect.iscoroutinefunction(method) or inspect.iscoroutinefunction(type(method).__call__)


_METHODS = ("load", "append", "clear", "load_pending", "save_pending")


class Store:
    """An agent's session, or none: a synchronous session's methods run at once; an async
    one's load waits for the first run and its writes for the run's next event (`flush`)."""

    def __init__(self, session: Session | None) -> None:
        if session is not None:
            missing = [m for m in _METHODS if not callable(getattr(session, m, None))]
            if missing:
                raise AerixError(
                    "options",
                    f"session must be a Session (aerix.sessions.SQLiteSession, or an object with the "
                    f"methods {', '.join(_METHODS)}); {type(session).__name__} lacks {', '.join(missing)}",
                )
        self.session = session
        self._messages_loaded = self._pending_loaded = session is None
        self._clear = False
        """An async session's `clear` is due before anything else is written."""
        self._writes: list[tuple[str, Any]] = []
        """Writes not yet made, in order: an async session's, and any that failed (made again,
        first, at the next write or run, so the session never skips a committed turn)."""

    @property
    def loaded(self) -> bool:
        """Whether the session's conversation and waiting calls were taken."""
        return self._messages_loaded and self._pending_loaded

    def load_now(
        self,
        restore: Callable[[list[ChatMessage]], None],
        restore_pending: Callable[[Mapping[str, Any] | None], None],
    ) -> None:
        """Take what a session's synchronous `load` and `load_pending` give now (the rest waits
        for `ready`)."""
        session = self.session
        if session is None:
            return
        if not is_async(session.load):
            messages = session.load()
            if inspect.isawaitable(messages):  # a sync method that gave an awaitable after all
                if inspect.iscoroutine(messages):
                    messages.close()
                return
            restore(check_messages(messages, "the session's messages"))
            self._messages_loaded = True
        if self._messages_loaded and not is_async(session.load_pending):
            pending = session.load_pending()
            if not inspect.isawaitable(pending):
                restore_pending(pending)
                self._pending_loaded = True
            elif inspect.iscoroutine(pending):
                pending.close()

    async def ready(
        self,
        restore: Callable[[list[ChatMessage]], None],
        restore_pending: Callable[[Mapping[str, Any] | None], None],
    ) -> None:
        """Before a run: an async session's conversation taken, and its due writes made."""
        session = self.session
        if session is not None and not self._messages_loaded:
            restore(check_messages(await settle(session.load()), "the session's messages"))
            self._messages_loaded = True
        if session is not None and not self._pending_loaded:
            restore_pending(await settle(session.load_pending()))
            self._pending_loaded = True
        await self.flush()

    def pending_now(self) -> tuple[bool, Mapping[str, Any] | None]:
        """What a synchronous session says waits now, `(True, pending)`; `(False, None)` for an
        async session (or none), which is not asked outside a run."""
        session = self.session
        if session is None or not self.loaded or is_async(session.load_pending):
            return False, None
        pending = session.load_pending()
        if inspect.isawaitable(pending):
            if inspect.iscoroutine(pending):
                pending.close()
            return False, None
        return True, pending

    def reload(
        self,
        restore: Callable[[list[ChatMessage]], None],
        restore_pending: Callable[[Mapping[str, Any] | None], None],
    ) -> None:
        """Take the session's conversation and waiting calls again (on the next run, for an
        async session)."""
        self._messages_loaded = self._pending_loaded = False
        self.load_now(restore, restore_pending)

    def append(self, messages: list[ChatMessage]) -> None:
        """Keep committed messages (a synchronous session's append raises here, ending the run)."""
        if self.session is not None:
            self._write("append", [dict(m) for m in messages])

    def save_pending(self, pending: Mapping[str, Any] | None) -> None:
        """Keep the calls that wait for a decision, or that none wait (`None`)."""
        self._write("save_pending", pending)

    def reset(self, messages: list[ChatMessage]) -> None:
        """Clear the session, then keep `messages`; an async session's at the next run."""
        session = self.session
        if session is None:
            return
        if is_async(session.clear):
            self._clear, self._writes = True, []
            self._messages_loaded = self._pending_loaded = True
        else:
            self._writes = []
            session.clear()
        if messages:
            self.append(messages)

    @property
    def due(self) -> bool:
        """Whether writes wait to be made (`flush`)."""
        return self._clear or bool(self._writes)

    async def flush(self) -> None:
        """Make an async session's due writes, in order."""
        session = self.session
        if session is None:
            return
        if self._clear:
            await settle(session.clear())
            self._clear = False
        while self._writes:
            method, value = self._writes[0]
            await (value if method == "await" else settle(getattr(session, method)(value)))
            del self._writes[0]  # made: a write that failed stays first, made again next time

    def _write(self, method: str, value: Any) -> None:
        session = self.session
        if session is None:
            return
        if self._clear or self._writes or is_async(getattr(session, method)):
            self._writes.append((method, value))
        else:
            try:
                settled = getattr(session, method)(value)
            except BaseException:
                self._writes.append((method, value))  # made again before any later write
                raise
            if inspect.isawaitable(settled):  # a sync method that gave an awaitable after all
                self._writes.append(("await", settled))
