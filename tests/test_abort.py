"""AbortController / AbortSignal: thread-safe, awaitable, callbacks."""

from __future__ import annotations

import asyncio
import gc
import threading
import weakref

import pytest

from aerix import AbortController, AbortSignal
from aerix._guard import Aborted, Guard


def test_abort_once_with_reason() -> None:
    c = AbortController()
    assert not c.signal.aborted and c.signal.reason is None
    c.abort("first")
    c.abort("second")
    assert c.signal.aborted and c.signal.reason == "first"


def test_an_abort_seen_by_the_signal_is_seen_by_a_guard_at_once() -> None:
    # the guard reads the signal itself, not a flag of its own callback's (callbacks run after)
    async def main() -> None:
        c = AbortController()
        guards: list[Guard] = []
        seen: list[bool] = []

        def early() -> None:  # registered first: runs before the guard's own callback
            try:
                guards[0].arm()
                seen.append(False)
            except Aborted:
                seen.append(True)

        c.signal.add_callback(early)
        guards.append(Guard(c.signal))
        c.abort()
        assert seen == [True]
        guards[0].close()

    asyncio.run(main())


def test_default_reason() -> None:
    c = AbortController()
    c.abort()
    assert c.signal.reason == "aborted"


def test_callbacks_run_once_and_can_be_removed() -> None:
    c = AbortController()
    calls: list[str] = []
    c.signal.add_callback(lambda: calls.append("a"))
    remove = c.signal.add_callback(lambda: calls.append("b"))
    remove()
    remove()
    c.abort()
    c.abort()
    c.signal.add_callback(lambda: calls.append("late"))  # already aborted: at once
    assert calls == ["a", "late"]


def test_a_removed_callback_is_forgotten_so_its_owner_dies_by_refcount() -> None:
    class Owner:
        """Registers its own method and keeps the remover, as a run's guard does."""

        def __init__(self, signal: AbortSignal) -> None:
            self.remove = signal.add_callback(self.on_abort)

        def on_abort(self) -> None:
            raise AssertionError("not aborted")

    c = AbortController()
    owner = Owner(c.signal)
    ref = weakref.ref(owner)
    owner.remove()
    gc.disable()  # no cycle may be left for the collector
    try:
        del owner
        assert ref() is None
    finally:
        gc.enable()


async def test_await_the_signal_from_another_thread() -> None:
    c = AbortController()
    threading.Timer(0.01, c.abort).start()
    await asyncio.wait_for(c.signal.wait(), 2)
    await asyncio.wait_for(c.signal, 1)  # awaitable directly, at once when aborted
    assert c.signal.aborted


async def test_a_cancelled_wait_leaves_no_callback_behind() -> None:
    c = AbortController()
    task = asyncio.create_task(c.signal.wait())
    await asyncio.sleep(0)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert c.signal._callbacks == []


def test_follow_links_controllers() -> None:
    parent, child = AbortController(), AbortController()
    stop = child.follow(parent.signal)
    parent.abort("up")
    assert child.signal.aborted and child.signal.reason == "up"
    other = AbortController()
    stop = other.follow(AbortController().signal)
    stop()
    assert child.follow(None)() is None


def test_concurrent_aborts_fire_callbacks_once() -> None:
    c = AbortController()
    hits: list[int] = []
    lock = threading.Lock()

    def hit() -> None:
        with lock:
            hits.append(1)

    for _ in range(50):
        c.signal.add_callback(hit)
    threads = [threading.Thread(target=c.abort) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(hits) == 50


# -- the run's guard (`aerix._guard`): an abort cancels the await in progress, never the consumer


async def test_the_guard_cancels_an_armed_await_and_owns_that_cancellation() -> None:
    controller = AbortController()
    guard = Guard(controller.signal)
    owned: list[bool] = []

    async def armed_wait() -> None:
        guard.arm()
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            owned.append(guard.owns_cancel())
            raise

    task = asyncio.create_task(armed_wait())
    await asyncio.sleep(0)
    controller.abort()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, 5)
    assert owned == [True] and task.cancelling() == 0  # undone: the run turns it into end(abort)
    guard.close()


async def test_a_disarmed_guard_cancels_nothing_and_an_abort_is_seen_at_the_next_arm() -> None:
    controller = AbortController()
    guard = Guard(controller.signal)
    guard.arm()
    guard.disarm()  # the consumer has an event
    controller.abort()
    await asyncio.sleep(0.01)  # the consumer's own await: not cancelled
    assert asyncio.current_task().cancelling() == 0  # type: ignore[union-attr]
    with pytest.raises(Aborted):
        guard.arm()
    guard.close()
    assert controller.signal._callbacks == []


async def test_a_closed_guard_leaves_no_callback_on_a_long_lived_signal() -> None:
    shared = AbortController()  # e.g. an app's shutdown switch, followed by many runs
    for _ in range(3):
        Guard(shared.signal).close()
    assert shared.signal._callbacks == []


def test_a_callback_that_raises_is_logged_and_the_others_still_run(caplog: pytest.LogCaptureFixture) -> None:
    c = AbortController()
    calls: list[str] = []

    def broken() -> None:
        raise RuntimeError("logger broke")

    c.signal.add_callback(broken)
    c.signal.add_callback(lambda: calls.append("after"))
    with caplog.at_level("ERROR", logger="aerix"):
        c.abort("stop")  # does not raise
    assert calls == ["after"] and c.signal.aborted
    assert "an abort callback" in caplog.text and "logger broke" in caplog.text
    caplog.clear()
    with caplog.at_level("ERROR", logger="aerix"):
        c.signal.add_callback(broken)  # already aborted: called at once, and logged the same way
    assert "logger broke" in caplog.text


async def test_a_run_still_ends_when_an_earlier_callback_on_its_signal_raises() -> None:
    from aerix import Agent
    from aerix.testing import ScriptedModel, Stall

    c = AbortController()
    c.signal.add_callback(lambda: 1 / 0)  # the application's, registered before the run's own
    agent = Agent(model=ScriptedModel([Stall(text='{"final":"')]))
    events = []
    async for ev in agent.run("q", signal=c.signal):
        events.append(ev)
        if ev.type == "text":
            c.abort("user pressed stop")
    assert events[-1].type == "end" and events[-1].reason == "abort"
    assert not agent.busy


def test_a_ctrl_c_from_a_callback_is_raised_again_after_the_others_ran(
    caplog: pytest.LogCaptureFixture,
) -> None:
    c = AbortController()
    calls: list[str] = []

    def cancelled() -> None:
        raise asyncio.CancelledError  # a cancelled future's result: logged like any failure

    def interrupted() -> None:
        raise KeyboardInterrupt

    c.signal.add_callback(cancelled)
    c.signal.add_callback(interrupted)
    c.signal.add_callback(lambda: calls.append("after"))
    with caplog.at_level("ERROR", logger="aerix"), pytest.raises(KeyboardInterrupt):
        c.abort()
    assert calls == ["after"] and c.signal.aborted
    assert "CancelledError" in caplog.text
