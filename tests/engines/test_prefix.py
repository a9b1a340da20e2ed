"""Prefix reuse planning (`aerix.engines.llamacpp._prefix`): pure, with a byte-level fake tokenizer."""

from __future__ import annotations

from aerix.engines.llamacpp._prefix import TokenHistory

BOS = 1000


def tokenize(text: bytes, add_bos: bool) -> list[int]:
    """One token per byte, as a byte-level vocabulary without merges would do."""
    return ([BOS] if add_bos else []) + list(text)


def after_generation(prompt: bytes, generated: list[bytes]) -> TokenHistory:
    """The history after prefilling `prompt` and evaluating `generated` pieces."""
    h = TokenHistory()
    plan = h.plan(prompt, tokenize)
    h.extend_prompt(plan.tokens)
    h.set_prompt(prompt)
    h.extend_generated([2000 + i for i in range(len(generated))], generated)
    return h


def test_a_first_prompt_is_tokenised_in_full() -> None:
    plan = TokenHistory().plan(b"hello", tokenize)
    assert plan.tokens == [BOS, *b"hello"] and plan.reuse == 0


def test_sampled_tokens_are_kept_when_the_prompt_extends_the_output() -> None:
    h = after_generation(b"<p>", [b"ab", b"c"])
    plan = h.plan(b"<p>abc</a><p>", tokenize)
    # The sampled tokens stay (not re-tokenised as bytes a, b, c); the rest is new.
    assert plan.tokens == [BOS, *b"<p>", 2000, 2001, *b"</a><p>"]
    assert plan.reuse == 6


def test_output_cut_short_keeps_the_tokens_inside_the_kept_text() -> None:
    h = after_generation(b"<p>", [b"ab", b"cd", b"ef"])
    plan = h.plan(b"<p>abc</a>", tokenize)  # the text ended inside the second token
    assert plan.tokens == [BOS, *b"<p>", 2000, *b"c</a>"] and plan.reuse == 5


def test_the_rest_starts_on_a_character_boundary() -> None:
    e_acute = "é".encode()
    h = after_generation(b"<p>", [b"x", e_acute[:1], e_acute[1:]])
    # The second byte of é differs: back off to before the whole character.
    plan = h.plan(b"<p>x\xc3\xa8!", tokenize)
    assert plan.reuse == 5 and plan.tokens[5:] == list(b"\xc3\xa8!")


def test_an_identical_prompt_re_evaluates_its_last_token() -> None:
    h = after_generation(b"<p>", [])
    plan = h.plan(b"<p>", tokenize)
    assert plan.tokens == [BOS, *b"<p>"] and plan.reuse == 3


def test_a_different_prompt_falls_back_to_the_common_token_prefix() -> None:
    h = after_generation(b"<sys>one", [b"!"])
    plan = h.plan(b"<sys>two", tokenize)
    assert plan.reuse == 1 + len(b"<sys>") and plan.tokens == [BOS, *b"<sys>two"]


def test_without_byte_matching_only_the_token_prefix_counts() -> None:
    h = after_generation(b"<p>", [b"ab"])
    plan = h.plan(b"<p>ab!", tokenize, text_reuse=False)
    assert plan.reuse == 4 and plan.tokens == [BOS, *b"<p>ab!"]


def test_an_interrupted_prefill_forgets_the_bytes_but_keeps_the_tokens() -> None:
    h = TokenHistory()
    h.extend_prompt([BOS, *b"<p>he"])  # prefill stopped before set_prompt
    plan = h.plan(b"<p>hello", tokenize)
    assert plan.reuse == 6 and h.prompt is None
