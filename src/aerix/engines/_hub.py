"""GGUF models from the Hugging Face Hub: `hf:OWNER/REPO`, `hf:OWNER/REPO:QUANT`, `hf:OWNER/REPO/FILE.gguf`.

A reference names a repo and which of its GGUF files to load. The file is
chosen as llama.cpp's `-hf` chooses it: a named file as it is (any letter
case); a `QUANT` as the first model file whose name holds it (`…-Q8_0.gguf`,
`….q8_0.gguf`); without either, the `Q4_K_M` file, else the `Q8_0` one, else
the first model file. Projector and importance-matrix files (`mmproj`,
`imatrix`) are never a model; a model split in parts (`…-00001-of-00003.gguf`)
is fetched whole and loaded from its first part.

Files live in the Hub's cache, shared with every tool that uses
`huggingface_hub`: a file found there under the repo's `main` is loaded with
no request at all; otherwise the repo's file list is asked for and the file
downloaded with `huggingface_hub` (a progress bar on stderr when it is a
terminal). The settings are read from the environment at each call, not when
`huggingface_hub` is imported, so that a program may set them late:
`HF_ENDPOINT`, `HF_HUB_OFFLINE`, `HF_HUB_CACHE` or `HF_HOME`; `HF_TOKEN` is
read by `huggingface_hub` on each request.
"""

from __future__ import annotations

import functools
import os
import re
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import AerixError

__all__ = ["SHORT_NAMES", "CachedFile", "HubRef", "cached_files", "cached_path", "hub_path", "parse_ref"]

SHORT_NAMES: dict[str, str] = {
    "qwen2.5-0.5b": "hf:Qwen/Qwen2.5-0.5B-Instruct-GGUF:Q4_K_M",
    "qwen2.5-1.5b": "hf:Qwen/Qwen2.5-1.5B-Instruct-GGUF:Q4_K_M",
    "qwen3-1.7b": "hf:ggml-org/Qwen3-1.7B-GGUF:Q4_K_M",
    "llama3.2-1b": "hf:bartowski/Llama-3.2-1B-Instruct-GGUF:Q4_K_M",
    "llama3.2-3b": "hf:bartowski/Llama-3.2-3B-Instruct-GGUF:Q4_K_M",
    "gemma3-1b": "hf:ggml-org/gemma-3-1b-it-GGUF:Q4_K_M",
    "smollm2-1.7b": "hf:HuggingFaceTB/SmolLM2-1.7B-Instruct-GGUF:Q4_K_M",
}
"""Short name → the `hf:` reference it stands for: instruct models trained for tool use,
fetched from the Hub on first use (docs/models.md has their sizes and licences)."""

DEFAULT_QUANTS = ("Q4_K_M", "Q8_0")
"""What a reference without a quant or file loads, in order (then the first model file)."""

FORMS = "hf:OWNER/REPO, hf:OWNER/REPO:QUANT (Q4_K_M, Q8_0, …) or hf:OWNER/REPO/FILE.gguf"
"""The reference's three forms, as the errors name them."""

_NAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9_])?")
"""An owner's or a repo's name as the Hub allows it."""
_QUANT = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*")
_SPLIT = re.compile(r"^(?P<prefix>.+)-(?P<index>\d{5})-of-(?P<count>\d{5})$", re.IGNORECASE)
_TAG = re.compile(r"[-.](?P<tag>[A-Za-z0-9_]+)$")
_NOT_MODELS = ("mmproj", "imatrix")
_TRUE = {"1", "ON", "YES", "TRUE"}


@dataclass(frozen=True, slots=True)
class HubRef:
    """A GGUF on the Hub: a repo, and a quant or a file of it (or neither: the default)."""

    repo: str
    quant: str | None = None
    file: str | None = None

    def __str__(self) -> str:
        if self.file is not None:
            return f"hf:{self.repo}/{self.file}"
        return f"hf:{self.repo}:{self.quant}" if self.quant else f"hf:{self.repo}"

    @property
    def sought(self) -> str:
        """What the reference looks for, in words (after "no" or "the")."""
        if self.file is not None:
            return f"file {self.file}"
        if self.quant is not None:
            return f"{self.quant.upper()} file"
        return "GGUF file (Q4_K_M, else Q8_0, else the first)"


@dataclass(frozen=True, slots=True)
class CachedFile:
    """A model GGUF in the Hub's cache, under its repo's `main`."""

    ref: HubRef
    """The reference that names exactly this file."""
    path: Path
    """The file (its first part, for a split model)."""
    size: int
    """Bytes on disk, every part together."""


def parse_ref(text: str) -> HubRef:
    """The repo and the quant or file that an `hf:` reference names.

    Raises:
        AerixError: kind `"options"`, naming what is wrong with the reference.
    """

    def bad(why: str) -> AerixError:
        return AerixError("options", f"{text!r} is no Hugging Face reference ({why}): write {FORMS}")

    body = text.removeprefix("hf:")
    if body.startswith("//"):
        raise bad("no // after hf:")
    owner, _, rest = body.partition("/")
    name, colon, quant = rest.partition(":")
    name, slash, file = name.partition("/")
    if not owner or not rest:
        raise bad("it needs OWNER/REPO")
    for part, what in ((owner, "owner"), (name, "repo")):
        if not _NAME.fullmatch(part) or "--" in part or ".." in part or len(part) > 96:
            raise bad(f"{part!r} is no {what} name: letters, digits, '-', '_' and '.'")
    if colon and slash:
        raise bad("a quant or a file, not both")
    if colon:
        if not quant:
            raise bad("nothing after ':'; the quant goes there")
        if not _QUANT.fullmatch(quant):
            raise bad(f"{quant!r} is no quant, such as Q4_K_M")
        return HubRef(f"{owner}/{name}", quant=quant)
    if slash:
        parts = file.split("/")
        if not file.lower().endswith(".gguf") or any(p in ("", ".", "..") for p in parts):
            raise bad(f"{file!r} is no .gguf file's path in the repo")
        return HubRef(f"{owner}/{name}", file=file)
    return HubRef(f"{owner}/{name}")


def hub_path(ref: HubRef) -> Path:
    """The GGUF file that `ref` names, from the Hub's cache, downloaded there if need be.

    Raises:
        FileNotFoundError: The repo does not exist, or holds no file that `ref` looks for.
        PermissionError: The repo is gated (or private) and the token does not open it.
        ConnectionError: The Hub cannot be reached (or `HF_HUB_OFFLINE` is set) and the
            cache holds no such file.
        ImportError: `huggingface_hub` is missing and the file is not cached.
    """
    hub = _Hub.from_env()
    found = _cached(ref, hub, fallback=False)
    if found is not None:
        return found
    if hub.offline:
        return _cached_or_raise(ref, hub, "HF_HUB_OFFLINE is set", "unset HF_HUB_OFFLINE to download it once")
    api = _hf()
    try:
        files = api.HfApi(endpoint=hub.endpoint).list_repo_files(ref.repo)
        parts = _plan(ref, files)
        paths = [
            Path(
                api.hf_hub_download(
                    ref.repo, part, cache_dir=hub.cache, endpoint=hub.endpoint, tqdm_class=_progress_bar()
                )
            )
            for part in parts
        ]
    except Exception as exc:
        if not _unreachable(exc):
            refused = _refused(exc, ref, hub)
            if refused is exc:
                raise
            raise refused from exc
        return _cached_or_raise(
            ref,
            hub,
            f"cannot reach the Hub at {hub.shown_endpoint} ({exc.__class__.__name__}: {exc})",
            "connect once to download it, or set HF_ENDPOINT to a mirror you can reach",
            cause=exc,
        )
    return paths[0]


def cached_path(ref: HubRef) -> Path | None:
    """The file that `ref` loads if the Hub's cache holds it, found with no request; else None."""
    return _cached(ref, _Hub.from_env(), fallback=False)


def cached_files() -> list[CachedFile]:
    """Every model GGUF in the Hub's cache under its repo's `main`, by repo and file name."""
    hub = _Hub.from_env()
    try:
        folders = sorted(hub.cache.glob("models--*"))
    except OSError:
        return []
    found: list[CachedFile] = []
    for folder in folders:
        repo = folder.name.removeprefix("models--").replace("--", "/")
        snapshot, files = _snapshot(folder)
        for file in files:
            if _is_model(file) and _first_part(file):
                parts = _parts(file, files)
                if parts is not None:
                    size = sum((snapshot / p).stat().st_size for p in parts)
                    found.append(CachedFile(ref=HubRef(repo, file=file), path=snapshot / file, size=size))
    return found


@dataclass(frozen=True, slots=True)
class _Hub:
    """The Hub's settings, as the environment gives them now."""

    endpoint: str | None
    cache: Path
    offline: bool

    @classmethod
    def from_env(cls) -> _Hub:
        env = os.environ
        cache = env.get("HF_HUB_CACHE") or env.get("HUGGINGFACE_HUB_CACHE")
        if not cache:
            xdg = env.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
            cache = os.path.join(env.get("HF_HOME") or os.path.join(xdg, "huggingface"), "hub")
        return cls(
            endpoint=env.get("HF_ENDPOINT", "").strip().rstrip("/") or None,
            cache=Path(os.path.expandvars(cache)).expanduser(),
            offline=env.get("HF_HUB_OFFLINE", "").strip().upper() in _TRUE,
        )

    @property
    def shown_endpoint(self) -> str:
        return self.endpoint or "https://huggingface.co"

    def page(self, ref: HubRef) -> str:
        return f"{self.shown_endpoint}/{ref.repo}"


def _hf() -> Any:
    try:
        import huggingface_hub
    except ImportError as exc:
        raise ImportError(
            "loading a model from the Hugging Face Hub needs huggingface_hub: pip install 'aerix[llama]'"
        ) from exc
    return huggingface_hub


@functools.cache
def _progress_bar() -> type:
    """huggingface_hub's progress bar, drawn only where stderr is a terminal (and the Hub's
    own switches, `HF_HUB_DISABLE_PROGRESS_BARS`, allow it)."""
    from huggingface_hub.utils.tqdm import tqdm

    class TerminalOnly(tqdm):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            stream = kwargs.get("file") or sys.stderr
            terminal = bool(getattr(stream, "isatty", lambda: False)())
            kwargs["disable"] = kwargs.get("disable") is True or not terminal
            super().__init__(*args, **kwargs)  # type: ignore[no-untyped-call]

    return TerminalOnly


# -- choosing the file ----------------------------------------------------------------------


def _split(file: str) -> tuple[str, int, int]:
    """The name without `.gguf` and a split's suffix, the part's index and the count of parts."""
    stem = file[: -len(".gguf")] if file.lower().endswith(".gguf") else file
    match = _SPLIT.match(stem)
    if match is None:
        return stem, 1, 1
    return match["prefix"], int(match["index"]), int(match["count"])


def _is_model(file: str) -> bool:
    base = file.rsplit("/", 1)[-1].lower()
    return base.endswith(".gguf") and not any(word in base for word in _NOT_MODELS)


def _first_part(file: str) -> bool:
    _, index, count = _split(file)
    return count == 1 or index == 1


def _quant(file: str) -> str | None:
    match = _TAG.search(_split(file)[0].rsplit("/", 1)[-1])
    return match["tag"].upper() if match else None


def _parts(file: str, files: Sequence[str]) -> list[str] | None:
    """Every part of the model that `file` belongs to, in order; None if some are missing."""
    prefix, _, count = _split(file)
    if count == 1:
        return [file]
    parts = sorted((f for f in files if _split(f)[0] == prefix and _split(f)[2] == count), key=_index)
    return parts if [_index(p) for p in parts] == list(range(1, count + 1)) else None


def _index(file: str) -> int:
    return _split(file)[1]


def _choose(ref: HubRef, files: Sequence[str], *, fallback: bool = True) -> str | None:
    """The file that `ref` loads among `files` (llama.cpp's rule); `fallback=False` takes only
    the first choice of a reference without a quant (`Q4_K_M`), for the cache before the Hub."""
    if ref.file is not None:
        return next((f for f in files if f.lower() == ref.file.lower()), None)
    models = [f for f in files if _is_model(f) and _first_part(f)]
    quants = (ref.quant,) if ref.quant else DEFAULT_QUANTS if fallback else DEFAULT_QUANTS[:1]
    for quant in quants:
        pattern = re.compile(rf"(?<![A-Za-z0-9]){re.escape(quant)}[.-]", re.IGNORECASE)
        found = next((f for f in models if pattern.search(f)), None)
        if found is not None:
            return found
    return models[0] if ref.quant is None and fallback and models else None


def _plan(ref: HubRef, files: Sequence[str]) -> list[str]:
    """The files to download for `ref` (the parts of a split model, in order)."""
    chosen = _choose(ref, files)
    if chosen is None:
        raise FileNotFoundError(_no_file(ref, files, f"the repo {ref.repo}"))
    parts = _parts(chosen, files)
    if parts is None:
        raise FileNotFoundError(
            f"{ref}: the repo {ref.repo} lists only some parts of {chosen} (a model split in "
            f"{_split(chosen)[2]} files): load another of its files ({_gguf_list(files)})"
        )
    return parts


def _no_file(ref: HubRef, files: Sequence[str], where: str) -> str:
    """Why `ref` finds nothing in `files` (those of `where`), and what to load instead."""
    ggufs = [f for f in files if f.lower().endswith(".gguf")]
    models = [f for f in ggufs if _is_model(f)]
    if not models:
        held = f"it holds {_listed(files)}" if files else "it holds no file"
        return (
            f"{ref}: {where} has no GGUF model file ({held}); aerix loads GGUF files: look for a GGUF "
            f"version of the model on the Hub (often a repo named …-GGUF)"
        )
    quants = sorted({q for f in models if _first_part(f) and (q := _quant(f)) is not None})
    if ref.file is None and quants:
        picks = ", ".join(f"hf:{ref.repo}:{q}" for q in quants[:8])
        return f"{ref}: {where} has no {ref.sought}; it has {', '.join(quants)}: load one, e.g. {picks}"
    return f"{ref}: {where} has no {ref.sought}; its GGUF files: {_gguf_list(files)}"


def _gguf_list(files: Sequence[str]) -> str:
    return _listed([f for f in files if _is_model(f) and _first_part(f)]) or "none"


def _listed(files: Sequence[str], most: int = 8) -> str:
    shown = ", ".join(files[:most])
    return shown + (f" and {len(files) - most} more" if len(files) > most else "")


# -- the cache ------------------------------------------------------------------------------


def _snapshot(folder: Path) -> tuple[Path, list[str]]:
    """The snapshot that a repo's cache folder holds under `main`, and its files (paths in the repo)."""
    try:
        commit = (folder / "refs" / "main").read_text().strip()
        snapshot = folder / "snapshots" / commit
        files = sorted(p.relative_to(snapshot).as_posix() for p in _walk(snapshot) if p.is_file())
    except (OSError, ValueError):  # no `main` yet, or a snapshot being written
        return folder, []
    return snapshot, files


def _walk(folder: Path) -> Iterator[Path]:
    for root, _, names in os.walk(folder, followlinks=True):
        for name in names:
            yield Path(root) / name


def _repo_folder(hub: _Hub, ref: HubRef) -> Path:
    return hub.cache / ("models--" + ref.repo.replace("/", "--"))


def _cached(ref: HubRef, hub: _Hub, *, fallback: bool) -> Path | None:
    """The file that `ref` loads if the cache holds it whole, else None."""
    snapshot, files = _snapshot(_repo_folder(hub, ref))
    chosen = _choose(ref, files, fallback=fallback)
    parts = None if chosen is None else _parts(chosen, files)
    return None if parts is None else snapshot / parts[0]


def _cached_or_raise(ref: HubRef, hub: _Hub, why: str, fix: str, cause: BaseException | None = None) -> Path:
    """The file from the cache, for a load that cannot ask the Hub; else the error naming `why`."""
    found = _cached(ref, hub, fallback=True)
    if found is not None:
        return found
    _, files = _snapshot(_repo_folder(hub, ref))
    held = _gguf_list(files) if any(_is_model(f) for f in files) else ""
    also = f"; the cache has {held} of that repo (hf:{ref.repo}/FILE loads one)" if held else ""
    raise ConnectionError(
        f"{ref}: {why}, and the Hub's cache ({hub.cache}) holds no {ref.sought} "
        f"of {ref.repo}{also}: {fix}, or load a GGUF file by its path"
    ) from cause


# -- what the Hub answered ------------------------------------------------------------------


def _unreachable(exc: BaseException) -> bool:
    """Whether `exc` says that the Hub could not be reached (no answer to go by)."""
    from huggingface_hub import errors

    if isinstance(exc, errors.OfflineModeIsEnabled | errors.LocalEntryNotFoundError):
        return True
    if isinstance(exc, errors.HfHubHTTPError):
        return False
    # huggingface_hub's own HTTP client (httpx, or its fork httpx2) raises its transport errors as they are
    clients = tuple(m.TransportError for n in ("httpx2", "httpx") if (m := sys.modules.get(n)) is not None)
    return isinstance(exc, (*clients, ConnectionError, TimeoutError))


def _refused(exc: BaseException, ref: HubRef, hub: _Hub) -> BaseException:
    """The error to raise for the Hub's refusal `exc`, naming the repo and the fix."""
    from huggingface_hub import errors, get_token

    if isinstance(exc, FileNotFoundError | ImportError | AerixError) and not isinstance(
        exc, errors.HfHubHTTPError
    ):
        return exc  # ours already (no such file in the repo), or one that names its fix
    status = getattr(getattr(exc, "response", None), "status_code", None)
    token = "HF_TOKEN" if os.environ.get("HF_TOKEN") else "your Hugging Face token"
    if isinstance(exc, errors.GatedRepoError):
        if get_token() is None:
            how = "then set HF_TOKEN to an access token of that account"
        else:
            how = f"the account of {token} may not have accepted them yet (or awaits the authors' approval)"
        return PermissionError(
            f"{ref}: the repo {ref.repo} is gated (HTTP {status}): accept its terms at {hub.page(ref)} "
            f"while logged in, {how}"
        )
    if isinstance(exc, errors.RepositoryNotFoundError):
        return FileNotFoundError(
            f"{ref}: the Hub at {hub.shown_endpoint} has no repo {ref.repo} (HTTP {status}): check its "
            "name (OWNER/REPO, as on its page); for a private repo, set HF_TOKEN to a token that may read it"
        )
    if isinstance(exc, errors.EntryNotFoundError | errors.RevisionNotFoundError):
        return FileNotFoundError(
            f"{ref}: the repo {ref.repo} changed while it was read ({exc.__class__.__name__}): try again"
        )
    if isinstance(exc, errors.HfHubHTTPError) and status in (401, 403):
        return PermissionError(
            f"{ref}: the Hub refused {token} (HTTP {status}) for {ref.repo}: set HF_TOKEN to a valid "
            "token, or unset it for a public repo"
        )
    if isinstance(exc, errors.HfHubHTTPError):
        return ConnectionError(
            f"{ref}: the Hub at {hub.shown_endpoint} answered HTTP {status} while the {ref.sought} of "
            f"{ref.repo} was fetched: try again later"
        )
    return exc
