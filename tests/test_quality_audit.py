"""`aptforge audit` on APTBench's own released data, and task flags with config overrides."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from flows.cli import app
from flows.config import ConfigError, QualityConfig, load_config
from generators.quality.audit import build_quality, refused_tasks

ROOT = Path(__file__).resolve().parents[1]
runner = CliRunner()


def _audit_json(*paths: Path) -> dict:
    proc = subprocess.run(
        [sys.executable, "-m", "flows.cli", "audit", *map(str, paths), "--json"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


@pytest.mark.shared
def test_audit_of_env_setup_error_shows_the_most_central_option_is_the_answer(shared_dir):
    data = _audit_json(shared_dir / "aptbench-reference" / "env_setup" / "error" / "input_data.jsonl")
    task = data["tasks"]["env_setup/error"]
    assert task["items"] == 147 and task["option_counts"] == {"4": 38, "6": 5, "7": 104}
    assert task["chance"] == pytest.approx(0.171, abs=0.002)
    assert task["baselines"]["central"] > 0.60  # APTBENCH.md §8: about 92% with difflib
    assert "central" in task["exceeded"] and task["flagged"] and not task["publishable"]
    assert task["position_dof"] == 14 and 0 <= task["position_p"] <= 1
    assert task["findings"]["distractor_near_gold"] > 100


@pytest.mark.shared
def test_audit_of_dr_plan_zh_flags_the_distractors_that_admit_their_flaw(shared_dir):
    data = _audit_json(shared_dir / "aptbench-reference" / "deepresearch" / "plan_zh")
    task = data["tasks"]["deepresearch/plan_zh"]
    flaws = [p for p in task["problems"] if p["reason"] == "distractor_admits_flaw"]
    assert len(flaws) >= 50 and task["findings"]["distractor_admits_flaw"] == len(flaws)
    said = " ".join(p["detail"] for p in flaws)
    for term in ("无关", "重复", "错误", "web_search_wrong", "browse_website_wrong"):
        assert term in said
    assert all(p["where"].endswith(tuple(f":{n}" for n in range(1, 418))) for p in flaws)
    rows = (
        (shared_dir / "aptbench-reference" / "deepresearch" / "plan_zh" / "input_data.jsonl")
        .read_text()
        .splitlines()
    )
    line = int(flaws[0]["where"].rsplit(":", 1)[1])
    option = int(flaws[0]["detail"].split()[1])
    assert "ABCDEF"[option] != json.loads(rows[line - 1])["answer"]  # it is a distractor, never the gold


@pytest.mark.shared
def test_audit_reports_locate_defects_and_duplicate_summ_ans_rows_in_the_text_view(shared_dir):
    ref = shared_dir / "aptbench-reference"
    result = runner.invoke(
        app, ["audit", str(ref / "issue_fix" / "locate"), str(ref / "deepresearch" / "summ_ans_en")]
    )
    assert result.exit_code == 0, result.output
    assert "issue_fix/locate" in result.output and "answer_not_in_options=10" in result.output
    assert "duplicate_row=51" in result.output


def test_audit_of_nothing_readable_exits_2_and_names_the_file(tmp_path):
    bad = tmp_path / "broken.jsonl"
    bad.write_text("{not json\n")
    result = runner.invoke(app, ["audit", str(bad)])
    assert result.exit_code == 2 and "invalid_json" in result.output


def _rows(n: int, gold_longest: bool) -> list[dict]:
    """Candidate rows whose gold is (or is not) padded to be the longest option."""
    rows = []
    for k in range(n):
        opts = [f"plan {k} option {i} " + ("x" * (i * 7 % 5)) for i in range(4)]
        gold = k % 4
        if gold_longest:
            opts[gold] += " and then some more words"
        rows.append(
            {
                "scenario": "swe_issue_fix",
                "task": "plan",
                "item_id": f"i{k}",
                "uuid": "u",
                "trajs": "[]",
                "options": opts,
                "gold_index": gold,
                "gold": opts[gold],
            }
        )
    return rows


def test_a_task_over_its_bound_is_refused_unless_the_config_overrides_it_with_a_reason():
    flagged = build_quality({"plan": _rows(120, gold_longest=True)}, QualityConfig())
    entry = flagged.tasks["plan"]
    assert "longest" in entry.exceeded and not entry.publishable and "longest 100.0%" in entry.why
    assert flagged.flags == {"plan": entry.why} and flagged.refused_tasks == ["plan"]
    assert "plan" in refused_tasks(flagged)
    assert refused_tasks(flagged, {"plan": "overridden at publish time"}) == {}
    excused = build_quality(
        {"plan": _rows(120, True)}, QualityConfig(overrides={"plan": "length is the skill"})
    )
    assert excused.tasks["plan"].publishable and excused.tasks["plan"].override == "length is the skill"
    assert refused_tasks(excused) == {}
    loose = build_quality(
        {"plan": _rows(120, True)}, QualityConfig(bounds={"plan": dict.fromkeys(entry.exceeded, 1.0)})
    )
    assert loose.tasks["plan"].exceeded == []


def test_a_config_with_an_unknown_baseline_or_a_reasonless_override_is_rejected(tmp_path):
    base = yaml.safe_load((ROOT / "configs" / "swe_issue_fix.yaml").read_text())
    for quality, needle in (
        ({"bounds": {"plan": {"medoid": 0.3}}}, "unknown baseline"),
        ({"overrides": {"plan": "  "}}, "needs a reason"),
    ):
        path = tmp_path / "c.yaml"
        path.write_text(
            yaml.safe_dump({**base, "sources": [str(ROOT / "extractors" / "samples")], "quality": quality})
        )
        with pytest.raises(ConfigError, match=needle):
            load_config(path)
