"""Whether a run's final text holds a task's expected answer.

A name is matched as a whole word, in any case ("marest." holds "Marest"). A
number is matched by value against every number the text writes, with
thousands separators ("87,500"), decimals, or a scale word ("1.25 million"):
equal, or the answer rounded to two decimal places (9.32 miles for 9.3206;
not 9.3, nor $56 for 56.25).
"""

from __future__ import annotations

import re

__all__ = ["TOLERANCE", "numbers", "solved"]

TOLERANCE = 0.005
"""The difference up to which two numbers are one answer: half of 0.01."""

_NUMBER = re.compile(
    r"(?<![\w.])-?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:\s*(?P<scale>thousand|million|billion)\b)?",
    re.IGNORECASE,
)
_SCALES = {"thousand": 1e3, "million": 1e6, "billion": 1e9}


def numbers(text: str) -> list[float]:
    """The numbers `text` writes, in order: "87,500" is 87500, "1.25 million" 1250000."""
    found = []
    for m in _NUMBER.finditer(text):
        scale = m.group("scale")
        digits = m.group()[: m.start("scale") - m.start()] if scale else m.group()
        value = float(digits.replace(",", "").strip())
        found.append(value * _SCALES[scale.lower()] if scale else value)
    return found


def solved(final: str, answer: str | float) -> bool:
    """Whether the final text `final` holds `answer` (see the module's docstring)."""
    if isinstance(answer, str):
        return re.search(rf"\b{re.escape(answer)}\b", final, re.IGNORECASE) is not None
    return any(abs(x - answer) <= TOLERANCE + 1e-9 for x in numbers(final))
