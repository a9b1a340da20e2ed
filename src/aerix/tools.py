"""Tools: their definition, their input schema, the input check, and running them.

A `Tool` is frozen: a name, a description, a map of `Field`s, a `run`
function and the compiled JSON Schema of its input. `tool()` makes one from
explicit fields, from a JSON Schema (as MCP servers give it) or from a typed,
documented function. The schema work itself lives in `_fields` (explicit
fields), `_schema` (checking a JSON Schema), `_validate` (the input check) and
`_annotations` (Python types as schemas).
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import functools
import inspect
import re
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeAlias, overload

from ._annotations import Converter, constrained, converted, pydantic_conversion, same, schema_of, unwrap
from ._docstring import parse_docstring
from ._fields import Field, FieldType, check_fields, field_of, fields_schema
from ._json import json_writer
from ._schema import Validator, check_schema, compile_validator, short
from ._validate import key_segment
from ._workers import workers
from .abort import AbortSignal
from .errors import AerixError, message_of

__all__ = [
    "Field",
    "FieldType",
    "Tool",
    "ToolContext",
    "check_input",
    "cut_result",
    "json_copy",
    "readable",
    "run_tool",
    "tool",
]

NAME_PATTERN = re.compile(r"^[a-z][a-z0-9_]{0,63}$")


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolContext:
    """What a tool's `run` gets beside its input."""

    signal: AbortSignal
    """Aborted when the run is aborted: a long tool should stop then."""
    call_id: str
    """The id of the call being run."""


ToolRun: TypeAlias = Callable[..., Any]

_NO_ANNOTATIONS: Mapping[str, Any] = types.MappingProxyType({})


@dataclass(frozen=True, kw_only=True, slots=True)
class Tool:
    """A defined tool: frozen, with its compiled input schema. Made by `tool()`."""

    name: str
    """Matches `^[a-z][a-z0-9_]{0,63}$`; unique in an agent."""
    description: str
    """What the model reads about the tool."""
    input: Mapping[str, Field]
    """The input fields by name; empty for a tool without input, and for a tool made from a schema."""
    run: ToolRun
    """`run(input, cx)`, sync or async; its return value is the result."""
    schema: dict[str, Any] = field(repr=False)
    """The JSON Schema of the input: an object (for `tool(schema=...)`, the schema given)."""
    is_async: bool = field(default=False, repr=False)
    """Whether `run` is a coroutine function (awaited) rather than a plain one."""
    blocking: bool = field(default=True, repr=False)
    """For a plain `run`: whether it may block, so that it runs on a worker thread (`True`), or
    never does and runs on the event loop itself (`False`: `tool(..., blocking=False)`)."""
    decoded: dict[str, Any] | None = field(default=None, repr=False, compare=False)
    """`schema` as decoded and checked, local `$ref`s inlined (`None`: `schema` itself): `tool()`
    keeps this copy of its own, which the system message, the turn schema and the input check
    all read, so that a change to `schema` after the fact cannot set them apart."""
    validator: Validator | None = field(default=None, repr=False, compare=False)
    """The input check, compiled from `decoded` once (`check_input` compiles it if `None`)."""
    needs_approval: bool = field(default=False, repr=False)
    """Whether each call waits for a person's decision before it runs (`tool(...,
    needs_approval=True)`): the run ends `paused` with the call in `EndEvent.pending`, and
    `Agent.resume` runs it, refuses it or runs it with another input."""
    annotations: Mapping[str, Any] = field(default_factory=lambda: _NO_ANNOTATIONS, repr=False, compare=False)
    """What the tool's source says of its behaviour, read-only: for a tool of an MCP server,
    the tool's MCP annotations as the server sent them (`readOnlyHint`, `destructiveHint`,
    `idempotentHint`, `openWorldHint`, `title`; the keys it left out absent); empty for
    other tools. The loop acts on none of them (`aerix run` asks before a call of a tool
    whose `destructiveHint` is true)."""

    def __hash__(self) -> int:  # frozen, so it may be a set member or a key; equal tools hash alike
        return hash((self.name, self.description))


def _bad(message: str) -> AerixError:
    return AerixError("options", message)


def _make(
    name: object, description: object, fields: object, run: object, is_async: bool, schema: object = None
) -> Tool:
    if not isinstance(name, str) or not NAME_PATTERN.fullmatch(name):
        raise _bad(f"bad tool name {name!r}; it must match ^[a-z][a-z0-9_]{{0,63}}$")
    if not isinstance(description, str):
        raise _bad(f"tool {name!r}: description must be a string, got {type(description).__name__}")
    if not callable(run):
        raise _bad(f"tool {name!r}: run must be callable, got {type(run).__name__}")
    if schema is not None:
        return _from_schema(name, description, schema, run, is_async)
    if not isinstance(fields, Mapping):
        raise _bad(f"tool {name!r}: input must be a dict of fields, got {type(fields).__name__}")
    checked = check_fields(f"tool {name!r}: field", fields)
    schema = fields_schema(checked)
    return Tool(
        name=name,
        description=description,
        input=types.MappingProxyType(checked),
        run=run,
        schema=copy.deepcopy(schema),  # the caller's to read (or change: what aerix uses stays)
        is_async=is_async,
        decoded=schema,
        validator=compile_validator(schema),
    )


def _from_schema(
    name: str,
    description: str,
    schema: object,
    run: Callable[..., Any],
    is_async: bool,
    fields: object = None,
) -> Tool:
    """A tool whose input is a JSON Schema; `fields` describe it for `Tool.input` (`@tool` gives them)."""
    where = f"tool {name!r}"
    # what annotations give is decodable, but for a pydantic model's schema, which `schema_of` checked
    checked = check_schema(schema, where=where, decodable=fields is None)
    assert isinstance(schema, dict)  # check_schema made sure
    if checked.get("type") != "object":
        raise _bad(
            f'{where}: the schema must be of an object, with "type": "object" at its root; '
            f"got type {short(checked.get('type'))}"
        )
    return Tool(
        name=name,
        description=description,
        input=types.MappingProxyType(dict(fields) if isinstance(fields, Mapping) else {}),
        run=run,
        schema=copy.deepcopy(schema if fields is None else checked),  # the caller's, as above
        is_async=is_async,
        decoded=checked,
        validator=compile_validator(checked),
    )


def _generator(name: object, fn: Callable[..., Any]) -> None:
    """Refuse a generator function as a tool's `run`: its call gives a generator, not a result."""
    if inspect.isgeneratorfunction(fn) or inspect.isasyncgenfunction(fn):
        raise _bad(
            f"tool {name!r}: run is a generator function ({getattr(fn, '__name__', fn)!r}); a tool "
            "returns its result: collect what it yields and return that"
        )


def _explicit_run(name: object, run: Callable[..., Any]) -> tuple[Callable[..., Any], bool]:
    """Adapt a `run` that takes only the input, or the context as a keyword-only `cx`, to the
    `run(input, cx)` form; refuse one that cannot be called either way.

    A second positional parameter takes the context unless it has a default and is neither
    named `cx` nor annotated `ToolContext`: `lambda input, n=n: ...` (a loop's value, bound
    the usual way) keeps its `n`. Where no positional parameter takes it, a keyword-only one
    named `cx` (or annotated `ToolContext`) does. The parameters are read through a
    decorator (`functools.wraps`), as ever; whether the call binds is checked on the
    callable itself, which a decorator may give other parameters.
    """
    _generator(name, _source(run))
    is_async = inspect.iscoroutinefunction(run)
    try:
        params = list(inspect.signature(run).parameters.values())
        own = inspect.signature(run, follow_wrapped=False)
    except (TypeError, ValueError):
        return run, is_async
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    varargs = any(p.kind == p.VAR_POSITIONAL for p in params)
    takes_cx = varargs or (
        len(positional) > 1 and (positional[1].default is inspect.Parameter.empty or _names_cx(positional[1]))
    )
    keyword_cx = None
    if not takes_cx:
        keyword_cx = next((p for p in params if p.kind == p.KEYWORD_ONLY and _names_cx(p)), None)
    if keyword_cx is not None:
        key = keyword_cx.name
        _callable_as(name, own, "run(input, *, cx)", lambda s: s.bind(None, **{key: None}))
        if is_async:

            async def keyword_async(input: dict[str, Any], cx: ToolContext) -> Any:
                return await run(input, **{key: cx})

            return keyword_async, True
        return (lambda input, cx: run(input, **{key: cx})), False
    if positional and not takes_cx:
        _callable_as(name, own, "run(input)", lambda s: s.bind(None))
        if is_async:

            async def one_arg_async(input: dict[str, Any], cx: ToolContext) -> Any:
                return await run(input)

            return one_arg_async, True
        return (lambda input, cx: run(input)), False
    _callable_as(name, own, "run(input, cx)", lambda s: s.bind(None, None))
    return run, is_async


def _names_cx(p: inspect.Parameter) -> bool:
    """Whether a parameter asks for the context: named `cx`, or annotated `ToolContext`."""
    return p.name == "cx" or p.annotation in (ToolContext, "ToolContext")


def _callable_as(
    name: object, signature: inspect.Signature, form: str, bind: Callable[[inspect.Signature], object]
) -> None:
    """Refuse a `run` that cannot be called as `form`, the way aerix will call it."""
    try:
        bind(signature)
    except TypeError as exc:
        raise _bad(
            f"tool {name!r}: run{signature} cannot be called as {form} ({exc}); give it the input "
            "as its one positional parameter, and the context as a second one or as a keyword-only cx"
        ) from None


def _source(fn: Callable[..., Any]) -> Any:
    """What annotates and documents `fn`: a partial's function (the arguments it binds are
    no fields: `_bound`), a callable object's `__call__`, else `fn` itself."""
    while isinstance(fn, functools.partial):
        fn = fn.func
    if inspect.isroutine(fn) or isinstance(fn, type):
        return fn
    return type(fn).__call__  # a callable object's


def _bound(fn: Callable[..., Any]) -> set[str]:
    """The keyword arguments a partial (or partials of partials) already gives."""
    bound: set[str] = set()
    while isinstance(fn, functools.partial):
        bound |= set(fn.keywords)
        fn = fn.func
    return bound


def _from_function(fn: Callable[..., Any], name: str | None, description: str | None) -> Tool:
    if not callable(fn):
        raise _bad(f"@tool expects a function, got {type(fn).__name__}")
    source = _source(fn)
    _generator(name or getattr(source, "__name__", type(fn).__name__), source)
    if name is None and source is not fn and not isinstance(fn, functools.partial):
        raise _bad(
            f"@tool on a {type(fn).__name__} object: it has no function name; give it one: @tool(name=...)"
        )
    fn_name = name if name is not None else getattr(source, "__name__", type(fn).__name__)
    doc = parse_docstring(inspect.getdoc(source))
    try:
        hints = typing.get_type_hints(source, include_extras=True)
    except Exception as exc:  # an unresolvable forward reference
        raise _bad(f"tool {fn_name!r}: cannot resolve the type hints: {exc}") from exc
    properties: dict[str, Any] = {}
    required: list[str] = []
    converters: dict[str, Converter] = {}
    absent: dict[str, None] = {}  # optional parameters without a default: they get None
    cx_param: str | None = None
    bound = _bound(fn)
    for p in inspect.signature(fn).parameters.values():
        if p.name in bound:  # a partial's keyword argument: given already, not the model's
            continue
        ann = hints.get(p.name, inspect.Parameter.empty)
        if p.name == "cx" or ann is ToolContext:
            if cx_param is not None:
                raise _bad(
                    f"tool {fn_name!r}: parameters {cx_param!r} and {p.name!r} both take the context "
                    "(a parameter named cx, or annotated ToolContext); keep one"
                )
            cx_param = p.name
            continue
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD, p.POSITIONAL_ONLY):
            raise _bad(f"tool {fn_name!r}: parameter {p.name!r} must be a plain named parameter")
        if ann is inspect.Parameter.empty:
            raise _bad(
                f"tool {fn_name!r}: parameter {p.name!r} needs a type annotation "
                "(str, int, float, bool, a Literal, list[T], a dataclass, ...)"
            )
        where = f"tool {fn_name!r}: parameter {p.name!r}"
        inner, described, nullable, bounds, metadata = unwrap(ann, where)
        schema, convert = schema_of(inner, where=where)
        schema = constrained(schema, bounds, where)
        convert = pydantic_conversion(ann, metadata, where) or convert  # its validators and transforms
        described = doc.params.get(p.name, described) if described is None else described
        if described:
            schema = {**schema, "description": described}
        properties[p.name] = schema
        if not nullable and p.default is p.empty:
            required.append(p.name)
        elif p.default is p.empty:
            absent[p.name] = None
        if convert is not same:
            converters[p.name] = convert
    schema = {"type": "object", "properties": properties, "required": required, "additionalProperties": False}
    fields = {n: field_of(s, n in required) for n, s in properties.items()}
    is_async = inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(source)
    run = _caller(fn, cx_param, converters, absent, is_async)
    summary = doc.description if description is None else description
    made = _make(fn_name, summary, {}, run, is_async)  # checks the name, the description and run
    return _from_schema(made.name, made.description, schema, run, is_async, fields)


def _caller(
    fn: Callable[..., Any],
    cx_param: str | None,
    converters: dict[str, Converter],
    absent: dict[str, None],
    is_async: bool,
) -> Callable[..., Any]:
    """`run(input, cx)` for a decorated function: the input converted, as keyword arguments."""
    arguments: Converter = same
    if converters or absent:

        def arguments(input: dict[str, Any]) -> dict[str, Any]:
            args = {**absent, **input}
            for key, convert in converters.items():
                if key in input:  # a refusal names its path: input.items[1].v: …
                    args[key] = converted("input" + key_segment(key), convert, args[key])
            return args

    if is_async:

        async def run_async(input: dict[str, Any], cx: ToolContext) -> Any:
            args = arguments(input)
            return await (fn(**args, **{cx_param: cx}) if cx_param else fn(**args))

        return run_async
    if cx_param:
        return lambda input, cx: fn(**arguments(input), **{cx_param: cx})
    return lambda input, cx: fn(**arguments(input))


@overload
def tool(fn: Callable[..., Any], /, *, blocking: bool = True, needs_approval: bool = False) -> Tool: ...
@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    blocking: bool = True,
    needs_approval: bool = False,
) -> Callable[[Callable[..., Any]], Tool]: ...
@overload
def tool(
    *,
    name: str,
    description: str = "",
    input: Mapping[str, Field | Mapping[str, Any]],
    run: Callable[..., Any],
    blocking: bool = True,
    needs_approval: bool = False,
) -> Tool: ...
@overload
def tool(
    *,
    name: str,
    description: str = "",
    schema: Mapping[str, Any],
    run: Callable[..., Any],
    blocking: bool = True,
    needs_approval: bool = False,
) -> Tool: ...
@overload
def tool(
    *,
    name: str,
    description: str = "",
    run: Callable[..., Any],
    blocking: bool = True,
    needs_approval: bool = False,
) -> Tool: ...


def tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    input: Mapping[str, Field | Mapping[str, Any]] | None = None,
    schema: Mapping[str, Any] | None = None,
    run: Callable[..., Any] | None = None,
    blocking: bool = True,
    needs_approval: bool = False,
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Define a tool, explicitly or from a typed, documented function.

    Explicit: `tool(name=..., description=..., input={...}, run=fn)`, `run(input, cx)`
    (or `run(input)`) getting the checked input dict; or `schema={...}`, a JSON Schema
    of an object as MCP servers give it, instead of `input`. As a decorator, `@tool` or
    `@tool(name=..., description=...)`: the fields come from the parameters (scalars,
    `Literal`, `Enum`, `list[T]`, `dict[str, T]`, `TypedDict`, dataclasses, pydantic
    models, `Annotated[T, "text"]`; a default or `| None` makes one optional), `run`
    gets the values converted to the annotations, and the descriptions come from the
    docstring (Google, NumPy or reST). A parameter named `cx`, or annotated
    `ToolContext`, receives the context.

    Args:
        fn: The function to make a tool of (`@tool` without arguments).
        name: The tool's name, matching `^[a-z][a-z0-9_]{0,63}$` (default: the function's).
        description: What the model reads about the tool (default: the docstring's).
        input: The explicit form's fields: name to `Field` (or a dict of its keys); `{}`
            for a tool without input.
        schema: The explicit form's input as a JSON Schema of an object, instead of `input`.
        run: The explicit form's function, sync or async, called as `run(input, cx)`,
            `run(input)` or `run(input, *, cx)`.
        blocking: Whether a plain (not `async`) function may block (wait on I/O, sleep,
            compute for long): `True` runs it on a worker thread, so that it never blocks
            the event loop; `False` declares one that never blocks, run on the event loop
            itself without the hop to a thread. A coroutine function is awaited either way.
        needs_approval: Whether each call waits for a person's decision before it runs.
            `True` ends a run whose turn calls the tool with `end(reason="paused")`,
            the call in `EndEvent.pending` and `Agent.pending`; `Agent.resume` then
            runs it, refuses it, or runs it with another input. The turn's other calls
            run as usual.

    Raises:
        AerixError: `kind="options"`, naming what is wrong in the definition.

    Examples:
        >>> @tool
        ... def add(a: int, b: int) -> int:
        ...     '''Add two integers.'''
        ...     return a + b
        >>> add.name, list(add.input), add.schema["required"]
        ('add', ['a', 'b'], ['a', 'b'])
        >>> shout = tool(
        ...     name="shout",
        ...     input={"text": Field("string", "The text to say", required=True)},
        ...     run=lambda input: input["text"].upper(),
        ... )
        >>> shout.schema["required"]
        ['text']
        >>> @tool(needs_approval=True)
        ... def delete(path: str) -> str:
        ...     '''Delete a file.'''
        ...     return f"deleted {path}"
        >>> delete.needs_approval
        True
    """
    if fn is not None:
        if any(x is not None for x in (name, description, input, schema, run)):
            raise _bad("tool(fn) takes no other arguments; use @tool(name=..., description=...)")
        return _declared(_from_function(fn, None, None), blocking, needs_approval)
    if run is not None or input is not None or schema is not None:
        made = _explicit(name, description, input, schema, run)
        return _declared(made, blocking, needs_approval)

    def decorate(f: Callable[..., Any]) -> Tool:
        return _declared(_from_function(f, name, description), blocking, needs_approval)

    return decorate


def _explicit(
    name: str | None,
    description: str | None,
    input: Mapping[str, Field | Mapping[str, Any]] | None,
    schema: Mapping[str, Any] | None,
    run: Callable[..., Any] | None,
) -> Tool:
    """The tool of `tool(name=..., input=... or schema=..., run=...)`, checked."""
    if run is None:
        raise _bad(f"tool {name!r}: missing run; pass run=fn, called as run(input, cx)")
    if input is not None and schema is not None:
        raise _bad(f"tool {name!r}: pass input (fields) or schema (a JSON Schema), not both")
    if input is None and schema is None:
        raise _bad(
            f"tool {name!r}: pass input (fields; input={{}} for a tool without input) "
            "or schema (a JSON Schema of an object)"
        )
    adapted, is_async = _explicit_run(name, run) if callable(run) else (run, False)
    about = "" if description is None else description
    return _make(name, about, input or {}, adapted, is_async, None if schema is None else schema)


def _declared(t: Tool, blocking: object, needs_approval: object) -> Tool:
    """`t`, with what `tool(..., blocking=..., needs_approval=...)` declares of it."""
    return _approval(_blocking(t, blocking), needs_approval)


def _blocking(t: Tool, blocking: object) -> Tool:
    """`t`, made with `tool(..., blocking=blocking)`."""
    if not isinstance(blocking, bool):
        raise _bad(
            f"tool {t.name!r}: blocking must be True (a plain function runs on a worker thread, the "
            f"default) or False (it never blocks: it runs on the event loop), got {blocking!r}"
        )
    return t if blocking else dataclasses.replace(t, blocking=False)


def _approval(t: Tool, needs_approval: object) -> Tool:
    """`t`, made with `tool(..., needs_approval=needs_approval)`."""
    if not isinstance(needs_approval, bool):
        raise _bad(
            f"tool {t.name!r}: needs_approval must be True (each call waits for a person's decision: "
            f"Agent.resume) or False (calls run at once, the default), got {needs_approval!r}"
        )
    return dataclasses.replace(t, needs_approval=True) if needs_approval else t


def check_input(t: Tool, value: object) -> str | None:
    """Check a call's input against the tool's whole schema.

    Args:
        t: The tool called.
        value: The call's input.

    Returns:
        `None` if the input is good, else the first thing wrong with its JSON
        path: `input.items[2].qty: expected integer, got "3"`.
    """
    validator = t.validator
    if validator is None:
        validator = compile_validator(t.schema if t.decoded is None else t.decoded)
        object.__setattr__(t, "validator", validator)
    return validator(value)


_encode = json_writer(ensure_ascii=False, allow_nan=False)


def result_text(value: object) -> tuple[str, bool]:
    """A tool's return value as result text: a `str` as is (a subclass's value as a plain
    `str`: a `StrEnum` member reads as its value, everywhere alike), anything else as JSON.

    Args:
        value: What the tool returned.

    Returns:
        The text, and whether it is an error (a value JSON cannot write).
    """
    if isinstance(value, str):
        return str.__str__(value), False
    try:
        return _encode(value), False
    except (TypeError, ValueError, RecursionError) as exc:
        return f"error: the result cannot be serialised to JSON: {exc}", True


def surrogate_at(text: str) -> int | None:
    """Where `text`'s first surrogate is, which UTF-8 cannot encode; `None` where there is none
    (found at the cost of one `encode`, none for ASCII).

    Args:
        text: The text to look in.
    """
    if text.isascii():
        return None
    try:
        text.encode()
    except UnicodeEncodeError as exc:
        return exc.start
    return None


def readable(text: str) -> str:
    """`text` as UTF-8 can carry it: a lone surrogate (a file name that `os.fsdecode` could not
    decode, `"caf\\udce9.txt"`) becomes U+FFFD, which no model would have read otherwise.

    Args:
        text: The text to make readable.
    """
    if surrogate_at(text) is None:
        return text
    return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def cut_result(text: str, limit: int) -> str:
    """Cut a result to `limit` characters, with a note saying how much was cut.

    Args:
        text: The result text.
        limit: The most characters kept (`Limits.result_chars`).

    Example:
        >>> cut_result("abcdef", 4)
        'abcd\\n[cut: 2 more characters]'
    """
    if len(text) <= limit:
        return text
    return f"{text[:limit]}\n[cut: {len(text) - limit} more characters]"


_PLAIN = frozenset({str, int, float, bool, type(None), dict, list, tuple})
"""Types whose values are never awaitable (exactly these: a subclass may define `__await__`)."""


def json_copy(value: Any) -> Any:
    """A copy of a JSON value's objects and arrays (its other values cannot change); a tuple
    becomes a list, as `json.dumps` writes it.

    Args:
        value: A JSON value.
    """
    if isinstance(value, dict):
        return {k: v if type(v) in _ATOMS else json_copy(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [v if type(v) in _ATOMS else json_copy(v) for v in value]
    return value


_ATOMS = frozenset({str, int, float, bool, type(None)})
"""JSON's values that are no container: `json_copy` keeps them as they are without a call."""


def cancelling() -> bool:
    """Whether the current task is being cancelled (an abort, its consumer): a `CancelledError`
    is then that cancellation, not one that a tool's or a hook's own code raised."""
    task = asyncio.current_task()
    return task is None or task.cancelling() > 0


async def run_tool(
    t: Tool, input: dict[str, Any], cx: ToolContext, *, checked: bool = False
) -> tuple[str, bool]:
    """Check the input, run the tool and turn its outcome into result text.

    A coroutine `run` is awaited; a plain one runs on a worker thread, or on the
    event loop itself for a tool made with `blocking=False`. A failed check or an
    exception becomes `error: <message>`; never raises, except
    `asyncio.CancelledError`.

    Args:
        t: The tool.
        input: The call's input; the tool gets a copy of its own.
        cx: The context the tool gets.
        checked: The input was checked already (`check_input`): not again.

    Returns:
        The result text (not yet cut) and whether it is an error.
    """
    if not checked and (problem := check_input(t, input)) is not None:
        return f"error: {problem}", True
    input = json_copy(input)  # the tool's own: what it changes, the call's events never show
    try:
        if t.is_async:
            value = await t.run(input, cx)
        else:
            if not t.blocking:  # declared never to block: no hop to a thread and back
                value = t.run(input, cx)
            else:
                job = workers.run(t.run, input, cx)
                if job.done():  # finished already: still let the loop run once, as it would to deliver it
                    await asyncio.sleep(0)  # (an abort, a timeout or another task gets its turn here)
                value, ok = await job
                if not ok:
                    raise value
            if type(value) not in _PLAIN and inspect.isawaitable(value):  # a plain function that
                value = await value  # returned a coroutine
    except asyncio.CancelledError as exc:
        if cancelling():
            raise
        return f"error: {message_of(exc)}", True  # the tool's own, not the run's
    except Exception as exc:
        return f"error: {message_of(exc)}", True
    return result_text(value)
