"""The BFCL harness's split by id into a tuning part and a report part, and the
ablation's comparison of two runs (bench/_bfcl/data.py, bench/bfcl.py)."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))

from _bfcl.data import CATEGORIES, HELD_OUT, LIVE_SPLIT, PARTS, in_part, load, part_of
from bfcl import main, read_ablation, won_lost


@pytest.mark.parametrize(
    ("entry_id", "part"),
    [
        ("simple_python_17", "tuning"),
        ("simple_python_0", "report"),
        ("simple_python_10", "report"),
        ("multiple_199", "tuning"),
        ("parallel_42", "report"),
        ("irrelevance_3", "tuning"),
        ("live_multiple_12-4-3", "report"),  # a live id: its first number
        ("live_multiple_1-0-1", "tuning"),
        ("live_multiple_7-2-0", "tuning"),
    ],
)
def test_the_number_that_ends_the_id_decides(entry_id: str, part: str) -> None:
    assert part_of(entry_id) == part


@pytest.mark.parametrize("entry_id", ["simple_python", "multiple_x", "", "parallel_-1"])
def test_an_id_without_a_number_is_refused_by_name(entry_id: str) -> None:
    with pytest.raises(ValueError, match=f"{entry_id!r}.*_<number>"):
        part_of(entry_id)


@pytest.mark.parametrize("category", HELD_OUT)
def test_the_live_categories_are_held_out_whole(category: str) -> None:
    entries = load(category)
    assert entries and {part_of(e.id) for e in entries} == {"held-out"}
    assert in_part(entries, "held-out") == entries and in_part(entries, "report") == []
    assert in_part(entries, "tuning") == []
    several = [e for e in entries if not e.single]  # a system prompt or an earlier exchange: skipped
    assert several and all(e.question for e in several)
    if category == "live_irrelevance":
        assert all(e.answers is None for e in entries)
    else:
        assert all(e.answers for e in entries)


def test_live_multiple_is_split_and_keeps_its_entries_of_several_messages() -> None:
    entries = load("live_multiple")
    assert len(entries) == 1053 and {part_of(e.id) for e in entries} == set(PARTS)
    several = [e for e in entries if not e.single]  # skipped by the harness, counted
    assert several and all(e.question for e in several)
    assert all(e.answers for e in entries)


def test_no_split_category_has_held_out_entries() -> None:
    for category in (*CATEGORIES, *LIVE_SPLIT):
        assert in_part(load(category), "held-out") == []


@pytest.mark.parametrize(
    ("category", "part"),
    [("live_simple", "report"), ("live_irrelevance", "all"), ("simple_python", "held-out")],
)
def test_a_held_out_category_runs_only_as_held_out(
    category: str, part: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        asyncio.run(main(["--category", category, "--part", part, "--no-write"]))
    assert (
        "held-out categories (live_simple, live_irrelevance) run with --part held-out"
        in capsys.readouterr().err
    )


def test_an_unknown_part_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="'tuning', 'report', 'held-out' or 'all', got 'validation'"):
        in_part(load("multiple"), "validation")


@pytest.mark.parametrize("category", [*CATEGORIES, *LIVE_SPLIT])
def test_the_parts_are_disjoint_cover_the_category_and_hold_about_half_each(category: str) -> None:
    entries = load(category)
    parts = {p: in_part(entries, p) for p in PARTS}
    ids = {p: {e.id for e in es} for p, es in parts.items()}
    assert not ids["tuning"] & ids["report"]
    assert ids["tuning"] | ids["report"] == {e.id for e in entries}
    assert [e.id for e in in_part(entries, "all")] == [e.id for e in entries]
    for p in PARTS:
        assert 0.45 <= len(parts[p]) / len(entries) <= 0.55, (p, len(parts[p]), len(entries))
        flat = [e for e in parts[p] if e.flat]
        assert 0.4 <= len(flat) / sum(e.flat for e in entries) <= 0.6, (p, len(flat))
        # each part keeps the file's order
        assert [e.id for e in parts[p]] == [e.id for e in entries if e.id in ids[p]]


def test_the_split_is_the_same_on_every_load() -> None:
    first = [(e.id, part_of(e.id)) for e in load("simple_python")]
    again = [(e.id, part_of(e.id)) for e in load("simple_python")]
    assert first == again
    # the published split: simple_python's 328 flat entries are 164 and 164
    flat = [e for e in load("simple_python") if e.flat]
    assert [len(in_part(flat, p)) for p in PARTS] == [164, 164]


def test_won_and_lost_are_counted_by_id() -> None:
    base = {"a_1": True, "a_2": False, "a_3": True, "a_4": False}
    other = {"a_1": False, "a_2": True, "a_3": True, "a_4": False}
    assert won_lost(base, other) == (["a_2"], ["a_1"])
    assert won_lost(base, base) == ([], [])


def test_runs_of_different_entries_are_not_compared() -> None:
    with pytest.raises(ValueError, match=r"different entries: \['a_2'\]"):
        won_lost({"a_1": True}, {"a_1": True, "a_2": False})


def test_the_ablation_refuses_rule_flags_of_its_own(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        asyncio.run(main(["--ablation", "--copy-bias", "0", "--no-write"]))
    assert "--ablation sets the engine's rules itself; drop --copy-bias" in capsys.readouterr().err


def test_an_unknown_part_flag_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        asyncio.run(main(["--part", "validation", "--no-write"]))
    assert "invalid choice: 'validation'" in capsys.readouterr().err


def ablation_rows(path: Path, rows: list[tuple[str, str, str, bool]]) -> Path:
    """Write ablation rows (configuration, category, id, right) as `--jsonl` writes them."""
    path.write_text(
        "\n".join(
            json.dumps(
                {
                    "category": category,
                    "config": "constrained-required",
                    "ablation": ablation,
                    "id": entry_id,
                    "check": {"valid": right, "error": ""},
                    "seconds": 1.0,
                }
            )
            for ablation, category, entry_id, right in rows
        )
    )
    return path


def test_ablation_runs_from_separate_processes_merge_by_configuration(tmp_path: Path) -> None:
    sp = "simple_python"
    one = ablation_rows(
        tmp_path / "one.jsonl",
        [("default", sp, "simple_python_0", True), ("default", sp, "simple_python_2", False)],
    )
    two = ablation_rows(
        tmp_path / "two.jsonl",
        [("rules-off", sp, "simple_python_0", False), ("rules-off", sp, "simple_python_2", False)],
    )
    merged = read_ablation([one, two])
    assert sorted(merged) == [
        ("default", "simple_python", "constrained-required"),
        ("rules-off", "simple_python", "constrained-required"),
    ]
    assert [(s.id, s.right) for s in merged[("rules-off", "simple_python", "constrained-required")]] == [
        ("simple_python_0", False),
        ("simple_python_2", False),
    ]


def test_a_plain_run_is_no_ablation_to_merge(tmp_path: Path) -> None:
    plain = tmp_path / "plain.jsonl"
    plain.write_text(
        json.dumps({"category": "multiple", "config": "constrained-required", "id": "multiple_0"})
    )
    with pytest.raises(ValueError, match=r"plain.jsonl:1: not an ablation row"):
        read_ablation([plain])


def test_a_merge_keeps_one_part_takes_a_plain_default_run_and_one_model(tmp_path: Path) -> None:
    rows = [
        {"model": "smollm2-instruct", "ablation": "default", "id": "simple_python_0", "valid": True},
        {"model": "smollm2-instruct", "ablation": "default", "id": "simple_python_1", "valid": True},
        {"model": "smollm2-instruct", "ablation": "no-copy-bias", "id": "simple_python_0", "valid": False},
    ]
    path = tmp_path / "runs.jsonl"
    path.write_text(
        "\n".join(
            json.dumps(
                {
                    "model": r["model"],
                    "category": "simple_python",
                    "config": "constrained-required",
                    "ablation": r["ablation"],
                    "id": r["id"],
                    "check": {"valid": r["valid"]},
                    "seconds": 1.0,
                }
            )
            for r in rows
        )
    )
    merged = read_ablation([path], part="report", model="smollm2-instruct")
    assert {k[0]: [s.id for s in v] for k, v in merged.items()} == {
        "default": ["simple_python_0"],
        "no-copy-bias": ["simple_python_0"],
    }
    with pytest.raises(ValueError, match="a run of 'smollm2-instruct', not 'gemma3-270m'"):
        read_ablation([path], model="gemma3-270m")


MERGE = ["--category", "simple_python", "--category", "multiple", "--part", "report"]
MERGE += ["--config", "constrained-required", "--ablation", "default", "no-tool-pick", "--no-write"]


def test_a_merge_leaves_out_a_configuration_a_category_did_not_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The tool pick never acts where an entry gives one tool: simple_python runs without it.
    path = ablation_rows(
        tmp_path / "runs.jsonl",
        [
            ("default", "simple_python", "simple_python_0", True),
            ("default", "simple_python", "simple_python_2", False),
            ("default", "multiple", "multiple_0", True),
            ("no-tool-pick", "multiple", "multiple_0", False),
        ],
    )
    assert asyncio.run(main([*MERGE, "--merge", str(path)])) == 0
    rows = [
        line
        for line in capsys.readouterr().out.splitlines()
        if line.startswith("| simple_python") or line.startswith("| multiple")
    ]
    rows = list(dict.fromkeys(rows))  # printed as computed, then in the table
    assert [line.split(" | ")[2] for line in rows] == [
        "default engine (every rule on)",
        "default engine (every rule on)",
        "tool pick off",
    ]
    assert rows[0].startswith("| simple_python") and rows[2].startswith("| multiple")
    assert "| -100.0 | 0 | 1 |" in rows[2]


def test_a_merge_without_a_categorys_default_names_it(tmp_path: Path) -> None:
    path = ablation_rows(
        tmp_path / "runs.jsonl",
        [
            ("default", "simple_python", "simple_python_0", True),
            ("no-tool-pick", "multiple", "multiple_0", False),
        ],
    )
    with pytest.raises(ValueError, match=r"no default run of multiple \(constrained-required\)"):
        asyncio.run(main([*MERGE, "--merge", str(path)]))
