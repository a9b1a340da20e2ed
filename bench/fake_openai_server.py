"""A fast fake OpenAI-compatible chat server for the concurrency benchmark.

Run as its own process (`python bench/fake_openai_server.py --port 0`): it
prints `PORT <n>` once listening. Every `POST .../chat/completions` streams a
canned turn as server-sent events over keep-alive HTTP/1.1: while the
conversation holds fewer than `--calls` tool results (user messages after the
first), the turn calls the tool `ping`; then it answers with a final. Nothing
is generated, so the time a run takes is aerix's, the network's and this
server's parsing.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time

CALL = '{"calls": [{"tool": "ping", "input": {}}]}'
FINAL = '{"final": "pong"}'


def _stream(text: str, pieces: int = 4) -> bytes:
    """The whole chunked body of a streamed turn, as a vLLM server would send it."""
    step = max(1, len(text) // pieces)
    parts = [text[i : i + step] for i in range(0, len(text), step)]
    head = {"id": "c", "object": "chat.completion.chunk", "model": "fake"}
    events = [{**head, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]}]
    events += [{**head, "choices": [{"index": 0, "delta": {"content": p}}]} for p in parts]
    events.append({**head, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    usage = {"prompt_tokens": 200, "completion_tokens": len(parts), "total_tokens": 200 + len(parts)}
    usage["prompt_tokens_details"] = {"cached_tokens": 160}  # type: ignore[assignment]
    events.append({**head, "choices": [], "usage": usage})
    body = b""
    for data in [*map(json.dumps, events), "[DONE]"]:
        payload = f"data: {data}\n\n".encode()
        body += b"%x\r\n%s\r\n" % (len(payload), payload)
    return body + b"0\r\n\r\n"


HEAD = (
    "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n"
    "x-received: {:.9f}\r\n\r\n"
)
"""`x-received`: when this server had read the whole request, on the machine's monotonic clock
(`time.monotonic()`, which every process shares), so the client can time its side."""


async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, calls: int) -> None:
    call_turn, final_turn = _stream(CALL), _stream(FINAL)
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            length = 0
            for line in head.split(b"\r\n"):
                if line[:15].lower() == b"content-length:":
                    length = int(line[15:])
            raw = await reader.readexactly(length)
            received = time.monotonic()
            body = json.loads(raw)
            results = sum(1 for m in body["messages"] if m["role"] == "user") - 1
            writer.write(HEAD.format(received).encode() + (call_turn if results < calls else final_turn))
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()


async def main(port: int, calls: int) -> None:
    server = await asyncio.start_server(lambda r, w: serve(r, w, calls), "127.0.0.1", port, backlog=1024)
    print("PORT", server.sockets[0].getsockname()[1], flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--calls", type=int, default=5, help="tool calls per run before the final")
    args = parser.parse_args()
    try:
        asyncio.run(main(args.port, args.calls))
    except KeyboardInterrupt:
        sys.exit(0)
