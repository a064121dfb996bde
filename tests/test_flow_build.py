"""The build flow end to end on the bundled samples, through the CLI, on a real Prefect server."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from flows.cli import app
from schemas import candidate_schema

ROOT = Path(__file__).resolve().parents[1]
runner = CliRunner()


@pytest.fixture(scope="module")
def built(prefect_harness, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("out")
    result = runner.invoke(app, ["build", str(ROOT / "configs" / "swe_issue_fix.yaml"), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "questions" in result.output and "quarantined" in result.output
    return out / "swe_issue_fix" / "v0.1.0"


@pytest.mark.flow
def test_the_build_writes_plan_and_action_candidates_with_aptbench_fields(built):
    for task, keys in (
        ("plan", ["uuid", "trajs", "choices", "answer"]),
        ("action", ["uuid", "tool_set", "trajs", "answer"]),
    ):
        table = pq.read_table(built / "candidates" / f"{task}.parquet")
        assert table.num_rows >= 1
        assert table.schema.equals(candidate_schema("swe_issue_fix", task))
        assert table.column_names[: len(keys)] == keys
        for row in table.to_pylist():
            assert all(isinstance(row[k], str) and row[k] for k in keys)
            assert isinstance(json.loads(row["trajs"]), list)
            if task == "plan":
                assert len(row["options"]) == 4 and row["answer"] == "ABCD"[row["gold_index"]]
                assert row["options"][row["gold_index"]] == row["gold"]
            else:
                assert row["answer"] == row["gold"] and "\n" not in row["answer"]


@pytest.mark.flow
def test_only_successful_runs_become_items(built):
    report = json.loads((built / "report.json").read_text())
    resolved = {"tinycalc__tinycalc-12", "slugkit__slugkit-7"}
    rows = pq.read_table(built / "candidates" / "plan.parquet").to_pylist()
    swe_agent_rows = {r["instance_id"] for r in rows if r["source_format"] == "swe_agent_traj"}
    assert swe_agent_rows <= resolved | {"minicsv__minicsv-8"}
    assert {"unresolved", "empty_patch"} <= set(report["dropped_by_reason"])
    assert all(r["outcome_signal"] != "no_verdict" for r in rows)


@pytest.mark.flow
def test_bad_inputs_are_quarantined_with_file_and_reason_and_counted(built):
    entries = [json.loads(line) for line in (built / "quarantine.jsonl").read_text().splitlines()]
    reasons = {(Path(e["where"].split(":")[0]).name, e["reason"]) for e in entries if e["stage"] == "read"}
    assert {
        ("truncated.traj", "truncated_json"),
        ("wrong_type.traj", "wrong_type"),
        ("binary.traj", "binary_file"),
        ("bad_lines.jsonl", "invalid_json"),
    } <= reasons
    report = json.loads((built / "report.json").read_text())
    assert report["problems_by_reason"]["read.truncated_json"] == 1
    assert report["counts"]["quarantined"] >= 5
    assert report["counts"]["questions"] == sum(report["questions_by_task"].values())
    assert set(report["timings_s"]) >= {"read", "keep", "extract", "generate", "check", "write"}


@pytest.mark.flow
def test_generated_questions_travel_between_stages_as_spilled_shards_read_once(built, tmp_path, monkeypatch):
    """The keep task spills the kept runs as extraction's shards, and the generate stage each shard's
    gold steps and questions, under `<out_dir>/.work/` (the flow holds the paths); extraction reads
    the runs, filtering takes the questions task by task, and the build's spill folders go."""
    from flows import work

    spilled: list[str] = []
    real = work.spill

    def recording(*args, **kwargs):
        spilled.append(real(*args, **kwargs))
        return spilled[-1]

    monkeypatch.setattr(work, "spill", recording)
    result = runner.invoke(
        app, ["build", str(ROOT / "configs" / "swe_issue_fix.yaml"), "--out", str(tmp_path)]
    )
    assert result.exit_code == 0, result.output
    # each extract shard's runs and generate shard's gold steps (read where the shard runs) and the
    # questions it posed
    assert {Path(ref).parent.name for ref in spilled} == {
        "runs",
        "shards-plan",
        "shards-action",
        "questions-plan",
        "questions-action",
    }
    assert not [ref for ref in spilled if Path(ref).exists()]
    assert not list((tmp_path / ".work").glob("spill-*")) and not list(
        (built.parents[1] / ".work").glob("spill-*")
    )
    again = tmp_path / "swe_issue_fix" / "v0.1.0"
    for task in ("plan", "action"):  # the same items as a build's from the module's fixture
        assert pq.read_table(again / "candidates" / f"{task}.parquet").equals(
            pq.read_table(built / "candidates" / f"{task}.parquet")
        )


@pytest.mark.flow
def test_a_rebuild_of_the_same_inputs_gives_identical_candidates(built, tmp_path):
    result = runner.invoke(
        app, ["build", str(ROOT / "configs" / "swe_issue_fix.yaml"), "--out", str(tmp_path)]
    )
    assert result.exit_code == 0, result.output
    again = tmp_path / "swe_issue_fix" / "v0.1.0"
    for task in ("plan", "action"):
        assert pq.read_table(again / "candidates" / f"{task}.parquet").equals(
            pq.read_table(built / "candidates" / f"{task}.parquet")
        )


def test_an_invalid_config_names_the_field_and_exits_2(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "scenario: swe_issue_fix\nversion: v1\nsources: [x]\ntasks: {plan: {max_items_per_trajectory: lots}}\n"
    )
    result = runner.invoke(app, ["build", str(bad)])
    assert result.exit_code == 2
    assert "tasks.plan.max_items_per_trajectory" in result.output and str(bad) in result.output


def test_a_config_that_is_not_a_mapping_exits_2(tmp_path):
    bad = tmp_path / "list.yaml"
    bad.write_text("- a\n- b\n")
    result = runner.invoke(app, ["build", str(bad)])
    assert result.exit_code == 2 and "mapping" in result.output


def test_inspect_prints_one_line_per_trajectory_with_label_and_signal(samples_dir):
    folder = samples_dir / "swe_issue_fix" / "sweagent_v1"
    result = runner.invoke(
        app, ["inspect", str(folder), "--reports", str(folder / "harness_summary.json"), "--json"]
    )
    assert result.exit_code == 0
    rows = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    rows = [r for r in rows if "problem" not in r]
    assert len(rows) == 5
    assert {r["instance_id"] for r in rows if r["label"] == "success"} == {
        "tinycalc__tinycalc-12",
        "slugkit__slugkit-7",
    }
    assert all(r["reader"] == "swe_agent_traj" and r["steps"] > 0 for r in rows)
