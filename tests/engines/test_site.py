"""Where a call's tool name and input sit (`rules._site.CallSite`), as the hand-over says."""

from __future__ import annotations

import pytest

from aerix.engines.llamacpp.rules._json_cursor import JsonCursor
from aerix.engines.llamacpp.rules._site import CallSite
from aerix.model import Handover

SITE = CallSite(("calls", None, "tool"), ("calls", None, "input"))


def at(text: str) -> JsonCursor:
    c = JsonCursor()
    c.feed(text)
    return c


@pytest.mark.parametrize(
    ("text", "in_call", "at_tool"),
    [
        ('{"calls":[{"tool":"', True, True),
        ('{"calls":[{"tool":', True, True),
        ('{"calls":[{"tool":"w","input":{"city":"', True, False),
        ('{"calls":[{"tool":"w","input":{"a":[{"tool":"', True, False),  # a field named so in the input
        ('{"final":"', False, False),
        ('{"final":{"tool":"', False, False),  # a typed answer's field
        ('{"thought":"', False, False),
    ],
)
def test_the_rules_act_where_the_site_puts_calls(text: str, in_call: bool, at_tool: bool) -> None:
    assert (SITE.in_call(at(text)), SITE.at_tool(at(text))) == (in_call, at_tool)


def test_without_calls_every_nested_object_counts_as_a_calls() -> None:
    bare = CallSite.of(None)
    assert bare == CallSite() and bare.call is None and bare.input_key is None
    assert bare.in_call(at('{"person":{"name":"')) and bare.in_call(at('{"final":{"tool":"'))
    assert not bare.in_call(at('{"name":"')) and not bare.at_tool(at('{"calls":[{"tool":"'))


def test_the_site_comes_from_the_hand_over() -> None:
    site = CallSite.of(Handover(tool_path=("steps", None, "name"), input_path=("steps", None, "args")))
    assert (site.call, site.tool_key, site.input_key) == (("steps", None), "name", "args")
    assert site.at_tool(at('{"steps":[{"name":"')) and not site.at_tool(at('{"calls":[{"tool":"'))
    assert CallSite(("a", "tool"), ("b", "input")).call is None  # not the fields of one object
