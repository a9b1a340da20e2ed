"""`aerix playground`: a page on loopback that runs an agent and shows its events as they stream.

`create_app(model_factory, ...)` gives the ASGI app (Starlette); `serve(...)`
runs it under uvicorn on 127.0.0.1. Needs the `playground` extra:
`pip install 'aerix[playground]'`.
"""

from __future__ import annotations

try:
    import starlette  # noqa: F401
    import uvicorn  # noqa: F401
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        f"the playground needs Starlette and uvicorn ({exc.name} is missing); "
        "install them with: pip install 'aerix[playground]'"
    ) from exc

from ._app import create_app
from ._serve import serve

__all__ = ["create_app", "serve"]
