"""`serve()`: the playground under uvicorn, on loopback unless asked otherwise."""

from __future__ import annotations

import ipaddress
import os
import socket
import sys
from collections.abc import Sequence

from ..model import Model
from ..options import Limits
from ..tools import Tool
from ._app import DEFAULT_INSTRUCTIONS, create_app

__all__ = ["LOOPBACK_NAMES", "is_loopback", "serve"]

LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1")
"""The host names a loopback-bound playground answers to (others are refused: DNS rebinding)."""


def is_loopback(host: str) -> bool:
    """Whether `host` is a loopback address (or `localhost`)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def serve(
    *,
    model: Model | str | os.PathLike[str] = "smollm2-instruct",
    host: str = "127.0.0.1",
    port: int = 8000,
    tools: Sequence[Tool] | None = None,
    instructions: str = DEFAULT_INSTRUCTIONS,
    limits: Limits | None = None,
    temperature: float | None = 0.0,
    model_name: str | None = None,
    log_level: str = "warning",
) -> None:
    """Serve the playground until interrupted (Ctrl+C), printing its address on stdout.

    Args:
        model: A `Model` shared by every session, or a name or GGUF path for
            `aerix.load` (loaded once, before serving).
        host: The address to bind. Only loopback by default: any other host
            lets whoever reaches it run the model and the tools, and prints
            a warning on stderr.
        port: The port; 0 picks a free one.
        tools: The pickable tools (default: the demo tools).
        instructions: The default instructions.
        limits: The default limits.
        temperature: The default temperature.
        model_name: Shown in the page's header (default: the name or path
            given, or the model's class name).
        log_level: uvicorn's log level.

    Raises:
        AerixError: `kind="options"` for bad defaults or tools (as `create_app`).
        FileNotFoundError: A model name or path that `aerix.load` cannot find.
        ImportError: uvicorn, or llama-cpp-python for a model to load, is missing.
        OSError: The port is taken, or the host is not this machine's.
    """
    import uvicorn

    local = is_loopback(host)
    if not local:  # on stderr, as a command's warning: serve() is the playground's command line too
        print(
            f"aerix playground: warning: listening on {host}, not on loopback: anyone who can reach "
            "this machine can run the model and its tools; use 127.0.0.1 unless you mean it",
            file=sys.stderr,
            flush=True,
        )
    if isinstance(model, str | os.PathLike):
        from .. import load

        name = os.fspath(model)
        engine: Model = load(model)
    else:
        name, engine = type(model).__name__, model
    app = create_app(
        lambda: engine,
        tools=tools,
        instructions=instructions,
        limits=limits,
        temperature=temperature,
        model_name=name if model_name is None else model_name,
        # a loopback address answers to its own name too (`127.0.0.2`)
        allowed_hosts=list(dict.fromkeys((*LOOPBACK_NAMES, host.strip("[]")))) if local else None,
    )
    sock = _bind(host, port)
    bound_port = sock.getsockname()[1]
    shown = f"[{host.strip('[]')}]" if ":" in host else host
    print(f"aerix playground: http://{shown}:{bound_port}/  (Ctrl+C to stop)", flush=True)
    config = uvicorn.Config(app, log_level=log_level, timeout_graceful_shutdown=5)
    uvicorn.Server(config).run(sockets=[sock])


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host.strip("[]"), port))
    sock.set_inheritable(True)
    return sock
