"""One decode step as the decode hooks see it (`Step`), and what a hook is (`DecodeHook`).

The hooks themselves are the value rules' (`rules`); `_hooks` lists them in
the order the decode loop asks them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ._sampling import Logits, Sampling

if TYPE_CHECKING:
    from ._constraint import Constrained
    from ._lookahead import Lookahead
    from .rules import ValueBias

__all__ = ["DecodeHook", "Step"]


@dataclass(slots=True, kw_only=True)
class Step:
    """One decode step, as the hooks see it."""

    bias: ValueBias
    """The rules' reading of the JSON so far and of the user's messages."""
    constrained: Constrained
    """The constraint (the schema's matcher) at this step."""
    lookahead: Lookahead
    """Decodes a value ahead and cuts the KV cache back."""
    piece: Callable[[int], str]
    """A token's visible text."""
    stopped: Callable[[], bool]
    """Whether the generation was aborted (a look-ahead stops at once)."""
    sampling: Sampling
    """The generation's sampling settings."""
    rng: np.random.Generator
    """The generation's random generator."""
    room: int | None
    """Tokens left before `max_tokens` (`None`: no limit)."""
    logits: Any = None
    """The masked logits after `adjust` (set by the loop before `choose`)."""

    def ahead(self, token: int | list[int], choice: bool = False) -> Any:
        """`Lookahead.ahead` from `token`, for this step."""
        return self.lookahead.ahead(self.stopped, self.constrained, self.bias, token, choice)

    def closing(self, token: int) -> Any:
        """`Lookahead.closing` from `token`, for this step: to the end of the object in progress."""
        return self.lookahead.closing(self.stopped, self.constrained, self.bias, token)

    def judged(self, token: int | list[int], judge: Callable[[str], bool]) -> bool | None:
        """`Lookahead.judged` from `token`, for this step: `judge` of the text `ahead` gives."""
        return self.lookahead.judged(self.stopped, self.constrained, self.bias, token, judge)

    def allowed(self, text: str | None) -> list[int]:
        """The tokens of `text` if the schema allows them next and they fit in `room`; else `[]`."""
        return self.lookahead.allowed(self.constrained, text, self.room)


class DecodeHook:
    """A rule of the decode loop; each method's default is "no change"."""

    def active(self, step: Step) -> bool:
        """Whether this hook acts at this step (checked before the others run)."""
        return False

    def adjust(self, step: Step, logits: Logits) -> Logits:
        """Logits in (masked by the schema), logits out; may change them in place."""
        return logits

    def choose(self, step: Step, token: int) -> int:
        """The sampled token in, the token to go on with out."""
        return token

    def write(self, step: Step, token: int) -> list[int] | None:
        """The tokens to write instead of `token` (the schema must allow them), or `None`."""
        return None
