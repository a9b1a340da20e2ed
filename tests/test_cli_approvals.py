"""`aerix run --approve` and `aerix chat --approve`: asking on the terminal, a run that ends paused
without one, `--resume`, and the `--mcp` tools whose annotations say they are destructive."""

from __future__ import annotations

import dataclasses
import io
import json
import shlex
import sys
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pytest

from aerix import Call, cli, tool
from aerix._cli_approve import approving, destructive, flag_decisions, resume_hint
from aerix._cli_tools import Refused
from aerix.sessions import SQLiteSession
from aerix.testing import ScriptedModel

CALL = '{"calls":[{"tool":"calculator","input":{"expression":"2+2"}}]}'
FINAL = '{"final":"2 + 2 is 4."}'
LISTED = str(Path(__file__).parent / "mcp_servers" / "listed.py")


class Terminal(io.StringIO):
    """Stdin as a terminal, the lines a person types."""

    def isatty(self) -> bool:
        return True


def _events(out: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out.splitlines()]


# -- which calls ask ---------------------------------------------------------------------------


@tool
def look(path: str) -> str:
    """Read a file."""
    return path


def _hinted(t: Any, **hints: Any) -> Any:
    return dataclasses.replace(t, annotations=MappingProxyType(hints))


def test_which_tools_ask_first() -> None:
    wipe = _hinted(tool(name="wipe", input={}, run=lambda i: ""), destructiveHint=True)
    safe = _hinted(tool(name="safe", input={}, run=lambda i: ""), destructiveHint=True, readOnlyHint=True)
    own = tool(name="own", input={}, run=lambda i: "", needs_approval=True)
    tools = [look, wipe, safe, own]

    def asking(approve: list[str] | None) -> list[str]:
        return [t.name for t in approving(tools, approve) if t.needs_approval]

    assert [destructive(t) for t in tools] == [False, True, False, False]
    assert asking(None) == ["wipe", "own"]  # a destructive MCP tool asks by default
    assert asking(["look"]) == ["look", "wipe", "own"]
    assert asking(["none"]) == ["own"]  # a tool made with needs_approval always asks
    assert asking(["none", "look"]) == ["look", "own"]
    assert asking(["all"]) == ["look", "wipe", "safe", "own"]
    with pytest.raises(Refused) as caught:
        approving(tools, ["wipe", "shred", "Look"])
    assert caught.value.code == 2
    assert caught.value.message == (
        "--approve: no tool is named 'Look', 'shred'; give a tool's name, all (every call asks) or none "
        "(an --mcp server's destructive tools do not ask); the tools: look, own, safe, wipe"
    )


def test_yes_and_no_give_the_decisions() -> None:
    pending = [Call(id="call_1", tool="a", input={}), Call(id="call_2", tool="b", input={})]
    assert flag_decisions(["call_1"], ["call_2=too risky"], pending) == {
        "call_1": True,
        "call_2": {"deny": "too risky"},
    }
    assert flag_decisions([], ["all"], pending) == {"call_1": False, "call_2": False}
    assert flag_decisions(["all"], [], pending) == {"call_1": True, "call_2": True}
    with pytest.raises(
        Refused, match=r"^no call waits with the id 'call_3'; the waiting calls: call_1, call_2$"
    ):
        flag_decisions(["call_3"], [], pending)
    with pytest.raises(Refused, match=r"^call_1 is given two decisions \(--yes and --no\); give it one$"):
        flag_decisions(["call_1"], ["call_1"], pending)


def test_the_resume_hint_names_the_calls_and_the_command() -> None:
    pending = [Call(id="call_2", tool="wipe", input={"path": "a"})]
    assert resume_hint(pending, {"--session": "s.db", "--session-id": "bob"}) == (
        'the run is paused, its calls waiting for a decision: call_2 wipe {"path":"a"}; resume it with '
        "aerix run --session s.db --session-id bob --resume --yes call_2 (or --no ID to refuse one, "
        "--no ID=REASON to say why)"
    )
    assert resume_hint(pending, None).endswith(
        "with no terminal to ask on and no --session to keep them, they are dropped: run on a terminal, "
        "or with --session FILE to resume them later"
    )


# -- the command -------------------------------------------------------------------------------


def test_without_a_terminal_a_call_that_asks_ends_the_run_paused_with_status_3(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    model = ScriptedModel([CALL, FINAL])
    assert cli.main(["run", "What is 2+2?", "--approve", "calculator"], model=model) == 3
    out, err = capsys.readouterr()
    assert out.splitlines()[:3] == [
        "turn 1",
        "✗ end (paused): waiting for a decision: call_1 calculator (needs approval)",
        '  ? call_1 calculator {"expression":"2+2"}',
    ]
    assert err.startswith(
        'aerix: the run is paused, its calls waiting for a decision: call_1 calculator {"expression":"2+2"}; '
        "with no terminal to ask on"
    )
    assert len(model.calls) == 1


def test_json_shows_the_waiting_calls_in_the_end_event(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    assert cli.main(["run", "2+2?", "--approve", "all", "--json"], model=ScriptedModel([CALL, FINAL])) == 3
    out, err = capsys.readouterr()
    assert _events(out)[-1] == {
        "type": "end",
        "reason": "paused",
        "message": "waiting for a decision: call_1 calculator (needs approval)",
        "pending": [{"id": "call_1", "tool": "calculator", "input": {"expression": "2+2"}}],
    }
    assert err.startswith("aerix: the run is paused")


@pytest.mark.parametrize(
    ("typed", "result"), [("y\n", "  ← 4"), ("yes\n", "  ← 4"), ("n\n", "  ← refused: denied")]
)
def test_on_a_terminal_the_command_asks_and_the_run_goes_on(
    typed: str, result: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("sys.stdin", Terminal(typed))
    model = ScriptedModel([CALL, FINAL])
    assert cli.main(["run", "What is 2+2?", "--approve", "calculator"], model=model) == 0
    out, err = capsys.readouterr()
    assert 'call_1 calculator {"expression":"2+2"}: run it? [y/N] ' in err
    lines = out.splitlines()
    assert '  → calculator {"expression":"2+2"}' in lines and result in lines
    assert "✓ final: 2 + 2 is 4." in lines
    assert model.calls[1].messages[-1]["content"].startswith("Results:\n[call_1 calculator] ")


def test_an_answer_at_the_end_of_input_refuses(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("sys.stdin", Terminal(""))
    assert cli.main(["run", "2+2?", "--approve", "calculator"], model=ScriptedModel([CALL, FINAL])) == 0
    assert "  ← refused: denied" in capsys.readouterr().out.splitlines()


def test_chat_without_a_terminal_stops_at_a_paused_run(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO("2+2?\nnever sent\n"))
    model = ScriptedModel([CALL, FINAL])
    assert cli.main(["chat", "--approve", "calculator"], model=model) == 3
    assert "aerix: the run is paused" in capsys.readouterr().err
    assert len(model.calls) == 1


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["run", "hi", "--approve", "shred"], "aerix: error: --approve: no tool is named 'shred'"),
        (
            ["run"],
            "aerix: error: the following arguments are required: prompt (or --resume, with --session FILE)",
        ),
        (["run", "--resume"], "aerix: error: --resume needs --session FILE"),
        (["run", "hi", "--yes", "call_1"], "aerix: error: --yes and --no decide the calls of a paused run"),
    ],
)
def test_bad_approval_flags_are_refused(
    argv: list[str], said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    model = ScriptedModel([FINAL])
    assert cli.main(argv, model=model) == 2
    assert capsys.readouterr().err.startswith(said)
    assert not model.calls


def test_an_mcp_tool_annotated_destructive_asks_unless_approve_none(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("mcp", reason="aerix.mcp needs the mcp extra")
    listed = json.dumps(
        [{"name": "wipe", "inputSchema": {"type": "object"}, "annotations": {"destructiveHint": True}}]
    )
    server = shlex.join([sys.executable, LISTED, listed])
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    call = '{"calls":[{"tool":"wipe","input":{}}]}'
    assert cli.main(["run", "wipe it", "--mcp", server], model=ScriptedModel([call, FINAL])) == 3
    assert "call_1 wipe (needs approval)" in capsys.readouterr().out
    model = ScriptedModel([call, FINAL])
    assert cli.main(["run", "wipe it", "--mcp", server, "--approve", "none"], model=model) == 0
    assert "  ← ok {}" in capsys.readouterr().out.splitlines()


# -- resuming with --session ---------------------------------------------------------------------


def _paused_in(path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["run", "What is 2+2?", "--approve", "calculator", "--session", str(path)]
    assert cli.main(argv, model=ScriptedModel([CALL, FINAL])) == 3
    err = capsys.readouterr().err
    assert err.endswith(
        f"resume it with aerix run --session {path} --resume --yes call_1 (or --no ID to refuse one, "
        "--no ID=REASON to say why)\n"
    )


def test_a_later_command_resumes_the_run_paused_in_a_session(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    path = tmp_path / "chats.db"
    _paused_in(path, capsys)
    model = ScriptedModel([FINAL])
    argv = ["run", "--session", str(path), "--resume", "--yes", "call_1", "--approve", "calculator"]
    assert cli.main(argv, model=model) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[:3] == ['  → calculator {"expression":"2+2"}', "  ← 4", "✓ final: 2 + 2 is 4."]
    assert model.calls[0].messages[-1]["content"] == "Results:\n[call_1 calculator] 4"
    assert SQLiteSession(path).load_pending() is None
    argv = ["run", "--session", str(path), "--resume", "--yes", "call_1"]
    assert cli.main(argv, model=ScriptedModel([FINAL])) == 2
    assert capsys.readouterr().err == (
        f"aerix: error: no call waits for a decision in --session {path}: nothing to resume; run a prompt\n"
    )


def test_no_refuses_a_waiting_call_with_its_reason(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    path = tmp_path / "chats.db"
    _paused_in(path, capsys)
    model = ScriptedModel([FINAL])
    assert cli.main(["run", "--session", str(path), "--resume", "--no", "call_1=not now"], model=model) == 0
    assert "  ← refused: not now" in capsys.readouterr().out.splitlines()


def test_resume_without_a_decision_asks_on_a_terminal_and_without_one_names_the_calls(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    path = tmp_path / "chats.db"
    _paused_in(path, capsys)
    assert cli.main(["run", "--session", str(path), "--resume"], model=ScriptedModel([FINAL])) == 2
    assert capsys.readouterr().err == (
        "aerix: error: no decision for call_1, and no terminal to ask on: give each --yes ID or --no ID "
        '(the waiting calls: call_1 calculator {"expression":"2+2"})\n'
    )
    for argv, said in (
        (
            ["run", "--session", str(path), "--resume", "--yes", "call_9"],
            "no call waits with the id 'call_9'",
        ),
        (["run", "hi", "--session", str(path), "--resume"], "--resume takes no prompt"),
    ):
        assert cli.main(argv, model=ScriptedModel([FINAL])) == 2
        assert said in capsys.readouterr().err
    monkeypatch.setattr("sys.stdin", Terminal("y\n"))
    assert cli.main(["run", "--session", str(path), "--resume"], model=ScriptedModel([FINAL])) == 0
    out, err = capsys.readouterr()
    assert 'call_1 calculator {"expression":"2+2"}: run it? [y/N] ' in err
    assert "✓ final: 2 + 2 is 4." in out.splitlines()
