"""New calls: the call a turn writes, and the `NewCalls` hook that leans a later turn's tool
name away from a call already made (`Handover.calls`; a fake step and a fake look-ahead; the
real model in test_tool_choice_real.py). Which calls were made is the loop's reading
(tests/test_handover.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from _steps import AGENT, fake_step

from aerix import tool
from aerix.engines.llamacpp._hooks import NewCalls, Step, default_hooks
from aerix.engines.llamacpp._lookahead import Ahead
from aerix.engines.llamacpp.rules import value_bias
from aerix.engines.llamacpp.rules._tools import call_key, written_call
from aerix.model import CallMade, Handover
from aerix.turn import turn_schema

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
    assert written_call(text, "input") == key


def test_a_written_call_reads_its_input_under_the_key_given() -> None:
    assert written_call('f","args":{"a":1}}', "args") == call_key("f", {"a": 1})
    assert written_call('f","args":{"a":1}}', "input") is None


def test_the_call_in_progress_is_read_from_where_the_name_is() -> None:
    bias = value_bias(SCHEMA, AGENT, copy=0, close=0, piece=str, check_optional=False)
    bias.feed(b'{"calls":[{"tool":"capi')
    assert bias.tool.call_written('tal_of","input":{"country":"Quenland"}}') == call_key(*CAPITAL)
    before = value_bias(SCHEMA, AGENT, copy=0, close=0, piece=str, check_optional=False)
    before.feed(b'{"calls":[{"tool":')  # the name's quote not written yet
    assert before.tool.call_written('"capital_of","input":{"country":"Quenland"}}') == call_key(*CAPITAL)
    assert before.tool.call_written('capital_of","input":{}}') is None


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
    handover = Handover(
        calls=tuple(CallMade(tool=t, input=i) for t, i in made),
        tool_path=AGENT.tool_path,
        input_path=AGENT.input_path,
    )
    bias = value_bias(
        schema, handover, copy=0, close=0, piece=PIECES.__getitem__, check_optional=False, new_calls=True
    )
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
        bias = value_bias(schema, AGENT, copy=0, close=0, piece=vocab.piece_text, check_optional=False)
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
    key = bias.tool.call_written(ahead.text)
    assert key is not None and json.loads(key)[0] == "capital_of"
    assert json.loads(key)[1]["country"] in ("Quenland", "Tovik") and "}}" in ahead.text
