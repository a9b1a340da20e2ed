"""Fault injection at each step of a LlamaCpp stream, driven through the Agent.

Each fault must end the run with exactly one `end` (`error`, or `abort` for a
stall that is aborted), leave the engine's token history equal to its KV cache,
and leave both the agent and the engine usable at once.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any

import pytest

pytest.importorskip("llama_cpp", reason="the LlamaCpp tests need aerix[llama]")

from test_llamacpp import assert_cache_consistent

from aerix import AbortController, Agent, EndEvent, TextEvent
from aerix.engines import LlamaCpp


async def run(agent: Agent, **kw: Any) -> list[Any]:
    async with asyncio.timeout(60):
        return [ev async for ev in agent.run("Say something.", **kw)]


def endings(events: list[Any]) -> list[Any]:
    return [ev for ev in events if ev.type in ("final", "end")]


def agent_on(engine: LlamaCpp) -> Agent:
    """One turn of 12 tokens, unconstrained: the tiny model's noise, the same on every run."""
    return Agent(
        model=engine, constrain=False, limits={"max_tokens": 12, "turns": 1}, generation={"temperature": 0}
    )


async def eval_phases(engine: LlamaCpp, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The phase (`prefill` or `decode`) of each `llama.eval` call of one run, in order.

    A dry run, without a fault, after which the engine forgets its cache: the
    next run is the same greedy generation from an empty cache, with the same calls.
    """
    real_eval = engine._llama.eval
    phases: list[str] = []

    def recording(tokens: list[int]) -> None:
        progress = engine.progress
        assert progress is not None, "llama.eval was called with no generation in progress"
        phases.append(progress.phase)
        real_eval(tokens)

    monkeypatch.setattr(engine._llama, "eval", recording)
    await run(agent_on(engine))
    monkeypatch.setattr(engine._llama, "eval", real_eval)
    engine.reset()
    return phases


STEPS: dict[str, Callable[[list[str]], int]] = {
    "first-prefill-chunk": lambda phases: phases.index("prefill"),
    "last-prefill-chunk": lambda phases: len(phases) - 1 - phases[::-1].index("prefill"),
    "first-generated-token": lambda phases: phases.index("decode"),
    "a-generated-token-midway": lambda phases: (phases.index("decode") + len(phases) - 1) // 2,
    "last-generated-token": lambda phases: len(phases) - 1,
}
"""Which `llama.eval` call of a run fails, as an index into the run's phases."""


# llama.eval is called once per prefill chunk (64 tokens here, and the agent's
# system message takes several) and once per generated token that is evaluated.
@pytest.mark.parametrize("step", list(STEPS))
async def test_eval_failing_at_each_step_is_one_error_ending(
    engine: LlamaCpp, monkeypatch: pytest.MonkeyPatch, step: str
) -> None:
    phases = await eval_phases(engine, monkeypatch)
    assert phases.count("prefill") >= 2 and phases.count("decode") >= 3, (
        f"the run no longer has the steps this test fails at: {phases}"
    )
    k = STEPS[step](phases) + 1
    real_eval = engine._llama.eval
    count = 0
    failed_in: list[str] = []

    def failing(tokens: list[int]) -> None:
        nonlocal count
        count += 1
        if count == k:
            progress = engine.progress
            failed_in.append("none" if progress is None else progress.phase)
            raise RuntimeError(f"llama_decode failed at step {k}")
        real_eval(tokens)

    monkeypatch.setattr(engine._llama, "eval", failing)
    agent = agent_on(engine)
    events = await run(agent)
    assert failed_in == [phases[k - 1]], f"the fault at eval {k} ({step}) was not injected: {count} evals"
    assert endings(events) == [events[-1]]
    assert events[-1] == EndEvent(reason="error", message=f"llama_decode failed at step {k}")
    if failed_in == ["prefill"]:
        assert not any(isinstance(ev, TextEvent) for ev in events)  # before the first delta
    assert agent.messages == () and not agent.busy
    assert_cache_consistent(engine)
    monkeypatch.setattr(engine._llama, "eval", real_eval)
    again = await run(agent)
    assert len(endings(again)) == 1 and again[-1].type == "end" and again[-1].reason == "turns"


async def test_a_failure_while_finishing_the_stream_is_one_error_ending(
    engine: LlamaCpp, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The done delta's step: the fault comes after every text delta was sent."""
    import aerix.engines.llamacpp.engine as module

    def broken_usage(**kw: Any) -> Any:
        raise RuntimeError("usage failed")

    monkeypatch.setattr(module, "Usage", broken_usage)
    agent = Agent(
        model=engine, constrain=False, limits={"max_tokens": 6, "turns": 1}, generation={"temperature": 0}
    )
    events = await run(agent)
    assert any(isinstance(ev, TextEvent) for ev in events)
    assert events[-1] == EndEvent(reason="error", message="usage failed")
    assert endings(events) == [events[-1]]
    assert_cache_consistent(engine)


async def test_a_decode_that_hangs_until_aborted_ends_with_abort(
    engine: LlamaCpp, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_eval = engine._llama.eval
    released = threading.Event()
    hung = threading.Event()

    def hanging(tokens: list[int]) -> None:
        progress = engine.progress
        if not hung.is_set() and progress is not None and progress.phase == "decode":
            hung.set()
            released.wait(30)  # the first generated token's decode does not return until the abort
        real_eval(tokens)

    monkeypatch.setattr(engine._llama, "eval", hanging)
    controller = AbortController()
    controller.signal.add_callback(released.set)
    agent = Agent(model=engine, constrain=False, limits={"max_tokens": 12}, generation={"temperature": 0})
    asyncio.get_running_loop().call_later(0.5, controller.abort)
    events = await run(agent, signal=controller.signal)
    assert hung.is_set(), "no generated token was ever decoded, so nothing hung"
    assert events[-1] == EndEvent(reason="abort", message="aborted")
    assert endings(events) == [events[-1]] and not agent.busy
    monkeypatch.setattr(engine._llama, "eval", real_eval)
    await asyncio.sleep(0)
    deltas = [d async for d in engine.chat([{"role": "user", "content": "hi"}], {"max_tokens": 2})]
    assert deltas[-1].done
    assert_cache_consistent(engine)
