"""How the CLI runs a flow: the local Prefect server, children that die with it, and stopping on a signal.

- `start_local_server` starts Prefect's ephemeral API server up front (unless `PREFECT_API_URL`
  names a running one) with a generous start-up time (`flows.settings.prefect_startup_timeout`),
  says "starting the local Prefect server…" when that takes more than a few seconds, and on
  failure raises `ServerStartFailed`, whose message says what to do. Prefect's own clients then
  find the same server (it is Prefect's per-process `SubprocessASGIServer`).
- `start_reaper` starts `flows.reaper`, which ends the CLI's children (that server, Dask workers)
  when the CLI dies, even by SIGKILL.
- `stop_on_signals` makes SIGINT and SIGTERM say so, wait (bounded) for atomic writes in flight and
  exit at once with 128 + the signal's number; a second signal exits without waiting.
  `run_in_worker` runs the flow in a worker thread so the main thread stays free for that:
  Prefect installs no signal handler off the main thread, so nothing retries API calls against a
  server the same Ctrl-C already stopped. Temp files a stop leaves behind are removed by the next
  run (`flows.io.clean_stale_temps`).
"""

from __future__ import annotations

import contextvars
import os
import secrets
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from typing import Any, TypeVar

from flows.io import wait_for_writes

T = TypeVar("T")

#: After this many seconds of waiting for the local server, the CLI says what it is waiting for.
SLOW_START_S = 3.0
#: How long a stopping CLI waits for atomic writes in flight.
WRITE_GRACE_S = 10.0

_reaper: subprocess.Popen[bytes] | None = None
_reaper_fd: int | None = None


class ServerStartFailed(RuntimeError):
    """Prefect's local server did not come up in time (the message says what to do instead)."""

    def __init__(self, timeout: int, cause: str) -> None:
        self.timeout = timeout
        self.cause = cause
        super().__init__(f"the local Prefect server did not start within {timeout} s ({cause})")

    hint = (
        "run `prefect server start` in another shell and set PREFECT_API_URL=http://127.0.0.1:4200/api, "
        "or allow more time with PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS"
    )


def start_local_server(say: Callable[[str], None], slow_after: float = SLOW_START_S) -> bool:
    """Start Prefect's ephemeral server now, unless flows run on a configured one; True if started.

    Raises:
        ServerStartFailed: it did not answer within the start-up time.
    """
    from flows.settings import prefect_needs_local_server, prefect_startup_timeout

    if not prefect_needs_local_server():
        return False
    from prefect.server.api.server import SubprocessASGIServer

    timeout = prefect_startup_timeout()
    notice = threading.Timer(slow_after, say, ["starting the local Prefect server…"])
    notice.daemon = True
    notice.start()
    server = SubprocessASGIServer()
    try:
        server.start(timeout=timeout)
    except Exception as exc:  # Prefect raises RuntimeError with the server's whole output
        code = server.server_process.poll() if server.server_process else None
        server.stop()
        cause = "timed out" if code is None else f"the server exited with code {code}"
        raise ServerStartFailed(timeout, cause) from exc
    finally:
        notice.cancel()
    return True


def start_reaper() -> None:
    """Start the watcher that ends this process's children when it dies (once per process)."""
    global _reaper, _reaper_fd
    if _reaper is not None:
        return
    from flows.reaper import TOKEN_VAR

    token = f"{os.getpid()}-{secrets.token_hex(8)}"
    os.environ[TOKEN_VAR] = token  # inherited by every child: the reaper finds them by it
    read_end, write_end = os.pipe()  # not inheritable: only this process holds the write end
    _reaper = subprocess.Popen(
        [sys.executable, "-m", "flows.reaper", str(os.getpid()), token],
        stdin=read_end,
        start_new_session=True,
        close_fds=True,
    )
    os.close(read_end)
    _reaper_fd = write_end


@contextmanager
def stop_on_signals(on_stop: Callable[[int], None]) -> Iterator[None]:
    """Inside, SIGINT and SIGTERM stop this process: `on_stop(signum)` prints the one line, atomic
    writes in flight get up to `WRITE_GRACE_S` to finish, then `os._exit(128 + signum)` (the reaper
    ends the children). A second signal exits at once. Off the main thread it does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    stopping = threading.Event()

    def handler(signum: int, _frame: Any) -> None:
        if stopping.is_set():
            os._exit(128 + signum)
        stopping.set()
        on_stop(signum)
        wait_for_writes(WRITE_GRACE_S)
        end_children()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(128 + signum)

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def end_children(grace: float = 2.0) -> None:
    """SIGTERM this process's children (Prefect's server, Dask), SIGKILL those alive after `grace`."""
    import psutil

    me = psutil.Process()
    children = [p for p in me.children(recursive=True) if _reaper is None or p.pid != _reaper.pid]
    for child in children:
        with suppress(psutil.Error):
            child.terminate()
    _, alive = psutil.wait_procs(children, timeout=grace)
    for child in alive:
        with suppress(psutil.Error):
            child.kill()


def run_in_worker(fn: Callable[[], T]) -> T:
    """Run `fn` in a worker thread while the main thread stays free to handle signals.

    Prefect installs its SIGTERM bridge only on the main thread: off it, a flow never retries API
    calls against a server that the same Ctrl-C already stopped, and the CLI stops in seconds.
    """
    if threading.current_thread() is not threading.main_thread():
        return fn()
    result: dict[str, Any] = {}

    context = contextvars.copy_context()  # Prefect's settings and our progress callback are context variables

    def target() -> None:
        try:
            result["value"] = context.run(fn)
        except BaseException as exc:  # re-raised in the main thread
            result["error"] = exc

    worker = threading.Thread(target=target, name="aptforge-flow", daemon=True)
    worker.start()
    while worker.is_alive():
        worker.join(0.2)
    if "error" in result:
        raise result["error"]
    return result["value"]


__all__ = [
    "SLOW_START_S",
    "ServerStartFailed",
    "run_in_worker",
    "start_local_server",
    "start_reaper",
    "stop_on_signals",
]
