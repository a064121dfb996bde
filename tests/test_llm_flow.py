"""The build flow with LLM generators, on the session's Prefect server, against the stand-in LLM server.

`aptforge build configs/swe_issue_fix.yaml --generator openai|anthropic` (what `make build-swe GENERATOR=...`
runs) with the endpoint and key in the environment: LLM distractors with provenance, a rerun that
makes no request, a build SIGKILLed mid-generation whose rerun repeats no completed request, and an
API key that appears in no output file, no log record and no console output.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from flows.cli import app
from tests.servers.llm import LLMStandInServer, distractor_responder

ROOT = Path(__file__).resolve().parents[1]
KEY = "sk-aptforge-SECRET-4b1d9e77c0ffee"
CHAT = "chat.completions.create"
runner = CliRunner()


@pytest.fixture
def server() -> Iterator[LLMStandInServer]:
    with LLMStandInServer(responder=distractor_responder, openai_api_key=KEY, anthropic_api_key=KEY) as s:
        yield s


class _Everything(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record))


@pytest.fixture
def all_logs() -> Iterator[_Everything]:
    """Every log record at DEBUG, SDK and HTTP loggers included (Prefect's do not all propagate)."""
    handler = _Everything()
    names = ["", "prefect", "openai", "anthropic", "httpx", "httpx2", "httpcore"]
    old = {n: logging.getLogger(n).level for n in names}
    for name in names:
        logging.getLogger(name).addHandler(handler)
        logging.getLogger(name).setLevel(logging.DEBUG)
    yield handler
    for name in names:
        logging.getLogger(name).removeHandler(handler)
        logging.getLogger(name).setLevel(old[name])


def build(out: Path, generator: str, env: dict[str, str], description: str | None = None) -> dict:
    config = ROOT / "configs" / "swe_issue_fix.yaml"
    if description is not None:  # the same build with a changed config (a new config hash)
        text = config.read_text().replace("../extractors", str(ROOT / "extractors"))
        text = "\n".join(
            f"description: {description}" if line.startswith("description:") else line
            for line in text.splitlines()
        )
        config = out.parent / "swe-changed.yaml"
        config.write_text(text + "\n")
    result = runner.invoke(
        app,
        ["build", str(config), "--generator", generator, "--out", str(out)],
        env=env,
    )
    assert result.exit_code == 0, result.output
    assert KEY not in result.output
    return json.loads((out / "swe_issue_fix" / "v0.1.0" / "report.json").read_text())


def plan_rows(out: Path) -> list[dict]:
    return pq.read_table(out / "swe_issue_fix" / "v0.1.0" / "candidates" / "plan.parquet").to_pylist()


@pytest.mark.flow
def test_an_openai_build_makes_llm_distractors_a_rerun_makes_no_request_and_the_key_never_leaks(
    prefect_harness, server, tmp_path, all_logs
):
    env = {
        "OPENAI_BASE_URL": server.openai_base_url,
        "OPENAI_API_KEY": KEY,
        "APTFORGE_OPENAI_MODEL": "gpt-standin",
    }
    out = tmp_path / "out"
    report = build(out, "openai", env)
    rows = plan_rows(out)
    assert rows and all(r["generator"] == "openai" and r["model"] == "gpt-standin" for r in rows)
    assert all(o.startswith("llm:gpt-standin:") for r in rows for o in r["distractor_origins"])
    assert all(r["tokens_in"] > 0 and len(r["prompt_hash"]) == 64 for r in rows)
    sent = server.count(CHAT)
    usage = report["llm"]["by_task"]["plan"]["gpt-standin"]
    assert sent == usage["requests"] >= len(rows) and report["llm"]["total"]["failures"] == 0

    same = build(out, "openai", env)  # nothing changed: the last build is reused, no stage runs
    assert same.get("reused") is True and server.count(CHAT) == sent
    again = build(out, "openai", env, description="a changed config - every stage runs again")
    assert server.count(CHAT) == sent  # the rerun is served from the response cache
    assert again["llm"]["total"]["requests"] == 0 and again["llm"]["total"]["cache_hits"] == sent
    assert plan_rows(out) == rows

    files = [p for p in out.rglob("*") if p.is_file()]
    assert any(p.name == "llm_cache.sqlite" for p in files)
    assert not [p for p in files if KEY.encode() in p.read_bytes()]
    assert all_logs.lines and not [line for line in all_logs.lines if KEY in line]


@pytest.mark.flow
def test_an_anthropic_build_makes_llm_distractors_from_anthropic_base_url(prefect_harness, server, tmp_path):
    env = {
        "ANTHROPIC_BASE_URL": server.anthropic_base_url,
        "ANTHROPIC_API_KEY": KEY,
        "APTFORGE_ANTHROPIC_MODEL": "claude-standin",
    }
    report = build(tmp_path / "out", "anthropic", env)
    rows = plan_rows(tmp_path / "out")
    assert rows and all(r["generator"] == "anthropic" and r["model"] == "claude-standin" for r in rows)
    assert server.count("messages.create") == report["llm"]["total"]["requests"] > 0
    assert server.requests_for("messages.create")[0].json["tool_choice"]["name"] == "record_distractors"


@pytest.mark.flow
def test_a_build_killed_during_generation_repeats_no_completed_request(prefect_harness, server, tmp_path):
    from prefect.settings import get_current_settings

    config = tmp_path / "kill.yaml"
    config.write_text(
        f"scenario: swe_issue_fix\nversion: vkill\nsources: [{ROOT / 'extractors' / 'samples' / 'swe_issue_fix'}]\n"
        f"tasks: {{plan: {{}}}}\nseed: 20261130\nout_dir: {tmp_path / 'out'}\n"
        "generator: {name: openai, model: gpt-test, max_concurrency: 1}\n"
    )
    server.hold(CHAT, 6)  # in flight until the kill, however late it comes
    env = {
        **os.environ,
        "OPENAI_BASE_URL": server.openai_base_url,
        "OPENAI_API_KEY": KEY,
        "PREFECT_API_URL": str(get_current_settings().api.url),
        "PREFECT_HOME": str(tmp_path / "prefect"),
        "PREFECT_LOGGING_LEVEL": "WARNING",
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "flows.cli", "build", str(config)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 120
    while server.count(CHAT) < 6 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)
    proc.send_signal(signal.SIGKILL)  # request 6 is held by the server: 5 replies were stored
    proc.wait(timeout=30)
    completed = [json.dumps(r.json, sort_keys=True) for r in server.requests_for(CHAT) if r.status == 200]
    assert len(completed) == 5 and not (tmp_path / "out" / "swe_issue_fix" / "vkill" / "report.json").exists()

    server.reset()
    result = runner.invoke(
        app, ["build", str(config)], env={"OPENAI_BASE_URL": server.openai_base_url, "OPENAI_API_KEY": KEY}
    )
    assert result.exit_code == 0, result.output
    report = json.loads((tmp_path / "out" / "swe_issue_fix" / "vkill" / "report.json").read_text())
    rerun = [json.dumps(r.json, sort_keys=True) for r in server.requests_for(CHAT)]
    assert rerun and not set(rerun) & set(completed)
    assert report["llm"]["total"]["cache_hits"] == 5 and report["llm"]["total"]["requests"] == len(rerun)
    assert report["questions_by_task"]["plan"] >= len(rerun)


@pytest.mark.flow
@pytest.mark.parametrize(
    "name", ["swe_issue_fix.yaml", "swe_issue_fix_patches.yaml", "swe_env_setup.yaml", "dr.yaml"]
)
def test_an_openai_build_has_a_prompt_for_every_mcq_task_of_every_scenario(
    prefect_harness, server, tmp_path, name
):
    import yaml

    from schemas import task_spec

    config = yaml.safe_load((ROOT / "configs" / name).read_text())
    config["sources"] = [{"path": str((ROOT / "configs" / s["path"]).resolve())} for s in config["sources"]]
    for task in config["tasks"].values():
        task["enabled"] = True  # test_patch too: every MCQ task the scenario has
    path = tmp_path / name
    path.write_text(yaml.safe_dump(config))
    env = {
        "OPENAI_BASE_URL": server.openai_base_url,
        "OPENAI_API_KEY": KEY,
        "APTFORGE_OPENAI_MODEL": "gpt-standin",
    }
    result = runner.invoke(
        app, ["build", str(path), "--generator", "openai", "--out", str(tmp_path / "out")], env=env
    )
    assert result.exit_code == 0, result.output
    report = json.loads(
        (tmp_path / "out" / config["scenario"] / config["version"] / "report.json").read_text()
    )
    assert "generate.no_prompt_template" not in report["problems_by_reason"]
    assert not [r for r in report["problems_by_reason"] if r.startswith("generate.")], report[
        "problems_by_reason"
    ]
    mcq = [t for t in config["tasks"] if task_spec(config["scenario"], t).form == "mcq"]
    asked = report["llm"]["by_task"]
    assert [t for t in mcq if report["questions_by_task"][t]], (
        report["questions_by_task"],
        report["problems_by_reason"],
        report["adversarial"],
    )
    assert all(t in asked for t in mcq if report["questions_by_task"][t])
    assert all(
        report["adversarial"]["tasks"].get(t, {}).get("items", 0) >= report["questions_by_task"][t]
        for t in mcq
    )
