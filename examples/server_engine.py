"""An agent on a model served over HTTP: llama-server, vLLM, SGLang, Ollama.

`OpenAICompatible` speaks the OpenAI chat-completions API. The agent loop stays
in this process; the model runs on the server, which decodes every turn under
the turn's JSON schema (structured outputs), as the local engine does.

Start a server, then run this with its base URL and the model it serves
(default: llama-server's address, http://127.0.0.1:8080/v1, which answers to
any model name):

    pip install 'aerix[server]'
    llama-server -m models/qwen2.5-7b-instruct-q4_k_m.gguf --port 8080
    python examples/server_engine.py

    vllm serve Qwen/Qwen2.5-7B-Instruct --port 8000
    python examples/server_engine.py http://127.0.0.1:8000/v1 Qwen/Qwen2.5-7B-Instruct
"""

import asyncio
import sys

from aerix import Agent, tool
from aerix.engines import OpenAICompatible


@tool
def weather(city: str) -> str:
    """Today's forecast for a city.

    Args:
        city: The city's name, e.g. Lisbon
    """
    return f"{city}: light rain, 16°C"


async def main(base_url: str, model: str) -> None:
    async with OpenAICompatible(base_url, model) as engine:
        agent = Agent(model=engine, tools=[weather], generation={"temperature": 0})
        answer = await agent.ask("Should I take an umbrella to Porto today?")
    calls = [f"{ev.tool}({ev.input})" for ev in answer.events if ev.type == "call"]
    usage = [ev for ev in answer.events if ev.type == "usage"]
    print(f"calls: {', '.join(calls) or 'none'}")
    print(
        f"tokens: {sum(u.prompt_tokens for u in usage)} in "
        f"({sum(u.cached_tokens for u in usage)} from the server's cache), "
        f"{sum(u.completion_tokens for u in usage)} out, in {len(usage)} generations"
    )
    print(f"final: {answer.text}")


if __name__ == "__main__":
    base_url = sys.argv[1] if len(sys.argv) > 1 else "http://127.0.0.1:8080/v1"
    model = sys.argv[2] if len(sys.argv) > 2 else "default"
    asyncio.run(main(base_url, model))
