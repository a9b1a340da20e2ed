"""`aerix.testing.ScriptedModel`'s context window: a test double that refuses a prompt too long."""

from __future__ import annotations

from typing import Any

import pytest

from aerix.errors import AerixError
from aerix.model import ChatMessage, ContextExceeded, Delta, GenerateOptions
from aerix.testing import ScriptedModel


def said(*contents: str) -> list[ChatMessage]:
    return [{"role": "user", "content": c} for c in contents]


async def play(model: ScriptedModel, messages: list[ChatMessage], opts: GenerateOptions) -> list[Delta]:
    return [d async for d in model.chat(messages, opts)]


def test_a_prompts_size_is_its_characters_over_four_rounded_up_plus_four_a_message() -> None:
    assert ScriptedModel.prompt_tokens([]) == 0
    assert ScriptedModel.prompt_tokens(said("")) == 4
    assert ScriptedModel.prompt_tokens(said("abcd")) == 5
    assert ScriptedModel.prompt_tokens(said("abcde", "x" * 40)) == (2 + 4) + (10 + 4)


async def test_a_prompt_that_leaves_no_room_for_max_tokens_is_refused_before_any_delta() -> None:
    model = ScriptedModel(['{"final":"a"}', '{"final":"b"}'], context_window=100)
    fits = said("x" * 320)  # 80 + 4 = 84 tokens
    assert (await play(model, fits, {"max_tokens": 16}))[-1].done  # 84 + 16 = 100: it fits
    seen: list[Delta] = []
    with pytest.raises(ContextExceeded) as info:
        async for delta in model.chat(fits, {"max_tokens": 17}):
            seen.append(delta)
    assert seen == []
    assert (info.value.prompt_tokens, info.value.context_window) == (84, 100)
    assert str(info.value) == (
        "the prompt has 84 tokens and does not fit in the context of 100 tokens with max_tokens=17"
    )
    # The refusal played no entry and is recorded as such.
    assert model.remaining == 1
    assert [c.refused for c in model.calls] == [False, True]
    assert model.calls[1].messages == fits and model.calls[1].opts == {"max_tokens": 17}
    deltas = await play(model, fits, {"max_tokens": 16})
    assert "".join(d.text for d in deltas) == '{"final":"b"}'


async def test_without_max_tokens_a_prompt_needs_room_for_one_token() -> None:
    model = ScriptedModel(['{"final":"a"}'], context_window=85)
    with pytest.raises(ContextExceeded, match=r"of 85 tokens$"):
        await play(model, said("x" * 324), {})  # 81 + 4 = 85 tokens: no room left
    assert (await play(model, said("x" * 320), {}))[-1].done  # 84 tokens


async def test_a_refused_prompt_leaves_the_cache_accounting_as_it_was() -> None:
    model = ScriptedModel(['{"final":"a"}', '{"final":"b"}'], context_window=60)
    first = said("x" * 40)
    await play(model, first, {"max_tokens": 8})
    with pytest.raises(ContextExceeded):
        await play(model, [*first, *said("y" * 400)], {"max_tokens": 8})
    deltas = await play(model, [*first, *said("z")], {"max_tokens": 8})
    usage = deltas[-1].usage
    assert usage is not None and usage.cached_tokens == 14 and usage.prompt_tokens == 14 + 5


async def test_no_window_no_limit() -> None:
    model = ScriptedModel(['{"final":"a"}'])
    assert model.context_window is None
    assert (await play(model, said("x" * 100_000), {"max_tokens": 100_000}))[-1].done


@pytest.mark.parametrize("window", [0, -3, 2.5, "512", True])
def test_a_context_window_that_is_no_count_is_refused_naming_it(window: Any) -> None:
    with pytest.raises(AerixError) as info:
        ScriptedModel([], context_window=window)
    assert info.value.kind == "options"
    assert info.value.message == (
        "ScriptedModel: context_window must be a whole number of tokens >= 1 (or None: no limit), "
        f"got {window!r}"
    )
