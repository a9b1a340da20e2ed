"""Own names (a heuristic chosen on BFCL tuning entries): a string value made only of words
of its field's name gets no copy bias (`"search_type": "search"` is no value), nor one made
only of words of a constant of the schema, such as the tool's name (`"team": "chess"` for
a tool `chess_club.members`), except in a field that is such a constant itself (the tool
name is chosen as it always was) or where the user put the value in quotes ("the password
is 'password'")."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._rule import At, Logits
from .._spans import own_name

if TYPE_CHECKING:
    from .._bias import ValueBias

__all__ = ["OwnName"]


class OwnName:
    """The own-name heuristic (module docstring): such a value is left alone (`Choice.left`)."""

    name = "own_name"

    def __init__(self, bias: ValueBias) -> None:
        self._constants = tuple(bias.context.constants)

    def acts(self, at: At) -> bool:
        return at.copying

    def bias(self, at: At, logits: Logits) -> None:
        key = at.cursor.key
        names = () if key in at.context.constant_keys else self._constants
        for choice in at.values():
            if not choice.number and not choice.quoted and own_name(choice.value, key, *names):
                choice.left = True
