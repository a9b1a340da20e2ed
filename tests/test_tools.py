"""Tool definitions (both forms), input checks, running and results."""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
import enum
import functools
import gc
import json
import os
import threading
from typing import Annotated, Any, Literal, NotRequired, Required

import annotated_types as at
import pydantic
import pytest
from typing_extensions import TypedDict

from _tools import convert, weather
from aerix import AbortController, AerixError, Agent, EndEvent, Field, Tool, ToolContext, tool
from aerix import _workers as workers_module
from aerix.testing import ScriptedModel
from aerix.tools import check_input, cut_result, result_text, run_tool


def cx() -> ToolContext:
    return ToolContext(signal=AbortController().signal, call_id="call_1")


def test_decorator_reads_hints_and_docstring() -> None:
    assert weather.name == "weather"
    assert weather.description == "Today's forecast for a city."
    assert weather.input["city"] == Field("string", "City name", required=True)
    assert weather.input["unit"] == Field("string", "Temperature unit", enum=("c", "f"))
    assert weather.schema == {
        "type": "object",
        "properties": {
            "city": {"type": "string", "description": "City name"},
            "unit": {"type": "string", "enum": ["c", "f"], "description": "Temperature unit"},
        },
        "required": ["city"],
        "additionalProperties": False,
    }


def test_decorator_with_arguments_and_all_scalar_types() -> None:
    @tool(name="calc", description="Custom.")
    def f(a: int, b: float, c: bool, d: Literal[1, 2] = 1, e: str | None = None) -> str:
        """Ignored summary.

        Parameters
        ----------
        a : int
            The first
            operand.
        """
        return ""

    assert f.name == "calc" and f.description == "Custom."
    assert [fl.type for fl in f.input.values()] == ["integer", "number", "boolean", "integer", "string"]
    assert [fl.required for fl in f.input.values()] == [True, True, True, False, False]
    assert f.input["a"].description == "The first operand."
    assert f.input["d"].enum == (1, 2)


def test_decorator_keeps_rest_style_descriptions_word_for_word() -> None:
    @tool
    def g(x: str) -> str:
        """Do g.

        :param x: An *exact*   description.
        """
        return x

    assert g.schema["properties"]["x"]["description"] == "An *exact*   description."


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("def f(x: list) -> str: ...", "parameter 'x'"),
        ("def f(x: dict[int, int]) -> str: ...", "parameter 'x'"),
        ("def f(x: int | str) -> str: ...", "parameter 'x'"),
        ("def f(x: object) -> str: ...", "parameter 'x' has annotation object"),
        ("def f(x: set[int]) -> str: ...", "parameter 'x'"),
        ("def f(x) -> str: ...", "needs a type annotation"),
        ("def f(*args: int) -> str: ...", "plain named parameter"),
        ("def f(x: Literal['a', 1]) -> str: ...", "Literal values must all be of one type"),
        ("def Bad(x: int) -> str: ...", "bad tool name 'Bad'"),
        ("def f(cx, ctx: ToolContext) -> str: ...", "parameters 'cx' and 'ctx' both take the context"),
    ],
)
def test_decorator_refuses_what_it_cannot_map(source: str, message: str) -> None:
    scope: dict[str, object] = {"Literal": Literal, "ToolContext": ToolContext}
    exec(source, scope)
    fn = next(v for k, v in scope.items() if k in ("f", "Bad"))
    with pytest.raises(AerixError) as info:
        tool(fn)  # type: ignore[arg-type]
    assert info.value.kind == "options"
    assert message in info.value.message


def test_context_parameter_is_not_a_field() -> None:
    seen: list[str] = []

    @tool
    def a(x: int, cx: ToolContext) -> str:
        """A."""
        seen.append(cx.call_id)
        return str(x)

    @tool
    def b(ctx: ToolContext) -> str:
        """B."""
        return ctx.call_id

    assert list(a.input) == ["x"] and list(b.input) == []
    assert asyncio.run(run_tool(a, {"x": 1}, cx())) == ("1", False)
    assert asyncio.run(run_tool(b, {}, cx())) == ("call_1", False)
    assert seen == ["call_1"]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"name": "1abc"}, "bad tool name '1abc'"),
        ({"name": "a" * 65}, "bad tool name"),
        ({"name": "has-dash"}, "bad tool name"),
        ({"name": "ok\n"}, "bad tool name 'ok\\n'"),  # `$` alone would let a last newline through
        ({"name": None}, "bad tool name None"),
        ({"run": 3}, "run must be callable"),
        ({"description": 5}, "description must be a string"),
        ({"input": {"x": {"type": "list"}}}, "bad type 'list'"),
        ({"input": {"x": {"type": "array"}}}, "an 'array' field needs items"),
        ({"input": {"x": {"required": True}}}, "missing 'type'"),
        ({"input": {"x": {"type": "string", "min": 1}}}, "unknown key(s) ['min']"),
        ({"input": {"x": Field("integer", enum=[1, "2"])}}, "enum value '2' is not of type 'integer'"),
        ({"input": {"x": Field("integer", enum=[True])}}, "enum value True"),
        ({"input": {"x": Field("string", enum=[])}}, "enum is empty"),
        ({"input": {"x": Field("string", enum=["a", "a"])}}, "duplicate"),
        ({"input": {"x": Field("string", required="yes")}}, "required must be True or False"),  # type: ignore[arg-type]
        ({"input": {"": Field("string")}}, "bad field name ''"),
        ({"input": {"a\n": Field("string")}}, "bad field name 'a\\n'"),
        ({"input": {"x": 3}}, "expected a Field or a dict"),
        ({"input": ["x"]}, "input must be a dict"),
    ],
)
def test_explicit_form_refuses_bad_definitions(kwargs: dict[str, object], message: str) -> None:
    base: dict[str, object] = {"name": "t", "description": "T.", "input": {}, "run": lambda i, c: ""}
    with pytest.raises(AerixError) as info:
        tool(**{**base, **kwargs})  # type: ignore[call-overload]
    assert info.value.kind == "options"
    assert message in info.value.message


@pytest.mark.parametrize("enum", [{"c", "f"}, frozenset({"c", "f"})])
def test_an_enum_without_an_order_is_refused(enum: object) -> None:
    for make in (
        lambda: Field("string", enum=enum),  # type: ignore[arg-type]
        lambda: tool(
            name="t", description="T.", input={"x": {"type": "string", "enum": enum}}, run=lambda i: ""
        ),
    ):
        with pytest.raises(AerixError) as info:
            make()
        assert info.value.kind == "options"
        assert "whose order changes from one process to the next; give a list, e.g. sorted(...)" in (
            info.value.message
        )


def test_an_enum_of_a_dicts_keys_keeps_their_order() -> None:
    assert Field("string", enum={"f": 1, "c": 2}.keys()).enum == ("f", "c")


def test_explicit_form_accepts_run_with_input_only() -> None:
    t = tool(
        name="echo",
        description="Echo.",
        input={"s": {"type": "string", "required": True}},
        run=lambda i: i["s"],
    )
    assert asyncio.run(run_tool(t, {"s": "hi"}, cx())) == ("hi", False)


def test_a_second_parameter_with_a_default_keeps_it_unless_it_asks_for_the_context() -> None:
    # `lambda input, n=n: ...` binds a loop's value the usual way: the context must not overwrite it
    made = [tool(name=f"t{n}", input={}, run=lambda input, n=n: f"tool {n}") for n in range(2)]
    assert [asyncio.run(run_tool(t, {}, cx())) for t in made] == [("tool 0", False), ("tool 1", False)]

    def named(input: dict[str, Any], cx: ToolContext | None = None) -> str:
        return "context" if isinstance(cx, ToolContext) else "none"

    def annotated(input: dict[str, Any], context: ToolContext = None) -> str:  # type: ignore[assignment]
        return "context" if isinstance(context, ToolContext) else "none"

    async def required(input: dict[str, Any], c: Any) -> str:
        return "context" if isinstance(c, ToolContext) else "none"

    for fn in (named, annotated, required):
        t = tool(name="t", input={}, run=fn)
        assert asyncio.run(run_tool(t, {}, cx())) == ("context", False), fn.__name__


def test_explicit_form_takes_the_context_as_a_keyword_only_cx() -> None:
    def sync(input: dict[str, Any], *, cx: ToolContext) -> str:
        return f"{input['s']} {type(cx).__name__}"

    async def asynchronous(input: dict[str, Any], *, context: ToolContext) -> str:
        return f"{input['s']} {type(context).__name__}"

    for fn in (sync, asynchronous):
        t = tool(name="t", input={"s": {"type": "string", "required": True}}, run=fn)
        assert asyncio.run(run_tool(t, {"s": "hi"}, cx())) == ("hi ToolContext", False), fn.__name__


async def _rows(input: dict[str, Any]) -> Any:
    yield 1


def _lines(input: dict[str, Any]) -> Any:
    yield "a"


@pytest.mark.parametrize(
    ("run", "message"),
    [
        (
            lambda: "x",
            r"tool 't': run\(\) cannot be called as run\(input, cx\) \(too many positional arguments\)",
        ),
        (
            lambda a, b, c: "x",
            r"run\(a, b, c\) cannot be called as run\(input, cx\) \(missing a required argument: 'c'\)",
        ),
        (lambda input, *, key: "x", r"run\(input, \*, key\) cannot be called as run\(input\)"),
        (_rows, r"tool 't': run is a generator function \('_rows'\); a tool returns its result"),
        (_lines, r"run is a generator function \('_lines'\)"),
    ],
)
def test_explicit_form_refuses_a_run_aerix_cannot_call(run: Any, message: str) -> None:
    with pytest.raises(AerixError, match=message) as info:
        tool(name="t", input={}, run=run)
    assert info.value.kind == "options"


def test_a_decorated_run_is_called_as_its_wrapper_takes_it() -> None:
    def with_db(f: Any) -> Any:
        @functools.wraps(f)
        def wrapper(input: dict[str, Any], cx: ToolContext) -> Any:
            return f(input, cx, 42)  # the decorator gives the third argument

        return wrapper

    @with_db
    def lookup(input: dict[str, Any], cx: ToolContext, db: int) -> str:
        return f"{input['s']} {db}"

    def both(input: dict[str, Any], ctx: ToolContext, *, cx: Any = None) -> str:
        return type(ctx).__name__  # the positional one takes the context; the keyword keeps its default

    t = tool(name="lookup", input={"s": {"type": "string", "required": True}}, run=lookup)
    assert asyncio.run(run_tool(t, {"s": "id"}, cx())) == ("id 42", False)
    assert asyncio.run(run_tool(tool(name="b", input={}, run=both), {}, cx())) == ("ToolContext", False)


def test_a_callable_object_whose_call_is_a_generator_is_refused() -> None:
    class Rows:
        def __call__(self, input: dict[str, Any]) -> Any:
            yield 1

    with pytest.raises(AerixError, match=r"tool 't': run is a generator function \('__call__'\)"):
        tool(name="t", input={}, run=Rows())


def test_the_decorator_refuses_a_generator_function() -> None:
    def stream(n: int) -> Any:
        """Stream."""
        yield n

    with pytest.raises(AerixError, match=r"tool 'stream': run is a generator function"):
        tool(stream)


def test_tool_is_frozen() -> None:
    with pytest.raises(AttributeError):
        weather.name = "x"  # type: ignore[misc]
    with pytest.raises(TypeError):
        weather.input["x"] = Field("string")  # type: ignore[index]
    # frozen, so hashable: a set member or a dict key, equal tools hashing alike
    assert {weather, convert, weather} == {weather, convert} and {weather: 1}[weather] == 1
    assert hash(dataclasses.replace(weather)) == hash(weather)


class Stay(pydantic.BaseModel):
    nights: int


def book_stay(stay: Stay) -> str:
    """Book a stay."""
    return str(stay.nights)


@pytest.mark.parametrize(
    "make",
    [
        lambda: tool(
            name="t", description="T.", input={"a": Field("integer", required=True)}, run=lambda i: ""
        ),
        lambda: tool(
            name="t",
            description="T.",
            schema={"type": "object", "properties": {"a": {"type": "integer"}}},
            run=lambda i: "",
        ),
        lambda: tool(book_stay),
    ],
    ids=["input", "schema", "annotations"],
)
def test_changing_a_tools_schema_afterwards_changes_nothing_it_does(make: Any) -> None:
    # `Tool.schema` is the caller's to read; what the model is told, what it is made to write
    # and what the input check takes all come from the tool's own copy, so they never drift apart.
    from aerix.turn import render_tool, turn_schema

    t = make()
    before = (render_tool(t), turn_schema([t]), t.schema)
    t.schema.clear()
    t.schema["type"] = "string"
    assert (render_tool(t), turn_schema([t])) == before[:2]
    good = {"stay": {"nights": 2}} if t.name == "book_stay" else {"a": 2}
    assert check_input(t, good) is None and check_input(t, "x") is not None


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ({"value": 1, "from_unit": "km", "to_unit": "m"}, None),
        ({"value": 1.5, "from_unit": "km", "to_unit": "m", "precision": 2, "verbose": False}, None),
        ([], "input: expected object, got []"),
        ({"from_unit": "km", "to_unit": "m"}, "input: missing required field 'value'"),
        (
            {"value": 1, "from_unit": "km", "to_unit": "m", "x": 1},
            "input: unknown field 'x' (fields: value, from_unit, to_unit, precision, verbose)",
        ),
        ({"value": "1", "from_unit": "km", "to_unit": "m"}, 'input.value: expected number, got "1"'),
        ({"value": True, "from_unit": "km", "to_unit": "m"}, "input.value: expected number, got true"),
        (
            {"value": float("nan"), "from_unit": "km", "to_unit": "m"},
            "input.value: expected number, got NaN (not a finite number)",
        ),
        (
            {"value": 1, "from_unit": "km", "to_unit": "m", "precision": 2.0},
            "input.precision: expected integer, got 2.0",
        ),
        (
            {"value": 1, "from_unit": "km", "to_unit": "m", "precision": True},
            "input.precision: expected integer, got true",
        ),
        (
            {"value": 1, "from_unit": "km", "to_unit": "m", "verbose": 1},
            "input.verbose: expected boolean, got 1",
        ),
        (
            {"value": 1, "from_unit": "yd", "to_unit": "m"},
            'input.from_unit: expected one of ["km", "mi", "m"], got "yd"',
        ),
        ({"value": 1, "from_unit": None, "to_unit": "m"}, "input.from_unit: expected string, got null"),
    ],
)
def test_check_input(value: object, problem: str | None) -> None:
    assert check_input(convert, value) == problem


async def test_sync_tools_run_on_a_worker_thread_and_async_tools_are_awaited() -> None:
    threads: list[str] = []

    @tool
    def sync_tool() -> str:
        """S."""
        threads.append(threading.current_thread().name)
        return "s"

    @tool
    async def async_tool() -> str:
        """A."""
        threads.append(threading.current_thread().name)
        await asyncio.sleep(0)
        return "a"

    assert await run_tool(sync_tool, {}, cx()) == ("s", False)
    assert await run_tool(async_tool, {}, cx()) == ("a", False)
    assert threads[0] != threading.current_thread().name
    assert threads[1] == threading.current_thread().name


# -- plain-function tools: the hand-off to a worker thread ---------------------------------

REQUEST = contextvars.ContextVar("REQUEST", default="none")


def calling(name: str) -> str:
    return json.dumps({"calls": [{"tool": name, "input": {}}]})


async def test_a_plain_tool_sees_the_callers_context_variables_and_cannot_change_them() -> None:
    seen: list[str] = []

    @tool
    def peek() -> str:
        """Peek."""
        seen.append(REQUEST.get())
        REQUEST.set("set by the tool")
        return "ok"

    token = REQUEST.set("request 42")
    try:
        assert await run_tool(peek, {}, cx()) == ("ok", False)
        assert await run_tool(peek, {}, cx()) == ("ok", False)  # a reused worker: a fresh copy again
        assert seen == ["request 42", "request 42"] and REQUEST.get() == "request 42"
    finally:
        REQUEST.reset(token)


async def test_a_plain_tool_never_blocks_the_event_loop() -> None:
    loop = asyncio.get_running_loop()
    loop_ran = threading.Event()

    @tool
    def ask_the_loop() -> str:
        """Wait for the loop to run a callback: it cannot, if the tool blocks it."""
        loop.call_soon_threadsafe(loop_ran.set)
        return "the loop ran" if loop_ran.wait(5) else "the loop was blocked"

    assert await run_tool(ask_the_loop, {}, cx()) == ("the loop ran", False)


async def test_sequential_plain_calls_reuse_a_worker_thread() -> None:
    threads: set[int] = set()

    @tool
    def where() -> str:
        """Where."""
        threads.add(threading.get_ident())
        return "here"

    for _ in range(20):
        assert await run_tool(where, {}, cx()) == ("here", False)
    assert threading.get_ident() not in threads
    assert len(threads) <= 2  # no thread per call


PINS = hasattr(os, "sched_setaffinity") and workers_module._core_reader() is not None


@pytest.mark.skipif(not PINS, reason="worker threads are pinned only where sched_setaffinity is (Linux)")
async def test_a_plain_tool_runs_on_every_core_the_process_may_use(monkeypatch: pytest.MonkeyPatch) -> None:
    """The worker is pinned to the loop's core only to be woken: the tool (and any thread or
    process it starts, which inherits its cores) gets them all back."""
    allowed = os.sched_getaffinity(0)
    seen: list[tuple[set[int], set[int]]] = []
    pins: list[tuple[int, bool, int]] = []  # (thread the pin is for, set by the loop's thread, cores)
    real = os.sched_setaffinity
    loop_thread = threading.get_native_id()

    def recorded(tid: int, cores: Any) -> None:
        pins.append((tid, threading.get_native_id() == loop_thread, len(set(cores))))
        real(tid, cores)

    monkeypatch.setattr(workers_module.workers, "_pinning", True)
    monkeypatch.setattr(workers_module.os, "sched_setaffinity", recorded)

    @tool
    def cores() -> str:
        """Cores."""
        child: set[int] = set()
        started = threading.Thread(target=lambda: child.update(os.sched_getaffinity(0)))
        started.start()
        started.join()
        seen.append((os.sched_getaffinity(0), child))
        return "ok"

    for _ in range(5):  # the first call starts a worker; the next ones reuse a pinned one
        assert await run_tool(cores, {}, cx()) == ("ok", False)
    assert seen == [(allowed, allowed)] * 5
    # Each call: the loop pins the worker to one core, then the worker lets go (tid 0: itself).
    assert [(by_loop, n) for _, by_loop, n in pins] == [(True, 1), (False, len(allowed))] * 5
    assert all(tid != 0 for tid, by_loop, _ in pins if by_loop)


@pytest.mark.skipif(not PINS, reason="worker threads are pinned only where sched_setaffinity is (Linux)")
async def test_a_worker_the_loop_cannot_pin_still_runs_the_tool(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(pid: int, cores: object) -> None:
        raise OSError(22, "Invalid argument")

    @tool
    def add(a: int, b: int) -> int:
        """Add."""
        return a + b

    monkeypatch.setattr(workers_module.workers, "_pinning", True)  # restored after the test
    monkeypatch.setattr(workers_module.os, "sched_setaffinity", refuse)
    assert [await run_tool(add, {"a": i, "b": 1}, cx()) for i in range(3)] == [
        ("1", False),
        ("2", False),
        ("3", False),
    ]
    assert workers_module.workers._pinning is False  # refused once: not tried again


async def test_plain_tools_run_where_threads_cannot_be_pinned(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(workers_module, "_core_reader", lambda: None)
    pins: list[object] = []
    if hasattr(os, "sched_setaffinity"):
        monkeypatch.setattr(workers_module.os, "sched_setaffinity", lambda *a: pins.append(a))

    @tool
    def add(a: int, b: int) -> int:
        """Add."""
        return a + b

    assert [await run_tool(add, {"a": i, "b": 1}, cx()) for i in range(3)] == [
        ("1", False),
        ("2", False),
        ("3", False),
    ]
    assert pins == []


async def test_plain_tools_of_many_agents_run_at_the_same_time() -> None:
    n = 4
    barrier = threading.Barrier(n, timeout=5)

    @tool
    def meet() -> str:
        """Wait until every agent's call is running (a broken barrier if they did not overlap)."""
        barrier.wait()
        return "met"

    agents = [Agent(model=ScriptedModel([calling("meet"), '{"final":"ok"}']), tools=[meet]) for _ in range(n)]
    answers = await asyncio.gather(*(agent.ask("go") for agent in agents))
    results = [(ev.text, ev.error) for a in answers for ev in a.events if ev.type == "result"]
    assert results == [("met", False)] * n


async def test_an_abort_does_not_wait_for_a_plain_tool_that_ignores_it() -> None:
    loop = asyncio.get_running_loop()
    errors: list[dict[str, Any]] = []
    loop.set_exception_handler(lambda _, context: errors.append(context))
    release, finished = threading.Event(), threading.Event()

    @tool
    def deaf() -> str:
        """Blocks, deaf to the signal."""
        release.wait(5)
        finished.set()
        return "late"

    controller = AbortController()
    agent = Agent(model=ScriptedModel([calling("deaf"), '{"final":"ok"}']), tools=[deaf])
    events = []
    async for ev in agent.run("go", signal=controller.signal):
        events.append(ev)
        if ev.type == "call":
            loop.call_later(0.01, controller.abort)
    assert events[-1] == EndEvent(reason="abort", message="aborted")
    assert not finished.is_set() and not agent.busy  # the run ended while the tool still ran
    release.set()
    assert await asyncio.to_thread(finished.wait, 5)
    await asyncio.sleep(0.01)  # the late result reaches the loop, and is dropped
    assert errors == []
    loop.set_exception_handler(None)


async def test_cancelling_the_consumer_during_a_plain_tool() -> None:
    started, release = threading.Event(), threading.Event()

    @tool
    def slow() -> str:
        """Slow."""
        started.set()
        release.wait(5)
        return "late"

    agent = Agent(model=ScriptedModel([calling("slow"), '{"final":"ok"}']), tools=[slow])
    task = asyncio.create_task(agent.ask("go"))
    assert await asyncio.to_thread(started.wait, 5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert not agent.busy and agent.messages == ()
    release.set()


@pytest.mark.parametrize("exc", [StopIteration("done"), StopAsyncIteration()])
async def test_a_plain_tool_that_raises_what_a_future_cannot_hold_is_an_error_result(
    exc: BaseException,
) -> None:
    def raises(i: object, c: object) -> str:
        raise exc

    t = tool(name="odd", input={}, run=raises)
    text, error = await asyncio.wait_for(run_tool(t, {}, cx()), 5)  # it used to hang here
    assert error
    assert text == (f"error: {exc}" if str(exc) else f"error: {type(exc).__name__}")


def test_a_loop_that_cannot_watch_a_pipe_still_gets_plain_results() -> None:
    class NoReaders(asyncio.SelectorEventLoop):
        """Like Windows' proactor loop: no add_reader."""

        def add_reader(self, *args: Any) -> None:
            raise NotImplementedError

    @tool
    def plain() -> str:
        """Plain."""
        return "through call_soon_threadsafe"

    loop = NoReaders()
    try:
        for _ in range(2):
            assert loop.run_until_complete(run_tool(plain, {}, cx())) == (
                "through call_soon_threadsafe",
                False,
            )
    finally:
        loop.close()


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts open files through /proc")
def test_each_loops_wake_pipe_is_closed_once_the_loop_is_gone() -> None:
    @tool
    def plain() -> str:
        """Plain."""
        return "ok"

    def open_files() -> int:
        gc.collect()
        return len(os.listdir("/proc/self/fd"))

    asyncio.run(run_tool(plain, {}, cx()))  # warm: a worker thread exists
    before = open_files()
    for _ in range(20):
        assert asyncio.run(run_tool(plain, {}, cx())) == ("ok", False)  # a new loop each time
    assert open_files() <= before


async def test_a_plain_tool_that_returns_a_coroutine_has_it_awaited() -> None:
    async def later() -> str:
        return "awaited"

    t = tool(name="indirect", input={}, run=lambda i, c: later())
    assert await run_tool(t, {}, cx()) == ("awaited", False)


async def test_run_gets_exactly_the_fields_sent() -> None:
    got: list[dict[str, object]] = []
    t = tool(
        name="t",
        input={"a": Field("string"), "b": Field("integer")},
        run=lambda i, c: got.append(dict(i)) or "ok",
    )
    await run_tool(t, {"a": "x"}, cx())
    assert got == [{"a": "x"}]


async def test_errors_become_error_results() -> None:
    def boom(i: object, c: object) -> str:
        raise ValueError("no luck")

    t = tool(name="boom", input={}, run=boom)
    assert await run_tool(t, {}, cx()) == ("error: no luck", True)
    assert await run_tool(t, {"x": 1}, cx()) == ("error: input: unknown field 'x' (fields: none)", True)


def test_result_text() -> None:
    assert result_text("plain") == ("plain", False)
    assert result_text({"a": [1, "é"]}) == ('{"a": [1, "é"]}', False)
    assert result_text(None) == ("null", False)
    text, error = result_text(object())
    assert error and text.startswith("error: the result cannot be serialised to JSON")
    text, error = result_text(float("nan"))
    assert error
    deep: list[object] = []
    for _ in range(100000):
        deep = [deep]
    assert result_text(deep)[1]


def test_cut_result_says_how_much_was_cut() -> None:
    assert cut_result("abc", 3) == "abc"
    big = "x" * 3_000_000
    cut = cut_result(big, 4000)
    assert cut.startswith("x" * 4000) and cut.endswith("[cut: 2996000 more characters]")
    assert len(cut) < 4100


def test_schema_is_json_and_tool_repr_is_short() -> None:
    json.dumps(convert.schema)
    assert "schema" not in repr(weather)
    assert isinstance(convert, Tool)


# -- inputs of any shape (SPEC 9.1) -----------------------------------------------------------

ORDER_FIELDS: dict[str, Any] = {
    "items": Field(
        "array",
        "What to order",
        required=True,
        items=Field(
            "object",
            properties={
                "sku": Field("string", "Product code", required=True),
                "qty": {"type": "integer", "required": True},
                "gift": Field("boolean"),
            },
        ),
    ),
    "ship": {"type": "object", "properties": {"speed": {"type": "string", "enum": ["slow", "fast"]}}},
    "tags": Field("array", items={"type": "string"}),
    "meta": Field("object"),
}


def test_nested_explicit_fields_compile_to_a_nested_schema() -> None:
    t = tool(name="order", description="Order.", input=ORDER_FIELDS, run=lambda i: "ok")
    assert t.schema == {
        "type": "object",
        "properties": {
            "items": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "sku": {"type": "string", "description": "Product code"},
                        "qty": {"type": "integer"},
                        "gift": {"type": "boolean"},
                    },
                    "required": ["sku", "qty"],
                    "additionalProperties": False,
                },
                "description": "What to order",
            },
            "ship": {
                "type": "object",
                "properties": {"speed": {"type": "string", "enum": ["slow", "fast"]}},
                "required": [],
                "additionalProperties": False,
            },
            "tags": {"type": "array", "items": {"type": "string"}},
            "meta": {"type": "object"},
        },
        "required": ["items"],
        "additionalProperties": False,
    }
    items = t.input["items"].items
    assert items is not None and items.properties is not None
    assert items.properties["qty"] == Field("integer", required=True)  # dicts become Fields
    assert t.input["ship"].properties == {"speed": Field("string", enum=("slow", "fast"))}


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ({"items": [{"sku": "a", "qty": 1}], "ship": {}, "tags": [], "meta": {"any": [1]}}, None),
        (
            {"items": [{"sku": "a", "qty": 1}, {"sku": "b", "qty": 2}, {"sku": "c", "qty": "3"}]},
            'input.items[2].qty: expected integer, got "3"',
        ),
        ({"items": [{"qty": 1}]}, "input.items[0]: missing required field 'sku'"),
        (
            {"items": [{"sku": "a", "qty": 1, "x": 0}]},
            "input.items[0]: unknown field 'x' (fields: sku, qty, gift)",
        ),
        (
            {"items": [], "ship": {"speed": "warp"}},
            'input.ship.speed: expected one of ["slow", "fast"], got "warp"',
        ),
        ({"items": [], "tags": ["a", 2]}, "input.tags[1]: expected string, got 2"),
        ({"items": {}}, "input.items: expected array, got {}"),
        ({"items": [], "meta": []}, "input.meta: expected object, got []"),
    ],
)
async def test_the_input_check_covers_the_whole_schema(value: dict[str, Any], problem: str | None) -> None:
    t = tool(name="order", input=ORDER_FIELDS, run=lambda i: "ran")
    assert check_input(t, value) == problem
    expected = ("ran", False) if problem is None else (f"error: {problem}", True)
    assert await run_tool(t, value, cx()) == expected


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"x": Field("array")}, "field 'x': an 'array' field needs items: a Field or a dict (each element)"),
        (
            {"x": Field("string", items=Field("string"))},
            "field 'x': items is for 'array' fields only, not 'string'",
        ),
        (
            {"x": {"type": "integer", "properties": {}}},
            "properties is for 'object' fields only, not 'integer'",
        ),
        (
            {"x": Field("object", enum=["a"])},
            "enum is for string, number, integer, boolean fields only, not 'object'",
        ),
        (
            {"x": Field("array", items=Field("object"), enum=[1])},
            "enum is for string, number, integer, boolean",
        ),
        ({"x": Field("array", items={"type": "list"})}, "field 'x[]': bad type 'list'"),
        ({"x": Field("object", properties={"y": {"tpe": "string"}})}, "field 'x.y': unknown key(s) ['tpe']"),
        ({"x": Field("object", properties={"a b": Field("string")})}, "bad field name x.'a b'"),
        (
            {"x": Field("object", properties={"y": Field("array", items=Field("array"))})},
            "field 'x.y[]': an 'array' field needs items",
        ),
        (
            {"x": Field("object", properties=["y"])},  # type: ignore[arg-type]
            "field 'x': properties must be a dict of fields, got list",
        ),
        ({"x": Field("array", items=3)}, "field 'x[]': expected a Field or a dict, got int"),  # type: ignore[arg-type]
    ],
)
def test_bad_nested_fields_are_refused(fields: dict[str, Any], message: str) -> None:
    with pytest.raises(AerixError) as info:
        tool(name="t", input=fields, run=lambda i: "")
    assert info.value.kind == "options"
    assert message in info.value.message


MCP_SCHEMA: dict[str, Any] = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "type": "object",
    "$defs": {"Item": {"type": "object", "properties": {"sku": {"type": "string"}}, "required": ["sku"]}},
    "properties": {
        "items": {"type": "array", "items": {"$ref": "#/$defs/Item"}, "minItems": 1},
        "note": {"type": ["string", "null"]},
    },
    "required": ["items"],
}


async def test_a_schema_tool_keeps_its_schema_and_checks_against_it() -> None:
    got: list[object] = []

    def run(i: dict[str, Any]) -> str:
        got.append(i)
        return "ok"

    t = tool(name="order", description="Order.", schema=MCP_SCHEMA, run=run)
    assert t.schema == MCP_SCHEMA and t.schema is not MCP_SCHEMA
    assert dict(t.input) == {}
    decoded = t.decoded
    assert decoded is not None and "$defs" not in decoded and "$schema" not in decoded
    assert decoded["properties"]["items"]["items"] == MCP_SCHEMA["$defs"]["Item"]
    assert await run_tool(t, {"items": [{"sku": "a"}], "note": None}, cx()) == ("ok", False)
    assert got == [{"items": [{"sku": "a"}], "note": None}]
    assert check_input(t, {"items": []}) == "input.items: expected at least 1 item, got 0"
    assert check_input(t, {"items": [{"sku": 1}]}) == "input.items[0].sku: expected string, got 1"
    assert check_input(t, {"items": [{}], "extra": 1}) == "input.items[0]: missing required field 'sku'"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"schema": {"type": "object"}, "input": {}},
            "pass input (fields) or schema (a JSON Schema), not both",
        ),
        (
            {"schema": {"type": "string"}},
            'the schema must be of an object, with "type": "object" at its root',
        ),
        ({"schema": {"properties": {}}}, "got type null"),
        ({"schema": ["x"]}, "tool 't': a schema must be a dict"),
        (
            {"schema": {"type": "object", "properties": {"q": {"type": "string", "examples": ["a"]}}}},
            "unsupported JSON Schema keyword 'examples' at schema.properties.q.examples",
        ),
        (
            {"schema": {"type": "object", "properties": {"q": {"$ref": "#/$defs/Q"}}}},
            "'#/$defs/Q' points nowhere",
        ),
        ({"schema": {"type": "object"}, "run": None}, "missing run"),
        ({}, "tool 't': pass input (fields; input={} for a tool without input) or schema"),  # SPEC 9.1
    ],
)
def test_bad_schema_tools_are_refused(kwargs: dict[str, Any], message: str) -> None:
    base: dict[str, Any] = {"name": "t", "run": lambda i: ""}
    with pytest.raises(AerixError) as info:
        tool(**{**base, **kwargs})
    assert info.value.kind == "options"
    assert message in info.value.message


class Speed(enum.Enum):
    SLOW = "slow"
    FAST = "fast"


@dataclasses.dataclass
class Line:
    sku: str
    qty: int = 1


class Where(TypedDict):
    city: str
    zip: NotRequired[str]


class Buyer(pydantic.BaseModel):
    name: str
    vip: bool = False


async def test_a_decorated_tool_takes_nested_types_and_gets_converted_values() -> None:
    got: list[tuple[object, ...]] = []

    @tool
    def order(
        lines: list[Line],
        to: Where,
        buyer: Buyer,
        speed: Speed = Speed.SLOW,
        notes: Annotated[dict[str, float], "Per-line notes"] | None = None,
        code: Annotated[str, "A coupon"] | None = None,
    ) -> str:
        """Place an order.

        Args:
            lines: The lines
            code: Overridden by Annotated
        """
        got.append((lines, to, buyer, speed, notes, code))
        return "placed"

    props = order.schema["properties"]
    assert order.schema["required"] == ["lines", "to", "buyer"]
    assert props["lines"]["description"] == "The lines" and props["code"]["description"] == "A coupon"
    assert props["notes"] == {
        "type": "object",
        "additionalProperties": {"type": "number"},
        "description": "Per-line notes",
    }
    assert props["speed"] == {"type": "string", "enum": ["slow", "fast"]}
    assert order.input["lines"] == Field(
        "array",
        "The lines",
        required=True,
        items=Field("object", properties={"sku": Field("string", required=True), "qty": Field("integer")}),
    )
    value = {
        "lines": [{"sku": "a"}, {"sku": "b", "qty": 2}],
        "to": {"city": "Porto"},
        "buyer": {"name": "Al"},
    }
    assert await run_tool(order, {**value, "speed": "fast", "notes": {"a": 1}}, cx()) == ("placed", False)
    assert await run_tool(order, value, cx()) == ("placed", False)
    assert got[0] == (
        [Line("a"), Line("b", 2)],
        {"city": "Porto"},
        Buyer(name="Al"),
        Speed.FAST,
        {"a": 1},
        None,  # optional without a default: None
    )
    assert got[1][3] is Speed.SLOW and got[1][4] is None
    problem = await run_tool(order, {**value, "lines": [{"sku": "a", "qty": "3"}]}, cx())
    assert problem == ('error: input.lines[0].qty: expected integer, got "3"', True)
    assert len(got) == 2


async def test_an_async_decorated_tool_gets_converted_values_and_its_context() -> None:
    @tool
    async def pick(speeds: list[Speed], cx: ToolContext) -> str:
        """Pick."""
        return f"{cx.call_id}: {[s.name for s in speeds]}"

    assert await run_tool(pick, {"speeds": ["fast", "slow"]}, cx()) == ("call_1: ['FAST', 'SLOW']", False)


@dataclasses.dataclass
class Odd:
    when: complex


def test_a_decorated_tool_with_a_type_it_cannot_take_names_the_parameter() -> None:
    with pytest.raises(AerixError) as info:

        @tool
        def f(ok: int, odd: list[Odd]) -> str:
            """F."""
            return ""

    assert info.value.message.startswith("tool 'f': parameter 'odd': items: field 'when' of Odd ")
    assert "has annotation complex; use str, int, float, bool" in info.value.message


# -- callables of other kinds, str subclasses, conversion paths (2026-12-03 audit) ----------------


def test_a_partial_is_a_tool_without_the_arguments_it_binds() -> None:
    import functools

    def scale(value: int, factor: int) -> str:
        """Scale a value.

        Args:
            value: The value.
        """
        return str(value * factor)

    t = tool(functools.partial(scale, factor=3))
    assert t.name == "scale" and t.description == "Scale a value."
    assert t.schema["properties"] == {"value": {"type": "integer", "description": "The value."}}
    assert t.run({"value": 2}, None) == "6"  # type: ignore[arg-type]


async def test_a_callable_object_is_a_tool_once_named() -> None:
    class Echo:
        async def __call__(self, text: str) -> str:
            """Say it back."""
            return text

    with pytest.raises(AerixError, match=r"@tool on a Echo object: it has no function name; give it one"):
        tool(Echo())
    t = tool(name="echo")(Echo())
    assert t.is_async and t.description == "Say it back." and list(t.input) == ["text"]
    assert await t.run({"text": "hi"}, None) == "hi"  # type: ignore[arg-type]


class Colour(str, enum.Enum):  # noqa: UP042  (the mixin that formats as Colour.RED)
    RED = "red"


class Shout(str):
    def __str__(self) -> str:
        return "SHOUTED"


@pytest.mark.parametrize("value", [Colour.RED, Shout("red")])
async def test_a_str_subclass_result_is_its_plain_value_for_the_event_and_the_model(value: str) -> None:
    t = tool(name="paint", description="Paint.", input={}, run=lambda i: value)
    model = ScriptedModel(['{"calls":[{"tool":"paint","input":{}}]}', '{"final":"ok"}'])
    events = [ev async for ev in Agent(model=model, tools=[t]).run("go")]
    (result,) = [ev for ev in events if ev.type == "result"]
    assert type(result.text) is str and result.text == "red"
    assert model.calls[1].messages[-1]["content"].endswith("[call_1 paint] red")


async def test_hook_strings_of_a_str_subclass_are_their_plain_values() -> None:
    t = tool(name="paint", description="Paint.", input={}, run=lambda i: "x")
    call = '{"calls":[{"tool":"paint","input":{}}]}'
    model = ScriptedModel([call, '{"final":"ok"}'])
    hooks = {"after_call": lambda c, r: {"result": Colour.RED}}
    events = [ev async for ev in Agent(model=model, tools=[t], hooks=hooks).run(Shout("go"))]
    (result,) = [ev for ev in events if ev.type == "result"]
    assert type(result.text) is str and result.text == "red"
    assert (
        model.calls[0].messages[-1]["content"] == "go" and type(model.calls[0].messages[-1]["content"]) is str
    )
    denied = ScriptedModel([call, '{"final":"ok"}'])
    hooks2 = {"before_call": lambda c: {"deny": Colour.RED}}
    events = [ev async for ev in Agent(model=denied, tools=[t], hooks=hooks2).run("go")]
    assert [ev.text for ev in events if ev.type == "result"] == ["refused: red"]


@dataclasses.dataclass
class Reading:
    value: int

    def __post_init__(self) -> None:
        if self.value < 0:
            raise ValueError("value must be >= 0")


class Item(pydantic.BaseModel):
    qty: int

    @pydantic.field_validator("qty")
    @classmethod
    def positive(cls, v: int) -> int:
        if v <= 0:
            raise ValueError("qty must be positive")
        return v


def test_a_types_own_refusal_names_its_json_path_in_one_line() -> None:
    def take(readings: list[Reading], items: dict[str, Item]) -> str:
        return "ok"

    t = tool(take)
    with pytest.raises(ValueError) as caught:
        t.run({"readings": [{"value": 1}, {"value": -1}], "items": {}}, None)  # type: ignore[arg-type]
    assert str(caught.value) == "input.readings[1]: value must be >= 0"
    with pytest.raises(ValueError) as caught:
        t.run({"readings": [], "items": {"a b": {"qty": 0}}}, None)  # type: ignore[arg-type]
    assert str(caught.value) == 'input.items["a b"].qty: Value error, qty must be positive'
    assert "\n" not in str(caught.value) and "http" not in str(caught.value)


async def test_a_refused_conversion_is_the_calls_error_result_with_its_path() -> None:
    def take(items: list[Item]) -> str:
        return "ok"

    model = ScriptedModel(
        ['{"calls":[{"tool":"take","input":{"items":[{"qty":2},{"qty":-1}]}}]}', '{"final":"x"}']
    )
    events = [ev async for ev in Agent(model=model, tools=[tool(take)]).run("go")]
    (result,) = [ev for ev in events if ev.type == "result"]
    assert result.error and result.text == "error: input.items[1].qty: Value error, qty must be positive"


def test_annotated_bounds_become_schema_keywords_and_are_checked() -> None:
    def pick(
        n: Annotated[int, at.Ge(1), "how many"],
        word: Annotated[
            str, pydantic.Field(min_length=2, max_length=5, pattern="^[a-z]+$", description="a word")
        ],
        ids: Annotated[list[int], at.Len(1, 3)],
        share: Annotated[float, at.Interval(gt=0, le=1)] | None = None,
    ) -> str:
        return "ok"

    t = tool(pick)
    props = t.schema["properties"]
    assert props["n"] == {"type": "integer", "minimum": 1, "description": "how many"}
    assert props["word"] == {
        "type": "string",
        "minLength": 2,
        "maxLength": 5,
        "pattern": "^[a-z]+$",
        "description": "a word",
    }
    assert props["ids"] == {"type": "array", "items": {"type": "integer"}, "minItems": 1, "maxItems": 3}
    assert props["share"] == {"type": "number", "exclusiveMinimum": 0, "maximum": 1}
    assert check_input(t, {"n": 0, "word": "ab", "ids": [1]}) == "input.n: expected at least 1, got 0"
    assert check_input(t, {"n": 1, "word": "ab", "ids": []}) is not None


@pytest.mark.parametrize(
    ("annotation", "message"),
    [
        (
            "Annotated[int, at.MultipleOf(2)]",
            r"Annotated metadata MultipleOf\(multiple_of=2\) is not supported",
        ),
        ("Annotated[int, pydantic.Field(default=3)]", r"Field\(default=...\) in Annotated is not supported"),
        ("Annotated[str, at.Ge(1)]", r"the bound ge=1 does not apply to a value of type string"),
        ("Annotated[int, at.Predicate(bool)]", r"Annotated metadata Predicate\(bool\) is not supported"),
        (
            "Annotated[dict[str, int], at.MinLen(1)]",
            r"the bound min_length=1 does not apply to a value of type object",
        ),
    ],
)
def test_annotated_metadata_that_says_nothing_schema_can_is_refused_naming_the_parameter(
    annotation: str, message: str
) -> None:
    hint = eval(annotation, {"Annotated": Annotated, "at": at, "pydantic": pydantic})

    def f(x: int) -> str:
        return ""

    f.__annotations__["x"] = hint
    with pytest.raises(AerixError, match=r"tool 'f': parameter 'x': " + message):
        tool(f)


async def test_a_lone_surrogate_in_a_result_reads_as_the_replacement_character() -> None:
    """A file name `os.fsdecode` could not decode: no model could read the surrogate."""
    t = tool(name="ls", description="List files.", input={}, run=lambda i: os.fsdecode(b"caf\xe9.txt"))
    model = ScriptedModel(['{"calls":[{"tool":"ls","input":{}}]}', '{"final":"ok"}'])
    events = [ev async for ev in Agent(model=model, tools=[t]).run("files?")]
    (result,) = [ev for ev in events if ev.type == "result"]
    assert result.text == "caf\ufffd.txt" and not result.error
    assert model.calls[1].messages[-1]["content"].endswith("caf\ufffd.txt")
    model.calls[1].messages[-1]["content"].encode()  # UTF-8 carries every message


def test_pydantics_constrained_types_give_their_bounds_and_leave_the_rest_to_conversion() -> None:
    """`conint`, `constr`, `confloat` carry `None`s, `Strict`, string transforms and validators
    in their metadata: the bounds become keywords, the rest is pydantic's to apply."""

    def pick(
        n: pydantic.conint(ge=1, strict=True),  # type: ignore[valid-type]
        word: pydantic.constr(strip_whitespace=True, min_length=2),  # type: ignore[valid-type]
        share: pydantic.confloat(gt=0, lt=1),  # type: ignore[valid-type]
        lower: Annotated[str, pydantic.StringConstraints(to_lower=True)],
        checked: Annotated[int, pydantic.AfterValidator(lambda v: v)],
    ) -> str:
        return "ok"

    props = tool(pick).schema["properties"]
    assert props["n"] == {"type": "integer", "minimum": 1}
    assert props["word"] == {"type": "string", "minLength": 2}
    assert props["share"] == {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1}
    assert props["lower"] == {"type": "string"} and props["checked"] == {"type": "integer"}


def even(v: int) -> int:
    if v % 2:
        raise ValueError("must be even")
    return v


@dataclasses.dataclass
class Pair:
    qty: Annotated[int, pydantic.AfterValidator(even)]


class Order(TypedDict, total=False):
    qty: Required[Annotated[int, pydantic.AfterValidator(even)]]
    code: Annotated[NotRequired[str], pydantic.StringConstraints(to_upper=True)]


def test_pydantics_validators_and_transforms_in_annotated_run_on_the_checked_value() -> None:
    """What a schema cannot say, pydantic applies where aerix converts: a parameter, a list's
    items, a dataclass's field, a TypedDict's key (under `Required`/`NotRequired` too); a
    refusal names its path."""

    def take(
        n: Annotated[int, pydantic.AfterValidator(even)],
        code: pydantic.constr(strip_whitespace=True, to_upper=True, min_length=1),  # type: ignore[valid-type]
        pair: Pair,
        items: list[Annotated[int, pydantic.AfterValidator(even)]],
        order: Order,
    ) -> str:
        return f"{n} {code} {pair.qty} {items} {order}"

    t = tool(take)
    good = {"n": 2, "code": " ab ", "pair": {"qty": 4}, "items": [6], "order": {"qty": 8, "code": "x"}}
    assert t.run(good, None) == "2 AB 4 [6] {'qty': 8, 'code': 'X'}"  # type: ignore[arg-type]
    for bad, path in (
        ({"n": 3}, "input.n"),
        ({"pair": {"qty": 5}}, "input.pair.qty"),
        ({"items": [6, 7]}, "input.items[1]"),
        ({"order": {"qty": 9}}, "input.order.qty"),
    ):
        with pytest.raises(ValueError) as caught:
            t.run({**good, **bad}, None)  # type: ignore[arg-type]
        assert str(caught.value) == f"{path}: Value error, must be even"
