"""An MCP server that lists whatever tools its argument gives, as raw MCP tool objects.

`python listed.py '[{"name": "t", "inputSchema": {...}}]'` serves over stdio the tools of that
JSON list, each call answered with `ok` and its arguments (a tool named `rpc_error` with a
JSON-RPC error of code -32000, which JSON-RPC leaves to a server's own errors): for the
schemas, names and answers that a server built with the SDK's decorators never writes.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

import mcp.server.stdio
import mcp_types as types
from mcp.server.lowlevel.server import Server
from mcp.shared.exceptions import MCPError

TOOLS = [types.Tool(**t) for t in json.loads(sys.argv[1])]


async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
    return types.ListToolsResult(tools=TOOLS)


async def call_tool(ctx: Any, params: Any) -> types.CallToolResult:
    if params.name == "rpc_error":
        raise MCPError(code=-32000, message="custom rpc failure")
    return types.CallToolResult(content=[types.TextContent(type="text", text=f"ok {params.arguments}")])


async def main() -> None:
    server = Server("listed", on_list_tools=list_tools, on_call_tool=call_tool)
    async with mcp.server.stdio.stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    asyncio.run(main())
