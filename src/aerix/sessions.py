"""Sessions: an agent's conversation kept outside the process.

A `Session` keeps one conversation: the messages an agent commits, and the
calls that wait for a person's decision (approvals). `Agent(session=...)`
takes the conversation from it and appends every message it commits, as it
commits it, so a process killed at any moment keeps every completed turn.

`SQLiteSession` keeps them in a SQLite file, through the standard library's
`sqlite3`: one file holds many conversations, one per `id`, and several agents
and processes may use one file at once.

```python
from aerix import Agent
from aerix.sessions import SQLiteSession

agent = Agent(model=engine, session=SQLiteSession("chats.db", id="alice"))
```
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from .errors import AerixError
from .model import ChatMessage

__all__ = ["SQLiteSession", "Session"]


@runtime_checkable
class Session(Protocol):
    """Where an agent keeps its conversation: five methods, each sync or async (awaited)."""

    def load(self) -> Sequence[ChatMessage] | Awaitable[Sequence[ChatMessage]]:
        """The conversation kept so far, oldest first (no system message)."""
        ...

    def append(self, messages: Sequence[ChatMessage]) -> Awaitable[None] | None:
        """Keep `messages` after those already kept, all or none of them."""
        ...

    def clear(self) -> Awaitable[None] | None:
        """Forget the conversation and the calls waiting for a decision."""
        ...

    def load_pending(self) -> Mapping[str, Any] | Awaitable[Mapping[str, Any] | None] | None:
        """The calls waiting for a decision, as `save_pending` got them; `None` when none wait."""
        ...

    def save_pending(self, pending: Mapping[str, Any] | None) -> Awaitable[None] | None:
        """Keep the calls waiting for a decision (plain JSON), or `None`: none wait."""
        ...


_SCHEMA = """
CREATE TABLE IF NOT EXISTS aerix_messages (
    conversation TEXT NOT NULL,
    seq INTEGER NOT NULL,
    role TEXT NOT NULL,
    content TEXT NOT NULL,
    PRIMARY KEY (conversation, seq)
);
CREATE TABLE IF NOT EXISTS aerix_pending (
    conversation TEXT PRIMARY KEY,
    state TEXT NOT NULL
);
"""

_HEADER = b"SQLite format 3\x00"
"""How every SQLite database file begins."""


def _empty_or_sqlite(path: Path) -> bool:
    """Whether `path` is missing, empty, or begins as a SQLite database does."""
    try:
        with path.open("rb") as f:
            head = f.read(len(_HEADER))
    except FileNotFoundError:
        return True
    except OSError:
        return True  # sqlite3 says what is wrong with it
    return not head or head == _HEADER


_BUSY_MS = 10_000
"""How long one operation waits for another connection's write to finish before it fails."""


class SQLiteSession:
    """A `Session` in a SQLite file; its methods are synchronous.

    Each method opens the file, does its work in one transaction and closes it
    again, so any number of agents, threads and processes may share the file,
    and a removed or read-only file is reported at the next operation rather
    than written to in vain.

    Args:
        path: The database file; made (with its tables) if it does not exist.
        id: Which conversation of the file this session keeps.

    Raises:
        AerixError: `kind="options"`, naming the path: the file is not a SQLite
            database or cannot be opened or made, or `id` is not a non-empty string.
            Later, a method raises `RuntimeError` naming the file, the cause and the
            fix when the file was removed, made read-only or stayed locked (an agent
            then ends its run with `error`; nothing committed before is lost).

    Example:
        ```python
        session = SQLiteSession("chats.db", id="alice")
        session.append([{"role": "user", "content": "Hi"}])
        session.load()  # [{'role': 'user', 'content': 'Hi'}, ...]
        ```
    """

    def __init__(self, path: str | os.PathLike[str], id: str = "default") -> None:
        if not isinstance(path, str | os.PathLike) or isinstance(os.fspath(path), bytes):
            raise AerixError("options", f"SQLiteSession's path must be a str or a Path, got {path!r}")
        if not isinstance(id, str) or not id:
            raise AerixError("options", f"SQLiteSession's id must be a non-empty string, got {id!r}")
        self._path = Path(path)
        self._id = id
        if self._path.is_dir():
            raise AerixError("options", f"session file {str(self._path)!r} is a folder; give a file's path")
        if not _empty_or_sqlite(self._path):  # SQLite would take a short file as an empty database
            raise AerixError(
                "options",
                f"cannot use {str(self._path)!r} as a session file (file is not a database): give the path "
                "of a SQLite database made by SQLiteSession, or of a file that does not exist yet",
            )
        try:
            with self._connect(create=True) as db:
                db.executescript(_SCHEMA)
        except sqlite3.DatabaseError as exc:
            raise AerixError(
                "options",
                f"cannot use {str(self._path)!r} as a session file ({exc}): give the path of a SQLite "
                "database made by SQLiteSession, or of a file that does not exist yet",
            ) from None

    @property
    def path(self) -> Path:
        """The database file."""
        return self._path

    @property
    def id(self) -> str:
        """The conversation this session keeps."""
        return self._id

    def __repr__(self) -> str:
        return f"SQLiteSession({str(self._path)!r}, id={self._id!r})"

    def load(self) -> list[ChatMessage]:
        """The conversation kept so far, oldest first."""
        rows = self._read(
            "SELECT role, content FROM aerix_messages WHERE conversation = ? ORDER BY seq", (self._id,)
        )
        return [ChatMessage(role=role, content=content) for role, content in rows]

    def append(self, messages: Sequence[ChatMessage]) -> None:
        """Keep `messages` after the conversation's last one, in one transaction."""
        rows = [(m["role"], m["content"]) for m in messages]
        if not rows:
            return

        def write(db: sqlite3.Connection) -> None:
            (last,) = db.execute(
                "SELECT COALESCE(MAX(seq), 0) FROM aerix_messages WHERE conversation = ?", (self._id,)
            ).fetchone()
            db.executemany(
                "INSERT INTO aerix_messages (conversation, seq, role, content) VALUES (?, ?, ?, ?)",
                [(self._id, last + i, role, content) for i, (role, content) in enumerate(rows, 1)],
            )

        self._write(write, "append to")

    def clear(self) -> None:
        """Forget this conversation and its waiting calls (the file's other conversations stay)."""

        def write(db: sqlite3.Connection) -> None:
            db.execute("DELETE FROM aerix_messages WHERE conversation = ?", (self._id,))
            db.execute("DELETE FROM aerix_pending WHERE conversation = ?", (self._id,))

        self._write(write, "clear")

    def load_pending(self) -> dict[str, Any] | None:
        """The calls waiting for a decision, as saved; `None` when none wait."""
        rows = self._read("SELECT state FROM aerix_pending WHERE conversation = ?", (self._id,))
        return None if not rows else dict(json.loads(rows[0][0]))

    def save_pending(self, pending: Mapping[str, Any] | None) -> None:
        """Keep the calls waiting for a decision (plain JSON), or forget them (`None`)."""
        text = None if pending is None else json.dumps(dict(pending), ensure_ascii=False)

        def write(db: sqlite3.Connection) -> None:
            if text is None:
                db.execute("DELETE FROM aerix_pending WHERE conversation = ?", (self._id,))
            else:
                db.execute(
                    "INSERT INTO aerix_pending (conversation, state) VALUES (?, ?) "
                    "ON CONFLICT (conversation) DO UPDATE SET state = excluded.state",
                    (self._id, text),
                )

        self._write(write, "save the waiting calls to")

    def _connect(self, *, create: bool = False) -> sqlite3.Connection:
        """A connection to the file in autocommit mode (transactions are explicit); `create`
        makes the file if it is missing, else a missing file is an error."""
        mode = "rwc" if create else "rw"
        uri = f"{self._path.resolve().as_uri()}?mode={mode}"
        db = sqlite3.connect(uri, uri=True, timeout=_BUSY_MS / 1000, isolation_level=None)
        db.execute(f"PRAGMA busy_timeout = {_BUSY_MS}")
        return db

    def _read(self, sql: str, args: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        try:
            db = self._connect()
            try:
                return db.execute(sql, args).fetchall()
            finally:
                db.close()
        except sqlite3.Error as exc:
            raise self._fault("read", exc) from None

    def _write(self, work: Callable[[sqlite3.Connection], None], what: str) -> None:
        try:
            db = self._connect()
            try:
                db.execute("BEGIN IMMEDIATE")
                try:
                    work(db)
                except BaseException:
                    db.execute("ROLLBACK")
                    raise
                db.execute("COMMIT")
            finally:
                db.close()
        except sqlite3.Error as exc:
            raise self._fault(what, exc) from None

    def _fault(self, what: str, exc: sqlite3.Error) -> RuntimeError:
        """The error for a failed operation, naming the file, the cause and the fix."""
        text = str(exc)
        if not self._path.exists():
            fix = "the file was removed; make a new SQLiteSession to start a new one"
        elif "readonly" in text or "read-only" in text:
            fix = "the file (or its folder) is read-only; give the process write access"
        elif "locked" in text or "busy" in text:
            fix = f"another connection held it for over {_BUSY_MS // 1000} s; try again when it is done"
        else:
            fix = "check that it is a SQLite database made by SQLiteSession"
        return RuntimeError(f"cannot {what} session file {str(self._path)!r} ({text}): {fix}")
