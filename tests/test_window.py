"""The context window: what `_window` sends of a conversation, and an agent that trims on a
`ScriptedModel` with a small window."""

from __future__ import annotations

import pytest

from aerix._window import (
    KEEP,
    SHARE,
    Sent,
    exchange_starts,
    fit,
    no_room,
    sent_messages,
    split_results,
)
from aerix.model import ChatMessage, ContextExceeded
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
