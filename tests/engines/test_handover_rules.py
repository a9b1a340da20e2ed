"""The value rules read the loop's hand-over, not its wording: with every string the agent writes
to the model changed (the results, the retries, the contract's placeholders), the rules act on
the same conversation as before (a scripted model records each generation's options; the rules
run on them with fake logits)."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

from aerix import Agent, tool
from aerix.engines.llamacpp.rules import ValueBias, handover_of, value_bias
from aerix.model import ChatMessage, Handover
from aerix.testing import ScriptedModel
from aerix.turn import CONTRACT, render_results, render_retry


def _tool(name: str, field: str, result: str) -> Any:
    return tool(
        name=name, description=f"The {name} tool.", input={field: {"type": "string"}}, run=lambda _: result
    )


TOOLS = [
    _tool("capital_of", "country", "The capital of Quenland is Tovik."),
    _tool("population_of", "city", "Tovik has 87500 inhabitants."),
]


def _everywhere(monkeypatch: pytest.MonkeyPatch, old: object, new: object) -> None:
    """Put `new` wherever aerix's modules hold `old` (a module imports a function by name)."""
    for name, module in list(sys.modules.items()):
        if name == "aerix" or name.startswith("aerix."):
            for attr, value in list(vars(module).items()):
                if value is old:
                    monkeypatch.setattr(module, attr, new)


def other_results(results: Sequence[tuple[str, str, str]], dropped: int = 0) -> str:
    """Results in other words: a heading of its own, the tool before the id, a colon."""
    lines = ["Here is what the tools said (Output follows)."]
    lines += [f"<<{tool_name} as {call_id}>>: {text}" for call_id, tool_name, text in results]
    return "\n".join(lines + ([f"{dropped} dropped."] if dropped else []))


def other_retry(reason: str, *, cut: bool, max_tokens: int, final_only: bool = False) -> str:
    return f"Once more, please (Output follows): {reason}"


OTHER_CONTRACT = CONTRACT.replace("<your answer>", "<the answer in words>").replace(
    "<tool name>", "<a tool's name>"
)

RUNS = [
    '{"calls":[{"tool":"capital_of","input":{"country":"Quenland"}}',  # not JSON: asked again
    '{"calls":[{"tool":"capital_of","input":{"country":"Quenland"}}]}',
    '{"calls":[{"tool":"population_of","input":{"city":"Tovik"}}]}',
    '{"final":"87500"}',
]


def recorded(monkeypatch: pytest.MonkeyPatch | None) -> list[tuple[list[ChatMessage], dict[str, Any]]]:
    """Each generation's messages and options in a run through both tools, the wording changed
    (`monkeypatch`) or not (`None`)."""
    if monkeypatch is not None:
        _everywhere(monkeypatch, render_results, other_results)
        _everywhere(monkeypatch, render_retry, other_retry)
        monkeypatch.setattr("aerix.turn._system.CONTRACT", OTHER_CONTRACT)
    model = ScriptedModel(RUNS)
    agent = Agent(model=model, tools=TOOLS, tool_choice="required")
    assert asyncio.run(agent.ask("What is the population of the capital of Quenland?")).text == "87500"
    for call in model.calls:
        assert call.opts["handover"].calls is not None  # read now, with the wording of the run
    return [(c.messages, c.opts) for c in model.calls]


PIECES = ["Tovik", "Here", "Output", "capital_of", "population_of", '"']
TOVIK, HERE, OUTPUT = 0, 1, 2


def bias(messages: list[ChatMessage], opts: dict[str, Any], written: str) -> ValueBias:
    b = value_bias(
        opts["constraint"]["json"],
        handover_of(messages, opts.get("handover")),
        copy=2.0,
        close=0.0,
        piece=PIECES.__getitem__,
        check_optional=False,
        pick=True,
        new_calls=True,
        placeholders=True,
    )
    b.feed(written.encode())
    return b


INPUT = '{"calls":[{"tool":"population_of","input":{"city":"'
TOOL = '{"calls":[{"tool":"'


def test_the_wording_changed_changes_what_the_model_reads_and_nothing_the_rules_do(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    plain = recorded(None)
    changed = recorded(monkeypatch)
    # The model reads other words...
    assert [m[-1]["content"] for m, _ in plain] != [m[-1]["content"] for m, _ in changed]
    assert (
        "Output follows" in changed[2][0][-1]["content"]
        and "<the answer in words>" in changed[0][0][0]["content"]
    )
    # ...and the hand-over is what it was, field by field, but the contract's placeholders.
    for (_, before), (_, after) in zip(plain, changed, strict=True):
        a, b = before["handover"], after["handover"]
        assert (a.request, a.first_turn, a.calls, a.said, a.texts) == (
            b.request,
            b.first_turn,
            b.calls,
            b.said,
            b.texts,
        )
    assert changed[0][1]["handover"].placeholders == ("<a tool's name>", "<the answer in words>")


def test_the_rules_act_on_the_changed_wording(monkeypatch: pytest.MonkeyPatch) -> None:
    (first, o1), (retry, o2), (second, o3), _ = recorded(monkeypatch)
    # The first turn picks its tool for the request, and so does its retry.
    assert bias(first, o1, TOOL).tool.picks_tool and bias(retry, o2, TOOL).tool.picks_tool
    # A later turn leans away from the call made, and copies the tool's words, not the loop's.
    later = bias(second, o3, TOOL)
    assert later.tool.names_again and not later.tool.picks_tool
    out = bias(second, o3, INPUT).apply(np.zeros(len(PIECES), dtype=np.float32))
    assert out[TOVIK] == 2.0 and out[HERE] == 0.0 and out[OUTPUT] == 0.0
    # No value copies the contract's placeholders, whatever their words.
    final = bias(first, o1, '{"final":"')
    assert final.holders.copies("<the answer in words>") and not final.holders.copies("<your answer>")


def test_without_a_hand_over_the_rules_read_only_the_users_messages(monkeypatch: pytest.MonkeyPatch) -> None:
    """An engine called without the loop's hand-over copies from the user's messages as they
    are: the rules that need the loop's reading (the pick, new calls, placeholders) do not act."""
    (first, o1), _, (second, o3), _ = recorded(monkeypatch)
    bare = [{k: v for k, v in o.items() if k != "handover"} for o in (o1, o3)]
    assert not bias(first, bare[0], TOOL).tool.picks_tool
    assert not bias(second, bare[1], TOOL).tool.names_again
    out = bias(second, bare[1], INPUT).apply(np.zeros(len(PIECES), dtype=np.float32))
    assert out[TOVIK] == 2.0 and out[HERE] == 2.0  # the loop's words are copied too: it did not say which
    assert handover_of(second, None) == Handover(
        said=tuple(m["content"] for m in second if m["role"] == "user"),
        texts=tuple(m["content"] for m in second if m["role"] == "user"),
    )


def test_a_server_engine_sends_no_hand_over() -> None:
    from aerix.engines.openai._chat_request import build_body

    opts: Any = {
        "max_tokens": 8,
        "handover": Handover(request="q"),
        "constraint": {"json": {"type": "object"}},
    }
    body = build_body("m", [{"role": "user", "content": "q"}], opts, dialect="json_schema", extra_body={})
    assert "handover" not in body and "q" not in str({k: v for k, v in body.items() if k != "messages"})
