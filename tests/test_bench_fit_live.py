"""bench/fit_live.py: which tools each real request is scored against when none fits, and the curve."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))

from _bfcl.data import Entry, in_part, load
from fit_live import THRESHOLDS, choose, curve, mismatches, words


def entry(id: str, *names: str) -> Entry:
    functions = [{"name": n, "parameters": {"type": "object", "properties": {}}} for n in names]
    return Entry(id=id, question="?", functions=functions, answers=None, flat=True, single=True)


def test_a_mismatch_shares_no_word_of_its_function_names() -> None:
    entries = [
        entry("a", "api.weather", "uber.ride"),
        entry("b", "get_weather"),
        entry("c", "uber_eats.order"),
        entry("d", "calendar.add_event"),
    ]
    assert [m.id if m else None for m in mismatches(entries)] == ["d", "c", "d", "a"]


def test_an_entry_that_shares_a_word_with_every_other_has_no_mismatch() -> None:
    entries = [entry("a", "get_weather"), entry("b", "weather.now"), entry("c", "weather_alerts")]
    assert mismatches(entries) == [None, None, None]


def test_every_mismatch_of_the_tuning_part_is_another_tuning_entry() -> None:
    entries = [e for e in in_part(load("live_multiple"), "tuning") if e.flat and e.single]
    found = mismatches(entries)
    assert sum(m is not None for m in found) > 0.9 * len(entries)
    for e, m in zip(entries, found, strict=True):
        assert m is None or (m.id != e.id and not words(e) & words(m) and m in entries)


def test_the_curve_counts_calls_at_or_above_the_threshold_and_declines_below() -> None:
    rows = curve([0.5, 0.1, -0.3], [0.0, -0.5], chosen=0.25, default=0.33)
    shown = [t for t in sorted({*THRESHOLDS, 0.25, 0.33})]
    by_threshold = {t: row for t, row in zip(shown, rows[2:], strict=True)}
    assert by_threshold[0.0] == "| +0.00 | 67% | 50% |"
    assert by_threshold[0.1] == "| +0.10 | 67% | 100% |"
    assert by_threshold[0.25] == "| **+0.25 (chosen here)** | **33%** | **100%** |"
    assert by_threshold[0.33] == "| +0.33 (the engine's default) | 33% | 100% |"
    same = curve([0.5], [0.0], chosen=0.2, default=0.2)
    assert "| **+0.20 (chosen here: the engine's default)** | **100%** | **100%** |" in same


def test_the_chosen_threshold_is_the_lowest_that_declines_enough() -> None:
    declines = [i / 100 for i in range(100)]  # 0.00 … 0.99: a threshold t declines the share below t
    assert choose([1.0], declines) == 0.85
    assert choose([1.0], [-2.0] * 20) == -1.0  # every mismatch below the lowest step
    assert choose([1.0], [0.1] * 17 + [0.5] * 3) == 0.11  # 17 of 20: 85%
