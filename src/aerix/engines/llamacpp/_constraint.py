"""JSON-schema constraints with llguidance: a fast token mask and forced tokens.

A schema is compiled once into an llguidance grammar with compact JSON (no
flexible whitespace, so that punctuation and keys are forced), validated
against the model's tokenizer, and cached; each generation decodes with a
fresh copy of the compiled matcher. Per token, the matcher fills a bitmask of
the allowed tokens (microseconds) and tells which tokens the schema forces
next (`compute_ff_tokens`), which the engine then evaluates in one batch
without sampling them (jump-forward decoding).
"""

from __future__ import annotations

import json
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

import numpy as np

from ...errors import AerixError
from ._sampling import Bitmask

try:
    import llguidance
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "aerix.engines.LlamaCpp needs llguidance for JSON constraints: pip install 'aerix[llama]'"
    ) from exc

if TYPE_CHECKING:
    from llguidance._lib import JsonCompileOptions

__all__ = ["COMPACT_JSON", "LENIENT_JSON", "Constrained", "SchemaCompiler"]

COMPACT_JSON: JsonCompileOptions = {"whitespace_flexible": False}
"""llguidance's JSON options by default: no whitespace between tokens. A schema
may override them with its own `"x-guidance"` key."""
LENIENT_JSON: JsonCompileOptions = {"whitespace_flexible": False, "lenient": True}
"""The options tried when a schema does not compile with `COMPACT_JSON`: a `oneOf`
whose choices overlap is decoded as `anyOf`, and a `format` llguidance does not know
is left undecoded (the loop's input check still holds every value to the exact
schema)."""


class Constrained:
    """One generation's view of a compiled schema: mask, forced tokens, progress."""

    def __init__(self, matcher: Any, n_vocab: int) -> None:
        self._m = matcher
        self._n_vocab = n_vocab
        self.mask: Bitmask = np.full(((n_vocab + 31) // 32,), -1, dtype=np.int32)
        """Allowed tokens, one bit each, as of the last `fill_mask()`."""

    def fill_mask(self) -> Bitmask:
        """Compute the tokens allowed next into `mask` and return it."""
        self._m.unsafe_compute_mask_ptr(self.mask.ctypes.data, self.mask.nbytes)
        self._check()
        return self.mask

    def fork(self) -> Constrained:
        """An independent copy at the same point, to decode ahead with."""
        return Constrained(self._m.deep_copy(), self._n_vocab)

    def consume(self, tokens: list[int]) -> None:
        """Advance over tokens (sampled or forced)."""
        self._m.consume_tokens(tokens)
        self._check()

    def accepts(self, tokens: list[int]) -> bool:
        """Whether the schema allows these tokens next (nothing is consumed)."""
        return bool(self._m.validate_tokens(tokens) == len(tokens))

    def forced(self) -> list[int]:
        """The tokens the schema forces next (possibly none)."""
        return list(self._m.compute_ff_tokens())

    @property
    def done(self) -> bool:
        """Whether the value is complete and nothing more may follow."""
        return bool(self._m.is_stopped())

    def _check(self) -> None:
        if self._m.is_error():
            raise RuntimeError(f"the JSON constraint failed while decoding: {self._m.get_error()}")


class SchemaCompiler:
    """Compiles JSON Schemas for one tokenizer, keeping the last few.

    Args:
        tokenizer: llguidance's tokenizer of the model's vocabulary.
        n_vocab: The model's vocabulary size (the logits' length).
        cache_size: How many compiled schemas to keep.
    """

    def __init__(self, tokenizer: Any, n_vocab: int, cache_size: int = 16) -> None:
        self._tokenizer = tokenizer
        self._n_vocab = n_vocab
        self._cache: OrderedDict[str, Any] = OrderedDict()
        self._cache_size = cache_size

    def start(self, schema: object) -> Constrained:
        """A fresh constrained decode of `schema`.

        Raises:
            AerixError: `kind="options"`: the schema is not a JSON object, or
                llguidance cannot enforce it (the message says why).
        """
        if not isinstance(schema, dict):
            raise AerixError(
                "options",
                f"constraint: 'json' must be a JSON Schema object (a dict), got {type(schema).__name__}",
            )
        try:
            # Key order matters: the grammar emits properties in schema order.
            key = json.dumps(schema)
        except (TypeError, ValueError) as exc:
            raise AerixError("options", f"constraint: the schema is not plain JSON: {exc}") from exc
        matcher = self._cache.get(key)
        if matcher is None:
            matcher = self._compile(key)
            self._cache[key] = matcher
            if len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
        else:
            self._cache.move_to_end(key)
        return Constrained(matcher.deep_copy(), self._n_vocab)

    def _compile(self, schema_json: str) -> Any:
        try:
            grammar = llguidance.LLMatcher.grammar_from_json_schema(schema_json, defaults=COMPACT_JSON)
        except ValueError as exc:
            raise AerixError("options", f"constraint: bad JSON schema: {exc}") from exc
        failed, messages = llguidance.LLMatcher.validate_grammar_with_warnings(grammar, self._tokenizer)
        if failed:  # an overlapping oneOf, an unknown format: decoded approximately, if at all
            lenient = llguidance.LLMatcher.grammar_from_json_schema(schema_json, defaults=LENIENT_JSON)
            if not llguidance.LLMatcher.validate_grammar_with_warnings(lenient, self._tokenizer)[0]:
                failed, grammar = False, lenient
        if failed:
            raise AerixError(
                "options",
                f"constraint: llguidance cannot enforce this JSON schema: {messages[0]}. "
                "Simplify the schema (see llguidance's docs/json_schema.md for what is supported).",
            )
        matcher = llguidance.LLMatcher(self._tokenizer, grammar, log_level=0)
        if matcher.is_error():
            raise AerixError(
                "options",
                f"constraint: llguidance cannot enforce this JSON schema: {matcher.get_error()}",
            )
        return matcher
