"""The decode loop: sample, let the hooks speak, jump forward over what the schema forces.

After a complete prefill, each step reads the logits of the last token, masks
them by the schema, lets the decode hooks adjust them, samples, lets the
hooks choose another token or write tokens instead, then appends the tokens
the schema forces next (jump-forward: evaluated in one batch, never
sampled). Text streams out as it is decoded, held back only where a stop
string may begin.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence

import numpy as np

from ...model import Delta, FinishReason, Usage
from ._cache import KvCache
from ._constraint import Constrained
from ._hooks import DecodeHook, Step
from ._lookahead import Lookahead
from ._request import Request
from ._sampling import Bitmask, Logits, Sampling, TextStream, mask_logits, sample
from ._vocab import Vocab
from .rules import ValueBias

__all__ = ["Counts", "Decoder", "Job"]


class Job:
    """One generation travelling from the event loop to the worker thread."""

    def __init__(self, request: Request, loop: asyncio.AbstractEventLoop) -> None:
        self.request = request
        self.queue: asyncio.Queue[Delta | BaseException] = asyncio.Queue()
        self.cancelled = threading.Event()
        self._loop = loop
        self._lock = threading.Lock()
        self._state: str = "waiting"
        """`waiting` its turn on the worker thread, then `started` or `skipped`."""

    def start(self) -> bool:
        """On the worker thread, at the job's turn: whether to run it (not if the consumer left
        or it was aborted while it waited)."""
        with self._lock:
            if self._state == "waiting" and not self.cancelled.is_set():
                self._state = "started"
        return self._state == "started"

    def abort_waiting(self) -> None:
        """On an abort: a job still waiting its turn ends at once, with a done delta (nothing
        prefilled or generated); one that runs sees the abort itself."""
        with self._lock:
            if self._state != "waiting":
                return
            self._state = "skipped"
        self.emit(Delta(done=True, finish="stop", usage=Usage(prompt_tokens=0, completion_tokens=0)))

    def stopped(self) -> bool:
        """Whether the consumer left or the signal aborted."""
        signal = self.request.signal
        return self.cancelled.is_set() or (signal is not None and signal.aborted)

    def emit(self, item: Delta | BaseException) -> None:
        """Send a delta (or the exception that ends the stream) to the consumer."""
        try:
            self._loop.call_soon_threadsafe(self.queue.put_nowait, item)
        except RuntimeError:  # the consumer's loop is closed: nobody listens any more
            self.cancelled.set()


class Counts:
    """What a generation has done so far (read by `LlamaCpp.progress` from another thread)."""

    __slots__ = ("forced", "generated", "prefilled")

    def __init__(self) -> None:
        self.prefilled = 0
        self.generated = 0
        self.forced = 0


class Decoder:
    """Generates on a KV cache, with decode hooks.

    Args:
        cache: The KV cache, prefilled with the prompt.
        vocab: The model's vocabulary.
        lookahead: The hooks' look-ahead.
        hooks: The decode hooks, in order (see `_hooks`).
        jump_forward: Evaluate the tokens the schema forces in one batch.
    """

    def __init__(
        self,
        cache: KvCache,
        vocab: Vocab,
        lookahead: Lookahead,
        hooks: Sequence[DecodeHook],
        *,
        jump_forward: bool,
    ) -> None:
        self._cache = cache
        self._vocab = vocab
        self._lookahead = lookahead
        self.hooks = tuple(hooks)
        self._jump_forward = jump_forward

    def run(
        self,
        job: Job,
        constrained: Constrained | None,
        bias: ValueBias | None,
        counts: Counts,
        rng: np.random.Generator,
        opening: Sequence[int] = (),
        *,
        evaluated: bool = False,
    ) -> FinishReason:
        """Generate after a complete prefill.

        `opening` are the tokens the schema forces first (`forced()`), `evaluated`
        already with the prompt's last chunk or not. The cache ends up holding
        every generated token but the last one sampled or forced (an end token, a
        token past a stop string or `max_tokens`); when the schema is complete,
        the last batch (the token sampled last and the closing tokens forced after
        it) is not evaluated either: nothing is sampled after it, and the next
        prompt prefills it in one batch with the rest of what is new.
        """
        req, cache, vocab = job.request, self._cache, self._vocab
        # Under a constraint the value's end is the end: a stop string inside it would cut it
        # short of the schema, with nothing to tell that apart from a complete value.
        text = TextStream(req.stop if constrained is None else ())
        limit = req.max_tokens
        step: Step | None = None
        if constrained is not None and bias is not None and self.hooks:
            step = Step(
                bias=bias,
                constrained=constrained,
                lookahead=self._lookahead,
                piece=vocab.piece_text,
                stopped=job.stopped,
                sampling=req.sampling,
                rng=rng,
                room=None,
            )
        batch = list(opening)
        counts.forced += len(batch)
        while True:
            if batch:
                counts.generated += len(batch)
                pieces = self._emit_text(job, text, batch, bias)
                if text.stopped or (constrained is not None and constrained.done):
                    return self._finish(job, text, "stop")
                if limit is not None and counts.generated >= limit:
                    return self._finish(job, text, "length")
                if not evaluated:
                    if cache.n_tokens + len(batch) >= cache.n_ctx:
                        return self._finish(job, text, "length")
                    cache.eval_generated(batch, pieces)
                evaluated = False
            if job.stopped():
                return self._finish(job, text, "stop")
            mask = None if constrained is None else constrained.fill_mask()
            room = None if limit is None else limit - counts.generated
            token, instead = self._pick(cache.logits(), mask, step, room, req.sampling, rng)
            if vocab.is_end(token):
                return self._finish(job, text, "stop")
            batch = instead or [token]
            if constrained is not None:
                constrained.consume(batch)
                room = None if limit is None else limit - counts.generated - 1
                forced = self.forced(constrained, room)
                counts.forced += len(forced)
                batch += forced

    def _pick(
        self,
        logits: Logits,
        mask: Bitmask | None,
        step: Step | None,
        room: int | None,
        sampling: Sampling,
        rng: np.random.Generator,
    ) -> tuple[int, list[int] | None]:
        """The next token, through the hooks that act on this step (each may adjust the logits,
        choose another token, or write tokens in its place: the second value)."""
        active = [h for h in self.hooks if h.active(step)] if step and mask is not None else []
        if not (step and active and mask is not None):
            return sample(logits, sampling, rng, mask), None
        step.room = room
        logits = mask_logits(logits, mask)
        for hook in active:
            logits = hook.adjust(step, logits)
        step.logits = logits
        token = sample(logits, sampling, rng)
        for hook in active:
            token = hook.choose(step, token)
        for hook in active:
            if (instead := hook.write(step, token)) is not None:
                return token, instead
        return token, None

    def forced(self, constrained: Constrained | None, room: int | None) -> list[int]:
        """The tokens the schema forces now (`{"calls":[`, say), at most `room` of them,
        consumed; the caller counts them. The engine asks for the opening ones before
        the prefill, to evaluate them with the prompt."""
        if constrained is None or not self._jump_forward or constrained.done or room == 0:
            return []
        forced = constrained.forced()[:room]
        if forced:
            constrained.consume(forced)
        return forced

    def _finish(self, job: Job, text: TextStream, finish: FinishReason) -> FinishReason:
        rest = text.flush()
        if rest and not job.cancelled.is_set():
            job.emit(Delta(text=rest))
        return finish

    def _emit_text(self, job: Job, text: TextStream, batch: list[int], bias: ValueBias | None) -> list[bytes]:
        pieces = [self._vocab.piece(t) for t in batch]
        data = b"".join(p[1] for p in pieces)
        if bias is not None:
            bias.feed(data)
        out = text.push(data)
        if out:
            job.emit(Delta(text=out))
        return [p[0] for p in pieces]
