"""Running the review app under uvicorn: in the foreground (`aptforge review`) or in a background thread.

Guarantees: the app never starts beyond loopback without reviewer tokens (`check_binding` runs first);
uvicorn's access log is off (paths carry item ids, never tokens, but reviewers' activity is not logged
by default); `running()` binds port 0 on request, returns the real URL once the server accepts
connections, and shuts the server down on exit (used by the browser tests and by embedding code).
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from annotations.app.auth import check_binding
from annotations.app.main import create_app
from annotations.app.options import AppOptions
from annotations.queue import Queue


def serve(
    queue: Queue,
    *,
    host: str = "127.0.0.1",
    port: int = 8765,
    tokens: dict[str, str] | None = None,
    options: AppOptions | None = None,
    log_level: str = "warning",
) -> None:
    """Serve the review app until interrupted.

    Raises:
        ValueError: `host` is beyond loopback and no tokens are configured.
    """
    import uvicorn

    check_binding(host, tokens or {})
    uvicorn.run(
        create_app(queue, tokens=tokens, options=options),
        host=host,
        port=port,
        log_level=log_level,
        access_log=False,
        server_header=False,
    )


@contextmanager
def running(app: Any, host: str = "127.0.0.1", port: int = 0, startup_timeout: float = 10.0) -> Iterator[str]:
    """Run `app` under a real uvicorn server in a daemon thread; yields its base URL (`http://host:port`)."""
    import uvicorn

    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    bound = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False, server_header=False))
    thread = threading.Thread(
        target=server.run, kwargs={"sockets": [sock]}, name="aptforge-review", daemon=True
    )
    thread.start()
    deadline = time.monotonic() + startup_timeout
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError(f"the review app did not start on {host}:{bound}")
        time.sleep(0.02)
    try:
        yield f"http://{host}:{bound}"
    finally:
        server.should_exit = True
        thread.join(timeout=startup_timeout)
        sock.close()
