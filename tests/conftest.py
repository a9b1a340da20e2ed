"""Shared fixtures: the golden-file switch and small tools for the tests."""

from __future__ import annotations

from pathlib import Path

import pytest

GOLDEN = Path(__file__).parent / "golden"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--update-golden",
        action="store_true",
        default=False,
        help="rewrite tests/golden/ from the current output (review the diff by eye)",
    )


@pytest.fixture
def golden(request: pytest.FixtureRequest):  # type: ignore[no-untyped-def]
    """Compare text with tests/golden/<name>, or rewrite it with --update-golden."""
    update = request.config.getoption("--update-golden")

    def check(name: str, text: str) -> None:
        path = GOLDEN / name
        if update:
            path.write_text(text)
            return
        assert path.exists(), f"missing golden file {path}; run pytest --update-golden and review it"
        assert text == path.read_text(), f"{name} changed; if intended, run pytest --update-golden"

    return check
