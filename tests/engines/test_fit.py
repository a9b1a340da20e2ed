"""The tool-fit rule (`_fit.combine`) on given per-token scores, and the scorer's head on a tiny GGUF."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("llama_cpp", reason="the LlamaCpp tests need aerix[llama]")

from aerix.engines import LlamaCpp
from aerix.engines.llamacpp._fit import HEAD, combine


def test_the_best_tool_counts_by_its_first_tokens_only() -> None:
    # A tool whose score is high on its name and first words, then near zero along a long
    # description, keeps its score however long the description runs.
    short = np.array([1.2] * 8 + [0.4] * 8)
    long = np.concatenate([short, np.full(100, 0.05)])
    assert combine([short]) == pytest.approx(0.8)
    assert combine([long]) == pytest.approx(0.8)
    assert float(np.mean(long)) < 0.3  # the mean over every token would fall below the threshold
    # The set's score is its best tool's; a text shorter than HEAD counts by all its tokens.
    assert combine([np.array([-0.5] * 20), np.array([0.3, 0.1])]) == pytest.approx(0.2)
    assert combine([]) == -math.inf
    assert HEAD == 16


async def test_the_scorer_reads_each_tool_text_up_to_its_head(tiny_gguf: Path) -> None:
    engine = LlamaCpp(tiny_gguf, n_ctx=256)
    try:
        long = "greet: Say hello. " + "Then say it again, louder and louder. " * 20
        score = await engine.fit_score("hello there", [long])
        assert engine._fit is not None
        (scores,) = engine._fit.token_scores("hello there", [long])
        assert len(scores) == HEAD
        assert score == pytest.approx(float(np.mean(scores)), abs=1e-6)
        assert set(engine._fit._baselines) == {long}
    finally:
        engine.close()


async def test_a_score_does_not_depend_on_what_was_scored_before(tiny_gguf: Path) -> None:
    # llama.cpp's logits differ with a decode's batch shape; the scorer decodes each prompt
    # alone and each text on top of it, so the same request and tools score the same after any
    # history, in any order, alone or with other tools.
    tools = ["greet(name): Say hello.", "count(text): Count the words of a text."]
    fresh = LlamaCpp(tiny_gguf, n_ctx=256)
    used = LlamaCpp(tiny_gguf, n_ctx=256)
    try:
        first = await fresh.fit_score("hello there, how are you?", tools)
        for request in ("hello there", "a much longer request about the weather in Lisbon today", ""):
            await used.fit_score(request, ["weather(city): The forecast.", *tools])
        assert await used.fit_score("hello there, how are you?", tools) == first
        assert await used.fit_score("hello there, how are you?", tools[::-1]) == first
        alone = [await fresh.fit_score("hello there, how are you?", [t]) for t in tools]
        assert alone[0] != alone[1] and max(alone) == first  # the set's score is its best tool's
    finally:
        fresh.close()
        used.close()
