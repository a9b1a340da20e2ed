"""Testing an agent with `ScriptedModel`: no model file, no network, no waiting.

`ScriptedModel` plays the model's turns from a script and records what the
agent sent it, so a test pins down what your code does with each turn: which
tool ran with which input, what a hook refused, what the model was told next.
Run these tests with pytest, or as a script:

    pytest examples/testing_agent.py
    python examples/testing_agent.py
"""

import json

from aerix import Agent, Call, Model, tool
from aerix.testing import Cut, ScriptedModel


@tool
def refund(order: str, amount: float) -> str:
    """Refund an order.

    Args:
        order: The order's id, e.g. A-1001
        amount: How much to refund, in euros
    """
    return f"refunded {amount:.2f} EUR on {order}"


def at_most_100(call: Call) -> dict[str, str] | None:
    """The rule under test: a refund above 100 EUR is for a person to decide."""
    return {"deny": "above 100 EUR, a person decides"} if call.input["amount"] > 100 else None


def support_agent(model: Model) -> Agent:
    """The agent under test, on whatever model it is given."""
    return Agent(model=model, tools=[refund], hooks={"before_call": at_most_100})


def refund_turn(order: str, amount: float) -> str:
    """The model's turn that calls `refund`, as the model writes it."""
    return json.dumps({"calls": [{"tool": "refund", "input": {"order": order, "amount": amount}}]})


def test_a_small_refund_runs() -> None:
    model = ScriptedModel([refund_turn("A-1001", 25), '{"final":"Done."}'])
    answer = support_agent(model).ask_sync("Please refund 25 EUR on order A-1001.")
    assert [ev.text for ev in answer.events if ev.type == "result"] == ["refunded 25.00 EUR on A-1001"]
    assert answer.text == "Done."


def test_a_large_refund_is_refused_and_the_model_is_told() -> None:
    model = ScriptedModel([refund_turn("A-1002", 500), '{"final":"A colleague will decide."}'])
    answer = support_agent(model).ask_sync("Refund 500 EUR on A-1002.")
    (result,) = [ev for ev in answer.events if ev.type == "result"]
    assert result.error and result.text == "refused: above 100 EUR, a person decides"
    assert result.text in model.calls[1].messages[-1]["content"]  # the next generation was told


def test_a_turn_cut_at_max_tokens_is_asked_again() -> None:
    model = ScriptedModel([Cut(), '{"final":"Which order?"}'])
    answer = support_agent(model).ask_sync("I want my money back.")
    assert [ev.type for ev in answer.events if ev.type in ("retry", "final")] == ["retry", "final"]
    assert all("constraint" in call.opts for call in model.calls)  # every turn decoded under a schema


if __name__ == "__main__":
    for name, test in list(globals().items()):
        if name.startswith("test_"):
            test()
            print(f"passed: {name}")
