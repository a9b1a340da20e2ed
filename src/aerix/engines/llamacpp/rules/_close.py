"""The close bias: right after a value inside an object that may end there (the schema
allows `}`: every field left is optional), the closing tokens get `close` added, so
optional fields are written only when the model is sure of them."""

from __future__ import annotations

import numpy as np

from ._json_cursor import NUMBER_CHARS
from ._rule import At, Logits

__all__ = ["CloseBias"]

_NUMBER = frozenset(NUMBER_CHARS)


class CloseBias:
    """The close bias (`Context.close`; module docstring)."""

    name = "close"

    def acts(self, at: At) -> bool:
        return bool(at.context.close) and at.cursor.may_close and bool(at.pieces)

    def bias(self, at: At, logits: Logits) -> None:
        cursor, pieces = at.cursor, at.pieces
        # A number may always go on: only once the model ends it, lean to ending the object too.
        best = max(pieces, key=lambda t: logits[t])
        if cursor.number and pieces[best][0] in _NUMBER:
            return
        for token, piece in pieces.items():
            if cursor.closes(piece):
                logits[token] += np.float32(at.context.close)
