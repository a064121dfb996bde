"""SWE readers, harness reports and success labels on the bundled samples and small literals."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from extractors.base import Origin
from extractors.discovery import discover_readers
from extractors.ingest.records import Record, find_inputs, iter_records
from extractors.ingest.sniff import read_file, read_record
from extractors.labels.reports import load_reports, parse_report
from extractors.labels.runs import tie_reports
from extractors.labels.verdicts import apply_verdict
from flows import stages
from schemas import Problem, Source, Trajectory

READERS = discover_readers()


def _run(iid: str, file: Path, model: str = "m") -> Trajectory:
    return Trajectory(
        trajectory_id=f"{model}-{iid}",
        kind="swe",
        task="t",
        source=Source(format="mini_swe_agent", file=str(file), instance_id=iid, model=model),
    )


def _read_all(paths, reports=()):
    files = [(str(p), None) for p in paths]
    result = stages.read_stage(READERS, files)
    verdicts = load_reports([str(r) for r in reports])
    kept = stages.label_and_keep(
        result.trajectories, verdicts.found, result.verdicts, frozenset({"swe"}), keep_unknown=True
    )
    return kept.labelled, result.problems


def test_swe_agent_v1_runs_are_labelled_exactly_as_the_summarys_resolved_ids(samples_dir):
    folder = samples_dir / "swe_issue_fix" / "sweagent_v1"
    summary = json.loads((folder / "harness_summary.json").read_text())
    trajs, problems = _read_all(sorted(folder.rglob("*.traj")), [folder / "harness_summary.json"])
    assert not problems and len(trajs) == 5
    resolved = {t.source.instance_id for t in trajs if t.outcome.label == "success"}
    assert resolved == set(summary["resolved_ids"])
    for t in trajs:
        if t.source.instance_id in summary["empty_patch_ids"]:
            assert (t.outcome.label, t.outcome.reason) == ("failure", "empty_patch")
    exit_format = [t for t in trajs if t.meta.get("exit_status") == "exit_format"]
    assert exit_format and all(t.outcome.label == "failure" for t in exit_format)
    assert all(t.outcome.signal.startswith("harness_summary:") for t in trajs)


def test_a_summary_found_among_the_inputs_decides_labels_too(samples_dir):
    folder = samples_dir / "swe_issue_fix" / "sweagent_v1"
    trajs, _ = _read_all(sorted(folder.rglob("*.traj")) + [folder / "harness_summary.json"])
    assert sum(t.outcome.label == "success" for t in trajs) == 2


def test_submitted_is_not_success_without_a_report(samples_dir):
    folder = samples_dir / "swe_issue_fix" / "sweagent_v1"
    trajs, _ = _read_all(sorted(folder.rglob("*.traj")))
    submitted_with_patch = [
        t for t in trajs if t.meta.get("exit_status") == "submitted" and (t.patch or "").strip()
    ]
    assert submitted_with_patch
    assert all(
        t.outcome.label == "unknown" and t.outcome.reason == "no_verdict" for t in submitted_with_patch
    )
    no_patch = [t for t in trajs if not (t.patch or "").strip()]
    assert no_patch and all(
        (t.outcome.label, t.outcome.reason) == ("failure", "empty_patch") for t in no_patch
    )


def test_a_v1_function_calling_run_keeps_tool_names_args_and_the_task(samples_dir):
    path = (
        samples_dir / "swe_issue_fix" / "sweagent_v1" / "tinycalc__tinycalc-12" / "tinycalc__tinycalc-12.traj"
    )
    (traj,) = [t for t in read_file(READERS, str(path)) if isinstance(t, Trajectory)]
    assert traj.source.format == "swe_agent_traj" and traj.source.agent.startswith("swe-agent 1")
    assert "<pr_description>" not in traj.task and traj.task
    tools = {s.action.tool for s in traj.steps if s.action}
    assert "str_replace_editor" in tools
    edit = next(s for s in traj.steps if s.action and s.action.tool == "str_replace_editor")
    assert "command" in edit.action.args and "path" in edit.action.args


def test_a_v0_run_skips_the_demonstration_and_reads_the_real_task(samples_dir):
    folder = samples_dir / "swe_issue_fix" / "sweagent_v0"
    trajs, _problems = _read_all(sorted(folder.glob("*.traj")), [folder / "report.json"])
    (traj,) = trajs
    raw = json.loads(next(folder.glob("*.traj")).read_text())
    demo = next(m for m in raw["history"] if m.get("is_demo"))
    assert demo["content"][:200] not in traj.prompt
    assert traj.outcome.signal == "report.json:resolved" and traj.outcome.label == "success"


def test_row_formats_carry_their_own_verdicts(samples_dir):
    folder = samples_dir / "swe_issue_fix"
    trajs, _problems = _read_all([folder / "swesmith_rows.jsonl", folder / "nebius_row.json"])
    assert [t.outcome.label for t in trajs] == ["success", "success", "failure", "success"]
    assert {t.outcome.signal for t in trajs} == {"row:resolved", "row:target"}
    assert all(t.steps and t.steps[0].action for t in trajs)
    smith = trajs[0]
    assert all("<function=" not in s.thought for s in smith.steps)


@pytest.mark.parametrize(
    ("name", "reason"),
    [("truncated.traj", "truncated_json"), ("wrong_type.traj", "wrong_type"), ("binary.traj", "binary_file")],
)
def test_malformed_files_become_problems_naming_the_file_and_reason(samples_dir, name, reason):
    path = samples_dir / "swe_issue_fix" / "malformed" / name
    out = list(read_file(READERS, str(path)))
    assert len(out) == 1 and isinstance(out[0], Problem)
    assert out[0].reason == reason and out[0].where.startswith(str(path)) and out[0].detail


def test_bad_jsonl_lines_are_quarantined_by_line_and_good_lines_still_read(samples_dir):
    path = samples_dir / "swe_issue_fix" / "malformed" / "bad_lines.jsonl"
    out = list(read_file(READERS, str(path)))
    problems = [p for p in out if isinstance(p, Problem)]
    assert [p.where for p in problems] == [f"{path}:2", f"{path}:4"]
    assert [p.reason for p in problems] == ["invalid_json", "unknown_format"]
    # line 3 is a bare chat message list: the generic `openai_chat` reader reads it (issue 3)
    trajs = [t for t in out if isinstance(t, Trajectory)]
    assert [(t.source.line, t.source.format) for t in trajs] == [(1, "swe_rows"), (3, "openai_chat")]


def test_empty_files_and_missing_files_are_problems(tmp_path):
    empty = tmp_path / "e.jsonl"
    empty.write_text("")
    assert [p.reason for p in iter_records(empty)] == ["empty_file"]
    assert [p.reason for p in iter_records(tmp_path / "nope.traj")] == ["unreadable_file"]


def test_a_record_with_none_where_a_list_belongs_is_a_problem_not_a_crash():
    rec = Record({"messages": None, "resolved": True, "instance_id": "x"}, Origin("rows.jsonl", 4))
    out = read_record(READERS, rec)
    assert isinstance(out, Problem) and out.where == "rows.jsonl:4" and out.reason == "wrong_type"


def test_per_instance_report_shapes_and_summaries_parse():
    nested = {"a__b-1": {"patch_is_None": False, "patch_exists": True, "resolved": False, "tests_status": {}}}
    (v,) = parse_report(nested, Origin("r.json"))
    assert (v.instance_id, v.resolved, v.reason) == ("a__b-1", False, "unresolved")
    flat = {"resolved": True, "patch_successfully_applied": True, "tests_status": {}}
    (v,) = parse_report(flat, Origin("logs/x__y-2/report.json"))
    assert (v.instance_id, v.resolved) == ("x__y-2", True)
    summary = {"resolved_ids": ["a"], "unresolved_ids": ["b"], "empty_patch_ids": ["c"], "error_ids": []}
    got = {v.instance_id: (v.resolved, v.reason) for v in parse_report(summary, Origin("s.json"))}
    assert got == {"a": (True, "resolved"), "b": (False, "unresolved"), "c": (False, "empty_patch")}
    assert list(parse_report({"model_patch": "x"}, Origin("p.json"))) == []


def test_a_more_specific_report_wins_over_a_summary(tmp_path):
    (tmp_path / "summary.json").write_text(json.dumps({"resolved_ids": [], "unresolved_ids": ["z__z-1"]}))
    logs = tmp_path / "logs" / "z__z-1"
    logs.mkdir(parents=True)
    (logs / "report.json").write_text(
        json.dumps({"z__z-1": {"resolved": True, "patch_exists": True, "tests_status": {}}})
    )
    reports = load_reports([str(tmp_path)])
    run = _run("z__z-1", tmp_path / "trajs" / "z__z-1" / "z__z-1.traj.json")
    assert tie_reports([run], reports.found).of(run).resolved is True


def test_an_empty_report_file_is_a_warning_not_a_verdict(tmp_path):
    (tmp_path / "report.json").write_text("")
    reports = load_reports([str(tmp_path)])
    assert not reports.found and reports.problems[0].severity == "warning"


def test_labels_prefer_the_harness_over_the_row(samples_dir):
    (traj,) = [
        t
        for t in read_file(READERS, str(samples_dir / "swe_issue_fix" / "nebius_row.json"))
        if isinstance(t, Trajectory)
    ]
    from extractors.labels.reports import RunVerdict

    verdict = RunVerdict(traj.source.instance_id, False, "unresolved", "report.json:resolved", 2)
    relabelled = apply_verdict(traj, verdict)
    assert relabelled.outcome.label == "failure" and relabelled.outcome.signal == "report.json:resolved"


def test_directories_are_searched_recursively(samples_dir):
    from extractors.ingest.records import find_inputs

    found = find_inputs([samples_dir / "swe_issue_fix"])
    assert any(p.name == "tinycalc__tinycalc-12.traj" for p in found)
    assert all(isinstance(p, Path) for p in found)


def test_ids_do_not_depend_on_where_the_inputs_live(samples_dir, tmp_path):
    """Trajectory (hence item) ids derive from the path below the input root, so a moved checkout keeps them."""
    import shutil

    a, b = tmp_path / "a" / "runs", tmp_path / "elsewhere" / "deeper" / "copy"
    for dest in (a, b):
        shutil.copytree(samples_dir / "swe_issue_fix", dest)

    def ids(root):
        files = [(str(p), None, str(root)) for p in find_inputs([root])]
        return sorted(t.trajectory_id for t in stages.read_stage(READERS, files).trajectories)

    assert ids(a) == ids(b) and len(set(ids(a))) == len(ids(a)) > 5


def test_same_named_runs_in_different_folders_keep_different_ids(tmp_path, samples_dir):
    src = (
        samples_dir / "swe_issue_fix" / "sweagent_v1" / "tinycalc__tinycalc-12" / "tinycalc__tinycalc-12.traj"
    )
    for sub in ("run1", "run2"):
        (tmp_path / sub).mkdir()
        (tmp_path / sub / src.name).write_bytes(src.read_bytes())
    files = [(str(p), None, str(tmp_path)) for p in find_inputs([tmp_path])]
    trajs = stages.read_stage(READERS, files).trajectories
    assert len({t.trajectory_id for t in trajs}) == 2
