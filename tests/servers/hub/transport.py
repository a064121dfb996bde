"""The HTTP handler of the stand-in Hub, and the check that the client is configured to use it."""

from __future__ import annotations

from http.server import BaseHTTPRequestHandler
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, unquote, urlsplit

from tests.servers.hub.records import _Request, _Response

if TYPE_CHECKING:
    from tests.servers.hub.server import StandInHub


class _Handler(BaseHTTPRequestHandler):
    """HTTP plumbing: parse the request, delegate to :meth:`StandInHub._handle`, write the answer."""

    hub: StandInHub
    protocol_version = "HTTP/1.1"
    server_version = "StandInHub/1.0"
    timeout = 30
    # Headers and body are written separately: without TCP_NODELAY every response waits ~40 ms on
    # Nagle + delayed ACK.
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: Any) -> None:
        """Silence the default stderr access log (the hub keeps its own request log)."""

    def _read_body(self) -> bytes:
        """Read the request body, honouring ``Content-Length`` or chunked transfer encoding."""
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            chunks = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return b"".join(chunks)
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _serve(self) -> None:
        split = urlsplit(self.path)
        request = _Request(
            method=self.command,
            raw_path=self.path,
            segments=[unquote(segment) for segment in split.path.lstrip("/").split("/")],
            query=parse_qs(split.query, keep_blank_values=True),
            headers={key.lower(): value for key, value in self.headers.items()},
            body=self._read_body(),
        )
        try:
            response = self.hub._handle(request)
        except Exception as exc:  # a bug in the stand-in: answer 500 with the reason rather than hang
            response = _Response.json({"error": f"Stand-in Hub crashed: {exc!r}"}, 500)
        if response is None:
            self.close_connection = True
            return
        self.send_response(response.status)
        for key, value in response.headers.items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(response.body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(response.body)

    do_GET = do_HEAD = do_POST = do_PUT = do_DELETE = _serve


def ensure_client_compatible() -> None:
    """Check that the imported ``huggingface_hub`` will talk Git LFS (not Xet) to the stand-in.

    ``huggingface_hub`` 2.x uploads LFS files through Xet whenever ``hf_xet`` is installed unless
    ``HF_HUB_DISABLE_XET`` was set when ``huggingface_hub`` was first imported.

    Raises:
        RuntimeError: If uploads would go through Xet.
    """
    from huggingface_hub import constants
    from huggingface_hub.utils._runtime import is_xet_available

    if is_xet_available():
        raise RuntimeError(
            "huggingface_hub would upload through Xet, which the stand-in Hub does not implement "
            f"(constants.HF_HUB_DISABLE_XET={constants.HF_HUB_DISABLE_XET}). Set HF_HUB_DISABLE_XET=1 in the "
            "environment before huggingface_hub is first imported (e.g. at the top of conftest.py)."
        )
