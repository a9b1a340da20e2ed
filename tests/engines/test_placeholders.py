"""No value copies a placeholder of the system prompt (`NoPlaceholders`, `Handover.placeholders`;
which they are is the loop's reading: tests/test_handover.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from _steps import fake_step, rules_for

from aerix import AerixError
from aerix.engines import LlamaCpp
from aerix.engines.llamacpp._hooks import NoPlaceholders, default_hooks
from aerix.engines.llamacpp._lookahead import Ahead

PIECES = ["<", "<your", "The", "Mar", "<5", '"', "est"]
LT, LT_YOUR, THE, MAR, LT5 = 0, 1, 2, 3, 4
CONTRACT_HOLDERS = ("<tool name>", "<your answer>")
"""The contract's placeholders of a value (`<the tool's fields>` stands for an object's fields)."""


class TableLookahead:
    """A look-ahead that answers from a table: first token → the value's text (then `"}`)."""

    def __init__(self, texts: dict[int, str]) -> None:
        self.texts = texts
        self.asked: list[int] = []

    def ahead(
        self, stopped: Any, constrained: Any, bias: Any, token: Any, choice: bool = False
    ) -> Ahead | None:
        self.asked.append(token)
        text = self.texts.get(token)
        return None if text is None else Ahead(text + '"}', -1.0, ended=True)


def _step(
    written: str, look: TableLookahead, logits: list[float], *, holders: tuple[str, ...] = CONTRACT_HOLDERS
) -> Any:
    bias = rules_for(
        "The capital of Veloria is Marest.",
        copy=2.5,
        close=2.0,
        piece=PIECES.__getitem__,
        placeholders=holders,
    )
    bias.feed(written.encode())
    step = fake_step(bias, PIECES, look)
    step.logits = np.array(logits, dtype=np.float32)
    return step


def test_a_final_that_would_copy_the_placeholder_draws_another_first_token() -> None:
    look = TableLookahead({LT: "<your answer>", THE: "The capital is Marest"})
    step = _step('{"final":"', look, [5.0, 1.0, 2.0, 1.5, -np.inf, -np.inf, -np.inf])
    hook = NoPlaceholders()
    assert hook.active(step)
    # Greedy: "<" leads to the placeholder, so the next likeliest, "The", is taken.
    assert hook.choose(step, LT) == THE
    assert look.asked == [LT]  # "The" is on the way to no placeholder: not read ahead


def test_every_token_on_the_way_to_a_placeholder_is_left_out_in_turn() -> None:
    look = TableLookahead({LT: "<your answer>", LT_YOUR: "<your answer> is Marest", THE: "The answer"})
    step = _step('{"final":"', look, [5.0, 4.0, 2.0, -np.inf, -np.inf, -np.inf, -np.inf])
    assert NoPlaceholders().choose(step, LT) == THE
    assert look.asked == [LT, LT_YOUR]


def test_words_in_angle_brackets_that_open_as_a_placeholder_does_are_one() -> None:
    bias = _step('{"final":"', TableLookahead({}), [0.0] * 7).bias
    assert bias.holders.copies("<your answer>") and bias.holders.copies('<your answer>"}')
    assert bias.holders.copies("<your final answer>")  # SmolLM2's own variant
    assert bias.holders.copies("<tool name> is capital_of")
    for value in ("<yourself>", "<b>Marest</b>", "<5 ms", "your answer", "The <your answer>", "<your", ""):
        assert not bias.holders.copies(value), value
    assert bias.holders.may_copy("<") and bias.holders.may_copy("<your")
    assert not bias.holders.may_copy("<b") and not bias.holders.may_copy("The")


def test_a_value_that_only_starts_like_a_placeholder_stays() -> None:
    look = TableLookahead({LT: "<b>Marest</b>", LT5: "<5 ms"})
    step = _step('{"final":"', look, [5.0, 1.0, 2.0, 1.5, 0.0, -np.inf, -np.inf])
    assert NoPlaceholders().choose(step, LT) == LT  # read ahead: not the placeholder
    assert NoPlaceholders().choose(step, LT5) == LT5  # "<5" is on the way to none: not even read
    assert look.asked == [LT]


def test_a_tool_input_value_is_checked_too_and_the_model_gives_up_after_its_tries() -> None:
    look = TableLookahead({LT: "<tool name>", LT_YOUR: "<your answer>", THE: "<the tool's fields>"})
    tool = '{"calls":[{"tool":"capital_of","input":{"country":"'
    step = _step(tool, look, [5.0, 4.0, 3.0, -np.inf, -np.inf, -np.inf, -np.inf])
    assert NoPlaceholders(tries=2).choose(step, LT) == THE  # two left out; the third is kept
    # Every allowed token leads to a placeholder: the last one stays rather than none.
    only = _step(tool, TableLookahead({LT: "<tool name>"}), [5.0] + [-np.inf] * 6)
    assert NoPlaceholders().choose(only, LT) == LT


def test_the_hook_acts_only_at_the_first_token_of_a_string_value() -> None:
    look = TableLookahead({})
    hook = NoPlaceholders()
    assert not hook.active(_step('{"final":"Mar', look, [0.0] * 7))  # the value is under way
    assert not hook.active(_step('{"fin', look, [0.0] * 7))  # a key, not a value
    assert not hook.active(
        _step('{"calls":[{"tool":"capital_of","input":{"n":', look, [0.0] * 7)
    )  # no string
    assert not hook.active(_step('{"final":"', look, [0.0] * 7, holders=()))  # no placeholders


def test_the_option_turns_the_hook_on_and_off(tmp_path: Path) -> None:
    options: dict[str, Any] = {"copy_bias": 0, "close_bias": 0, "string_choices": 1, "check_optional": False}
    assert [type(h).__name__ for h in default_hooks(**options, no_placeholders=True)] == ["NoPlaceholders"]
    assert default_hooks(**options) == ()
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF" + bytes(64))
    with pytest.raises(AerixError, match="no_placeholders must be True or False, got 'yes'"):
        LlamaCpp(gguf, no_placeholders="yes")  # type: ignore[arg-type]
