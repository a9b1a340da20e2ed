"""An MCP server for aerix's tests, written with the SDK's own server class.

`python kit.py` serves over stdio; `python kit.py --http PORT` over streamable HTTP
on 127.0.0.1:PORT (path `/mcp`); `--clash` adds two tools whose names map to one
aerix name; `--banner` first prints two lines on stdout that are not MCP (a banner, then
JSON that is no JSON-RPC message), as some servers do. The tools: a flat one, a nested one, one that fails (`isError`), one
that hangs until the client cancels it (it adds `cancelled` to the file named by
`$AERIX_MCP_MARK` each time it is), one that ends the server's process, one with
structured content and no text, and one whose name aerix must map. With
`$AERIX_MCP_TOKEN` set, HTTP requests need `Authorization: Bearer <token>` (else 401).
"""

from __future__ import annotations

import argparse
import asyncio
import os
from typing import Any, Literal

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult, ImageContent, TextContent
from pydantic import BaseModel, Field

server = MCPServer("kit", log_level="WARNING")


class Item(BaseModel):
    sku: str = Field(description="The product code")
    qty: int = Field(ge=1, description="How many")


class Address(BaseModel):
    city: str
    zip: str | None = None


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool()
def order(items: list[Item], address: Address, speed: Literal["slow", "fast"] = "slow") -> str:
    """Place an order for some items, shipped to an address."""
    lines = ", ".join(f"{item.qty} x {item.sku}" for item in items)
    return f"ordered {lines} to {address.city} ({speed})"


@server.tool()
def fail(reason: str) -> str:
    """Always fails, with the reason given."""
    raise ToolError(f"failed on purpose: {reason}")


@server.tool()
async def hang() -> str:
    """Never answers, until the client cancels the call."""
    try:
        await asyncio.sleep(3600)
    except asyncio.CancelledError:
        mark = os.environ.get("AERIX_MCP_MARK")
        if mark:
            with open(mark, "a", encoding="utf-8") as f:
                f.write("cancelled")
        raise
    return "woke up"


@server.tool()
def crash() -> str:
    """Ends the server's process at once, without an answer."""
    os._exit(3)


@server.tool()
def stats() -> CallToolResult:
    """Structured content only, no text."""
    return CallToolResult(content=[], structured_content={"count": 3, "ok": True})


@server.tool()
def picture() -> CallToolResult:
    """Two texts around an image."""
    return CallToolResult(
        content=[
            TextContent(type="text", text="before"),
            ImageContent(type="image", data="AAAA", mime_type="image/png"),
            TextContent(type="text", text="after"),
        ]
    )


@server.tool(name="Get-Weather.v2")
def get_weather(city: str) -> str:
    """A name with capitals, a dash and a dot."""
    return f"Sunny in {city}"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--http", type=int, metavar="PORT")
    parser.add_argument("--clash", action="store_true")
    parser.add_argument("--banner", action="store_true")
    args = parser.parse_args()
    if args.banner:
        print("starting up...", flush=True)
        print('{"status": "ready"}', flush=True)
    if args.clash:
        server.add_tool(lambda: "one", name="get-data", description="one")
        server.add_tool(lambda: "two", name="Get_Data", description="two")
    token = os.environ.get("AERIX_MCP_TOKEN")
    if args.http is None:
        server.run()
    elif token is None:
        server.run("streamable-http", host="127.0.0.1", port=args.http)
    else:  # every request needs `Authorization: Bearer <token>`, else 401
        import uvicorn

        app = server.streamable_http_app()

        async def guarded(scope: Any, receive: Any, send: Any) -> None:
            if (
                scope["type"] == "http"
                and dict(scope["headers"]).get(b"authorization") != f"Bearer {token}".encode()
            ):
                await send(
                    {
                        "type": "http.response.start",
                        "status": 401,
                        "headers": [(b"content-type", b"text/plain")],
                    }
                )
                await send({"type": "http.response.body", "body": b"unauthorized"})
                return
            await app(scope, receive, send)

        uvicorn.run(guarded, host="127.0.0.1", port=args.http, log_level="warning")


if __name__ == "__main__":
    main()
