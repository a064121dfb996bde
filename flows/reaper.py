"""Watcher that ends a CLI's child processes when the CLI dies, however it dies (SIGKILL included).

`python -m flows.reaper PID TOKEN` is started by `flows.runtime.start_reaper` in a session of its
own (so the terminal's Ctrl-C does not stop it first), with the read end of a pipe as stdin whose
write end only the CLI holds. Every half second it notes the CLI's descendants (Prefect's local
server, Dask's nannies and workers). When the pipe reaches end-of-file or the CLI is gone, it ends
those it saw plus every process whose environment carries `APTFORGE_RUN_TOKEN=TOKEN` (the CLI sets
it, and every child inherits it, so a child started just before the CLI died is found too):
SIGTERM, then SIGKILL to those still alive 2 s later. Only psutil and the standard library are
imported, so it costs a few MB and starts in well under a second.
"""

from __future__ import annotations

import contextlib
import os
import select
import sys

import psutil

POLL_S = 0.5
GRACE_S = 2.0
TOKEN_VAR = "APTFORGE_RUN_TOKEN"


def _descendants(parent: psutil.Process) -> list[psutil.Process]:
    try:
        return [p for p in parent.children(recursive=True) if p.pid != os.getpid()]
    except psutil.Error:
        return []


def _carrying(token: str) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter():
        try:
            if proc.pid != os.getpid() and proc.environ().get(TOKEN_VAR) == token:
                found.append(proc)
        except psutil.Error:
            continue
    return found


def watch(pid: int, token: str = "", fd: int = 0) -> list[int]:
    """Wait for `pid` to end (end-of-file on `fd`, or the process gone); end its descendants."""
    try:
        parent = psutil.Process(pid)
    except psutil.NoSuchProcess:
        return []
    seen: dict[int, psutil.Process] = {}
    while True:
        readable, _, _ = select.select([fd], [], [], POLL_S)
        if readable and not os.read(fd, 4096):
            break
        if not parent.is_running():
            break
        for child in _descendants(parent):
            seen.setdefault(child.pid, child)
    if token:
        for proc in _carrying(token):
            seen.setdefault(proc.pid, proc)
    alive = [p for p in seen.values() if p.is_running()]  # is_running also checks the start time (pid reuse)
    for proc in alive:
        with contextlib.suppress(psutil.Error):
            proc.terminate()
    _, rest = psutil.wait_procs(alive, timeout=GRACE_S)
    for proc in rest:
        with contextlib.suppress(psutil.Error):
            proc.kill()
    return [p.pid for p in alive]


if __name__ == "__main__":  # pragma: no cover - run as a process by flows.runtime
    watch(int(sys.argv[1]), sys.argv[2] if len(sys.argv) > 2 else "")
