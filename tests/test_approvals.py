"""Approvals: calls that wait for a person's decision, the `paused` ending, and resuming."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from aerix import (
    AbortController,
    AerixError,
    Agent,
    Call,
    CallEvent,
    EndEvent,
    Field,
    FinalEvent,
    ResultEvent,
    tool,
)
from aerix._approvals import NEEDS_APPROVAL, Paused, Slot, Verdict, check_decisions, highest_id
from aerix.sessions import SQLiteSession
from aerix.testing import Fail, ScriptedModel, Stall

# -- the tool's flag and the ending --------------------------------------------------------


def delete(path: str) -> str:
    """Delete a file.

    Args:
        path: The file's path.
    """
    return f"deleted {path}"


def test_a_tool_needs_no_approval_unless_it_says_so() -> None:
    assert tool(delete).needs_approval is False
    assert tool(delete, needs_approval=True).needs_approval is True
    assert tool(needs_approval=True)(delete).needs_approval is True
    explicit = tool(name="wipe", input={}, run=lambda input: "wiped", needs_approval=True)
    assert explicit.needs_approval is True
    from_schema = tool(name="wipe", schema={"type": "object"}, run=lambda input: "", needs_approval=True)
    assert from_schema.needs_approval is True
    both = tool(
        name="wipe", input={"x": Field("string")}, run=lambda i: "", blocking=False, needs_approval=True
    )
    assert (both.needs_approval, both.blocking) == (True, False)
    assert tool(delete).annotations == {}


@pytest.mark.parametrize("value", [1, "yes", None, 0.0])
def test_needs_approval_must_be_a_bool(value: object) -> None:
    with pytest.raises(AerixError) as caught:
        tool(delete, needs_approval=value)  # type: ignore[call-overload]
    assert caught.value.kind == "options"
    assert caught.value.message.startswith("tool 'delete': needs_approval must be True (each call waits")
    assert caught.value.message.endswith(f"got {value!r}")


def test_a_paused_end_carries_its_waiting_calls_in_its_dict_and_repr() -> None:
    waiting = (Call(id="call_2", tool="delete", input={"path": "a.txt"}),)
    ev = EndEvent(
        reason="paused", message="waiting for a decision: call_2 delete (needs approval)", pending=waiting
    )
    d = ev.to_dict()
    assert d == {
        "type": "end",
        "reason": "paused",
        "message": "waiting for a decision: call_2 delete (needs approval)",
        "pending": [{"id": "call_2", "tool": "delete", "input": {"path": "a.txt"}}],
    }
    assert json.loads(json.dumps(d)) == d
    assert "pending=(Call(id='call_2'" in repr(ev)
    other = EndEvent(reason="abort", message="aborted")
    assert other.pending == () and "pending" not in other.to_dict() and "pending" not in repr(other)


# -- the paused turn and the decisions, directly ---------------------------------------------

TOOLS = {"delete": tool(delete), "add": tool(name="add", input={}, run=lambda input: "2")}


def _paused() -> Paused:
    return Paused(
        messages=(
            {"role": "user", "content": "tidy up"},
            {"role": "assistant", "content": '{"calls":[...]}'},
        ),
        slots=(
            Slot(call=Call(id="call_1", tool="delete", input={"path": "a"}), reason=NEEDS_APPROVAL),
            Slot(call=Call(id="call_2", tool="add", input={}), result=("2", False)),
            Slot(call=Call(id="call_3", tool="delete", input={"path": "b"}), reason="over budget"),
        ),
    )


def test_a_paused_turn_names_its_waiting_calls_with_their_reasons() -> None:
    paused = _paused()
    assert [c.id for c in paused.pending] == ["call_1", "call_3"]
    assert (
        paused.message
        == "waiting for a decision: call_1 delete (needs approval), call_3 delete (over budget)"
    )
    later = paused.done("call_1", "deleted a", False)
    assert [c.id for c in later.pending] == ["call_3"]
    assert paused.pending != later.pending  # the first is unchanged
    assert later.done("call_3", "refused: no", True).results == [
        ("call_1", "delete", "deleted a"),
        ("call_2", "add", "2"),
        ("call_3", "delete", "refused: no"),
    ]
    assert highest_id([], paused) == 3 and highest_id([]) == 0


def test_a_paused_turn_knows_when_a_conversation_holds_its_results_already() -> None:
    paused = _paused()
    assert not paused.settled_in([{"role": "user", "content": "Results:\n[call_7 add] 2"}])
    assert not paused.settled_in([{"role": "assistant", "content": "[call_1 delete] done"}])
    kept = [
        *paused.messages,
        {"role": "user", "content": "Results:\n[call_1 delete] deleted a\n[call_2 add] 2"},
    ]
    assert paused.settled_in(kept)
    assert paused.settled_in([*kept, {"role": "assistant", "content": '{"final":"ok"}'}])


def test_a_paused_turn_goes_through_json_and_back_whole() -> None:
    paused = _paused()
    again = Paused.of_json(json.loads(json.dumps(paused.to_json())), TOOLS, "state['pending']")
    assert again == paused
    assert paused.to_json()["calls"][1] == {
        "id": "call_2",
        "tool": "add",
        "input": {},
        "result": "2",
        "error": False,
    }
    assert paused.to_json()["calls"][2] == {
        "id": "call_3",
        "tool": "delete",
        "input": {"path": "b"},
        "reason": "over budget",
    }


def _broken(change: Any) -> Any:
    value = _paused().to_json()
    change(value)
    return value


@pytest.mark.parametrize(
    ("value", "said"),
    [
        (
            [],
            "state['pending'] must be a dict with the keys messages, calls, dropped, answer_next, got a list",
        ),
        (_broken(lambda v: v.update(extra=1)), "state['pending'] has the unknown key 'extra'"),
        (_broken(lambda v: v.update(messages=[])), "state['pending']['messages'] must be a non-empty list"),
        (
            _broken(lambda v: v["messages"].pop()),
            "state['pending']['messages'] must end with the paused turn's reply, a message of role 'assistant'",
        ),
        (
            _broken(lambda v: v["messages"][0].update(role="system")),
            "state['pending']['messages'][0] must have role 'user' or 'assistant'",
        ),
        (
            _broken(lambda v: v["calls"][0].update(tool="shred")),
            "state['pending']['calls'][0]['tool'] is 'shred', a tool this agent does not have "
            "(its tools: 'delete', 'add'); restore the state in an agent with the same tools",
        ),
        (
            _broken(lambda v: v["calls"][2].update(id="call_1")),
            "['calls'][2]['id'] 'call_1' names an earlier call",
        ),
        (_broken(lambda v: v["calls"][0].update(id="first")), "['calls'][0]['id'] must be a call id such as"),
        (_broken(lambda v: v["calls"][0].update(input=[1])), "['calls'][0]['input'] must be a JSON object"),
        (_broken(lambda v: v["calls"][0].update(reason=3)), "['calls'][0]['reason'] must be a string, got 3"),
        (
            _broken(lambda v: v["calls"][1].update(error="no")),
            "['calls'][1] must have a str result and a bool",
        ),
        (
            _broken(lambda v: v["calls"][1].pop("error")),
            "['calls'][1] must have the keys id, tool, input, and",
        ),
        (
            _broken(lambda v: v.update(calls=[v["calls"][1]])),
            "['calls'] has no waiting call (one with a reason); nothing is left to decide",
        ),
        (_broken(lambda v: v.update(dropped=-1)), "state['pending']['dropped'] must be a count of calls"),
        (_broken(lambda v: v.update(answer_next=1)), "state['pending']['answer_next'] must be True or False"),
    ],
)
def test_a_bad_paused_turn_is_refused_naming_the_fault(value: object, said: str) -> None:
    with pytest.raises(AerixError) as caught:
        Paused.of_json(value, TOOLS, "state['pending']")
    assert caught.value.kind == "options"
    assert said in caught.value.message, caught.value.message


def test_every_decision_form_gives_its_verdict() -> None:
    paused = _paused()
    assert check_decisions(paused, {"call_1": True, "call_3": False}) == {
        "call_1": Verdict(),
        "call_3": Verdict(refusal="refused: denied"),
    }
    given = {"path": "c"}
    verdicts = check_decisions(paused, {"call_3": {"deny": "not today"}, "call_1": {"input": given}})
    assert list(verdicts) == ["call_1", "call_3"]  # in call order
    assert verdicts["call_3"] == Verdict(refusal="refused: not today")
    assert verdicts["call_1"].call(paused.pending[0]) == Call(id="call_1", tool="delete", input={"path": "c"})
    given["path"] = "changed"  # the verdict has its own copy
    assert verdicts["call_1"].input == {"path": "c"}
    waiting = paused.pending[0]
    assert Verdict().call(waiting) is waiting
    waiting.input["path"] = "changed"  # a copy: the paused turn's own input stays
    assert paused.pending[0].input == {"path": "a"}


@pytest.mark.parametrize(
    ("decisions", "said"),
    [
        ({"call_1": True}, "bad decisions: no decision for call_3 ("),
        ({}, "bad decisions: no decision for call_1, call_3 ("),
        (
            {"call_1": True, "call_3": True, "call_2": True, 7: False},
            "bad decisions: no call waits with the id 'call_2', 7 (",
        ),
        ({"call_1": 1, "call_3": True}, "bad decisions: call_1: 1 is not a decision ("),
        (
            {"call_1": "yes", "call_3": None},
            "call_1: 'yes' is not a decision; call_3: None is not a decision (",
        ),
        ({"call_1": {"deny": 3}, "call_3": True}, "call_1: the deny reason must be a string, got 3 ("),
        ({"call_1": {"deny": "\ud800"}, "call_3": True}, "call_1: the deny reason[0] is '\\ud800', a lone"),
        ({"call_1": {"input": [1]}, "call_3": True}, "call_1: the input must be a dict, got [1] ("),
        (
            {"call_1": {"input": {"x": {1}}}, "call_3": True},
            "call_1: the input must be JSON, but input.x is {1}",
        ),
        (
            {"call_1": {"deny": "x", "input": {}}, "call_3": True},
            "call_1: {'deny': 'x', 'input': {}} is not a",
        ),
        ({"call_1": {"approve": True}, "call_3": True}, "call_1: {'approve': True} is not a decision ("),
    ],
)
def test_a_missing_extra_or_bad_decision_is_refused_naming_the_ids(decisions: object, said: str) -> None:
    with pytest.raises(AerixError) as caught:
        check_decisions(_paused(), decisions)
    message = caught.value.message
    assert caught.value.kind == "options"
    assert said in message, message
    assert (
        "the waiting calls are call_1, call_3; each takes True (run it), False or {'deny': reason}" in message
    )
    assert message.endswith("; nothing was changed")


def test_decisions_that_are_no_mapping_are_shown_what_they_look_like() -> None:
    with pytest.raises(AerixError) as caught:
        check_decisions(_paused(), [True, True])
    assert caught.value.message.startswith(
        "decisions must map each waiting call's id to a decision, got a list: e.g. {'call_1': True, 'call_3': True}"
    )


# -- the loop: a turn that pauses, and resuming it ---------------------------------------------

WIPED: list[str] = []


@tool(needs_approval=True)
def wipe(path: str) -> str:
    """Delete a file.

    Args:
        path: The file's path.
    """
    WIPED.append(path)
    return f"deleted {path}"


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def turn(*calls: tuple[str, dict[str, Any]]) -> str:
    return json.dumps({"calls": [{"tool": name, "input": input} for name, input in calls]})


def final(text: str = "done") -> str:
    return json.dumps({"final": text})


TIDY = turn(("add", {"a": 1, "b": 2}), ("wipe", {"path": "a.txt"}))
"""A turn of two calls: one runs, one waits."""


def paused_agent(*script: Any, **kw: Any) -> tuple[Agent, ScriptedModel]:
    model = ScriptedModel([TIDY, *script])
    kw.setdefault("tools", [add, wipe])
    kw.setdefault("calls_per_turn", 2)
    return Agent(model=model, **kw), model


async def collect(events: Any) -> list[Any]:
    return [ev async for ev in events]


@pytest.fixture(autouse=True)
def _forget_wiped() -> Any:
    WIPED.clear()
    yield
    WIPED.clear()


async def test_a_call_that_needs_approval_pauses_the_run_after_the_turns_other_calls() -> None:
    agent, _ = paused_agent()
    events = await collect(agent.run("tidy up"))
    assert [ev.type for ev in events] == ["text", "usage", "turn", "call", "result", "end"]
    assert events[3] == CallEvent(id="call_1", tool="add", input={"a": 1, "b": 2})
    assert events[4] == ResultEvent(id="call_1", tool="add", text="3", error=False)
    waiting = Call(id="call_2", tool="wipe", input={"path": "a.txt"})
    assert events[-1] == EndEvent(
        reason="paused", message="waiting for a decision: call_2 wipe (needs approval)", pending=(waiting,)
    )
    assert agent.pending == (waiting,)
    assert WIPED == []
    assert agent.messages == ()  # the prompt and the paused turn join when the run resumes
    assert not agent.busy


async def test_approving_runs_the_call_and_gives_the_model_every_result_of_the_turn_in_one_message() -> None:
    agent, model = paused_agent(final("tidied"))
    await collect(agent.run("tidy up"))
    events = await collect(agent.resume({"call_2": True}))
    assert [ev.type for ev in events] == ["call", "result", "text", "usage", "final"]
    assert events[0] == CallEvent(id="call_2", tool="wipe", input={"path": "a.txt"})
    assert events[1] == ResultEvent(id="call_2", tool="wipe", text="deleted a.txt", error=False)
    assert events[-1] == FinalEvent(text="tidied")
    assert WIPED == ["a.txt"]
    results = "Results:\n[call_1 add] 3\n[call_2 wipe] deleted a.txt"
    assert model.calls[1].messages[1:] == [
        {"role": "user", "content": "tidy up"},
        {"role": "assistant", "content": TIDY},
        {"role": "user", "content": results},
    ]
    assert [m["content"] for m in agent.messages] == ["tidy up", TIDY, results, final("tidied")]
    assert agent.pending == ()


@pytest.mark.parametrize(
    ("decision", "text"),
    [
        (False, "refused: denied"),
        ({"deny": "keep it"}, "refused: keep it"),
        ({"input": {"path": "b.txt"}}, "deleted b.txt"),
        ({"input": {"path": 3}}, "error: input.path: expected string, got 3"),
        ({"input": {}}, "error: input: missing required field 'path'"),
    ],
)
async def test_every_decision_form_gives_its_result(decision: Any, text: str) -> None:
    agent, model = paused_agent(final())
    await collect(agent.run("tidy up"))
    events = await collect(agent.resume({"call_2": decision}))
    result = next(ev for ev in events if ev.type == "result")
    assert result.text == text and result.error == (not text.startswith("deleted"))
    shown = next(ev for ev in events if ev.type == "call")
    assert shown.input == (
        decision["input"] if isinstance(decision, dict) and "input" in decision else {"path": "a.txt"}
    )
    assert (["b.txt"] if text == "deleted b.txt" else []) == WIPED
    assert model.calls[1].messages[-1]["content"].endswith(f"[call_2 wipe] {text}")


async def test_a_pause_from_before_call_names_its_reason_and_keeps_the_input_it_put_in_place() -> None:
    seen: list[str] = []

    def before(call: Call) -> Any:
        seen.append(call.id)
        if call.tool == "add":
            return {"pause": "over budget"} if call.input["a"] > 100 else {"input": {"a": 7, "b": 8}}
        return {"input": {"path": "safe.txt"}}

    model = ScriptedModel(
        [turn(("add", {"a": 500, "b": 1}), ("add", {"a": 1, "b": 1}), ("wipe", {"path": "x"})), final()]
    )
    agent = Agent(model=model, tools=[add, wipe], calls_per_turn=3, hooks={"before_call": before})
    events = await collect(agent.run("go"))
    end = events[-1]
    assert end.reason == "paused"
    assert end.message == "waiting for a decision: call_1 add (over budget), call_3 wipe (needs approval)"
    assert end.pending == (
        Call(id="call_1", tool="add", input={"a": 500, "b": 1}),
        Call(id="call_3", tool="wipe", input={"path": "safe.txt"}),  # before_call's input, waiting
    )
    assert [ev.text for ev in events if ev.type == "result"] == ["15"]
    assert seen == ["call_1", "call_2", "call_3"]
    resumed = await collect(agent.resume({"call_1": True, "call_3": True}))
    assert seen == ["call_1", "call_2", "call_3"]  # an approved call does not pass before_call again
    assert [(ev.id, ev.text) for ev in resumed if ev.type == "result"] == [
        ("call_1", "501"),
        ("call_3", "deleted safe.txt"),
    ]
    assert model.calls[1].messages[-1]["content"] == (
        "Results:\n[call_1 add] 501\n[call_2 add] 15\n[call_3 wipe] deleted safe.txt"
    )


async def test_a_deny_from_before_call_wins_over_needs_approval() -> None:
    agent, _ = paused_agent(
        final(), hooks={"before_call": lambda c: {"deny": "no"} if c.tool == "wipe" else None}
    )
    events = await collect(agent.run("tidy up"))
    assert events[-1] == FinalEvent(text="done")
    assert [ev.text for ev in events if ev.type == "result"] == ["3", "refused: no"]
    assert agent.pending == ()


@pytest.mark.parametrize("reason", [3, None, ["x"]])
async def test_a_pause_reason_that_is_not_a_string_ends_the_run_with_error(reason: Any) -> None:
    agent, _ = paused_agent(hooks={"before_call": lambda c: {"pause": reason}})
    events = await collect(agent.run("tidy up"))
    assert events[-1] == EndEvent(
        reason="error", message=f"hook before_call: the pause reason must be a string, got {reason!r}"
    )
    assert agent.pending == () and agent.messages == ()


async def test_after_call_sees_an_approved_calls_result_not_a_refusal() -> None:
    after: list[tuple[str, str]] = []

    def hook(call: Call, text: str) -> None:
        after.append((call.id, text))

    model = ScriptedModel([turn(("wipe", {"path": "a"}), ("wipe", {"path": "b"})), final()])
    agent = Agent(model=model, tools=[wipe], calls_per_turn=2, hooks={"after_call": hook})
    await collect(agent.run("go"))
    await collect(agent.resume({"call_1": True, "call_2": False}))
    assert after == [("call_1", "deleted a")]


async def test_a_paused_later_turn_joins_without_the_prompt_which_joined_with_the_first() -> None:
    model = ScriptedModel([turn(("add", {"a": 1, "b": 1})), turn(("wipe", {"path": "z"})), final("ok")])
    agent = Agent(model=model, tools=[add, wipe])
    events = await collect(agent.run("go"))
    assert events[-1].reason == "paused"
    assert [m["role"] for m in agent.messages] == ["user", "assistant", "user"]  # the first turn is kept
    await collect(agent.resume({"call_2": True}))
    assert [m["content"] for m in agent.messages][3:] == [
        turn(("wipe", {"path": "z"})),
        "Results:\n[call_2 wipe] deleted z",
        final("ok"),
    ]


async def test_a_turn_whose_every_call_waits_runs_none_and_has_no_call_events() -> None:
    model = ScriptedModel([turn(("wipe", {"path": "a"}), ("wipe", {"path": "b"})), final()])
    agent = Agent(model=model, tools=[wipe], calls_per_turn=2)
    events = await collect(agent.run("go"))
    assert [ev.type for ev in events] == ["text", "usage", "turn", "end"]
    assert [c.id for c in events[-1].pending] == ["call_1", "call_2"]


async def test_concurrent_calls_pause_the_same_way() -> None:
    agent, model = paused_agent(final(), concurrent_calls=True)
    events = await collect(agent.run("tidy up"))
    assert [ev.type for ev in events][2:] == ["turn", "call", "result", "end"]
    await collect(agent.resume({"call_2": True}))
    assert model.calls[1].messages[-1]["content"] == "Results:\n[call_1 add] 3\n[call_2 wipe] deleted a.txt"


async def test_ask_raises_the_paused_ending() -> None:
    agent, _ = paused_agent()
    with pytest.raises(AerixError) as caught:
        await agent.ask("tidy up")
    assert caught.value.kind == "end" and caught.value.reason == "paused"
    assert (
        caught.value.message
        == "the run ended without a final (paused): waiting for a decision: call_2 wipe (needs approval)"
    )
    assert caught.value.events[-1].pending == agent.pending


def test_the_sync_forms_pause_and_resume() -> None:
    agent, _ = paused_agent(final("tidied"))
    assert list(agent.run_sync("tidy up"))[-1].reason == "paused"
    assert list(agent.resume_sync({"call_2": True}))[-1] == FinalEvent(text="tidied")
    assert WIPED == ["a.txt"]


# -- bad decisions, busy, reset ------------------------------------------------------------------


async def test_a_bad_decision_changes_nothing() -> None:
    agent, model = paused_agent(final())
    await collect(agent.run("tidy up"))
    before = agent.state()
    for decisions in ({}, {"call_2": "yes"}, {"call_2": True, "call_9": True}, ["call_2"]):
        with pytest.raises(AerixError) as caught:
            agent.resume(decisions)  # type: ignore[arg-type]
        assert caught.value.kind == "options" and "call_2" in caught.value.message
        with pytest.raises(AerixError):
            agent.resume_sync(decisions)  # type: ignore[arg-type]
    assert agent.state() == before and len(model.calls) == 1 and not agent.busy
    assert (await collect(agent.resume({"call_2": True})))[-1] == FinalEvent(text="done")


async def test_run_is_busy_while_calls_wait_and_resume_needs_calls_that_wait() -> None:
    agent, _ = paused_agent(final())
    with pytest.raises(AerixError) as caught:
        agent.resume({})
    assert caught.value.kind == "options"
    assert caught.value.message == "no call waits for a decision (agent.pending is empty); use run"
    await collect(agent.run("tidy up"))
    for start in (lambda: agent.run("again"), lambda: agent.run_sync("again")):
        with pytest.raises(AerixError) as busy:
            start()
        assert busy.value.kind == "busy"
        assert busy.value.message == (
            "the agent is paused, waiting for a decision: call_2 wipe (needs approval); decide them with "
            "agent.resume(...) or forget them with agent.reset()"
        )
    with pytest.raises(AerixError) as bad_signal:
        agent.resume({"call_2": True}, signal="stop")  # type: ignore[arg-type]
    assert bad_signal.value.kind == "options"


async def test_resume_during_a_run_is_busy() -> None:
    model = ScriptedModel([TIDY, Stall()])
    agent = Agent(model=model, tools=[add, wipe], calls_per_turn=2)
    await collect(agent.run("tidy up"))
    resumed = agent.resume({"call_2": True})
    first = await resumed.__anext__()
    assert first.type == "call"
    # the resumed run is under way (its generation stalls): a second resume or run is busy
    with pytest.raises(AerixError) as caught:
        agent.resume({"call_2": True})
    assert caught.value.kind == "busy"
    await resumed.aclose()


async def test_reset_forgets_the_waiting_calls() -> None:
    agent, _ = paused_agent(final("fresh"))
    await collect(agent.run("tidy up"))
    agent.reset()
    assert agent.pending == () and agent.state() == {"messages": [], "pending": None}
    events = await collect(agent.run("again"))  # runs again: the script's next turn is the final
    assert events[-1] == FinalEvent(text="fresh")


# -- state across agents -------------------------------------------------------------------------


async def test_state_carries_the_waiting_calls_to_another_agent_through_json() -> None:
    first, _ = paused_agent()
    await collect(first.run("tidy up"))
    state = json.loads(json.dumps(first.state()))
    assert state == {
        "messages": [],
        "pending": {
            "messages": [{"role": "user", "content": "tidy up"}, {"role": "assistant", "content": TIDY}],
            "calls": [
                {"id": "call_1", "tool": "add", "input": {"a": 1, "b": 2}, "result": "3", "error": False},
                {"id": "call_2", "tool": "wipe", "input": {"path": "a.txt"}, "reason": "needs approval"},
            ],
            "dropped": 0,
            "answer_next": False,
        },
    }
    model = ScriptedModel([final("tidied"), turn(("add", {"a": 2, "b": 2})), final("4")])
    second = Agent(model=model, tools=[add, wipe], calls_per_turn=2, state=state)
    assert second.pending == first.pending
    events = await collect(second.resume({"call_2": True}))
    assert events[-1] == FinalEvent(text="tidied")
    assert model.calls[0].messages[1:] == [
        {"role": "user", "content": "tidy up"},
        {"role": "assistant", "content": TIDY},
        {"role": "user", "content": "Results:\n[call_1 add] 3\n[call_2 wipe] deleted a.txt"},
    ]
    more = await collect(second.run("and 2 + 2?"))
    assert [ev.id for ev in more if ev.type == "call"] == ["call_3"]  # the ids go on from the state's
    third = Agent(model=ScriptedModel([]), tools=[add, wipe], state=json.loads(json.dumps(second.state())))
    assert third.messages == second.messages and third.pending == ()


async def test_a_state_naming_a_tool_the_agent_lacks_is_refused_naming_it() -> None:
    first, _ = paused_agent()
    await collect(first.run("tidy up"))
    with pytest.raises(AerixError) as caught:
        Agent(model=ScriptedModel([]), tools=[add], state=first.state())
    assert caught.value.kind == "options"
    assert caught.value.message == (
        "state['pending']['calls'][1]['tool'] is 'wipe', a tool this agent does not have (its tools: 'add'); "
        "restore the state in an agent with the same tools"
    )


@pytest.mark.parametrize(
    ("state", "said"),
    [
        (
            [],
            "state must be what Agent.state() gives: a dict with the keys 'messages' and 'pending', got a list",
        ),
        ({"messages": []}, "got the keys 'messages'"),
        ({"messages": [], "pending": None, "x": 1}, "got the keys 'messages', 'pending', 'x'"),
        ({"messages": "hi", "pending": None}, "state['messages'] must be a list of messages"),
        (
            {"messages": [{"role": "system", "content": "x"}], "pending": None},
            "state['messages'][0] must have role",
        ),
        ({"messages": [], "pending": {"calls": []}}, "state['pending']['messages'] must be a non-empty list"),
    ],
)
def test_a_bad_state_is_refused_naming_the_fault(state: Any, said: str) -> None:
    with pytest.raises(AerixError) as caught:
        Agent(model=ScriptedModel([]), tools=[add], state=state)
    assert caught.value.kind == "options"
    assert said in caught.value.message, caught.value.message


async def test_a_repeat_in_the_paused_turn_still_makes_the_next_generation_answer() -> None:
    model = ScriptedModel(
        [
            turn(("add", {"a": 1, "b": 1})),
            turn(("add", {"a": 1, "b": 1}), ("add", {"a": 1, "b": 1}), ("wipe", {"path": "p"})),
            final(),
        ]
    )
    agent = Agent(model=model, tools=[add, wipe], calls_per_turn=3, limits={"repeats": 1})
    await collect(agent.run("go"))
    state = json.loads(json.dumps(agent.state()))
    assert state["pending"]["answer_next"] is True
    again = Agent(model=model, tools=[add, wipe], calls_per_turn=3, state=state)
    await collect(again.resume({"call_4": True}))
    assert model.calls[-1].opts["constraint"]["json"] == again._contract.schema("none", False)


# -- endings: one per run, aborts at each moment, hooks and engines that fail --------------------


async def test_an_aborted_signal_ends_a_resumed_run_before_anything_runs_and_the_calls_still_wait() -> None:
    agent, _ = paused_agent(final())
    await collect(agent.run("tidy up"))
    controller = AbortController()
    controller.abort("not now")
    events = await collect(agent.resume({"call_2": True}, signal=controller.signal))
    assert events == [EndEvent(reason="abort", message="not now")]
    assert WIPED == [] and [c.id for c in agent.pending] == ["call_2"]


async def test_an_abort_during_a_resumed_call_keeps_the_results_before_it_and_its_call_waiting() -> None:
    started = asyncio.Event()

    @tool(needs_approval=True)
    async def slow(path: str) -> str:
        """Take long."""
        started.set()
        await asyncio.sleep(3600)
        return "never"

    model = ScriptedModel([turn(("wipe", {"path": "a"}), ("slow", {"path": "b"})), final("after")])
    agent = Agent(model=model, tools=[wipe, slow], calls_per_turn=2)
    await collect(agent.run("go"))
    controller = AbortController()
    events: list[Any] = []

    async def consume() -> None:
        async for ev in agent.resume({"call_1": True, "call_2": True}, signal=controller.signal):
            events.append(ev)

    task = asyncio.create_task(consume())
    await started.wait()
    controller.abort("stop it")
    await task
    assert [ev.type for ev in events] == ["call", "result", "call", "end"]
    assert events[-1] == EndEvent(reason="abort", message="stop it")
    assert WIPED == ["a"] and [c.id for c in agent.pending] == ["call_2"]  # call_1's result is kept
    assert agent.state()["pending"]["calls"][0] == {
        "id": "call_1",
        "tool": "wipe",
        "input": {"path": "a"},
        "result": "deleted a",
        "error": False,
    }
    again = await collect(agent.resume({"call_2": {"deny": "too slow"}}))
    assert [ev.type for ev in again] == ["call", "result", "text", "usage", "final"]
    assert model.calls[-1].messages[-1]["content"] == (
        "Results:\n[call_1 wipe] deleted a\n[call_2 slow] refused: too slow"
    )


async def test_an_abort_during_the_paused_turns_other_call_ends_with_abort_and_nothing_waits() -> None:
    started = asyncio.Event()

    @tool
    async def hang() -> str:
        """Hang."""
        started.set()
        await asyncio.sleep(3600)
        return "never"

    model = ScriptedModel([turn(("wipe", {"path": "a"}), ("hang", {}))])
    agent = Agent(model=model, tools=[wipe, hang], calls_per_turn=2)
    controller = AbortController()
    task = asyncio.create_task(collect(agent.run("go", signal=controller.signal)))
    await started.wait()
    controller.abort("enough")
    events = await task
    assert events[-1] == EndEvent(reason="abort", message="enough")
    assert [ev.type for ev in events].count("end") == 1
    assert agent.pending == () and agent.messages == ()


async def test_an_abort_between_the_last_result_and_the_pause_ends_with_abort_and_nothing_waits() -> None:
    agent, _ = paused_agent()
    controller = AbortController()
    events = []
    async for ev in agent.run("tidy up", signal=controller.signal):
        events.append(ev)
        if ev.type == "result":
            controller.abort("changed my mind")
    assert events[-1] == EndEvent(reason="abort", message="changed my mind")
    assert agent.pending == () and agent.messages == ()


async def test_a_hook_that_raises_after_a_resumed_call_ran_ends_with_error_and_it_is_not_run_again() -> None:
    def after(call: Call, text: str) -> None:
        raise RuntimeError("audit log down")

    agent, _ = paused_agent(
        final(), hooks={"after_call": lambda c, t: None if c.tool == "add" else after(c, t)}
    )
    await collect(agent.run("tidy up"))
    events = await collect(agent.resume({"call_2": True}))
    assert events[-1] == EndEvent(
        reason="error", message="hook after_call raised RuntimeError: audit log down"
    )
    # its tool ran: it waits no more, and its result says why it has none
    assert agent.pending == ()
    assert (
        "[call_2 wipe] error: the run ended before this call's result was kept"
        in agent.messages[-1]["content"]
    )


async def test_an_engine_that_fails_after_the_resumed_turn_keeps_the_turn() -> None:
    agent, _ = paused_agent(Fail(error="engine on fire"))
    await collect(agent.run("tidy up"))
    events = await collect(agent.resume({"call_2": True}))
    assert [ev.type for ev in events] == ["call", "result", "end"]
    assert events[-1] == EndEvent(reason="error", message="engine on fire")
    assert agent.pending == () and len(agent.messages) == 3  # the prompt, the turn, its results


async def test_a_consumer_that_stops_at_the_last_resumed_result_keeps_the_turn() -> None:
    agent, _ = paused_agent(final())
    await collect(agent.run("tidy up"))
    async for ev in agent.resume({"call_2": True}):
        if ev.type == "result":
            break
    assert agent.pending == () and len(agent.messages) == 3 and not agent.busy


async def test_a_resumed_run_is_bounded_by_its_own_limits() -> None:
    agent, _ = paused_agent(turn(("add", {"a": 5, "b": 5})), final(), limits={"turns": 1})
    events = await collect(agent.run("tidy up"))
    assert events[-1].reason == "paused"  # the paused run used its one generation
    events = await collect(agent.resume({"call_2": True}))
    assert events[-1] == EndEvent(reason="turns", message="no final after 1 generation (limits.turns)")
    assert [ev.type for ev in events].count("end") == 1


async def test_a_hook_that_aborts_the_run_and_pauses_its_call_ends_with_abort() -> None:
    controller = AbortController()

    def before(call: Call) -> Any:
        controller.abort("the hook stopped it")
        return {"pause": "ask a person"}

    model = ScriptedModel([turn(("add", {"a": 1, "b": 1}))])
    agent = Agent(model=model, tools=[add], hooks={"before_call": before})
    events = await collect(agent.run("go", signal=controller.signal))
    assert [ev.type for ev in events] == ["text", "usage", "turn", "end"]
    assert events[-1] == EndEvent(reason="abort", message="the hook stopped it")
    assert agent.pending == ()


# -- with a session ------------------------------------------------------------------------------


async def test_a_session_keeps_the_waiting_calls_for_another_agent_and_forgets_them_once_resumed(
    tmp_path: Path,
) -> None:
    path = tmp_path / "chats.db"
    first, _ = paused_agent(session=SQLiteSession(path))
    await collect(first.run("tidy up"))
    assert SQLiteSession(path).load_pending() == first.state()["pending"]
    assert SQLiteSession(path).load() == []  # the paused turn joins when the run resumes
    model = ScriptedModel([final("tidied")])
    second = Agent(model=model, tools=[add, wipe], calls_per_turn=2, session=SQLiteSession(path))
    assert second.pending == first.pending
    assert (await collect(second.resume({"call_2": True})))[-1] == FinalEvent(text="tidied")
    assert SQLiteSession(path).load_pending() is None
    assert [m["content"] for m in SQLiteSession(path).load()] == [
        "tidy up",
        TIDY,
        "Results:\n[call_1 add] 3\n[call_2 wipe] deleted a.txt",
        final("tidied"),
    ]


async def test_a_session_keeps_each_decided_result_of_a_resumed_run_that_stops(tmp_path: Path) -> None:
    path = tmp_path / "chats.db"
    model = ScriptedModel([turn(("wipe", {"path": "a"}), ("wipe", {"path": "b"})), final()])
    agent = Agent(model=model, tools=[wipe], calls_per_turn=2, session=SQLiteSession(path))
    await collect(agent.run("go"))
    async for ev in agent.resume({"call_1": True, "call_2": True}):
        if ev.type == "result":
            break  # the consumer leaves after the first result
    kept = SQLiteSession(path).load_pending()
    assert kept is not None and [c.get("result") for c in kept["calls"]] == ["deleted a", None]
    again = Agent(model=ScriptedModel([final()]), tools=[wipe], calls_per_turn=2, session=SQLiteSession(path))
    assert [c.id for c in again.pending] == ["call_2"]


async def test_a_session_that_kept_the_resumed_turn_but_not_that_none_wait_is_not_paused(
    tmp_path: Path,
) -> None:
    class Dies(SQLiteSession):
        """Fails to write that no call waits, as a process killed right then would."""

        def save_pending(self, pending: Any) -> None:
            if pending is None:
                raise OSError("killed")
            super().save_pending(pending)

    path = tmp_path / "chats.db"
    agent, _ = paused_agent(final(), session=Dies(path))
    await collect(agent.run("tidy up"))
    events = await collect(agent.resume({"call_2": True}))
    assert events[-1] == EndEvent(reason="error", message="killed")
    assert SQLiteSession(path).load_pending() is not None  # stale: the turn is in the conversation
    again = Agent(model=ScriptedModel([final()]), tools=[add, wipe], session=SQLiteSession(path))
    assert again.pending == () and len(again.messages) == 3
    assert (await collect(again.run("more?")))[-1] == FinalEvent(text="done")


async def test_reset_clears_the_waiting_calls_a_session_keeps(tmp_path: Path) -> None:
    path = tmp_path / "chats.db"
    agent, _ = paused_agent(session=SQLiteSession(path))
    await collect(agent.run("tidy up"))
    agent.reset()
    assert SQLiteSession(path).load_pending() is None and agent.pending == ()


def test_state_goes_with_neither_messages_nor_session(tmp_path: Path) -> None:
    state = {"messages": [], "pending": None}
    for other in ({"messages": []}, {"session": SQLiteSession(tmp_path / "s.db")}):
        with pytest.raises(AerixError) as caught:
            Agent(model=ScriptedModel([]), state=state, **other)
        assert caught.value.kind == "options" and "state=" in caught.value.message
