"""`aerix run --session FILE` and `aerix chat --session FILE`: a conversation kept across processes."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from aerix import cli
from aerix.sessions import SQLiteSession
from aerix.testing import ScriptedModel


def _calc(expression: str) -> str:
    return json.dumps({"calls": [{"tool": "calculator", "input": {"expression": expression}}]})


def _final(text: str) -> str:
    return json.dumps({"final": text})


def test_run_keeps_the_conversation_and_a_second_run_continues_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = str(tmp_path / "chats.db")
    assert (
        cli.main(["run", "--session", path, "2 + 2?"], model=ScriptedModel([_calc("2+2"), _final("4")])) == 0
    )
    second = ScriptedModel([_calc("4*3"), _final("12")])
    assert cli.main(["run", "--session", path, "times 3?"], model=second) == 0
    sent = [m["content"] for m in second.calls[0].messages[1:]]
    assert sent[0] == "2 + 2?" and sent[-1] == "times 3?" and len(sent) == 5
    kept = SQLiteSession(path).load()
    assert len(kept) == 8
    assert kept[6]["content"].startswith("Results:\n[call_2 calculator]")
    assert SQLiteSession(path, id="other").load() == []
    capsys.readouterr()


def test_session_id_picks_a_conversation_of_the_file(tmp_path: Path) -> None:
    path = str(tmp_path / "chats.db")
    assert (
        cli.main(
            ["run", "--session", path, "--session-id", "bob", "hi"], model=ScriptedModel([_final("hello")])
        )
        == 0
    )
    assert [m["content"] for m in SQLiteSession(path, id="bob").load()] == ["hi", _final("hello")]
    assert SQLiteSession(path).load() == []


def test_chat_continues_the_session_and_reset_clears_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    path = str(tmp_path / "chats.db")
    SQLiteSession(path).append(
        [{"role": "user", "content": "earlier"}, {"role": "assistant", "content": '{"final":"ok"}'}]
    )
    model = ScriptedModel([_final("again")])
    monkeypatch.setattr("sys.stdin", io.StringIO("now\n/reset\n"))
    assert cli.main(["chat", "--session", path], model=model) == 0
    assert [m["content"] for m in model.calls[0].messages[1:]] == ["earlier", '{"final":"ok"}', "now"]
    assert SQLiteSession(path).load() == []  # /reset cleared the kept conversation too
    capsys.readouterr()


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["--session-id", "x"], "--session-id needs --session FILE"),
        (["--session", "{dir}/notes.txt"], "is not a database"),
        (["--session", "{dir}"], "is a folder"),
    ],
)
def test_a_bad_session_exits_2_naming_it_before_the_model_loads(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], said: str
) -> None:
    (tmp_path / "notes.txt").write_text("my notes")
    args = [a.format(dir=tmp_path) for a in argv]
    model = ScriptedModel([_final("never")])
    assert cli.main(["run", *args, "hi"], model=model) == 2
    assert said in capsys.readouterr().err
    assert model.calls == []
    assert (tmp_path / "notes.txt").read_text() == "my notes"


@pytest.mark.slow
def test_two_aerix_run_processes_continue_one_conversation_on_the_embedded_model(tmp_path: Path) -> None:
    pytest.importorskip("llama_cpp")
    path = str(tmp_path / "chats.db")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[1] / "src")}
    for prompt in ("What is 17 * 23?", "What is 12 * 12?"):
        done = subprocess.run(
            [sys.executable, "-m", "aerix", "run", "--session", path, "--json", prompt],
            capture_output=True,
            text=True,
            env=env,
            timeout=300,
        )
        assert done.returncode == 0, done.stderr
    kept = SQLiteSession(path).load()
    users = [m["content"] for m in kept if m["role"] == "user" and not m["content"].startswith("Results:")]
    assert users == ["What is 17 * 23?", "What is 12 * 12?"]
    results = [m["content"] for m in kept if m["content"].startswith("Results:")]
    assert "[call_1 " in results[0] and "[call_2 " in results[-1]
