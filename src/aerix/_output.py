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
import types
from collections.abc import Mapping, Sequence
from typing import Annotated, Any, Union, get_args, get_origin

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

    __slots__ = ("_check", "_convert", "_floats", "_text", "schema")

    def __init__(self, output: object, *, decodable: bool = True) -> None:
        self.schema: dict[str, Any] | None = None
        """The answer's JSON Schema; `None` for a text answer (`str`)."""
        self._convert: Converter = same
        self._floats: Converter | None = None
        """Where the type asks for a float, the int the model wrote as one (3 → 3.0)."""
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
                self._floats = _floats(output)  # the answer is the type asked for: 3 is 3.0
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
        written = turn.value if self._floats is None else self._floats(turn.value)
        try:
            value = converted("final", self._convert, written)
        except ConversionError as exc:  # the type's own check, e.g. a pydantic validator
            return BadTurn(reason=str(exc))
        if self._text:  # the final's text is the string itself, as for `str`
            return dataclasses.replace(turn, final=value, value=value)
        if written is not turn.value and (text := _json(written)) != _json(turn.value):  # 3 read as 3.0
            return dataclasses.replace(turn, final=text, value=value)
        return dataclasses.replace(turn, value=value)


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def _floats(ann: Any) -> Converter | None:
    """For an answer typed `float` (also as `float | None`, `Annotated[float, ...]`, or the
    items of a `list` or `dict`, at any depth): the JSON value with each int where a float
    is asked for made a float, so that `3` reads `3.0` in `output` and in the text; `None`
    where the type asks for no float that way. (A tool's input keeps the number as written:
    Python takes an int for a float.)"""
    while get_origin(ann) is Annotated:
        ann = get_args(ann)[0]
    if ann is float:
        return lambda v: float(v) if isinstance(v, int) and not isinstance(v, bool) else v
    origin, args = get_origin(ann), get_args(ann)
    if origin in (Union, types.UnionType):
        kept = [a for a in args if a is not type(None)]
        one = _floats(kept[0]) if len(kept) == 1 else None
        return None if one is None else (lambda v: None if v is None else one(v))
    if origin is list and len(args) == 1 and (item := _floats(args[0])) is not None:
        return lambda v: [item(x) for x in v] if isinstance(v, list) else v
    if origin is dict and len(args) == 2 and (entry := _floats(args[1])) is not None:
        return lambda v: {k: entry(x) for k, x in v.items()} if isinstance(v, dict) else v
    return None
