"""The threads of each prefill, chosen from the CPUs idle at that moment (`_idle`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("llama_cpp", reason="the LlamaCpp tests need aerix[llama]")

from aerix.engines import LlamaCpp
from aerix.engines.llamacpp import _idle, _llama, _open
from aerix.engines.llamacpp._idle import FRESH, WINDOW, PrefillThreads, Reading, idle_cpus, read_cpus
from aerix.model import ChatMessage


class Kernel:
    """A machine of `cpus` CPUs whose counters move as a test says (`pass_time`)."""

    def __init__(self, cpus: int = 2) -> None:
        self.cpus = cpus
        self.wall = self.idle = self.own = 0.0
        self.reads = 0
        self.slept: list[float] = []
        self.busy = 0.0
        """How many CPUs other processes keep busy."""
        self.ours = 0.0
        """How many CPUs this process keeps busy."""

    def pass_time(self, seconds: float) -> None:
        self.wall += seconds
        self.own += self.ours * seconds
        self.idle += max(0.0, self.cpus - self.busy - self.ours) * seconds

    def read(self) -> Reading:
        self.reads += 1
        return Reading(wall=self.wall, idle=self.idle, own=self.own)

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.pass_time(seconds)


class FakeLlama:
    """What `PrefillThreads` asks of a `Llama`: its threads, through `_llama`."""

    def __init__(self) -> None:
        self.threads = (1, 1)


@pytest.fixture
def kernel(monkeypatch: pytest.MonkeyPatch) -> Kernel:
    machine = Kernel()
    monkeypatch.setattr(_idle, "usable_cpus", lambda: machine.cpus)
    monkeypatch.setattr(_llama, "threads", lambda llama: llama.threads)
    monkeypatch.setattr(_llama, "set_threads", lambda llama, n, batch: setattr(llama, "threads", (n, batch)))
    return machine


def chooser(kernel: Kernel, prefill: int | None = None) -> tuple[PrefillThreads, FakeLlama]:
    llama = FakeLlama()
    return PrefillThreads(llama, 1, prefill, read=kernel.read, sleep=kernel.sleep), llama


def test_a_quiet_machine_prefills_on_every_cpu(kernel: Kernel) -> None:
    threads, llama = chooser(kernel)
    kernel.pass_time(0.2)
    assert threads.choose() == 2 and llama.threads == (1, 2)  # decoding keeps its own
    assert kernel.slept == []  # the window since the load was long enough


def test_a_busy_cpu_is_left_alone(kernel: Kernel) -> None:
    threads, llama = chooser(kernel)
    kernel.busy = 1
    kernel.pass_time(0.2)
    assert threads.choose() == 1 and llama.threads == (1, 1)
    kernel.busy = 2
    kernel.pass_time(0.2)
    assert threads.choose() == 1  # never fewer than one
    kernel.busy = 0.2  # a CPU idle 80% of the time counts as idle
    kernel.pass_time(0.2)
    assert threads.choose() == 2
    kernel.busy = 0.3
    kernel.pass_time(0.2)
    assert threads.choose() == 1


def test_the_engines_own_work_counts_as_idle(kernel: Kernel) -> None:
    threads, _ = chooser(kernel)
    kernel.ours = 2  # the previous generation, on both CPUs
    kernel.pass_time(0.5)
    assert threads.choose() == 2
    kernel.ours, kernel.busy = 1, 1
    kernel.pass_time(0.5)
    assert threads.choose() == 1


def test_a_first_prefill_right_after_the_load_waits_for_a_window(kernel: Kernel) -> None:
    threads, _ = chooser(kernel)
    kernel.busy = 1
    kernel.pass_time(0.01)
    assert threads.choose() == 1
    assert kernel.slept == [pytest.approx(WINDOW - 0.01)]


def test_prefills_in_quick_succession_keep_the_last_choice(kernel: Kernel) -> None:
    threads, _ = chooser(kernel)
    kernel.pass_time(0.2)
    assert threads.choose() == 2
    kernel.busy = 1
    kernel.pass_time(WINDOW / 2)
    assert threads.choose() == 2 and kernel.slept == []  # no news yet
    kernel.pass_time(WINDOW)
    assert threads.choose() == 1  # the window since the last choice, grown on


def test_an_old_reading_is_replaced_by_a_fresh_sample(kernel: Kernel) -> None:
    threads, _ = chooser(kernel)
    kernel.busy = 2
    kernel.pass_time(FRESH * 10)  # long busy, then quiet
    kernel.busy = 0
    assert threads.choose() == 2
    assert kernel.slept == [WINDOW]


def test_the_users_threads_win(kernel: Kernel) -> None:
    threads, llama = chooser(kernel, prefill=3)
    kernel.busy = 2
    kernel.pass_time(1)
    assert threads.choose() == 3 and kernel.reads == 0 and llama.threads == (1, 1)


def test_without_the_kernels_counters_the_default_is_taken(
    kernel: Kernel, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_idle, "default_threads", lambda: 7)
    llama = FakeLlama()
    threads = PrefillThreads(llama, 1, None, read=lambda: None, sleep=kernel.sleep)
    assert threads.choose() == 7 and llama.threads == (1, 7) and kernel.slept == []


def test_idle_cpus_are_at_most_those_this_process_may_use(kernel: Kernel) -> None:
    a, b = Reading(wall=0, idle=0, own=0), Reading(wall=1, idle=3.5, own=0.5)
    assert idle_cpus(a, b) == 2
    assert idle_cpus(a, Reading(wall=0, idle=1, own=0)) == 0  # no time passed: nothing known


def test_the_kernels_counters_are_read_for_the_cpus_this_process_may_use(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stat = tmp_path / "stat"
    stat.write_text(
        "cpu  900 0 90 9000 100 0 0 0 0 0\n"
        "cpu0 400 0 40 4000 50 0 0 0 0 0\n"
        "cpu1 500 0 50 5000 50 0 0 0 0 0\n"
        "intr 1 2 3\n"
    )
    monkeypatch.setattr(_idle.os, "sched_getaffinity", lambda pid: {1}, raising=False)
    monkeypatch.setattr(_idle.os, "sysconf", lambda name: 100)
    reading = read_cpus(str(stat))
    assert reading is not None and reading.idle == pytest.approx(50.5)  # cpu1's idle and iowait
    assert read_cpus(str(tmp_path / "missing")) is None


def test_this_machines_counters_are_read() -> None:
    reading = read_cpus()
    if reading is None:
        pytest.skip("no /proc/stat here")
    assert reading.idle >= 0 and reading.own > 0


# -- on the engine ---------------------------------------------------------------------------


def engine_choosing(gguf: Path, monkeypatch: pytest.MonkeyPatch, *threads: int) -> LlamaCpp:
    """An engine whose choices of prefill threads are `threads`, in turn."""
    engine = LlamaCpp(gguf, n_ctx=256)
    chosen = iter(threads)
    monkeypatch.setattr(engine._threads, "choose", lambda: engine._threads._set(next(chosen)))
    return engine


async def generate(engine: LlamaCpp) -> None:
    messages: list[ChatMessage] = [{"role": "user", "content": "threads"}]
    async for _ in engine.chat(messages, {"max_tokens": 2}):
        pass


@pytest.mark.parametrize(
    ("options", "decode", "prefill"),
    [
        ({"n_threads": 1}, 1, 1),
        ({"n_threads": 1, "n_threads_batch": 2}, 1, 2),
        ({"n_threads_batch": 2}, None, 2),
    ],
)
async def test_threads_the_user_gives_stay(
    tiny_gguf: Path, options: dict[str, Any], decode: int | None, prefill: int
) -> None:
    engine = LlamaCpp(tiny_gguf, n_ctx=256, **options)
    try:
        await generate(engine)
        assert _llama.threads(engine._llama) == (decode or _open.default_threads(), prefill)
    finally:
        engine.close()


async def test_each_prefill_takes_the_threads_chosen_for_it(
    tiny_gguf: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = engine_choosing(tiny_gguf, monkeypatch, 2, 1)
    try:
        await generate(engine)
        assert _llama.threads(engine._llama) == (_open.default_threads(), 2)
        await generate(engine)
        assert _llama.threads(engine._llama) == (_open.default_threads(), 1)
    finally:
        engine.close()


async def test_by_default_a_prefill_takes_the_idle_cpus(tiny_gguf: Path) -> None:
    engine = LlamaCpp(tiny_gguf, n_ctx=256)
    try:
        await generate(engine)
        threads = _llama.threads(engine._llama)
        assert threads[0] == _open.default_threads()
        assert threads[1] == engine._threads.threads and 1 <= threads[1] <= _open.usable_cpus()
    finally:
        engine.close()


async def test_a_tool_fit_score_takes_the_threads_chosen_for_it(
    tiny_gguf: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import llama_cpp

    engine = engine_choosing(tiny_gguf, monkeypatch, 2, 1)
    try:
        await engine.fit_score("hello there", ["greet(name): Say hello."])
        assert engine._fit is not None
        scoring = engine._fit._ctx._ctx
        assert llama_cpp.llama_n_threads_batch(scoring) == 2
        await engine.fit_score("hello again", ["greet(name): Say hello."])
        assert llama_cpp.llama_n_threads_batch(scoring) == 1
        assert llama_cpp.llama_n_threads(scoring) == _open.default_threads()  # one token's stay
    finally:
        engine.close()
