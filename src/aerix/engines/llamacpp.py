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
import ctypes
import os
import threading
import time
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..abort import AbortSignal
from ..errors import AerixError
from ..model import ChatMessage, Delta, FinishReason, GenerateOptions, Usage
from ._chat_template import ChatTemplate
from ._constraint import Constrained, SchemaCompiler
from ._prefix import TokenHistory
from ._sampling import Sampling, TextStream, sample

try:
    import llama_cpp
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError("aerix.engines.LlamaCpp needs llama-cpp-python: pip install 'aerix[llama]'") from exc

__all__ = ["GenerationStats", "LlamaCpp"]

_OPTION_KEYS = frozenset(GenerateOptions.__optional_keys__)


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


@dataclass(frozen=True, kw_only=True, slots=True)
class _Request:
    prompt: list[ChatMessage]
    sampling: Sampling
    max_tokens: int | None
    seed: int | None
    stop: tuple[str, ...]
    schema: object
    signal: AbortSignal | None


class _Job:
    """One generation travelling from the event loop to the worker thread."""

    def __init__(self, request: _Request, loop: asyncio.AbstractEventLoop) -> None:
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
        n_threads: CPU threads for decoding (llama-cpp-python's default if `None`).
        n_batch: The most tokens evaluated in one `llama_decode` call.
        prefill_chunk: Tokens prefilled between two checks of the abort signal.
        chat_template: A Jinja chat template to use instead of the model's own.
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
        prefill_chunk: int = 128,
        chat_template: str | None = None,
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
        self._vocab = llama_cpp.llama_model_get_vocab(self._llama.model)
        self._n_vocab = int(self._llama.n_vocab())
        self._n_ctx = int(self._llama.n_ctx())
        self._chunk = min(prefill_chunk, n_batch)
        self._pieces: dict[int, tuple[bytes, bytes]] = {}
        self._template = self._load_template(chat_template)
        self._bos = self._template.bos_token.encode()
        # Byte matching is exact only for byte-level BPE; other vocabularies
        # (SentencePiece) re-add a leading space when a piece is tokenised alone.
        self._text_reuse = llama_cpp.llama_vocab_type(self._vocab) == llama_cpp.LLAMA_VOCAB_TYPE_BPE
        self._schemas = SchemaCompiler(self._make_lltokenizer, self._n_vocab)
        self._history = TokenHistory()
        self._rng = np.random.default_rng()
        self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="aerix-llamacpp")
        self._closed = False
        self.last_stats: GenerationStats | None = None
        """What the latest finished generation cost."""

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

    def close(self) -> None:
        """Free the model; waits for a running generation to end. Later calls do nothing."""
        if self._closed:
            return
        self._closed = True
        self._worker.shutdown(wait=True, cancel_futures=True)
        self._llama.close()

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
        job = _Job(_request(messages, opts), asyncio.get_running_loop())
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
        try:
            self._generate(job)
        except BaseException as exc:
            job.emit(exc)

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
        self._truncate(plan.reuse)
        counts = {"prefilled": 0, "generated": 0, "forced": 0}
        t1 = t0
        finish: FinishReason = "stop"
        try:
            todo = plan.tokens[plan.reuse :]
            for i in range(0, len(todo), self._chunk):
                if job.stopped():
                    break
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
        """Generate after a complete prefill; the last generated token is never evaluated."""
        req = job.request
        rng = self._rng if req.seed is None else np.random.default_rng(req.seed)
        text = TextStream(req.stop)
        limit = req.max_tokens
        # A schema may force the first tokens already, e.g. `{"calls":[`.
        batch = self._forced(constrained, limit, counts)
        while True:
            if batch:
                counts["generated"] += len(batch)
                pieces = self._emit_text(job, text, batch)
                if text.stopped:
                    return self._finish(job, text, "stop")
                if constrained is not None and constrained.done:
                    # Keep the cache one token short of the output, as after an EOS.
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
            token = sample(logits, req.sampling, rng, mask)
            if llama_cpp.llama_vocab_is_eog(self._vocab, token):
                return self._finish(job, text, "stop")
            batch = [token]
            if constrained is not None:
                constrained.consume(batch)
                room = None if limit is None else limit - counts["generated"] - 1
                batch += self._forced(constrained, room, counts)

    def _forced(self, constrained: Constrained | None, room: int | None, counts: dict[str, int]) -> list[int]:
        """The tokens the schema forces now (consumed), at most `room` of them."""
        if constrained is None or constrained.done or room == 0:
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

    def _emit_text(self, job: _Job, text: TextStream, batch: list[int]) -> list[bytes]:
        pieces = [self._piece(t) for t in batch]
        out = text.push(b"".join(p[1] for p in pieces))
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
        mem = llama_cpp.llama_get_memory(self._ctx)
        if n < self._n_tokens and not llama_cpp.llama_memory_seq_rm(mem, 0, n, -1):
            llama_cpp.llama_memory_clear(mem, True)
            n = 0
        self._llama.n_tokens = min(n, self._n_tokens)
        self._history.truncate(self._n_tokens)

    def _sync(self) -> None:
        """After a generation, however it ended: the history matches the KV cache."""
        n = min(self._n_tokens, len(self._history.tokens))
        if list(self._llama.input_ids[:n]) != self._history.tokens[:n]:
            n = 0  # should not happen; start over rather than trust a mismatch
        mem = llama_cpp.llama_get_memory(self._ctx)
        if not llama_cpp.llama_memory_seq_rm(mem, 0, n, -1):
            llama_cpp.llama_memory_clear(mem, True)
            n = 0
        self._llama.n_tokens = n
        self._history.truncate(n)
        if n == 0:
            self._history.clear()

    def _tokenize(self, text: bytes, add_bos: bool) -> list[int]:
        if add_bos and self._template.bos_token and text.startswith(self._bos):
            add_bos = False  # the template wrote the BOS already
        tokens: list[int] = self._llama.tokenize(text, add_bos=add_bos, special=True)
        return tokens

    def _piece(self, token: int) -> tuple[bytes, bytes]:
        """The token's bytes: (with special tokens spelled out, as shown to the user)."""
        cached = self._pieces.get(token)
        if cached is None:
            raw = _token_to_piece(self._vocab, token, special=True)
            control = llama_cpp.llama_vocab_get_attr(self._vocab, token) & (
                llama_cpp.LLAMA_TOKEN_ATTR_CONTROL
            )
            cached = (raw, b"" if control else raw)
            self._pieces[token] = cached
        return cached

    def _make_lltokenizer(self) -> Any:
        from llguidance.llamacpp import lltokenizer_from_vocab

        eog = [t for t in range(self._n_vocab) if llama_cpp.llama_vocab_is_eog(self._vocab, t)]
        return lltokenizer_from_vocab(self._vocab, n_vocab=self._n_vocab, eos_token=eog or None)

    def _load_template(self, override: str | None) -> ChatTemplate:
        source = override or self._llama.metadata.get("tokenizer.chat_template")
        if not source:
            raise ValueError(
                f"{str(self.model_path)!r} has no chat template in its metadata "
                "(tokenizer.chat_template); pass one as LlamaCpp(..., chat_template=...)"
            )

        def text(token: int) -> str:
            if token < 0:
                return ""
            return _token_to_piece(self._vocab, token, special=True).decode(errors="replace")

        return ChatTemplate(
            source, bos_token=text(self._llama.token_bos()), eos_token=text(self._llama.token_eos())
        )


def _token_to_piece(vocab: Any, token: int, *, special: bool) -> bytes:
    size = 64
    while True:
        buf = ctypes.create_string_buffer(size)
        n = int(llama_cpp.llama_token_to_piece(vocab, token, buf, size, 0, special))
        if n >= 0:
            return buf.raw[:n]
        size = -n


def _request(messages: list[ChatMessage], opts: GenerateOptions | None) -> _Request:
    """Check the options; the errors name the option, the value and what is allowed."""
    o: dict[str, Any] = dict(opts or {})
    unknown = sorted(set(o) - _OPTION_KEYS)
    if unknown:
        raise AerixError("options", f"unknown option(s) {unknown}; allowed: {sorted(_OPTION_KEYS)}")

    def number(key: str, lo: float, hi: float, kind: type = float) -> Any:
        value = o.get(key)
        if value is None:
            return None
        ok = isinstance(value, int if kind is int else (int, float)) and not isinstance(value, bool)
        if not ok or not lo <= value <= hi:
            kind_name = "an integer" if kind is int else "a number"
            raise AerixError("options", f"{key} must be {kind_name} in [{lo}, {hi}], got {value!r}")
        return value

    defaults = Sampling()
    temperature = number("temperature", 0.0, 100.0)
    top_p = number("top_p", 0.0, 1.0)
    top_k = number("top_k", 0, 1 << 31, int)
    min_p = number("min_p", 0.0, 1.0)
    max_tokens = number("max_tokens", 1, 1 << 31, int)
    seed = number("seed", -(1 << 63), 1 << 64, int)
    stop = o.get("stop") or []
    if not isinstance(stop, list | tuple) or not all(isinstance(s, str) for s in stop):
        raise AerixError("options", f"stop must be a list of strings, got {stop!r}")
    constraint = o.get("constraint")
    if constraint is not None and not (isinstance(constraint, dict) and set(constraint) == {"json"}):
        raise AerixError("options", f'constraint must be {{"json": <JSON Schema>}}, got {constraint!r}')
    signal = o.get("signal")
    if signal is not None and not isinstance(signal, AbortSignal):
        raise AerixError("options", f"signal must be an AbortSignal, got {signal!r}")
    for m in messages:
        if not isinstance(m, dict) or not isinstance(m.get("content"), str):
            raise AerixError("options", f"each message needs a role and a string content, got {m!r}")
    return _Request(
        prompt=list(messages),
        sampling=Sampling(
            temperature=defaults.temperature if temperature is None else float(temperature),
            top_k=defaults.top_k if top_k is None else top_k,
            top_p=defaults.top_p if top_p is None else float(top_p),
            min_p=defaults.min_p if min_p is None else float(min_p),
        ),
        max_tokens=max_tokens,
        seed=None if seed is None else seed % (1 << 64),
        stop=tuple(stop),
        schema=None if constraint is None else constraint["json"],
        signal=signal,
    )
