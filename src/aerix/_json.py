"""JSON text for the loop's hot path: a call's key, a tool's result.

`json.JSONEncoder.encode` makes its C encoder anew on every call, which is
about half the cost of writing a small value. `json_writer` makes it once.
"""

from __future__ import annotations

import json
import json.encoder
from collections.abc import Callable
from typing import Any

__all__ = ["json_writer"]


def json_writer(
    *,
    sort_keys: bool = False,
    ensure_ascii: bool = True,
    allow_nan: bool = True,
    default: Callable[[Any], Any] | None = None,
) -> Callable[[Any], str]:
    """`json.JSONEncoder(...).encode` with these options, its C encoder made once.

    The same text, and the same errors: a cycle, which the C encoder made once
    cannot look for, is written again by `encode` itself, whose `ValueError` says so.
    Where Python has no C encoder, `encode` itself.
    """
    encoder = json.JSONEncoder(
        sort_keys=sort_keys, ensure_ascii=ensure_ascii, allow_nan=allow_nan, default=default
    )
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:
        return encoder.encode
    strings = json.encoder.encode_basestring_ascii if ensure_ascii else json.encoder.encode_basestring
    core = make(
        None,  # no cycle check: it would need a dict of its own for each call
        encoder.default,
        strings,
        None,  # no indent
        encoder.key_separator,
        encoder.item_separator,
        sort_keys,
        False,  # skipkeys
        allow_nan,
    )

    def write(value: Any) -> str:
        try:
            return "".join(core(value, 0))
        except RecursionError:  # a cycle, or a value nested too deeply: `encode` says which
            return encoder.encode(value)

    return write
