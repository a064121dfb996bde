"""Every reader on the real public runs in $APTFORGE_SHARED: counts and labels per folder's README."""

from __future__ import annotations

import json
from collections import Counter

import pytest
from typer.testing import CliRunner

from extractors.discovery import discover_readers
from extractors.ingest.records import find_inputs
from flows import stages
from flows.cli import app

KINDS = frozenset({"swe", "dr", "envsetup", "generic"})


def _labelled(*folders):
    files = [(str(p), None) for p in find_inputs(folders)]
    result = stages.read_stage(discover_readers(), files)
    kept = stages.label_and_keep(result.trajectories, {}, result.verdicts, KINDS, keep_unknown=True)
    # `info` findings (e.g. one run copied into several files) are notes, not reading failures
    return kept.labelled, [p for p in result.problems + kept.problems if p.severity != "info"]


def test_mini_swe_agent_v1_joined_with_its_reports_is_26_resolved_and_26_unresolved(shared_dir):
    trajs, problems = _labelled(shared_dir / "trajectories" / "minisweagent-v1-gemini3pro-swebench-verified")
    assert not problems and len(trajs) == 52
    assert {t.source.format for t in trajs} == {"mini_swe_agent"}
    assert Counter(t.outcome.label for t in trajs) == {"success": 26, "failure": 26}
    assert {t.outcome.signal for t in trajs} == {"report.json:resolved"}  # per-instance reports win
    assert all(t.meta["exit_status"] == "Submitted" and t.patch and len(t.steps) > 5 for t in trajs)
    assert all(t.task and "<pr_description>" not in t.task for t in trajs)


@pytest.mark.parametrize(("commit", "total", "correct"), [("e22d5e3", 8, 5), ("0a11ff4", 40, 21)])
def test_tapeagents_tapes_match_the_gaia_gold_as_counted_in_the_readme(shared_dir, commit, total, correct):
    trajs, problems = _labelled(shared_dir / "trajectories" / "tapeagents-gaia" / commit)
    assert not problems and len(trajs) == total
    assert sum(t.outcome.label == "success" for t in trajs) == correct
    assert all(t.kind == "dr" and t.gold_answer is not None and t.steps for t in trajs)
    # the rest is wrong or, when not clearly wrong, waits for a judge
    assert {t.outcome.reason for t in trajs if t.outcome.label == "unknown"} <= {"needs_judge"}


def test_openhands_outputs_resolver_rows_and_event_lists_are_3_2_and_4_runs(shared_dir):
    trajs, problems = _labelled(shared_dir / "trajectories" / "openhands-official")
    assert not problems  # patch.jsonl is a predictions artefact, skipped
    by_file = Counter(t.source.file.rsplit("/", 1)[-1] for t in trajs)
    assert by_file == {
        "output.jsonl": 5,
        "basic.json": 1,
        "basic_gui_mode.json": 1,
        "basic_interactions.json": 1,
        "wrong_initial_state.json": 1,
    }
    labels = Counter((t.outcome.label, t.outcome.signal) for t in trajs)
    assert labels == {
        ("unknown", "no_verdict"): 6,
        ("failure", "row:error"): 1,
        ("success", "row:success"): 2,
    }
    swe = [t for t in trajs if t.kind == "swe"]
    assert len(swe) == 5 and all(t.task and len(t.steps) >= 4 for t in swe)


def test_the_miroflow_log_keeps_its_boxed_answer_and_has_no_gold(shared_dir):
    (t,), problems = _labelled(shared_dir / "trajectories" / "miroflow-task-result")
    assert not problems and t.task == "Is Spain oa country of Europe?" and t.final_answer == "Yes"
    assert [s.action.tool for s in t.steps if s.action] == [
        "google_search",
        "scrape_website",
        "scrape_website",
        "scrape_website",
        "google_search",
        "scrape_website",
        "wiki_get_page_content",
        "scrape_website",
    ]
    assert (t.outcome.label, t.outcome.reason) == ("unknown", "no_gold")
    assert t.meta["observations_truncated"] >= 1 and max(len(s.observation or "") for s in t.steps) < 33_000


def test_the_foundation_folders_keep_their_counts(shared_dir):
    swe_agent, problems = _labelled(shared_dir / "trajectories" / "swe-agent-official")
    assert not problems and Counter((t.source.format, t.outcome.label) for t in swe_agent) == {
        ("swe_agent_traj", "unknown"): 22
    }
    adp, problems = _labelled(shared_dir / "trajectories" / "adp-hf-swe-samples")
    assert not problems and Counter((t.source.format, t.outcome.label) for t in adp) == {
        ("swe_rows", "success"): 15
    }


def test_aptbench_deep_research_rows_rebuild_into_whole_runs(shared_dir):
    trajs, problems = _labelled(shared_dir / "aptbench-reference" / "deepresearch")
    roles = Counter(t.meta["aptbench"]["role"] for t in trajs)
    # every summ_ans row (duplicates included) plus the runs known only from plan rows
    assert roles["summ_ans"] == 212 + 138 and roles["plan"] > 0
    assert {p.reason for p in problems} == {"conflicting_plan_row"} and len(problems) < 30
    assert all(t.kind == "dr" and t.steps and t.task for t in trajs)
    summ = [t for t in trajs if t.meta["aptbench"]["role"] == "summ_ans"]
    assert all(t.final_answer is not None and t.gold_answer for t in summ)
    assert sum(t.outcome.label == "success" for t in summ) >= 21  # at least the exact answers of summ_ans_en
    assert sum(bool(t.meta.get("wrong_next_steps")) for t in trajs) > 100


def test_aptforge_inspect_reads_every_folder_with_the_readme_labels(shared_dir):
    expected = {
        "minisweagent-v1-gemini3pro-swebench-verified": {"success": 26, "failure": 26},
        "swe-agent-official": {"unknown": 22},
        "adp-hf-swe-samples": {"success": 15},
        "openhands-official": {"unknown": 6, "failure": 1, "success": 2},
        "tapeagents-gaia": {"success": 26, "failure": 16, "unknown": 6},
        "miroflow-task-result": {"unknown": 1},
    }
    runner = CliRunner()
    for folder, labels in expected.items():
        result = runner.invoke(app, ["inspect", str(shared_dir / "trajectories" / folder), "--json"])
        assert result.exit_code == 0, result.output
        rows = [json.loads(line) for line in result.stdout.splitlines() if line.strip()]
        assert not [r for r in rows if "problem" in r and r["problem"]["severity"] != "info"], folder
        assert Counter(r["label"] for r in rows if "label" in r) == labels, folder
