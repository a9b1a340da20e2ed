"""A stand-in for the Hugging Face Hub's file API on 127.0.0.1, for tests that set `HF_ENDPOINT` to it.

It answers what `huggingface_hub` asks when it lists a repo and downloads a file:

- `GET /api/models/OWNER/REPO/tree/REVISION?recursive=…`: the repo's files (and folders);
- `HEAD` and `GET /OWNER/REPO/resolve/REVISION/FILE`: a file, with the headers that
  `huggingface_hub` reads (`ETag`, `X-Linked-Etag`, `X-Linked-Size`, `X-Repo-Commit`,
  `Content-Length`), and a `Range` answered with `206 Partial Content`.

Its refusals carry the Hub's `X-Error-Code` header: `RepoNotFound` (404) for a repo it
does not hold, `GatedRepo` (401 without a token, 403 with one that was not granted
access) for a gated repo, `EntryNotFound` (404) for a file. Every request is recorded,
and `cut` makes the next download of a file stop halfway (the connection closed under
it), as a network that drops does.
"""

from __future__ import annotations

import contextlib
import hashlib
import http.server
import json
import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import pytest

__all__ = ["COMMIT", "FakeHub", "Repo", "hub_for_test"]

COMMIT = "0123456789abcdef0123456789abcdef01234567"
"""The commit that every repo's `main` is at."""


@dataclass
class Repo:
    """A repo the stand-in holds."""

    files: dict[str, bytes]
    gated: bool = False
    """Whether its files are refused to a request without a granted token."""
    granted: set[str] = field(default_factory=set)
    """The tokens that may read a gated repo's files."""
    down: int | None = None
    """A status (503, say) that every request about the repo gets, as from a Hub in trouble."""


class FakeHub:
    """The stand-in, serving on a free port while entered (`with FakeHub() as hub:`)."""

    def __init__(self) -> None:
        self.repos: dict[str, Repo] = {}
        self.requests: list[tuple[str, str]] = []
        """(method, path) of every request, in order."""
        self.ranges: list[str] = []
        """The `Range` header of every download that had one."""
        self.tokens: list[str | None] = []
        """The bearer token (or None) of every request."""
        self.cuts: set[str] = set()
        self.invalid_tokens: set[str] = set()
        """Tokens refused as the Hub refuses a revoked or mistyped one (401 on any request)."""
        self._server: http.server.ThreadingHTTPServer | None = None

    def add(self, repo: str, files: dict[str, bytes], **kwargs: Any) -> Repo:
        """Hold `repo` with these files (path in the repo → bytes)."""
        self.repos[repo] = Repo(files=files, **kwargs)
        return self.repos[repo]

    def cut(self, repo: str, file: str) -> None:
        """Stop the next download of `file` halfway through, closing the connection."""
        self.cuts.add(f"{repo}/{file}")

    @property
    def url(self) -> str:
        assert self._server is not None, "enter the FakeHub first"
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def __enter__(self) -> FakeHub:
        hub = self

        class Handler(_Handler):
            fake = hub

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.shutdown()
        self._server.server_close()


@contextlib.contextmanager
def hub_for_test(home: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeHub]:
    """A `FakeHub` that `HF_ENDPOINT` points at, with the Hub's cache under `home` (`HF_HOME`)
    and no token: neither the environment's nor one saved on this machine reaches it."""
    constants = pytest.importorskip("huggingface_hub.constants", reason="the Hub needs aerix[llama]")
    with FakeHub() as fake:
        monkeypatch.setenv("HF_ENDPOINT", fake.url)
        monkeypatch.setenv("HF_HOME", str(home))
        for name in (
            "HF_HUB_CACHE",
            "HUGGINGFACE_HUB_CACHE",
            "HF_TOKEN",
            "HUGGING_FACE_HUB_TOKEN",
            "HF_HUB_OFFLINE",
        ):
            monkeypatch.delenv(name, raising=False)
        monkeypatch.setattr(constants, "HF_TOKEN_PATH", str(home / "token"))
        monkeypatch.setattr(constants, "HF_STORED_TOKENS_PATH", str(home / "stored_tokens"))
        yield fake


_TREE = re.compile(r"^/api/models/(?P<repo>[^/]+/[^/]+)/tree/(?P<rev>[^/]+)(?:/(?P<path>.*))?$")
_RESOLVE = re.compile(r"^/(?P<repo>[^/]+/[^/]+)/resolve/(?P<rev>[^/]+)/(?P<file>.+)$")


class _Handler(http.server.BaseHTTPRequestHandler):
    fake: FakeHub
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass  # quiet: the tests read `requests`

    def do_GET(self) -> None:
        self._answer(body=True)

    def do_HEAD(self) -> None:
        self._answer(body=False)

    def _answer(self, *, body: bool) -> None:
        path = unquote(urlsplit(self.path).path)
        fake = self.fake
        fake.requests.append((self.command, path))
        auth = self.headers.get("Authorization", "")
        token = auth.removeprefix("Bearer ") if auth.startswith("Bearer ") else None
        fake.tokens.append(token)
        if token in fake.invalid_tokens:
            return self._refuse(401, None, "Invalid credentials in Authorization header")
        repo_of = _TREE.match(path) or _RESOLVE.match(path)
        down = fake.repos[repo_of["repo"]].down if repo_of and repo_of["repo"] in fake.repos else None
        if down is not None:
            return self._refuse(down, None, "Service unavailable")
        if (match := _TREE.match(path)) and body:
            repo = fake.repos.get(match["repo"])
            if repo is None:
                return self._refuse(404, "RepoNotFound", "Repository not found")
            return self._tree(repo)
        if match := _RESOLVE.match(path):
            repo = fake.repos.get(match["repo"])
            if repo is None:
                return self._refuse(404, "RepoNotFound", "Repository not found")
            if repo.gated and token not in repo.granted:
                message = f"Access to model {match['repo']} is restricted. You must have access to it."
                return self._refuse(403 if token else 401, "GatedRepo", message)
            data = repo.files.get(match["file"])
            if data is None:
                return self._refuse(404, "EntryNotFound", "Entry not found")
            return self._file(f"{match['repo']}/{match['file']}", data, body=body)
        return self._refuse(404, None, "Not found")

    def _tree(self, repo: Repo) -> None:
        entries: list[dict[str, Any]] = []
        folders = sorted({p.rsplit("/", 1)[0] for p in repo.files if "/" in p})
        entries += [{"type": "directory", "oid": "0" * 40, "size": 0, "path": f} for f in folders]
        for path, data in sorted(repo.files.items()):
            entries.append(
                {"type": "file", "oid": hashlib.sha1(data).hexdigest(), "size": len(data), "path": path}
            )
        self._send(200, json.dumps(entries).encode(), {"Content-Type": "application/json"})

    def _file(self, key: str, data: bytes, *, body: bool) -> None:
        etag = hashlib.sha256(data).hexdigest()
        headers = {
            "Content-Type": "application/octet-stream",
            "ETag": f'"{etag}"',
            "X-Linked-Etag": f'"{etag}"',
            "X-Linked-Size": str(len(data)),
            "X-Repo-Commit": COMMIT,
            "Accept-Ranges": "bytes",
        }
        start = 0
        if body and (wanted := self.headers.get("Range")):
            self.fake.ranges.append(wanted)
            start = int(re.fullmatch(r"bytes=(\d+)-", wanted)[1])  # type: ignore[index]
            headers["Content-Range"] = f"bytes {start}-{len(data) - 1}/{len(data)}"
        if not body:
            return self._send(200, b"", headers, length=len(data))
        part = data[start:]
        if key in self.fake.cuts:
            self.fake.cuts.discard(key)
            self.send_response(206 if start else 200)
            for name, value in {**headers, "Content-Length": str(len(part))}.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(part[: len(part) // 2])
            self.wfile.flush()
            self.close_connection = True
            self.connection.shutdown(2)  # the rest never comes: the client sees the body cut short
            return None
        return self._send(206 if start else 200, part, headers)

    def _refuse(self, status: int, code: str | None, message: str) -> None:
        headers = {"Content-Type": "application/json", "X-Error-Message": message}
        if code is not None:
            headers["X-Error-Code"] = code
        body = json.dumps({"error": message}).encode() if self.command != "HEAD" else b""
        self._send(status, body, headers, length=len(json.dumps({"error": message}).encode()))

    def _send(self, status: int, body: bytes, headers: dict[str, str], length: int | None = None) -> None:
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body) if length is None else length))
        self.end_headers()
        if body:
            self.wfile.write(body)
