"""Calls that wait for a person: the paused turn, its JSON form, and the decisions on it.

A turn whose calls include some that wait (a tool with `needs_approval`, or a call
that `before_call` paused) runs its other calls, then the run ends `paused`. The
agent keeps the turn as a `Paused`: the messages that join the conversation once
the turn completes (the run's prompt, if it was the run's first turn, and the
turn's reply), and each call of the turn, waiting with its reason or done with
its result. `Agent.resume` takes one decision for each waiting call, checked here
(`check_decisions`) before anything runs; each decided call's result goes into
the `Paused` as it comes (`Paused.done`), and once none waits, the turn's results
go to the model in one message. `Paused.to_json` and `Paused.of_json` carry it
through `Agent.state()` and a session's `save_pending`, in another process too.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from ._checks import unencodable
from ._window import result_ids
from .errors import AerixError, a_kind
from .events import Call
from .model import ChatMessage
from .options import not_json
from .tools import Tool, json_copy

if TYPE_CHECKING:
    from ._calls import Seen

__all__ = ["NEEDS_APPROVAL", "Paused", "Slot", "Verdict", "check_decisions", "check_state", "highest_id"]

NEEDS_APPROVAL = "needs approval"
"""The reason a call of a tool made with `needs_approval=True` waits."""

FORMS = (
    "True (run it), False or {'deny': reason} (refuse it: refused: denied, refused: <reason>) "
    "or {'input': {...}} (run it with that input)"
)
"""The decisions `Agent.resume` takes, as its errors list them."""

_CALL_ID = re.compile(r"^call_([1-9][0-9]{0,17})$")


@dataclass(frozen=True, kw_only=True, slots=True)
class Slot:
    """One call of a paused turn: waiting for a decision, or done."""

    call: Call
    """The call, with the input `before_call` put in place, if it did."""
    reason: str | None = None
    """Why it waits (`NEEDS_APPROVAL`, or what `before_call`'s pause said); `None` once done."""
    result: tuple[str, bool] | None = None
    """Its result text and error flag, once done."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Verdict:
    """A checked decision on one waiting call."""

    input: dict[str, Any] | None = None
    """Run the call with this input (`{"input": ...}`); `None`: with the input it waits with."""
    refusal: str | None = None
    """Refuse it: its result, `refused: <reason>`."""

    def call(self, waiting: Call) -> Call:
        """The call to run on this decision."""
        return waiting if self.input is None else replace(waiting, input=self.input)


@dataclass(frozen=True, kw_only=True, slots=True)
class Paused:
    """A turn whose calls wait for decisions: what the agent keeps until it resumes."""

    messages: tuple[ChatMessage, ...]
    """What joins the conversation when the turn completes: the run's prompt (if the
    turn was the run's first) and the turn's reply, the last message."""
    slots: tuple[Slot, ...]
    """Every call of the turn, in call order."""
    dropped: int = 0
    """Calls of the turn beyond the most a turn holds, dropped (the results message says so)."""
    answer_next: bool = False
    """A call of the turn repeated an earlier one past `limits.repeats`: the next generation
    may only answer."""

    @classmethod
    def of_turn(
        cls, messages: Sequence[ChatMessage], calls: Sequence[Call], seen: Seen, dropped: int
    ) -> Paused:
        """A turn whose calls wait, once its other calls are done.

        Args:
            messages: The run's messages not yet kept (its prompt, for its first turn) and
                the turn's reply.
            calls: The turn's calls, in order.
            seen: The run's calls so far, `seen.played` the turn's (done or waiting).
            dropped: Calls of the turn beyond the most a turn holds.
        """
        order = {c.id: i for i, c in enumerate(calls)}
        played = sorted(seen.played, key=lambda p: order[p[0].id])
        slots = tuple(Slot(call=call, reason=reason, result=result) for call, reason, result in played)
        return cls(messages=tuple(messages), slots=slots, dropped=dropped, answer_next=seen.repeated)

    @property
    def pending(self) -> tuple[Call, ...]:
        """The calls that wait, in call order: copies, whose inputs the caller may change."""
        return tuple(
            Call(id=s.call.id, tool=s.call.tool, input=json_copy(s.call.input))
            for s in self.slots
            if s.result is None
        )

    @property
    def message(self) -> str:
        """The `paused` ending's message: each waiting call with its reason."""
        waiting = ", ".join(f"{s.call.id} {s.call.tool} ({s.reason})" for s in self.slots if s.result is None)
        return f"waiting for a decision: {waiting}"

    def settled_in(self, messages: Sequence[ChatMessage]) -> bool:
        """Whether `messages` hold a result of one of this turn's calls already: the turn joined
        the conversation, and this waiting state is stale (a session that kept the completed turn,
        but not yet that no call waits). Call ids are unique within a conversation.

        Args:
            messages: A conversation.
        """
        ids = {s.call.id for s in self.slots}
        return any(call_id in ids for call_id in result_ids(messages))

    def done(self, call_id: str, text: str, error: bool) -> Paused:
        """This turn with the result of one of its waiting calls in."""
        slots = tuple(
            Slot(call=s.call, result=(text, error)) if s.call.id == call_id else s for s in self.slots
        )
        return replace(self, slots=slots)

    @property
    def results(self) -> list[tuple[str, str, str]]:
        """`(call id, tool name, result text)` for every call, in order (all of them done)."""
        out = []
        for s in self.slots:
            assert s.result is not None, "a call still waits"
            out.append((s.call.id, s.call.tool, s.result[0]))
        return out

    def to_json(self) -> dict[str, Any]:
        """Plain JSON, which `Paused.of_json` takes back."""
        calls: list[dict[str, Any]] = []
        for s in self.slots:
            item: dict[str, Any] = {"id": s.call.id, "tool": s.call.tool, "input": json_copy(s.call.input)}
            if s.result is None:
                item["reason"] = s.reason
            else:
                item["result"], item["error"] = s.result
            calls.append(item)
        return {
            "messages": [{"role": m["role"], "content": m["content"]} for m in self.messages],
            "calls": calls,
            "dropped": self.dropped,
            "answer_next": self.answer_next,
        }

    @classmethod
    def of_json(cls, value: object, tools: Mapping[str, Tool], where: str) -> Paused:
        """A paused turn from its JSON form, for an agent with `tools`.

        Args:
            value: What `to_json` gave (through `json.dumps` and `json.loads`, say).
            tools: The agent's tools: every call's tool must be one of them.
            where: How errors name `value` (`"state['pending']"`).

        Raises:
            AerixError: `kind="options"`, naming the bad part of `value` and what it must be.
        """
        keys = ("messages", "calls", "dropped", "answer_next")
        if not isinstance(value, Mapping):
            raise _bad(f"{where} must be a dict with the keys {', '.join(keys)}, got {a_kind(value)}")
        if unknown := [k for k in value if k not in keys]:
            raise _bad(f"{where} has the unknown key {unknown[0]!r}; its keys are {', '.join(keys)}")
        messages = _messages(value.get("messages"), f"{where}['messages']", reply_last=True)
        slots = _slots(value.get("calls"), tools, f"{where}['calls']")
        dropped = value.get("dropped", 0)
        if isinstance(dropped, bool) or not isinstance(dropped, int) or dropped < 0:
            raise _bad(f"{where}['dropped'] must be a count of calls (0 or more), got {dropped!r}")
        answer_next = value.get("answer_next", False)
        if not isinstance(answer_next, bool):
            raise _bad(f"{where}['answer_next'] must be True or False, got {answer_next!r}")
        return cls(messages=messages, slots=slots, dropped=dropped, answer_next=answer_next)


def _bad(message: str) -> AerixError:
    return AerixError("options", message)


def _messages(value: object, where: str, *, reply_last: bool = False) -> tuple[ChatMessage, ...]:
    """User and assistant messages (`reply_last`: a paused turn's, its reply last)."""
    if reply_last and (not isinstance(value, Sequence) or isinstance(value, str) or not value):
        raise _bad(f"{where} must be a non-empty list of messages, the paused turn's reply last")
    if not isinstance(value, Sequence) or isinstance(value, str):
        raise _bad(f"{where} must be a list of messages (dicts with role and content), got {a_kind(value)}")
    out: list[ChatMessage] = []
    for i, m in enumerate(value):
        if not isinstance(m, Mapping) or set(m) != {"role", "content"}:
            raise _bad(f"{where}[{i}] must be a dict with exactly role and content, got {m!r}")
        if m["role"] not in ("user", "assistant") or not isinstance(m["content"], str):
            raise _bad(f"{where}[{i}] must have role 'user' or 'assistant' and a str content, got {m!r}")
        if (problem := unencodable(m["content"])) is not None:
            raise _bad(f"{where}[{i}]['content']{problem}")
        out.append({"role": m["role"], "content": m["content"]})
    if reply_last and out[-1]["role"] != "assistant":
        raise _bad(f"{where} must end with the paused turn's reply, a message of role 'assistant'")
    return tuple(out)


def _slots(value: object, tools: Mapping[str, Tool], where: str) -> tuple[Slot, ...]:
    """The paused turn's calls: unique ids, the agent's tools, JSON inputs, one or more waiting."""
    if not isinstance(value, Sequence) or isinstance(value, str) or not value:
        raise _bad(f"{where} must be a non-empty list of the paused turn's calls")
    slots: list[Slot] = []
    for i, item in enumerate(value):
        at = f"{where}[{i}]"
        if not isinstance(item, Mapping):
            raise _bad(f"{at} must be a dict (id, tool, input, and reason or result and error), got {item!r}")
        waits = "reason" in item
        keys = {"id", "tool", "input", "reason"} if waits else {"id", "tool", "input", "result", "error"}
        if set(item) != keys:
            raise _bad(
                f"{at} must have the keys id, tool, input, and reason (a waiting call) or result and "
                f"error (a call done); got {', '.join(map(str, item))}"
            )
        call_id, name, given = item["id"], item["tool"], item["input"]
        if not isinstance(call_id, str) or not _CALL_ID.fullmatch(call_id):
            raise _bad(f"{at}['id'] must be a call id such as 'call_3', got {call_id!r}")
        if any(s.call.id == call_id for s in slots):
            raise _bad(f"{at}['id'] {call_id!r} names an earlier call too; each call has its own id")
        if not isinstance(name, str) or name not in tools:
            have = ", ".join(repr(t) for t in tools) or "none"
            raise _bad(
                f"{at}['tool'] is {name!r}, a tool this agent does not have (its tools: {have}); "
                "restore the state in an agent with the same tools"
            )
        if not isinstance(given, dict):
            raise _bad(f"{at}['input'] must be a JSON object, got {given!r}")
        if (problem := not_json(given, "input")) is not None:
            raise _bad(f"{at}['input'] must be a JSON object, but {problem}")
        call = Call(id=call_id, tool=name, input=json_copy(given))
        if waits:
            if not isinstance(item["reason"], str):
                raise _bad(f"{at}['reason'] must be a string, got {item['reason']!r}")
            slots.append(Slot(call=call, reason=item["reason"]))
        else:
            text, error = item["result"], item["error"]
            if not isinstance(text, str) or not isinstance(error, bool):
                raise _bad(f"{at} must have a str result and a bool error, got {text!r} and {error!r}")
            slots.append(Slot(call=call, result=(text, error)))
    if all(s.result is not None for s in slots):
        raise _bad(f"{where} has no waiting call (one with a reason); nothing is left to decide")
    return tuple(slots)


STATE_KEYS = ("messages", "pending")
"""The keys of `Agent.state()`."""


def check_state(value: object, tools: Mapping[str, Tool]) -> tuple[tuple[ChatMessage, ...], Paused | None]:
    """The conversation and the paused turn of an `Agent.state()`, for an agent with `tools`.

    Args:
        value: What `Agent.state()` gave (through `json.dumps` and `json.loads`, say).
        tools: The agent's tools: every waiting call's tool must be one of them.

    Raises:
        AerixError: `kind="options"`, naming the bad part of `value` and what it must be.
    """
    if not isinstance(value, Mapping) or set(value) != set(STATE_KEYS):
        got = f"the keys {', '.join(map(repr, value))}" if isinstance(value, Mapping) else a_kind(value)
        raise _bad(
            "state must be what Agent.state() gives: a dict with the keys 'messages' and 'pending', "
            f"got {got}"
        )
    messages = _messages(value["messages"], "state['messages']")
    pending = value["pending"]
    paused = None if pending is None else Paused.of_json(pending, tools, "state['pending']")
    return messages, paused


def highest_id(messages: Sequence[ChatMessage], paused: Paused | None = None) -> int:
    """The highest call number that the results in `messages` and the calls of `paused` hold
    (0 for none): the agent's next call id follows it.

    Args:
        messages: A conversation.
        paused: A turn whose calls wait, if any.
    """
    said = (int(i.removeprefix("call_")) for i in result_ids(messages))
    waiting = () if paused is None else (int(s.call.id.removeprefix("call_")) for s in paused.slots)
    return max((*said, *waiting), default=0)


def check_decisions(paused: Paused, decisions: object) -> dict[str, Verdict]:
    """Check `Agent.resume`'s decisions: exactly one for each waiting call, each of a form it takes.

    Args:
        paused: The turn whose calls wait.
        decisions: What `resume` was given: each waiting call's id to `True`, `False`,
            `{"deny": reason}` or `{"input": {...}}`.

    Returns:
        Each waiting call's verdict by id, in call order.

    Raises:
        AerixError: `kind="options"`, naming every missing, extra and bad decision by its id
            and the forms a decision takes.
    """
    waiting = [c.id for c in paused.pending]
    expect = f"the waiting calls are {', '.join(waiting)}; each takes {FORMS}"
    if not isinstance(decisions, Mapping):
        example = ", ".join(f"{i!r}: True" for i in waiting)
        raise _bad(
            f"decisions must map each waiting call's id to a decision, got {a_kind(decisions)}: "
            f"e.g. {{{example}}}; {expect}"
        )
    problems: list[str] = []
    if missing := [i for i in waiting if i not in decisions]:
        problems.append(f"no decision for {', '.join(missing)}")
    if extra := [repr(k) for k in decisions if k not in waiting]:
        problems.append(f"no call waits with the id {', '.join(extra)}")
    verdicts: dict[str, Verdict] = {}
    for call_id in waiting:
        if call_id in decisions:
            verdict = _verdict(decisions[call_id])
            if isinstance(verdict, str):
                problems.append(f"{call_id}: {verdict}")
            else:
                verdicts[call_id] = verdict
    if problems:
        raise _bad(f"bad decisions: {'; '.join(problems)} ({expect}); nothing was changed")
    return verdicts


def _verdict(value: object) -> Verdict | str:
    """One decision as a verdict, or what is wrong with it."""
    if value is True:
        return Verdict()
    if value is False:
        return Verdict(refusal="refused: denied")
    if isinstance(value, Mapping) and len(value) == 1:
        ((key, given),) = value.items()
        if key == "deny":
            if not isinstance(given, str):
                return f"the deny reason must be a string, got {given!r}"
            if (problem := unencodable(given)) is not None:
                return f"the deny reason{problem}"
            return Verdict(refusal=f"refused: {str.__str__(given)}")
        if key == "input":
            if not isinstance(given, dict):
                return f"the input must be a dict, got {given!r}"
            if (problem := not_json(given, "input")) is not None:
                return f"the input must be JSON, but {problem}"
            return Verdict(input=json_copy(given))
    return f"{value!r} is not a decision"
