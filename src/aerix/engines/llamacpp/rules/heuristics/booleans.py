"""Mentioned booleans (a heuristic chosen on BFCL tuning entries): a boolean whose key the
messages mention (`include_images`: "with images") leans to `true` by the copy bias, or to
`false` after a negation ("without images"; `mention`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from .._rule import At, Logits

if TYPE_CHECKING:
    from .._bias import ValueBias

__all__ = ["Booleans"]


class Booleans:
    """The mentioned-booleans heuristic (module docstring): nudges the literal's tokens."""

    name = "booleans"

    def __init__(self, bias: ValueBias) -> None:
        del bias  # reads the keys as the values come (`ValueBias.mention`)

    def acts(self, at: At) -> bool:
        return bool(at.context.copy) and at.cursor.at_literal and at.bias.mention(at.cursor.key) != 0

    def bias(self, at: At, logits: Logits) -> None:
        literal = "true" if at.bias.mention(at.cursor.key) > 0 else "false"
        for token, piece in at.pieces.items():
            if literal.startswith(piece) or piece.startswith(literal):
                logits[token] += np.float32(at.context.copy)
