"""Harness reports are tied to the run they judge: runs of several models in one build each get their own verdicts."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from extractors.discovery import discover_readers
from extractors.labels.reports import load_reports
from extractors.labels.runs import run_key, tie_reports
from flows import stages
from schemas import Source, Trajectory

RUN = Path(
    "trajectories/minisweagent-v1-gemini3pro-swebench-verified/swebench_results/20251118_gemini-3-pro-74pct"
)
SB_CLI = (
    "trajs/sb-cli-reports/swe-bench_verified__test__20251118_mini-v1.15.0_gemini-3-pro-preview-20251118.json"
)


def _second_model(shared: Path, tmp: Path, resolved_by_a: set[str]) -> tuple[Path, Path, dict[str, bool]]:
    """A copy of the shared run as another model's run, with its own report resolving other instances."""
    root = tmp / "20251201_mini_acme-coder-7b" / "trajs"
    verdicts: dict[str, bool] = {}
    for n, src in enumerate(sorted((shared / RUN / "trajs").glob("*/*.traj.json"))):
        iid = src.parent.name
        data = json.loads(src.read_text())
        data["info"]["config"]["model"]["model_name"] = "acme/acme-coder-7b"
        data["messages"][2]["content"] = "THOUGHT: (acme) " + data["messages"][2]["content"]
        (root / iid).mkdir(parents=True)
        (root / iid / src.name).write_text(json.dumps(data))
        verdicts[iid] = (iid not in resolved_by_a) if n % 3 else (iid in resolved_by_a)
    report = tmp / "20251201_mini_acme-coder-7b" / "report" / "acme-coder-7b.sb-cli.json"
    report.parent.mkdir(parents=True)
    report.write_text(
        json.dumps(
            {
                "resolved_ids": sorted(i for i, ok in verdicts.items() if ok),
                "unresolved_ids": sorted(i for i, ok in verdicts.items() if not ok),
                "pending_ids": [],
            }
        )
    )
    return root, report, verdicts


def _label(folders: list[Path], reports: list) -> stages.KeepResult:
    files = [(str(p), None) for f in folders for p in sorted(f.glob("*/*.traj.json"))]
    read = stages.read_stage(discover_readers(), files)
    return stages.label_and_keep(read.trajectories, load_reports(reports).found, [], frozenset({"swe"}), True)


def test_two_models_runs_of_the_same_instances_each_get_their_own_reports_verdicts(shared_dir, tmp_path):
    sb_cli = json.loads((shared_dir / RUN / SB_CLI).read_text())
    resolved_a = set(sb_cli["resolved_ids"])
    root_b, report_b, verdicts_b = _second_model(shared_dir, tmp_path, resolved_a)
    # the second report differs from the first on most of the 52 shared instances
    assert sum(verdicts_b[i] != (i in resolved_a) for i in verdicts_b) >= 30
    kept = _label([shared_dir / RUN / "trajs", root_b], [str(shared_dir / RUN / SB_CLI), str(report_b)])
    by_model = Counter("acme" if t.source.model == "acme/acme-coder-7b" else "gemini" for t in kept.labelled)
    assert by_model == {"gemini": 52, "acme": 52}  # one real run records its model as "@google/..."
    for t in kept.labelled:
        own = (
            (t.source.instance_id in resolved_a)
            if t.source.model != "acme/acme-coder-7b"
            else verdicts_b[t.source.instance_id]
        )
        assert t.outcome.label == ("success" if own else "failure"), (t.source.file, t.outcome)
    assert not [p for p in kept.problems if p.stage == "label"]  # no false conflicts, no ambiguity
    # the per-instance reports of the first run (logs/<id>/report.json) tie to it by its folder tree
    kept = _label([shared_dir / RUN / "trajs", root_b], [str(shared_dir / RUN / "logs"), str(report_b)])
    assert not [p for p in kept.problems if p.stage == "label"]
    signals = Counter(t.outcome.signal.split(":")[0] for t in kept.labelled)
    assert signals == {"report.json": 52, "sb_cli": 52}
    gemini = [t for t in kept.labelled if t.source.model != "acme/acme-coder-7b"]
    assert all(
        t.outcome.label == ("success" if t.source.instance_id in resolved_a else "failure") for t in gemini
    )


def _run(iid: str, file: str, model: str) -> Trajectory:
    return Trajectory(
        trajectory_id=f"{model}-{iid}",
        kind="swe",
        task="t",
        source=Source(format="f", file=file, instance_id=iid, model=model),
    )


def test_a_report_that_could_judge_two_runs_is_an_error_naming_both_and_a_config_mapping_settles_it(tmp_path):
    a = _run("x__x-1", "/data/runA/x__x-1/x__x-1.traj.json", "org/alpha")
    b = _run("x__x-1", "/data/runB/x__x-1/x__x-1.traj.json", "org/beta")
    (tmp_path / "report.json").write_text(json.dumps({"resolved_ids": ["x__x-1"], "unresolved_ids": []}))
    tied = tie_reports([a, b], load_reports([str(tmp_path / "report.json")]).found)
    (problem,) = tied.problems
    assert problem.reason == "ambiguous_report" and problem.severity == "error"
    assert "/data/runA" in problem.detail and "/data/runB" in problem.detail
    assert tied.of(a) is None and tied.of(b) is None
    tied = tie_reports([a, b], load_reports([(str(tmp_path / "report.json"), "beta")]).found)
    assert not tied.problems and tied.of(a) is None and tied.of(b).resolved is True
    tied = tie_reports([a, b], load_reports([(str(tmp_path / "report.json"), "/data/runA")]).found)
    assert tied.of(a).resolved is True and tied.of(b) is None
    # the model name in the report's file name decides between runs at the same distance
    (tmp_path / "alpha.json").write_text(json.dumps({"resolved_ids": [], "unresolved_ids": ["x__x-1"]}))
    tied = tie_reports([a, b], load_reports([str(tmp_path / "alpha.json")]).found)
    assert not tied.problems and tied.of(a).resolved is False and tied.of(b) is None


def test_a_run_key_is_the_folder_above_the_instance_folder_and_the_model():
    t = _run("x__x-1", "/data/runA/x__x-1/x__x-1.traj.json", "org/alpha")
    assert run_key(t) == ("/data/runA", "org/alpha")
    assert run_key(_run("x__x-1", "/data/out/output.jsonl", "m")).root == "/data/out"


def test_only_a_real_contradiction_within_one_run_is_a_conflict(tmp_path):
    a = _run("x__x-1", "/data/runA/x__x-1/x__x-1.traj.json", "org/alpha")
    for name, ids in (("one.json", ["x__x-1"]), ("two.json", [])):
        (tmp_path / name).write_text(
            json.dumps({"resolved_ids": ids, "unresolved_ids": ["x__x-1"][len(ids) :]})
        )
    tied = tie_reports([a], load_reports([str(tmp_path)]).found)
    (problem,) = tied.problems
    assert problem.reason == "conflicting_verdicts" and "/data/runA" in problem.detail
