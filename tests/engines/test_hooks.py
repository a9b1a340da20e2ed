"""The decode hooks (`aerix.engines.llamacpp._hooks`): each rule alone, on a fake step, and the
protocol on the real decode loop (a tiny GGUF)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from _steps import fake_step, rules_for

from aerix.engines import LlamaCpp
from aerix.engines.llamacpp._hooks import (
    DecodedAhead,
    DecodeHook,
    OptionalFieldCheck,
    Step,
    StringChoices,
    ValueNudges,
    default_hooks,
)
from aerix.engines.llamacpp._lookahead import Ahead

PIECES = ['{"city":"', "San", "Bos", " Francisco", '"}', ',"note":"', "}", "5", "0.05"]
SOURCE = "The weather in San Francisco, 5% off"


class FakeLookahead:
    """Answers every look-ahead from a table: first token → the value's text and log-probability."""

    def __init__(self, values: dict[int, tuple[str, float]]) -> None:
        self.values = values
        self.asked: list[Any] = []

    def ahead(self, stopped: Any, constrained: Any, bias: Any, token: Any, choice: bool = False) -> Ahead:
        self.asked.append(token)
        text, log_p = self.values.get(token if isinstance(token, int) else token[0], ("", 0.0))
        return Ahead(text, log_p, ended=True)

    def judged(self, stopped: Any, constrained: Any, bias: Any, token: Any, judge: Any) -> bool:
        return bool(judge(self.ahead(stopped, constrained, bias, token).text))

    def allowed(self, constrained: Any, text: str | None, room: int | None) -> list[int]:
        return [] if text is None or text not in PIECES else [PIECES.index(text)]


def step(
    written: str,
    lookahead: FakeLookahead | None = None,
    *,
    temperature: float = 0.0,
    convert_values: bool = False,
) -> Step:
    bias = rules_for(SOURCE, copy=2.5, close=2.0, piece=PIECES.__getitem__, convert_values=convert_values)
    bias.feed(written.encode())
    return fake_step(bias, PIECES, lookahead or FakeLookahead({}), temperature)


def test_the_hooks_follow_the_options() -> None:
    options: dict[str, Any] = {"copy_bias": 2.5, "close_bias": 2, "string_choices": 3, "check_optional": True}
    names = [type(h).__name__ for h in default_hooks(**options, convert_values=True)]
    assert names == [
        "ValueNudges",
        "StringChoices",
        "OptionalFieldCheck",
        "DecodedAhead",
        "OptionalFieldOffer",
    ]
    # By default nothing writes a value the model did not choose: no DecodedAhead.
    assert [type(h).__name__ for h in default_hooks(**options)] == [
        "ValueNudges",
        "StringChoices",
        "OptionalFieldCheck",
        "OptionalFieldOffer",
    ]
    no_copy = default_hooks(**{**options, "copy_bias": 0}, convert_values=True)
    assert "DecodedAhead" not in [type(h).__name__ for h in no_copy]  # part of the copy bias
    assert default_hooks(copy_bias=0, close_bias=0, string_choices=1, check_optional=False) == ()
    only_close = default_hooks(copy_bias=0, close_bias=2, string_choices=1, check_optional=False)
    assert [type(h).__name__ for h in only_close] == ["ValueNudges"]  # nothing is decoded ahead


def test_a_base_hook_changes_nothing() -> None:
    s, hook = step('{"city":"'), DecodeHook()
    logits = np.zeros(len(PIECES), dtype=np.float32)
    assert not hook.active(s)
    assert hook.adjust(s, logits) is logits and hook.choose(s, 3) == 3 and hook.write(s, 3) is None


def test_the_nudges_lean_to_the_users_words() -> None:
    s = step('{"city":"')
    assert ValueNudges().active(s)
    out = ValueNudges().adjust(s, np.zeros(len(PIECES), dtype=np.float32))
    assert out[PIECES.index("San")] == pytest.approx(2.5) and out[PIECES.index("Bos")] == 0


INPUT = '{"calls":[{"tool":"w","input":{'


def test_string_choices_keep_a_sure_first_token() -> None:
    s = step(INPUT + '"city":"')
    assert StringChoices(3).active(s)
    s.logits = np.full(len(PIECES), -10.0, dtype=np.float32)
    s.logits[PIECES.index("Bos")] = 5.0  # the model is sure
    assert StringChoices(3).choose(s, PIECES.index("Bos")) == PIECES.index("Bos")


def test_string_choices_take_the_likeliest_whole_value() -> None:
    san, bos = PIECES.index("San"), PIECES.index("Bos")
    look = FakeLookahead({san: ("San Francisco", -0.5), bos: ("Boston", -6.0)})
    s = step(INPUT + '"city":"', look)
    s.logits = np.full(len(PIECES), -np.inf, dtype=np.float32)
    s.logits[[san, bos, PIECES.index("0.05")]] = [0.0, 0.2, -0.5]  # Bos a little likelier, and unsure
    assert StringChoices(2).choose(s, bos) == san
    assert sorted(look.asked) == [san, bos]
    assert not StringChoices(2).active(step(INPUT + '"city":"San', look))  # not the start of a value


def test_the_optional_field_check_closes_an_unsupported_field() -> None:
    note, close = PIECES.index(',"note":"'), PIECES.index("}")
    tool = '{"calls":[{"tool":"w","input":{"city":"San Francisco"'
    s = step(tool, FakeLookahead({note: (',"note":"sunny"', 0.0)}))
    assert OptionalFieldCheck().active(s)
    s.logits = np.zeros(len(PIECES), dtype=np.float32)
    assert OptionalFieldCheck().choose(s, note) == close  # "sunny" is nowhere in the request
    s2 = step(tool, FakeLookahead({note: (',"note":"weather"', 0.0)}))
    s2.logits = np.zeros(len(PIECES), dtype=np.float32)
    assert OptionalFieldCheck().choose(s2, note) == note  # the request gives it


def test_decoded_ahead_writes_a_percentage_as_its_fraction() -> None:
    five = PIECES.index("5")
    look = FakeLookahead({five: ("5,", 0.0)})
    s = step('{"calls":[{"tool":"w","input":{"discount":', look, convert_values=True)
    assert DecodedAhead().active(s)
    assert DecodedAhead().write(s, five) == [PIECES.index("0.05")]
    # Without convert_values the rules write nothing, even where the hook is in the list.
    plain = step('{"calls":[{"tool":"w","input":{"discount":', look)
    assert DecodedAhead().write(plain, five) is None
    assert DecodedAhead().write(step('{"calls":[{"tool":"w","input":{"city":"'), PIECES.index("San")) is None


# -- the protocol on the real loop ------------------------------------------------------------


class WriteOnce(DecodeHook):
    """Writes `text` (must be one the schema allows) at the first step, then stays quiet."""

    def __init__(self, text: str) -> None:
        self.text, self.done, self.seen = text, False, 0

    def active(self, step: Step) -> bool:
        self.seen += 1
        return not self.done

    def write(self, step: Step, token: int) -> list[int] | None:
        self.done = True
        return step.allowed(self.text) or None


CITY = {
    "type": "object",
    "properties": {"city": {"type": "string", "maxLength": 12}},
    "required": ["city"],
    "additionalProperties": False,
}
SCHEMA = {
    "type": "object",
    "properties": {"input": CITY},
    "required": ["input"],
    "additionalProperties": False,
}
"""Nested as a tool's input is (the rules act from depth 2 on)."""


async def generate(engine: LlamaCpp) -> str:
    opts: Any = {"max_tokens": 40, "temperature": 0, "constraint": {"json": SCHEMA}}
    out = [d.text async for d in engine.chat([{"role": "user", "content": "Weather in Oslo?"}], opts)]
    return "".join(out)


async def test_a_hook_writes_through_the_real_loop(tiny_gguf: Path) -> None:
    engine = LlamaCpp(tiny_gguf, n_ctx=512)
    try:
        plain = json.loads(await generate(engine))
        hook = WriteOnce('"Oslo"')  # the schema forces `{"input":{"city":` first
        engine._decoder.hooks = (hook,)
        written = json.loads(await generate(engine))
    finally:
        engine.close()
    assert written == {"input": {"city": "Oslo"}} and plain != written
    assert hook.done and hook.seen == 1  # asked at every step; the schema forced the rest


async def test_without_hooks_the_loop_only_follows_the_schema(tiny_gguf: Path) -> None:
    """Removing every rule leaves a valid value: the rules are units, not the constraint."""
    engine = LlamaCpp(
        tiny_gguf,
        n_ctx=512,
        copy_bias=0,
        close_bias=0,
        pick_bias=0,
        new_call_bias=0,
        string_choices=1,
        check_optional=False,
        no_placeholders=False,
    )
    try:
        assert engine._decoder.hooks == ()
        value = json.loads(await generate(engine))
    finally:
        engine.close()
    assert set(value["input"]) == {"city"} and isinstance(value["input"]["city"], str)
