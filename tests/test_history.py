"""History in and out (`Agent(messages=...)`, `reset(messages=...)`) and sessions on an agent."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from aerix import AerixError, Agent, ChatMessage, tool
from aerix.sessions import SQLiteSession
from aerix.testing import Fail, ScriptedModel


@tool
def add(a: int, b: int) -> int:
    """Add two numbers.

    Args:
        a: The first.
        b: The second.
    """
    return a + b


@tool(needs_approval=True)
def wipe(path: str) -> str:
    """Delete a file.

    Args:
        path: The file.
    """
    return f"deleted {path}"


def call(name: str, **given: Any) -> str:
    return json.dumps({"calls": [{"tool": name, "input": given}]})


def final(text: str) -> str:
    return json.dumps({"final": text})


SCRIPT = [call("add", a=1, b=2), final("3"), call("add", a=3, b=4), final("7")]


def test_messages_round_trip_through_json_and_continue_exactly() -> None:
    """A conversation restored from `json.dumps(agent.messages)` sends every later generation the
    same messages as the agent that made it, call ids included."""
    once = ScriptedModel(SCRIPT)
    first = Agent(once, tools=[add])
    first.ask_sync("1 + 2?")
    saved = json.dumps(list(first.messages))
    first.ask_sync("3 + 4?")

    again = ScriptedModel(SCRIPT[2:])
    restored = Agent(again, tools=[add], messages=json.loads(saved))
    answer = restored.ask_sync("3 + 4?")
    assert answer.text == "7"
    assert [c.messages for c in again.calls] == [c.messages for c in once.calls[2:]]
    assert restored.messages == first.messages
    ids = [ev.id for ev in answer.events if ev.type == "call"]
    assert ids == ["call_2"]  # follows call_1, named by the restored results


def test_reset_replaces_or_forgets_the_conversation() -> None:
    model = ScriptedModel([final("hi")])
    agent = Agent(model, messages=[{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}])
    agent.reset([{"role": "user", "content": "c"}, {"role": "assistant", "content": '{"final":"d"}'}])
    assert agent.messages == (
        {"role": "user", "content": "c"},
        {"role": "assistant", "content": '{"final":"d"}'},
    )
    agent.ask_sync("e")
    assert [m["content"] for m in model.calls[0].messages[1:]] == ["c", '{"final":"d"}', "e"]
    agent.reset()
    assert agent.messages == ()


BAD = [
    ("hello", "must be a list"),
    ({"role": "user", "content": "x"}, "must be a list"),
    ([{"role": "system", "content": "x"}], r"messages\[0\]: role must be 'user' or 'assistant'"),
    ([{"role": "user", "content": "x"}, "y"], r"messages\[1\] must be a dict"),
    ([{"role": "user"}], r"messages\[0\] lacks content"),
    ([{"role": "user", "content": "x", "name": "z"}], r"messages\[0\] has unknown key\(s\) \['name'\]"),
    ([{"role": "user", "content": 3}], r"messages\[0\]: content must be a string, got an int"),
    ([{"role": "user", "content": "\ud800"}], r"messages\[0\]: content holds a lone surrogate"),
]


@pytest.mark.parametrize(("bad", "said"), BAD)
def test_a_bad_message_list_is_an_options_error_naming_the_index(bad: object, said: str) -> None:
    with pytest.raises(AerixError, match=said) as info:
        Agent(ScriptedModel(), messages=bad)  # type: ignore[arg-type]
    assert info.value.kind == "options"
    agent = Agent(ScriptedModel(), messages=[{"role": "user", "content": "kept"}])
    with pytest.raises(AerixError, match=said):
        agent.reset(bad)  # type: ignore[arg-type]
    assert agent.messages == ({"role": "user", "content": "kept"},)  # nothing changed


def test_messages_session_and_state_are_exclusive(tmp_path: Path) -> None:
    session = SQLiteSession(tmp_path / "s.db")
    with pytest.raises(AerixError, match="not messages and session"):
        Agent(ScriptedModel(), messages=[], session=session)
    with pytest.raises(AerixError, match="not state and session"):
        Agent(ScriptedModel(), state={"messages": [], "pending": None}, session=session)
    with pytest.raises(AerixError, match="object lacks load, append, clear, load_pending, save_pending"):
        Agent(ScriptedModel(), session=object())  # type: ignore[arg-type]


def test_a_session_keeps_each_turn_and_a_new_agent_continues(tmp_path: Path) -> None:
    path = tmp_path / "chats.db"
    first = Agent(ScriptedModel(SCRIPT[:2]), tools=[add], session=SQLiteSession(path, id="x"))
    first.ask_sync("1 + 2?")
    assert SQLiteSession(path, id="x").load() == list(first.messages)
    model = ScriptedModel(SCRIPT[2:])
    second = Agent(model, tools=[add], session=SQLiteSession(path, id="x"))
    assert second.messages == first.messages  # taken when built: SQLiteSession's load is sync
    events = list(second.run_sync("3 + 4?"))
    assert [ev.id for ev in events if ev.type == "call"] == ["call_2"]
    assert len(SQLiteSession(path, id="x").load()) == 8
    assert SQLiteSession(path, id="other").load() == []
    second.reset([{"role": "user", "content": "fresh"}])
    assert SQLiteSession(path, id="x").load() == [{"role": "user", "content": "fresh"}]


def test_a_turn_is_in_the_session_before_its_last_event_is_handed_out(tmp_path: Path) -> None:
    session = SQLiteSession(tmp_path / "chats.db")
    agent = Agent(ScriptedModel([call("add", a=1, b=2), final("3")]), tools=[add], session=session)
    for ev in agent.run_sync("1 + 2?"):
        if ev.type == "result":  # the turn is complete: it is kept already
            assert [m["role"] for m in session.load()] == ["user", "assistant", "user"]
            break


def test_an_engine_failure_keeps_the_completed_turns_in_the_session(tmp_path: Path) -> None:
    session = SQLiteSession(tmp_path / "chats.db")
    model = ScriptedModel([call("add", a=1, b=2), Fail(error=RuntimeError("engine down"))])
    agent = Agent(model, tools=[add], session=session)
    events = list(agent.run_sync("1 + 2?"))
    assert events[-1].type == "end" and events[-1].reason == "error"
    assert len(session.load()) == 3


def test_a_session_file_removed_under_a_running_agent_ends_its_run_with_error(tmp_path: Path) -> None:
    path = tmp_path / "chats.db"
    session = SQLiteSession(path)
    agent = Agent(ScriptedModel([final("one"), final("two")]), session=session)
    agent.ask_sync("first")
    path.unlink()
    events = list(agent.run_sync("second"))
    end = events[-1]
    assert end.type == "end" and end.reason == "error"
    assert str(path) in end.message and "was removed" in end.message
    assert [ev.type for ev in events].count("end") == 1


class AsyncSession:
    """A session whose methods are coroutines (as a database client's would be)."""

    def __init__(self, messages: Sequence[ChatMessage] = ()) -> None:
        self.kept: list[ChatMessage] = list(messages)
        self.pending: Any = None
        self.log: list[str] = []

    async def load(self) -> list[ChatMessage]:
        self.log.append("load")
        return list(self.kept)

    async def append(self, messages: Sequence[ChatMessage]) -> None:
        self.log.append(f"append {len(messages)}")
        self.kept += messages

    async def clear(self) -> None:
        self.log.append("clear")
        self.kept, self.pending = [], None

    async def load_pending(self) -> Any:
        return self.pending

    async def save_pending(self, pending: Any) -> None:
        self.log.append("save_pending" if pending else "save_pending None")
        self.pending = pending


async def test_an_async_session_is_loaded_before_the_first_run_and_written_as_turns_complete() -> None:
    session = AsyncSession(
        [{"role": "user", "content": "old"}, {"role": "assistant", "content": '{"final":"x"}'}]
    )
    model = ScriptedModel(SCRIPT[:2])
    agent = Agent(model, tools=[add], session=session)
    assert agent.messages == ()  # not yet: its load is async
    answer = await agent.ask("1 + 2?")
    assert answer.text == "3"
    assert [m["content"] for m in model.calls[0].messages[1:3]] == ["old", '{"final":"x"}']
    assert session.log == ["load", "append 3", "append 1"]
    assert session.kept == list(agent.messages)
    agent.reset()
    assert session.kept  # an async clear waits for the next run
    model.add(final("new"))
    await agent.ask("again")
    assert session.log[-2:] == ["clear", "append 2"]
    assert len(session.kept) == 2


async def test_waiting_calls_are_kept_in_the_session_and_resumed_by_a_new_agent(tmp_path: Path) -> None:
    path = tmp_path / "chats.db"
    first = Agent(ScriptedModel([call("wipe", path="a.txt")]), tools=[wipe], session=SQLiteSession(path))
    events = [ev async for ev in first.run("tidy up")]
    assert events[-1].type == "end" and events[-1].reason == "paused"
    assert SQLiteSession(path).load_pending() is not None
    model = ScriptedModel([final("deleted")])
    second = Agent(model, tools=[wipe], session=SQLiteSession(path))
    assert [c.id for c in second.pending] == ["call_1"]
    resumed = [ev async for ev in second.resume({"call_1": True})]
    assert [ev.type for ev in resumed if ev.type in ("call", "result", "final")] == [
        "call",
        "result",
        "final",
    ]
    assert SQLiteSession(path).load_pending() is None
    assert [m["role"] for m in SQLiteSession(path).load()] == ["user", "assistant", "user", "assistant"]


_CHILD = textwrap.dedent(
    """
    import json, sys
    from aerix import Agent, tool
    from aerix.sessions import SQLiteSession
    from aerix.testing import ScriptedModel

    @tool
    def add(a: int, b: int) -> int:
        '''Add.

        Args:
            a: a
            b: b
        '''
        return a + b

    n = int(sys.argv[2])
    agent = Agent(ScriptedModel([json.dumps({"calls": [{"tool": "add", "input": {"a": n, "b": 1}}]}),
                                 json.dumps({"final": str(n + 1)})]),
                  tools=[add], session=SQLiteSession(sys.argv[1]))
    print(agent.ask_sync(f"{n} + 1?").text)
    """
)


def test_two_processes_continue_one_conversation(tmp_path: Path) -> None:
    path = str(tmp_path / "chats.db")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[1] / "src")}
    for n in (1, 2):
        out = subprocess.run(
            [sys.executable, "-c", _CHILD, path, str(n)], capture_output=True, text=True, env=env, timeout=120
        )
        assert out.returncode == 0, out.stderr
        assert out.stdout.strip() == str(n + 1)
    kept = SQLiteSession(path).load()
    assert [m["content"] for m in kept if m["role"] == "user" and not m["content"].startswith("Results")] == [
        "1 + 1?",
        "2 + 1?",
    ]
    assert "[call_2 add] 3" in kept[6]["content"]  # the second process's call id followed the first's


def test_a_turn_the_session_could_not_keep_is_kept_by_the_next_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A locked file ends the run with `error`; once it is free, the next run writes the turn it
    missed first, so the session never has a hole where the agent has a turn."""
    import sqlite3

    import aerix.sessions as sessions

    path = tmp_path / "chats.db"
    agent = Agent(
        ScriptedModel([call("add", a=1, b=2), final("again")]),
        tools=[add],
        session=SQLiteSession(path),
    )
    monkeypatch.setattr(sessions, "_BUSY_MS", 50)
    locker = sqlite3.connect(path, isolation_level=None)
    locker.execute("BEGIN EXCLUSIVE")
    try:
        events = list(agent.run_sync("1 + 2?"))
    finally:
        locker.execute("ROLLBACK")
        locker.close()
    assert events[-1].type == "end" and events[-1].reason == "error"
    assert "another connection held it" in events[-1].message
    assert SQLiteSession(path).load() == []
    assert len(agent.messages) == 3  # the completed turn stays the agent's
    assert agent.ask_sync("and again?").text == "again"
    assert SQLiteSession(path).load() == list(agent.messages)  # the missed turn first, in order


class SyncLoadAsyncPending(AsyncSession):
    """A session whose conversation loads synchronously and whose waiting calls load async."""

    def load(self) -> list[ChatMessage]:  # type: ignore[override]
        return list(self.kept)


async def test_a_sync_load_is_taken_when_built_and_an_async_load_pending_before_the_run() -> None:
    session = SyncLoadAsyncPending(
        [{"role": "user", "content": "old"}, {"role": "assistant", "content": '{"final":"x"}'}]
    )
    agent = Agent(ScriptedModel([final("new")]), session=session)
    assert [m["content"] for m in agent.messages] == ["old", '{"final":"x"}']
    assert (await agent.ask("next")).text == "new"
    assert len(session.kept) == 4


async def test_an_async_sessions_waiting_calls_are_taken_before_a_resume_or_a_run() -> None:
    session = AsyncSession()
    busy = Agent(ScriptedModel([final("never")]), tools=[wipe], session=session)  # loads at its first run
    first = Agent(ScriptedModel([call("wipe", path="a.txt")]), tools=[wipe], session=session)
    assert [ev async for ev in first.run("tidy up")][-1].reason == "paused"
    assert session.pending is not None

    with pytest.raises(AerixError) as info:
        [ev async for ev in busy.run("hello")]
    assert info.value.kind == "busy" and "call_1" in info.value.message

    model = ScriptedModel([final("deleted")])
    second = Agent(model, tools=[wipe], session=session)
    resumed = [ev async for ev in second.resume({"call_1": True})]
    assert [ev.type for ev in resumed if ev.type in ("call", "result", "final")] == [
        "call",
        "result",
        "final",
    ]
    assert session.pending is None
    assert [m["role"] for m in session.kept] == ["user", "assistant", "user", "assistant"]

    bad = Agent(ScriptedModel(), tools=[wipe], session=AsyncSession())
    with pytest.raises(AerixError, match="no call waits"):
        [ev async for ev in bad.resume({"call_1": True})]


def test_an_agent_cannot_resume_calls_another_agent_on_the_session_decided(tmp_path: Path) -> None:
    path = tmp_path / "chats.db"
    ran: list[str] = []

    @tool(needs_approval=True)
    def pay(amount: int) -> str:
        """Pay.

        Args:
            amount: How much.
        """
        ran.append(f"pay {amount}")
        return "paid"

    a = Agent(ScriptedModel([call("pay", amount=5), final("done")]), tools=[pay], session=SQLiteSession(path))
    assert list(a.run_sync("pay 5"))[-1].reason == "paused"
    b = Agent(ScriptedModel([final("done")]), tools=[pay], session=SQLiteSession(path))
    assert list(b.resume_sync({"call_1": True}))[-1].type == "final"
    with pytest.raises(AerixError, match="waiting calls changed") as info:
        a.resume_sync({"call_1": True})
    assert info.value.kind == "options" and "waiting now: none" in info.value.message
    assert a.pending == () and a.messages == b.messages  # taken again from the session
    assert ran == ["pay 5"]


def test_a_decided_call_whose_after_call_raised_is_not_run_again() -> None:
    ran: list[int] = []

    @tool(needs_approval=True)
    def pay(amount: int) -> str:
        """Pay.

        Args:
            amount: How much.
        """
        ran.append(amount)
        return "paid"

    def after(call: Any, result: str) -> None:
        raise RuntimeError("audit log down")

    agent = Agent(
        ScriptedModel([call("pay", amount=7), final("done")]), tools=[pay], hooks={"after_call": after}
    )
    assert list(agent.run_sync("pay 7"))[-1].reason == "paused"
    events = list(agent.resume_sync({"call_1": True}))
    assert (
        events[-1].type == "end" and events[-1].reason == "error" and "audit log down" in events[-1].message
    )
    assert agent.pending == ()  # it ran: it waits no more
    assert "it is not run again" in agent.messages[-1]["content"]
    assert ran == [7]


_KILLED = textwrap.dedent(
    """
    import json, sys, time
    from pathlib import Path
    from aerix import Agent, tool
    from aerix.sessions import SQLiteSession
    from aerix.testing import ScriptedModel

    @tool
    def step(n: int) -> str:
        '''A step.

        Args:
            n: which
        '''
        if n == 3:
            Path(sys.argv[2]).write_text("in step 3")
            time.sleep(600)  # killed here, mid-run
        return f"step {n} done"

    turns = [json.dumps({"calls": [{"tool": "step", "input": {"n": n}}]}) for n in (1, 2, 3)]
    agent = Agent(ScriptedModel(turns), tools=[step], session=SQLiteSession(sys.argv[1]))
    agent.ask_sync("do three steps")
    """
)


def test_a_process_killed_mid_run_keeps_every_completed_turn(tmp_path: Path) -> None:
    path, flag = tmp_path / "chats.db", tmp_path / "flag"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[1] / "src")}
    child = subprocess.Popen([sys.executable, "-c", _KILLED, str(path), str(flag)], env=env)
    try:
        for _ in range(1200):
            if flag.exists() or child.poll() is not None:
                break
            time.sleep(0.05)
        assert flag.exists(), "the child never reached its third step"
    finally:
        child.kill()
        child.wait(30)
    kept = SQLiteSession(path).load()
    # the prompt, then two completed turns with their results; the third turn never completed
    assert [m["role"] for m in kept] == ["user", "assistant", "user", "assistant", "user"]
    assert "step 2 done" in kept[-1]["content"]
    model = ScriptedModel([call("add", a=1, b=1), final("2")])
    agent = Agent(model, tools=[add], session=SQLiteSession(path))
    events = list(agent.run_sync("1 + 1?"))
    assert [ev.id for ev in events if ev.type == "call"] == ["call_3"]
    assert model.calls[0].messages[1:6] == kept


_PAUSED = textwrap.dedent(
    """
    import json
    from aerix import Agent, tool
    from aerix.testing import ScriptedModel

    @tool(needs_approval=True)
    def wipe(path: str) -> str:
        '''Delete a file.

        Args:
            path: The file.
        '''
        return f"deleted {path}"

    agent = Agent(ScriptedModel([json.dumps({"calls": [{"tool": "wipe", "input": {"path": "a.txt"}}]})]), tools=[wipe])
    events = list(agent.run_sync("tidy up"))
    assert events[-1].reason == "paused"
    print(json.dumps(agent.state()))
    """
)


def test_a_paused_run_is_resumed_in_another_process_from_its_state() -> None:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[1] / "src")}
    out = subprocess.run(
        [sys.executable, "-c", _PAUSED], capture_output=True, text=True, env=env, timeout=120
    )
    assert out.returncode == 0, out.stderr
    model = ScriptedModel([final("deleted a.txt")])
    agent = Agent(model, tools=[wipe], state=json.loads(out.stdout))
    assert [c.id for c in agent.pending] == ["call_1"]
    events = list(agent.resume_sync({"call_1": True}))
    assert [(ev.type, getattr(ev, "text", None)) for ev in events if ev.type in ("result", "final")] == [
        ("result", "deleted a.txt"),
        ("final", "deleted a.txt"),
    ]
    assert [m["role"] for m in agent.messages] == ["user", "assistant", "user", "assistant"]
