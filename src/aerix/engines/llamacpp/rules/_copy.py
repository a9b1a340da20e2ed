"""The copy bias: values lean towards the user's own words and the tools' results.

While the model writes a string or number value, each of the likeliest tokens
that keeps the value a span of the messages (`ValueBias.text`, `.numbers`)
gets `copy` added to its logit (times one more for each rule that weighs it
up: `Choice.more`). A span starts and ends at word boundaries (never inside a
word or a number) and starts with a letter, a digit or a minus sign; a token
that closes the value is nudged only when the value is a whole span. Each
occurrence is copied once: once a value has taken it, it is not offered to
the next one (`"x": 4, "y": 5` from "sides 4 and 5", not `"y": 4`), and a
number whose every occurrence is taken gets `copy` taken off. Numbers match
without thousands separators (`2000000` copies "$2,000,000") and as words up
to twenty (`2` copies "two"), but not right after a letter or a `^` (`2` is
no span of "CO2"). Once a value is under way as a span, the other tokens get
`copy` taken off: leaving a span costs what copying gains ("Liverpool", not
"Liverly"; `5000`, not `500`). Closing an empty string costs `copy`: an empty
value copies nothing. A value of an enum's field copies in any case.
"""

from __future__ import annotations

import numpy as np

from ._rule import At, Logits

__all__ = ["CopyBias"]


class CopyBias:
    """The copy bias (`Context.copy`; module docstring)."""

    name = "copy"

    def acts(self, at: At) -> bool:
        return at.copying

    def bias(self, at: At, logits: Logits) -> None:
        copy, bias, cursor = np.float32(at.context.copy), at.bias, at.cursor
        so_far = cursor.value or ""
        if cursor.number:
            stay = bool(so_far) and bias.numbers.match(so_far, False)
        else:
            stay = bool(so_far) and bias.copies(so_far, False, cursor.key)
        for token, choice in at.choices.items():
            if choice is None or choice.empty:
                if choice is not None or stay:
                    logits[token] -= copy  # an empty string copies nothing; leaving a span costs
                continue
            if choice.left:
                continue
            if choice.copies:
                logits[token] += copy * (1 + choice.more)
            elif stay:
                logits[token] -= copy
            elif choice.number and bias.numbers.taken(choice.value, choice.whole):
                logits[token] -= copy  # a number given once is not written twice
