"""A fake OpenAI-compatible chat server for the concurrency benchmark.

Run as its own process (`python bench/fake_openai_server.py --port 0`): it
prints `PORT <n>` once listening. Every `POST .../chat/completions` streams a
canned turn as server-sent events over keep-alive HTTP/1.1: while the
conversation holds fewer than `--calls` tool results (user messages after the
first), the turn calls the tool `ping`; then it answers with a final.

Two modes:

- instant (`--pace 0`, the default): the whole turn is written at once, so a
  run takes only aerix's time, the network's and this server's parsing. It
  measures the client's ceiling: its CPU per turn.
- paced (`--pace 0.01 --slots 32`): like an inference server, each turn
  streams its `--tokens` chunks one every `--pace` seconds, and at most
  `--slots` generations run at once (its batch); the rest wait in a queue.
  Waiting costs no CPU, so the server saturates at a known capacity,
  `slots / turn time` turns per second, and not on its own CPU.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time

CALL = '{"calls": [{"tool": "ping", "input": {}}]}'
FINAL = '{"final": "pong"}'


def _events(text: str, tokens: int) -> list[bytes]:
    """The HTTP chunks of a streamed turn, as a vLLM server sends them: the role, `tokens`
    pieces of content, the finish, the usage and `[DONE]`."""
    step = -(-len(text) // tokens)
    parts = [text[i : i + step] for i in range(0, len(text), step)]
    head = {"id": "c", "object": "chat.completion.chunk", "model": "fake"}
    events: list[dict[str, object]] = [
        {**head, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]}
    ]
    events += [{**head, "choices": [{"index": 0, "delta": {"content": p}}]} for p in parts]
    events.append({**head, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    usage: dict[str, object] = {"prompt_tokens": 200, "completion_tokens": len(parts)}
    usage |= {"total_tokens": 200 + len(parts), "prompt_tokens_details": {"cached_tokens": 160}}
    events.append({**head, "choices": [], "usage": usage})
    chunks = []
    for data in [*map(json.dumps, events), "[DONE]"]:
        payload = f"data: {data}\n\n".encode()
        chunks.append(b"%x\r\n%s\r\n" % (len(payload), payload))
    chunks[-1] += b"0\r\n\r\n"
    return chunks


HEAD = (
    "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n"
    "x-received: {:.9f}\r\n\r\n"
)
"""`x-received`: when this server had read the whole request, on the machine's monotonic clock
(`time.monotonic()`, which every process shares), so the client can time its side."""


class Server:
    """Answers each request with a canned turn, at once or paced through a fixed batch."""

    def __init__(self, calls: int, tokens: int, pace: float, slots: int) -> None:
        self.calls = calls
        self.pace = pace
        self.turns = {kind: _events(text, tokens) for kind, text in (("call", CALL), ("final", FINAL))}
        self.batch = asyncio.Semaphore(slots)

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        loop = asyncio.get_running_loop()
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    if line[:15].lower() == b"content-length:":
                        length = int(line[15:])
                raw = await reader.readexactly(length)
                received = time.monotonic()
                # Cheaper than parsing the body: compact JSON (httpx's) writes each user message's
                # role this way, and a quote inside any content is escaped.
                results = raw.count(b'"role":"user"') - 1
                chunks = self.turns["call" if results < self.calls else "final"]
                writer.write(HEAD.format(received).encode())
                if self.pace:
                    async with self.batch:
                        start = loop.time()
                        for i, chunk in enumerate(chunks, 1):  # on a fixed schedule: no drift
                            await asyncio.sleep(start + i * self.pace - loop.time())
                            writer.write(chunk)
                else:
                    writer.write(b"".join(chunks))
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


async def main(args: argparse.Namespace) -> None:
    handler = Server(args.calls, args.tokens, args.pace, args.slots)
    server = await asyncio.start_server(handler.serve, "127.0.0.1", args.port, backlog=1024)
    print("PORT", server.sockets[0].getsockname()[1], flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--calls", type=int, default=5, help="tool calls per run before the final")
    parser.add_argument("--tokens", type=int, default=4, help="content chunks per turn")
    parser.add_argument("--pace", type=float, default=0.0, help="seconds per chunk (0: instant)")
    parser.add_argument("--slots", type=int, default=32, help="generations at once when paced")
    try:
        asyncio.run(main(parser.parse_args()))
    except KeyboardInterrupt:
        sys.exit(0)
