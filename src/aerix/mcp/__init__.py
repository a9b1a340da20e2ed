"""Tools from MCP servers: an agent calls an MCP server's tools like its own.

```python
from aerix.mcp import MCPServer

async with MCPServer.stdio("python", ["server.py"]) as server:  # or MCPServer.http(url)
    agent = Agent(model=engine, tools=server.tools)
```

Needs the official MCP SDK, version 2: `pip install 'aerix[mcp]'`.
"""

from __future__ import annotations

from importlib import metadata

try:
    import mcp as _sdk  # noqa: F401  (the SDK: checked here, used by the modules below)
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError("aerix.mcp needs the MCP SDK (the mcp package): pip install 'aerix[mcp]'") from exc


def _major(version: str) -> int:
    try:
        return int(version.split(".")[0])
    except ValueError:
        return 0


try:
    _VERSION = metadata.version("mcp")
except metadata.PackageNotFoundError:  # pragma: no cover - an SDK on the path but not installed
    _VERSION = "2"
if _major(_VERSION) < 2:  # pragma: no cover - depends on the environment
    raise ImportError(
        f"aerix.mcp needs version 2 of the MCP SDK, but mcp {_VERSION} is installed: "
        "pip install -U 'aerix[mcp]'"
    )

from ._names import aerix_name  # noqa: E402
from ._results import MCPServerError, MCPToolError  # noqa: E402
from ._server import DEFAULT_TIMEOUT, MCPServer  # noqa: E402

__all__ = ["DEFAULT_TIMEOUT", "MCPServer", "MCPServerError", "MCPToolError", "aerix_name"]
