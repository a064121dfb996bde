"""HTTP plumbing of the stand-in LLM server: error bodies, multipart parsing, stored files and batches, the handler."""

from __future__ import annotations

import dataclasses
import email.message
import json
import uuid
from collections.abc import Mapping
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any

from tests.servers.llm.protocol import (
    _ANTHROPIC_ERROR_TYPES,
    _DEFAULT_MESSAGES,
    _OPENAI_ERROR_TYPES,
    ANTHROPIC,
)
from tests.servers.llm.requests import _content_text

if TYPE_CHECKING:
    from tests.servers.llm.server import LLMStandInServer


class _APIError(Exception):
    """An error response to send in the current API's format."""

    def __init__(
        self,
        status: int,
        message: str | None = None,
        *,
        error_type: str | None = None,
        code: str | None = None,
        param: str | None = None,
    ) -> None:
        super().__init__(message or _DEFAULT_MESSAGES.get(status, f"HTTP {status}"))
        self.status = status
        self.message = str(self)
        self.error_type = error_type
        self.code = code
        self.param = param


def _error_body(
    api: str,
    status: int,
    message: str,
    *,
    error_type: str | None = None,
    code: str | None = None,
    param: str | None = None,
    request_id: str | None = None,
) -> dict[str, Any]:
    """Builds an error body in the given API's shape."""
    if api == ANTHROPIC:
        kind = (
            error_type
            or _ANTHROPIC_ERROR_TYPES.get(status)
            or ("api_error" if status >= 500 else "invalid_request_error")
        )
        return {"type": "error", "error": {"type": kind, "message": message}, "request_id": request_id}
    default_type, default_code = _OPENAI_ERROR_TYPES.get(
        status, ("server_error" if status >= 500 else "invalid_request_error", None)
    )
    return {
        "error": {
            "message": message,
            "type": error_type or default_type,
            "param": param,
            "code": code if code is not None else default_code,
        }
    }


def _approx_tokens(text: str) -> int:
    """Rough, deterministic token estimate (4 characters per token, at least 1)."""
    return max(1, (len(text) + 3) // 4)


def _prompt_text(request_json: Mapping[str, Any]) -> str:
    parts = [_content_text(request_json.get("system"))]
    for message in request_json.get("messages") or []:
        if isinstance(message, Mapping):
            parts.append(_content_text(message.get("content")))
    return "\n".join(p for p in parts if p)


def _rfc3339(ts: float) -> str:
    return datetime.fromtimestamp(ts, tz=UTC).isoformat().replace("+00:00", "Z")


def _new_id(prefix: str) -> str:
    return f"{prefix}{uuid.uuid4().hex[:24]}"


def _parse_multipart(content_type: str, body: bytes) -> dict[str, Any]:
    """Parses a ``multipart/form-data`` body; file fields come back as bytes.

    Args:
        content_type: The request's Content-Type header (with boundary).
        body: The raw body.

    Returns:
        Field name -> str (plain fields) or bytes (file fields); file names are
        stored under ``"<field>.filename"``.

    Raises:
        _APIError: When the body is not valid multipart.
    """
    header = email.message.Message()
    header["content-type"] = content_type
    boundary = header.get_param("boundary")
    if not isinstance(boundary, str) or not boundary:
        raise _APIError(400, "Invalid multipart body: missing boundary.")
    delimiter = b"--" + boundary.encode("latin-1")
    fields: dict[str, Any] = {}
    chunks = body.split(delimiter)
    for chunk in chunks[1:]:
        if chunk.startswith(b"--"):
            break
        if chunk.startswith(b"\r\n"):
            chunk = chunk[2:]
        head, sep, content = chunk.partition(b"\r\n\r\n")
        if not sep:
            raise _APIError(400, "Invalid multipart body: part without headers.")
        if content.endswith(b"\r\n"):
            content = content[:-2]
        part = email.message.Message()
        for line in head.decode("latin-1").split("\r\n"):
            name, _, value = line.partition(":")
            if name:
                part[name.strip()] = value.strip()
        field = part.get_param("name", header="content-disposition")
        if not isinstance(field, str):
            continue
        filename = part.get_param("filename", header="content-disposition")
        if isinstance(filename, str):
            fields[field] = content
            fields[f"{field}.filename"] = filename
        else:
            fields[field] = content.decode("utf-8")
    return fields


@dataclasses.dataclass
class _StoredFile:
    id: str
    filename: str
    purpose: str
    content: bytes
    created_at: int

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "object": "file",
            "bytes": len(self.content),
            "created_at": self.created_at,
            "filename": self.filename,
            "purpose": self.purpose,
            "status": "processed",
            "expires_at": None,
            "status_details": None,
        }


@dataclasses.dataclass
class _OpenAIBatch:
    data: dict[str, Any]
    lines: list[dict[str, Any]]
    line_errors: list[dict[str, Any]]
    in_progress_polls: int = 0


@dataclasses.dataclass
class _AnthropicBatch:
    data: dict[str, Any]
    requests: list[dict[str, Any]]
    results: bytes | None = None
    in_progress_polls: int = 0
    finishing: bool = False


class _Handler(BaseHTTPRequestHandler):
    """Per-connection request handler; all state lives on ``server.owner``."""

    protocol_version = "HTTP/1.1"
    # Headers and body are separate writes; without TCP_NODELAY, Nagle plus the
    # client's delayed ACK adds ~40 ms to every keep-alive response.
    disable_nagle_algorithm = True
    server_version = "aptforge-llm-standin/1.0"
    sys_version = ""
    server: _HTTPServer

    def log_message(self, format: str, *args: Any) -> None:
        """Silences the default stderr access log."""

    def do_GET(self) -> None:
        """Handles GET requests."""
        self._dispatch()

    def do_POST(self) -> None:
        """Handles POST requests."""
        self._dispatch()

    def do_DELETE(self) -> None:
        """Handles DELETE requests (always 404 here)."""
        self._dispatch()

    def read_body(self) -> bytes:
        """Reads the request body (Content-Length or chunked transfer encoding)."""
        if self.headers.get("transfer-encoding", "").lower() == "chunked":
            data = bytearray()
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return bytes(data)
                data += self.rfile.read(size)
                self.rfile.readline()
        length = int(self.headers.get("content-length") or 0)
        return self.rfile.read(length) if length else b""

    def setup(self) -> None:
        """Registers the connection so :meth:`LLMStandInServer.stop` can close it."""
        super().setup()
        self.server.owner._track(self.connection, add=True)

    def finish(self) -> None:
        """Unregisters the connection once the client or the server closed it."""
        try:
            super().finish()
        finally:
            self.server.owner._track(self.connection, add=False)

    def _dispatch(self) -> None:
        try:
            self.server.owner._handle(self)
        except (BrokenPipeError, ConnectionResetError, TimeoutError):
            self.close_connection = True

    def send_bytes(self, status: int, body: bytes, content_type: str, headers: Mapping[str, str]) -> None:
        """Writes a complete response.

        Args:
            status: HTTP status code.
            body: Response body.
            content_type: Content-Type header value.
            headers: Extra headers.
        """
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in headers.items():
            self.send_header(name, value)
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body)
        self.wfile.flush()


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    request_queue_size = 128
    allow_reuse_address = True
    owner: LLMStandInServer


def _jsonl(items: list[dict[str, Any]]) -> bytes:
    """Serialises items as JSON Lines (one object per line, newline-terminated)."""
    return b"".join(json.dumps(item).encode("utf-8") + b"\n" for item in items)
