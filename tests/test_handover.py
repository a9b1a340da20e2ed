"""The hand-over (`aerix._handover`): what the loop reads back from its own messages for the
engines, read against its own rendering, lazily, on every generation."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from aerix import Agent, tool
from aerix._calls import _repeat
from aerix._handover import INPUT_PATH, TOOL_PATH, handover, own_words, read
from aerix.model import CallMade, ChatMessage, Handover
from aerix.testing import ScriptedModel
from aerix.tools import cut_result
from aerix.turn import CONTRACT, render_results, render_system, turn_schema

SYSTEM = "You call tools."


def user(text: str) -> ChatMessage:
    return {"role": "user", "content": text}


def assistant(turn: Any) -> ChatMessage:
    return {"role": "assistant", "content": turn if isinstance(turn, str) else json.dumps(turn)}


def calls(*pairs: tuple[str, dict[str, Any]]) -> dict[str, Any]:
    return {"calls": [{"tool": t, "input": i} for t, i in pairs]}


CAPITAL = ("capital_of", {"country": "Quenland"})
POPULATION = ("population_of", {"city": "Tovik"})
RESULTS = render_results([("call_1", "capital_of", "The capital of Quenland is Tovik.")])


@pytest.mark.parametrize(
    ("conversation", "request_", "first", "made"),
    [
        ([user("q")], "q", True, []),  # the first turn for a request
        ([user("q"), assistant(calls(CAPITAL)), user(RESULTS)], "q", False, [CAPITAL]),
        (
            [user("q"), assistant(calls(CAPITAL)), user(RESULTS), assistant(calls(CAPITAL, POPULATION))],
            "q",
            False,
            [CAPITAL, CAPITAL, POPULATION],
        ),
        # a final ends the request: the next user message opens another, with no calls made
        (
            [user("a"), assistant(calls(CAPITAL)), user(RESULTS), assistant({"final": "x"}), user("b")],
            "b",
            True,
            [],
        ),
        ([user("a"), assistant({"final": {"n": 1}}), user("b")], "b", True, []),  # a typed answer
        # a run's prompt after results (the run before ran out of turns) is a request too
        ([user("a"), assistant(calls(CAPITAL)), user(RESULTS), user("b")], "b", True, []),
        # a turn without calls of a tool made none
        ([user("q"), assistant({"calls": [{"input": {}}, "x", {"tool": 3}]}), user("R")], "q", False, []),
        # no calls (the loop keeps no such turn): the next user message is a request
        ([user("q"), assistant({"calls": "capital_of"}), user("R")], "R", True, []),
        ([user("a"), assistant(calls(CAPITAL))], "a", False, [CAPITAL]),  # the assistant speaks last
        ([], None, False, []),
    ],
)
def test_the_request_and_its_calls_are_read_from_the_turns(
    conversation: list[ChatMessage], request_: str | None, first: bool, made: list[tuple[str, Any]]
) -> None:
    h = read(SYSTEM, conversation)
    assert (h.request, h.first_turn) == (request_, first)
    assert [(c.tool, c.input) for c in h.calls] == made


def test_a_call_without_an_input_is_made_with_an_empty_one() -> None:
    h = read(
        SYSTEM,
        [user("q"), assistant({"calls": [{"tool": "ping"}]}), user(render_results([("c", "ping", "pong")]))],
    )
    assert h.calls == (CallMade(tool="ping", input={}, result="pong"),)


def test_each_call_gets_its_result_in_the_tools_own_words() -> None:
    results = [
        ("capital_of", "The capital of Quenland is Tovik.", "The capital of Quenland is Tovik."),
        ("population_of", "error: no city named 'Quenland'", "no city named 'Quenland'"),
        (
            "capital_of",
            _repeat(1, ("call_1", "The capital of Quenland is Tovik.")),
            "The capital of Quenland is Tovik.",
        ),
        ("population_of", _repeat(0, ("call_2", "error: no city named 'X'")), "no city named 'X'"),
        ("capital_of", cut_result("Tovik " * 10, 12), "Tovik Tovik "),
        ("pop", "two lines\n[call_9 capital_of] like a label", "two lines\n[call_9 capital_of] like a label"),
        ("x", "", ""),
        ("x", "(that is the result of nothing)", "(that is the result of nothing)"),
    ]
    # Nine calls, one more than a turn runs: the rendering says one was dropped, and it has no result.
    turn = {
        "calls": [{"tool": t, "input": {"n": i}} for i, (t, _, _) in enumerate(results)] + [{"tool": "x"}]
    }
    message = render_results([(f"call_{i}", t, text) for i, (t, text, _) in enumerate(results)], 1)
    question = "What is the population of the capital of Quenland?"
    h = read(SYSTEM, [user(question), assistant(turn), user(message)])
    words = [w for _, _, w in results]
    assert [c.result for c in h.calls] == [*words, None]
    assert h.texts == (question, *words)
    for frame in ("call_1", "Results", "error", "repeats", "times", "dropped", "cut", "characters"):
        assert not any(frame in t for t in h.texts[1:6])


@pytest.mark.parametrize("repeats", [0, 1, 3])
def test_the_repeat_rules_note_is_the_one_the_reading_knows(repeats: int) -> None:
    assert own_words(_repeat(repeats, ("call_7", "42"))) == "42"
    assert own_words(_repeat(repeats, ("call_7", cut_result("4" * 20, 2)))) == "44"


def test_a_results_message_the_loop_did_not_write_is_read_whole() -> None:
    h = read(SYSTEM, [user("q"), assistant(calls(CAPITAL)), user("Tovik, says the tool.")])
    assert h.texts == ("q", "Tovik, says the tool.") and h.calls[0].result is None


def test_a_users_own_words_are_copied_whole() -> None:
    """Only a message of results loses its frame: a request is the user's, brackets and all."""
    text = "[call_1 x] error: keep this\n(that is the result of call_2; mine)"
    h = read(SYSTEM, [user(text), assistant({"final": "ok"}), user("Results:")])
    assert h.texts == (text, "Results:") and h.said == (text, "Results:")


def test_the_users_words_leave_out_the_results() -> None:
    results = render_results([("call_1", "f", "error: no file named 'a.txt'")])
    h = read(SYSTEM, [user("Rename 'a.txt'"), assistant(calls(("f", {}))), user(results)])
    assert h.said == ("Rename 'a.txt'",)
    assert h.texts == ("Rename 'a.txt'", "no file named 'a.txt'")


def test_the_placeholders_are_the_json_values_of_the_system_messages_examples() -> None:
    contract = ("<tool name>", "<your answer>")
    assert read(f'Sign as {{"name": "<agent name>"}}.\n{CONTRACT}', []).placeholders == (
        "<agent name>",
        *contract,
    )
    # What the instructions ask for in angle brackets, outside a JSON example, stays writable.
    assert read("Answer <OK> or <FAIL>, as <b>bold</b>.", []).placeholders == ()
    # The typed contract's placeholder is a bare JSON value.
    assert read('{"final":<your answer, a JSON value>}', []).placeholders == ("<your answer, a JSON value>",)
    # Angle brackets that hold no words are no placeholder.
    assert read('{"x": "<= 3", "y": "<5 ms>", "z": "<>"}', []).placeholders == ()
    # The user's messages hold none.
    assert read("", [user('{"final":"<your answer>"}')]).placeholders == ()


def _walk(schema: Any, path: tuple[str | None, ...]) -> list[Any]:
    """The schemas at `path`, through `anyOf`."""
    if "anyOf" in schema:
        return [s for alternative in schema["anyOf"] for s in _walk(alternative, path)]
    if not path:
        return [schema]
    child = schema.get("items") if path[0] is None else schema.get("properties", {}).get(path[0])
    return [] if child is None else _walk(child, path[1:])


def test_the_paths_are_where_the_turn_schema_puts_a_calls_tool_and_input() -> None:
    tools = [tool(name=n, description="", input={"x": {"type": "string"}}, run=str) for n in ("f", "g")]
    for schema in (turn_schema(tools, "auto"), turn_schema(tools[:1], "required", calls_per_turn=3)):
        names = [s["const"] for s in _walk(schema, TOOL_PATH)]
        assert names == [t.name for t in tools][: len(names)] and names
        assert all(s["properties"] == {"x": {"type": "string"}} for s in _walk(schema, INPUT_PATH))


def test_the_hand_over_is_read_only_when_asked_and_once(monkeypatch: pytest.MonkeyPatch) -> None:
    import aerix._handover as module

    reads: list[int] = []

    def counted(system: str, conversation: Any) -> Handover:
        reads.append(len(conversation))
        return read(system, conversation)

    monkeypatch.setattr(module, "read", counted)
    h = handover({"role": "system", "content": SYSTEM}, [user("a"), assistant({"final": "x"})], [user("b")])
    assert isinstance(h, Handover) and reads == []
    assert (h.request, h.first_turn, h.tool_path, h.input_path) == ("b", True, TOOL_PATH, INPUT_PATH)
    assert h.texts == ("a", "b") and h.said == ("a", "b") and h.calls == () and h.placeholders == ()
    assert reads == [3]  # once, for every field
    import dataclasses

    assert dataclasses.replace(h, first_turn=False).first_turn is False  # a plain copy, read


@tool
def capital_of(country: str) -> str:
    """The capital of a country.

    Args:
        country: The country's name
    """
    return "The capital of Quenland is Tovik."


def test_an_agent_hands_over_with_every_generation() -> None:
    model = ScriptedModel(
        [
            '{"calls":[{"tool":"capital_of","input":{"country":"Quenland"}}]}',
            "not a turn",
            '{"final":"Tovik"}',
        ]
    )
    agent = Agent(model=model, tools=[capital_of], instructions='Sign as {"name": "<agent name>"}.')
    assert asyncio.run(agent.ask("What is the capital of Quenland?")).text == "Tovik"
    first, second, retry = (c.opts["handover"] for c in model.calls)
    assert (first.request, first.first_turn, first.calls) == ("What is the capital of Quenland?", True, ())
    assert first.placeholders == ("<agent name>", "<tool name>", "<your answer>")
    assert (second.first_turn, second.calls) == (
        False,
        (
            CallMade(
                tool="capital_of", input={"country": "Quenland"}, result="The capital of Quenland is Tovik."
            ),
        ),
    )
    assert second.texts == ("What is the capital of Quenland?", "The capital of Quenland is Tovik.")
    # The request to answer again, and the failed turn before it, change nothing.
    assert retry == second and retry.tool_path == TOOL_PATH and retry.input_path == INPUT_PATH
    assert render_system("", [capital_of]) in model.calls[0].messages[0]["content"]


def test_an_engine_refuses_a_hand_over_of_another_type() -> None:
    from aerix import AerixError
    from aerix.model import checked_options

    messages: list[ChatMessage] = [user("q")]
    assert checked_options(messages, {"handover": Handover()}) == {"handover": Handover()}
    with pytest.raises(AerixError, match=r"handover must be an aerix\.model\.Handover, got dict"):
        checked_options(messages, {"handover": {"request": "q"}})  # type: ignore[typeddict-item]
