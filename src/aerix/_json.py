"""JSON text for the loop's hot path: a call's key, a tool's result.

`json.JSONEncoder.encode` calls `iterencode`, which makes json's C encoder,
which writes the text: two Python calls around the C work, about half the cost
of writing a small value. `json_writer` calls the C encoder directly.
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
    check_circular: bool = True,
    default: Callable[[Any], Any] | None = None,
) -> Callable[[Any], str]:
    """`json.JSONEncoder(...).encode` with these options: the same text, and the same errors.

    With `check_circular`, json's C encoder is made for each call, with its own record of
    the containers it is in (as `iterencode` makes it); without, it is made once, and a
    value that holds itself raises `RecursionError` (as `encode` does then), so leave it
    for values that cannot (parsed JSON). Where Python has no C encoder, `encode` itself.
    """
    encoder = json.JSONEncoder(
        sort_keys=sort_keys,
        ensure_ascii=ensure_ascii,
        allow_nan=allow_nan,
        check_circular=check_circular,
        default=default,
    )
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:
        return encoder.encode
    strings = json.encoder.encode_basestring_ascii if ensure_ascii else json.encoder.encode_basestring
    separators = encoder.key_separator, encoder.item_separator
    settings = (encoder.default, strings, None, *separators, sort_keys, False, allow_nan)  # None: no indent

    if not check_circular:
        core = make(None, *settings)

        def write_once_made(value: Any) -> str:
            return "".join(core(value, 0))

        return write_once_made

    def write(value: Any) -> str:
        return "".join(make({}, *settings)(value, 0))

    return write
