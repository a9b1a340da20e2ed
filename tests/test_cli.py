"""The `aerix` command, run in-process: `main([...], model=ScriptedModel(...))` with captured output."""

from __future__ import annotations

import asyncio
import http.server
import io
import json
import re
import runpy
import signal
import sys
import threading
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest

import aerix
from aerix import cli
from aerix._console import HumanPrinter, Symbols, use_color
from aerix.testing import NoDone, ScriptedModel, Stall

CALL = '{"thought":"add them","calls":[{"tool":"calculator","input":{"expression":"2+2"}}]}'
FINAL = '{"final":"2 + 2 is 4."}'
CALL_JSON = '{"expression":"2+2"}'


def test_run_shows_turns_calls_results_the_final_and_the_usage(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["run", "What is 2+2?"], model=ScriptedModel([CALL, FINAL])) == 0
    human = capsys.readouterr()
    assert cli.main(["run", "What is 2+2?", "--json"], model=ScriptedModel([CALL, FINAL])) == 0
    usage = [e for e in _events(capsys.readouterr().out) if e["type"] == "usage"]

    lines = human.out.splitlines()
    assert lines[:4] == [
        "turn 1 · thought: add them",
        f"  → calculator {CALL_JSON}",
        "  ← 4",
        "✓ final: 2 + 2 is 4.",
    ]
    prompt = sum(u["prompt_tokens"] for u in usage)
    cached = sum(u["cached_tokens"] for u in usage)
    completion = sum(u["completion_tokens"] for u in usage)
    assert cached > 0  # the second turn reuses the first one's prompt
    assert re.fullmatch(
        rf"usage: 2 generations, {prompt} prompt \({cached} cached\) \+ {completion} completion tokens · "
        r"\d+\.\d s",
        lines[4],
    )
    assert len(lines) == 5
    assert "\x1b[" not in human.out  # not a terminal: no colour
    assert human.err == ""


def test_a_final_with_a_thought_shows_it_and_one_generation_has_no_count(
    capsys: pytest.CaptureFixture[str],
) -> None:
    model = ScriptedModel(['{"thought":"easy","final":"hello"}'])
    assert cli.main(["run", "hi"], model=model) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[:2] == ["turn 1 · thought: easy", "✓ final: hello"]
    assert lines[2].startswith("usage: ") and "generations" not in lines[2]


def test_json_prints_only_events_ending_with_exactly_one_final(capsys: pytest.CaptureFixture[str]) -> None:
    model = ScriptedModel([CALL, FINAL], chunk_size=5)
    assert cli.main(["run", "What is 2+2?", "--json"], model=model) == 0
    out, err = capsys.readouterr()
    events = _events(out)
    types = [e["type"] for e in events]
    assert types.count("final") + types.count("end") == 1
    assert events[-1] == {"type": "final", "text": "2 + 2 is 4.", "thought": None}
    assert "".join(e["text"] for e in events if e["type"] == "text") == CALL + FINAL
    assert [e for e in events if e["type"] in ("call", "result")] == [
        {"type": "call", "id": "call_1", "tool": "calculator", "input": {"expression": "2+2"}},
        {"type": "result", "id": "call_1", "tool": "calculator", "text": "4", "error": False},
    ]
    assert err == ""


def test_a_run_without_a_final_exits_1_and_says_why(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["run", "loop", "--max-turns", "1"], model=ScriptedModel([CALL])) == 1
    out = capsys.readouterr().out
    assert "✗ end (turns): no final after 1 generation (limits.turns)" in out

    assert cli.main(["run", "broken", "--json"], model=ScriptedModel([NoDone(text="{")])) == 1
    out, err = capsys.readouterr()
    events = _events(out)
    assert events[-1]["type"] == "end" and events[-1]["reason"] == "error"
    assert [e["type"] for e in events].count("end") == 1
    assert err.startswith("aerix: the run ended without a final (error): ")


def test_options_reach_the_agent_and_the_model(capsys: pytest.CaptureFixture[str]) -> None:
    model = ScriptedModel(['{"final":"ok"}'])
    argv = ["run", "hi", "--max-tokens", "77", "--temperature", "0.5", "--top-k", "3", "--seed", "9"]
    argv += ["--instructions", "Be terse.", "--tools", "clock", "--no-constrain"]
    assert cli.main(argv, model=model) == 0
    (call,) = model.calls
    assert call.opts["max_tokens"] == 77
    assert (call.opts["temperature"], call.opts["top_k"], call.opts["seed"]) == (0.5, 3, 9)
    assert "constraint" not in call.opts
    system = call.messages[0]["content"]
    assert system.startswith("Be terse.")
    assert "clock" in system and "calculator" not in system and "convert" not in system
    assert call.messages[-1] == {"role": "user", "content": "hi"}


def test_tool_choice_and_the_default_tools(capsys: pytest.CaptureFixture[str]) -> None:
    model = ScriptedModel([CALL, FINAL])
    assert cli.main(["run", "hi", "--tool-choice", "calculator"], model=model) == 0
    first, second = (json.dumps(c.opts["constraint"]) for c in model.calls)
    assert "final" not in first  # the first turn must call the calculator
    assert "final" in second
    system = model.calls[0].messages[0]["content"]
    assert system.startswith(cli.DEFAULT_INSTRUCTIONS)
    assert all(name in system for name in ("calculator", "clock", "convert"))


def test_run_reads_the_prompt_from_stdin_with_a_dash(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO("What is 6*7?\n"))
    model = ScriptedModel(['{"final":"42"}'])
    assert cli.main(["run", "-"], model=model) == 0
    assert model.calls[0].messages[-1] == {"role": "user", "content": "What is 6*7?"}


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--max-turns", "0"], "aerix: error: --max-turns: limits.turns must be at least 1, got 0"),
        (["--retries", "-1"], "aerix: error: --retries: limits.retries must be at least 0, got -1"),
        (["--max-tokens", "0"], "aerix: error: --max-tokens: limits.max_tokens must be at least 1"),
        (
            ["--max-tokens", "3000000000"],
            "aerix: error: --max-tokens: limits.max_tokens must be at most 2147483647, got 3000000000",
        ),
        (["--temperature", "-1"], "aerix: error: --temperature: generation.temperature must be"),
        (["--temperature", "nan"], "aerix: error: --temperature: generation.temperature must be"),
        (["--tool-choice", "nope"], "aerix: error: --tool-choice: bad tool_choice 'nope'"),
        (["--tools", "none", "--tool-choice", "required"], "aerix: error: --tool-choice: "),
        (["--tools", "calculator,web"], "aerix: error: --tools: unknown tool 'web'; the demo tools are"),
        (["--api-key", "k"], "aerix: error: --api-key only applies with --server URL"),
        (["--read-timeout", "5"], "aerix: error: --read-timeout only applies with --server URL"),
    ],
)
def test_bad_option_values_exit_2_naming_the_option(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    model = ScriptedModel()
    assert cli.main(["run", "hi", *argv], model=model) == 2
    out, err = capsys.readouterr()
    assert err.startswith(message)
    assert "Traceback" not in err
    assert out == ""
    assert model.calls == []


def test_an_empty_prompt_is_bad_usage(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO("\n"))
    assert cli.main(["run", "-"]) == 2  # refused before any model is loaded
    assert capsys.readouterr().err == "aerix: error: the prompt is empty\n"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["run"], "the following arguments are required: prompt"),
        (["run", "hi", "--max-turns", "many"], "argument --max-turns: invalid int value: 'many'"),
        (["fly"], "invalid choice: 'fly'"),
        ([], "the following arguments are required: COMMAND"),
    ],
)
def test_bad_usage_exits_2_with_argparse_message(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(argv, model=ScriptedModel()) == 2
    assert message in capsys.readouterr().err


def test_help_and_version_exit_0(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["run", "--help"]) == 0
    help_text = capsys.readouterr().out
    flags = ("--model", "--server", "--api-key", "--max-turns", "--tool-choice", "--tools", "--json")
    flags += ("--calls-per-turn", "--concurrent-calls", "--repeats")
    for flag in flags:
        assert flag in help_text
    assert cli.main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"aerix {aerix.__version__}"


def test_python_dash_m_aerix_runs_the_command(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("sys.argv", ["aerix", "--version"])
    with pytest.raises(SystemExit) as exit_info:
        runpy.run_module("aerix", run_name="__main__")
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.strip() == f"aerix {aerix.__version__}"


# -- chat ------------------------------------------------------------------------


def test_chat_keeps_the_conversation_and_reset_forgets_it(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO("first\n\nsecond\n/reset\nthird\n"))
    model = ScriptedModel(['{"final":"one"}', '{"final":"two"}', '{"final":"three"}'])
    assert cli.main(["chat"], model=model) == 0  # EOF ends the chat
    out = capsys.readouterr().out
    assert [line for line in out.splitlines() if not line.startswith("usage:")] == [
        "✓ final: one",
        "✓ final: two",
        "(conversation forgotten)",
        "✓ final: three",
    ]
    users = [[m["content"] for m in c.messages if m["role"] == "user"] for c in model.calls]
    assert users == [["first"], ["first", "second"], ["third"]]


def test_chat_exit_stops_reading_and_json_prints_only_events(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO("hello\n/reset\n/what\n/exit\nnever sent\n"))
    model = ScriptedModel(['{"final":"hi"}'])
    assert cli.main(["chat", "--json"], model=model) == 0
    out, err = capsys.readouterr()
    assert [e["type"] for e in _events(out)] == ["text", "usage", "final"]
    assert len(model.calls) == 1
    assert err == ""


def test_chat_goes_on_after_a_run_without_a_final(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO("loop\nagain\n"))
    model = ScriptedModel([CALL, '{"final":"done"}'])
    assert cli.main(["chat", "--max-turns", "1"], model=model) == 0
    out = capsys.readouterr().out
    assert "✗ end (turns)" in out and "✓ final: done" in out


# -- several calls a turn, repeated calls ------------------------------------------------

TWO_CALLS = (
    '{"calls":[{"tool":"calculator","input":{"expression":"2+2"}},'
    '{"tool":"calculator","input":{"expression":"3*3"}}]}'
)


def _max_calls(call: Any) -> int:
    """The `maxItems` of the calls shape in a generation's turn schema."""
    shapes = call.opts["constraint"]["json"]["anyOf"]
    (calls,) = [s["properties"]["calls"] for s in shapes if "calls" in s["properties"]]
    return int(calls["maxItems"])


@pytest.mark.parametrize(
    ("argv", "most"), [([], 1), (["--calls-per-turn", "2"], 2), (["--calls-per-turn", "8"], 8)]
)
def test_calls_per_turn_sets_the_turn_schemas_most_calls(
    argv: list[str], most: int, capsys: pytest.CaptureFixture[str]
) -> None:
    model = ScriptedModel([FINAL])
    assert cli.main(["run", "hi", *argv], model=model) == 0
    assert _max_calls(model.calls[0]) == most


@pytest.mark.parametrize(
    ("argv", "order"),
    [
        (["--calls-per-turn", "2"], ["call", "result", "call", "result"]),
        (["--calls-per-turn", "2", "--concurrent-calls"], ["call", "call", "result", "result"]),
    ],
)
def test_two_calls_a_turn_run_one_after_the_other_or_at_once(
    argv: list[str], order: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    model = ScriptedModel([TWO_CALLS, FINAL])
    assert cli.main(["run", "hi", "--json", *argv], model=model) == 0
    events = [e for e in _events(capsys.readouterr().out) if e["type"] in ("call", "result")]
    assert [e["type"] for e in events] == order
    assert [e["text"] for e in events if e["type"] == "result"] == ["4", "9"]


def test_repeats_bounds_an_identical_call_then_the_model_may_only_answer(
    capsys: pytest.CaptureFixture[str],
) -> None:
    model = ScriptedModel([CALL, CALL, FINAL])
    assert cli.main(["run", "hi", "--json", "--repeats", "0"], model=model) == 0
    results = [e for e in _events(capsys.readouterr().out) if e["type"] == "result"]
    assert [(r["text"], r["error"]) for r in results[:1]] == [("4", False)]
    assert results[1]["error"] and "the result of call_1; this call repeats it" in results[1]["text"]
    assert "calls" not in json.dumps(model.calls[2].opts["constraint"])  # the final shape alone

    model = ScriptedModel([CALL, CALL, FINAL])  # the default, 1: the call may run once again
    assert cli.main(["run", "hi", "--json"], model=model) == 0
    results = [e for e in _events(capsys.readouterr().out) if e["type"] == "result"]
    assert [(r["text"], r["error"]) for r in results] == [("4", False), ("4", False)]


def test_the_loop_flags_reach_the_chats_agent(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO("one\ntwo\n"))
    model = ScriptedModel([TWO_CALLS, FINAL, CALL, CALL, FINAL])
    argv = ["chat", "--json", "--calls-per-turn", "3", "--concurrent-calls", "--repeats", "0"]
    assert cli.main(argv, model=model) == 0
    events = _events(capsys.readouterr().out)
    assert _max_calls(model.calls[0]) == 3
    kinds = [e["type"] for e in events if e["type"] in ("call", "result")]
    assert kinds[:4] == ["call", "call", "result", "result"]
    # the second run's first 2+2 runs (repeats are counted within a run), its second does not
    assert [e["error"] for e in events if e["type"] == "result"] == [False, False, False, True]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--calls-per-turn", "9"], "aerix: error: --calls-per-turn must be 1 to 8, got 9\n"),
        (["--calls-per-turn", "0"], "aerix: error: --calls-per-turn must be 1 to 8, got 0\n"),
        (["--calls-per-turn", "-1"], "aerix: error: --calls-per-turn must be 1 to 8, got -1\n"),
        (["--repeats", "-1"], "aerix: error: --repeats must be 0 or more, got -1\n"),
        (
            ["--concurrent-calls"],
            "aerix: error: --concurrent-calls needs --calls-per-turn N with N of 2 or more: "
            "one call a turn has nothing to run beside it\n",
        ),
        (["--concurrent-calls", "--calls-per-turn", "1"], "aerix: error: --concurrent-calls needs"),
    ],
)
@pytest.mark.parametrize("command", [["run", "hi"], ["chat"]])
def test_bad_loop_flags_are_refused_before_the_model_loads(
    command: list[str],
    argv: list[str],
    message: str,
    loads: list[Any],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO("hi\n"))
    assert cli.main([*command, *argv]) == 2
    out, err = capsys.readouterr()
    assert err.startswith(message)
    assert out == "" and "Traceback" not in err
    assert loads == []  # no model was loaded for a command that cannot run


@pytest.mark.parametrize(("flag", "value"), [("--calls-per-turn", "two"), ("--repeats", "1.5")])
def test_loop_flags_that_are_no_integers_are_refused_by_argparse(
    flag: str, value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["run", "hi", flag, value], model=ScriptedModel()) == 2
    assert f"argument {flag}: invalid int value: {value!r}" in capsys.readouterr().err


# -- Ctrl-C ------------------------------------------------------------------------


def _ctrl_c(times: int) -> Any:
    """A script step that stalls, with Ctrl-C pressed `times` while the model generates."""

    def press(messages: object) -> Stall:
        loop = asyncio.get_running_loop()
        for _ in range(times):
            loop.call_soon(signal.raise_signal, signal.SIGINT)
        return Stall(text='{"final":"')

    return press


def test_ctrl_c_aborts_the_run_cleanly(capsys: pytest.CaptureFixture[str]) -> None:
    before = signal.getsignal(signal.SIGINT)
    assert cli.main(["run", "wait", "--json"], model=ScriptedModel([_ctrl_c(1)])) == 1
    out, err = capsys.readouterr()
    assert _events(out)[-1] == {"type": "end", "reason": "abort", "message": "interrupted (Ctrl-C)"}
    assert "Traceback" not in err
    assert signal.getsignal(signal.SIGINT) is before

    assert cli.main(["run", "wait"], model=ScriptedModel([_ctrl_c(1)])) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "✗ end (abort): interrupted (Ctrl-C)"
    assert re.fullmatch(r"usage: no generation finished · \d+\.\d s", lines[1])


def test_a_ctrl_c_whose_interrupt_was_swallowed_while_the_model_loaded_still_quits(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """llama.cpp loads a model in C: the handler's `KeyboardInterrupt` is raised in a ctypes log
    callback, which swallows it. The command quits once the load returns, before any run."""
    model = ScriptedModel(['{"final":"should not run"}'])

    def load(args: Any, spinner: Any) -> ScriptedModel:
        try:
            signal.raise_signal(signal.SIGINT)
        except KeyboardInterrupt:
            pass  # as the ctypes callback does
        return model

    monkeypatch.setattr(cli, "_open_model", load)
    assert cli.main(["run", "hi", "--tools", "none"]) == 130
    assert capsys.readouterr().err.strip() == "aerix: interrupted"
    assert model.calls == []


def test_the_interrupt_swallowed_in_a_ctypes_callback_is_not_printed(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Python hands an exception raised in a ctypes callback to `sys.unraisablehook`, which prints
    it with a traceback: the command's own Ctrl-C is not printed; anything else still is."""
    seen: list[Any] = []
    monkeypatch.setattr(sys, "unraisablehook", seen.append)

    def unraisable(exc: BaseException) -> Any:
        return types.SimpleNamespace(
            exc_type=type(exc), exc_value=exc, exc_traceback=exc.__traceback__, err_msg=None, object=None
        )

    def load(args: Any, spinner: Any) -> ScriptedModel:
        sys.unraisablehook(unraisable(ValueError("a callback's own failure")))
        try:
            signal.raise_signal(signal.SIGINT)
        except KeyboardInterrupt as exc:  # as ctypes does with it
            sys.unraisablehook(unraisable(exc))
        return ScriptedModel(['{"final":"should not run"}'])

    monkeypatch.setattr(cli, "_open_model", load)
    assert cli.main(["run", "hi", "--tools", "none"]) == 130
    assert capsys.readouterr().err.strip() == "aerix: interrupted"
    assert [type(u.exc_value) for u in seen] == [ValueError]
    assert sys.unraisablehook == seen.append  # put back


def test_a_prompt_or_instructions_that_utf8_cannot_encode_are_refused_in_one_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    bad = "hi \udcff"  # how Python reads a byte 0xff of argv under a UTF-8 locale
    assert cli.main(["run", bad], model=ScriptedModel()) == 2
    err = capsys.readouterr().err
    assert (
        err.startswith("aerix: error: the prompt[3] is '\\udcff', a lone surrogate")
        and "Traceback" not in err
    )
    assert cli.main(["run", "hi", "--instructions", bad], model=ScriptedModel()) == 2
    assert capsys.readouterr().err.startswith("aerix: error: instructions[3] is '\\udcff'")


def test_a_chat_line_that_utf8_cannot_encode_is_refused_and_the_chat_goes_on(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO("hi \udcff\nhello\n"))
    model = ScriptedModel(['{"final":"hello back"}'])
    assert cli.main(["chat", "--tools", "none"], model=model) == 0
    out = capsys.readouterr().out
    assert "(not sent: the line[3] is '\\udcff', a lone surrogate" in out
    assert "hello back" in out and len(model.calls) == 1


@pytest.mark.parametrize(
    ("value", "message"),
    [("@", "@ needs a file name: @schema.json"), ("@{bad}", "is not UTF-8 text")],
)
def test_output_from_a_file_that_cannot_be_read_is_named(
    value: str, message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "schema.json"
    bad.write_bytes(b"\xff\xfe{}")
    assert cli.main(["run", "hi", "--output", value.replace("{bad}", str(bad))], model=ScriptedModel()) == 2
    err = capsys.readouterr().err
    assert "argument --output: " in err and message in err and "invalid _output value" not in err


def test_a_second_ctrl_c_exits(capsys: pytest.CaptureFixture[str]) -> None:
    before = signal.getsignal(signal.SIGINT)
    assert cli.main(["run", "wait"], model=ScriptedModel([_ctrl_c(2)])) == 130
    assert capsys.readouterr().err.strip() == "aerix: interrupted"
    assert signal.getsignal(signal.SIGINT) is before


def test_ctrl_c_in_chat_aborts_the_run_and_the_chat_goes_on(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO("wait\nnext\n"))
    model = ScriptedModel([_ctrl_c(1), '{"final":"back"}'])
    assert cli.main(["chat"], model=model) == 0
    out = capsys.readouterr().out
    assert "✗ end (abort): interrupted (Ctrl-C)" in out and "✓ final: back" in out


# -- --server ------------------------------------------------------------------------


class _FakeOpenAI(http.server.BaseHTTPRequestHandler):
    """Answers every chat completion with one streamed turn; records the requests."""

    requests: ClassVar[list[dict[str, Any]]] = []
    turn = '{"final":"from the server"}'
    refuse: ClassVar[tuple[str, ...]] = ()
    """`response_format` types answered with llama-cpp-python's server's HTTP 500."""

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        self.requests.append({"path": self.path, "auth": self.headers.get("authorization"), "body": body})
        if body.get("response_format", {}).get("type") in self.refuse:
            self._send(500, {"error": {"message": REFUSAL}})
            return
        if not self.path.startswith("/v1/"):
            self._send(404, {"detail": "Not Found"})
            return
        chunks = [{"choices": [{"index": 0, "delta": {"content": self.turn}, "finish_reason": None}]}]
        chunks.append({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
        usage = {"prompt_tokens": 50, "completion_tokens": 7, "prompt_tokens_details": {"cached_tokens": 32}}
        chunks.append({"choices": [], "usage": usage})
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.end_headers()
        for data in [*map(json.dumps, chunks), "[DONE]"]:
            self.wfile.write(f"data: {data}\n\n".encode())

    def _send(self, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass


REFUSAL = (
    "1 validation error:\n  {'type': 'literal_error', 'loc': ('body', 'response_format', 'type'), "
    "'msg': \"Input should be 'text' or 'json_object'\", 'input': 'json_schema'}"
)
"""How llama-cpp-python's server refuses a `json_schema` response format (HTTP 500)."""


@pytest.fixture
def server() -> Iterator[str]:
    _FakeOpenAI.requests = []
    _FakeOpenAI.refuse = ()
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _FakeOpenAI)
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_server_runs_on_an_openai_compatible_server(
    server: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(cli.API_KEY_ENV, raising=False)
    argv = ["run", "hi", "--server", server, "--model", "big-model", "--api-key", "sekrit"]
    assert cli.main([*argv, "--json"]) == 0
    events = _events(capsys.readouterr().out)
    assert events[-1] == {"type": "final", "text": "from the server", "thought": None}
    assert {"type": "usage", "prompt_tokens": 50, "completion_tokens": 7, "cached_tokens": 32} in events
    (request,) = _FakeOpenAI.requests
    assert request["path"] == "/v1/chat/completions"
    assert request["auth"] == "Bearer sekrit"
    assert request["body"]["model"] == "big-model"
    assert request["body"]["messages"][-1] == {"role": "user", "content": "hi"}
    assert "response_format" in request["body"]  # the turn schema, json_schema dialect


def test_server_takes_the_api_key_from_the_environment(
    server: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(cli.API_KEY_ENV, "from-env")
    assert cli.main(["run", "hi", "--server", server, "--model", "m"]) == 0
    assert "✓ final: from the server" in capsys.readouterr().out
    assert _FakeOpenAI.requests[0]["auth"] == "Bearer from-env"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--server", "http://127.0.0.1:1/v1"], "aerix: error: --server needs --model NAME"),
        (["--server", "localhost:8000", "--model", "m"], "aerix: error: --server: base_url must be"),
        (["--server", "", "--model", "m"], "aerix: error: --server needs an OpenAI-compatible server's URL"),
        (["--server", " ", "--model", "m", "--dialect", "json_object"], "aerix: error: --server needs"),
        (["--model", ""], "aerix: error: --model needs a model's name (smollm2-instruct) or the path of"),
        (
            ["--server", "http://127.0.0.1:1/v1", "--model", "m", "--api-key", "sk-é"],
            "aerix: error: --api-key: ",
        ),
    ],
)
def test_server_usage_errors(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(cli.API_KEY_ENV, raising=False)
    assert cli.main(["run", "hi", *argv]) == 2
    assert capsys.readouterr().err.startswith(message)


def test_a_bad_api_key_from_the_environment_names_the_variable(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(cli.API_KEY_ENV, "sk-é")
    assert cli.main(["run", "hi", "--server", "http://127.0.0.1:1/v1", "--model", "m"]) == 2
    assert capsys.readouterr().err.startswith(f"aerix: error: ${cli.API_KEY_ENV}: api_key must be an ASCII")


def test_a_server_that_refuses_json_schema_is_answered_in_json_object_with_a_note(
    server: str, capsys: pytest.CaptureFixture[str]
) -> None:
    _FakeOpenAI.refuse = ("json_schema",)
    assert cli.main(["run", "hi", "--server", server, "--model", "m"]) == 0
    out, err = capsys.readouterr()
    lines = out.splitlines()
    assert lines[0] == (
        f"note: server {server} refused the json_schema response format (HTTP 500); this engine uses "
        "--dialect json_object from now on (pass --dialect json_object to skip this check)"
    )
    assert lines[1] == "✓ final: from the server"
    assert [r["body"]["response_format"]["type"] for r in _FakeOpenAI.requests] == [
        "json_schema",
        "json_object",
    ]
    assert err == ""

    _FakeOpenAI.requests = []
    assert cli.main(["run", "hi", "--server", server, "--model", "m", "--json"]) == 0
    out, err = capsys.readouterr()
    assert _events(out)[-1]["type"] == "final"  # stdout: only the events
    assert err.startswith(f"aerix: note: server {server} refused the json_schema response format")
    assert "--dialect json_object from now on" in err


def test_an_explicit_dialect_is_kept_and_the_hint_names_the_flag(
    server: str, capsys: pytest.CaptureFixture[str]
) -> None:
    _FakeOpenAI.refuse = ("json_schema",)
    argv = ["run", "hi", "--server", server, "--model", "m", "--dialect", "json_schema"]
    assert cli.main(argv) == 1
    out = capsys.readouterr().out
    assert "✗ end (error): server " in out and "answered HTTP 500" in out
    assert "the server may not accept --dialect json_schema: try --dialect json_object" in out
    assert "or --dialect none" in out
    assert "dialect='" not in out
    assert len(_FakeOpenAI.requests) == 1

    assert cli.main([*argv, "--json"]) == 1
    out, err = capsys.readouterr()
    assert "try dialect='json_object'" in _events(out)[-1]["message"]  # the event as the library wrote it
    assert err.startswith("aerix: the run ended without a final (error): server ")
    assert "try --dialect json_object" in err and "dialect='" not in err


def test_a_wrong_server_path_hint_names_server_and_model(
    server: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["run", "hi", "--server", server.removesuffix("/v1"), "--model", "big-model"]) == 1
    out = capsys.readouterr().out
    assert "answered HTTP 404" in out
    assert "check --server URL (it usually ends in /v1) and --model 'big-model'" in out


@pytest.mark.parametrize(
    ("library", "command"),
    [
        (
            "the server may not accept dialect='json_schema': try dialect='json_object' (llama-cpp-python's "
            "server) or dialect='none'",
            "the server may not accept --dialect json_schema: try --dialect json_object (llama-cpp-python's "
            "server) or --dialect none",
        ),
        (
            "check base_url (it usually ends in /v1) and model='qwen'",
            "check --server URL (it usually ends in /v1) and --model 'qwen'",
        ),
        (
            "answered HTTP 401: 'bad key'; check api_key",
            "answered HTTP 401: 'bad key'; check --api-key (or $AERIX_API_KEY)",
        ),
        ("overloaded: raise retries or add replicas", "overloaded: try again later or add replicas"),
        (
            "sent no response within read_timeout=120 s; raise read_timeout if the server is busy",
            "sent no response within 120 s (--read-timeout); raise --read-timeout SECONDS if the server is busy",
        ),
        (
            "the stream stalled: no data for read_timeout=0.5 s after 3 chunks",
            "the stream stalled: no data for 0.5 s (--read-timeout) after 3 chunks",
        ),
        ("no final after 3 generations (limits.turns)", "no final after 3 generations (limits.turns)"),
    ],
)
def test_cli_hints_spell_the_engines_options_as_flags(library: str, command: str) -> None:
    assert cli.cli_hints(library) == command


def test_an_unreachable_server_ends_the_run_with_an_error(capsys: pytest.CaptureFixture[str]) -> None:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    argv = ["run", "hi", "--server", f"http://127.0.0.1:{port}/v1", "--model", "m"]
    assert cli.main(argv) == 1
    out = capsys.readouterr().out
    assert "✗ end (error): " in out
    assert "is the server running at this --server URL?" in out


def test_read_timeout_bounds_the_wait_for_a_silent_server(capsys: pytest.CaptureFixture[str]) -> None:
    import socket

    with socket.socket() as sock:  # listens, so connecting works, and never answers
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        url = f"http://127.0.0.1:{sock.getsockname()[1]}/v1"
        argv = ["run", "hi", "--server", url, "--model", "m", "--read-timeout", "0.2", "--json"]
        assert cli.main(argv) == 1
    out, err = capsys.readouterr()
    message = _events(out)[-1]["message"]
    assert "read_timeout=0.2 s" in message  # the event as the library wrote it
    assert "within 0.2 s (--read-timeout); raise --read-timeout SECONDS" in err
    assert "read_timeout" not in err


@pytest.mark.parametrize("value", ["0", "-1", "soon", "inf", "nan", ""])
def test_bad_read_timeouts_are_refused_by_argparse(value: str, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["run", "hi", "--server", "http://127.0.0.1:1/v1", "--model", "m", "--read-timeout", value]
    assert cli.main(argv) == 2
    assert f"argument --read-timeout: must be a number of seconds above 0, got {value!r}" in (
        capsys.readouterr().err
    )


# -- --threads -------------------------------------------------------------------------


@pytest.fixture
def loads(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, dict[str, Any]]]:
    """`aerix.load` replaced: each call is recorded and gives a scripted model."""
    seen: list[tuple[str, dict[str, Any]]] = []

    def load(name: str, **kwargs: Any) -> ScriptedModel:
        seen.append((name, kwargs))
        return ScriptedModel(['{"final":"ok"}'])

    monkeypatch.setattr(aerix, "load", load)
    return seen


def test_threads_reach_the_local_engine_in_run_and_chat(
    loads: list[tuple[str, dict[str, Any]]],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert cli.main(["run", "hi", "--threads", "3"]) == 0
    monkeypatch.setattr("sys.stdin", io.StringIO("hi\n"))
    assert cli.main(["chat", "--threads", "1", "--model", "other.gguf"]) == 0
    assert cli.main(["run", "hi"]) == 0
    assert loads == [
        (cli.DEFAULT_MODEL, {"n_threads": 3}),
        ("other.gguf", {"n_threads": 1}),
        (cli.DEFAULT_MODEL, {}),  # the engine's default threads
    ]
    assert capsys.readouterr().out.count("✓ final: ok") == 3


def test_threads_reach_the_playgrounds_engine(
    loads: list[tuple[str, dict[str, Any]]], monkeypatch: pytest.MonkeyPatch
) -> None:
    import aerix.playground

    seen: dict[str, object] = {}
    monkeypatch.setattr(aerix.playground, "serve", lambda **kw: seen.update(kw))
    assert cli.main(["playground", "--threads", "2", "--port", "0"]) == 0
    assert loads == [(cli.DEFAULT_MODEL, {"n_threads": 2})]
    assert isinstance(seen["model"], ScriptedModel)


@pytest.mark.parametrize("value", ["0", "-2", "many", "1.5", ""])
@pytest.mark.parametrize("command", [["run", "hi"], ["chat"], ["playground"]])
def test_bad_threads_are_refused_by_argparse(
    command: list[str], value: str, loads: list[Any], capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main([*command, "--threads", value]) == 2
    err = capsys.readouterr().err
    assert f"argument --threads: must be a whole number of threads >= 1, got {value!r}" in err
    assert loads == []


def test_more_threads_than_the_engine_takes_are_named_as_the_flag(capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("llama_cpp")
    assert cli.main(["run", "hi", "--threads", "100000", "--tools", "none"]) == 2  # refused before loading
    err = capsys.readouterr().err
    assert err.startswith("aerix: error: --threads: n_threads must be at most ")
    assert "(without --threads: the engine's, " in err and "None" not in err


def test_a_model_path_that_names_threads_is_still_the_models(
    capsys: pytest.CaptureFixture[str], tmp_path: Any
) -> None:
    missing = str(tmp_path / "n_threads_model.gguf")
    assert cli.main(["run", "hi", "--model", missing]) == 2
    assert capsys.readouterr().err.startswith("aerix: error: --model: no GGUF file at ")


def test_threads_with_a_server_are_refused(loads: list[Any], capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["run", "hi", "--server", "http://127.0.0.1:1/v1", "--model", "m", "--threads", "2"]
    assert cli.main(argv) == 2
    assert capsys.readouterr().err.startswith("aerix: error: --threads only applies to the local engine")


# -- the local model -------------------------------------------------------------------


def test_a_missing_gguf_file_is_a_usage_error(capsys: pytest.CaptureFixture[str], tmp_path: Any) -> None:
    missing = str(tmp_path / "nope.gguf")
    assert cli.main(["run", "hi", "--model", missing]) == 2
    err = capsys.readouterr().err
    assert err.startswith("aerix: error: --model: no GGUF file at ") and missing in err


def test_the_default_model_not_installed_could_not_be_loaded(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def load(name: str, **kwargs: Any) -> Any:
        raise FileNotFoundError(
            f"model {name!r} is not installed: install it with pip install 'aerix[llama]'"
        )

    monkeypatch.setattr(aerix, "load", load)
    assert cli.main(["run", "hi", "--tools", "none"]) == 1  # no bad value given: it could not be loaded
    assert capsys.readouterr().err.startswith(
        "aerix: error: --model: model 'smollm2-instruct' is not installed"
    )
    assert cli.main(["run", "hi", "--tools", "none", "--model", "gemma3-270m"]) == 2  # the value given


@pytest.mark.slow
def test_run_on_the_embedded_model(capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("llama_cpp", reason="the local engine needs the llama extra")
    code = cli.main(["run", "What is 12 times 7?", "--json", "--max-turns", "2", "--seed", "1"])
    events = _events(capsys.readouterr().out)
    endings = [e for e in events if e["type"] in ("final", "end")]
    assert len(endings) == 1 and events[-1] is endings[0]
    assert code == (0 if endings[0]["type"] == "final" else 1)
    assert any(e["type"] == "usage" and e["prompt_tokens"] > 0 for e in events)


# -- colour and symbols ------------------------------------------------------------------


class _Terminal(io.StringIO):
    encoding = "utf-8"

    def isatty(self) -> bool:
        return True


def test_colour_only_on_a_terminal_without_no_color() -> None:
    assert use_color(_Terminal(), {}) is True
    assert use_color(_Terminal(), {"NO_COLOR": "1"}) is False
    assert use_color(_Terminal(), {"NO_COLOR": ""}) is True  # no-color.org: set and not empty
    assert use_color(io.StringIO(), {}) is False


def test_coloured_output_and_ascii_fallback() -> None:
    out = _Terminal()
    printer = HumanPrinter(out, color=True)
    printer.event(aerix.FinalEvent(text="done"))
    assert out.getvalue() == "\x1b[32m✓ final:\x1b[0m done\n"

    ascii_out = io.TextIOWrapper(io.BytesIO(), encoding="ascii")
    assert Symbols.for_stream(ascii_out).call == "->"


def test_usage_line_when_the_engine_reports_no_counts() -> None:
    out = io.StringIO()
    printer = HumanPrinter(out)
    printer.run_started()
    printer.event(aerix.UsageEvent(prompt_tokens=0, completion_tokens=0))
    printer.event(aerix.FinalEvent(text="ok"))
    printer.run_done(1.25)
    assert out.getvalue().splitlines()[-1] == "usage: no token counts from the engine · 1.2 s"


def _events(out: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out.splitlines()]


def test_playground_serves_the_given_model_on_loopback(monkeypatch: pytest.MonkeyPatch) -> None:
    import aerix.playground

    seen: dict[str, object] = {}
    monkeypatch.setattr(aerix.playground, "serve", lambda **kw: seen.update(kw))
    model = ScriptedModel([])
    assert cli.main(["playground", "--port", "8123"], model=model) == 0
    assert seen["model"] is model and seen["host"] == "127.0.0.1" and seen["port"] == 8123


def test_playground_refuses_a_bad_port(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["playground", "--port", "70000"], model=ScriptedModel([])) == 2
    assert "--port: 70000 is not a port" in capsys.readouterr().err


def test_run_decodes_greedily_by_default(capsys: pytest.CaptureFixture[str]) -> None:
    model = ScriptedModel(['{"final":"x"}'])
    assert cli.main(["run", "hi"], model=model) == 0
    assert model.calls[0].opts["temperature"] == 0.0


# -- your own tools and MCP servers ------------------------------------------------

OWN_TOOLS = '''
from typing import Literal

from aerix import tool


@tool
def shout(text: str) -> str:
    """Say it louder.

    Args:
        text: What to say
    """
    return text.upper() + "!"


@tool
def pick(colour: Literal["red", "blue"]) -> str:
    """Pick a colour."""
    return colour


def whisper(text: str) -> str:
    """Say it softly."""
    return text.lower()


HELPER = 3
'''


@pytest.fixture
def own_modules(tmp_path: Path) -> Iterator[Path]:
    """A folder for a test's own modules, which are forgotten after it (the next test imports its own)."""
    yield tmp_path
    for name, module in list(sys.modules.items()):
        if str(getattr(module, "__file__", None) or "").startswith(str(tmp_path)):
            del sys.modules[name]


def _system(model: ScriptedModel) -> str:
    return model.calls[0].messages[0]["content"]


def _tool_names(model: ScriptedModel) -> list[str]:
    schema = json.dumps(model.calls[0].opts["constraint"])
    return sorted(set(re.findall(r'"tool": \{"const": "([a-z0-9_]+)"\}', schema)))


def test_tools_from_a_file_a_module_and_the_demo_tools(
    own_modules: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    tmp_path = own_modules
    (tmp_path / "mine.py").write_text(OWN_TOOLS)
    monkeypatch.chdir(tmp_path)
    model = ScriptedModel(['{"calls":[{"tool":"shout","input":{"text":"hi"}}]}', '{"final":"done"}'])
    assert cli.main(["run", "go", "--tools", "mine.py", "--json"], model=model) == 0
    assert _tool_names(model) == ["pick", "shout"]  # every Tool of the file, no plain function, no demo tool
    results = [e for e in _events(capsys.readouterr().out) if e["type"] == "result"]
    assert [(r["tool"], r["text"], r["error"]) for r in results] == [("shout", "HI!", False)]
    assert "What to say" in _system(model)

    model = ScriptedModel(['{"calls":[{"tool":"whisper","input":{"text":"HI"}}]}', '{"final":"done"}'])
    argv = ["run", "go", "--tools", "mine:whisper", "--tools", f"{tmp_path / 'mine.py'}:shout,calculator"]
    assert cli.main([*argv, "--json"], model=model) == 0
    assert _tool_names(model) == ["calculator", "shout", "whisper"]  # a plain function is made a tool
    results = [e for e in _events(capsys.readouterr().out) if e["type"] == "result"]
    assert [(r["tool"], r["text"]) for r in results] == [("whisper", "hi")]

    model = ScriptedModel(['{"final":"ok"}'])
    assert cli.main(["run", "go", "--tools", "mine:*"], model=model) == 0
    assert _tool_names(model) == ["pick", "shout"]


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (
            "no_such_module_x:f",
            "--tools: no module named 'no_such_module_x' (in 'no_such_module_x:f'); run the",
        ),
        ("mine:nope", "--tools: 'mine' has no 'nope'; its tools are shout, pick"),
        ("mine:HELPER", "--tools: 'mine:HELPER' is an int, not a tool or a function"),
        ("mine:", "--tools: 'mine:' names no function"),
        ("missing.py", "--tools: no file 'missing.py' (in 'missing.py')"),
        ("empty.py", "--tools: 'empty.py' defines no tools (functions under @aerix.tool)"),
        ("broken.py", "--tools: loading 'broken.py' failed: ZeroDivisionError: division by zero"),
        ("untyped.py:f", "--tools: 'untyped.py:f': tool 'f': parameter 'x' needs a type annotation"),
        ("mine.py,shout.py", "two tools are named 'shout': from 'mine.py' and from 'shout.py'"),
        (
            "web",
            "--tools: unknown tool 'web'; the demo tools are calculator, clock, convert (or 'none'); for",
        ),
        ("", "--tools: nothing named; name tools (--tools calculator,clock), or 'none' for no tools"),
        (" , ", "--tools: nothing named"),
        ("none,calculator", "--tools: 'none' means no tools, yet it names calculator"),
    ],
)
def test_bad_tools_are_named(
    value: str,
    message: str,
    own_modules: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    tmp_path = own_modules
    (tmp_path / "mine.py").write_text(OWN_TOOLS)
    (tmp_path / "shout.py").write_text(
        "from aerix import tool\n\n@tool\ndef shout() -> str:\n    return 'x'\n"
    )
    (tmp_path / "empty.py").write_text("x = 1\n")
    (tmp_path / "broken.py").write_text("1 / 0\n")
    (tmp_path / "untyped.py").write_text("def f(x):\n    return x\n")
    monkeypatch.chdir(tmp_path)
    model = ScriptedModel()
    assert cli.main(["run", "hi", "--tools", value], model=model) == 2
    out, err = capsys.readouterr()
    assert err.startswith(f"aerix: error: {message}"), err
    assert out == "" and "Traceback" not in err
    assert model.calls == []


KIT = str(Path(__file__).parent / "mcp_servers" / "kit.py")


def test_an_mcp_servers_tools_replace_the_demo_tools(capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("mcp", reason="--mcp needs the mcp extra")
    model = ScriptedModel(['{"calls":[{"tool":"add","input":{"a":2,"b":40}}]}', '{"final":"42"}'])
    assert cli.main(["run", "add", "--mcp", KIT, "--json"], model=model) == 0
    assert "add" in _tool_names(model) and "calculator" not in _tool_names(model)
    results = [e for e in _events(capsys.readouterr().out) if e["type"] == "result"]
    assert [(r["tool"], r["text"], r["error"]) for r in results] == [("add", "42", False)]


def test_two_mcp_servers_with_prefixes_beside_a_demo_tool_in_chat(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("mcp", reason="--mcp needs the mcp extra")
    monkeypatch.setattr("sys.stdin", io.StringIO("one\ntwo\n"))
    model = ScriptedModel(
        [
            '{"calls":[{"tool":"a_add","input":{"a":1,"b":2}}]}',
            '{"final":"3"}',
            '{"calls":[{"tool":"kit_b_crash","input":{}}]}',
            '{"final":"gone"}',
        ]
    )
    # a prefix may hold what a tool name cannot (`kit-b`): it is mapped as the names are
    argv = [
        "chat",
        "--mcp",
        f"a={sys.executable} {KIT}",
        "--mcp",
        f"kit-b={KIT}",
        "--tools",
        "clock",
        "--json",
    ]
    assert cli.main(argv, model=model) == 0
    names = _tool_names(model)
    assert "clock" in names and "a_add" in names and "kit_b_add" in names and "add" not in names
    results = [e for e in _events(capsys.readouterr().out) if e["type"] == "result"]
    assert [(r["tool"], r["error"]) for r in results] == [("a_add", False), ("kit_b_crash", True)]
    assert results[0]["text"] == "3"
    assert "is gone: its process ended" in results[1]["text"]


@pytest.mark.parametrize(
    ("argv", "code", "message"),
    [
        (["--mcp", ""], 2, "--mcp: give a command line ('python server.py', or server.py) or a URL"),
        (
            ["--mcp", "kit= "],
            2,
            "--mcp: give a command line ('python server.py', or server.py) or a URL after the prefix kit=",
        ),
        (["--mcp", "'unclosed"], 2, '--mcp: cannot read "\'unclosed" as a command line'),
        (
            ["--mcp", "aerix-no-such-server --x"],
            1,
            "--mcp: MCP server 'aerix-no-such-server --x': cannot start it: there is no command",
        ),
        (
            ["--mcp", "http://127.0.0.1:9/mcp"],
            1,
            "--mcp: MCP server 'http://127.0.0.1:9/mcp': cannot connect (",
        ),
        (["--mcp", KIT, "--mcp", KIT], 2, "two tools are named 'add': from --mcp "),
        # a URL no request can go to is a bad value (2), found before anything starts
        (["--mcp", "http://"], 2, "--mcp: MCPServer.http: url 'http://' names no host; give one, as in"),
        (
            ["--mcp", "kit=http://127.0.0.1:99999/mcp"],
            2,
            "--mcp: MCPServer.http: url 'http://127.0.0.1:99999/mcp' has the port '99999'; a port is a "
            "number from 1 to 65535",
        ),
    ],
)
def test_bad_mcp_servers_are_named(
    argv: list[str], code: int, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("mcp", reason="--mcp needs the mcp extra")
    model = ScriptedModel()
    assert cli.main(["run", "hi", *argv], model=model) == code
    out, err = capsys.readouterr()
    assert err.startswith(f"aerix: error: {message}"), err
    assert out == "" and "Traceback" not in err
    assert model.calls == []


_CRASH = '{"calls":[{"tool":"crash","input":{}}]}'
_ADD = '{"calls":[{"tool":"add","input":{"a":1,"b":2}}]}'


@pytest.mark.parametrize("json_flag", [[], ["--json"]])
@pytest.mark.parametrize("command", ["run", "chat"])
def test_a_dead_mcp_server_says_to_run_the_command_again_not_to_leave_async_with(
    command: str, json_flag: list[str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("mcp", reason="--mcp needs the mcp extra")
    if command == "run":
        argv, turns = ["run", "crash it", "--mcp", KIT], [_CRASH, _ADD, '{"final":"gone"}']
    else:  # the server stays gone for the rest of the chat, /reset or not
        monkeypatch.setattr("sys.stdin", io.StringIO("crash it\n/reset\nadd\n"))
        argv, turns = ["chat", "--mcp", KIT], [_CRASH, '{"final":"gone"}', _ADD, '{"final":"gone"}']
    model = ScriptedModel(turns)
    assert cli.main([*argv, *json_flag], model=model) == 0
    out = capsys.readouterr().out
    if json_flag:
        gone = [e["text"] for e in _events(out) if e["type"] == "result"]
    else:
        gone = [line.strip() for line in out.splitlines() if line.strip().startswith("← ")]
    assert len(gone) == 2, out
    for text in gone:
        assert "is gone: its process ended" in text
        assert text.endswith("; run the aerix command again to restart it"), text
    assert "async with" not in out
    assert "async with" not in json.dumps([c.messages for c in model.calls])  # the model reads the same


def test_an_mcp_servers_stray_stdout_line_is_a_note_not_a_traceback(
    capsys: pytest.CaptureFixture[str],
) -> None:
    pytest.importorskip("mcp", reason="--mcp needs the mcp extra")
    import logging
    import os
    import shlex

    name = shlex.join([os.path.basename(sys.executable), KIT, "--banner"])
    note = (
        f'note: MCP server {name!r} wrote a line on stdout that is not MCP, skipped: "starting up..." '
        "(an MCP server on stdio writes only MCP messages on stdout, anything else on stderr)"
    )
    argv = ["run", "add", "--mcp", f"{KIT} --banner"]
    assert cli.main(argv, model=ScriptedModel([_ADD, '{"final":"3"}'])) == 0
    out, err = capsys.readouterr()
    assert err == ""
    assert out.splitlines()[0] == note  # one line, before the run's; the JSON line after it only logged
    assert [line for line in out.splitlines() if "not MCP" in line] == [note]
    # with --json, stdout holds only the events, and the note goes to stderr
    assert cli.main([*argv, "--json"], model=ScriptedModel([_ADD, '{"final":"3"}'])) == 0
    out, err = capsys.readouterr()
    assert _events(out)[-1]["type"] == "final"
    assert err == f"aerix: {note}\n"
    logger = logging.getLogger("aerix.mcp")
    assert logger.handlers == [] and logger.propagate  # the command leaves logging as it found it


def test_two_servers_with_one_tool_name_are_told_to_take_a_prefix(capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("mcp", reason="--mcp needs the mcp extra")
    assert cli.main(["run", "hi", "--mcp", KIT, "--mcp", KIT], model=ScriptedModel()) == 2
    err = capsys.readouterr().err
    assert err.rstrip().endswith("give an MCP server's tools a prefix with --mcp PREFIX=SERVER")


def test_output_makes_the_answer_typed(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    model = ScriptedModel(['{"final":"four"}', '{"final":4}'])  # a string is no int: asked again
    assert cli.main(["run", "2+2?", "--output", "int", "--tools", "none", "--json"], model=model) == 0
    events = _events(capsys.readouterr().out)
    assert [e["type"] for e in events if e["type"] in ("retry", "final")] == ["retry", "final"]
    assert events[-1] == {"type": "final", "text": "4", "thought": None, "output": 4}
    assert model.calls[0].opts["constraint"]["json"]["anyOf"][-1]["properties"]["final"]["type"] == "integer"
    schema = tmp_path / "city.json"
    schema.write_text('{"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}')
    for given in (f"@{schema}", schema.read_text()):
        model = ScriptedModel(['{"final":{"city":"Porto"}}'])
        assert cli.main(["run", "Where?", "--output", given, "--tools", "none"], model=model) == 0
        assert '✓ final: {"city": "Porto"}' in capsys.readouterr().out


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ("integer", "argument --output: 'integer' is none of str, int, float, bool, a JSON Schema"),
        ("[1]", "argument --output: '[1]' is none of str, int, float, bool, a JSON Schema"),
        ("@/no/such/file.json", "argument --output: cannot read '/no/such/file.json'"),
        ('{"type": "string", "examples": ["a"]}', "--output: "),
        ("[" * 50_000 + "]" * 50_000, "argument --output: '" + "[" * 77 + "...' is none of str"),
        (
            '{"type": "array", "items": ' * 900 + '{"type": "string"}' + "}" * 900,
            "--output: output: the schema is nested too deeply for Python to walk; flatten it",
        ),
    ],
)
def test_a_bad_output_exits_2_naming_the_flag(
    capsys: pytest.CaptureFixture[str], given: str, message: str
) -> None:
    assert cli.main(["run", "x", "--output", given], model=ScriptedModel(['{"final":"x"}'])) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err and len(err) < 2000, err[:300]


@pytest.mark.parametrize("json_lines", [False, True])
def test_a_lone_surrogate_in_the_models_answer_prints_without_a_crash(
    json_lines: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A model may write `"\\udce9"` in its JSON: a UTF-8 terminal gets U+FFFD, a JSON line the escape."""
    raw = io.BytesIO()
    out = io.TextIOWrapper(raw, encoding="utf-8", errors="strict", write_through=True)
    monkeypatch.setattr("sys.stdout", out)
    model = ScriptedModel(['{"final":"caf\\udce9"}'])
    assert cli.main(["run", "hi", "--tools", "none", *(["--json"] if json_lines else [])], model=model) == 0
    printed = raw.getvalue().decode("utf-8")
    if json_lines:
        assert json.loads(printed.splitlines()[-1]) == {"type": "final", "text": "caf\udce9", "thought": None}
    else:
        assert "caf\ufffd" in printed


# -- models from the Hugging Face Hub, and `aerix models` --------------------------------


@pytest.fixture
def hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """The local stand-in for the Hub (`HF_ENDPOINT`), the Hub's cache in `tmp_path`."""
    from _fake_hub import hub_for_test

    with hub_for_test(tmp_path / "hf", monkeypatch) as fake:
        yield fake


HUB_REPO = "owner/Tiny-GGUF"


def test_model_hf_fetches_the_gguf_then_loads_it_from_the_cache(
    hub: Any, loads: list[tuple[str, dict[str, Any]]], capsys: pytest.CaptureFixture[str]
) -> None:
    hub.add(HUB_REPO, {"tiny-Q4_K_M.gguf": b"GGUF4", "tiny-Q8_0.gguf": b"GGUF8"})
    assert cli.main(["run", "hi", "--model", f"hf:{HUB_REPO}"]) == 0
    assert cli.main(["run", "hi", "--model", f"hf:{HUB_REPO}:Q8_0", "--threads", "1"]) == 0
    [(first, options), (second, threads)] = loads
    assert options == {} and threads == {"n_threads": 1}
    assert first.endswith("/tiny-Q4_K_M.gguf") and Path(first).read_bytes() == b"GGUF4"
    assert second.endswith("/tiny-Q8_0.gguf") and "models--owner--Tiny-GGUF" in second
    assert capsys.readouterr().err == ""  # no progress bar where stderr is no terminal
    hub.requests.clear()
    assert cli.main(["run", "hi", "--model", f"hf:{HUB_REPO}"]) == 0
    assert hub.requests == []  # the second load asks nothing


def test_model_takes_a_short_name(
    hub: Any, loads: list[tuple[str, dict[str, Any]]], capsys: pytest.CaptureFixture[str]
) -> None:
    repo = aerix.engines.SHORT_NAMES["qwen2.5-0.5b"].removeprefix("hf:").partition(":")[0]
    hub.add(repo, {"qwen2.5-0.5b-instruct-q4_k_m.gguf": b"GGUF"})
    assert cli.main(["run", "hi", "--model", "qwen2.5-0.5b"]) == 0
    assert loads[0][0].endswith("/qwen2.5-0.5b-instruct-q4_k_m.gguf")


@pytest.mark.parametrize(
    ("model", "code", "said"),
    [
        ("hf:owner", 2, "--model: 'hf:owner' is no Hugging Face reference (it needs OWNER/REPO): write "),
        ("hf:owner/repo:", 2, "--model: 'hf:owner/repo:' is no Hugging Face reference (nothing after ':'"),
        ("hf:owner/Missing", 2, "--model: hf:owner/Missing: the Hub at http://127.0.0.1:"),
        (
            f"hf:{HUB_REPO}:Q5_K_M",
            2,
            f"--model: hf:{HUB_REPO}:Q5_K_M: the repo {HUB_REPO} has no Q5_K_M file; it has Q4_K_M",
        ),
        (
            "hf:owner/Gated",
            1,
            "--model: hf:owner/Gated: the repo owner/Gated is gated (HTTP 401): accept its terms at ",
        ),
    ],
)
def test_a_model_the_hub_cannot_give_is_named_with_the_fix(
    hub: Any, loads: list[Any], capsys: pytest.CaptureFixture[str], model: str, code: int, said: str
) -> None:
    hub.add(HUB_REPO, {"tiny-Q4_K_M.gguf": b"GGUF"})
    hub.add("owner/Gated", {"m-Q4_K_M.gguf": b"GGUF"}, gated=True)
    assert cli.main(["run", "hi", "--model", model]) == code
    err = capsys.readouterr().err
    assert err.startswith(f"aerix: error: {said}") and err.count("\n") == 1 and "Traceback" not in err
    assert loads == []


def test_offline_the_cache_loads_and_a_missing_file_is_named(
    hub: Any, loads: list[Any], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    hub.add(HUB_REPO, {"tiny-Q4_K_M.gguf": b"GGUF"})
    assert cli.main(["run", "hi", "--model", f"hf:{HUB_REPO}"]) == 0
    hub.requests.clear()
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert cli.main(["run", "hi", "--model", f"hf:{HUB_REPO}"]) == 0
    assert cli.main(["run", "hi", "--model", f"hf:{HUB_REPO}:Q8_0"]) == 1
    assert capsys.readouterr().err.startswith(
        f"aerix: error: --model: hf:{HUB_REPO}:Q8_0: HF_HUB_OFFLINE is set, and the Hub's cache ("
    )
    assert hub.requests == [] and len(loads) == 2


def test_models_lists_what_loads_without_a_network(
    hub: Any, capsys: pytest.CaptureFixture[str], loads: list[Any]
) -> None:
    hub.add(HUB_REPO, {"tiny-Q4_K_M.gguf": b"G" * 2_500_000, "tiny-Q8_0.gguf": b"G" * 1500})
    assert cli.main(["run", "hi", "--model", f"hf:{HUB_REPO}"]) == 0
    assert cli.main(["run", "hi", "--model", f"hf:{HUB_REPO}:Q8_0"]) == 0
    capsys.readouterr()
    hub.requests.clear()
    assert cli.main(["models"]) == 0
    lines = capsys.readouterr().out.splitlines()
    cached = [line.split() for line in lines if "Hub's cache" in line]
    assert [row[:3] for row in cached] == [
        [f"hf:{HUB_REPO}/tiny-Q4_K_M.gguf", "2.5", "MB"],
        [f"hf:{HUB_REPO}/tiny-Q8_0.gguf", "1.5", "kB"],
    ]
    assert lines[0].split() == ["NAME", "SIZE", "FROM"]
    assert "fetched from the Hugging Face Hub on first use" in " ".join(lines)
    assert cli.main(["models", "--json"]) == 0
    listed = _events(capsys.readouterr().out)
    assert {
        "name": f"hf:{HUB_REPO}/tiny-Q8_0.gguf",
        "size": 1500,
        "source": "the Hugging Face Hub's cache",
    } in listed
    assert [m["name"] for m in listed] == [m.name for m in aerix.engines.local_models()]
    assert hub.requests == []


def test_a_trimmed_conversation_is_said_in_one_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The window holds the system message, one prompt and max_tokens, not two prompts.
    monkeypatch.setattr("sys.stdin", io.StringIO("x" * 800 + "\n" + "y" * 800 + "\n"))
    model = ScriptedModel([FINAL, FINAL], context_window=850)
    assert cli.main(["chat", "--max-tokens", "64"], model=model) == 0
    lines = capsys.readouterr().out.splitlines()
    trims = [line for line in lines if "outgrew" in line]
    assert trims == ["↻ the conversation outgrew the context: 2 earlier messages left out"]
