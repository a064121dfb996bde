"""Reliability of the build flow on the session's Prefect server: skipped inputs quarantined and
counted, compressed and BOM inputs read, and items refused for budget retried by the next run."""

from __future__ import annotations

import codecs
import gzip
import json
import os
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from flows.build import run_build
from flows.cli import app
from flows.config import load_config
from tests.servers.llm import LLMStandInServer, distractor_responder

ROOT = Path(__file__).resolve().parents[1]
V1 = ROOT / "extractors" / "samples" / "swe_issue_fix" / "sweagent_v1"
KEY = "sk-aptforge-budget-7f00d"
CHAT = "chat.completions.create"
runner = CliRunner()


def _run(name: str) -> Path:
    return V1 / name / f"{name}.traj"


@pytest.mark.flow
def test_a_build_quarantines_and_counts_every_skipped_entry_and_reads_gz_and_bom(prefect_harness, tmp_path):
    runs = tmp_path / "runs"
    runs.mkdir()
    shutil.copy(_run("tinycalc__tinycalc-12"), runs / "plain.traj")
    (runs / "packed.traj.gz").write_bytes(gzip.compress(_run("slugkit__slugkit-7").read_bytes()))
    (runs / "bom.traj").write_bytes(codecs.BOM_UTF8 + _run("minicsv__minicsv-31").read_bytes())
    os.mkfifo(runs / "pipe.traj")
    (runs / "gone.traj").symlink_to(runs / "missing.traj")
    (runs / "loop").symlink_to(runs)
    (runs / "x.traj").mkdir()
    shutil.copy(V1 / "harness_summary.json", runs / "harness_summary.json")
    cfg = tmp_path / "build.yaml"
    cfg.write_text(
        f"scenario: swe_issue_fix\nversion: v1\nsources: [{runs}]\nout_dir: {tmp_path / 'out'}\n"
        "tasks: {plan: {}}\n"
    )
    result = runner.invoke(app, ["build", str(cfg)])
    assert result.exit_code == 0, result.output
    version = tmp_path / "out" / "swe_issue_fix" / "v1"
    report = json.loads((version / "report.json").read_text())
    assert report["counts"]["trajectories_read"] == 3  # plain, gz and BOM runs
    assert report["counts"]["skipped_entries"] == 4
    quarantine = [json.loads(line) for line in (version / "quarantine.jsonl").read_text().splitlines()]
    skipped = {(Path(q["where"]).name, q["reason"]) for q in quarantine if q["stage"] == "read"}
    assert {
        ("pipe.traj", "not_a_regular_file"),
        ("gone.traj", "dangling_symlink"),
        ("loop", "symlink_loop"),
        ("x.traj", "not_a_regular_file"),
    } <= skipped
    for reason in ("not_a_regular_file", "dangling_symlink", "symlink_loop"):
        assert report["problems_by_reason"][f"read.{reason}"] >= 1


@pytest.mark.flow
def test_items_refused_for_budget_are_retried_by_the_next_run_and_nothing_is_paid_twice(
    prefect_harness, tmp_path, monkeypatch
):
    with LLMStandInServer(responder=distractor_responder, openai_api_key=KEY) as server:
        monkeypatch.setenv("OPENAI_API_KEY", KEY)
        cfg = tmp_path / "build.yaml"
        cfg.write_text(
            f"scenario: swe_issue_fix\nversion: v1\nsources: [{V1}]\nout_dir: {tmp_path / 'out'}\n"
            "tasks: {plan: {}}\n"
            f"generator: {{name: openai, model: gpt-test, base_url: '{server.openai_base_url}', "
            "budget_usd: 0.003, max_concurrency: 4, prices: {gpt-test: {input: 0.4, output: 1.6}}}\n"
        )
        first = run_build(load_config(cfg))
        refused = first.problems_by_reason.get("generate.no_distractors", 0)
        sent = server.count(CHAT)
        assert refused > 0 and sent > 0
        second = run_build(load_config(cfg))
        assert second.problems_by_reason.get("generate.no_distractors", 0) < refused
        assert second.questions_by_task["plan"] > first.questions_by_task["plan"]
        bodies = [json.dumps(r.json, sort_keys=True) for r in server.requests_for(CHAT)]
        assert len(bodies) > sent and len(set(bodies)) == len(bodies)  # only the refused ones were sent
