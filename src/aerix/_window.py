"""Which messages of a conversation to send when it outgrows the model's context window.

Plain functions; the agent's generation step drives them. When an engine refuses
a prompt as too long (`ContextExceeded`), `fit` says what to send instead, as a
`Sent`: the conversation less its oldest whole exchanges (a user's prompt with
the turns and the results that answered it), and, where the current run alone
does not fit, with the run's oldest tool results shortened to a note. Nothing is
deleted: the agent keeps its whole conversation and sends `sent_messages` of it.

Sizes are estimates: the refused prompt's tokens per character of its messages'
contents (4 characters a token when the engine gives no size), applied to the
messages' characters. Old exchanges are left out until the estimate takes at most
`SHARE` of what the window leaves after `max_tokens`, so that the next turns fit
too and the prompt's start (and the engine's cache of it) stays the same until the
next refusal; each refusal leaves out at least one more exchange. Results are
shortened one by one, oldest first (the newest turn's last), just until the
estimate fits, and at least one more for each refusal. When neither is left, `fit`
returns no step, and the run ends with an error (`no_room`).

An agent holds a `Window`: what it sends, kept from run to run, which also trims
before sending when the model says its `context_window` and the estimate exceeds it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from .events import TrimEvent
from .model import ChatMessage, ContextExceeded
from .turn import render_results

__all__ = [
    "KEEP",
    "SHARE",
    "TOKENS_PER_CHAR",
    "Sent",
    "Step",
    "Window",
    "exchange_starts",
    "fit",
    "no_room",
    "sent_messages",
    "split_results",
]

SHARE = 0.75
"""What the messages sent may take, after a trim, of the window less `max_tokens`: the
rest is left for the turns that follow, so that the prompt's start stays the same."""
TOKENS_PER_CHAR = 0.25
"""The estimate of a prompt's tokens per character when the engine gives no size."""
KEEP = 160
"""The characters of a shortened result that are still sent, before the note."""
_SHORTEST = 2 * KEEP
"""A result this long or shorter is never shortened: its note would save next to nothing."""

_RESULTS = "Results:\n"
_RESULT = re.compile(r"^\[(call_\d+) ([a-z][a-z0-9_]{0,63})\] ", re.MULTILINE)
"""The label of one result in a results message (`turn.render_results`)."""
_DROPPED = re.compile(r"\n\(\d+ more call\(s\) were dropped[^\n]*\)\Z")
"""The line a results message ends with when a turn held too many calls."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Sent:
    """What the agent sends of its conversation (after the system message)."""

    left_out: int = 0
    """How many leading messages are not sent: whole exchanges."""
    shortened: frozenset[tuple[int, int]] = frozenset()
    """The results sent shortened, each as (its message's index in the conversation,
    its place among that message's results)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Step:
    """One trim: what is sent after it, and the numbers its `trim` event gives."""

    sent: Sent
    """What is sent from now on."""
    dropped: int
    """How many messages this step stopped sending (0 for a step that shortens results)."""
    kept: int
    """How many messages after the system message are still sent."""


class Window:
    """What an agent sends of its conversation, kept from run to run so that the prompt's
    start stays the same until the next trim (a new `Window` for a new conversation).

    Besides trimming after a refusal (`refused`), it trims before sending (`before`) when
    the model says its `context_window` and the prompt would not fit it by the estimate:
    the tokens per character of the last prompt the engine took (`used`).
    """

    def __init__(self) -> None:
        self.sent = Sent()
        """What is sent now."""
        self._run_start = 0
        self._last: list[ChatMessage] = []
        """The last prompt (`prompt`)."""
        self._taken: tuple[list[ChatMessage], int] | None = None
        """The last prompt an engine took, and its tokens: the rate of `_rate`, counted only
        when an estimate is needed (not on every generation)."""

    def begin(self, conversation: Sequence[ChatMessage], upcoming: Sequence[ChatMessage]) -> None:
        """A run begins on `conversation`; `upcoming` will join it first (the run's prompt, or
        a resumed run's paused turn). The exchange they belong to is the run's: never left out."""
        self._run_start = exchange_starts([*conversation, *upcoming])[-1]
        if self.sent.left_out > self._run_start:  # a shorter conversation than the one trimmed
            self.sent = Sent()

    def prompt(
        self, system: ChatMessage, conversation: Sequence[ChatMessage], tail: Sequence[ChatMessage]
    ) -> list[ChatMessage]:
        """The prompt to send: the system message, what is sent of `conversation`, `tail`."""
        sent = self.sent  # the common case, all of it: the conversation copied once, here
        body = sent_messages(conversation, sent) if sent.left_out or sent.shortened else conversation
        messages = self._last = [system, *body, *tail]
        return messages

    def used(self, prompt_tokens: int) -> None:
        """The engine took the last `prompt` as `prompt_tokens` tokens (0: it did not say)."""
        if prompt_tokens > 0:
            self._taken = (self._last, prompt_tokens)

    @property
    def _rate(self) -> float:
        """Tokens per character of the last prompt an engine took (`TOKENS_PER_CHAR` before one)."""
        if self._taken is None:
            return TOKENS_PER_CHAR
        messages, tokens = self._taken
        chars = _chars(messages)
        return tokens / chars if chars else TOKENS_PER_CHAR

    def before(
        self,
        conversation: Sequence[ChatMessage],
        *,
        system: str,
        tail: Sequence[ChatMessage],
        context_window: int | None,
        max_tokens: int,
    ) -> list[TrimEvent]:
        """The trims to make before sending, when the prompt would not fit `context_window` by
        the estimate; none where it would, or where nothing is left to trim (the engine then
        says whether it fits)."""
        if context_window is None:
            return []
        chars = len(system) + _chars(sent_messages(conversation, self.sent)) + _chars(tail)
        estimate = math.ceil(self._rate * chars)
        if estimate + max_tokens <= context_window:
            return []
        try:
            return self.refused(
                conversation,
                system=system,
                tail=tail,
                refused=ContextExceeded(estimate, context_window),
                context_window=context_window,
                max_tokens=max_tokens,
            )
        except ContextExceeded:
            return []

    def refused(
        self,
        conversation: Sequence[ChatMessage],
        *,
        system: str,
        tail: Sequence[ChatMessage],
        refused: ContextExceeded,
        context_window: int | None,
        max_tokens: int,
    ) -> list[TrimEvent]:
        """Send less after the engine refused the prompt (`fit`): the trims, as events.

        Raises:
            ContextExceeded: Nothing is left to leave out or shorten (`no_room` says so).
        """
        steps = fit(
            conversation,
            self.sent,
            run_start=self._run_start,
            system=system,
            tail=tail,
            refused=refused,
            context_window=context_window,
            max_tokens=max_tokens,
        )
        if not steps:
            window = refused.context_window or context_window or 0
            raise ContextExceeded(
                refused.prompt_tokens, window, no_room(refused, context_window, max_tokens)
            ) from refused
        self.sent = steps[-1].sent
        return [TrimEvent(dropped=step.dropped, kept=step.kept) for step in steps]


def exchange_starts(messages: Sequence[ChatMessage]) -> list[int]:
    """Where each exchange begins: 0, and each user message that is not a turn's results."""
    starts = [
        i for i, m in enumerate(messages) if m["role"] == "user" and split_results(m["content"]) is None
    ]
    return starts if starts[:1] == [0] else [0, *starts]


def split_results(content: str) -> tuple[list[tuple[str, str, str]], str] | None:
    """The results of a results message, each `(call id, tool, text)`, and what follows them
    (the line on dropped calls, or nothing); `None` for any other message."""
    if not content.startswith(_RESULTS):
        return None
    body, after = content[len(_RESULTS) :], ""
    if (dropped := _DROPPED.search(body)) is not None:
        body, after = body[: dropped.start()], body[dropped.start() :]
    labels = list(_RESULT.finditer(body))
    if not labels or labels[0].start() != 0:
        return None
    ends = [label.start() - 1 for label in labels[1:]] + [len(body)]  # each text ends before a newline
    return [
        (label[1], label[2], body[label.end() : end]) for label, end in zip(labels, ends, strict=True)
    ], after


def sent_messages(conversation: Sequence[ChatMessage], sent: Sent) -> list[ChatMessage]:
    """The messages of `conversation` that are sent: those after the ones left out, with the
    shortened results in place of the whole ones."""
    if not sent.shortened:
        return list(conversation[sent.left_out :])
    places: dict[int, set[int]] = {}
    for index, place in sent.shortened:
        places.setdefault(index, set()).add(place)
    out: list[ChatMessage] = []
    for index in range(min(sent.left_out, len(conversation)), len(conversation)):
        message = conversation[index]
        if index in places and (parts := split_results(message["content"])) is not None:
            message = {"role": message["role"], "content": _shorten(*parts, places[index])}
        out.append(message)
    return out


def fit(
    conversation: Sequence[ChatMessage],
    sent: Sent,
    *,
    run_start: int,
    system: str,
    tail: Sequence[ChatMessage],
    refused: ContextExceeded,
    context_window: int | None,
    max_tokens: int,
) -> list[Step]:
    """The steps that fit the conversation to the window after an engine refused the prompt
    `system`, `sent_messages(conversation, sent)`, `tail`.

    Args:
        conversation: The whole conversation kept so far.
        sent: What was sent of it.
        run_start: The index of the current run's first message: the exchanges before it may
            be left out, the results after it shortened (the run's prompt is always sent).
        system: The system message's content.
        tail: The messages sent after the conversation (a prompt not kept yet, a retry's).
        refused: The engine's refusal, with its sizes (0 where it gave none).
        context_window: The model's own `context_window`, for a refusal that gives none.
        max_tokens: The generation's `max_tokens`.

    Returns:
        One step that leaves out exchanges, one that shortens results, or both (the first
        then the second); no step when nothing is left to leave out or shorten.
    """
    tail_chars = len(system) + sum(len(m["content"]) for m in tail)
    chars = tail_chars + _chars(sent_messages(conversation, sent))
    prompt = refused.prompt_tokens
    rate = prompt / chars if prompt > 0 and chars else TOKENS_PER_CHAR
    # Unknown, the window is below what was refused (the prompt and max_tokens); with no size at
    # all, each step does the least it may.
    window = refused.context_window or context_window or (prompt + max_tokens - 1 if prompt else 0)
    room = window - max_tokens

    def fits(candidate: Sent, share: float) -> bool:
        size = rate * (tail_chars + _chars(sent_messages(conversation, candidate)))
        return window > 0 and size <= share * room

    def step(candidate: Sent, dropped: int) -> Step:
        return Step(sent=candidate, dropped=dropped, kept=len(conversation) - candidate.left_out + len(tail))

    steps: list[Step] = []
    if sent.left_out < run_start:
        starts = [s for s in exchange_starts(conversation) if sent.left_out < s < run_start] + [run_start]
        candidates = [Sent(left_out=s, shortened=_from(sent.shortened, s)) for s in starts]
        chosen = (
            candidates[0] if window == 0 else next((c for c in candidates if fits(c, SHARE)), candidates[-1])
        )
        steps.append(step(chosen, chosen.left_out - sent.left_out))
        if window == 0 or fits(chosen, 1.0):
            return steps
        sent = chosen
    shortened = set(sent.shortened)
    for unit in _long_results(conversation, max(run_start, sent.left_out), sent.shortened):
        shortened.add(unit)
        if window == 0 or fits(Sent(left_out=sent.left_out, shortened=frozenset(shortened)), 1.0):
            break
    if len(shortened) > len(sent.shortened):
        steps.append(step(Sent(left_out=sent.left_out, shortened=frozenset(shortened)), 0))
    return steps


def no_room(refused: ContextExceeded, context_window: int | None, max_tokens: int) -> str:
    """The error a run ends with when `fit` has no step left: the sizes as the engine gave them."""
    size = f"{refused.prompt_tokens} tokens" if refused.prompt_tokens else "a size the engine did not give"
    window = refused.context_window or context_window
    of = (
        f"a context window of {window} tokens"
        if window
        else "a context window of a size the engine did not give"
    )
    return (
        f"the prompt does not fit in the model's context even with every earlier exchange left out and "
        f"this run's long tool results shortened: the prompt has {size}, for {of} and "
        f"limits.max_tokens={max_tokens}; use a model with a larger context (n_ctx), a lower "
        f"limits.max_tokens, shorter instructions or tools that return less ({refused})"
    )


def _chars(messages: Iterable[ChatMessage]) -> int:
    return sum(len(m["content"]) for m in messages)


def _from(shortened: frozenset[tuple[int, int]], start: int) -> frozenset[tuple[int, int]]:
    """The shortened results still sent once the messages before `start` are left out."""
    return frozenset(unit for unit in shortened if unit[0] >= start)


def _long_results(
    conversation: Sequence[ChatMessage], start: int, shortened: frozenset[tuple[int, int]]
) -> list[tuple[int, int]]:
    """The results from `start` on that may be shortened, oldest first."""
    units: list[tuple[int, int]] = []
    for index in range(start, len(conversation)):
        if conversation[index]["role"] != "user":
            continue
        parts = split_results(conversation[index]["content"])
        for place, (_, _, text) in enumerate(parts[0] if parts else ()):
            if len(text) > _SHORTEST and (index, place) not in shortened:
                units.append((index, place))
    return units


def _shorten(results: list[tuple[str, str, str]], after: str, places: set[int]) -> str:
    """A results message with the results at `places` shortened to their start and a note."""
    return (
        render_results(
            [
                (i, tool, _cut(i, tool, text) if p in places else text)
                for p, (i, tool, text) in enumerate(results)
            ]
        )
        + after
    )


def _cut(call_id: str, tool: str, text: str) -> str:
    """A result's start and a note of how much of it is left out."""
    return (
        f"{text[:KEEP]}… [{len(text) - KEEP} more characters of {call_id}'s result left out to fit "
        f"the context window; call {tool} again to read them]"
    )


def result_ids(messages: Sequence[ChatMessage]) -> Iterable[str]:
    """The call ids that the results messages of `messages` name, in order."""
    for m in messages:
        if m["role"] == "user" and (parts := split_results(m["content"])) is not None:
            yield from (call_id for call_id, _, _ in parts[0])
