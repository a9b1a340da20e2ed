"""Numbers given with a scale: "5%" means 0.05, "213 million" means 213000000, unless the
field takes that scale as written (`kept_scales`: "as a percentage", "in millions")."""

from __future__ import annotations

import re
from decimal import Decimal

__all__ = ["kept_scales", "same_digits", "scaled_number", "scales", "takes_percent"]

_SCALED = re.compile(
    r"(?<![\w.])-?\d+(?:\.\d+)?(?=\s?(%|percent\b|per cent\b|thousand\b|million\b|billion\b|trillion\b))",
    re.IGNORECASE,
)
"""A number the messages give with a scale: "5%", "2.5 percent", "213 million"."""
_EXPONENTS = {
    "%": -2,
    "percent": -2,
    "per cent": -2,
    "thousand": 3,
    "million": 6,
    "billion": 9,
    "trillion": 12,
}
"""The power of ten each scale means."""
_PERCENT_FIELD = re.compile(r"percent|\bpct\b|per cent")
_FRACTION_FIELD = re.compile(r"decimal|fraction")
_SCALE_FIELD = re.compile(r"thousand|million|billion|trillion")


def takes_percent(key: str, description: str = "") -> bool:
    """Whether a number field takes a percentage as written (5 for "5%"), by its name or
    description ("discount_pct", "as a percentage"), rather than the fraction it means."""
    text = f"{key.replace('_', ' ')} {description}".lower()
    return bool(_PERCENT_FIELD.search(text)) and not _FRACTION_FIELD.search(description.lower())


def kept_scales(key: str, description: str = "") -> frozenset[int]:
    """The scales, as powers of ten, in which a number field takes numbers as written:
    -2 if it takes percentages (`takes_percent`), 6 if its name or description says
    millions ("revenue in millions"), and so on for thousands, billions and trillions."""
    text = f"{key.replace('_', ' ')} {description}".lower()
    kept = {_EXPONENTS[m.group()] for m in _SCALE_FIELD.finditer(text)}
    return frozenset(kept | ({-2} if takes_percent(key, description) else set()))


def scaled_number(number: str, exponent: int) -> str:
    """The number a scaled one means, as JSON: "5" at -2 → "0.05", "8.5" at 6 → "8500000"."""
    return format(Decimal(number).scaleb(exponent).normalize(), "f")


def same_digits(written: str, given: str) -> bool:
    """Whether a written number is a given one at another power of ten: the same digits
    but for zeros at either end ("850000000" and "8.5"); an integer written, a number given."""

    def digits(n: str) -> str:
        return n.lstrip("-").replace(".", "").strip("0")

    return written.lstrip("-").isdigit() and bool(digits(given)) and digits(written) == digits(given)


def scales(numbers: str) -> dict[int, tuple[str, int]]:
    """Where `numbers` (a `number_text`) gives a number with a scale ("5%", "213 million"):
    the number as written, and the scale's power of ten."""
    return {m.start(): (m.group(), _EXPONENTS[m.group(1).lower()]) for m in _SCALED.finditer(numbers)}
