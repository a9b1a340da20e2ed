"""A small MCP server for examples/mcp_tools.py, written with the official MCP SDK.

The SDK's `MCPServer` (called FastMCP before version 2) turns each decorated
function into a tool: its name, docstring and signature become the tool's
name, description and input schema. `mcp_tools.py` starts this file itself;
to run it alone, speaking MCP on stdin and stdout:

    pip install 'aerix[mcp]'
    python examples/mcp_server.py
"""

from typing import Literal

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

server = MCPServer("shop", log_level="WARNING")

Product = Literal["lamp", "chair", "desk"]
STOCK = {"lamp": 12, "chair": 0, "desk": 3}
PRICES = {"lamp": 39.5, "chair": 120.0, "desk": 310.0}


@server.tool()
def stock(product: Product) -> str:
    """How many of a product are in stock."""
    return f"{STOCK[product]} {product}s in stock"


@server.tool()
def price(product: Product, quantity: int = 1) -> str:
    """The price of a quantity of a product, in euros."""
    if quantity < 1:
        raise ToolError(f"quantity must be 1 or more, got {quantity}")
    return f"{quantity} x {product}: {PRICES[product] * quantity:.2f} EUR"


if __name__ == "__main__":
    server.run()
