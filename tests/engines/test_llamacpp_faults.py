"""Fault injection at each step of a LlamaCpp stream, driven through the Agent.

Each fault must end the run with exactly one `end` (`error`, or `abort` for a
stall that is aborted), leave the engine's token history equal to its KV cache,
and leave both the agent and the engine usable at once.
"""

from __future__ import annotations

import asyncio
import threading
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


# llama.eval is called once per prefill chunk and once per generated batch:
# k=1 fails the prefill (before the first delta), k=2.. fail after k-1 batches.
@pytest.mark.parametrize("k", [1, 2, 3, 5, 8])
async def test_eval_failing_at_step_k_is_one_error_ending(
    engine: LlamaCpp, monkeypatch: pytest.MonkeyPatch, k: int
) -> None:
    real_eval = engine._llama.eval
    count = 0

    def failing(tokens: list[int]) -> None:
        nonlocal count
        count += 1
        if count == k:
            raise RuntimeError(f"llama_decode failed at step {k}")
        real_eval(tokens)

    monkeypatch.setattr(engine._llama, "eval", failing)
    agent = Agent(
        model=engine, constrain=False, limits={"max_tokens": 12, "turns": 1}, generation={"temperature": 0}
    )
    events = await run(agent)
    if count < k:  # the generation ended before step k: nothing was injected
        pytest.skip(f"the generation took fewer than {k} evaluations")
    assert endings(events) == [events[-1]]
    assert events[-1] == EndEvent(reason="error", message=f"RuntimeError: llama_decode failed at step {k}")
    assert agent.messages == () and not agent.busy
    assert_cache_consistent(engine)
    monkeypatch.setattr(engine._llama, "eval", real_eval)
    again = await run(agent)
    assert len(endings(again)) == 1 and again[-1].type == "end" and again[-1].reason == "turns"


async def test_a_failure_while_finishing_the_stream_is_one_error_ending(
    engine: LlamaCpp, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The done delta's step: the fault comes after every text delta was sent."""
    import aerix.engines.llamacpp as module

    def broken_usage(**kw: Any) -> Any:
        raise RuntimeError("usage failed")

    monkeypatch.setattr(module, "Usage", broken_usage)
    agent = Agent(
        model=engine, constrain=False, limits={"max_tokens": 6, "turns": 1}, generation={"temperature": 0}
    )
    events = await run(agent)
    assert any(isinstance(ev, TextEvent) for ev in events)
    assert events[-1] == EndEvent(reason="error", message="RuntimeError: usage failed")
    assert endings(events) == [events[-1]]
    assert_cache_consistent(engine)


async def test_a_decode_that_hangs_until_aborted_ends_with_abort(
    engine: LlamaCpp, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_eval = engine._llama.eval
    released = threading.Event()
    count = 0

    def hanging(tokens: list[int]) -> None:
        nonlocal count
        count += 1
        if count == 2:  # after the prefill: the first generated batch never returns
            released.wait(30)
        real_eval(tokens)

    monkeypatch.setattr(engine._llama, "eval", hanging)
    controller = AbortController()
    controller.signal.add_callback(released.set)
    agent = Agent(model=engine, constrain=False, limits={"max_tokens": 12}, generation={"temperature": 0})
    asyncio.get_running_loop().call_later(0.5, controller.abort)
    events = await run(agent, signal=controller.signal)
    assert events[-1] == EndEvent(reason="abort", message="aborted")
    assert endings(events) == [events[-1]] and not agent.busy
    monkeypatch.setattr(engine._llama, "eval", real_eval)
    await asyncio.sleep(0)
    deltas = [d async for d in engine.chat([{"role": "user", "content": "hi"}], {"max_tokens": 2})]
    assert deltas[-1].done
    assert_cache_consistent(engine)
