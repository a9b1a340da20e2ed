"""A small MCP server, written with the MCP SDK's own server class: the examples' server.

Run it over stdio (`python weather_server.py`) or streamable HTTP
(`python weather_server.py --http 8000`, at http://127.0.0.1:8000/mcp).
"""

import sys
from typing import Literal

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

server = MCPServer("weather", log_level="WARNING")

FORECASTS = {"lisbon": (21, "sunny"), "porto": (17, "cloudy"), "oslo": (-3, "snowing")}


@server.tool()
def forecast(city: str, unit: Literal["c", "f"] = "c") -> str:
    """Today's forecast for a city."""
    if city.lower() not in FORECASTS:
        raise ToolError(f"no forecast for {city!r}; the cities are {', '.join(FORECASTS)}")
    degrees, sky = FORECASTS[city.lower()]
    if unit == "f":
        degrees = round(degrees * 9 / 5 + 32)
    return f"{city}: {sky}, {degrees}°{unit.upper()}"


@server.tool(name="list-cities")
def list_cities() -> list[str]:
    """The cities with a forecast."""
    return sorted(FORECASTS)


if __name__ == "__main__":
    if "--http" in sys.argv:
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[sys.argv.index("--http") + 1]))
    else:
        server.run()
