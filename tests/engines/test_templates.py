"""Chat templates render as Hugging Face's do: HF's Jinja features, the system-role
fallback, real templates of the common families, and the errors of bad ones."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("jinja2", reason="chat templates need aerix[llama]")

from aerix.engines.llamacpp._template import ChatTemplate
from aerix.model import ChatMessage

TEMPLATES = Path(__file__).parent.parent / "fixtures" / "chat_templates"

SYSTEM: ChatMessage = {"role": "system", "content": "You call tools."}
ASK: ChatMessage = {"role": "user", "content": "What is the weather in Paris?"}
REPLY: ChatMessage = {"role": "assistant", "content": '{"final": "Sunny"}'}
AGAIN: ChatMessage = {"role": "user", "content": "And in Rome?"}

OPENERS = {
    "chatml": "<|im_start|>assistant\n",
    "deepseek-r1": "<｜Assistant｜><think>\n",
    "gemma-3": "<start_of_turn>model\n",
    "granite-3.0": "<|start_of_role|>assistant<|end_of_role|>",
    "granite-3.3": "<|start_of_role|>assistant<|end_of_role|>",
    "llama-3.2": "<|start_header_id|>assistant<|end_header_id|>\n\n",
    "mistral-nemo": "[/INST]",
    "mixtral-8x7b": "[/INST]",
    "phi-4-mini": "<|assistant|>",
    "qwen-2.5": "<|im_start|>assistant\n",
    "qwen-3": "<|im_start|>assistant\n",
}
"""How each real template opens the assistant's turn (Mistral's write no separate opener)."""

SYSTEM_MOVES = {"mistral-nemo"}
"""Templates that write the system text into the last user message, so that it moves each turn."""

OPENER_DROPPED = {"deepseek-r1"}
"""Templates whose generation prompt is not kept in the history (R1 opens `<think>`)."""


def template(name: str) -> str:
    return (TEMPLATES / f"{name}.jinja").read_text(encoding="utf-8")


def render(source: str, messages: list[ChatMessage], **kwargs: Any) -> str:
    return ChatTemplate(source, bos_token="<s>", eos_token="</s>").render(messages, **kwargs)


def test_every_fixture_is_covered() -> None:
    assert sorted(p.stem for p in TEMPLATES.glob("*.jinja")) == sorted(OPENERS)


# -- Hugging Face's rendering ------------------------------------------------------------


def test_loop_controls() -> None:
    source = (
        "{% for m in messages %}{% if m.role == 'system' %}{% continue %}{% endif %}"
        "{% if loop.index > 3 %}{% break %}{% endif %}{{ m.content }};{% endfor %}"
    )
    assert render(source, [SYSTEM, ASK, REPLY, AGAIN]) == f"{ASK['content']};{REPLY['content']};"


@pytest.mark.parametrize(
    "call, kwargs",
    [
        ("tojson", {}),
        ("tojson(indent=2)", {"indent": 2}),
        ("tojson(separators=(',', ':'))", {"separators": (",", ":")}),
        ("tojson(sort_keys=true)", {"sort_keys": True}),
        ("tojson(ensure_ascii=true)", {"ensure_ascii": True}),
        ("tojson(indent=4, sort_keys=true, separators=(',', ': '))", {"indent": 4, "sort_keys": True}),
    ],
)
def test_tojson_is_json_dumps_with_its_arguments(call: str, kwargs: dict[str, Any]) -> None:
    value = {"z": "<b>é & 'q'</b>", "a": [1, 2.5, None, True]}
    source = "{% set v = {'z': \"<b>é & 'q'</b>\", 'a': [1, 2.5, none, true]} %}{{ v | " + call + " }}"
    kwargs.setdefault("ensure_ascii", False)
    assert render(source, [ASK]) == json.dumps(value, **kwargs)


def test_tojson_does_not_escape_html() -> None:
    # Jinja's own tojson writes \u003c for "<" and \u0027 for "'": HF's and aerix's do not.
    assert render("{{ messages[0] | tojson }}", [{"role": "user", "content": "<a href='x'>"}]) == (
        '{"role": "user", "content": "<a href=\'x\'>"}'
    )


def test_raise_exception_is_a_clear_error() -> None:
    source = "{{ raise_exception('Only user and assistant roles are supported!') }}"
    with pytest.raises(ValueError, match="refused the messages") as info:
        render(source, [ASK])
    assert "'Only user and assistant roles are supported!'" in str(info.value)
    assert "chat_template=" in str(info.value)


def test_strftime_now() -> None:
    before = datetime.now().strftime("%Y-%m-%d")
    text = render("{{ strftime_now('%Y-%m-%d') }}", [ASK])
    assert text in {before, datetime.now().strftime("%Y-%m-%d")}


def test_the_generation_block_renders_its_body() -> None:
    source = (
        "{% for m in messages %}{% if m.role == 'assistant' %}"
        "{% generation %}[{{ m.content }}]{% endgeneration %}"
        "{% else %}{{ m.content }}{% endif %}{% endfor %}"
    )
    assert render(source, [ASK, REPLY]) == f"{ASK['content']}[{REPLY['content']}]"


def test_the_generation_block_has_its_own_scope_as_in_hf() -> None:
    source = "{% set x = 'outer' %}{% generation %}{% set x = 'inner' %}{{ x }}{% endgeneration %} {{ x }}"
    assert render(source, [ASK]) == "inner outer"


def test_the_variables_templates_read() -> None:
    source = (
        "{{ bos_token }}|{{ eos_token }}|{{ tools is none }}|{{ documents is none }}|"
        "{{ messages | length }}|{{ messages[0].role }}|{{ messages[0]['content'] }}|"
        "{{ add_generation_prompt }}"
    )
    assert render(source, [ASK]) == f"<s>|</s>|True|True|1|user|{ASK['content']}|True"
    assert render(source, [ASK], add_generation_prompt=False).endswith("|False")


def test_trim_blocks_and_lstrip_blocks() -> None:
    source = "{% for m in messages %}\n    {% if m.role == 'user' %}\n{{ m.content }}\n    {% endif %}\n{% endfor %}\n"
    assert render(source, [ASK, AGAIN]) == f"{ASK['content']}\n{AGAIN['content']}\n"


@pytest.mark.parametrize(
    "source",
    [
        "{{ messages.__class__.__mro__[1].__subclasses__() }}",
        "{{ ''.__class__.__mro__ }}",
        "{% set x = [] %}{{ x.append(1) }}",  # immutable: no mutating methods
        # HF's namespace: no `_` names (a `__html__` there would be called by `|e`)
        "{% macro hook() %}ran{% endmacro %}{% set ns = namespace(__html__=hook) %}{{ ns|e }}",
        "{% set ns = namespace(n=0) %}{% set ns._n = 1 %}",
    ],
)
def test_the_sandbox_refuses_unsafe_templates(source: str) -> None:
    with pytest.raises(ValueError, match="refused by the sandbox") as info:
        render(source, [ASK])
    assert "chat_template=" in str(info.value)


def test_namespace_and_dict_work_as_in_hf() -> None:
    source = (
        "{% set ns = namespace(n=0, self=1) %}{% for m in messages %}{% set ns.n = ns.n + 1 %}{% endfor %}"
        "{{ ns.n }} {{ ns.self }} {{ dict(a=1) | tojson }} {{ dict.fromkeys(['x']) | tojson }}"
    )
    assert render(source, [ASK, REPLY]) == '2 1 {"a": 1} {"x": null}'


def test_a_str_subclass_in_the_messages_reaches_the_template_as_a_plain_str() -> None:
    class Risky(str):
        def tofile(self, path: str) -> str:  # numpy's `str_` has one, which writes a file
            return "a file written"

    message: ChatMessage = {"role": Risky("user"), "content": Risky("hi")}  # type: ignore[typeddict-item]
    assert render("{{ messages[0].role }}: {{ messages[0].content }}", [message]) == "user: hi"
    with pytest.raises(ValueError, match="'str object' has no attribute 'tofile'"):
        render("{{ messages[0].content.tofile('x') }}", [message])


def test_content_that_is_no_str_reaches_the_template_as_it_is() -> None:
    message: Any = {"role": "user", "content": None}
    assert render("{{ messages[0].content }}|{{ messages[0].content is none }}", [message]) == "None|True"


@pytest.mark.parametrize(
    "source", ["{{ " + "(" * 80 + "1" + ")" * 80 + " }}", "{% if 1 %}" * 300 + "x" + "{% endif %}" * 300]
)
def test_a_template_that_nests_too_deeply_to_parse_is_a_value_error(source: str) -> None:
    with pytest.raises(ValueError, match="does not compile \\(it nests too deeply to parse\\)") as info:
        ChatTemplate(source, name="the chat template of 'model.gguf'")
    assert "LlamaCpp(..., chat_template=...)" in str(info.value)


def test_a_failing_template_names_its_line_and_error() -> None:
    source = "{{ bos_token }}\n{% for m in messages %}\n{{ m.content + 1 }}\n{% endfor %}"
    with pytest.raises(ValueError, match=r"failed on the messages \(line 3: TypeError") as info:
        render(source, [ASK])
    assert "chat_template=" in str(info.value)


@pytest.mark.parametrize(
    "source, line",
    [("{% for m in messages %}{{ m.content }}", 1), ("{{ bos_token }}\n\n{% if %}x{% endif %}", 3)],
)
def test_a_template_that_does_not_compile_names_its_line(source: str, line: int) -> None:
    with pytest.raises(ValueError, match=f"does not compile \\(line {line}:") as info:
        ChatTemplate(source, name="the chat template of 'model.gguf'")
    message = str(info.value)
    assert message.startswith("the chat template of 'model.gguf' does not compile")
    assert "LlamaCpp(..., chat_template=...)" in message


@pytest.mark.parametrize("source", ["{% break %}", "{{ bos_token }}{% continue %}"])
def test_a_template_python_cannot_compile_is_a_value_error_too(source: str) -> None:
    # Jinja parses a loop control outside a loop; Python's compiler refuses the code it makes
    with pytest.raises(ValueError, match="outside loop|not properly in loop") as info:
        ChatTemplate(source, name="the chat template of 'model.gguf'")
    message = str(info.value)
    assert message.startswith("the chat template of 'model.gguf' does not compile")
    assert "LlamaCpp(..., chat_template=...)" in message


def test_errors_use_the_template_s_name() -> None:
    t = ChatTemplate("{{ raise_exception('no') }}", name="the chat template of 'x.gguf'")
    with pytest.raises(ValueError, match=r"^the chat template of 'x.gguf' refused the messages: 'no'"):
        t.render([ASK])


# -- a template that refuses the system role ---------------------------------------------


def test_a_template_that_refuses_the_system_role_gets_it_in_the_first_user_message() -> None:
    t = ChatTemplate(template("mixtral-8x7b"), bos_token="<s>", eos_token="</s>")
    assert t.merges_system is None
    assert t.render([ASK]) == f"<s>[INST] {ASK['content']} [/INST]"
    assert t.merges_system is None  # no system message yet: nothing decided
    assert t.render([SYSTEM, ASK]) == f"<s>[INST] {SYSTEM['content']}\n\n{ASK['content']} [/INST]"
    assert t.merges_system is True
    later = t.render([SYSTEM, ASK, REPLY, AGAIN])
    assert later == (
        f"<s>[INST] {SYSTEM['content']}\n\n{ASK['content']} [/INST]{REPLY['content']}</s>"
        f"[INST] {AGAIN['content']} [/INST]"
    )
    assert t.render([ASK]) == f"<s>[INST] {ASK['content']} [/INST]"  # no system: unchanged


def test_the_merge_joins_leading_system_messages_and_skips_empty_ones() -> None:
    source = (
        "{% if messages[0].role == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}"
    )
    source += "{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}"
    t = ChatTemplate(source)
    two = [SYSTEM, {"role": "system", "content": ""}, {"role": "system", "content": "Be brief."}, ASK]
    assert t.render(two) == f"<user>{SYSTEM['content']}\n\nBe brief.\n\n{ASK['content']}"


def test_the_decision_is_kept_so_that_prompts_stay_prefix_stable() -> None:
    # Refuses a system message only in a two-message conversation.
    source = (
        "{% if messages[0].role == 'system' and messages | length == 2 %}"
        "{{ raise_exception('System role not supported') }}{% endif %}"
        "{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}"
    )
    t = ChatTemplate(source)
    first = t.render([SYSTEM, ASK], add_generation_prompt=False)
    assert t.merges_system is True
    # The template would take this one as it is; it is merged all the same.
    later = t.render([SYSTEM, ASK, REPLY, AGAIN])
    assert later.startswith(first) and "<system>" not in later


def test_two_system_messages_merged_for_once_decide_nothing() -> None:
    """A template that takes a system message but not two in a row (Mistral-Small's
    alternation check) renders those two merged, and the next lone one as it is."""
    source = (
        "{% if messages | length > 1 and messages[1].role == 'system' %}{{ raise_exception('roles must alternate') }}{% endif %}"
        "{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}"
    )
    t = ChatTemplate(source)
    two = [SYSTEM, {"role": "system", "content": "Be brief."}, ASK]
    assert t.render(two) == f"<user>{SYSTEM['content']}\n\nBe brief.\n\n{ASK['content']}"
    assert t.merges_system is None
    assert t.render([SYSTEM, ASK]) == f"<system>{SYSTEM['content']}<user>{ASK['content']}"
    assert t.merges_system is False


def test_a_merged_conversation_the_template_refuses_is_a_clear_error() -> None:
    t = ChatTemplate(template("mixtral-8x7b"))
    t.render([SYSTEM, ASK])
    assert t.merges_system is True
    with pytest.raises(ValueError, match="refused the messages: 'Conversation roles must alternate"):
        t.render([SYSTEM, ASK, AGAIN])


def test_a_template_that_took_a_system_message_never_merges() -> None:
    source = (
        "{% if messages[0].role == 'system' and messages | length == 4 %}"
        "{{ raise_exception('four messages') }}{% endif %}"
        "{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}"
    )
    t = ChatTemplate(source)
    assert t.render([SYSTEM, ASK]) == f"<system>{SYSTEM['content']}<user>{ASK['content']}"
    assert t.merges_system is False
    with pytest.raises(ValueError, match="refused the messages: 'four messages'"):
        t.render([SYSTEM, ASK, REPLY, AGAIN])
    assert t.merges_system is False


def test_a_refusal_for_another_reason_quotes_the_template() -> None:
    t = ChatTemplate(template("mixtral-8x7b"))
    with pytest.raises(ValueError) as info:
        t.render([SYSTEM, ASK, AGAIN])  # two user messages in a row
    message = str(info.value)
    assert (
        "refused the messages: 'Conversation roles must alternate user/assistant/user/assistant/...'"
        in message
    )
    assert "with the system text" not in message  # the same refusal either way: said once
    # the messages may be what is wrong: the fix says so before it names another template
    assert message.endswith(
        "; change the messages, or pass a template that takes them as LlamaCpp(..., chat_template=...)"
    )
    assert t.merges_system is None  # not decided by a conversation it refuses anyway


def test_when_the_merge_fails_too_both_refusals_are_quoted() -> None:
    source = (
        "{% if messages[0].role == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}"
        "{% if messages | length > 1 %}{{ raise_exception('one message only') }}{% endif %}"
    )
    with pytest.raises(ValueError) as info:
        ChatTemplate(source).render([SYSTEM, ASK, REPLY, AGAIN])
    message = str(info.value)
    assert "refused the messages: 'System role not supported'" in message
    assert (
        "with the system text in the first user message refused the messages: 'one message only'" in message
    )


def test_a_lone_system_message_cannot_be_merged() -> None:
    t = ChatTemplate(template("mixtral-8x7b"))
    with pytest.raises(ValueError, match="Conversation roles must alternate"):
        t.render([SYSTEM])
    assert t.merges_system is None


# -- real templates -----------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(OPENERS))
@pytest.mark.parametrize(
    "conversation",
    [[SYSTEM, ASK], [ASK, REPLY, AGAIN], [ASK], [SYSTEM, ASK, REPLY, AGAIN]],
    ids=["system-user", "multi-turn", "no-system", "system-multi-turn"],
)
def test_real_templates_render_every_message_and_end_with_the_opener(
    name: str, conversation: list[ChatMessage]
) -> None:
    text = render(template(name), conversation)
    assert text.endswith(OPENERS[name])
    if name in SYSTEM_MOVES and conversation[0] == SYSTEM:
        assert f"{SYSTEM['content']}\n\n{conversation[-1]['content']}" in text
        conversation = conversation[1:]
    position = 0
    for message in conversation:  # every message's text, in order
        found = text.find(message["content"], position)
        assert found >= 0, f"{message['role']} text missing or out of order"
        position = found + len(message["content"])


@pytest.mark.parametrize("name", sorted(OPENERS))
@pytest.mark.parametrize("system", [True, False], ids=["system", "no-system"])
def test_real_templates_are_prefix_stable(name: str, system: bool) -> None:
    source = template(name)
    before: list[ChatMessage] = [SYSTEM, ASK] if system else [ASK]
    after = [*before, REPLY, AGAIN]
    history = render(source, before, add_generation_prompt=False)
    prompt = render(source, before)
    nxt = render(source, after)
    moves = system and name in SYSTEM_MOVES
    # The conversation so far, without the generation prompt, starts the next prompt.
    assert nxt.startswith(history) is not moves
    # So does the last prompt with the reply written after it (what the KV cache holds).
    assert nxt.startswith(prompt + REPLY["content"]) is not (moves or name in OPENER_DROPPED)


def test_only_the_refusing_template_merges() -> None:
    merging = set()
    for name in OPENERS:
        t = ChatTemplate(template(name), bos_token="<s>", eos_token="</s>")
        t.render([SYSTEM, ASK])
        assert t.merges_system is not None
        if t.merges_system:
            merging.add(name)
    assert merging == {"mixtral-8x7b"}


# -- through the engine -------------------------------------------------------------------

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"final": {"type": "string", "maxLength": 6}},
    "required": ["final"],
    "additionalProperties": False,
}


async def _chat(engine: Any, messages: list[ChatMessage]) -> list[Any]:
    opts = {"max_tokens": 6, "temperature": 0, "constraint": {"json": SCHEMA}}
    return [d async for d in engine.chat(messages, opts)]


@pytest.mark.parametrize("name", sorted(OPENERS))
async def test_real_templates_run_through_the_engine(tiny_gguf: Path, name: str) -> None:
    pytest.importorskip("llama_cpp", reason="the LlamaCpp tests need aerix[llama]")
    from aerix.engines import LlamaCpp

    source = template(name)
    engine = LlamaCpp(tiny_gguf, n_ctx=1024, n_threads=1, chat_template=source)
    try:
        assert engine.chat_template == source
        for conversation in ([SYSTEM, ASK], [SYSTEM, ASK, REPLY, AGAIN]):
            deltas = await _chat(engine, conversation)
            assert deltas[-1].done and deltas[-1].finish in ("stop", "length")
            assert all(not d.done for d in deltas[:-1])
            assert deltas[-1].usage is not None and deltas[-1].usage.completion_tokens <= 6
    finally:
        engine.close()


async def test_a_gguf_s_own_real_template_is_used(make_gguf: Callable[..., Path]) -> None:
    pytest.importorskip("llama_cpp", reason="the LlamaCpp tests need aerix[llama]")
    from aerix.engines import LlamaCpp

    source = template("qwen-3")
    engine = LlamaCpp(make_gguf(chat_template=source), n_ctx=1024, n_threads=1)
    try:
        assert engine.chat_template == source
        assert engine.render([SYSTEM, ASK]) == render(source, [SYSTEM, ASK])
        deltas = await _chat(engine, [SYSTEM, ASK])
        assert deltas[-1].done
    finally:
        engine.close()


async def test_a_gguf_whose_template_refuses_the_system_role_still_runs(
    make_gguf: Callable[..., Path],
) -> None:
    pytest.importorskip("llama_cpp", reason="the LlamaCpp tests need aerix[llama]")
    from aerix.engines import LlamaCpp

    engine = LlamaCpp(make_gguf(chat_template=template("mixtral-8x7b")), n_ctx=1024, n_threads=1)
    try:
        assert f"{SYSTEM['content']}\n\n{ASK['content']}" in engine.render([SYSTEM, ASK])
        deltas = await _chat(engine, [SYSTEM, ASK])
        assert deltas[-1].done
    finally:
        engine.close()


# -- bad templates in a GGUF ----------------------------------------------------------------


def test_a_gguf_without_a_template_names_the_file_and_the_fix(make_gguf: Callable[..., Path]) -> None:
    pytest.importorskip("llama_cpp", reason="the LlamaCpp tests need aerix[llama]")
    from aerix.engines import LlamaCpp

    path = make_gguf(chat_template=None)
    with pytest.raises(ValueError) as info:
        LlamaCpp(path)
    message = str(info.value)
    assert str(path) in message and "chat_template=" in message


def test_a_gguf_whose_template_does_not_compile_names_the_file_the_line_and_the_fix(
    make_gguf: Callable[..., Path],
) -> None:
    pytest.importorskip("llama_cpp", reason="the LlamaCpp tests need aerix[llama]")
    from aerix.engines import LlamaCpp

    path = make_gguf(chat_template="{{ bos_token }}\n{% for m in messages %}\n{{ m.content }\n{% endfor %}")
    with pytest.raises(ValueError) as info:
        LlamaCpp(path)
    message = str(info.value)
    assert str(path) in message
    assert "line 3" in message and "chat_template=" in message


async def test_a_gguf_whose_template_refuses_a_valid_conversation_names_the_file_and_quotes_it(
    make_gguf: Callable[..., Path],
) -> None:
    pytest.importorskip("llama_cpp", reason="the LlamaCpp tests need aerix[llama]")
    from aerix.engines import LlamaCpp

    source = "{{ raise_exception('This model needs a tools list') }}"
    path = make_gguf(chat_template=source)
    engine = LlamaCpp(path, n_ctx=1024, n_threads=1)
    try:
        with pytest.raises(ValueError) as info:
            await _chat(engine, [SYSTEM, ASK])
        message = str(info.value)
        assert str(path) in message
        assert "'This model needs a tools list'" in message and "chat_template=" in message
    finally:
        engine.close()
