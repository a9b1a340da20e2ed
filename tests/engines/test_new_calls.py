"""New calls: which calls a request's turns made, the call a turn writes, the text values copy
from, and the `NewCalls` hook that leans a later turn's tool name away from a call already
made (a fake step and a fake look-ahead; the real model in test_tool_choice_real.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from _steps import fake_step

from aerix import tool
from aerix._calls import _repeat
from aerix.engines.llamacpp._hooks import NewCalls, Step, default_hooks
from aerix.engines.llamacpp._lookahead import Ahead
from aerix.engines.llamacpp.rules import calls_made, copy_source, value_bias
from aerix.engines.llamacpp.rules._tools import call_key, written_call
from aerix.tools import cut_result
from aerix.turn import render_results, render_retry, turn_schema

TOOLS = [
    tool(name=n, description=f"The {n} tool.", input={f: {"type": "string"}}, run=str)
    for n, f in (("capital_of", "country"), ("population_of", "city"), ("pop_rank", "city"))
]
SCHEMA = turn_schema(TOOLS, "auto")
SYSTEM = {"role": "system", "content": "You call tools."}


def user(text: str) -> dict[str, str]:
    return {"role": "user", "content": text}


def assistant(turn: Any) -> dict[str, str]:
    return {"role": "assistant", "content": turn if isinstance(turn, str) else json.dumps(turn)}


def calls(*pairs: tuple[str, dict[str, Any]]) -> dict[str, Any]:
    return {"calls": [{"tool": t, "input": i} for t, i in pairs]}


CAPITAL = ("capital_of", {"country": "Quenland"})
POPULATION = ("population_of", {"city": "Tovik"})


def test_a_call_key_is_the_tool_and_the_input_in_any_key_order() -> None:
    assert call_key("f", {"a": 1, "b": [2]}) == call_key("f", {"b": [2], "a": 1})
    assert call_key("f", {"a": 1}) != call_key("g", {"a": 1})
    assert call_key("f", {"a": 1}) != call_key("f", {"a": "1"})
    assert call_key("f", {"city": "Zürich"}) == '["f",{"city":"Zürich"}]'


@pytest.mark.parametrize(
    ("messages", "made"),
    [
        ([SYSTEM, user("q")], []),  # the first turn for a request
        ([SYSTEM, user("q"), assistant(calls(CAPITAL)), user("Results: ...")], [CAPITAL]),
        (
            [SYSTEM, user("q"), assistant(calls(CAPITAL)), user("R"), assistant(calls(CAPITAL, POPULATION))],
            [CAPITAL, POPULATION],
        ),
        # a final ends the request: the next one starts with no calls made
        ([SYSTEM, user("a"), assistant(calls(CAPITAL)), user("R"), assistant({"final": "x"}), user("b")], []),
        # a turn that did not parse, or calls of no tool, made nothing
        ([SYSTEM, user("q"), assistant('{"calls":[{"tool'), user("again")], []),
        ([SYSTEM, user("q"), assistant({"calls": [{"input": {}}, "x", {"tool": 3}]}), user("R")], []),
        ([SYSTEM, user("q"), assistant({"calls": "capital_of"}), user("R")], []),
    ],
)
def test_the_calls_made_are_those_of_the_turns_for_the_latest_request(
    messages: list[dict[str, str]], made: list[tuple[str, dict[str, Any]]]
) -> None:
    assert calls_made(messages) == {call_key(t, i) for t, i in made}


def test_a_call_without_an_input_is_made_with_an_empty_one() -> None:
    made = calls_made([SYSTEM, user("q"), assistant({"calls": [{"tool": "ping"}]}), user("R")])
    assert made == {call_key("ping", {})}


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ('capital_of","input":{"country":"Quenland"}}', call_key(*CAPITAL)),
        ('f","input":{"b":2,"a":{"x":[1]}}}', call_key("f", {"a": {"x": [1]}, "b": 2})),
        ('ping","input":{}}', call_key("ping", {})),
        ('capital_of","input":{"country":"Quen', None),  # cut before the input closes
        ('capital_of"}', None),  # no input
        ("capital_of", None),  # the name does not end
    ],
)
def test_a_written_call_reads_from_the_tool_name_on(text: str, key: str | None) -> None:
    assert written_call(text) == key


def test_the_call_in_progress_is_read_from_where_the_name_is() -> None:
    bias = value_bias(SCHEMA, "", copy=0, close=0, piece=str, check_optional=False)
    bias.feed(b'{"calls":[{"tool":"capi')
    assert bias.call_written('tal_of","input":{"country":"Quenland"}}') == call_key(*CAPITAL)
    before = value_bias(SCHEMA, "", copy=0, close=0, piece=str, check_optional=False)
    before.feed(b'{"calls":[{"tool":')  # the name's quote not written yet
    assert before.call_written('"capital_of","input":{"country":"Quenland"}}') == call_key(*CAPITAL)
    assert before.call_written('capital_of","input":{}}') is None


def test_values_copy_the_tools_words_without_the_loops_frame() -> None:
    results = render_results(
        [
            ("call_1", "capital_of", "The capital of Quenland is Tovik."),
            ("call_2", "population_of", "error: no city named 'Quenland'"),
            ("call_3", "capital_of", _repeat(1, ("call_1", "The capital of Quenland is Tovik."))),
            ("call_4", "population_of", _repeat(0, ("call_2", "error: no city named 'X'"))),
            ("call_5", "capital_of", cut_result("Tovik " * 10, 12)),
        ],
        dropped=3,
    )
    messages = [SYSTEM, user("What is the population of the capital of Quenland?"), assistant(calls(CAPITAL))]
    source = copy_source([*messages, user(results)])
    assert source.splitlines() == [
        "What is the population of the capital of Quenland?",
        "The capital of Quenland is Tovik.",
        "no city named 'Quenland'",
        "The capital of Quenland is Tovik.",
        "no city named 'X'",
        "Tovik Tovik ",
    ]
    for frame in ("call_", "Results", "error", "repeats", "times", "dropped", "cut", "characters"):
        assert frame not in source


def test_values_copy_nothing_from_the_loops_requests_for_a_turn_again() -> None:
    retries = [render_retry("not JSON", cut=False, max_tokens=512), render_retry("", cut=True, max_tokens=64)]
    messages = [SYSTEM, user("Weather in Oslo?"), assistant("{"), *(user(r) for r in retries)]
    assert copy_source(messages) == "Weather in Oslo?"


def test_a_users_own_words_are_copied_whole() -> None:
    """Only a message of results loses its frame: a request is the user's, brackets and all."""
    text = "[call_1 x] error: keep this\n(that is the result of call_2; mine)"
    assert copy_source([user(text), assistant("{}"), user("Results:")]) == text + "\nResults:"


def test_the_repeat_rules_note_is_the_one_copy_source_knows() -> None:
    """copy_source cuts the loop's own notes by their wording: pinned to the loop's."""
    for repeats in (0, 1, 3):
        note = _repeat(repeats, ("call_7", "42"))
        assert copy_source([user(render_results([("call_8", "f", note)]))]) == "42"


# The fake vocabulary: a token's text by id.
PIECES = ['{"calls":[{"tool":"', "capital_of", "population_of", "pop", "ulation_of", "_rank", '"', "x"]


class FakeLookahead:
    """Answers `closing` with the call each first token leads to."""

    def __init__(self, calls_by_token: dict[int, str | None]) -> None:
        self.calls = calls_by_token
        self.asked: list[int] = []

    def closing(self, stopped: Any, constrained: Any, bias: Any, token: int) -> Ahead | None:
        self.asked.append(token)
        text = self.calls.get(token)
        return None if text is None else Ahead(text, 0.0, ended=not text.endswith("…"))


REST = '","input":{"country":"Quenland"}}'
"""What follows the name `capital_of` in the call made."""


def step(written: str, look: FakeLookahead, *, made: Any = (CAPITAL,), schema: Any = SCHEMA) -> Step:
    bias = value_bias(schema, "", copy=0, close=0, piece=PIECES.__getitem__, check_optional=False)
    bias.made = frozenset(call_key(t, i) for t, i in made)
    bias.feed(written.encode())
    return fake_step(bias, PIECES, look)


def adjusted(hook: NewCalls, s: Step, logits: dict[str, float]) -> dict[str, float]:
    given = np.full(len(PIECES), -np.inf, dtype=np.float32)
    for piece, value in logits.items():
        given[PIECES.index(piece)] = value
    out = hook.adjust(s, given)
    return {p: float(out[PIECES.index(p)]) for p in logits}


START = '{"calls":[{"tool":"'


def test_a_name_that_leads_to_a_call_made_leans_away_from_it() -> None:
    look = FakeLookahead({1: "capital_of" + REST, 2: 'population_of","input":{"city":"Tovik"}}'})
    s = step(START, look)
    hook = NewCalls(4.0)
    assert hook.active(s)
    out = adjusted(hook, s, {"capital_of": 2.0, "population_of": 1.0, "pop": 0.5})
    assert out == {"capital_of": -2.0, "population_of": 1.0, "pop": 0.5}
    assert look.asked == [1, 2]  # the next likeliest is read too: a new call, so it stays


def test_a_name_that_leads_to_a_new_call_is_left_alone() -> None:
    look = FakeLookahead({1: 'capital_of","input":{"country":"Veloria"}}'})
    out = adjusted(NewCalls(4.0), step(START, look), {"capital_of": 2.0, "population_of": 1.0})
    assert out == {"capital_of": 2.0, "population_of": 1.0} and look.asked == [1]


@pytest.mark.parametrize("ahead", [None, "capital_of" + REST[:-3] + "…"])
def test_a_call_that_does_not_end_ahead_is_no_repeat(ahead: str | None) -> None:
    look = FakeLookahead({1: ahead})
    out = adjusted(NewCalls(4.0), step(START, look), {"capital_of": 2.0, "population_of": 1.0})
    assert out == {"capital_of": 2.0, "population_of": 1.0}


def test_each_tool_leans_away_once_and_every_repeat_is_read() -> None:
    made = (CAPITAL, POPULATION)
    look = FakeLookahead({1: "capital_of" + REST, 2: 'population_of","input":{"city":"Tovik"}}'})
    out = adjusted(NewCalls(3.0), step(START, look, made=made), {"capital_of": 5.0, "population_of": 4.0})
    assert out == {"capital_of": 2.0, "population_of": 1.0}
    # capital_of is likeliest again: read already, so the hook stops there
    assert look.asked == [1, 2]


def test_a_token_shared_by_two_names_is_read_where_the_names_part() -> None:
    look = FakeLookahead({3: 'pulation_of","input":{"city":"Tovik"}}'})
    s = step(START, look, made=(POPULATION,))
    out = adjusted(NewCalls(4.0), s, {"pop": 2.0, "capital_of": 1.0})
    assert out == {"pop": 2.0, "capital_of": 1.0} and look.asked == []  # "pop": population_of or pop_rank
    later = step(
        START + "pop", FakeLookahead({4: 'ulation_of","input":{"city":"Tovik"}}'}), made=(POPULATION,)
    )
    out = adjusted(NewCalls(4.0), later, {"ulation_of": 2.0, "_rank": 1.0})
    assert out == {"ulation_of": -2.0, "_rank": 1.0}


@pytest.mark.parametrize(
    ("written", "made", "schema"),
    [
        (START, (), SCHEMA),  # the first turn for a request: nothing made
        (START, (CAPITAL,), turn_schema(TOOLS[:1], "auto")),  # one tool to name
        (START + 'capital_of","input":{"country":"', (CAPITAL,), SCHEMA),  # a value of the input
        ('{"final":"', (CAPITAL,), SCHEMA),
    ],
)
def test_new_calls_act_only_on_a_later_turns_tool_name(written: str, made: Any, schema: Any) -> None:
    look = FakeLookahead({})
    s = step(written, look, made=made, schema=schema)
    assert not NewCalls(4.0).active(s)


def test_new_calls_run_only_with_a_weight() -> None:
    options: dict[str, Any] = {"copy_bias": 2.5, "close_bias": 2, "string_choices": 3, "check_optional": True}
    assert "NewCalls" in [type(h).__name__ for h in default_hooks(**options, new_call_bias=4)]
    assert "NewCalls" not in [type(h).__name__ for h in default_hooks(**options, new_call_bias=0)]
    assert "NewCalls" not in [type(h).__name__ for h in default_hooks(**options)]


async def test_a_real_look_ahead_reads_a_whole_call(tiny_gguf: Path) -> None:
    """`Lookahead.closing` on the tiny GGUF: from the tool name to the end of the call's object
    (and what the schema forces after it), with the cache cut back after it."""
    from aerix.engines import LlamaCpp

    # Enum inputs: the random tiny model ends a value only where the schema makes it.
    enums = [
        tool(name=n, description="", input={f: {"type": "string", "enum": ["Quenland", "Tovik"]}}, run=str)
        for n, f in (("capital_of", "country"), ("population_of", "city"))
    ]
    schema = turn_schema(enums, "auto")
    engine = LlamaCpp(tiny_gguf, n_ctx=512, n_threads=1)
    try:
        cache, vocab = engine._cache, engine._vocab
        cache.eval_prompt(engine._tokenize(b"<|im_start|>user\nPopulation?<|im_end|>\n", True))
        constrained = engine._schemas.start(schema)
        bias = value_bias(schema, "", copy=0, close=0, piece=vocab.piece_text, check_optional=False)
        written = engine._tokenize(START.encode(), False)
        constrained.consume(written)
        bias.feed(START.encode())
        cache.eval(written)
        n = cache.n_tokens
        first = engine._tokenize(b"capital", False)[0]
        ahead = engine._decoder._lookahead.closing(lambda: False, constrained, bias, first)
        assert cache.n_tokens == n  # cut back
    finally:
        engine.close()
    assert ahead is not None and ahead.ended
    key = bias.call_written(ahead.text)
    assert key is not None and json.loads(key)[0] == "capital_of"
    assert json.loads(key)[1]["country"] in ("Quenland", "Tovik") and "}}" in ahead.text
