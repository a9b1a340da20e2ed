"""BFCL entries as aerix tools.

Each BFCL function becomes an aerix `Tool`: its name mapped to the tool-name
pattern `^[a-z][a-z0-9_]{0,63}$`, `float` read as `number`, enums kept, a
documented default added to the field's description, and a `run` that records
the call instead of doing any work. Entries whose parameters are all flat
scalars become `Field`s, as before; the others (arrays, tuples, dicts, `any`)
become schema tools (`tool(schema=...)`, `to_schema`), run with `--nested`.

Every category is split by id into a tuning part and a report part
(`part_of`): the number that ends the id, odd → tuning, even → report (as the
agent benchmark's tasks are split). Rules may be chosen on the tuning part
only; the report part is the figure to quote.

BFCL's live categories hold requests users sent to BFCL's live leaderboard.
Two of them (`HELD_OUT`: live_simple, live_irrelevance) are not split: they are
held out whole (the part "held-out"), measured with the rules as they are and
never tuned on. live_multiple (`LIVE_SPLIT`, real requests with two to a dozen
tools) is split like the others, by the first number of its id
(`live_multiple_12-4-3`: 12), and is not run unless asked for by name. Their
entries with more than one message (a system prompt, an earlier exchange) are
skipped and counted, as the entries that are not flat are.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from aerix import Field, Tool, tool

__all__ = [
    "CATEGORIES",
    "DATA",
    "HELD_OUT",
    "LIVE",
    "LIVE_SPLIT",
    "PARTS",
    "Entry",
    "Part",
    "field_name",
    "in_part",
    "is_flat",
    "load",
    "part_of",
    "to_schema",
    "to_tools",
    "tool_name",
]

DATA = Path(__file__).resolve().parent.parent / "data" / "bfcl"
"""The BFCL v4 files, carried unchanged in the repository (bench/data/bfcl, Apache-2.0: see its LICENSE)."""
CATEGORIES = ("simple_python", "multiple", "parallel", "irrelevance")
HELD_OUT = ("live_simple", "live_irrelevance")
"""Categories held out whole: never tuned on, run with the part "held-out" (or "all")."""
LIVE_SPLIT = ("live_multiple",)
"""Live categories split into a tuning and a report part like `CATEGORIES`, run only when named."""
LIVE = (*HELD_OUT, *LIVE_SPLIT)
"""The categories of users' own requests, some with more than one message."""
IRRELEVANT = frozenset({"irrelevance", "live_irrelevance"})
"""The categories where no call is right."""
Part = Literal["tuning", "report", "held-out"]
PARTS: tuple[Part, ...] = ("tuning", "report")
"""The two parts of every split category: rules are chosen on "tuning", "report" is quoted."""
FLAT_TYPES: dict[str, str] = {
    "string": "string",
    "integer": "integer",
    "float": "number",
    "boolean": "boolean",
}


@dataclass(frozen=True, kw_only=True, slots=True)
class Entry:
    """One BFCL entry: the question, its functions, and the expected calls."""

    id: str
    question: str
    """The user message (BFCL's single-turn entries have exactly one)."""
    functions: list[dict[str, Any]]
    answers: list[dict[str, dict[str, list[Any]]]] | None
    """The expected calls; `None` for irrelevance (no call is right)."""
    flat: bool = field(default=True)
    """Whether every parameter is a flat scalar (else the entry is skipped)."""
    single: bool = field(default=True)
    """Whether the entry is one user message (a held-out entry with more is skipped)."""


def is_flat(functions: Sequence[Mapping[str, Any]]) -> bool:
    """Whether every parameter of every function is a string, integer, float or boolean."""
    return all(
        p.get("type") in FLAT_TYPES for f in functions for p in f["parameters"].get("properties", {}).values()
    )


def part_of(entry_id: str) -> Part:
    """The part an entry belongs to, by the number that ends its id: odd tunes, even reports.

    `part_of("simple_python_17")` is `"tuning"`, `part_of("irrelevance_4")` is `"report"`;
    a live entry's number is the first of its id (`"live_multiple_12-4-3"`: report); an
    entry of a held-out category (`"live_simple_0-0-0"`) is `"held-out"`.
    """
    if entry_id.startswith(tuple(f"{c}_" for c in HELD_OUT)):
        return "held-out"
    _, _, number = entry_id.rpartition("_")
    if entry_id.startswith(tuple(f"{c}_" for c in LIVE_SPLIT)):
        number = number.split("-")[0]
    if not number.isdigit():
        raise ValueError(
            f"BFCL entry id {entry_id!r} does not end in _<number>; expected an id like 'simple_python_17'"
        )
    return "tuning" if int(number) % 2 else "report"


def in_part(entries: Sequence[Entry], part: str) -> list[Entry]:
    """The entries of `part` ("tuning", "report", "held-out", or "all" for every entry), in
    their order."""
    if part == "all":
        return list(entries)
    if part not in (*PARTS, "held-out"):
        raise ValueError(f"part must be 'tuning', 'report', 'held-out' or 'all', got {part!r}")
    return [e for e in entries if part_of(e.id) == part]


def load(category: str, root: Path = DATA) -> list[Entry]:
    """Every entry of a category, flat or not, in file order."""
    rows = [json.loads(line) for line in (root / f"BFCL_v4_{category}.json").read_text().splitlines() if line]
    answers: dict[str, Any] = {}
    answer_file = root / "possible_answer" / f"BFCL_v4_{category}.json"
    if answer_file.exists():
        for line in answer_file.read_text().splitlines():
            if line:
                a = json.loads(line)
                answers[a["id"]] = a["ground_truth"]
    out = []
    for r in rows:
        turns = r["question"]
        single = len(turns) == 1 and len(turns[0]) == 1 and turns[0][0]["role"] == "user"
        if not single and category not in LIVE:
            raise ValueError(f"{r['id']}: expected one user message, got {turns!r}")
        out.append(
            Entry(
                id=r["id"],
                question=turns[0][-1]["content"],
                functions=r["function"],
                answers=answers.get(r["id"]) if category not in IRRELEVANT else None,
                flat=is_flat(r["function"]),
                single=single,
            )
        )
    return out


_FIELD_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]{0,63}$")


def field_name(name: str) -> str:
    """A BFCL parameter name as an aerix field name: unchanged when aerix takes it, else its
    letters without accents ("año_vehiculo" → "ano_vehiculo") and anything else as "_"."""
    if _FIELD_NAME.match(name):
        return name
    plain = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode()
    plain = re.sub(r"[^A-Za-z0-9_.-]", "_", plain)
    if not plain or not (plain[0].isalpha() or plain[0] == "_"):
        plain = "f_" + plain
    return plain[:64]


def tool_name(name: str, taken: set[str]) -> str:
    """A BFCL function name mapped to `^[a-z][a-z0-9_]{0,63}$`, unique among `taken`."""
    base = re.sub(r"[^a-z0-9_]", "_", name.lower())
    if not base or not base[0].isalpha():
        base = "f_" + base
    base = base[:64]
    out, n = base, 1
    while out in taken:
        n += 1
        suffix = f"_{n}"
        out = base[: 64 - len(suffix)] + suffix
    taken.add(out)
    return out


_NESTED_TYPES: dict[str, str] = {**FLAT_TYPES, "array": "array", "tuple": "array", "dict": "object"}


def to_schema(spec: Mapping[str, Any]) -> dict[str, Any]:
    """A BFCL parameter spec as the JSON Schema aerix takes (SPEC 9.1's keywords only):
    `float` is `number`, `tuple` an array, `dict` an object, `any` no type at all."""
    out: dict[str, Any] = {}
    kind = spec.get("type")
    if kind in _NESTED_TYPES:
        out["type"] = _NESTED_TYPES[kind]
    description = str(spec.get("description") or "").strip()
    if "default" in spec and spec["default"] is not None:
        note = f"Default: {json.dumps(spec['default'])}."
        description = f"{description} {note}" if description else note
    if description:
        out["description"] = description
    if isinstance(spec.get("enum"), list) and kind in FLAT_TYPES:
        out["enum"] = spec["enum"]
    if out.get("type") == "array":
        items = spec.get("items")
        out["items"] = to_schema(items) if isinstance(items, Mapping) else {}
    if out.get("type") == "object" and isinstance(spec.get("properties"), Mapping):
        out["properties"] = {k: to_schema(v) for k, v in spec["properties"].items()}
        required = [r for r in spec.get("required", []) if r in out["properties"]]
        if required:
            out["required"] = required
    return out


def _field(spec: Mapping[str, Any], required: bool) -> Field:
    description = str(spec.get("description") or "").strip()
    if "default" in spec and spec["default"] is not None:
        note = f"Default: {json.dumps(spec['default'])}."
        description = f"{description} {note}" if description else note
    kind = FLAT_TYPES[spec["type"]]
    return Field(kind, description or None, required=required, enum=_enum_of(kind, spec.get("enum")))


def _enum_of(kind: str, enum: Any) -> list[Any] | None:
    """A field's enum with its values in the field's type: some live entries give a boolean
    field `["True", "False"]` or an integer one `["1", "2"]`; values that do not read as the
    type ("Group A" for an integer) drop the enum, which the field then goes without."""
    if not isinstance(enum, list):
        return None
    read: dict[str, Callable[[Any], Any]] = {
        "boolean": lambda v: {"true": True, "false": False}[str(v).lower()] if not isinstance(v, bool) else v,
        "integer": lambda v: v if isinstance(v, int) and not isinstance(v, bool) else int(str(v)),
        "number": lambda v: v if isinstance(v, int | float) and not isinstance(v, bool) else float(str(v)),
        "string": lambda v: v if isinstance(v, str) else str(v),
    }
    try:
        return [read[kind](v) for v in enum]
    except (KeyError, ValueError):
        return None


def to_tools(
    functions: Sequence[Mapping[str, Any]], record: Callable[[str, dict[str, Any]], None]
) -> tuple[list[Tool], dict[str, str]]:
    """The entry's functions as aerix tools, and the map from tool name to BFCL name.

    Args:
        functions: The entry's BFCL functions (flat ones as `Field`s, see `is_flat`; others
            as schema tools, see `to_schema`).
        record: Called with `(BFCL name, input)` for every call a tool receives.
    """
    taken: set[str] = set()
    tools, names = [], {}
    for f in functions:
        params = f["parameters"]
        required = set(params.get("required", []))
        name = tool_name(f["name"], taken)
        names[name] = f["name"]

        # A parameter name aerix refuses ("año_vehiculo") is given as one it takes, and mapped back.
        back = {field_name(p): p for p in params.get("properties", {})}

        def run(input: dict[str, Any], cx: Any, _bfcl: str = f["name"], _back: dict[str, str] = back) -> str:
            record(_bfcl, {_back.get(k, k): v for k, v in input.items()})
            return "recorded"

        description = str(f.get("description") or "")
        if is_flat([f]):
            fields = {
                field_name(p): _field(spec, p in required) for p, spec in params.get("properties", {}).items()
            }
            tools.append(tool(name=name, description=description, input=fields, run=run))
        else:
            schema = to_schema({**params, "type": "dict"})
            schema["additionalProperties"] = False
            tools.append(tool(name=name, description=description, schema=schema, run=run))
    return tools, names
