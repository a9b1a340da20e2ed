"""The tool pick: the tools a turn schema offers where the hand-over says calls sit, and the
`ToolPick` hook that leans a call's tool name to the tools that fit the request it answers
(`Handover.request`; a fake step)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from _steps import AGENT, SITE, fake_step, rules_for

from aerix import Tool, tool
from aerix.engines.llamacpp._hooks import Step, ToolPick, default_hooks
from aerix.engines.llamacpp.rules import value_bias
from aerix.engines.llamacpp.rules._site import CallSite
from aerix.engines.llamacpp.rules._tools import tool_texts
from aerix.model import Handover
from aerix.turn import fit_text, turn_schema


def make(name: str, *fields: str) -> Tool:
    return tool(
        name=name, description=f"The {name} tool.", input={f: {"type": "string"} for f in fields}, run=str
    )


TOOLS = [make("get_weather", "city", "unit"), make("get_time", "zone"), make("book_taxi", "to")]
SCHEMA = turn_schema(TOOLS, "required")


def test_the_tools_of_a_turn_schema_read_as_name_and_fields() -> None:
    assert tool_texts(SCHEMA, SITE) == {
        "get_weather": "get_weather(city, unit)",
        "get_time": "get_time(zone)",
        "book_taxi": "book_taxi(to)",
    }
    assert tool_texts(turn_schema([make("ping")], "auto"), SITE) == {"ping": "ping()"}
    assert tool_texts(turn_schema(TOOLS, "none"), SITE) == {}  # a final only: no tool to name
    assert tool_texts({"type": "object", "properties": {"tool": {"const": "x"}}}, SITE) == {}  # no input
    assert tool_texts({"type": "string"}, SITE) == {}
    assert tool_texts(SCHEMA, CallSite()) == {}  # no calls known (no hand-over)


def test_the_tools_are_found_where_the_hand_over_says_calls_sit() -> None:
    call = {
        "type": "object",
        "properties": {"name": {"const": "ping"}, "args": {"type": "object", "properties": {"host": {}}}},
    }
    schema = {"type": "object", "properties": {"steps": {"type": "array", "items": {"anyOf": [call]}}}}
    site = CallSite(("steps", None, "name"), ("steps", None, "args"))
    assert tool_texts(schema, site) == {"ping": "ping(host)"}
    assert tool_texts(schema, SITE) == {}
    assert tool_texts(SCHEMA, site) == {}
    assert CallSite(("steps", None, "name"), ("other", None, "args")).call is None  # not one object


def test_the_pick_reads_the_tools_as_the_fit_decision_does() -> None:
    nested = tool(
        name="book",
        description="Book rooms.",
        schema={"type": "object", "properties": {"rooms": {"type": "array", "items": {"type": "object"}}}},
        run=str,
    )
    tools = [*TOOLS, nested, make("ping")]
    assert list(tool_texts(turn_schema(tools, "required"), SITE).values()) == [fit_text(t) for t in tools]


PIECES = [
    '{"calls":[{"tool":"',
    "get_",
    "get_w",
    "get_t",
    "weather",
    "time",
    "book_taxi",
    '"',
    "x",
    '"get_time"',
]
FITS = {"get_weather(city, unit)": 0.5, "get_time(zone)": -0.2, "book_taxi(to)": 0.1}


class Scorer:
    def __init__(self, fits: dict[str, float] | None = None, fail: bool = False) -> None:
        self.fits, self.fail, self.asked = fits or FITS, fail, 0

    def __call__(self, request: str, texts: list[str]) -> list[float]:
        self.asked += 1
        if self.fail:
            raise ValueError("the chat template refused the prompt")
        return [self.fits[t] for t in texts]


def step(written: str, *, request: str | None = "What is the weather in Oslo?", schema: Any = SCHEMA) -> Step:
    handover = Handover(
        request=request,
        first_turn=request is not None,
        texts=(request or "",),
        tool_path=AGENT.tool_path,
        input_path=AGENT.input_path,
    )
    bias = value_bias(
        schema, handover, copy=0, close=0, piece=PIECES.__getitem__, check_optional=False, pick=True
    )
    bias.feed(written.encode())
    return fake_step(bias, PIECES)


def adjusted(hook: ToolPick, s: Step) -> dict[str, float]:
    out = hook.adjust(s, np.zeros(len(PIECES), dtype=np.float32))
    return {p: float(out[i]) for i, p in enumerate(PIECES)}


def test_the_name_leans_to_the_tools_that_fit_by_the_gap_to_the_best() -> None:
    scorer = Scorer()
    hook = ToolPick(4.0, scorer)
    s = step('{"calls":[{"tool":"')
    assert hook.active(s)
    out = adjusted(hook, s)
    # "get_" may still become get_weather, the best: no change; "get_t" only get_time.
    assert out["get_"] == 0 and out["get_w"] == 0 and out['"'] == 0
    assert out["get_t"] == pytest.approx(4.0 * (-0.2 - 0.5))
    assert out["book_taxi"] == pytest.approx(4.0 * (0.1 - 0.5))
    assert out["x"] == 0 and out["time"] == 0  # no tool's name goes that way: left to the mask
    # Part-way through a name, the next token leans the same way; the fits are scored once.
    later = step('{"calls":[{"tool":"get_')
    later.bias.tool.fits = s.bias.tool.fits
    out = adjusted(hook, later)
    assert out["time"] == pytest.approx(4.0 * -0.7) and out["weather"] == 0 and out["book_taxi"] == 0
    assert scorer.asked == 1


def test_a_token_that_opens_and_ends_a_name_leans_as_that_tool() -> None:
    hook = ToolPick(2.0, Scorer())
    out = adjusted(hook, step('{"calls":[{"tool":'))  # the quote not yet written
    assert out['"get_time"'] == pytest.approx(2.0 * -0.7) and out['"'] == 0


@pytest.mark.parametrize(
    ("written", "request_", "schema"),
    [
        ('{"calls":[{"tool":"', None, SCHEMA),  # not the first turn for a request
        ('{"calls":[{"tool":"', "weather?", turn_schema(TOOLS[:1], "required")),  # one tool to name
        ('{"calls":[{"tool":"get_time","input":{"zone":"', "time?", SCHEMA),  # a value of the input
        ('{"calls":[{"tool":"get_time"', "time?", SCHEMA),  # the name is written
        ('{"final":"', "time?", turn_schema(TOOLS, "auto")),
    ],
)
def test_the_pick_acts_only_on_the_first_turns_tool_name(
    written: str, request_: str | None, schema: Any
) -> None:
    scorer = Scorer()
    s = step(written, request=request_, schema=schema)
    assert not ToolPick(4.0, scorer).active(s)
    assert not s.bias.tool.picks_tool
    assert scorer.asked == 0


def test_a_scorer_that_cannot_score_leaves_the_logits_alone() -> None:
    scorer = Scorer(fail=True)
    s = step('{"calls":[{"tool":"')
    out = adjusted(ToolPick(4.0, scorer), s)
    assert set(out.values()) == {0.0} and s.bias.tool.fits == {}
    adjusted(ToolPick(4.0, scorer), s)
    assert scorer.asked == 1  # not asked again within the generation


def test_the_pick_runs_first_and_only_with_a_weight_and_a_scorer() -> None:
    options: dict[str, Any] = {"copy_bias": 2.5, "close_bias": 2, "string_choices": 3, "check_optional": True}
    names = [type(h).__name__ for h in default_hooks(**options, pick_bias=5, score=Scorer())]
    assert names[0] == "ToolPick" and "ToolPick" not in names[1:]
    assert "ToolPick" not in [type(h).__name__ for h in default_hooks(**options, pick_bias=0, score=Scorer())]
    assert "ToolPick" not in [type(h).__name__ for h in default_hooks(**options, pick_bias=5)]


def test_a_value_bias_built_without_a_request_picks_nothing() -> None:
    bias = rules_for(
        "x", copy=0, close=0, piece=PIECES.__getitem__, tools=tool_texts(SCHEMA, SITE), site=SITE
    )
    bias.feed(b'{"calls":[{"tool":"')
    assert not bias.tool.picks_tool


def test_the_engine_keeps_the_latest_requests_fits(tiny_gguf: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from aerix.engines import LlamaCpp
    from aerix.engines.llamacpp import engine as engine_module

    asked: list[str] = []

    class FakeScorer:
        def fits(self, request: str, texts: list[str]) -> list[float]:
            asked.append(request)
            return [float(len(request))] * len(texts)

    monkeypatch.setattr(engine_module, "_PICKS_KEPT", 2)
    engine = LlamaCpp(tiny_gguf, n_ctx=256)
    try:
        monkeypatch.setattr(engine, "_scorer", FakeScorer)
        assert engine._fits("a", ["x()", "y()"]) == [1.0, 1.0]
        assert engine._fits("a", ["x()", "y()"]) == [1.0, 1.0] and asked == ["a"]  # kept
        engine._fits("a", ["x()"])  # other tools: scored
        engine._fits("bb", ["x()", "y()"])  # a third request: the oldest is forgotten
        engine._fits("a", ["x()"])
        assert asked == ["a", "a", "bb"]
        engine._fits("a", ["x()", "y()"])
        assert asked == ["a", "a", "bb", "a"]
    finally:
        engine.close()
