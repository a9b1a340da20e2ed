"""Opening a GGUF on any CPU: the pinned internals, the AMX guard, threads, bad files, progress."""

from __future__ import annotations

import ast
import asyncio
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from aerix import AerixError
from aerix.engines import LlamaCpp
from aerix.engines.llamacpp import Progress, _llama, _open

llama_cpp = pytest.importorskip("llama_cpp")


def test_llama_cpp_python_is_a_tested_version() -> None:
    """Fails loudly on an untested llama-cpp-python: `_llama` reaches its internals."""
    assert llama_cpp.__version__ in _llama.TESTED, (
        f"llama-cpp-python {llama_cpp.__version__} is not among the versions aerix's engine was tested "
        f"with ({', '.join(_llama.TESTED)}): check aerix/engines/llamacpp/_llama.py against it "
        "(use_extra_bufts, input_ids, n_tokens), run the engine tests, then add it to TESTED"
    )


def test_the_internals_it_reaches_are_there(tiny_gguf: Path) -> None:
    params = llama_cpp.llama_model_default_params()
    assert hasattr(params, "use_extra_bufts")
    engine = LlamaCpp(tiny_gguf, n_ctx=256)
    try:
        llama = engine._llama
        assert llama.input_ids.shape[0] >= engine.n_ctx
        assert isinstance(llama.n_tokens, int)
    finally:
        engine.close()


# -- AMX -------------------------------------------------------------------------------------


def test_amx_risk_needs_an_amx_build_and_an_amx_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    info = "CPU : SSE3 = 1 | AVX512 = 1 | AMX_INT8 = 1 | REPACK = 1 |"
    monkeypatch.setattr(_llama, "_system_info", lambda: info)
    monkeypatch.setattr(_llama, "_cpuinfo", lambda: "flags\t: fpu avx512f amx_bf16 amx_tile amx_int8\n")
    assert _llama.amx_risk()
    monkeypatch.setattr(_llama, "_cpuinfo", lambda: "flags\t: fpu avx2 avx512f\n")
    assert not _llama.amx_risk()
    monkeypatch.setattr(_llama, "_cpuinfo", lambda: "")  # flags unreadable: the build decides
    assert _llama.amx_risk()
    monkeypatch.setattr(_llama, "_system_info", lambda: "CPU : SSE3 = 1 | AVX2 = 1 | REPACK = 1 |")
    assert not _llama.amx_risk()


def test_the_real_cpu_and_build_are_read() -> None:
    assert isinstance(_llama.amx_risk(), bool)
    assert _llama.cpu_name()


def test_a_cpu_with_amx_loads_without_extra_buffers(tiny_gguf: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_llama, "amx_risk", lambda: True)
    engine = LlamaCpp(tiny_gguf, n_ctx=256)
    try:
        assert not _llama.uses_extra_buffers(engine._llama)
    finally:
        engine.close()
    # Nothing else is changed: the next Llama gets llama.cpp's defaults again.
    assert llama_cpp.llama_model_default_params().use_extra_bufts


def test_other_cpus_keep_the_extra_buffers(tiny_gguf: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_llama, "amx_risk", lambda: False)
    engine = LlamaCpp(tiny_gguf, n_ctx=256)
    try:
        assert _llama.uses_extra_buffers(engine._llama)  # repacked weights where they are safe
    finally:
        engine.close()


def test_amx_true_on_an_amx_cpu_is_guarded_by_a_first_decode(
    tiny_gguf: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_llama, "amx_risk", lambda: True)
    monkeypatch.setattr(_open, "_GUARDED", {})
    probes: list[Path] = []

    def probe(path: Path, threads: int) -> None:
        probes.append(path)

    monkeypatch.setattr(_llama, "probe_decode", probe)
    for _ in range(2):
        engine = LlamaCpp(tiny_gguf, n_ctx=256, amx=True)
        try:
            assert _llama.uses_extra_buffers(engine._llama)
        finally:
            engine.close()
    assert probes == [tiny_gguf]  # once per file and process


def test_a_crashing_amx_path_is_a_clear_error(tiny_gguf: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_llama, "amx_risk", lambda: True)
    monkeypatch.setattr(_llama, "cpu_name", lambda: "Intel(R) Xeon(R) Platinum 8481C")
    monkeypatch.setattr(_open, "_GUARDED", {})
    monkeypatch.setattr(_llama, "probe_decode", lambda path, threads: "SIGSEGV")
    with pytest.raises(AerixError, match="AMX") as info:
        LlamaCpp(tiny_gguf, n_ctx=256, amx=True)
    message = str(info.value)
    assert info.value.kind == "options"
    assert "Platinum 8481C" in message and "SIGSEGV" in message and "amx=False" in message
    assert str(tiny_gguf) in message


def test_the_probe_reports_a_native_crash(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The child process really runs; one that dies on a signal is named by the signal."""
    assert _llama.probe_decode(Path(sys.argv[0]), 1, timeout=60) is not None  # not a GGUF: exit 1
    crash = "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)"
    monkeypatch.setattr(_llama, "_PROBE", crash)
    assert _llama.probe_decode(tmp_path / "x.gguf", 1, timeout=60) == "SIGSEGV"
    monkeypatch.setattr(_llama, "_PROBE", "pass")
    assert _llama.probe_decode(tmp_path / "x.gguf", 1, timeout=60) is None


def test_the_probe_decodes_a_real_gguf(tiny_gguf: Path) -> None:
    assert _llama.probe_decode(tiny_gguf, 1, timeout=120) is None


def test_amx_must_be_a_bool(tiny_gguf: Path) -> None:
    with pytest.raises(AerixError, match=re.escape("amx must be True or False, got 'yes'")):
        LlamaCpp(tiny_gguf, amx="yes")  # type: ignore[arg-type]


# -- threads ---------------------------------------------------------------------------------


def test_default_threads_are_half_the_usable_cpus(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_open.os, "sched_getaffinity", lambda pid: set(range(16)), raising=False)
    assert _open.default_threads() == 8
    monkeypatch.setattr(_open.os, "sched_getaffinity", lambda pid: {0}, raising=False)
    assert _open.default_threads() == 1


def test_the_default_threads_are_used_for_prefill_too(tiny_gguf: Path) -> None:
    engine = LlamaCpp(tiny_gguf, n_ctx=256)
    try:
        expected = _open.default_threads()
        assert engine._llama.n_threads == expected
        assert engine._llama.n_threads_batch == expected  # llama-cpp-python's own: every CPU
    finally:
        engine.close()


@pytest.mark.parametrize("bad", [0, -2, 1.5, True, "4"])
def test_bad_thread_counts_are_refused(tiny_gguf: Path, bad: object) -> None:
    with pytest.raises(AerixError, match="n_threads must be a whole number, 1 or more"):
        LlamaCpp(tiny_gguf, n_threads=bad)  # type: ignore[arg-type]
    with pytest.raises(AerixError, match="n_threads_batch must be a whole number, 1 or more"):
        LlamaCpp(tiny_gguf, n_threads_batch=bad)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"n_ctx": -5},
            "n_ctx must be a whole number from 0 to 2147483647 (0: the model's training length), got -5",
        ),
        (
            {"n_ctx": "x"},
            "n_ctx must be a whole number from 0 to 2147483647 (0: the model's training length), got 'x'",
        ),
        ({"n_batch": 0}, "n_batch must be a whole number from 1 to 2147483647, got 0"),
        ({"n_batch": 8.0}, "n_batch must be a whole number from 1 to 2147483647, got 8.0"),
        ({"prefill_chunk": "a"}, "prefill_chunk must be a whole number from 1 to 2147483647, got 'a'"),
        ({"prefill_chunk": 0}, "prefill_chunk must be a whole number from 1 to 2147483647, got 0"),
        # llama.cpp keeps it in 32 bits: 2**32 would wrap around to 0, the training length
        (
            {"n_ctx": 2**32},
            "n_ctx must be a whole number from 0 to 2147483647 (0: the model's training length), got 4294967296",
        ),
    ],
)
def test_bad_sizes_are_refused_naming_the_option(
    tiny_gguf: Path, kwargs: dict[str, Any], message: str
) -> None:
    with pytest.raises(AerixError) as info:  # not llama.cpp's "could not load" (a healthy file)
        LlamaCpp(tiny_gguf, **kwargs)
    assert info.value.kind == "options" and info.value.message == message


# -- bad files -------------------------------------------------------------------------------


_INTERNALS = {
    "input_ids",
    "n_tokens",
    "model_params",
    "context_params",
    "use_extra_bufts",
    "llama_chat_format",
    "Jinja2ChatFormatter",
    "llama_model_default_params",
}
"""What llama-cpp-python keeps below its public API: `Llama`'s token record and load parameters,
its chat formatter, the defaults it loads with."""


def test_only_the_llama_module_reaches_llama_cpp_pythons_internals() -> None:
    """`_llama` pins the internals to `TESTED`: a read or write of one elsewhere would escape that."""
    package = Path(_llama.__file__).parent
    found = []
    for path in sorted(package.rglob("*.py")):
        if path == Path(_llama.__file__):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            name = node.attr if isinstance(node, ast.Attribute) else None
            if isinstance(node, ast.ImportFrom | ast.Import):
                name = next((a.name for a in node.names if a.name.split(".")[-1] in _INTERNALS), None)
            if name in _INTERNALS and not (
                name == "n_tokens" and isinstance(node, ast.Attribute) and _is_cache(node.value)
            ):
                found.append(f"{path.relative_to(package)}:{node.lineno} {name}")
    assert found == []


def _is_cache(node: ast.expr) -> bool:
    """`cache.n_tokens` or `self._cache.n_tokens`: the KV cache's own count (`KvCache.n_tokens`)."""
    last = node.attr if isinstance(node, ast.Attribute) else getattr(node, "id", "")
    return last in ("cache", "_cache", "self")


def _closes(monkeypatch: pytest.MonkeyPatch) -> Callable[[], bool]:
    """A check that every `Llama` the engine opened from now on was closed."""
    opened: list[Any] = []
    closed: list[Any] = []
    real_open, real_close = _llama.open_llama, llama_cpp.Llama.close

    def open_llama(*args: Any, **kwargs: Any) -> Any:
        opened.append(real_open(*args, **kwargs))
        return opened[-1]

    def close(self: Any) -> None:
        closed.append(self)
        real_close(self)

    monkeypatch.setattr(_llama, "open_llama", open_llama)
    monkeypatch.setattr(llama_cpp.Llama, "close", close)
    return lambda: len(opened) == 1 and any(c is opened[0] for c in closed)


def test_a_file_that_is_not_a_gguf_names_what_it_is(tmp_path: Path) -> None:
    junk = tmp_path / "model.gguf"
    junk.write_bytes(b"PK\x03\x04 a zip file")
    with pytest.raises(ValueError, match=r"is not a GGUF file \(it starts with b'PK\\x03\\x04'") as info:
        LlamaCpp(junk)
    assert str(junk) in str(info.value)


def test_a_truncated_gguf_names_the_file_and_the_fix(tiny_gguf: Path, tmp_path: Path) -> None:
    cut = tmp_path / "cut.gguf"
    data = tiny_gguf.read_bytes()
    cut.write_bytes(data[: len(data) // 2])
    with pytest.raises(ValueError, match="truncated or damaged") as info:
        LlamaCpp(cut)
    assert str(cut) in str(info.value) and "again" in str(info.value)


def test_a_gguf_without_a_template_is_refused_and_closed(
    make_gguf: Callable[..., Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = make_gguf(chat_template=None)
    closed = _closes(monkeypatch)
    with pytest.raises(ValueError, match=re.escape("chat_template=")) as info:
        LlamaCpp(path)
    assert str(path) in str(info.value) and "no chat template" in str(info.value)
    assert closed()  # nothing left half-loaded


def test_a_template_that_does_not_compile_is_refused_and_closed(
    tiny_gguf: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    closed = _closes(monkeypatch)
    with pytest.raises(ValueError, match="does not compile") as info:
        LlamaCpp(tiny_gguf, chat_template="{% for m in messages %}")
    assert "the chat_template given for" in str(info.value) and "line 1" in str(info.value)
    assert closed()


async def test_a_template_that_raises_names_the_file(make_gguf: Callable[..., Path]) -> None:
    path = make_gguf(chat_template="{{ raise_exception('Conversation roles must alternate') }}")
    engine = LlamaCpp(path, n_ctx=256)
    try:
        with pytest.raises(ValueError, match="Conversation roles must alternate") as info:
            async for _ in engine.chat([{"role": "user", "content": "hi"}], {"max_tokens": 2}):
                pass
        assert str(path) in str(info.value) and "chat_template=" in str(info.value)
    finally:
        engine.close()


# -- progress --------------------------------------------------------------------------------


async def test_progress_tells_the_phase_and_the_tokens(tiny_gguf: Path) -> None:
    engine = LlamaCpp(tiny_gguf, n_ctx=1024, prefill_chunk=8)
    seen: list[Progress] = []
    try:
        assert engine.progress is None
        real = engine._cache.eval_prompt

        def slow(tokens: Any, *rest: Any) -> None:  # read progress from the loop while the worker prefills
            real(tokens, *rest)
            if (p := engine.progress) is not None:
                seen.append(p)

        engine._cache.eval_prompt = slow  # type: ignore[method-assign]
        messages = [{"role": "user", "content": "a long enough prompt " * 8}]
        async for delta in engine.chat(messages, {"max_tokens": 3, "temperature": 0}):  # type: ignore[arg-type]
            if not delta.done and (p := engine.progress) is not None:
                seen.append(p)
        await asyncio.sleep(0)
        assert engine.progress is None
    finally:
        engine.close()
    prefill = [p for p in seen if p.phase == "prefill"]
    # Read inside each chunk's evaluation: the chunks before it are counted.
    assert [p.prefilled_tokens for p in prefill[:3]] == [0, 8, 16]
    assert [p.prefilled_tokens for p in prefill] == sorted(p.prefilled_tokens for p in prefill)
    assert all(p.prompt_tokens == prefill[0].prompt_tokens > 8 for p in prefill)
    assert all(p.seconds >= 0 for p in seen)
