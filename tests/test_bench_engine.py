"""bench/engine.py: which of several side-by-side runs its tables show."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))

from engine import median_run


@pytest.mark.parametrize(
    ("ratios", "index"),
    [
        ([1.7], 0),
        ([1.9, 1.6, 1.8], 2),
        ([1.6, 1.9, 1.7, 1.8], 2),  # an even count: the lower middle
        ([1.8, 1.8, 1.7], 0),
    ],
)
def test_the_median_run_is_shown(ratios: list[float], index: int) -> None:
    assert median_run(ratios) == index


def test_no_runs_is_an_error() -> None:
    with pytest.raises(ValueError, match="at least one run"):
        median_run([])
