"""Tools: their definition, their input schema, the input check, and running them.

A `Tool` is frozen: a name, a description, a flat map of `Field`s, a `run`
function and the compiled JSON Schema of its input. `tool()` makes one from an
explicit definition or from a typed, documented function.
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import json
import math
import os
import re
import threading
import types
import typing
import weakref
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from queue import SimpleQueue
from typing import Any, Literal, TypeAlias, get_args, get_origin, overload

from ._docstring import parse_docstring
from .abort import AbortSignal
from .errors import AerixError, describe

__all__ = [
    "Field",
    "FieldType",
    "Tool",
    "ToolContext",
    "check_input",
    "cut_result",
    "run_tool",
    "tool",
]

FieldType = Literal["string", "number", "integer", "boolean"]
FIELD_TYPES: tuple[FieldType, ...] = ("string", "number", "integer", "boolean")
NAME_PATTERN = re.compile(r"^[a-z][a-z0-9_]{0,63}$")
FIELD_NAME_PATTERN = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]{0,63}$")

Scalar: TypeAlias = str | int | float | bool


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolContext:
    """What a tool's `run` gets beside its input."""

    signal: AbortSignal
    """Aborted when the run is aborted: a long tool should stop then."""
    call_id: str
    """The id of the call being run."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Field:
    """One input field of a tool: a flat scalar.

    Args:
        type: `"string"`, `"number"`, `"integer"` or `"boolean"`.
        description: What the model reads about the field.
        required: Whether the model must send it.
        enum: The only values allowed, all of the field's type.
    """

    type: FieldType
    """The JSON type of the value."""
    description: str | None = None
    """Shown to the model, word for word."""
    required: bool = False
    """Whether the model must send this field."""
    enum: tuple[Scalar, ...] | None = None
    """The allowed values, if restricted."""

    def __init__(
        self,
        type: FieldType,
        description: str | None = None,
        required: bool = False,
        enum: typing.Iterable[Scalar] | None = None,
    ) -> None:
        object.__setattr__(self, "type", type)
        object.__setattr__(self, "description", description)
        object.__setattr__(self, "required", required)
        if enum is not None and (
            isinstance(enum, str | bytes | Mapping) or not isinstance(enum, typing.Iterable)
        ):
            raise AerixError("options", f"enum must be a list of values, got {enum!r}")
        object.__setattr__(self, "enum", None if enum is None else tuple(enum))


ToolRun: TypeAlias = Callable[..., Any]


@dataclass(frozen=True, kw_only=True, slots=True)
class Tool:
    """A defined tool: frozen, with its compiled input schema. Made by `tool()`."""

    name: str
    """Matches `^[a-z][a-z0-9_]{0,63}$`; unique in an agent."""
    description: str
    """What the model reads about the tool."""
    input: Mapping[str, Field]
    """The input fields by name; empty for a tool without input."""
    run: ToolRun
    """`run(input, cx)`, sync or async; its return value is the result."""
    schema: dict[str, Any] = field(repr=False)
    """The JSON Schema of the input (`properties`, `required`, `additionalProperties: false`)."""
    is_async: bool = field(default=False, repr=False)
    """Whether `run` is a coroutine function (awaited) rather than run on a worker thread."""


def _bad(message: str) -> AerixError:
    return AerixError("options", message)


def _is_type(value: object, ftype: FieldType) -> bool:
    if ftype == "string":
        return isinstance(value, str)
    if ftype == "boolean":
        return isinstance(value, bool)
    if isinstance(value, bool):
        return False
    if ftype == "integer":
        return isinstance(value, int)
    return isinstance(value, int) or (isinstance(value, float) and math.isfinite(value))


def _check_field(tool_name: str, name: object, spec: object) -> Field:
    where = f"tool {tool_name!r}: field {name!r}"
    if not isinstance(name, str) or not FIELD_NAME_PATTERN.match(name):
        raise _bad(
            f"tool {tool_name!r}: bad field name {name!r}; "
            "use letters, digits, '_', '.', '-', starting with a letter or '_' (at most 64)"
        )
    if isinstance(spec, Mapping):
        unknown = set(spec) - {"type", "description", "required", "enum"}
        if unknown:
            raise _bad(
                f"{where}: unknown key(s) {sorted(unknown)}; allowed: type, description, required, enum"
            )
        if "type" not in spec:
            raise _bad(f"{where}: missing 'type'; one of {', '.join(FIELD_TYPES)}")
        spec = Field(spec["type"], spec.get("description"), spec.get("required", False), spec.get("enum"))
    if not isinstance(spec, Field):
        raise _bad(f"{where}: expected a Field or a dict, got {type(spec).__name__}")
    if spec.type not in FIELD_TYPES:
        raise _bad(f"{where}: bad type {spec.type!r}; one of {', '.join(FIELD_TYPES)} (inputs are flat)")
    if spec.description is not None and not isinstance(spec.description, str):
        raise _bad(f"{where}: description must be a string, got {type(spec.description).__name__}")
    if not isinstance(spec.required, bool):
        raise _bad(f"{where}: required must be True or False, got {spec.required!r}")
    if spec.enum is not None:
        if not spec.enum:
            raise _bad(f"{where}: enum is empty; give at least one value or no enum")
        for v in spec.enum:
            if not _is_type(v, spec.type):
                raise _bad(f"{where}: enum value {v!r} is not of type {spec.type!r}")
        if len(set(spec.enum)) != len(spec.enum):
            raise _bad(f"{where}: enum has duplicate values: {list(spec.enum)!r}")
    return spec


def _schema(fields: Mapping[str, Field]) -> dict[str, Any]:
    properties: dict[str, Any] = {}
    for name, f in fields.items():
        prop: dict[str, Any] = {"type": f.type}
        if f.enum is not None:
            prop["enum"] = list(f.enum)
        if f.description:
            prop["description"] = f.description
        properties[name] = prop
    return {
        "type": "object",
        "properties": properties,
        "required": [n for n, f in fields.items() if f.required],
        "additionalProperties": False,
    }


def _make(name: object, description: object, fields: object, run: object, is_async: bool) -> Tool:
    if not isinstance(name, str) or not NAME_PATTERN.match(name):
        raise _bad(f"bad tool name {name!r}; it must match ^[a-z][a-z0-9_]{{0,63}}$")
    if not isinstance(description, str):
        raise _bad(f"tool {name!r}: description must be a string, got {type(description).__name__}")
    if not callable(run):
        raise _bad(f"tool {name!r}: run must be callable, got {type(run).__name__}")
    if not isinstance(fields, Mapping):
        raise _bad(f"tool {name!r}: input must be a dict of fields, got {type(fields).__name__}")
    checked = {n: _check_field(name, n, spec) for n, spec in fields.items()}
    return Tool(
        name=name,
        description=description,
        input=types.MappingProxyType(checked),
        run=run,
        schema=_schema(checked),
        is_async=is_async,
    )


def _explicit_run(run: Callable[..., Any]) -> tuple[Callable[..., Any], bool]:
    """Adapt a `run` that takes only the input to the `run(input, cx)` form."""
    is_async = inspect.iscoroutinefunction(run)
    try:
        params = list(inspect.signature(run).parameters.values())
    except (TypeError, ValueError):
        return run, is_async
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    varargs = any(p.kind == p.VAR_POSITIONAL for p in params)
    if len(positional) == 1 and not varargs:
        if is_async:

            async def one_arg_async(input: dict[str, Any], cx: ToolContext) -> Any:
                return await run(input)

            return one_arg_async, True
        return (lambda input, cx: run(input)), False
    return run, is_async


_SCALARS: dict[Any, FieldType] = {str: "string", int: "integer", float: "number", bool: "boolean"}


def _field_from_annotation(fn_name: str, param: str, ann: Any, has_default: bool) -> Field:
    optional = has_default
    origin = get_origin(ann)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in get_args(ann) if a is not type(None)]
        if len(args) == 1 and len(get_args(ann)) == 2:
            ann, optional = args[0], True
            origin = get_origin(ann)
    if ann in _SCALARS:
        return Field(_SCALARS[ann], required=not optional)
    if origin is Literal:
        values = get_args(ann)
        kinds = {_SCALARS.get(type(v)) for v in values}
        if len(kinds) == 1 and None not in kinds:
            (ftype,) = kinds
            assert ftype is not None
            return Field(ftype, required=not optional, enum=values)
        raise _bad(
            f"tool {fn_name!r}: parameter {param!r}: Literal values must all be of one type "
            f"(str, int, float or bool), got {values!r}"
        )
    raise _bad(
        f"tool {fn_name!r}: parameter {param!r} has annotation {ann!r}; "
        "use str, int, float, bool, a Literal of one of them, or X | None (inputs are flat)"
    )


def _from_function(fn: Callable[..., Any], name: str | None, description: str | None) -> Tool:
    if not callable(fn):
        raise _bad(f"@tool expects a function, got {type(fn).__name__}")
    fn_name = name if name is not None else getattr(fn, "__name__", repr(fn))
    doc = parse_docstring(inspect.getdoc(fn))
    try:
        hints = typing.get_type_hints(fn, include_extras=False)
    except Exception as exc:  # an unresolvable forward reference
        raise _bad(f"tool {fn_name!r}: cannot resolve the type hints: {exc}") from exc
    fields: dict[str, Field] = {}
    cx_param: str | None = None
    for p in inspect.signature(fn).parameters.values():
        ann = hints.get(p.name, inspect.Parameter.empty)
        if p.name == "cx" or ann is ToolContext:
            cx_param = p.name
            continue
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD, p.POSITIONAL_ONLY):
            raise _bad(f"tool {fn_name!r}: parameter {p.name!r} must be a plain named parameter")
        if ann is inspect.Parameter.empty:
            raise _bad(
                f"tool {fn_name!r}: parameter {p.name!r} needs a type annotation "
                "(str, int, float, bool or a Literal)"
            )
        f = _field_from_annotation(fn_name, p.name, ann, p.default is not p.empty)
        fields[p.name] = Field(f.type, doc.params.get(p.name), f.required, f.enum)
    is_async = inspect.iscoroutinefunction(fn)

    if is_async:

        async def run_async(input: dict[str, Any], cx: ToolContext) -> Any:
            return await (fn(**input, **{cx_param: cx}) if cx_param else fn(**input))

        run: Callable[..., Any] = run_async
    elif cx_param:
        run = lambda input, cx: fn(**input, **{cx_param: cx})  # noqa: E731
    else:
        run = lambda input, cx: fn(**input)  # noqa: E731
    return _make(fn_name, doc.description if description is None else description, fields, run, is_async)


@overload
def tool(fn: Callable[..., Any], /) -> Tool: ...
@overload
def tool(
    *, name: str | None = None, description: str | None = None
) -> Callable[[Callable[..., Any]], Tool]: ...
@overload
def tool(
    *,
    name: str,
    description: str = "",
    input: Mapping[str, Field | Mapping[str, Any]],
    run: Callable[..., Any],
) -> Tool: ...
@overload
def tool(*, name: str, description: str = "", run: Callable[..., Any]) -> Tool: ...


def tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    input: Mapping[str, Field | Mapping[str, Any]] | None = None,
    run: Callable[..., Any] | None = None,
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Define a tool, explicitly or from a typed, documented function.

    Explicit: `tool(name=..., description=..., input={...}, run=fn)`, where
    `run(input, cx)` (or `run(input)`) gets the checked input dict. As a
    decorator, `@tool` or `@tool(name=..., description=...)`, the fields come
    from the parameters (`str`, `int`, `float`, `bool`, `Literal[...]`; a
    default or `| None` makes a field optional) and the descriptions from the
    docstring (Google, NumPy or reST). A parameter named `cx`, or annotated
    `ToolContext`, receives the context.

    Raises:
        AerixError: `kind="options"`, naming what is wrong in the definition.

    Examples:
        >>> @tool
        ... def add(a: int, b: int) -> int:
        ...     '''Add two integers.'''
        ...     return a + b
        >>> add.name, list(add.input), add.schema["required"]
        ('add', ['a', 'b'], ['a', 'b'])
    """
    if fn is not None:
        if name is not None or description is not None or input is not None or run is not None:
            raise _bad("tool(fn) takes no other arguments; use @tool(name=..., description=...)")
        return _from_function(fn, None, None)
    if run is not None or input is not None:
        if run is None:
            raise _bad(f"tool {name!r}: missing run; pass run=fn, called as run(input, cx)")
        adapted, is_async = _explicit_run(run) if callable(run) else (run, False)
        return _make(name, "" if description is None else description, input or {}, adapted, is_async)

    def decorate(f: Callable[..., Any]) -> Tool:
        return _from_function(f, name, description)

    return decorate


def check_input(t: Tool, value: object) -> str | None:
    """Check a call's input against the tool's fields.

    Returns:
        `None` if the input is good, else what is wrong, in words.
    """
    if not isinstance(value, dict):
        return f"input must be an object, got {_json_type(value)}"
    fields = t.input
    for key in value:
        if key not in fields:
            allowed = ", ".join(fields) or "none"
            return f"unknown field {key!r} (fields: {allowed})"
    for key, f in fields.items():
        if key not in value:
            if f.required:
                return f"missing required field {key!r}"
            continue
        v = value[key]
        if not _is_type(v, f.type):
            return f"field {key!r} must be {_article(f.type)}, got {_json_type(v)} {_short(v)}"
        if f.enum is not None and v not in f.enum:
            return f"field {key!r} must be one of {json.dumps(list(f.enum))}, got {_short(v)}"
    return None


def _article(ftype: str) -> str:
    return f"an {ftype}" if ftype == "integer" else f"a {ftype}"


def _json_type(v: object) -> str:
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int):
        return "integer"
    if isinstance(v, float):
        return "number" if math.isfinite(v) else "non-finite number"
    if isinstance(v, str):
        return "string"
    if v is None:
        return "null"
    if isinstance(v, list):
        return "array"
    if isinstance(v, dict):
        return "object"
    return type(v).__name__


def _short(v: object, limit: int = 60) -> str:
    try:
        s = json.dumps(v, ensure_ascii=False)
    except (TypeError, ValueError):
        s = repr(v)
    return s if len(s) <= limit else s[: limit - 1] + "…"


_encode = json.JSONEncoder(ensure_ascii=False, allow_nan=False).encode


def result_text(value: object) -> tuple[str, bool]:
    """A tool's return value as result text: a `str` as is, anything else as JSON."""
    if isinstance(value, str):
        return value, False
    try:
        return _encode(value), False
    except (TypeError, ValueError, RecursionError) as exc:
        return f"error: the result cannot be serialised to JSON: {exc}", True


def cut_result(text: str, limit: int) -> str:
    """Cut a result to `limit` characters, with a note saying how much was cut."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}\n[cut: {len(text) - limit} more characters]"


class _Waker:
    """Wakes one event loop from worker threads: a finished call goes into a deque, and one
    byte into a pipe that the loop watches.

    Leaner than `call_soon_threadsafe` (no handle per call, and no second read that fails
    to find the self-pipe empty), and the loop reads every call finished since with one read.
    """

    __slots__ = ("__weakref__", "_done", "_read", "_write")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._done: deque[tuple[asyncio.Future[tuple[Any, bool]], Any, bool]] = deque()
        self._read, self._write = os.pipe()
        # closed once no worker holds the waker (not at exit: a hung worker may still write)
        weakref.finalize(self, _close, self._read, self._write).atexit = False
        os.set_blocking(self._read, False)
        os.set_blocking(self._write, False)
        loop.add_reader(self._read, self._drain)

    def deliver(self, fut: asyncio.Future[tuple[Any, bool]], outcome: Any, ok: bool) -> None:  # any thread
        self._done.append((fut, outcome, ok))
        try:
            os.write(self._write, b"\0")
        except BlockingIOError:  # the pipe is full: the loop has a wake pending anyway
            pass

    def _drain(self) -> None:  # the loop's thread
        try:
            os.read(self._read, 4096)
        except BlockingIOError:
            pass
        done = self._done
        while done:
            _deliver(*done.popleft())


def _close(*fds: int) -> None:
    for fd in fds:
        os.close(fd)


class _Workers:
    """Daemon worker threads for plain-function tools.

    Leaner than `asyncio.to_thread` on the hot path (one queue put; one pipe write
    back, through the loop's `_Waker`), and a tool left hanging after an abort never
    holds up interpreter exit or `asyncio.run`'s executor shutdown.
    """

    MAX_IDLE = 32

    def __init__(self) -> None:
        self._idle: list[SimpleQueue[Any]] = []
        self._wakers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Waker | None]
        self._wakers = weakref.WeakKeyDictionary()
        """Each loop's waker; `None` for a loop that cannot watch a pipe (Windows, a proactor)."""
        self._lock = threading.Lock()

    def forget(self) -> None:
        """In a forked child: forget the parent's threads and loops, which are not there."""
        self._idle = []
        self._wakers = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()

    def run(self, fn: Callable[..., Any], *args: Any) -> asyncio.Future[tuple[Any, bool]]:
        """Run `fn(*args)` on a worker thread; the future gets `(value, True)` or `(exception, False)`."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[tuple[Any, bool]] = loop.create_future()
        try:
            waker = self._wakers[loop]
        except KeyError:
            waker = self._waker(loop)
        try:
            inbox = self._idle.pop()
        except IndexError:
            inbox = SimpleQueue()
            threading.Thread(target=self._work, args=(inbox,), name="aerix-tool", daemon=True).start()
        inbox.put((loop, waker, fut, contextvars.copy_context(), fn, args))
        return fut

    def _waker(self, loop: asyncio.AbstractEventLoop) -> _Waker | None:
        with self._lock:
            if loop not in self._wakers:
                try:
                    self._wakers[loop] = _Waker(loop) if os.name == "posix" else None
                except (NotImplementedError, OSError):  # no add_reader, or no fd left
                    self._wakers[loop] = None
            return self._wakers[loop]

    def _work(self, inbox: SimpleQueue[Any]) -> None:
        while True:
            loop, waker, fut, ctx, fn, args = inbox.get()
            try:
                outcome, ok = ctx.run(fn, *args), True
            except BaseException as exc:  # delivered to the awaiting task
                outcome, ok = exc, False
            idle = len(self._idle) < self.MAX_IDLE
            if idle:
                self._idle.append(inbox)
            if waker is not None:
                waker.deliver(fut, outcome, ok)
            else:
                try:
                    loop.call_soon_threadsafe(_deliver, fut, outcome, ok)
                except RuntimeError:  # the loop is closed: nobody waits for this result
                    pass
            del loop, waker, fut, ctx, fn, args, outcome  # an idle worker holds no loop, no result
            if not idle:
                return


def _deliver(fut: asyncio.Future[tuple[Any, bool]], outcome: Any, ok: bool) -> None:
    if not fut.done():  # else the awaiting task was cancelled (an abort)
        fut.set_result((outcome, ok))  # an exception too, as a value: any exception, even StopIteration


_workers = _Workers()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_workers.forget)


async def run_tool(t: Tool, input: dict[str, Any], cx: ToolContext) -> tuple[str, bool]:
    """Check the input, run the tool and turn its outcome into result text.

    A coroutine `run` is awaited; a plain one runs on a worker thread. A failed
    check or an exception becomes `error: <message>`; never raises, except
    `asyncio.CancelledError`.

    Returns:
        The result text (not yet cut) and whether it is an error.
    """
    problem = check_input(t, input)
    if problem is not None:
        return f"error: {problem}", True
    try:
        if t.is_async:
            value = await t.run(input, cx)
        else:
            value, ok = await _workers.run(t.run, input, cx)
            if not ok:
                raise value
            if inspect.isawaitable(value):  # a plain function that returned a coroutine
                value = await value
    except asyncio.CancelledError:
        task = asyncio.current_task()
        if task is None or task.cancelling():
            raise
        return "error: CancelledError", True
    except Exception as exc:
        return f"error: {describe(exc)}", True
    return result_text(value)
