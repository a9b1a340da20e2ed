"""The context window: what `_window` sends of a conversation, and an agent that trims on a
`ScriptedModel` with a small window."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from aerix import (
    AbortController,
    Agent,
    AgentEvent,
    EndEvent,
    FinalEvent,
    Limits,
    TrimEvent,
    UsageEvent,
    tool,
)
from aerix._window import (
    KEEP,
    SHARE,
    Sent,
    Window,
    exchange_starts,
    fit,
    no_room,
    sent_messages,
    split_results,
)
from aerix.model import ChatMessage, ContextExceeded, Delta, GenerateOptions
from aerix.testing import ScriptedModel
from aerix.turn import render_results


def user(text: str) -> ChatMessage:
    return {"role": "user", "content": text}


def turn(text: str) -> ChatMessage:
    return {"role": "assistant", "content": text}


def results(*texts: str, first: int = 1, dropped: int = 0) -> ChatMessage:
    rows = [(f"call_{first + k}", "read_file", text) for k, text in enumerate(texts)]
    return user(render_results(rows, dropped))


CALL = '{"calls":[{"tool":"read_file","input":{"path":"a"}}]}'
FINAL = '{"final":"done"}'


def exchange(prompt: str, *long: str, first: int = 1) -> list[ChatMessage]:
    """A prompt, a turn and its results for each text of `long`, and a final."""
    out = [user(prompt)]
    for k, text in enumerate(long):
        out += [turn(CALL), results(text, first=first + k)]
    return [*out, turn(FINAL)]


# -- the pieces -------------------------------------------------------------------------------


def test_exchanges_begin_at_each_prompt_not_at_results() -> None:
    conversation = [
        *exchange("first", "a" * 50),  # 0..3
        user("second"),  # 4: a run that ended at its turns limit, after results
        turn(CALL),
        results("b"),
        user("third"),  # 7: two user messages in a row
        turn(FINAL),
    ]
    assert exchange_starts(conversation) == [0, 4, 7]
    assert exchange_starts([turn(FINAL), user("x")]) == [0, 1]  # whatever comes first starts one
    assert exchange_starts([]) == [0]


@pytest.mark.parametrize(
    "rows",
    [
        [("call_1", "read_file", "plain")],
        [("call_1", "a", "one\nline two\n[not a label] three"), ("call_12", "b_2", ""), ("call_3", "c", "x")],
    ],
)
@pytest.mark.parametrize("dropped", [0, 2])
def test_results_split_as_render_results_writes_them(rows: list[tuple[str, str, str]], dropped: int) -> None:
    content = render_results(rows, dropped)
    parts = split_results(content)
    assert parts is not None
    assert parts[0] == rows
    assert parts[1] == ("" if not dropped else content[content.rindex("\n") :])
    assert split_results("Results:\nno label") is None
    assert split_results("What does the file say?") is None


def test_sent_messages_leave_out_a_prefix_and_shorten_results_in_place() -> None:
    long = "L" * 1000
    conversation = [*exchange("first", long), *exchange("second", "short", long, first=2)]
    sent = sent_messages(conversation, Sent(left_out=4, shortened=frozenset({(8, 0)})))
    assert sent[:3] == conversation[4:7]  # the prompt, the turn and the short result, as they are
    parts = split_results(sent[4]["content"])
    assert parts is not None
    [(call_id, tool, text)] = parts[0]
    assert (call_id, tool) == ("call_3", "read_file")
    assert text.startswith("L" * KEEP + "…")
    assert f"[{1000 - KEEP} more characters of call_3's result left out to fit the context window; " in text
    assert text.endswith("call read_file again to read them]")
    assert sent[5] == conversation[9]
    assert sent_messages(conversation, Sent()) == conversation
    assert sent_messages(conversation, Sent(left_out=99)) == []


# -- fitting after a refusal ------------------------------------------------------------------

SYSTEM = "S" * 400


def fitted(
    conversation: list[ChatMessage],
    sent: Sent,
    run_start: int,
    *,
    window: int,
    max_tokens: int = 100,
    tail: list[ChatMessage] | None = None,
    rate: float = 0.25,
) -> tuple[list, int]:
    """`fit` after a refusal of what `sent` sent, at `rate` tokens a character (the refusal's
    own size); also the estimate of the last step's prompt, at that rate."""
    tail = tail or []
    chars = len(SYSTEM) + sum(len(m["content"]) for m in [*sent_messages(conversation, sent), *tail])
    refused = ContextExceeded(round(chars * rate), window)
    steps = fit(
        conversation,
        sent,
        run_start=run_start,
        system=SYSTEM,
        tail=tail,
        refused=refused,
        context_window=None,
        max_tokens=max_tokens,
    )
    last = steps[-1].sent if steps else sent
    size = len(SYSTEM) + sum(len(m["content"]) for m in [*sent_messages(conversation, last), *tail])
    return steps, round(size * rate)


def refit(
    conversation: list[ChatMessage],
    refused: ContextExceeded,
    run_start: int,
    *,
    sent: Sent | None = None,
    context_window: int | None = None,
) -> list:
    """`fit` after `refused`, with no tail and max_tokens 100."""
    return fit(
        conversation,
        sent or Sent(),
        run_start=run_start,
        system=SYSTEM,
        tail=[],
        refused=refused,
        context_window=context_window,
        max_tokens=100,
    )


def test_old_exchanges_are_left_out_until_three_quarters_of_the_room_is_taken() -> None:
    # Five old exchanges of about 260 tokens each, a run of its prompt only (in the tail).
    old = [m for k in range(5) for m in exchange(f"question {k}", "r" * 1000, first=k + 1)]
    tail = [user("the new question")]
    steps, size = fitted(old, Sent(), len(old), window=1000, tail=tail)
    [step] = steps
    assert step.sent.left_out in exchange_starts(old)
    assert size <= SHARE * (1000 - 100)
    # The fewest left out: one exchange more would have fitted too, one fewer would not.
    fewer = exchange_starts(old)[exchange_starts(old).index(step.sent.left_out) - 1]
    chars = len(SYSTEM) + sum(len(m["content"]) for m in [*old[fewer:], *tail])
    assert chars * 0.25 > SHARE * 900
    assert step.dropped == step.sent.left_out
    assert step.kept == len(old) - step.sent.left_out + 1


def test_each_refusal_leaves_out_at_least_one_more_exchange() -> None:
    old = [m for k in range(4) for m in exchange(f"q{k}", first=k + 1)]  # tiny exchanges
    sent = Sent()
    seen = []
    while True:
        # The engine refuses whatever it gets, though the estimate says it fits.
        steps, _ = fitted(old, sent, len(old), window=100_000, rate=0.0001)
        if not steps:
            break
        [step] = steps
        assert step.sent.left_out > sent.left_out and step.dropped == step.sent.left_out - sent.left_out
        sent = step.sent
        seen.append(sent.left_out)
    assert seen == [2, 4, 6, 8]  # one exchange a refusal, then nothing left: the run alone
    # Far too long by the estimate: every old exchange at once.
    [step], _ = fitted(old, Sent(), len(old), window=1000, rate=1000.0)
    assert step.sent.left_out == len(old)


def test_a_run_alone_too_long_has_its_oldest_results_shortened_just_until_it_fits() -> None:
    run = exchange("read them", "a" * 2000, "b" * 2000, "c" * 2000)[:-1]  # no final yet
    old = exchange("earlier", "o" * 400)
    conversation = [*old, *run]
    # Room for the system message, the run's small messages and about one and a half results.
    steps, size = fitted(conversation, Sent(), len(old), window=100 + 100 + 4 * 60 + 750)
    drop, shorten = steps
    assert (drop.sent.left_out, drop.dropped) == (len(old), len(old))
    assert shorten.dropped == 0 and shorten.kept == len(run)
    # The oldest first, just until the estimate fits.
    assert shorten.sent.shortened == {(len(old) + 2, 0), (len(old) + 4, 0)}
    assert size <= 100 + 100 + 4 * 60 + 750 - 100
    # Refused again (the estimate was off): one more, the newest; then nothing is left.
    again, _ = fitted(conversation, shorten.sent, len(old), window=10)
    [step] = again
    assert step.sent.shortened == {(len(old) + 2, 0), (len(old) + 4, 0), (len(old) + 6, 0)}
    assert step.dropped == 0
    assert fitted(conversation, step.sent, len(old), window=10)[0] == []


def test_short_results_and_other_messages_are_never_shortened() -> None:
    run = [user("go"), turn(CALL), results("tiny"), turn(CALL), user("Your last turn was not valid: x")]
    assert fitted(run, Sent(), 0, window=50)[0] == []


def test_a_refusal_without_sizes_does_the_least_each_time() -> None:
    old = [m for k in range(3) for m in exchange(f"q{k}", "x" * 2000, first=k + 1)]
    run = exchange("now", "y" * 2000, "z" * 2000, first=9)[:-1]
    conversation = [*old, *run]
    sent, trail = Sent(), []
    while True:
        steps = refit(conversation, ContextExceeded(0, 0), len(old), sent=sent)
        if not steps:
            break
        [step] = steps
        trail.append((step.dropped, len(step.sent.shortened)))
        sent = step.sent
    assert trail == [(4, 0), (4, 0), (4, 0), (0, 1), (0, 2)]


def test_the_models_context_window_stands_in_for_a_refusal_without_one() -> None:
    old = [m for k in range(5) for m in exchange(f"q{k}", "r" * 1000, first=k + 1)]
    chars = len(SYSTEM) + sum(len(m["content"]) for m in old)
    refused = ContextExceeded(chars // 4, 0)
    steps = refit(old, refused, len(old), context_window=1000)
    by_window, _ = fitted(old, Sent(), len(old), window=1000)
    assert steps == by_window
    # Neither: the window is below the prompt and max_tokens the engine refused.
    steps = refit(old, refused, len(old))
    size = len(SYSTEM) + sum(len(m["content"]) for m in sent_messages(old, steps[0].sent))
    assert size / 4 <= SHARE * (chars // 4 - 1)


def test_no_room_names_the_sizes_as_the_engine_gave_them() -> None:
    refused = ContextExceeded(2500, 2048, "the prompt has 2500 tokens and does not fit")
    text = no_room(refused, None, 512)
    assert "the prompt has 2500 tokens, for a context window of 2048 tokens and limits.max_tokens=512" in text
    assert text.endswith("(the prompt has 2500 tokens and does not fit)")
    text = no_room(ContextExceeded(0, 0, "server x: too long"), 4096, 64)
    assert "a size the engine did not give, for a context window of 4096 tokens" in text
    text = no_room(ContextExceeded(0, 0, "server x: too long"), None, 64)
    assert "for a context window of a size the engine did not give" in text


# -- the agent's window, from run to run ------------------------------------------------------


def test_a_window_keeps_what_it_sends_and_raises_when_nothing_is_left() -> None:
    window = Window()
    old = exchange("earlier", "o" * 2000)
    window.begin(old, [user("now")])
    system: ChatMessage = {"role": "system", "content": SYSTEM}
    assert window.prompt(system, old, [user("now")]) == [system, *old, user("now")]
    [trim] = window.refused(
        old,
        system=SYSTEM,
        tail=[user("now")],
        refused=ContextExceeded(800, 600),
        context_window=None,
        max_tokens=100,
    )
    assert (trim.type, trim.dropped, trim.kept) == ("trim", len(old), 1)
    assert window.prompt(system, old, [user("now")]) == [system, user("now")]
    with pytest.raises(ContextExceeded) as info:
        window.refused(
            old,
            system=SYSTEM,
            tail=[user("now")],
            refused=ContextExceeded(700, 600),
            context_window=None,
            max_tokens=100,
        )
    assert (info.value.prompt_tokens, info.value.context_window) == (700, 600)
    assert str(info.value) == no_room(ContextExceeded(700, 600), None, 100)
    # A resumed run: the paused turn belongs to the exchange of its prompt, never left out.
    resumed = [*old, user("now"), turn(CALL), results("r" * 2000, first=2)]
    window.begin(resumed, [turn(CALL)])
    [trim] = window.refused(
        resumed,
        system=SYSTEM,
        tail=[],
        refused=ContextExceeded(5000, 600),
        context_window=None,
        max_tokens=100,
    )
    assert (trim.dropped, window.sent.left_out) == (0, len(old))  # its results shortened instead
    # A shorter conversation than the one trimmed (replaced): all of it is sent again.
    window.begin([], [user("new")])
    assert sent_messages([user("new")], window.sent) == [user("new")]


def test_a_window_trims_before_sending_what_would_not_fit_by_the_last_prompts_rate() -> None:
    window = Window()
    system: ChatMessage = {"role": "system", "content": SYSTEM}
    old = [m for k in range(4) for m in exchange(f"q{k}", "r" * 1000, first=k + 1)]
    window.begin(old, [user("next")])
    prompt = window.prompt(system, old, [])
    window.used(sum(len(m["content"]) for m in prompt) // 2)  # half a token a character
    tail = [user("next")]
    kwargs = {"system": SYSTEM, "tail": tail, "max_tokens": 100}
    assert window.before(old, context_window=None, **kwargs) == []  # type: ignore[arg-type]
    assert window.before(old, context_window=100_000, **kwargs) == []  # type: ignore[arg-type]
    [trim] = window.before(old, context_window=2000, **kwargs)  # type: ignore[arg-type]
    assert trim.dropped > 0
    sent = window.prompt(system, old, tail)
    assert sum(len(m["content"]) for m in sent) / 2 <= SHARE * (2000 - 100)
    # Far too long: the rest of the old exchanges; then nothing is left, and the engine will say.
    [rest] = window.before(old, context_window=10, **kwargs)  # type: ignore[arg-type]
    assert rest.dropped == len(old) - trim.dropped and sent_messages(old, window.sent) == []
    assert window.before(old, context_window=10, **kwargs) == []  # type: ignore[arg-type]


# -- an agent on a model with a small window --------------------------------------------------

REPORT = "Report. " + "The harbour is busy and the markets are full. " * 30  # about 1,400 characters


@tool
def read_report(city: str) -> str:
    """Read the long report on a city."""
    return f"{city}: {REPORT}"


def calling(city: str) -> str:
    return json.dumps({"calls": [{"tool": "read_report", "input": {"city": city}}]})


def answering(messages: list[ChatMessage]) -> str:
    """A final that quotes the start of the last result it got."""
    return json.dumps({"final": "seen: " + messages[-1]["content"][:30]})


def script(questions: int) -> list:
    """For each question: a call to read_report, then a final."""
    out: list = []
    for k in range(questions):
        out += [calling(f"city{k}"), answering]
    return out


class Blind:
    """A model that refuses as `ScriptedModel` does but says nothing of its window (the agent
    learns of it only from the refusals)."""

    def __init__(self, model: ScriptedModel) -> None:
        self.inner = model

    def chat(self, messages: list[ChatMessage], opts: GenerateOptions | None = None) -> AsyncIterator[Delta]:
        return self.inner.chat(messages, opts)


async def run(agent: Agent, prompt: str, **kwargs: Any) -> list[AgentEvent]:
    async with asyncio.timeout(10):
        return [ev async for ev in agent.run(prompt, **kwargs)]


def ending(events: list[AgentEvent]) -> AgentEvent:
    endings = [ev for ev in events if isinstance(ev, FinalEvent | EndEvent)]
    assert len(endings) == 1 and endings[0] is events[-1]
    return endings[0]


LIMITS = Limits(max_tokens=64)


@pytest.mark.parametrize("blind", [False, True], ids=["told", "refused"])
async def test_a_long_conversation_keeps_going_and_keeps_everything(blind: bool) -> None:
    model = ScriptedModel(script(8), context_window=1200)
    agent = Agent(model=Blind(model) if blind else model, tools=[read_report], limits=LIMITS)
    trims = []
    for k in range(8):
        events = await run(agent, f"What does the report on city{k} say?")
        assert isinstance(ending(events), FinalEvent), events[-1]
        trims += [ev for ev in events if isinstance(ev, TrimEvent)]
        assert sum(isinstance(ev, UsageEvent) for ev in events) == 2  # refusals are no generations
    assert trims and all(t.dropped > 0 for t in trims)
    assert len(agent.messages) == 8 * 4  # everything is kept
    played = [c for c in model.calls if not c.refused]
    assert len(played) == 16
    for call in played:  # every prompt played fit the window with room for max_tokens
        assert ScriptedModel.prompt_tokens(call.messages) + 64 <= 1200
        assert call.messages[0]["role"] == "system" and call.messages[1]["role"] == "user"
    assert any(c.refused for c in model.calls) == blind


async def test_the_prompts_start_stays_the_same_from_one_trim_to_the_next() -> None:
    model = ScriptedModel(script(10), context_window=1500)
    agent = Agent(model=model, tools=[read_report], limits=LIMITS)
    starts = []
    for k in range(10):
        events = await run(agent, f"What does the report on city{k} say?")
        trimmed = any(isinstance(ev, TrimEvent) for ev in events)
        starts.append((trimmed, [c.messages[1] for c in model.calls[-2:]]))
    # Between two trims, every prompt starts with the same message after the system message.
    for (trimmed, firsts), (_, before) in zip(starts[1:], starts, strict=False):
        if not trimmed:
            assert firsts[0] == firsts[1] == before[-1]
    # Three quarters of the room: most runs need no trim.
    assert sum(trimmed for trimmed, _ in starts) <= 5
    usage = [ev for ev in events if isinstance(ev, UsageEvent)]
    assert usage[-1].cached_tokens > 0


async def test_a_refused_attempt_counts_against_neither_turns_nor_retries() -> None:
    model = ScriptedModel(script(3), context_window=1000)
    agent = Agent(model=Blind(model), tools=[read_report], limits=Limits(max_tokens=64, turns=2, retries=0))
    for k in range(3):
        events = await run(agent, f"What does the report on city{k} say?")
        assert isinstance(ending(events), FinalEvent)
    assert sum(c.refused for c in model.calls) >= 1


async def test_a_run_alone_too_long_has_its_results_shortened_oldest_first() -> None:
    turns = [calling("a"), calling("b"), calling("c"), answering]
    model = ScriptedModel(turns, context_window=1000)
    agent = Agent(model=Blind(model), tools=[read_report], limits=Limits(max_tokens=64, repeats=3))
    events = await run(agent, "Read three reports.")
    final = ending(events)
    assert isinstance(final, FinalEvent)
    trims = [ev for ev in events if isinstance(ev, TrimEvent)]
    assert trims and all(t.dropped == 0 for t in trims)
    last = model.calls[-1].messages
    assert ScriptedModel.prompt_tokens(last) + 64 <= 1000
    results = [m["content"] for m in last if m["content"].startswith("Results:")]
    assert (
        "more characters of call_1's result left out to fit the context window; call read_report"
        in (results[0])
    )
    assert results[-1].endswith(REPORT)  # the newest result is sent whole
    assert agent.messages[2]["content"].endswith(REPORT)  # and the conversation keeps them all


class Refusing:
    """A model that refuses every prompt (its window smaller than any), with these sizes."""

    def __init__(self, prompt_tokens: int, window: int, after: str = "") -> None:
        self.sizes = (prompt_tokens, window)
        self.after = after
        self.calls = 0

    async def chat(
        self, messages: list[ChatMessage], opts: GenerateOptions | None = None
    ) -> AsyncIterator[Delta]:
        self.calls += 1
        if self.after:
            yield Delta(text=self.after)
        raise ContextExceeded(*self.sizes)


async def test_a_model_that_refuses_every_time_ends_with_one_error_naming_the_sizes() -> None:
    scripted = ScriptedModel(script(2))
    agent = Agent(model=scripted, tools=[read_report], limits=LIMITS)
    for k in range(2):
        assert isinstance(ending(await run(agent, f"q{k}")), FinalEvent)
    refusing = Refusing(3000, 2048)
    agent2 = Agent(model=refusing, tools=[read_report], limits=LIMITS)
    events = await run(agent2, "hello")
    end = ending(events)
    assert isinstance(end, EndEvent) and end.reason == "error"
    assert (
        "the prompt has 3000 tokens, for a context window of 2048 tokens and limits.max_tokens=64"
        in end.message
    )
    assert refusing.calls == 1  # nothing to leave out: at once
    assert [ev.type for ev in events] == ["end"]


async def test_every_old_exchange_is_left_out_before_the_run_ends_with_an_error() -> None:
    model = ScriptedModel(script(3))
    agent = Agent(model=model, tools=[read_report], limits=LIMITS)
    for k in range(3):
        await run(agent, f"q{k}")
    refusing = Refusing(0, 0)  # no size given: the least each time
    agent._model = refusing  # the same conversation on a model that refuses everything
    events = await run(agent, "one more")
    assert [ev.type for ev in events] == ["trim", "trim", "trim", "end"]
    assert [ev.dropped for ev in events[:-1]] == [4, 4, 4]  # type: ignore[union-attr]
    end = ending(events)
    assert isinstance(end, EndEvent) and end.reason == "error"
    assert "a size the engine did not give" in end.message
    assert refusing.calls == 4
    assert len(agent.messages) == 12


async def test_a_refusal_after_a_delta_is_an_engine_failure() -> None:
    agent = Agent(model=Refusing(3000, 2048, after='{"fin'), limits=LIMITS)
    events = await run(agent, "hello")
    end = ending(events)
    assert isinstance(end, EndEvent) and end.reason == "error"
    assert end.message == "the prompt has 3000 tokens and does not fit in the context of 2048 tokens"
    assert not any(isinstance(ev, TrimEvent) for ev in events)


async def test_an_abort_while_a_trim_is_handed_out_ends_the_run_with_abort() -> None:
    model = ScriptedModel(script(6), context_window=1000)
    agent = Agent(model=Blind(model), tools=[read_report], limits=LIMITS)
    controller = AbortController()
    seen: list[AgentEvent] = []
    for k in range(6):
        async with asyncio.timeout(10):
            async for ev in agent.run(f"q{k}", signal=controller.signal):
                seen.append(ev)
                if isinstance(ev, TrimEvent):
                    controller.abort("enough")
        if controller.signal.aborted:
            break
    end = ending(seen[seen.index(next(ev for ev in seen if isinstance(ev, TrimEvent))) :])
    assert isinstance(end, EndEvent) and end.reason == "abort"
    assert not agent.busy


async def test_after_a_reset_nothing_of_the_new_conversation_is_left_out() -> None:
    model = ScriptedModel(script(6), context_window=1000)
    agent = Agent(model=model, tools=[read_report], limits=LIMITS)
    for k in range(4):
        await run(agent, f"q{k}")
    assert agent._window.sent.left_out > 0
    agent.reset()
    await run(agent, "again")
    await run(agent, "and again")
    assert model.calls[-1].messages[1] == {"role": "user", "content": "again"}
    assert len(model.calls[-1].messages) == 1 + 4 + 3


async def test_a_resumed_run_trims_around_its_own_prompt() -> None:
    @tool(needs_approval=True)
    def send_report(city: str) -> str:
        """Send the long report on a city."""
        return f"sent {city}: {REPORT}"

    sending = json.dumps({"calls": [{"tool": "send_report", "input": {"city": "cityX"}}]})
    model = ScriptedModel([*script(2), sending, answering], context_window=1200)
    agent = Agent(model=Blind(model), tools=[read_report, send_report], limits=LIMITS)
    for k in range(2):
        await run(agent, f"What does the report on city{k} say?")
    paused = await run(agent, "Send the report on cityX.")
    assert isinstance(paused[-1], EndEvent) and paused[-1].reason == "paused"
    async with asyncio.timeout(10):
        events = [ev async for ev in agent.resume({agent.pending[0].id: True})]
    assert isinstance(ending(events), FinalEvent)
    assert [ev.dropped for ev in events if isinstance(ev, TrimEvent)] == [8]
    last = model.calls[-1].messages
    assert last[1] == {"role": "user", "content": "Send the report on cityX."}
    assert ScriptedModel.prompt_tokens(last) + 64 <= 1200
