"""`Vocab.exact_pieces`: whether a piece of text tokenises alone into tokens that spell it again."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

llama_cpp = pytest.importorskip("llama_cpp", reason="the vocabulary tests need aerix[llama]")
gguf = pytest.importorskip("gguf", reason="writing a GGUF needs the gguf package")

from aerix.engines.llamacpp._vocab import Vocab  # noqa: E402

PIECES = ["▁", "x", "▁x", "y", "z", "▁▁"]
"""A SentencePiece vocabulary's own tokens (`▁` is the space), besides the 256 byte tokens."""


def write_spm_gguf(path: Path, *, space_prefix: bool) -> Path:
    """A vocabulary-only GGUF with a SentencePiece (`llama`) tokenizer."""
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_name("aerix-spm-test")
    w.add_context_length(64)
    w.add_embedding_length(8)
    w.add_feed_forward_length(8)
    w.add_block_count(1)
    w.add_head_count(1)
    w.add_head_count_kv(1)
    w.add_layer_norm_rms_eps(1e-5)
    tokens = ["<unk>", "<s>", "</s>", *(f"<0x{b:02X}>" for b in range(256)), *PIECES]
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores([0.0] * 259 + [-float(i) for i in range(1, len(PIECES) + 1)])
    w.add_token_types([2, 3, 3] + [6] * 256 + [1] * len(PIECES))  # unknown, control, byte, normal
    w.add_add_space_prefix(space_prefix)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def vocab_of(path: Path) -> tuple[Vocab, Any]:
    llama = llama_cpp.Llama(model_path=str(path), vocab_only=True, verbose=False)
    return Vocab(llama.model), llama


def test_sentencepiece_without_a_space_prefix_spells_pieces_exactly(tmp_path: Path) -> None:
    vocab, llama = vocab_of(write_spm_gguf(tmp_path / "spm.gguf", space_prefix=False))
    try:
        assert not vocab.byte_level and vocab.exact_pieces
        assert vocab.spells_alone(b"x  y\n") and vocab.spells_alone(" é".encode())  # é: byte tokens
    finally:
        llama.close()


def test_sentencepiece_with_a_space_prefix_does_not(tmp_path: Path) -> None:
    vocab, llama = vocab_of(write_spm_gguf(tmp_path / "spm.gguf", space_prefix=True))
    try:
        assert not vocab.spells_alone(b"x")  # it reads " x"
        assert not vocab.byte_level and not vocab.exact_pieces
    finally:
        llama.close()


def test_byte_level_bpe_spells_pieces_exactly(tiny_gguf: Path) -> None:
    vocab, llama = vocab_of(tiny_gguf)
    try:
        assert vocab.byte_level and vocab.exact_pieces and vocab.spells_alone(" é\n".encode())
    finally:
        llama.close()
