"""Decoding ahead (`aerix.engines.llamacpp._lookahead`) on the tiny GGUF: `judged` answers as
the whole look-ahead does, without evaluating the model where the schema leaves only values
judged alike."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _steps import rules_for

from aerix.engines import LlamaCpp
from aerix.engines.llamacpp import _lookahead

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "input": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "unit": {"enum": ["c", "f"]}},
            "required": ["city"],
            "additionalProperties": False,
        }
    },
    "required": ["input"],
    "additionalProperties": False,
}
WRITTEN = b'{"input":{"city":"Oslo'


@pytest.fixture
def engine(tiny_gguf: Path) -> Iterator[LlamaCpp]:
    e = LlamaCpp(tiny_gguf, n_ctx=512, n_threads=1)
    yield e
    e.close()


def judge_unit(engine: LlamaCpp, source: str, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, Any, int]:
    """Judge the optional `unit` the token `","` adds after "Oslo": `judged`'s answer, the whole
    look-ahead's answer, and how many model evaluations `judged` made."""
    cache, vocab = engine._cache, engine._vocab
    cache.eval_prompt(engine._tokenize(b"<|im_start|>user\nWeather?<|im_end|>\n", True))
    constrained = engine._schemas.start(SCHEMA)
    bias = rules_for(source, copy=2.5, close=2.0, piece=vocab.piece_text)
    written = engine._tokenize(WRITTEN, False)
    constrained.consume(written)
    bias.feed(WRITTEN)
    cache.eval(written)
    (comma,) = engine._tokenize(b'","', False)
    look = engine._decoder._lookahead
    evals: list[int] = []
    real_eval = cache.eval

    def counted(tokens: list[int]) -> None:
        evals.append(len(tokens))
        real_eval(tokens)

    monkeypatch.setattr(cache, "eval", counted)
    n = cache.n_tokens
    answer = look.judged(lambda: False, constrained, bias, comma, bias.optional.supports)
    assert cache.n_tokens == n  # the cache is cut back either way
    judging = len(evals)
    ahead = look.ahead(lambda: False, constrained, bias, comma)
    assert ahead is not None and ahead.ended and ahead.text.startswith('","unit":"')
    return answer, bias.optional.supports(ahead.text), judging


def test_a_value_every_allowed_token_settles_alike_needs_no_evaluation(
    engine: LlamaCpp, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Neither "c" nor "f" is a span of the request: whatever the model picks, the field is dropped.
    answer, full, evals = judge_unit(engine, "Weather in Oslo?", monkeypatch)
    assert answer is False and full is False and evals == 0


def test_values_judged_differently_are_decoded_ahead(
    engine: LlamaCpp, monkeypatch: pytest.MonkeyPatch
) -> None:
    # "f" is given, "c" is not: the model's own pick decides, as without the shortcut.
    answer, full, evals = judge_unit(engine, "Weather in Oslo in f", monkeypatch)
    assert answer == full and evals >= 1


def test_without_the_shortcut_the_answer_is_the_same(
    engine: LlamaCpp, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_lookahead, "SETTLE", 0)
    answer, full, evals = judge_unit(engine, "Weather in Oslo?", monkeypatch)
    assert answer is False and full is False and evals >= 1
