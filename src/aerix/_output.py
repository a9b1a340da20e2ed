"""The agent's answer type (`Agent(output=...)`): its schema, and reading a final against it.

`str`, the default, is a text answer: the final is a string and nothing is
checked. Any other type, one that `@tool` takes as an annotation or a JSON
Schema dict, makes the final `{"final": <a value of that type>}`: decoded under
its schema, checked against it (a final that fails is a bad turn, asked again
with the reason) and converted to the type.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from typing import Annotated, Any, get_args, get_origin

from ._annotations import ConversionError, Converter, converted, same, schema_of
from ._schema import check_decodable, check_schema, compile_validator
from .errors import AerixError
from .tools import Tool
from .turn import BadTurn, Turn, parse_turn

__all__ = ["Output"]

ALLOWED = (
    "str (a text answer, the default), a type that @tool takes as an annotation (int, a Literal, "
    "list[T], a TypedDict, a dataclass, a pydantic BaseModel, an Enum, …) or a JSON Schema dict"
)


class Output:
    """An agent's answer type, checked when the agent is built.

    Args:
        output: `str`, a type `@tool` takes as an annotation, or a JSON Schema dict.
        decodable: Also refuse a schema that the local constraint (llguidance)
            cannot compile (for an agent with `constrain=True`).

    Raises:
        AerixError: `kind="options"`, naming what was given and what is allowed.
    """

    __slots__ = ("_check", "_convert", "_text", "schema")

    def __init__(self, output: object, *, decodable: bool = True) -> None:
        self.schema: dict[str, Any] | None = None
        """The answer's JSON Schema; `None` for a text answer (`str`)."""
        self._convert: Converter = same
        bare = output
        while get_origin(bare) is Annotated:
            bare = get_args(bare)[0]
        self._text = bare is str
        """`str` described (`Annotated[str, "text"]`): typed for its description, read as text."""
        if output is str:
            self._check = None
            return
        if isinstance(output, Mapping):
            schema = check_schema(dict(output), where="output", decodable=decodable)
        elif output is None or isinstance(output, str | bytes | int | float | Sequence):
            raise AerixError("options", f"output={output!r} is not a type; use {ALLOWED}")
        else:
            try:
                schema, self._convert = schema_of(output, where="output")
                if output is float:  # the answer is the type asked for: 3 is 3.0
                    self._convert = float
            except AerixError as exc:
                raise AerixError("options", f"{exc.message} (output takes {ALLOWED})") from None
            if decodable:
                check_decodable(schema, where="output")
        self.schema = schema
        self._check = compile_validator(schema, path="final")

    def parse(self, text: str, tools: Sequence[Tool], tool_choice: str) -> Turn | BadTurn:
        """Parse a turn (`parse_turn`); a typed final is then checked and converted.

        Returns:
            The turn, its final's `value` converted to the type; or a `BadTurn`
            naming what is wrong with the final (`final.qty: expected integer,
            got "3"`), or the converter's error.
        """
        turn = parse_turn(text, tools, tool_choice, typed=self._check is not None)
        if self._check is None or isinstance(turn, BadTurn) or turn.final is None:
            return turn
        problem = self._check(turn.value)
        if problem is not None:
            return BadTurn(reason=problem)
        try:
            value = converted("final", self._convert, turn.value)
        except ConversionError as exc:  # the type's own check, e.g. a pydantic validator
            return BadTurn(reason=str(exc))
        if self._text:  # the final's text is the string itself, as for `str`
            return dataclasses.replace(turn, final=value, value=value)
        if isinstance(value, float) and not isinstance(turn.value, float):  # 3 read as 3.0: so its text
            return dataclasses.replace(turn, final=json.dumps(value), value=value)
        return dataclasses.replace(turn, value=value)
