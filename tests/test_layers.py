"""The imports follow the layers of STYLE.md, and no package reaches into another's private names.

face (cli, the playground) → the loop (agent) → the pure contract (turn, tools,
events, options) → the floor (model, abort, errors). Engines import only the
floor and their own package; the loop knows no engine, the floor knows nothing.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parent.parent / "src"
PACKAGE = SRC / "aerix"

FLOOR = {"aerix.model", "aerix.abort", "aerix.errors"}
LOOP = {
    "aerix.agent",
    "aerix._lifecycle",
    "aerix._conversation",
    "aerix._agent_tool",
    "aerix._approvals",
    "aerix._window",
    "aerix._history",
    "aerix.sessions",
    "aerix._handover",
    "aerix._checks",
    "aerix._guard",
    "aerix._hooks",
    "aerix._portal",
    "aerix._stream",
    "aerix._observe",
    "aerix._answer",
    "aerix._calls",
    "aerix._contract",
    "aerix._output",
}
CONTRACT = {
    "aerix.turn",
    "aerix.tools",
    "aerix._workers",
    "aerix.events",
    "aerix.options",
    "aerix._docstring",
    "aerix._json",
    "aerix.testing",
    "aerix._schema",
    "aerix._validate",
    "aerix._fields",
    "aerix._annotations",
}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _type_only(tree: ast.Module) -> set[int]:
    """The ids of the import nodes under `if TYPE_CHECKING:` (no dependency at run time)."""
    out: set[int] = set()
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.If)
            and getattr(node.test, "id", getattr(node.test, "attr", "")) == "TYPE_CHECKING"
        ):
            out |= {id(n) for stmt in node.body for n in ast.walk(stmt)}
    return out


def imports(path: Path, *, runtime_only: bool = False) -> list[tuple[str, list[str]]]:
    """(module imported, names imported from it) for every import of the file, made absolute."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: list[tuple[str, list[str]]] = []
    tree = ast.parse(path.read_text())
    skip = _type_only(tree) if runtime_only else set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            out += [(a.name, []) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            out.append((target, [a.name for a in node.names]))
    return [(m, names) for m, names in out if m == "aerix" or m.startswith("aerix.")]


MODULES = sorted(p for p in PACKAGE.rglob("*.py"))


def layer(name: str) -> str:
    if name in FLOOR:
        return "floor"
    if name in CONTRACT or name.rpartition(".")[0] in CONTRACT:  # a module of a package (aerix.turn)
        return "contract"
    if name.startswith("aerix.engines"):
        return "engine"
    if name in LOOP:
        return "loop"
    return "face"


ALLOWED = {
    "floor": {"floor"},
    "contract": {"floor", "contract"},
    "loop": {"floor", "contract", "loop"},
    "engine": {"floor", "engine"},
}


@pytest.mark.parametrize("path", MODULES, ids=lambda p: module_name(p))
def test_imports_follow_the_layers(path: Path) -> None:
    me = module_name(path)
    mine = layer(me)
    if mine not in ALLOWED:
        return  # the face may use anything public (checked below)
    for target, _ in imports(path, runtime_only=True):
        for known in (target, *(target.rsplit(".", k)[0] for k in range(1, target.count(".") + 1))):
            if known in FLOOR | CONTRACT or known == "aerix.agent":
                target = known
                break
        theirs = layer(target)
        if mine == "engine" and theirs == "engine":
            # an engine imports its own package; the engines' root (the loader) imports engines
            root = me in ("aerix.engines", "aerix.engines._load")
            assert root or target.split(".")[:3] == me.split(".")[:3], f"{me} imports {target}"
            continue
        assert theirs in ALLOWED[mine], f"{me} ({mine}) imports {target} ({theirs})"


def _private_owner(module: str) -> str | None:
    """The package holding the first private component of a module path (`aerix.engines` for
    `aerix.engines._load`), or None if the path is public."""
    parts = module.split(".")
    for i, part in enumerate(parts):
        if part.startswith("_") and not part.startswith("__"):
            return ".".join(parts[:i])
    return None


def _package_of(module: str) -> str:
    return module if (SRC / module.replace(".", "/")).is_dir() else module.rpartition(".")[0]


@pytest.mark.parametrize("path", MODULES, ids=lambda p: module_name(p))
def test_no_package_imports_another_packages_private_names(path: Path) -> None:
    me = module_name(path)
    package = _package_of(me)
    found = imports(path)
    for target, names in list(found):  # `from pkg import _module` imports a module
        found += [
            (f"{target}.{n}", [])
            for n in names
            if (SRC / f"{target}.{n}".replace(".", "/")).with_suffix(".py").is_file()
        ]
    for target, names in found:
        owner = _private_owner(target)
        if owner is not None:
            # a private module is its package's: it and its subpackages import it, and
            # a package's __init__ may re-export from its subpackages' private modules
            inside = package == owner or package.startswith(owner + ".")
            reexport = path.name == "__init__.py" and owner.startswith(package + ".")
            assert inside or reexport, f"{me} imports the private module {target}"
        for name in names:
            submodule = (SRC / f"{target}.{name}".replace(".", "/")).with_suffix(".py").is_file()
            if name.startswith("_") and not name.startswith("__") and not submodule:
                assert _package_of(target) == package, f"{me} imports the private name {name} from {target}"
