"""The heuristics (`rules.heuristics`): each is switched on and off by name, and acts only on
when on; `LlamaCpp(heuristics=...)` checks the names and values it is given."""

from __future__ import annotations

import importlib
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from _steps import rules_for

from aerix import AerixError
from aerix.engines import LlamaCpp
from aerix.engines.llamacpp.rules import HEURISTICS, Context, check_heuristics, value_bias
from aerix.model import Handover

INPUT = '{"calls":[{"tool":"t","input":{'
SERIES = {k: {"mass1", "mass2"} for k in ("mass1", "mass2")}

CASES: dict[str, tuple[str, list[str], str, dict[str, Any], list[float]]] = {
    # name: (source, pieces, written, options, logits with the heuristic on; off they differ)
    "quotes": (
        "Name the branch 'main' please",
        ["main", "please"],
        '"branch":"',
        {"quoted": ("main",)},
        [2, 1],
    ),
    "own_name": ("plants for a hill slope", ["slope", "hill"], '"slope_type":"', {}, [0, 1]),
    "bare_numbers": (
        "2 cups of flour",
        ["2", "cups"],
        '"unit":"',
        {"siblings": {"unit": {"amount"}}},
        [0, 1],
    ),
    "into_dates": ("Air in Oslo 2024-05-01?", [" 2024", '"'], '"city":"Oslo', {}, [-1, 1]),
    "cut_short": ("Visit the Golden Gate Bridge", ['"', " Gate"], '"place":"Golden', {}, [1, 2]),
    "series_order": ("Mix 20 kg with 15 kg.", ["20", "15"], '"mass1":', {"siblings": SERIES}, [2, 1]),
    "nearby_fields": (
        "a width of 4 and a depth of 9",
        ["4", "9"],
        '"depth":',
        {"siblings": {k: {"width", "depth"} for k in ("width", "depth")}},
        [0, 2],
    ),
    "booleans": ("Search without images.", ["false", "true"], '"include_images":', {}, [1, 0]),
}


def nudges(name: str, on: bool) -> list[float]:
    source, pieces, written, options, _ = CASES[name]
    names = set(HEURISTICS) if on else set(HEURISTICS) - {name}
    b = rules_for(source, copy=1.0, close=0.0, piece=pieces.__getitem__, heuristics=names, **options)
    b.feed((INPUT + written).encode())
    return b.apply(np.zeros(len(pieces), dtype=np.float32)).tolist()  # type: ignore[no-any-return]


def test_every_heuristic_has_a_case() -> None:
    assert list(CASES) == list(HEURISTICS)  # in the order they run


@pytest.mark.parametrize("name", list(HEURISTICS))
def test_each_heuristic_acts_only_when_on(name: str) -> None:
    assert nudges(name, on=True) == CASES[name][4]
    assert nudges(name, on=False) != CASES[name][4]


def test_a_heuristic_is_named_for_what_it_is() -> None:
    for name, rule in HEURISTICS.items():
        assert rule.name == name
        module = importlib.import_module(rule.__module__)
        assert "chosen on BFCL tuning entries" in (module.__doc__ or ""), name


def test_the_context_turns_every_heuristic_on_by_default() -> None:
    assert set(Context().heuristics) == set(HEURISTICS)
    assert [type(r).__name__ for r in rules_for("x").rules] == [
        *(h.__name__ for h in HEURISTICS.values()),
        "CopyBias",
        "CloseBias",
    ]
    assert [type(r).__name__ for r in rules_for("x", heuristics=()).rules] == ["CopyBias", "CloseBias"]


def test_the_quoted_values_are_read_only_for_the_quotes() -> None:
    said = Handover(said=("Name it 'main'",), texts=("Name it 'main'",))
    on = value_bias({}, said, copy=1.0, close=0.0, piece=str, check_optional=False)
    off = value_bias({}, said, copy=1.0, close=0.0, piece=str, check_optional=False, heuristics=())
    assert on.context.quoted == ("main",) and off.context.quoted == ()


def test_the_option_names_the_heuristics_that_act() -> None:
    assert check_heuristics(None) == frozenset(HEURISTICS)
    assert check_heuristics({}) == frozenset(HEURISTICS)
    assert check_heuristics({"series_order": False, "quotes": True}) == frozenset(HEURISTICS) - {
        "series_order"
    }
    assert check_heuristics(dict.fromkeys(HEURISTICS, False)) == frozenset()


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (
            {"series": False},
            "unknown heuristic 'series' in heuristics; the heuristics are: quotes, own_name, ",
        ),
        ({"quotes": 0}, "heuristics['quotes'] must be True or False, got 0"),
        ({"quotes": "off"}, "heuristics['quotes'] must be True or False, got 'off'"),
        (("quotes",), "heuristics must be a dict of heuristic names to True or False (heuristics: quotes, "),
        ("quotes", "got str 'quotes'"),
    ],
)
def test_a_bad_heuristics_option_is_an_options_error(value: object, message: str, tmp_path: Path) -> None:
    with pytest.raises(AerixError, match=re.escape(message)) as info:
        check_heuristics(value)
    assert info.value.kind == "options"
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF" + bytes(64))
    with pytest.raises(AerixError, match=re.escape(message)):
        LlamaCpp(gguf, heuristics=value)  # type: ignore[arg-type]  # refused before the file is read
