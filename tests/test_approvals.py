"""Approvals: calls that wait for a person's decision, the `paused` ending, and resuming."""

from __future__ import annotations

import json
from typing import Any

import pytest

from aerix import AerixError, Call, EndEvent, Field, tool
from aerix._approvals import NEEDS_APPROVAL, Paused, Slot, Verdict, check_decisions, highest_id

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
    assert highest_id(paused) == 3 and highest_id(None) == 0


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
    assert Verdict().call(paused.pending[0]) is paused.pending[0]


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
