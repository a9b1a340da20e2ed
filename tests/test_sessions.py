"""`aerix.sessions`: the `Session` protocol and `SQLiteSession`."""

from __future__ import annotations

import multiprocessing
import os
import sqlite3
import stat
from pathlib import Path

import pytest

import aerix.sessions as sessions
from aerix import AerixError
from aerix.sessions import Session, SQLiteSession


def _msg(role: str, content: str) -> dict[str, str]:
    return {"role": role, "content": content}


def test_a_new_file_starts_empty_and_keeps_what_is_appended(tmp_path: Path) -> None:
    session = SQLiteSession(tmp_path / "chats.db")
    assert session.load() == []
    assert session.load_pending() is None
    session.append([_msg("user", "Hi"), _msg("assistant", '{"final":"Hello"}')])
    session.append([_msg("user", "¿Qué tal? \U0001f600")])
    again = SQLiteSession(tmp_path / "chats.db")
    assert again.load() == [
        _msg("user", "Hi"),
        _msg("assistant", '{"final":"Hello"}'),
        _msg("user", "¿Qué tal? \U0001f600"),
    ]
    assert isinstance(again, Session)
    assert session.id == "default"
    assert session.path == tmp_path / "chats.db"
    assert repr(session) == f"SQLiteSession({str(tmp_path / 'chats.db')!r}, id='default')"


def test_one_file_holds_a_conversation_per_id(tmp_path: Path) -> None:
    path = tmp_path / "chats.db"
    alice, bob = SQLiteSession(path, id="alice"), SQLiteSession(path, id="bob")
    alice.append([_msg("user", "I am Alice")])
    bob.append([_msg("user", "I am Bob")])
    alice.save_pending({"calls": [{"id": "call_1"}]})
    assert alice.load() == [_msg("user", "I am Alice")]
    assert bob.load() == [_msg("user", "I am Bob")]
    assert bob.load_pending() is None
    alice.clear()
    assert alice.load() == [] and alice.load_pending() is None
    assert bob.load() == [_msg("user", "I am Bob")]


def test_pending_calls_are_saved_replaced_and_forgotten(tmp_path: Path) -> None:
    session = SQLiteSession(tmp_path / "chats.db")
    session.save_pending({"calls": [{"id": "call_1", "tool": "send", "input": {"to": "x"}}]})
    session.save_pending({"calls": [{"id": "call_2", "tool": "send", "input": {"to": "é"}}]})
    assert session.load_pending() == {"calls": [{"id": "call_2", "tool": "send", "input": {"to": "é"}}]}
    session.save_pending(None)
    assert session.load_pending() is None


def test_an_empty_append_writes_nothing(tmp_path: Path) -> None:
    session = SQLiteSession(tmp_path / "chats.db")
    session.append([])
    assert session.load() == []


@pytest.mark.parametrize("bad_id", ["", None, 3])
def test_a_bad_id_is_an_options_error(tmp_path: Path, bad_id: object) -> None:
    with pytest.raises(AerixError, match="id must be a non-empty string") as info:
        SQLiteSession(tmp_path / "chats.db", id=bad_id)  # type: ignore[arg-type]
    assert info.value.kind == "options"


@pytest.mark.parametrize("text", ["these are my notes, not a database\n" * 100, "x", "SQLite"])
def test_a_file_that_is_not_a_database_is_refused_at_once_naming_it(tmp_path: Path, text: str) -> None:
    path = tmp_path / "notes.txt"
    path.write_text(text)
    with pytest.raises(AerixError) as info:
        SQLiteSession(path)
    assert info.value.kind == "options"
    assert str(path) in info.value.message and "not a database" in info.value.message
    assert path.read_text() == text  # nothing written over it


def test_a_folder_or_an_unopenable_path_is_refused(tmp_path: Path) -> None:
    with pytest.raises(AerixError, match="is a folder"):
        SQLiteSession(tmp_path)
    with pytest.raises(AerixError, match="cannot use") as info:
        SQLiteSession(tmp_path / "no" / "such" / "folder" / "chats.db")
    assert "no/such/folder" in info.value.message
    with pytest.raises(AerixError, match="path must be a str or a Path"):
        SQLiteSession(b"chats.db")  # type: ignore[arg-type]


def test_a_file_removed_under_the_session_is_an_error_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "chats.db"
    session = SQLiteSession(path)
    session.append([_msg("user", "Hi")])
    path.unlink()
    with pytest.raises(RuntimeError, match="was removed") as info:
        session.append([_msg("user", "lost?")])
    assert str(path) in str(info.value)
    assert not path.exists()  # not silently made again, empty
    with pytest.raises(RuntimeError, match="was removed"):
        session.load()


@pytest.mark.skipif(os.geteuid() == 0 if hasattr(os, "geteuid") else False, reason="root writes anywhere")
def test_a_read_only_file_keeps_what_it_has(tmp_path: Path) -> None:  # pragma: no cover - not as root
    path = tmp_path / "chats.db"
    session = SQLiteSession(path)
    session.append([_msg("user", "kept")])
    path.chmod(stat.S_IRUSR)
    with pytest.raises(RuntimeError, match="read-only"):
        session.append([_msg("user", "not kept")])
    assert session.load() == [_msg("user", "kept")]


def test_a_file_locked_by_another_writer_is_an_error_and_keeps_what_it_has(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "chats.db"
    session = SQLiteSession(path)
    session.append([_msg("user", "kept")])
    monkeypatch.setattr(sessions, "_BUSY_MS", 50)
    locker = sqlite3.connect(path, isolation_level=None)
    locker.execute("BEGIN EXCLUSIVE")
    try:
        with pytest.raises(RuntimeError, match="another connection held it") as info:
            session.append([_msg("user", "not kept")])
        assert str(path) in str(info.value)
    finally:
        locker.execute("ROLLBACK")
        locker.close()
    assert session.load() == [_msg("user", "kept")]


def _append_many(path: str, who: str, n: int) -> None:
    session = SQLiteSession(path, id="shared")
    for i in range(n):
        session.append([_msg("user", f"{who} {i}"), _msg("assistant", f"reply to {who} {i}")])


def test_processes_append_to_one_conversation_without_losing_or_splitting_a_turn(tmp_path: Path) -> None:
    path = str(tmp_path / "chats.db")
    SQLiteSession(path, id="shared")
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_append_many, args=(path, who, 20)) for who in ("a", "b", "c")]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    kept = SQLiteSession(path, id="shared").load()
    assert len(kept) == 120
    pairs = list(zip(kept[::2], kept[1::2], strict=True))
    assert all(a["content"] and b["content"] == f"reply to {a['content']}" for a, b in pairs)
    for who in "abc":
        mine = [a["content"] for a, _ in pairs if a["content"].startswith(who + " ")]
        assert mine == [f"{who} {i}" for i in range(20)]


def test_a_database_sqlite_opens_read_only_is_an_error_and_keeps_what_it_has(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # As root, chmod cannot make a file read-only: open it as SQLite does a read-only file.
    path = tmp_path / "chats.db"
    session = SQLiteSession(path)
    session.append([_msg("user", "kept")])

    def read_only(create: bool = False) -> sqlite3.Connection:
        return sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, isolation_level=None)

    monkeypatch.setattr(session, "_connect", read_only)
    with pytest.raises(RuntimeError, match="read-only; give the process write access") as info:
        session.append([_msg("user", "not kept")])
    assert str(path) in str(info.value)
    assert session.load() == [_msg("user", "kept")]
