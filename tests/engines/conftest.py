"""Fixtures for the engine tests: a tiny GGUF written on the fly, and engines on it.

The tiny model is a llama-architecture GGUF with noise weights and a real tokenizer.

The model is useless as a language model but is a complete GGUF that llama.cpp
loads in milliseconds: a byte-level BPE vocabulary (every byte is a token, a
few merges make multi-byte tokens), ChatML special tokens, and a chat template
in its metadata. Tests use it to exercise the engine without a real model.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pytest

if TYPE_CHECKING:
    from aerix.engines import LlamaCpp

SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
"""Control tokens 0, 1, 2: BOS, turn start, EOS (end of turn)."""

MERGES = [
    ("Ġ", "t"),
    ("h", "e"),
    ("i", "n"),
    ("{", '"'),
    ('"', ":"),
    ('"', ","),
    (":", '"'),
    ('",', '"'),
    ("c", "a"),
    ("l", "l"),
    ("ca", "ll"),
    ("call", "s"),
    ("t", "o"),
    ("o", "l"),
    ("to", "ol"),
    ("u", "s"),
    ("e", "r"),
    ("us", "er"),
]
"""BPE merges, so that some tokens span several bytes (as in a real vocabulary)."""

CHAT_TEMPLATE = (
    "{{ bos_token }}"
    "{% for message in messages %}"
    "{% if message['role'] not in ['system', 'user', 'assistant'] %}"
    "{{ raise_exception('Unknown role: ' + message['role']) }}"
    "{% endif %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
"""ChatML, with `bos_token` and `raise_exception` so that both are exercised."""


def byte_to_unicode() -> dict[int, str]:
    """GPT-2's reversible map from bytes to printable characters."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1)]
    printable += range(ord("®"), ord("ÿ") + 1)
    chars = list(printable)
    n = 0
    for b in range(256):
        if b not in printable:
            printable.append(b)
            chars.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(printable, chars, strict=True)}


def vocabulary() -> tuple[list[str], list[int], list[str]]:
    """The tokens, their types (1 normal, 3 control) and the merges."""
    tokens = list(SPECIALS)
    tokens += [byte_to_unicode()[b] for b in range(256)]
    for a, b in MERGES:
        tokens.append(a + b)
    types = [3] * len(SPECIALS) + [1] * (len(tokens) - len(SPECIALS))
    return tokens, types, [f"{a} {b}" for a, b in MERGES]


def write_tiny_gguf(path: Path, *, seed: int = 0, chat_template: str | None = CHAT_TEMPLATE) -> Path:
    """Write the tiny model to `path` and return it.

    Args:
        path: Where to write the GGUF file.
        seed: Seed of the noise weights.
        chat_template: The template stored in the metadata; `None` stores none.
    """
    gguf = pytest.importorskip("gguf", reason="writing the tiny GGUF needs the gguf package")

    tokens, types, merges = vocabulary()
    n_vocab, n_embd, n_ff, n_layer, n_head, n_head_kv = len(tokens), 64, 128, 2, 4, 2
    head_dim = n_embd // n_head
    rng = np.random.default_rng(seed)

    def noise(*shape: int, scale: float = 0.1) -> np.ndarray:
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    w = gguf.GGUFWriter(str(path), "llama")
    w.add_name("aerix-tiny-test")
    w.add_context_length(2048)
    w.add_embedding_length(n_embd)
    w.add_feed_forward_length(n_ff)
    w.add_block_count(n_layer)
    w.add_head_count(n_head)
    w.add_head_count_kv(n_head_kv)
    w.add_rope_dimension_count(head_dim)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    w.add_vocab_size(n_vocab)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("gpt-2")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_bos_token_id(0)
    w.add_eos_token_id(2)
    w.add_add_bos_token(True)
    if chat_template is not None:
        w.add_chat_template(chat_template)

    w.add_tensor("token_embd.weight", noise(n_vocab, n_embd, scale=1.0))
    for i in range(n_layer):
        w.add_tensor(f"blk.{i}.attn_norm.weight", np.ones(n_embd, dtype=np.float32))
        w.add_tensor(f"blk.{i}.attn_q.weight", noise(n_embd, n_embd))
        w.add_tensor(f"blk.{i}.attn_k.weight", noise(n_head_kv * head_dim, n_embd))
        w.add_tensor(f"blk.{i}.attn_v.weight", noise(n_head_kv * head_dim, n_embd))
        w.add_tensor(f"blk.{i}.attn_output.weight", noise(n_embd, n_embd))
        w.add_tensor(f"blk.{i}.ffn_norm.weight", np.ones(n_embd, dtype=np.float32))
        w.add_tensor(f"blk.{i}.ffn_gate.weight", noise(n_ff, n_embd))
        w.add_tensor(f"blk.{i}.ffn_up.weight", noise(n_ff, n_embd))
        w.add_tensor(f"blk.{i}.ffn_down.weight", noise(n_embd, n_ff))
    w.add_tensor("output_norm.weight", np.ones(n_embd, dtype=np.float32))
    out = noise(n_vocab, n_embd, scale=1.0)
    out[: len(SPECIALS)] = 0.0  # control tokens never win greedily: generations run to the limit
    w.add_tensor("output.weight", out)

    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


@pytest.fixture(scope="session")
def tiny_gguf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny model's GGUF file (written once per session)."""
    return write_tiny_gguf(tmp_path_factory.mktemp("gguf") / "tiny.gguf")


@pytest.fixture
def make_gguf(tmp_path: Path) -> Callable[..., Path]:
    """Write a variant of the tiny model: `make_gguf(chat_template=None)`."""
    count = iter(range(1_000))

    def make(**kwargs: object) -> Path:
        return write_tiny_gguf(tmp_path / f"tiny-{next(count)}.gguf", **kwargs)  # type: ignore[arg-type]

    return make


@pytest.fixture
def engine(tiny_gguf: Path) -> Iterator[LlamaCpp]:
    """A fresh `LlamaCpp` on the tiny model (loading it takes milliseconds)."""
    pytest.importorskip("llama_cpp", reason="the LlamaCpp tests need aerix[llama]")
    from aerix.engines import LlamaCpp

    e = LlamaCpp(tiny_gguf, n_ctx=2048, n_threads=1)
    yield e
    e.close()
