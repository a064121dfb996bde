"""The CLI as a process: Prefect's local server starts on a busy machine, and the server and Dask
workers die with the CLI, however it ends (SIGKILL, SIGTERM); a stop waits for atomic writes.

These run `aptforge` (or a small Python program) as a child process with a fresh `PREFECT_HOME`,
so each pays one start of Prefect's server; every wait is bounded.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest

from flows.io import clean_stale_temps

ROOT = Path(__file__).resolve().parents[1]
APTFORGE = [sys.executable, "-c", "from flows.cli import main; main()"]
SWE = ROOT / "configs" / "swe_issue_fix.yaml"


def _env(prefect_home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.update(PREFECT_HOME=str(prefect_home), PYTHONPATH=str(ROOT), **extra)
    return env


def _server_children(proc: psutil.Process) -> list[psutil.Process]:
    try:
        return [p for p in proc.children(recursive=True) if "uvicorn" in " ".join(p.cmdline())]
    except psutil.Error:
        return []


def _wait_for(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    pytest.fail(f"timed out after {timeout} s waiting for {what}")


def _alive(procs: list[psutil.Process]) -> list[psutil.Process]:
    return [p for p in procs if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]


def _dask_config(tmp_path: Path) -> Path:
    cfg = tmp_path / "dask.yaml"
    text = SWE.read_text().replace("../extractors", str(ROOT / "extractors")).replace("../out", str(tmp_path))
    cfg.write_text(text + "  task_runner: dask\n  dask_workers: 1\n")
    return cfg


def _start_build(tmp_path: Path, *args: str):
    """`aptforge build ARGS` as a child; stderr to a file, not a pipe (an orphan would hold a pipe open)."""
    log = (tmp_path / "stderr.txt").open("w")
    cli = subprocess.Popen(
        [*APTFORGE, "build", *args], env=_env(tmp_path / "prefect"), stdout=subprocess.DEVNULL, stderr=log
    )
    return cli, log


def test_after_sigkill_of_the_cli_no_server_or_worker_of_that_run_is_alive_5_s_later(tmp_path):
    cli, log = _start_build(tmp_path, str(_dask_config(tmp_path)))
    try:
        proc = psutil.Process(cli.pid)
        servers = _wait_for(lambda: _server_children(proc), 300, "Prefect's local server")
        seen = {p.pid: p for p in proc.children(recursive=True)}
        # wait a little for the flow's Dask workers too (the build may also finish first)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and cli.poll() is None:
            seen.update({p.pid: p for p in proc.children(recursive=True)})
            if any(
                "dask" in " ".join(p.cmdline()) or "spawn" in " ".join(p.cmdline())
                for p in seen.values()
                if p.is_running()
            ):
                break
            time.sleep(0.2)
        assert cli.poll() is None, (tmp_path / "stderr.txt").read_text()
        cli.send_signal(signal.SIGKILL)
        cli.wait(10)
        time.sleep(5)
        assert not _alive(servers), "Prefect's server outlived the CLI"
        assert not _alive(list(seen.values())), [p.cmdline() for p in _alive(list(seen.values()))]
    finally:
        if cli.poll() is None:
            cli.kill()
        log.close()


def test_sigterm_stops_the_build_in_seconds_with_one_line_and_no_orphan(tmp_path):
    cli, log = _start_build(tmp_path, str(SWE), "--out", str(tmp_path / "out"))
    try:
        proc = psutil.Process(cli.pid)
        servers = _wait_for(lambda: _server_children(proc), 300, "Prefect's local server")
        sent = time.monotonic()
        cli.send_signal(signal.SIGTERM)
        code = cli.wait(30)
        took = time.monotonic() - sent
        stderr = (tmp_path / "stderr.txt").read_text()
        assert code == 128 + signal.SIGTERM, stderr
        assert took < 15, took
        assert stderr.strip().splitlines()[-1].startswith("stopped by SIGTERM"), stderr
        assert "Traceback" not in stderr
        time.sleep(5)
        assert not _alive(servers)
    finally:
        if cli.poll() is None:
            cli.kill()
        log.close()


def test_a_server_that_does_not_start_in_time_is_one_line_with_what_to_do(tmp_path):
    result = subprocess.run(
        [*APTFORGE, "build", str(SWE), "--out", str(tmp_path / "out")],
        env=_env(tmp_path / "prefect", PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS="1"),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 1, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "did not start within 1 s" in lines[0]
    assert "prefect server start" in lines[0] and "PREFECT_API_URL" in lines[0]
    assert "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS" in lines[0]


def test_the_first_build_passes_on_a_busy_machine_with_a_fresh_prefect_home(tmp_path):
    """CI check of the first-run experience: 4 CPU-bound processes for the test's length."""
    hog = "import time\nend = time.monotonic() + 900\nwhile time.monotonic() < end:\n    pass\n"
    hogs = [subprocess.Popen([sys.executable, "-c", hog]) for _ in range(4)]
    try:
        result = subprocess.run(
            [*APTFORGE, "build", str(SWE), "--out", str(tmp_path / "out")],
            env=_env(tmp_path / "fresh-prefect-home"),
            capture_output=True,
            text=True,
            timeout=900,
        )
    finally:
        for h in hogs:
            h.kill()
            h.wait()
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "out" / "swe_issue_fix" / "v0.1.0" / "candidates" / "plan.parquet").exists()
    assert "ERROR" not in result.stderr and "Traceback" not in result.stderr, result.stderr
    assert "starting the local Prefect server…" in result.stderr  # a busy first start takes seconds


_WRITER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from flows import runtime
    from flows.io import atomic_path

    target = Path(sys.argv[1])

    def slow_write():
        with atomic_path(target) as tmp:
            with tmp.open("w") as fh:
                print("writing", flush=True)
                for i in range(30):
                    fh.write(f"line {i}\\n")
                    fh.flush()
                    time.sleep(0.1)
        time.sleep(60)

    with runtime.stop_on_signals(lambda s: print("stopping", flush=True)):
        runtime.run_in_worker(slow_write)
    """
)


def test_sigint_waits_for_the_atomic_write_in_flight_then_exits(tmp_path):
    target = tmp_path / "data.txt"
    proc = subprocess.Popen(
        [sys.executable, "-c", _WRITER, str(target)],
        env=_env(tmp_path / "prefect"),
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout.readline().strip() == "writing"
        proc.send_signal(signal.SIGINT)
        assert proc.wait(20) == 128 + signal.SIGINT
        assert target.read_text().splitlines() == [f"line {i}" for i in range(30)]  # whole, not cut
        assert not list(tmp_path.glob(".*.tmp"))
    finally:
        if proc.poll() is None:
            proc.kill()


def test_temp_files_of_a_process_that_is_gone_are_removed(tmp_path):
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    stale = tmp_path / "candidates" / f".plan.parquet.{gone.pid}.abc123.tmp"
    live = tmp_path / "candidates" / f".action.parquet.{os.getpid()}.def456.tmp"
    stale.parent.mkdir()
    stale.write_text("half")
    live.write_text("in progress")
    assert clean_stale_temps(tmp_path) == [stale]
    assert not stale.exists() and live.exists()
