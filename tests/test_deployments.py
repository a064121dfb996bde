"""Scheduled rebuilds: a config with a schedule becomes a Prefect deployment that runs on it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from flows.config import ConfigError, load_config
from flows.deployments import deployment_name, scheduled_configs, to_deployments

ROOT = Path(__file__).resolve().parents[1]


def _config(tmp_path: Path, schedule: str) -> Path:
    text = (ROOT / "configs" / "swe_issue_fix.yaml").read_text()
    text = text.replace("../extractors", str(ROOT / "extractors")).replace(
        "out_dir: ../out", f"out_dir: {tmp_path / 'out'}"
    )
    path = tmp_path / "configs" / "swe_issue_fix.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + schedule)
    return path


def test_only_configs_with_an_enabled_schedule_are_served(tmp_path):
    _config(tmp_path, "schedule:\n  cron: '0 3 * * 1'\n")
    (tmp_path / "configs" / "off.yaml").write_text(
        (tmp_path / "configs" / "swe_issue_fix.yaml")
        .read_text()
        .replace("version: v0.1.0", "version: v9")
        .replace("cron: '0 3 * * 1'", "cron: '0 3 * * 1'\n  enabled: false")
    )
    (tmp_path / "configs" / "broken.yaml").write_text("scenario: [\n")
    found, skipped = scheduled_configs(tmp_path / "configs")
    assert [deployment_name(c) for _, c in found] == ["swe_issue_fix-v0.1.0"]
    assert len(skipped) == 1 and "broken.yaml" in skipped[0]
    (dep,) = to_deployments(found)
    assert dep.name == "swe_issue_fix-v0.1.0"
    assert dep.schedules[0].schedule.cron == "0 3 * * 1"
    assert dep.concurrency_limit == 1
    assert dep.concurrency_options.collision_strategy.value == "CANCEL_NEW"
    assert dep.parameters["config"]["scenario"] == "swe_issue_fix"


def test_a_schedule_needs_a_cron_or_an_interval(tmp_path):
    with pytest.raises(ConfigError, match="schedule"):
        load_config(_config(tmp_path, "schedule:\n  timezone: UTC\n"))


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.flow
def test_a_served_deployment_is_visible_on_a_prefect_server_and_runs_on_its_schedule(tmp_path):
    """A real `prefect server start` (scheduler on) plus `aptforge serve`, both as the user would run them."""
    import os
    import subprocess
    import sys
    import time

    import httpx

    path = _config(tmp_path, "schedule:\n  interval_seconds: 3\n")
    port = _free_port()
    api = f"http://127.0.0.1:{port}/api"
    env = {
        **os.environ,
        "PREFECT_HOME": str(tmp_path / "prefect-home"),
        "PREFECT_API_URL": api,
        "PREFECT_SERVER_DATABASE_CONNECTION_URL": f"sqlite+aiosqlite:///{tmp_path / 'prefect.db'}",
        "PREFECT_SERVER_SERVICES_SCHEDULER_LOOP_SECONDS": "1",
        "PREFECT_SERVER_SERVICES_SCHEDULER_RECENT_DEPLOYMENTS_LOOP_SECONDS": "1",
        "PREFECT_UI_ENABLED": "false",
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "PREFECT_LOGGING_LEVEL": "WARNING",
    }
    bin_dir = Path(sys.executable).parent
    server = subprocess.Popen(
        [str(bin_dir / "prefect"), "server", "start", "--host", "127.0.0.1", "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    served = None
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{api}/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.5)
        else:
            pytest.fail("prefect server did not start within 90 s")
        served = subprocess.Popen(
            [str(bin_dir / "aptforge"), "serve", "--configs", str(path.parent)],
            env=env,
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        completed = []
        running_at_once = 0
        deadline = time.monotonic() + 300  # a loaded machine (CI, 8 builds at once) is slow to schedule
        while time.monotonic() < deadline and not completed:
            time.sleep(1)
            try:
                deps = httpx.post(f"{api}/deployments/filter", json={}, timeout=30).json()
                runs = (
                    httpx.post(
                        f"{api}/flow_runs/filter",
                        timeout=30,
                        json={"flow_runs": {"deployment_id": {"any_": [d["id"] for d in deps]}}},
                    ).json()
                    if deps
                    else []
                )
            except httpx.HTTPError:  # a busy server may answer slowly; keep polling until the deadline
                continue
            if not deps:
                continue
            assert [d["name"] for d in deps] == ["swe_issue_fix-v0.1.0"]
            assert deps[0]["schedules"] and deps[0]["schedules"][0]["schedule"]["interval"] == 3.0
            # one run at a time: ticks during a run are cancelled, not piled up
            assert deps[0]["global_concurrency_limit"]["limit"] == 1
            assert deps[0]["concurrency_options"]["collision_strategy"] == "CANCEL_NEW"
            running_at_once = max(running_at_once, sum(r["state_type"] == "RUNNING" for r in runs))
            completed = [r for r in runs if r["state_type"] == "COMPLETED"]
            assert not [r for r in runs if r["state_type"] in ("FAILED", "CRASHED")], runs
        assert completed, "no scheduled run completed within 300 s"
        assert completed[0]["auto_scheduled"] is True
        assert running_at_once <= 1
    finally:
        for proc in (served, server):
            if proc is not None:
                proc.terminate()
                try:
                    proc.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    proc.kill()
    report = json.loads((tmp_path / "out" / "swe_issue_fix" / "v0.1.0" / "report.json").read_text())
    assert report["counts"]["questions"] > 0
