"""Many conversations on one engine: the KV caches of the latest `kv_slots` conversations.

The context holds one conversation at a time, the live one. The others wait as
copies of their KV state (llama.cpp's state of a sequence), each with its token
history; a prompt that continues one of them puts it back into the context, so
agents that take turns on one engine each prefill only what is new to their own
conversation. Copies, not llama.cpp's sequences in one context: with several
sequences in a context, every evaluation attends over the cells of them all,
which on a small model costs more than copying a conversation's state out and
back (docs/engines.md, "Many conversations on one engine", has the measure).

Which conversation a prompt belongs to: the one whose tokens it shares the most
with. A prompt that holds all of that conversation continues it, in its place;
one that parts from it (another agent with the same system message, the same
question asked again, a conversation trimmed to fit) starts a conversation of
its own from the shared prefix, and the other stays as it was. The least recently used give
way when there are more than `kv_slots`, or when all of them together would hold
more than `n_ctx` tokens.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ._cache import KvCache
from ._prefix import Plan, TokenHistory, Tokenize

__all__ = ["SLOT_TOKENS", "Choice", "Slots", "most_slots"]

SLOT_TOKENS = 64
"""The context's tokens per conversation kept, at least: `kv_slots` is at most `n_ctx` over this."""

_LEAST_CONTEXT = 256
"""The smallest context llama.cpp makes (it rounds `n_ctx` up to a multiple of this)."""


def most_slots(n_ctx: int) -> int:
    """The most conversations a context of `n_ctx` tokens keeps (`kv_slots`): one for each
    `SLOT_TOKENS` tokens of the context llama.cpp makes for it (at least 256 tokens)."""
    return max(n_ctx, _LEAST_CONTEXT) // SLOT_TOKENS


@dataclass(eq=False, slots=True)
class _Kept:
    """A conversation out of the context: its tokens and the copy of its KV state."""

    history: TokenHistory
    state: Any


@dataclass(frozen=True, slots=True)
class Choice:
    """The conversation a prompt goes to (`Slots.choose`)."""

    plan: Plan
    """Its prefill."""
    source: _Kept | None
    """The conversation kept out of the context that it shares the most with; `None`: the live one."""
    continues: bool
    """Whether it continues that conversation (else it starts one of its own from the shared prefix)."""


class Slots:
    """The conversations an engine keeps: the live one in the KV cache, the others copied out.

    Args:
        cache: The engine's KV cache (the live conversation).
        count: How many conversations to keep, the live one included (`kv_slots`).
    """

    def __init__(self, cache: KvCache, count: int) -> None:
        self._cache = cache
        self.count = count
        """How many conversations are kept at most, the live one included."""
        self._kept: list[_Kept] = []
        """The conversations out of the context, the least recently used first."""

    @property
    def kept(self) -> list[list[int]]:
        """The tokens of each conversation kept out of the context, the least recently used first."""
        return [list(k.history.tokens) for k in self._kept]

    @property
    def kept_bytes(self) -> int:
        """The memory the copies of the conversations out of the context take, in bytes."""
        return sum(len(k.state) for k in self._kept)

    def choose(self, text: bytes, tokenize: Tokenize, *, text_reuse: bool) -> Choice:
        """Which conversation `text` (a rendered prompt) continues, or starts from, and the plan
        of its prefill (`TokenHistory.plan`); nothing changes until `take`."""
        tokens = _once(tokenize)
        plan = self._cache.history.plan(text, tokens, text_reuse=text_reuse)
        source: _Kept | None = None
        for kept in reversed(self._kept):  # the most recent first: a tie goes to it
            if len(kept.history.tokens) > plan.reuse:
                other = kept.history.plan(text, tokens, text_reuse=text_reuse)
                if other.reuse > plan.reuse:
                    source, plan = kept, other
        history = self._cache.history if source is None else source.history
        return Choice(plan=plan, source=source, continues=_continues(history, plan.reuse))

    def take(self, choice: Choice) -> Plan:
        """Put the chosen conversation into the KV cache (the live one is copied out first when
        it is another, or when the prompt parts from it); the plan, its `reuse` cut down if
        llama.cpp refused a copy. The caller then cuts the cache at `reuse`."""
        plan, source = choice.plan, choice.source
        if source is not None or not choice.continues:
            self._keep_live()
        if source is not None:
            self._kept.remove(source)
            if choice.continues:
                self._cache.restore(source.history, source.state)
            else:  # it stays as it was, and counts as used
                self._cache.restore(_copy(source.history), source.state)
                self._kept.append(source)
            if self._cache.n_tokens < plan.reuse:  # llama.cpp refused the state
                plan = Plan(tokens=plan.tokens, reuse=self._cache.n_tokens)
        self._evict(plan.reuse)
        return plan

    def settle(self) -> None:
        """After a generation: the conversations kept hold at most `n_ctx` tokens with the live one."""
        self._evict(self._cache.n_tokens)

    def clear(self) -> None:
        """Forget every conversation: the KV cache and the copies."""
        self._kept.clear()
        self._cache.truncate(0)

    def _keep_live(self) -> None:
        """Copy the live conversation out of the context, before another takes its place."""
        if self.count > 1 and self._cache.history.tokens:
            self._kept.append(_Kept(history=_copy(self._cache.history), state=self._cache.save()))

    def _evict(self, live_tokens: int) -> None:
        """Drop the least recently used copies: at most `count - 1` of them, holding at most
        `n_ctx` tokens with the live conversation's `live_tokens`."""
        kept = self._kept
        while len(kept) >= self.count or (
            kept and live_tokens + sum(len(k.history.tokens) for k in kept) > self._cache.n_ctx
        ):
            kept.pop(0)


def _continues(history: TokenHistory, reuse: int) -> bool:
    """Whether a prompt that shares `reuse` tokens with the conversation of `history` continues
    it: it holds every token of it (but the last, which a plan evaluates again when the prompt
    is no longer), so taking its place loses nothing."""
    return reuse >= len(history.tokens) - 1


def _copy(history: TokenHistory) -> TokenHistory:
    return TokenHistory(
        tokens=list(history.tokens),
        prompt=history.prompt,
        prompt_len=history.prompt_len,
        pieces=list(history.pieces),
    )


def _once(tokenize: Tokenize) -> Tokenize:
    """`tokenize`, each text tokenised once: a prompt is planned against every conversation."""
    done: dict[tuple[bytes, bool], list[int]] = {}

    def once(text: bytes, add_bos: bool) -> list[int]:
        key = (text, add_bos)
        if key not in done:
            done[key] = tokenize(text, add_bos)
        return list(done[key])

    return once
