"""Sampling and streaming text (`aerix.engines.llamacpp._sampling`): pure, no model needed."""

from __future__ import annotations

import itertools

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from aerix.engines.llamacpp._sampling import Sampling, TextStream, sample, top_tokens

GREEDY = Sampling(temperature=0)


def bitmask(allowed: list[int], n: int) -> np.ndarray:
    mask = np.zeros((n + 31) // 32, dtype=np.int32)
    for t in allowed:
        mask[t >> 5] |= np.int32(1 << (t & 31)) if (t & 31) < 31 else np.int32(-(1 << 31))
    return mask


def test_greedy_takes_the_best_allowed_token() -> None:
    logits = np.array([0.0, 5.0, 1.0, 3.0] * 20, dtype=np.float32)
    rng = np.random.default_rng(0)
    assert sample(logits, GREEDY, rng) == 1
    assert sample(logits, GREEDY, rng, bitmask([2, 3, 63], 80)) == 3
    assert sample(logits, GREEDY, rng, bitmask([63], 80)) == 63


def test_sampling_keeps_to_the_mask_and_the_seed() -> None:
    logits = np.random.default_rng(1).standard_normal(100).astype(np.float32)
    s = Sampling(temperature=1.5, top_k=0, top_p=1.0, min_p=0.0)
    allowed = [3, 31, 64, 99]
    picks = [sample(logits, s, np.random.default_rng(i), bitmask(allowed, 100)) for i in range(50)]
    assert set(picks) <= set(allowed) and len(set(picks)) > 1
    again = [sample(logits, s, np.random.default_rng(i), bitmask(allowed, 100)) for i in range(50)]
    assert picks == again


def test_top_k_and_min_p_narrow_the_choice() -> None:
    logits = np.array([10.0, 9.0, 0.0, -1.0, -2.0], dtype=np.float32)
    rng = np.random.default_rng(0)
    top2 = Sampling(temperature=5.0, top_k=2, top_p=1.0, min_p=0.0)
    assert {sample(logits, top2, rng) for _ in range(200)} == {0, 1}
    min_p = Sampling(temperature=5.0, top_k=0, top_p=1.0, min_p=0.2)
    assert {sample(logits, min_p, rng) for _ in range(200)} == {0, 1}


@given(
    values=st.lists(st.sampled_from([-np.inf, -1.0, 0.0, 0.5, 2.0, 7.0]), max_size=80),
    k=st.integers(min_value=0, max_value=90),
)
def test_top_tokens_are_the_k_best_allowed_tokens_in_token_order(values: list[float], k: int) -> None:
    logits = np.array(values, dtype=np.float32)
    got = top_tokens(logits, k).tolist()
    allowed = [t for t, v in enumerate(values) if np.isfinite(v)]
    assert got == sorted(got) and set(got) <= set(allowed)
    assert len(got) == min(k, len(allowed))
    if got and len(got) < len(allowed):  # no token left out beats one kept
        assert max(values[t] for t in allowed if t not in got) <= min(values[t] for t in got)


def test_top_k_sampling_over_a_masked_vocabulary_picks_among_the_allowed_tokens() -> None:
    logits = np.random.default_rng(2).standard_normal(49152).astype(np.float32)
    allowed = [7, 700, 7000, 40000]
    s = Sampling(temperature=1.0, top_k=40, top_p=1.0, min_p=0.0)
    picks = {sample(logits, s, np.random.default_rng(i), bitmask(allowed, 49152)) for i in range(60)}
    assert picks <= set(allowed) and len(picks) > 1
    top2 = Sampling(temperature=1.0, top_k=2, top_p=1.0, min_p=0.0)
    best = sorted(allowed, key=lambda t: -logits[t])[:2]
    assert {
        sample(logits, top2, np.random.default_rng(i), bitmask(allowed, 49152)) for i in range(60)
    } == set(best)


@given(
    text=st.text(alphabet="ab€😀</>", max_size=30),
    stops=st.lists(st.text(alphabet="ab€</>", min_size=1, max_size=4), max_size=3),
    cuts=st.lists(st.integers(min_value=0, max_value=200), max_size=10),
)
def test_text_stream_is_utf8_safe_and_stops_at_the_first_complete_stop_string(
    text: str, stops: list[str], cuts: list[int]
) -> None:
    data = text.encode()
    bounds = sorted({0, len(data), *(c % (len(data) + 1) for c in cuts)})
    stream = TextStream(stops)
    out = [stream.push(data[a:b]) for a, b in itertools.pairwise(bounds)]
    out.append(stream.flush())
    # The stop string that is complete first (the earliest end) cuts the text.
    hits = [(i + len(s), i) for s in stops if (i := text.find(s)) >= 0]
    assert "".join(out) == (text[: min(hits)[1]] if hits else text)
    assert stream.stopped == bool(hits)
