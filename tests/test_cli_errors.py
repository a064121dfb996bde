"""The CLI's error policy: one line with a hint, exit 2 for config/usage, 1 for run failures.

Every config problem is found before any stage runs (nothing is written under `out_dir`), and
`--debug` shows the exception instead.
"""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from flows.cli import app, explain
from flows.config import ConfigError

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "extractors" / "samples" / "swe_issue_fix"
runner = CliRunner()


def _config(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "cfg.yaml"
    path.write_text(f"version: v1\nout_dir: {tmp_path / 'out'}\n{body}")
    return path


def _one_error_line(result, tmp_path: Path) -> str:
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1, result.output
    assert lines[0].startswith("error: "), lines[0]
    assert not (tmp_path / "out").exists()  # refused before any stage ran
    return lines[0]


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("scenario: swe_issue_fix\nsources: /\ntasks: {plan: {}}\n", "field `sources`"),
        (
            f"scenario: swe_issue_fix\nsources: [{SAMPLES}]\nreports: /tmp\ntasks: {{plan: {{}}}}\n",
            "`reports`",
        ),
        (
            f"scenario: swe_issue_fx\nsources: [{SAMPLES}]\ntasks: {{plan: {{}}}}\n",
            "Did you mean swe_issue_fix",
        ),
        (f"scenario: swe_issue_fix\nsources: [{SAMPLES}]\ntasks: {{plann: {{}}}}\n", "field `tasks.plann`"),
        (
            f"scenario: swe_issue_fix\nsources: [{SAMPLES}]\ntasks: {{plan: {{}}}}\ngenerator: {{name: ofline}}\n",
            "unknown generator 'ofline'",
        ),
        (
            f"scenario: swe_issue_fix\nsources: [{{path: {SAMPLES}, reader: swe_agnt_traj}}]\n"
            "tasks: {plan: {}}\n",
            "field `sources.0.reader`: no reader named 'swe_agnt_traj'",
        ),
        ("scenario: swe_issue_fix\nsources: [/no/such/runs]\ntasks: {plan: {}}\n", "no such file or folder"),
        (
            f"scenario: swe_issue_fix\nsources: [{SAMPLES}]\nreports: [/no/such/report.json]\ntasks: {{plan: {{}}}}\n",
            "field `reports.0`: no such file or folder",
        ),
    ],
    ids=[
        "sources-string",
        "reports-string",
        "unknown-scenario",
        "unknown-task",
        "unknown-generator",
        "unknown-reader",
        "missing-source",
        "missing-report",
    ],
)
def test_config_errors_are_one_line_exit_2_before_any_stage(tmp_path, body, expected):
    cfg = _config(tmp_path, body)
    result = runner.invoke(app, ["build", str(cfg)])
    assert result.exit_code == 2, result.output
    line = _one_error_line(result, tmp_path)
    assert expected in line and str(cfg) in line and "hint:" in line


def test_an_llm_generator_without_its_key_is_a_config_error(tmp_path, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    cfg = _config(tmp_path, f"scenario: swe_issue_fix\nsources: [{SAMPLES}]\ntasks: {{plan: {{}}}}\n")
    result = runner.invoke(app, ["build", str(cfg), "--generator", "openai"])
    assert result.exit_code == 2
    assert "needs OPENAI_API_KEY" in _one_error_line(result, tmp_path)


def test_a_cli_input_that_does_not_exist_is_refused(tmp_path):
    cfg = _config(tmp_path, f"scenario: swe_issue_fix\nsources: [{SAMPLES}]\ntasks: {{plan: {{}}}}\n")
    result = runner.invoke(app, ["build", str(cfg), "--input", str(tmp_path / "missing")])
    assert result.exit_code == 2
    assert str(tmp_path / "missing") in _one_error_line(result, tmp_path)


def test_debug_shows_the_exception_instead_of_the_line(tmp_path):
    cfg = _config(tmp_path, "scenario: nope\nsources: [/x]\ntasks: {plan: {}}\n")
    result = runner.invoke(app, ["--debug", "build", str(cfg)])
    assert isinstance(result.exception, ConfigError)
    assert "error: " not in result.output


def test_explain_maps_failures_to_a_line_a_hint_and_a_code():
    message, hint, code = explain(RuntimeError("boom\nsecond line"))
    assert (message, code) == ("RuntimeError: boom; second line", 1) and "--debug" in hint
    message, hint, code = explain(httpx.ConnectError("connection refused"))
    assert code == 1 and "connection refused" in message and "server runs" in hint
    message, hint, code = explain(FileNotFoundError(2, "No such file or directory", "/x/y"))
    assert (message, code) == ("/x/y: No such file or directory", 1)
    refusal = RuntimeError("the repo moved")
    refusal.hint, refusal.exit_code = "use --force", 1  # what an exception may carry
    assert explain(refusal) == ("the repo moved", "use --force", 1)
    assert explain(ConfigError("a.yaml: field `x`: bad\na.yaml: field `y`: bad"))[0].count(";") == 1
