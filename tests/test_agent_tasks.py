"""The agent benchmark's pure parts (bench/_agent_tasks): its world's tools, its task set
and split, its answer check, and a run through `Agent` with a scripted model."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))

from _agent_tasks import world
from _agent_tasks.run import run_task, summarise, summary_table
from _agent_tasks.score import numbers, solved
from _agent_tasks.tasks import TASKS, Task, part_of
from aerix.testing import ScriptedModel


def call(name: str, given: dict[str, Any]) -> str:
    """What tool `name` returns for `given` (the error text for a failure)."""
    fn = world.TOOLS[name].run
    try:
        return str(fn(given, None))
    except ValueError as exc:
        return f"error: {exc}"


# -- the world's tools ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "given", "result"),
    [
        ("capital_of", {"country": "Quenland"}, "The capital of Quenland is Tovik."),
        ("capital_of", {"country": "the capital of quenland"}, "The capital of Quenland is Tovik."),
        ("capital_of", {"country": "France"}, "error: no country named 'France'"),
        ("population_of", {"city": "Belun"}, "Belun has 1250000 inhabitants."),
        ("population_of", {"city": "Quenland"}, "error: no city named 'Quenland'"),  # a country
        ("price_of", {"product": "Zorbix"}, "The Zorbix lamp costs 42.5 dollars."),
        ("price_of", {"product": "lamp"}, "error: no product named 'lamp'"),
        (
            "flight_hours",
            {"origin": "Tovik", "destination": "Marest"},
            "The flight from Tovik to Marest takes 3.5 hours.",
        ),
        (
            "flight_hours",
            {"origin": "Tovik", "destination": "Caskin"},
            "error: no direct flight between Tovik and Caskin",
        ),
        ("home_city", {"person": "ilsa moravec"}, "Ilsa Moravec lives in Rivasco."),
        ("calculator", {"expression": "3 * (4 + 5)"}, "27"),
        ("calculator", {"expression": "37 times 48 ="}, "1776"),
        ("calculator", {"expression": "412,000 + 87,500"}, "499500"),
        ("calculator", {"expression": "1 / 3"}, "0.3333"),
        (
            "convert",
            {"value": 15, "from_unit": "kilometers", "to_unit": "miles"},
            "15 kilometers is 9.3206 miles",
        ),
        (
            "convert",
            {"value": 23, "from_unit": "celsius", "to_unit": "fahrenheit"},
            "23 celsius is 73.4 fahrenheit",
        ),
        ("convert", {"value": 6.4, "from_unit": "crowns", "to_unit": "dollars"}, "6.4 crowns is 1 dollars"),
    ],
)
def test_the_tools_look_up_compute_and_convert(name: str, given: dict[str, Any], result: str) -> None:
    assert call(name, given) == result


@pytest.mark.parametrize(
    "expression", ["", "2 +", "__import__('os')", "2 ** 1000", "1 / 0", "abs(-2)", "'a' * 3", "True + 1"]
)
def test_the_calculator_refuses_what_is_not_arithmetic(expression: str) -> None:
    with pytest.raises(ValueError, match="cannot evaluate .*write numbers"):
        world.calculate(expression)


def test_units_of_different_kinds_do_not_convert() -> None:
    with pytest.raises(ValueError, match="cannot convert kilometers to pounds"):
        world.convert_value(1, "kilometers", "pounds")
    assert world.convert_value(7, "miles", "miles") == 7


# -- the task set -----------------------------------------------------------------------


def test_the_task_set_is_fixed_and_split_in_halves_by_id() -> None:
    assert len(TASKS) >= 30
    assert [t.id for t in TASKS] == [f"agent_{n:02d}" for n in range(1, len(TASKS) + 1)]
    parts = [part_of(t) for t in TASKS]
    assert parts[:4] == ["tuning", "report", "tuning", "report"]
    assert parts.count("tuning") == parts.count("report")
    # as many tasks of one, two and three calls in each part, and every tool in both
    for part in ("tuning", "report"):
        mine = [t for t in TASKS if part_of(t) == part]
        assert sorted(len(t.plan) for t in mine) == [1] * 8 + [2] * 7 + [3] * 3, part
        assert {name for t in mine for name in t.tools} == set(world.TOOLS), part


def given_in(value: object, text: str) -> bool:
    """Whether `text` gives the input value `value` (a calculator's expression: each of its numbers)."""
    if isinstance(value, str) and not numbers(value):
        return value.casefold() in text.casefold()
    found = numbers(value) if isinstance(value, str) else [float(value)]  # type: ignore[arg-type]
    return all(solved(text, x) for x in found)


@pytest.mark.parametrize("task", TASKS, ids=lambda t: t.id)
def test_each_plan_reaches_the_answer_through_the_tools(task: Task) -> None:
    assert 1 <= len(task.plan) <= 3
    assert task.tools == tuple(dict.fromkeys(name for name, _ in task.plan))
    assert not solved(task.prompt, task.answer)  # the question does not give it away
    seen, chained = task.prompt, False
    for name, given in task.plan:
        for value in given.values():  # every input comes from the question or an earlier result
            assert given_in(value, seen), (name, value)
            chained = chained or not given_in(value, task.prompt)
        result = call(name, given)
        assert not result.startswith("error"), result
        seen += "\n" + result
    assert solved(result, task.answer), (result, task.answer)
    assert chained == (len(task.plan) > 1)  # a later call uses what an earlier one returned


# -- the answer check -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("final", "answer", "right"),
    [
        ("The capital of Veloria is Marest.", "Marest", True),
        ("marest", "Marest", True),
        ("Marestville", "Marest", False),
        ("The capital is Veloria.", "Marest", False),
        ("Tovik has 87,500 inhabitants.", 87500, True),
        ("Tovik has 87500.0 inhabitants.", 87500, True),
        ("about 87 thousand", 87500, False),
        ("87.5 thousand people", 87500, True),
        ("Belun: 1.25 million", 1250000, True),
        ("15 km is 9.32 miles", 9.3206, True),
        ("15 km is 9.3 miles", 9.3206, False),
        ("40 kg is 88.18 pounds", 88.1848, True),
        ("40 kg is 88.19 pounds", 88.1848, False),
        ("It costs 56.25 dollars.", 56.25, True),
        ("It costs $56.", 56.25, False),
        ("no number", 3.5, False),
        ("-2 degrees", -2, True),
    ],
)
def test_a_final_holds_the_answer_as_a_word_or_a_number(final: str, answer: str | float, right: bool) -> None:
    assert solved(final, answer) is right


def test_numbers_are_read_with_separators_and_scales() -> None:
    assert numbers("412,000 and 87500, then 1.5 million or 3.") == [412000, 87500, 1500000, 3]


# -- runs through the Agent -------------------------------------------------------------


def planned(task: Task, final: str | None = None) -> ScriptedModel:
    """A model that makes the task's plan of calls, then answers with the last result
    (or `final`)."""
    turns: list[Any] = [json.dumps({"calls": [{"tool": n, "input": given}]}) for n, given in task.plan]
    if final is None:
        turns.append(lambda messages: json.dumps({"final": messages[-1]["content"]}))
    else:
        turns.append(json.dumps({"final": final}))
    return ScriptedModel(turns)


@pytest.mark.parametrize("task", [TASKS[0], TASKS[18], TASKS[35]], ids=lambda t: t.id)
def test_a_run_that_follows_the_plan_is_solved(task: Task) -> None:
    o = asyncio.run(run_task(planned(task), task, "scripted"))
    assert (o.solved, o.ending, o.generations) == (True, "final", len(task.plan) + 1)
    assert [c["tool"] for c in o.calls] == [n for n, _ in task.plan]
    assert not any(c["error"] for c in o.calls)


def test_a_wrong_final_or_no_final_is_not_solved() -> None:
    task = TASKS[16]  # the population of the capital of Quenland
    wrong = asyncio.run(run_task(planned(task, final="Quenland"), task, "scripted"))
    assert (wrong.solved, wrong.ending) == (False, "final")
    broken = asyncio.run(run_task(ScriptedModel([]), task, "scripted"))
    assert (broken.solved, broken.ending, broken.generations) == (False, "error", 0)


def test_the_summary_puts_the_report_part_first_with_the_gap() -> None:
    tuning, report = TASKS[0], TASKS[1]
    outcomes = [
        asyncio.run(run_task(planned(tuning), tuning, "a")),
        asyncio.run(run_task(planned(report, final="no idea"), report, "a")),
    ]
    assert (summarise("a", "tuning", outcomes).solved, summarise("a", "report", outcomes).solved) == (1, 0)
    table = summary_table([("a", "config A"), ("b", "not run")], outcomes).splitlines()
    assert table[0].startswith("| configuration | report: solved |")
    assert len(table) == 3  # the header, its rule and config A: a config with no runs has no row
    assert table[2].startswith("| config A | 0.0% (0/1) | 100.0% (1/1) |")
    assert table[2].endswith("| -100.0 points |")
    only = summary_table([("a", "config A")], [o for o in outcomes if o.part == "report"]).splitlines()
    assert "tuning" not in only[0] and "points" not in only[2]  # a part that did not run has no columns
    assert only[2].startswith("| config A | 0.0% (0/1) | 100.0% (1/1) |")
    assert len(only[2].strip("| ").split(" | ")) == 6  # the label and the report part's five figures
    # A configuration that ran one part only (a peer run on the report part): "not run", no gap.
    peer = asyncio.run(run_task(planned(report), report, "peer"))
    mixed = summary_table([("a", "config A"), ("peer", "the peer")], [*outcomes, peer]).splitlines()
    assert mixed[3].startswith("| the peer | 100.0% (1/1) | 100.0% (1/1) |")
    assert mixed[3].endswith("| not run | — | — | — | — | — |")


def test_the_side_by_side_says_how_the_runs_without_a_final_ended() -> None:
    from _agent_tasks.run import Outcome
    from agent_peers import CONFIGS, SERVERS, failures, what_failed

    def outcome(config: str, ending: str, final: str = "") -> Outcome:
        return Outcome(
            id="agent_02", part="report", config=config, solved=False, ending=ending, final=final,
            generations=1, seconds=0.1,
        )  # fmt: skip

    runs = [
        outcome("a", "final"),
        outcome("b", "error", "HTTP 400: request (4436 tokens) exceeds the available context size"),
        outcome("b", "turns"),
        outcome("b", "error", "second"),
    ]
    assert what_failed(runs, "a") is None
    assert what_failed(runs, "b") == (
        "2 `error`, 1 `turns`; the first error: "
        "'HTTP 400: request (4436 tokens) exceeds the available context size'"
    )
    # Only the configurations whose runs did not all end with a final are listed.
    listed = failures(runs, [("a", "config A"), ("b", "config B")])
    assert listed[0].endswith("(every run of the other configurations did):")
    assert listed[2:] == [f"- config B: {what_failed(runs, 'b')}."]
    assert failures(runs, [("a", "config A")]) == ["Every run ended with a final."]
    assert all(server is None or server in SERVERS for _, server in CONFIGS.values())


def test_the_peers_outcome_has_the_fields_of_an_outcome() -> None:
    from _agent_tasks.peers import outcome
    from _agent_tasks.run import Outcome

    task = next(t for t in TASKS if t.id == "agent_02")
    got = Outcome(**outcome(task, "pydantic-ai", "final", task.answer, 2, [], 0.0))
    assert got.solved and got.part == "report" and got.generations == 2
    assert not Outcome(**outcome(task, "pydantic-ai", "turns", task.answer, 8, [], 0.0)).solved
