"""What the tests against real OpenAI-compatible servers share: a loopback port, a server
process run until the test module ends, and a small structured-output request."""

from __future__ import annotations

import socket
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from aerix.model import ChatMessage

READY_WITHIN = 120.0
"""Seconds a server may take to load the model and answer."""

WEATHER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "city": {"type": "string"},
        "temperature": {"type": "integer"},
        "sky": {"enum": ["sunny", "cloudy", "rain"]},
    },
    "required": ["city", "temperature", "sky"],
    "additionalProperties": False,
}
MESSAGES: list[ChatMessage] = [
    {"role": "system", "content": "You answer with one JSON object."},
    {"role": "user", "content": "What is the weather in Lisbon today?"},
]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def running(command: list[str], base_url: str, name: str) -> Iterator[str]:
    """Run `command` (a server) until the generator is closed; yield `base_url` once its
    /models answers (within `READY_WITHIN` seconds, else the test fails naming `name`)."""
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + READY_WITHIN
        while True:
            if proc.poll() is not None:
                pytest.fail(f"{name} exited with {proc.returncode} before answering")
            try:
                if httpx.get(f"{base_url}/models", timeout=1.0).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"{name} did not answer within {READY_WITHIN:g} s")
            time.sleep(0.2)
        yield base_url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
