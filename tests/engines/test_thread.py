"""The one llama.cpp thread that every `LlamaCpp` engine of a process shares (`_thread`)."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest

pytest.importorskip("llama_cpp", reason="the LlamaCpp tests need aerix[llama]")

from aerix.engines import LlamaCpp
from aerix.engines.llamacpp._thread import Lane


def test_every_lane_runs_on_one_thread() -> None:
    a, b = Lane(), Lane()
    try:
        ids = {lane.submit(threading.get_ident).result() for lane in (a, b, a)}
        assert len(ids) == 1 and ids != {threading.get_ident()}
    finally:
        a.shutdown()
        b.shutdown()


def test_shutting_a_lane_down_cancels_its_queued_work_and_waits_for_its_running_work() -> None:
    a, b = Lane(), Lane()
    started, release = threading.Event(), threading.Event()
    ran: list[str] = []

    def hold() -> None:
        started.set()
        release.wait(10)
        ran.append("a running")

    running = a.submit(hold)
    assert started.wait(10)
    queued_a = a.submit(ran.append, "a queued")
    queued_b = b.submit(ran.append, "b queued")
    returned: list[bool] = []  # whether the running work had finished when shutdown() returned
    closer = threading.Thread(target=lambda: (a.shutdown(), returned.append(running.done())))
    closer.start()
    for _ in range(1000):  # shutdown() cancels the queued work before it waits
        if queued_a.cancelled():
            break
        threading.Event().wait(0.01)
    assert queued_a.cancelled()
    release.set()
    closer.join(10)
    assert returned == [True] and not running.cancelled()
    queued_b.result(10)  # the other lane's work is neither cancelled nor lost
    assert ran == ["a running", "b queued"]
    with pytest.raises(RuntimeError, match="closed"):
        a.submit(ran.append, "late")
    a.shutdown()  # again: nothing to do
    b.shutdown()


def test_shutting_a_lane_down_from_the_shared_thread_does_not_wait_for_itself() -> None:
    lane = Lane()
    assert lane.submit(lambda: lane.shutdown() or "no deadlock").result(10) == "no deadlock"
    with pytest.raises(RuntimeError, match="closed"):
        lane.submit(lambda: None)


async def test_closing_the_engine_mid_generation_fails_that_stream(tiny_gguf: Path) -> None:
    # Cut short by `close()`, a generation is an engine failure, not a turn that stopped:
    # an agent must not read it as a bad turn and ask again.
    engine = LlamaCpp(tiny_gguf, n_ctx=2048, n_threads=1)
    stream = engine.chat([{"role": "user", "content": "hi"}], {"max_tokens": 1900, "temperature": 0})
    try:
        first = await asyncio.wait_for(anext(stream), 10)  # type: ignore[arg-type]
        assert not first.done
        await asyncio.to_thread(engine.close)
        with pytest.raises(RuntimeError, match="closed during the generation"):
            async with asyncio.timeout(10):
                async for delta in stream:
                    assert not delta.done, "a closed engine's generation must not end as a turn"
    finally:
        engine.close()


async def test_two_engines_share_the_thread_and_closing_one_leaves_the_other(tiny_gguf: Path) -> None:
    first = LlamaCpp(tiny_gguf, n_ctx=512, n_threads=1)
    second = LlamaCpp(tiny_gguf, n_ctx=512, n_threads=1)
    try:
        ids = {await asyncio.wrap_future(e._worker.submit(threading.get_ident)) for e in (first, second)}
        assert len(ids) == 1
        # A generation of `second` waits behind one of `first`; closing `second` then ends
        # its stream with an error instead of leaving it waiting for ever.
        release = threading.Event()
        first._worker.submit(release.wait, 10)
        stream = second.chat([{"role": "user", "content": "hi"}], {"max_tokens": 2})
        pending = asyncio.ensure_future(anext(stream))  # type: ignore[arg-type]
        await asyncio.sleep(0.05)
        assert not pending.done()
        second.close()
        with pytest.raises(RuntimeError, match="closed before the generation started"):
            await asyncio.wait_for(pending, 10)
        release.set()
        deltas = [d async for d in first.chat([{"role": "user", "content": "hi"}], {"max_tokens": 2})]
        assert deltas[-1].done and deltas[-1].usage is not None
    finally:
        first.close()
        second.close()
