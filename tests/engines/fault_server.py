"""A tiny HTTP/1.1 server on 127.0.0.1 that misbehaves on purpose.

Each test gives a handler that decides, per request, what to send: a scripted
event stream, an error status, nothing at all, or half a stream. The server
records every request and notices when a client hangs up.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

__all__ = ["Conn", "FaultServer", "Handler", "Request", "chunk", "closed_port", "sse_body"]


@dataclass
class Request:
    """One request as the server received it."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class Conn:
    """One request being answered, with helpers to answer it (well or badly)."""

    request: Request
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    server: FaultServer
    keep_alive: bool = field(default=True)

    async def send(
        self, status: int, body: bytes | str, content_type: str = "application/json", **headers: str
    ) -> None:
        """A complete response with a Content-Length."""
        data = body.encode() if isinstance(body, str) else body
        extra = "".join(f"{k.replace('_', '-')}: {v}\r\n" for k, v in headers.items())
        head = (
            f"HTTP/1.1 {status} X\r\ncontent-type: {content_type}\r\n"
            f"content-length: {len(data)}\r\n{extra}\r\n"
        )
        self.writer.write(head.encode() + data)
        await self.writer.drain()

    async def start_stream(self) -> None:
        """The headers of a chunked `text/event-stream` response."""
        self.writer.write(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
        )
        await self.writer.drain()

    async def write(self, text: str) -> None:
        """Raw stream text, framed as one HTTP chunk."""
        data = text.encode()
        self.writer.write(b"%x\r\n%s\r\n" % (len(data), data))
        await self.writer.drain()

    async def event(self, data: dict[str, Any] | str) -> None:
        """One `data:` event (a dict is sent as JSON)."""
        await self.write(f"data: {data if isinstance(data, str) else json.dumps(data)}\n\n")

    async def end(self) -> None:
        """End the chunked body properly."""
        self.writer.write(b"0\r\n\r\n")
        await self.writer.drain()

    async def cut(self) -> None:
        """Close the connection in the middle of the body."""
        self.keep_alive = False
        self.writer.close()

    async def stall(self) -> None:
        """Send nothing more; return once the client hangs up."""
        self.keep_alive = False
        with contextlib.suppress(ConnectionError):
            while await self.reader.read(1024):
                pass
        self.server.disconnected.set()


Handler = Callable[[Conn], Awaitable[None]]


class FaultServer:
    """An asyncio HTTP server on 127.0.0.1 (a free port), answering with `handler`.

    Use as `async with FaultServer(handler) as server:`; `server.base_url`
    ends in `/v1` as an OpenAI base URL does.
    """

    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.requests: list[Request] = []
        self.connections = 0
        self.disconnected = asyncio.Event()
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._writers: set[asyncio.StreamWriter] = set()
        self.base_url = ""

    async def __aenter__(self) -> FaultServer:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        port = self._server.sockets[0].getsockname()[1]
        self.base_url = f"http://127.0.0.1:{port}/v1"
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        assert self._server is not None
        self._server.close()
        # Hang up on every client (a handler waiting for its next request then ends on
        # its own: cancelling it would make asyncio's streams log an error).
        for writer in self._writers:
            writer.close()
        tasks = list(self._tasks)
        if tasks:
            _, pending = await asyncio.wait(tasks, timeout=5)
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
        await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        self._writers.add(writer)
        self.connections += 1
        try:
            while True:
                request = await _read_request(reader)
                if request is None:
                    return
                self.requests.append(request)
                conn = Conn(request=request, reader=reader, writer=writer, server=self)
                await self.handler(conn)
                if not conn.keep_alive:
                    return
        except (ConnectionError, asyncio.IncompleteReadError):
            self.disconnected.set()
        finally:
            self._tasks.discard(task)
            self._writers.discard(writer)
            writer.close()


async def _read_request(reader: asyncio.StreamReader) -> Request | None:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError:
        return None
    lines = head.decode("latin-1").split("\r\n")
    method, path, _ = lines[0].split(" ", 2)
    headers = {}
    for line in lines[1:]:
        if line:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
    body = await reader.readexactly(int(headers.get("content-length", "0")))
    return Request(method=method, path=path, headers=headers, body=body)


def chunk(
    text: str | None = None,
    *,
    finish: str | None = None,
    usage: dict[str, Any] | None = None,
    role: bool = False,
) -> dict[str, Any]:
    """A `chat.completion.chunk` as vLLM or OpenAI stream it."""
    delta: dict[str, Any] = {}
    if role:
        delta["role"] = "assistant"
    if text is not None:
        delta["content"] = text
    out: dict[str, Any] = {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "model": "m",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    if usage is not None:
        out["choices"] = []
        out["usage"] = usage
    return out


def sse_body(*texts: str, finish: str = "stop", usage: dict[str, Any] | None = None) -> list[str]:
    """The `data:` payloads of a whole, well-formed stream."""
    events = [json.dumps(chunk("", role=True))]
    events += [json.dumps(chunk(t)) for t in texts]
    events.append(json.dumps(chunk(finish=finish)))
    if usage is not None:
        events.append(json.dumps(chunk(usage=usage)))
    events.append("[DONE]")
    return events


def closed_port() -> int:
    """A loopback port with nothing listening on it."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port
