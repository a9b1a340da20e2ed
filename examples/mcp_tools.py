"""An MCP server's tools, used by an agent on the embedded model.

`MCPServer.stdio` starts examples/mcp_server.py as a process of its own and
speaks MCP with it; inside the `async with`, `server.tools` are ordinary aerix
tools, each with the server's description and input schema. Leaving the
block ends the server.

Run it:

    pip install 'aerix[llama,mcp]'
    python examples/mcp_tools.py
"""

import asyncio
import sys
from pathlib import Path

import aerix
from aerix import Agent
from aerix.mcp import MCPServer

SERVER = Path(__file__).with_name("mcp_server.py")


async def main() -> None:
    async with MCPServer.stdio(sys.executable, [str(SERVER)]) as server:
        for t in server.tools:
            print(f"tool {t.name}: {t.description}")
        agent = Agent(
            model=aerix.load("smollm2-instruct"),
            instructions="You are a shop assistant. Use the tools, then answer briefly.",
            tools=server.tools,
            tool_choice="required",
            generation={"temperature": 0},
        )
        answer = await agent.ask("How many lamps are in stock?")
    for ev in answer.events:
        if ev.type in ("call", "result"):
            print(ev.to_dict())
    print(f"final: {answer.text}")


if __name__ == "__main__":
    asyncio.run(main())
