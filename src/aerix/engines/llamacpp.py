"""`LlamaCpp`: a local GGUF model on llama-cpp-python, as an aerix `Model`.

The engine renders prompts with the model's own chat template, tokenises them
itself and keeps its own token history, so a prompt that extends the last one
prefills only the new part (`Usage.cached_tokens`). JSON constraints decode
with llguidance's token mask and jump-forward over the tokens a schema forces.
All blocking work runs on one worker thread per engine, which also serialises
generations: one `Llama` context is not thread-safe, and many agents may
share one engine.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import threading
import time
from collections.abc import AsyncIterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import AerixError
from ..model import ChatMessage, Delta, FinishReason, GenerateOptions, Usage
from ._bias import ValueBias
from ._chat_template import ChatTemplate
from ._constraint import Constrained, SchemaCompiler
from ._dates import date_format
from ._fields import NUMBER_TYPES, constants, fields, number_siblings, object_keys, string_series
from ._fit import FitScorer
from ._llama_request import Request, parse_request
from ._llama_vocab import Vocab
from ._prefix import TokenHistory
from ._sampling import TextStream, mask_logits, sample
from ._spans import kept_scales
from ._units import field_unit

try:
    import llama_cpp
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError("aerix.engines.LlamaCpp needs llama-cpp-python: pip install 'aerix[llama]'") from exc

__all__ = ["CLOSE_BIAS", "COPY_BIAS", "FIT_THRESHOLD", "STRING_CHOICES", "GenerationStats", "LlamaCpp"]

COPY_BIAS = 2.5
"""The default `copy_bias` (see `LlamaCpp`), in logits."""
CLOSE_BIAS = 2.0
"""The default `close_bias` (see `LlamaCpp`), in logits."""
STRING_CHOICES = 3
"""The default `string_choices` (see `LlamaCpp`)."""
FIT_THRESHOLD = 0.2
"""The default `fit_threshold` (see `LlamaCpp`), in nats per token."""
_SURE = math.log(0.5)
"""The log-probability from which a string's first token is kept without choices."""
_LOOKAHEAD = 48
"""The most tokens decoded ahead to read an optional field's value."""


@dataclass(frozen=True, kw_only=True, slots=True)
class GenerationStats:
    """What one generation cost; `LlamaCpp.last_stats` holds the latest."""

    prompt_tokens: int
    """Tokens in the prompt."""
    cached_tokens: int
    """Prompt tokens reused from the KV cache."""
    prefilled_tokens: int
    """Prompt tokens evaluated (`prompt_tokens - cached_tokens`, fewer if aborted)."""
    completion_tokens: int
    """Tokens generated, forced ones included."""
    forced_tokens: int
    """Generated tokens that the constraint forced (jump-forward), not sampled."""
    prefill_s: float
    """Seconds spent rendering, tokenising and prefilling."""
    decode_s: float
    """Seconds spent generating."""


@dataclass(frozen=True, slots=True)
class _Ahead:
    """A value decoded ahead: its text, its log-probability after the first token, and
    whether it ended within the look-ahead."""

    text: str
    log_p: float
    ended: bool


def _log_norm(logits: Any) -> float:
    """log Σ exp(logits) over the allowed (finite) logits: a token's log-probability is
    its logit minus this."""
    finite = logits[np.isfinite(logits)]
    top = float(finite.max())
    return top + math.log(float(np.exp(finite - top).sum()))


class _Job:
    """One generation travelling from the event loop to the worker thread."""

    def __init__(self, request: Request, loop: asyncio.AbstractEventLoop) -> None:
        self.request = request
        self.queue: asyncio.Queue[Delta | BaseException] = asyncio.Queue()
        self.cancelled = threading.Event()
        self._loop = loop

    def stopped(self) -> bool:
        signal = self.request.signal
        return self.cancelled.is_set() or (signal is not None and signal.aborted)

    def emit(self, item: Delta | BaseException) -> None:
        try:
            self._loop.call_soon_threadsafe(self.queue.put_nowait, item)
        except RuntimeError:  # the consumer's loop is closed: nobody listens any more
            self.cancelled.set()


class LlamaCpp:
    """A GGUF model on llama.cpp, streaming `Delta`s (a `Model`).

    Args:
        model_path: The GGUF file.
        n_ctx: Context length in tokens; 0 uses the model's training length.
        n_threads: CPU threads for decoding and, unless `n_threads_batch` is given,
            for prefill (llama-cpp-python's defaults if `None`).
        n_batch: The most tokens evaluated in one `llama_decode` call.
        prefill_chunk: Tokens prefilled between two checks of the abort signal.
        chat_template: A Jinja chat template to use instead of the model's own.
        jump_forward: Under a constraint, evaluate the tokens the schema forces in
            one batch instead of sampling them one by one (turn off only to compare).
        copy_bias: Under a constraint, add this to the logit of each likely token that
            keeps a JSON string or number value a span of the user's messages (values
            are usually copied from the request), and take it off the others once a
            value is under way as a span. A number the messages name a field by ("a
            weight of 70 kg") gets it twice in that field and not at all in the
            object's other number fields. A number the messages give only as a
            percentage ("5%") is written as the fraction it means (0.05), one given in
            millions ("213 million") as the whole number, unless its field takes that
            scale, and a quantity in another unit than its field names in that unit
            ("5ft 10in": 70 "in inches"). Fields of a series (`mass1`, `mass2`) take
            the values in order, and a string the model would end short of its name
            goes on ("Louvre Museum"). 0 turns all this off.
        close_bias: Under a constraint, add this to the logit of the tokens that close
            a JSON object right after a value when its remaining fields are optional
            (optional fields are then written only when the model is sure); 0 turns it off.
        check_optional: Under a constraint, before the model adds an optional field to a
            nested object (a tool's input), decode that field ahead and leave it out
            unless the user's messages give its value; and before it closes such an
            object, offer an optional field the messages name that it left out,
            checked the same way.
        string_choices: Under a constraint, at the start of a string value in a tool's
            input where the model gives no first token even odds, decode the value ahead
            from each of this many likeliest first tokens and keep the likeliest whole
            value (greedy; drawn by the values' own likelihoods at a temperature above
            0); 1 turns it off.
        fit_threshold: The score from which a tool fits a request (`fit_score`); an
            `Agent` with `tool_choice="auto"` asks `tools_fit` before a run's first
            turn, and calls a tool if one fits, else answers. `None`: no opinion
            (the model's first key decides, as with any other model).
        verbose: Let llama.cpp print its logs.
        **llama_kwargs: Passed on to `llama_cpp.Llama`.

    Raises:
        FileNotFoundError: `model_path` does not exist.
        ValueError: The file is not a loadable GGUF, or has no chat template.
    """

    def __init__(
        self,
        model_path: str | os.PathLike[str],
        *,
        n_ctx: int = 4096,
        n_threads: int | None = None,
        n_batch: int = 512,
        prefill_chunk: int = 64,
        chat_template: str | None = None,
        jump_forward: bool = True,
        copy_bias: float = COPY_BIAS,
        close_bias: float = CLOSE_BIAS,
        check_optional: bool = True,
        string_choices: int = STRING_CHOICES,
        fit_threshold: float | None = FIT_THRESHOLD,
        verbose: bool = False,
        **llama_kwargs: Any,
    ) -> None:
        path = Path(model_path)
        if not path.is_file():
            raise FileNotFoundError(
                f"no GGUF file at {str(path)!r}; give the path of a .gguf model file, "
                "or use aerix.load('smollm2-instruct') for the embedded default model"
            )
        if prefill_chunk < 1:
            raise AerixError("options", f"prefill_chunk must be at least 1, got {prefill_chunk}")
        for name, bias in (("copy_bias", copy_bias), ("close_bias", close_bias)):
            if isinstance(bias, bool) or not isinstance(bias, int | float) or not 0 <= bias <= 100:
                raise AerixError("options", f"{name} must be a number from 0 to 100, got {bias!r}")
        if not isinstance(check_optional, bool):
            raise AerixError("options", f"check_optional must be True or False, got {check_optional!r}")
        if isinstance(string_choices, bool) or not isinstance(string_choices, int) or string_choices < 1:
            raise AerixError(
                "options", f"string_choices must be a whole number, 1 or more, got {string_choices!r}"
            )
        if fit_threshold is not None and (
            isinstance(fit_threshold, bool)
            or not isinstance(fit_threshold, int | float)
            or not math.isfinite(fit_threshold)
        ):
            raise AerixError("options", f"fit_threshold must be a number or None, got {fit_threshold!r}")
        if n_threads is not None:
            llama_kwargs.setdefault("n_threads_batch", n_threads)  # else it is every CPU
        try:
            self._llama = llama_cpp.Llama(
                model_path=str(path),
                n_ctx=n_ctx,
                n_threads=n_threads,
                n_batch=n_batch,
                n_ubatch=n_batch,
                verbose=verbose,
                **llama_kwargs,
            )
        except ValueError as exc:
            raise ValueError(f"llama.cpp could not load {str(path)!r}: {exc}") from exc
        self.model_path = path
        """The GGUF file."""
        self._ctx = self._llama.ctx
        self._vocab = Vocab(self._llama.model)
        self._n_vocab = self._vocab.size
        self._n_ctx = int(self._llama.n_ctx())
        if self._llama.input_ids.shape[0] < self._n_ctx:
            # llama.cpp rounded the context up; llama-cpp-python sized its token
            # record by the requested length and would silently drop the rest.
            self._llama.input_ids = np.zeros(self._n_ctx, dtype=np.intc)
        self._chunk = min(prefill_chunk, n_batch)
        self._jump_forward = jump_forward
        self._biases = (float(copy_bias), float(close_bias))
        self._check_optional = check_optional
        self._string_choices = string_choices
        self._fit_threshold = None if fit_threshold is None else float(fit_threshold)
        self._fit: FitScorer | None = None
        self._template = self._load_template(chat_template)
        self._bos = self._template.bos_token.encode()
        # Byte matching is exact only for byte-level BPE; other vocabularies
        # (SentencePiece) re-add a leading space when a piece is tokenised alone.
        self._text_reuse = self._vocab.byte_level
        self._schemas = SchemaCompiler(self._vocab.lltokenizer, self._n_vocab)
        self._history = TokenHistory()
        self._rng = np.random.default_rng()
        self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="aerix-llamacpp")
        self._closed = False
        self._current: _Job | None = None
        self.last_stats: GenerationStats | None = None
        """What the latest finished generation cost."""

    def __repr__(self) -> str:
        return f"LlamaCpp({str(self.model_path)!r}, n_ctx={self._n_ctx})"

    @property
    def metadata(self) -> dict[str, str]:
        """The GGUF metadata, as strings."""
        return dict(self._llama.metadata)

    @property
    def n_ctx(self) -> int:
        """The context length in tokens."""
        return self._n_ctx

    @property
    def chat_template(self) -> str:
        """The Jinja source of the chat template in use."""
        return self._template.source

    def render(self, messages: list[ChatMessage]) -> str:
        """The prompt text that `chat(messages)` would evaluate."""
        return self._template.render(messages)

    def reset(self) -> None:
        """Forget the KV cache: the next prompt is prefilled in full.

        Waits for the generations already started or queued.
        """
        self._worker.submit(self._truncate, 0).result()

    def close(self) -> None:
        """Stop any generation, free the model. Later calls do nothing.

        This waits for the worker thread (at most one token or prefill chunk).
        """
        if self._closed:
            return
        self._closed = True
        job = self._current
        if job is not None:
            job.cancelled.set()
        self._worker.shutdown(wait=True, cancel_futures=True)
        if self._fit is not None:
            self._fit.close()
        self._llama.close()

    async def tools_fit(self, request: str, tools: Sequence[str]) -> bool | None:
        """Whether one of `tools` fits `request`: `fit_score` at least `fit_threshold`.

        `None` when `fit_threshold` is `None`, or when the chat template refuses
        the scoring prompts (`fit_score` raises `ValueError`): the model's first
        key decides then. An `Agent` with `tool_choice="auto"` asks this before a
        run's first turn (see `fit_score`).

        Args:
            request: The user's message.
            tools: Each tool as `"name: description"`.
        """
        if self._fit_threshold is None:
            return None
        try:
            return await self.fit_score(request, tools) >= self._fit_threshold
        except ValueError:  # a template that refuses a lone or empty user message
            return None

    async def fit_score(self, request: str, tools: Sequence[str]) -> float:
        """How well the best of `tools` fits `request`, in nats per token; `-inf` for no tools.

        The mean, over a tool's tokens, of how much more likely the model finds
        the tool (`"name: description"`) after the request than after an empty
        one, in its own chat template: above about 0.2 the request speaks of
        what the tool does. Runs on a small context of its own: the KV cache of
        `chat` is left as it was.

        Raises:
            TypeError: `request` or a tool is not a string.
            ValueError: The chat template refused a scoring prompt.
            RuntimeError: The engine is closed.
        """
        if self._closed:
            raise RuntimeError("this LlamaCpp engine is closed")
        tools = list(tools)
        if not all(isinstance(t, str) for t in tools) or not isinstance(request, str):
            raise TypeError("fit_score takes the request and the tools as strings")
        return await asyncio.wrap_future(self._worker.submit(self._fit_score, request, tools))

    def _fit_score(self, request: str, tools: list[str]) -> float:
        if self._fit is None:
            self._fit = FitScorer(self._llama, self._template.render, self._tokenize)
        return self._fit.score(request, tools)

    async def chat(
        self, messages: list[ChatMessage], opts: GenerateOptions | None = None
    ) -> AsyncIterator[Delta]:
        """Stream one generation: text deltas, then one done delta with `finish` and `usage`.

        An aborted generation (`opts["signal"]`) ends promptly with a done delta
        whose `finish` is `"stop"`. Closing or cancelling the stream stops the
        generation too. Generations on one engine run one after the other.

        Args:
            messages: The conversation, system message first.
            opts: Sampling settings, `max_tokens`, `stop`, `constraint` and `signal`.

        Raises:
            AerixError: `kind="options"`: a bad option or a schema that cannot be enforced.
            ValueError: The prompt does not fit in the context, or the template refused it.
        """
        if self._closed:
            raise RuntimeError("this LlamaCpp engine is closed")
        job = _Job(parse_request(messages, opts), asyncio.get_running_loop())
        self._worker.submit(self._run, job)
        try:
            while True:
                item = await job.queue.get()
                if isinstance(item, BaseException):
                    raise item
                yield item
                if item.done:
                    return
        finally:
            job.cancelled.set()

    # -- the worker thread ---------------------------------------------------

    def _run(self, job: _Job) -> None:
        if job.cancelled.is_set():
            return
        self._current = job
        try:
            self._generate(job)
        except BaseException as exc:
            job.emit(exc)
        finally:
            self._current = None

    def _generate(self, job: _Job) -> None:
        req = job.request
        t0 = time.perf_counter()
        prompt = self._template.render(req.prompt).encode()
        constrained = None if req.schema is None else self._schemas.start(req.schema)
        plan = self._history.plan(prompt, self._tokenize, text_reuse=self._text_reuse)
        if len(plan.tokens) >= self._n_ctx:
            raise ValueError(
                f"the prompt has {len(plan.tokens)} tokens and does not fit in the context "
                f"of {self._n_ctx}; pass a larger n_ctx to LlamaCpp (or aerix.load)"
            )
        counts = {"prefilled": 0, "generated": 0, "forced": 0}
        t1 = t0
        finish: FinishReason = "stop"
        try:
            todo = plan.tokens[plan.reuse :]
            for i in range(0, len(todo), self._chunk):
                if job.stopped():
                    break  # an abort before the first chunk leaves the cache untouched
                if i == 0:
                    self._truncate(plan.reuse)
                chunk = todo[i : i + self._chunk]
                self._eval(chunk)
                self._history.extend_prompt(chunk)
                counts["prefilled"] += len(chunk)
            else:
                self._history.set_prompt(prompt)
                t1 = time.perf_counter()
                finish = self._decode(job, constrained, counts)
        finally:
            self._sync()
        t2 = time.perf_counter()
        if counts["generated"] == 0 and t1 == t0:
            t1 = t2
        usage = Usage(
            prompt_tokens=len(plan.tokens),
            completion_tokens=counts["generated"],
            cached_tokens=plan.reuse,
        )
        self.last_stats = GenerationStats(
            prompt_tokens=usage.prompt_tokens,
            cached_tokens=usage.cached_tokens,
            prefilled_tokens=counts["prefilled"],
            completion_tokens=usage.completion_tokens,
            forced_tokens=counts["forced"],
            prefill_s=t1 - t0,
            decode_s=t2 - t1,
        )
        job.emit(Delta(done=True, finish=finish, usage=usage))

    def _decode(self, job: _Job, constrained: Constrained | None, counts: dict[str, int]) -> FinishReason:
        """Generate after a complete prefill.

        The cache ends up holding every generated token but the last one sampled
        or forced (an end token, a token past a stop string or `max_tokens`).
        """
        req = job.request
        rng = self._rng if req.seed is None else np.random.default_rng(req.seed)
        text = TextStream(req.stop)
        bias = self._bias(req, constrained)
        limit = req.max_tokens
        # A schema may force the first tokens already, e.g. `{"calls":[`.
        batch = self._forced(constrained, limit, counts)
        while True:
            if batch:
                counts["generated"] += len(batch)
                pieces = self._emit_text(job, text, batch, bias)
                if text.stopped:
                    return self._finish(job, text, "stop")
                if constrained is not None and constrained.done:
                    # Keep the cache one token short of the output, as after an end token.
                    if self._n_tokens + len(batch) <= self._n_ctx:
                        self._eval_generated(batch[:-1], pieces)
                    return self._finish(job, text, "stop")
                if limit is not None and counts["generated"] >= limit:
                    return self._finish(job, text, "length")
                if self._n_tokens + len(batch) >= self._n_ctx:
                    return self._finish(job, text, "length")
                self._eval_generated(batch, pieces)
            if job.stopped():
                return self._finish(job, text, "stop")
            logits = np.ctypeslib.as_array(
                llama_cpp.llama_get_logits_ith(self._ctx, -1), shape=(self._n_vocab,)
            )
            mask = None if constrained is None else constrained.fill_mask()
            check = self._check_optional and bias is not None and bias.may_end_nested
            choose = self._string_choices > 1 and bias is not None and bias.starts_string()
            instead: list[int] = []
            if bias is not None and mask is not None and (bias.active or check or choose):
                logits = bias.apply(mask_logits(logits, mask))
                token = sample(logits, req.sampling, rng)
                if choose and constrained is not None:
                    token = self._choose_string(job, constrained, bias, token, logits, rng)
                if check and constrained is not None:
                    token = self._check_field(job, constrained, bias, token, logits)
                if constrained is not None:
                    room = None if limit is None else limit - counts["generated"]
                    instead = self._instead(job, constrained, bias, token, room)
                    if not instead and check:
                        instead = self._suggest(job, constrained, bias, token, room)
            else:
                token = sample(logits, req.sampling, rng, mask)
            if self._vocab.is_end(token):
                return self._finish(job, text, "stop")
            batch = instead or [token]
            if constrained is not None:
                constrained.consume(batch)
                room = None if limit is None else limit - counts["generated"] - 1
                batch += self._forced(constrained, room, counts)

    def _check_field(
        self, job: _Job, constrained: Constrained, bias: ValueBias, token: int, logits: Any
    ) -> int:
        """`token`, or the likeliest closing token if `token` adds an optional field the user did not give.

        The field is decoded ahead greedily (with the biases) on copies of the
        constraint and the biases, then the KV cache is cut back. An abort stops
        it at once (the field is then judged on what was decoded).
        """
        piece = self._vocab.piece_text(token)
        if not bias.adds_field(piece):
            return token
        closer = bias.closer(logits, piece)
        if closer is None:
            return token
        ahead = self._ahead(job, constrained, bias, token)
        return token if ahead is None or bias.supports(ahead.text) else closer

    def _suggest(
        self, job: _Job, constrained: Constrained, bias: ValueBias, token: int, room: int | None
    ) -> list[int]:
        """The tokens that add an optional field the user's messages name, to write instead
        of `token` where it closes a tool's input (`ValueBias.suggest`), if the field's
        value, decoded ahead, is one the messages give (`ValueBias.supports`); else `[]`."""
        tokens = self._allowed(constrained, bias.suggest(self._vocab.piece_text(token)), room)
        if not tokens:
            return []
        ahead = self._ahead(job, constrained, bias, tokens)
        return tokens if ahead is not None and bias.supports(ahead.text) else []

    def _instead(
        self, job: _Job, constrained: Constrained, bias: ValueBias, token: int, room: int | None
    ) -> list[int]:
        """The tokens to write instead of the value that `token` starts, decoded ahead: the
        number a scaled one means ("0.05" for "5%", "70" for "5ft 10in" in inches:
        `ValueBias.scaled`), which the model may then end but not go on with, or a date
        in its field's format, with the closing quote (`ValueBias.dated`); `[]` if
        neither applies, or if the schema or `room` (the tokens left) does not allow it."""
        if bias.starts_number(self._vocab.piece_text(token)):
            ahead = self._ahead(job, constrained, bias, token)
            tokens = self._allowed(constrained, None if ahead is None else bias.scaled(ahead.text), room)
            if tokens:
                bias.seal()  # the model may end it, not add digits to it
            return tokens
        if bias.starts_date():
            ahead = self._ahead(job, constrained, bias, token, choice=True)
            day = None if ahead is None else bias.dated(ahead.text)
            return self._allowed(constrained, None if day is None else json.dumps(day)[1:], room)
        return []

    def _allowed(self, constrained: Constrained, text: str | None, room: int | None) -> list[int]:
        """The tokens of `text`, if the schema allows them next and they fit in `room`
        (the tokens left); else (or without a text) `[]`."""
        if text is None:
            return []
        tokens = self._tokenize(text.encode(), add_bos=False)
        fits = room is None or len(tokens) <= room
        return tokens if fits and constrained.accepts(tokens) else []

    def _choose_string(
        self,
        job: _Job,
        constrained: Constrained,
        bias: ValueBias,
        token: int,
        logits: Any,
        rng: np.random.Generator,
    ) -> int:
        """The first token of a string value: of the `string_choices` likeliest first tokens,
        the one whose whole value, decoded ahead, is likeliest (its tokens' log-probabilities
        under the biases, summed); at a temperature above 0, drawn by those likelihoods.
        `token` (the one sampled) stays if the model gives its likeliest first token even
        odds or more, or if no value ends within the look-ahead."""
        norm = _log_norm(logits)
        if float(logits.max()) - norm >= _SURE:
            return token  # the model is sure of its first token
        n = logits.shape[0]
        k = min(self._string_choices, n)
        firsts = [int(t) for t in np.argpartition(logits, n - k)[n - k :] if np.isfinite(logits[t])]
        scores = []
        for t in firsts:
            ahead = self._ahead(job, constrained, bias, t, choice=True)
            if ahead is not None and ahead.ended:
                scores.append((float(logits[t]) - norm + ahead.log_p, t))
        if not scores:
            return token
        temperature = job.request.sampling.temperature
        if temperature <= 0:
            return max(scores)[1]
        weights = np.exp((np.array([s for s, _ in scores]) - max(scores)[0]) / temperature)
        return scores[int(rng.choice(len(scores), p=weights / weights.sum()))][1]

    def _ahead(
        self,
        job: _Job,
        constrained: Constrained,
        bias: ValueBias,
        token: int | list[int],
        choice: bool = False,
    ) -> _Ahead | None:
        """The value from `token` on, decoded greedily (with the biases) on copies of the
        constraint and the biases, then the KV cache is cut back: to the end of the next
        value in the current object, or for a `choice`, to the end of the value in progress,
        with its log-probability. `None` if the model would end the generation. An abort
        stops it at once (with what was decoded so far).
        """
        n0, depth, ended = self._n_tokens, bias.depth, bias.ended
        ahead, fork = constrained.fork(), bias.fork()
        text = b""
        log_p = 0.0
        pending = [token] if isinstance(token, int) else token
        try:
            for _ in range(_LOOKAHEAD):
                ahead.consume(pending)
                forced = ahead.forced()
                ahead.consume(forced)
                batch = [*pending, *forced]
                data = b"".join(self._vocab.piece(t)[1] for t in batch)
                fork.feed(data)
                text += data
                if (fork.ended > ended if choice else fork.value_ended(depth)) or ahead.done:
                    return _Ahead(text.decode(errors="replace"), log_p, ended=True)
                if self._n_tokens + len(batch) >= self._n_ctx or job.stopped():
                    break
                self._eval(batch)
                step = np.ctypeslib.as_array(
                    llama_cpp.llama_get_logits_ith(self._ctx, -1), shape=(self._n_vocab,)
                )
                step = fork.apply(mask_logits(step, ahead.fill_mask()))
                sampled = int(np.argmax(step))
                if self._vocab.is_end(sampled):
                    return None
                if choice:
                    log_p += float(step[sampled]) - _log_norm(step)
                pending = [sampled]
        finally:
            self._cut(n0)
        return _Ahead(text.decode(errors="replace"), log_p, ended=False)

    def _cut(self, n: int) -> None:
        """Forget the tokens evaluated after the first `n` (decoded ahead); the history has only `n`."""
        if self._n_tokens <= n:
            return
        self._llama.n_tokens = self._keep(n)
        if self._n_tokens < n:  # a cache that cannot be cut in the middle: evaluate the kept tokens again
            self._eval(self._history.tokens[:n])

    def _forced(self, constrained: Constrained | None, room: int | None, counts: dict[str, int]) -> list[int]:
        """The tokens the schema forces now (consumed), at most `room` of them."""
        if constrained is None or not self._jump_forward or constrained.done or room == 0:
            return []
        forced = constrained.forced()[:room]
        if forced:
            constrained.consume(forced)
            counts["forced"] += len(forced)
        return forced

    def _finish(self, job: _Job, text: TextStream, finish: FinishReason) -> FinishReason:
        rest = text.flush()
        if rest and not job.cancelled.is_set():
            job.emit(Delta(text=rest))
        return finish

    def _bias(self, req: Request, constrained: Constrained | None) -> ValueBias | None:
        """The value biases of a constrained generation; values copy from the user's messages."""
        copy, close = self._biases
        if constrained is None or not (copy or close or self._check_optional or self._string_choices > 1):
            return None
        source = "\n".join(m["content"] for m in req.prompt if m["role"] == "user")
        kept: dict[str, set[int]] = {}
        for key, description in fields(req.schema, NUMBER_TYPES):
            kept.setdefault(key, set()).update(kept_scales(key, description))
        dates = {key: fmt for key, d in fields(req.schema, ("string",)) if (fmt := date_format(d))}
        names, name_keys = constants(req.schema)
        units = {
            key: (unit, kind == "integer")
            for kind in NUMBER_TYPES
            for key, d in fields(req.schema, (kind,))
            if (unit := field_unit(key, d))
        }
        return ValueBias(
            source,
            copy=copy,
            close=close,
            piece=self._vocab.piece_text,
            kept_scales=kept,
            siblings=number_siblings(req.schema),
            date_formats=dates,
            units=units,
            series=string_series(req.schema),
            constants=names,
            constant_keys=name_keys,
            objects=object_keys(req.schema) if self._check_optional else (),
        )

    def _emit_text(
        self, job: _Job, text: TextStream, batch: list[int], bias: ValueBias | None
    ) -> list[bytes]:
        pieces = [self._vocab.piece(t) for t in batch]
        data = b"".join(p[1] for p in pieces)
        if bias is not None:
            bias.feed(data)
        out = text.push(data)
        if out:
            job.emit(Delta(text=out))
        return [p[0] for p in pieces]

    # -- llama.cpp -----------------------------------------------------------

    @property
    def _n_tokens(self) -> int:
        return int(self._llama.n_tokens)

    def _eval(self, tokens: list[int]) -> None:
        if tokens:
            self._llama.eval(tokens)

    def _eval_generated(self, tokens: list[int], pieces: list[bytes]) -> None:
        if tokens:
            self._eval(tokens)
            self._history.extend_generated(tokens, pieces[: len(tokens)])

    def _truncate(self, n: int) -> None:
        """Cut the KV cache (and the history) to its first `n` tokens."""
        if n < self._n_tokens:
            n = self._keep(n)
        self._llama.n_tokens = min(n, self._n_tokens)
        self._history.truncate(self._n_tokens)

    def _sync(self) -> None:
        """After a generation, however it ended: the history matches the KV cache."""
        n = min(self._n_tokens, len(self._history.tokens))
        if list(self._llama.input_ids[:n]) != self._history.tokens[:n]:
            n = 0  # should not happen; start over rather than trust a mismatch
        n = self._keep(n)
        self._llama.n_tokens = n
        self._history.truncate(n)
        if n == 0:
            self._history.clear()

    def _keep(self, n: int) -> int:
        """Remove the KV cache's entries from position `n` on; how many are kept
        (`n`, or 0 when the cache cannot be cut in the middle and was cleared)."""
        mem = llama_cpp.llama_get_memory(self._ctx)
        if llama_cpp.llama_memory_seq_rm(mem, 0, n, -1):
            return n
        llama_cpp.llama_memory_clear(mem, True)
        return 0

    def _tokenize(self, text: bytes, add_bos: bool) -> list[int]:
        if add_bos and self._template.bos_token and text.startswith(self._bos):
            add_bos = False  # the template wrote the BOS already
        tokens: list[int] = self._llama.tokenize(text, add_bos=add_bos, special=True)
        return tokens

    def _load_template(self, override: str | None) -> ChatTemplate:
        source = override or self._llama.metadata.get("tokenizer.chat_template")
        if not source:
            raise ValueError(
                f"{str(self.model_path)!r} has no chat template in its metadata "
                "(tokenizer.chat_template); pass one as LlamaCpp(..., chat_template=...)"
            )
        return ChatTemplate(
            source,
            bos_token=self._vocab.text(self._llama.token_bos()),
            eos_token=self._vocab.text(self._llama.token_eos()),
        )
