"""`LlamaCpp`: a local GGUF model on llama-cpp-python, as an aerix `Model`.

The engine renders prompts with the model's own chat template, tokenises them
itself and keeps its own token history, so a prompt that extends the last one
prefills only the new part (`Usage.cached_tokens`). JSON constraints decode
with llguidance's token mask and jump-forward over the tokens a schema forces.
All blocking work runs on one thread that every engine of the process shares
(`_thread`), which also serialises generations: one `Llama` context is not
thread-safe, many agents may share one engine, and llama.cpp's OpenMP threads
slow down when several threads call into it.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from concurrent.futures import Future
from typing import Any, Literal

import numpy as np

from ...model import ChatMessage, ContextExceeded, Delta, FinishReason, GenerateOptions, Usage
from ._cache import KvCache
from ._constraint import Constrained, SchemaCompiler
from ._decode import Counts, Decoder, Job
from ._fit import FitScorer
from ._fit_thresholds import FIT_THRESHOLDS, calibrated
from ._hooks import default_hooks
from ._idle import PrefillThreads
from ._lookahead import Lookahead
from ._open import open_model
from ._options import Options, check_kv_slots, check_options
from ._request import Request, parse_request
from ._slots import Slots
from ._stats import GenerationStats, Progress
from ._template import ChatTemplate
from ._thread import Lane
from ._vocab import Vocab
from .rules import ValueBias, handover_of, value_bias

__all__ = [
    "CLOSE_BIAS",
    "COPY_BIAS",
    "FIT_THRESHOLD",
    "NEW_CALL_BIAS",
    "PICK_BIAS",
    "STRING_CHOICES",
    "GenerationStats",
    "LlamaCpp",
    "Progress",
]

COPY_BIAS = 2.5
"""The default `copy_bias` (see `LlamaCpp`), in logits."""
CLOSE_BIAS = 2.0
"""The default `close_bias` (see `LlamaCpp`), in logits."""
STRING_CHOICES = 3
"""The default `string_choices` (see `LlamaCpp`)."""
PICK_BIAS = 5.0
"""The default `pick_bias` (see `LlamaCpp`), in logits per nat of fit."""
NEW_CALL_BIAS = 4.0
"""The default `new_call_bias` (see `LlamaCpp`), in logits."""
_PICKS_KEPT = 64
"""How many requests' tool fits the pick keeps (`LlamaCpp._fits`)."""
FIT_THRESHOLD = FIT_THRESHOLDS["smollm2-instruct"]
"""The embedded SmolLM2-135M-Instruct's default `fit_threshold` (see `LlamaCpp`), in nats per
token: a tool fits a request from this score on (`LlamaCpp.fit_score`); docs/quality.md
describes how it was chosen. Each known model has its own (`FIT_THRESHOLDS`)."""


class LlamaCpp:
    """A GGUF model on llama.cpp, streaming `Delta`s (a `Model`).

    Args:
        model_path: The GGUF file.
        n_ctx: Context length in tokens; 0 uses the model's training length.
        kv_slots: How many conversations' KV caches the engine keeps, from 1 to one for
            each 64 tokens of `n_ctx`. Each may grow to the whole `n_ctx`; together they
            hold at most `n_ctx` tokens, and the least recently used give way. A prompt
            continues the conversation it shares the most tokens with, so agents that take
            turns on one engine each prefill only what is new to their own conversation.
            1: one conversation, which every prompt reuses what it can of.
        n_threads: CPU threads for decoding and, unless `n_threads_batch` is given,
            for prefill. `None`: half the CPUs this process may use (`default_threads`)
            for decoding, and for each prefill one thread for each CPU idle at that moment
            (`PrefillThreads`): a quiet machine prefills on every CPU, a busy one leaves
            the busy CPUs alone (llama.cpp's threads stall on a CPU another process keeps busy).
        n_batch: The most tokens evaluated in one `llama_decode` call.
        prefill_chunk: Tokens prefilled between two checks of the abort signal.
        chat_template: A Jinja chat template to use instead of the model's own.
        jump_forward: Under a constraint, evaluate the tokens the schema forces in
            one batch instead of sampling them one by one (turn off only to compare).
        copy_bias: Under a constraint, add this to the logit of each likely token that
            keeps a JSON string or number value a span of the user's messages (values
            are usually copied from the request), and take it off the others once a
            value is under way as a span. The heuristics weigh it further (see
            `heuristics`): a number named for a field ("a width of 4") goes to that field,
            fields of a series (`x1`, `x2`) take the values in order, a string the model
            would end short of its name goes on ("Golden Gate Bridge"). 0 turns all this
            off (and `convert_values`).
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
        convert_values: Under a constraint, with the copy bias on, write a value in the
            form its field asks for instead of the model's: "5%" as 0.05, "213 million"
            whole (unless the field takes that scale), a quantity in the field's unit
            ("5ft 10in": 70 "in inches", "11 PM": 23), a date in the field's format
            (never with another meaning: "03/04/2025" stays 3 April in a `dd/mm/yyyy`
            field); and copy "quarterly" as 4. Tools' conventions, not the user's words:
            off by default, when the rules only nudge.
        pick_bias: Under a constraint, while the first turn for a request names a call's
            tool and there are several to name, add this times each tool's fit to the
            request (`fit_score`'s measure, over the tool's name and fields), less the
            best tool's, to the logits of the tokens that lead to it: the name leans to
            the tools the request speaks of. 0 turns it off.
        new_call_bias: Under a constraint, in a later turn for a request (after calls),
            with several tools to name: where the likeliest tool name leads (decoded
            ahead) to a call that the request's turns already wrote, take this off the
            logits of the tokens that lead to that tool, so the turn leans to another
            call or to the answer; the model may still write it again (the repeat rule,
            `Limits.repeats`, decides whether it runs). 0 turns it off.
        no_placeholders: Under a constraint, where the first token of a string value (in a
            tool's input or the final) leads, decoded ahead, to a placeholder of the system
            message (a value of a JSON example there, in angle brackets, as an `Agent` hands
            them over: `Handover.placeholders`), draw another token from the rest: a small
            model copies the placeholder whole as its answer. Only a value that begins with
            the placeholder is left out. False turns it off.
        heuristics: Under a constraint, which of the copy bias's heuristics act (value
            rules chosen on benchmark entries: `rules.heuristics`), as a dict of their
            names to `True` or `False`; a name left out stays on. The names: `quotes`,
            `own_name`, `bare_numbers`, `into_dates`, `cut_short`, `series_order`,
            `nearby_fields`, `booleans`. `None` (the default): all of them.
        fit_threshold: The score from which a tool fits a request (`fit_score`); an
            `Agent` with `tool_choice="auto"` asks `tools_fit` before a run's first
            turn, and calls a tool if one fits, else answers. `"calibrated"` (the
            default): the threshold chosen for this model (`FIT_THRESHOLDS`, by its
            GGUF metadata) if it has one, else `None`. `None`: no opinion (the model's
            first key decides, as with any other model, and as on a server).
        amx: Let llama.cpp use its AMX matrix path on a CPU with AMX (Intel Xeon from
            Sapphire Rapids on). It crashes llama.cpp there (ggml-org/llama.cpp#20824), so
            by default the weights load on such a CPU without llama.cpp's extra buffer types
            (its AMX and repacked layouts; docs/benchmarks.md measures the cost); elsewhere
            this option changes nothing, and so it does with a llama.cpp built without AMX
            (the portable build `make setup` makes). `True` on such a CPU first decodes a
            few tokens in a child process, and raises `AerixError` naming the CPU if
            llama.cpp fails there.
        verbose: Let llama.cpp print its logs.
        **llama_kwargs: Passed on to `llama_cpp.Llama`.

    Raises:
        FileNotFoundError: `model_path` does not exist.
        ValueError: The file is not a GGUF, llama.cpp cannot load it (truncated, damaged),
            or its chat template is missing or does not compile; each names the file.
        AerixError: `kind="options"`: a bad option.
    """

    def __init__(
        self,
        model_path: str | os.PathLike[str],
        *,
        n_ctx: int = 4096,
        kv_slots: int = 4,
        n_threads: int | None = None,
        n_batch: int = 512,
        prefill_chunk: int = 64,
        chat_template: str | None = None,
        jump_forward: bool = True,
        copy_bias: float = COPY_BIAS,
        close_bias: float = CLOSE_BIAS,
        check_optional: bool = True,
        string_choices: int = STRING_CHOICES,
        convert_values: bool = False,
        pick_bias: float = PICK_BIAS,
        new_call_bias: float = NEW_CALL_BIAS,
        no_placeholders: bool = True,
        heuristics: Mapping[str, bool] | None = None,
        fit_threshold: float | Literal["calibrated"] | None = "calibrated",
        amx: bool = False,
        verbose: bool = False,
        **llama_kwargs: Any,
    ) -> None:
        options = check_options(
            model_path,
            n_ctx=n_ctx,
            kv_slots=kv_slots,
            n_threads=n_threads,
            n_batch=n_batch,
            prefill_chunk=prefill_chunk,
            chat_template=chat_template,
            jump_forward=jump_forward,
            copy_bias=copy_bias,
            close_bias=close_bias,
            check_optional=check_optional,
            string_choices=string_choices,
            convert_values=convert_values,
            pick_bias=pick_bias,
            new_call_bias=new_call_bias,
            no_placeholders=no_placeholders,
            heuristics=heuristics,
            fit_threshold=fit_threshold,
            amx=amx,
            verbose=verbose,
            llama_kwargs=llama_kwargs,
        )
        self.model_path = options.model_path
        """The GGUF file."""
        self.name = options.model_path.stem
        """The model's name: the GGUF file's stem."""
        self._llama = open_model(options)
        try:
            self._set_up(options)
        except BaseException:
            self._llama.close()  # nothing left half-loaded
            raise
        self.last_stats: GenerationStats | None = None
        """What the latest finished generation cost."""

    def _set_up(self, options: Options) -> None:
        """Everything on the loaded model: vocabulary, KV cache, chat template, schema
        compiler, the decode loop with the hooks of the options, the worker thread's lane."""
        self._vocab = Vocab(self._llama.model)
        self._n_vocab = self._vocab.size
        self._cache = KvCache(self._llama, self._n_vocab)
        self._n_ctx = self._cache.n_ctx
        check_kv_slots(options.kv_slots, options.n_ctx, self._n_ctx)
        self._slots = Slots(self._cache, options.kv_slots)
        self._threads = PrefillThreads(self._llama, options.decode_threads, options.prefill_threads)
        self._template = self._load_template(options.chat_template)
        # Built now, not at the first constrained generation: llguidance holds the GIL
        # while it reads the vocabulary (seconds for a large one), which would stall
        # the caller's event loop there, off the worker thread or not.
        self._schemas = SchemaCompiler(self._vocab.lltokenizer(), self._n_vocab)
        self._chunk = min(options.prefill_chunk, options.n_batch)
        self._biases = (options.copy_bias, options.close_bias)
        self._check_optional = options.check_optional
        self._string_choices = options.string_choices
        self._convert_values = options.convert_values
        self._pick_bias = options.pick_bias
        self._new_call_bias = options.new_call_bias
        self._no_placeholders = options.no_placeholders
        self._heuristics = options.heuristics
        self._pick_fits: dict[tuple[str, tuple[str, ...]], list[float]] = {}
        threshold = options.fit_threshold
        self._fit_threshold = calibrated(self._llama.metadata) if threshold == "calibrated" else threshold
        self._fit: FitScorer | None = None
        self._bos = self._template.bos_token.encode()
        # Byte matching needs pieces that tokenise alone exactly: byte-level BPE, or a
        # SentencePiece vocabulary that adds no leading space (Gemma's; Llama 2's adds one).
        self._text_reuse = self._vocab.exact_pieces
        self._decoder = Decoder(
            self._cache,
            self._vocab,
            Lookahead(self._cache, self._vocab, self._tokenize),
            default_hooks(
                copy_bias=options.copy_bias,
                close_bias=options.close_bias,
                string_choices=options.string_choices,
                check_optional=options.check_optional,
                convert_values=options.convert_values,
                pick_bias=options.pick_bias,
                score=self._fits,
                new_call_bias=options.new_call_bias,
                no_placeholders=options.no_placeholders,
            ),
            jump_forward=options.jump_forward,
        )
        self._rng = np.random.default_rng()
        self._worker = Lane()
        self._closed = False
        self._current: Job | None = None
        self._live: tuple[float, int, int, Counts, list[str]] | None = None

    def __repr__(self) -> str:
        return f"LlamaCpp({str(self.model_path)!r}, n_ctx={self._n_ctx})"

    @property
    def metadata(self) -> dict[str, str]:
        """The GGUF metadata, as strings."""
        return dict(self._llama.metadata)

    @property
    def fit_threshold(self) -> float | None:
        """The `fit_threshold` in use: the one given, or this model's calibrated one (`None`:
        no tool-fit decision, the model's first key decides under `tool_choice="auto"`)."""
        return self._fit_threshold

    @property
    def n_ctx(self) -> int:
        """The context length in tokens."""
        return self._n_ctx

    @property
    def context_window(self) -> int:
        """How many tokens the context holds: `n_ctx` (an `Agent` trims its conversation to it)."""
        return self._n_ctx

    @property
    def chat_template(self) -> str:
        """The Jinja source of the chat template in use."""
        return self._template.source

    def render(self, messages: list[ChatMessage]) -> str:
        """The prompt text that `chat(messages)` would evaluate."""
        return self._template.render(messages)

    def reset(self) -> None:
        """Forget the KV cache of every conversation: the next prompt is prefilled in full.

        Waits for the work already started or queued on the thread the engines share
        (this engine's generations, and those of other engines of the process).
        """
        self._worker.submit(self._slots.clear).result()

    def close(self) -> None:
        """Stop any generation, free the model. Later calls do nothing.

        This waits for the engine's generation in progress (at most one token or prefill
        chunk), whose stream then ends with a `RuntimeError`, as does that of a generation
        still waiting its turn.
        """
        if self._closed:
            return
        self._closed = True
        job = self._current
        if job is not None:
            job.cancelled.set()
        self._worker.shutdown()
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
            tools: Each tool as `"name(fields)"` (`aerix.turn.fit_text`).
        """
        if self._fit_threshold is None:
            return None
        try:
            return await self.fit_score(request, tools) >= self._fit_threshold
        except ValueError:  # a template that refuses a lone or empty user message
            return None

    async def fit_score(self, request: str, tools: Sequence[str]) -> float:
        """How well the best of `tools` fits `request`, in nats per token; `-inf` for no tools.

        The mean, over the first 16 tokens of a tool's text (`"name(fields)"`), of
        how much more likely the model finds each token after the request than
        after an empty one, in its own chat template: from `FIT_THRESHOLD` on,
        the request speaks of what the tool does. Only the first tokens count:
        most of the request's evidence sits in the name and the first words,
        and a mean over them is steadier than one over every token when a
        request is worded otherwise (docs/quality.md). Runs on a small context
        of its own: the KV cache of `chat` is left as it was.

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

    def _scorer(self) -> FitScorer:
        if self._fit is None:
            self._fit = FitScorer(
                self._llama, self._template.render, self._tokenize, threads=self._threads.choose
            )
        return self._fit

    def _fit_score(self, request: str, tools: list[str]) -> float:
        return self._scorer().score(request, tools)

    def _fits(self, request: str, tools: list[str]) -> list[float]:
        """Each tool's fit to `request` (`FitScorer.fits`), for `ToolPick` on the worker thread.

        Kept for the latest requests: a score does not depend on what was scored before, so
        a retry or another generation for the same request and tools reads it again.
        """
        key = (request, tuple(tools))
        fits = self._pick_fits.pop(key, None)
        if fits is None:
            fits = self._scorer().fits(request, tools)
        self._pick_fits[key] = fits  # the latest last
        while len(self._pick_fits) > _PICKS_KEPT:
            del self._pick_fits[next(iter(self._pick_fits))]
        return fits

    async def chat(
        self, messages: list[ChatMessage], opts: GenerateOptions | None = None
    ) -> AsyncIterator[Delta]:
        """Stream one generation: text deltas, then one done delta with `finish` and `usage`.

        An aborted generation (`opts["signal"]`) ends promptly with a done delta
        whose `finish` is `"stop"`. Closing or cancelling the stream stops the
        generation too. Generations run one after the other, on one engine and across the
        engines of a process (they share one worker thread).

        Args:
            messages: The conversation, system message first.
            opts: Sampling settings, `max_tokens`, `stop`, `constraint` and `signal`.

        Raises:
            AerixError: `kind="options"`: a bad option or a schema that cannot be enforced.
            ContextExceeded: The prompt's tokens and `max_tokens` together exceed `n_ctx`
                (raised before the first delta; the cache is left as it was).
            ValueError: The template refused the messages.
        """
        if self._closed:
            raise RuntimeError("this LlamaCpp engine is closed")
        job = Job(parse_request(messages, opts), asyncio.get_running_loop())
        signal = job.request.signal
        forget = None if signal is None else signal.add_callback(job.abort_waiting)  # a queued one too
        try:
            self._worker.submit(self._run, job).add_done_callback(_unless_run(job))
            while True:
                item = await job.queue.get()
                if isinstance(item, BaseException):
                    raise item
                yield item
                if item.done:
                    return
        finally:
            if forget is not None:
                forget()
            job.cancelled.set()

    # -- the worker thread ---------------------------------------------------

    @property
    def progress(self) -> Progress | None:
        """What the generation in progress has done so far; `None` when none runs.

        Safe to read from any thread (a page that shows a long prefill reads it).
        """
        live = self._live
        if live is None:
            return None
        t0, prompt, cached, counts, phase = live
        return Progress(
            phase="prefill" if phase[0] == "prefill" else "decode",
            prompt_tokens=prompt,
            cached_tokens=cached,
            prefilled_tokens=counts.prefilled,
            generated_tokens=counts.generated,
            seconds=time.perf_counter() - t0,
        )

    def _run(self, job: Job) -> None:
        if not job.start():  # the consumer left, or an abort ended it, while it waited
            return
        self._current = job
        try:
            self._generate(job)
        except BaseException as exc:
            job.emit(exc)
        finally:
            self._current = None
            self._live = None

    def _generate(self, job: Job) -> None:
        req = job.request
        t0 = time.perf_counter()
        prompt = self._template.render(req.prompt).encode()
        self._check_fits(prompt)
        constrained = None if req.schema is None else self._schemas.start(req.schema)
        cache = self._cache
        choice = self._slots.choose(prompt, self._tokenize, text_reuse=self._text_reuse)
        self._check_room(len(choice.plan.tokens), req.max_tokens)
        plan = self._slots.take(choice)
        counts = Counts()
        phase = ["prefill"]
        self._live = (t0, len(plan.tokens), plan.reuse, counts, phase)
        t1 = t0
        finish: FinishReason = "stop"
        try:
            todo = plan.tokens[plan.reuse :]
            if todo:  # the threads for a prefill: none to choose when all of it is cached
                self._threads.choose()
            # What the schema forces first (`{"`) needs no logits of its own: it is
            # evaluated with the prompt's last chunk instead of in a decode of its own.
            opening = self._decoder.forced(constrained, req.max_tokens)
            with_prompt = bool(opening) and len(plan.tokens) + len(opening) < self._n_ctx
            for i in range(0, len(todo), self._chunk):
                if job.stopped():
                    break  # an abort before the first chunk leaves the cache untouched
                if i == 0:
                    cache.truncate(plan.reuse)
                chunk = todo[i : i + self._chunk]
                if i + self._chunk < len(todo):
                    cache.eval_prompt(chunk)
                else:
                    then = opening if with_prompt else []
                    tc = time.perf_counter()
                    cache.eval_prompt(chunk, prompt, then, [self._vocab.piece(t)[0] for t in then])
                    t1 = time.perf_counter()
                    # The opening's share of that evaluation counts as decoding time.
                    t1 -= (t1 - tc) * len(then) / (len(chunk) + len(then))
                counts.prefilled += len(chunk)
            else:
                phase[0] = "decode"
                rng = self._rng if req.seed is None else np.random.default_rng(req.seed)
                bias = self._bias(req, constrained)
                finish = self._decoder.run(
                    job, constrained, bias, counts, rng, opening, evaluated=with_prompt
                )
        finally:
            cache.sync()
            self._slots.settle()
        t2 = time.perf_counter()
        if counts.generated == 0 and t1 == t0:
            t1 = t2
        usage = Usage(
            prompt_tokens=len(plan.tokens),
            completion_tokens=counts.generated,
            cached_tokens=plan.reuse,
        )
        self.last_stats = GenerationStats(
            prompt_tokens=usage.prompt_tokens,
            cached_tokens=usage.cached_tokens,
            prefilled_tokens=counts.prefilled,
            completion_tokens=usage.completion_tokens,
            forced_tokens=counts.forced,
            unevaluated_tokens=counts.generated - max(0, cache.n_tokens - len(plan.tokens)),
            prefill_s=t1 - t0,
            decode_s=t2 - t1,
        )
        self._live = None  # before the done delta: a consumer that reads it sees the engine idle
        if self._closed:  # `close()` cut it short: a failure, not a turn that merely stopped
            raise RuntimeError("this LlamaCpp engine was closed during the generation")
        job.emit(Delta(done=True, finish=finish, usage=usage))

    def _check_fits(self, prompt: bytes) -> None:
        """Refuse a prompt far too long for the context before tokenising it (megabytes take
        tens of seconds): it has at least one token per `Vocab.longest` bytes.

        Raises:
            ContextExceeded: The prompt cannot fit, whatever its tokens (its `prompt_tokens`
                is that lower bound).
        """
        if len(prompt) > 8 * self._n_ctx and (least := len(prompt) // self._vocab.longest) >= self._n_ctx:
            raise ContextExceeded(
                least,
                self._n_ctx,
                f"the prompt has at least {least} tokens ({len(prompt)} bytes) and does not fit in the "
                f"context of {self._n_ctx} tokens; pass a larger n_ctx to LlamaCpp (or aerix.load)",
            )

    def _check_room(self, prompt_tokens: int, max_tokens: int | None) -> None:
        """Refuse a prompt that leaves no room for the generation: its tokens and `max_tokens`
        (at least one token without it) must fit in `n_ctx`.

        Raises:
            ContextExceeded: They do not.
        """
        if prompt_tokens + (max_tokens or 1) <= self._n_ctx:
            return
        room = "" if max_tokens is None else f" with max_tokens={max_tokens}"
        raise ContextExceeded(
            prompt_tokens,
            self._n_ctx,
            f"the prompt has {prompt_tokens} tokens and does not fit in the context of {self._n_ctx} "
            f"tokens{room}; pass a larger n_ctx to LlamaCpp (or aerix.load)"
            + ("" if max_tokens is None else ", or a smaller max_tokens"),
        )

    def _bias(self, req: Request, constrained: Constrained | None) -> ValueBias | None:
        """The value biases of a constrained generation, from what the loop hands over of the
        conversation (`Handover`; without one, values copy from the user's messages)."""
        copy, close = self._biases
        rules = (
            copy
            or close
            or self._check_optional
            or self._string_choices > 1
            or self._pick_bias
            or self._new_call_bias
            or self._no_placeholders
        )
        if constrained is None or not rules:
            return None
        return value_bias(
            req.schema,
            handover_of(req.prompt, req.handover),
            copy=copy,
            close=close,
            piece=self._vocab.piece_text,
            check_optional=self._check_optional,
            convert_values=self._convert_values,
            pick=bool(self._pick_bias),
            new_calls=bool(self._new_call_bias),
            placeholders=self._no_placeholders,
            heuristics=self._heuristics,
        )

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
        where = repr(str(self.model_path))
        return ChatTemplate(
            source,
            bos_token=self._vocab.text(self._llama.token_bos()),
            eos_token=self._vocab.text(self._llama.token_eos()),
            name=f"the chat_template given for {where}" if override else f"the chat template of {where}",
        )


def _unless_run(job: Job) -> Callable[[Future[None]], None]:
    """A generation's callback for its work on the worker thread: a generation whose work
    was cancelled (the engine closed while it waited its turn) ends its stream with an error
    instead of waiting for ever."""

    def done(future: Future[None]) -> None:
        if future.cancelled():
            job.emit(RuntimeError("this LlamaCpp engine was closed before the generation started"))

    return done
