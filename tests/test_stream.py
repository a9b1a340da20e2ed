"""One model reply against the stream protocol (`aerix._stream`): text deltas, then one done delta."""

from __future__ import annotations

import pytest

from aerix import AbortController, AbortSignal, Delta, Usage, UsageEvent
from aerix._guard import Aborted
from aerix._stream import Reply


def play(reply: Reply, *deltas: Delta) -> list[str]:
    """Hand the deltas to the reply as the loop does: each one's text, then whether it is the done one."""
    texts = []
    for d in deltas:
        texts.append(reply.take(d))
        reply.note(d)
    return texts


def signal(aborted: bool = False) -> AbortSignal:
    controller = AbortController()
    if aborted:
        controller.abort()
    return controller.signal


def test_a_reply_keeps_its_text_whether_it_was_cut_and_its_usage() -> None:
    reply = Reply()
    usage = Usage(prompt_tokens=30, completion_tokens=2, cached_tokens=20)
    assert play(reply, Delta(text="{"), Delta(), Delta(text="}", done=True, usage=usage)) == ["{", "", "}"]
    reply.end(signal())
    assert reply.text == "{}" and not reply.cut
    assert reply.usage() == UsageEvent(prompt_tokens=30, completion_tokens=2, cached_tokens=20)


def test_a_cut_reply_and_a_done_delta_without_usage() -> None:
    reply = Reply()
    play(reply, Delta(text='{"fi'), Delta(done=True, finish="length"))
    reply.end(signal())
    assert reply.cut and reply.text == '{"fi'
    assert reply.usage() == UsageEvent(prompt_tokens=0, completion_tokens=0, cached_tokens=0)


def test_a_delta_after_the_done_delta_is_refused() -> None:
    reply = Reply()
    play(reply, Delta(done=True))
    with pytest.raises(RuntimeError, match="the model sent a delta after its done delta"):
        reply.take(Delta(text="more"))


@pytest.mark.parametrize("text", [5, None, b"bytes"])
def test_a_delta_whose_text_is_not_a_string_is_refused(text: object) -> None:
    with pytest.raises(TypeError, match=f"the model sent a delta whose text is {type(text).__name__}"):
        Reply().take(Delta(text=text))  # type: ignore[arg-type]


@pytest.mark.parametrize(("value", "said"), [('{"final":"x"}', "a str"), (7, "an int"), (None, "None")])
def test_a_stream_item_that_is_not_a_delta_is_refused(value: object, said: str) -> None:
    with pytest.raises(TypeError, match=f"the model's stream yielded {said}, not a Delta"):
        Reply().take(value)  # type: ignore[arg-type]


def test_a_stream_must_end_with_its_done_delta_unless_it_was_aborted() -> None:
    reply = Reply()
    play(reply, Delta(text='{"final":"x"}'))
    with pytest.raises(RuntimeError, match="the model's stream ended without its done delta"):
        reply.end(signal())
    with pytest.raises(Aborted):  # an engine may end its stream when the run is aborted
        reply.end(signal(aborted=True))


def test_the_done_flag_is_read_only_after_the_text_is_handed_on() -> None:
    class TextOnly:
        """A delta-like object of a broken engine: it has a text, but no `done`."""

        text = "hi"

    reply = Reply()
    assert reply.take(TextOnly()) == "hi"  # type: ignore[arg-type]  # the text event goes out first
    with pytest.raises(AttributeError):
        reply.note(TextOnly())  # type: ignore[arg-type]
