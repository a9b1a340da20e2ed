"""A process that reads its stdin and never answers: an MCP server that hangs in the handshake."""

import sys

for _line in sys.stdin:
    pass
