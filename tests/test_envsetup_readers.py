"""Env-setup adapters: run folders read as one bundle, each source mapped into one normalised run.

Runs the bundled samples (`extractors/samples/swe_env_setup`) through `bundles.read_input` with
every discovered reader, and the shell helpers the adapters share on literal commands.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from extractors.base import Origin
from extractors.discovery import discover_readers
from extractors.ingest.bundles import bundle_record, detect_bundle, find_run_inputs, read_input
from extractors.ingest.records import Record
from extractors.ingest.sniff import read_record
from extractors.shell.commands import (
    command_key,
    error_line,
    has_placeholder,
    infer_failure,
    is_read_only,
    notebook_commands,
)
from schemas import Problem, Trajectory
from schemas.envsetup import EnvSetupRun, run_of

READERS = discover_readers()


@pytest.fixture(scope="module")
def samples(samples_dir: Path) -> Path:
    return samples_dir / "swe_env_setup"


def _read(path: Path) -> list[Trajectory | Problem]:
    return [o for o in read_input(READERS, str(path)) if isinstance(o, (Trajectory, Problem))]


def _run(path: Path) -> tuple[Trajectory, EnvSetupRun]:
    outs = _read(path)
    trajs = [o for o in outs if isinstance(o, Trajectory)]
    assert len(trajs) == 1, outs
    return trajs[0], run_of(trajs[0].meta)


SUPER = "super/gpt-4o-2024-08-06_react-super_masked"


def test_a_super_notebook_becomes_one_run_with_the_replayed_gold_cells_marked(samples):
    traj, run = _run(samples / SUPER / "tinyner_dependencies" / "history.ipynb")
    assert traj.kind == "envsetup" and traj.source.format == "super_ipynb"
    assert traj.outcome.label == "success" and traj.outcome.signal == "metrics.json output_match==1"
    assert run.run_id == "super/react-super_masked/tinyner_dependencies"
    assert run.agent.name == "react-super" and run.agent.model == "gpt-4o-2024-08-06"
    assert run.target_repo.url == "https://github.com/tinyner-org/tinyner"
    by_command = {s.command: s for s in run.steps}
    assert by_command["cd tinyner"].origin == "replayed_gold"  # `%cd tinyner`, pre-executed by user
    assert by_command["cd tinyner"].raw_action == "%cd tinyner"
    assert (
        by_command["pip install seqeval-fast"].failed
        and by_command["pip install seqeval-fast"].exit_code_inferred
    )
    assert (
        by_command["pip install seqeval"].exit_code == 0
        and by_command["pip install seqeval"].origin == "agent"
    )
    assert (
        by_command["configs/small.yaml"].kind == "edit"
        and by_command["configs/small.yaml"].edit.after == "device: cpu"
    )
    assert run.steps[-1].kind == "submit"
    assert "seqeval" in run.context.readme and len(traj.steps) == len(run.steps)


def test_a_super_run_below_full_match_and_full_checkpoints_is_a_failure(samples):
    traj, run = _run(samples / SUPER / "tinyner_issue" / "history.ipynb")
    assert traj.outcome.label == "failure" and traj.outcome.reason == "output_mismatch"
    assert run.outcome.details == {"submitted": 1, "output_match": 0.0, "checkpoints": 0.5, "entrypoint": 0.0}


def test_all_checkpoints_reached_counts_as_success_when_the_output_does_not_match(samples):
    traj, _ = _run(samples / "super/gpt-4o-2024-08-06_react-super_expert/wordvec/history.ipynb")
    assert traj.outcome.label == "success" and traj.outcome.signal == "metrics.json checkpoints==1"


def test_a_metrics_file_without_its_notebook_is_reported_and_not_read(samples):
    outs = _read(samples / SUPER / "tinyner_data" / "metrics.json")
    assert len(outs) == 1 and isinstance(outs[0], Problem)
    assert outs[0].reason == "run_not_present" and outs[0].severity == "info"


def test_a_repolaunch_run_takes_exit_codes_from_the_log_and_its_label_from_result_json(samples):
    traj, run = _run(samples / "repolaunch/ts/playground/quietlog__quietlog-42/setup.log")
    assert traj.outcome.label == "success" and traj.outcome.signal == "result.json completed"
    assert [(s.command, s.exit_code) for s in run.steps][:2] == [("npm ci", 1), ("npm install -g n", 0)]
    assert not any(s.exit_code_inferred for s in run.steps)
    assert 'Required: {"node":">=22"}' in run.steps[0].output and "exit code" not in run.steps[0].output
    assert (
        run.target_repo.commit == "3b1f0c2d9e8a7b6c5d4e3f2a1b0c9d8e7f6a5b4c"
        and run.target_repo.language == "typescript"
    )
    assert [d.path for d in run.context.docs] == [
        "README.md",
        "package.json",
        ".nvmrc",
    ] and "Node 22" in run.context.readme


def test_a_repolaunch_run_that_did_not_complete_is_a_failure_named_by_its_exception(samples):
    traj, _ = _run(samples / "repolaunch/ts/playground/quietlog__quietlog-57/setup.log")
    assert traj.outcome.label == "failure" and traj.outcome.reason == "launch_failed"


def test_a_completed_repolaunch_run_with_a_later_exception_follows_the_harness_rule(samples, tmp_path):
    import shutil

    src = samples / "repolaunch/ts/playground/quietlog__quietlog-42"
    dst = tmp_path / "ts/playground/quietlog__quietlog-42"
    shutil.copytree(src, dst)
    result = json.loads((dst / "result.json").read_text())
    result["exception"] = "Failed to cleanup session: container already removed"
    (dst / "result.json").write_text(json.dumps(result))
    traj, _ = _run(dst / "setup.log")
    # RepoLaunch's collect step keeps every run whose `completed` is true
    assert traj.outcome.label == "success"
    assert "completed=true" in traj.outcome.signal and "container already removed" in traj.outcome.signal
    assert "completed=false" not in traj.outcome.signal
    result["completed"] = False
    (dst / "result.json").write_text(json.dumps(result))
    traj, _ = _run(dst / "setup.log")
    assert traj.outcome.label == "failure" and traj.outcome.signal == "result.json completed=false"


def test_installamatic_builds_are_labelled_by_their_trial_in_the_eval_json(samples):
    folder = samples / "installamatic/logs/messages/quiet-otter"
    ok, run = _run(folder / "gpt-4o-mini-pgtiny-build-0.json")
    assert ok.outcome.label == "success" and run.outcome.details["n_tries"] == 1
    dockerfiles = [s for s in run.steps if s.kind == "dockerfile"]
    assert [s.exit_code for s in dockerfiles] == [1, 0]
    assert "pg_config executable not found" in dockerfiles[0].output
    assert "libpq-dev" in dockerfiles[1].edit.after and "libpq-dev" not in dockerfiles[1].edit.before
    assert run.agent.model == "gpt-4o-mini" and "libpq" in run.context.readme  # from the gather log
    bad, _ = _run(folder / "gpt-4o-mini-pgtiny-build-1.json")
    assert bad.outcome.label == "failure" and bad.outcome.reason == "build_failed"


def test_a_repo2run_track_is_labelled_by_its_last_runtest(samples):
    traj, run = _run(samples / "repo2run/build_agent/output/toyorg/notecalc/track.json")
    assert (
        traj.outcome.label == "success" and traj.outcome.signal == "outer_commands.json runtest returncode 0"
    )
    codes = [(s.command, s.exit_code) for s in run.steps]
    assert ("waitinglist add -p flask", 127) in codes and codes[-1] == ("runtest", 0)


def test_run_folders_fold_into_one_input_each(samples):
    found = [p.relative_to(samples).as_posix() for p in find_run_inputs([samples])]
    names = {Path(p).name for p in found}
    assert not names & {
        "result.json",
        "instance.json",
        "outer_commands.json",
        "inner_commands.json",
        "pip_list.json",
        "quiet-otter_gpt-4o-mini.json",
    }
    assert f"{SUPER}/tinyner_data/metrics.json" in found  # the folder has no notebook: the verdict stands in
    assert f"{SUPER}/tinyner_dependencies/history.ipynb" in found
    assert "repolaunch/ts/playground/quietlog__quietlog-42/setup.log" in found
    assert sum(p.endswith("-build-0.json") for p in found) == 1 and not any("-gather-" in p for p in found)
    bundle = detect_bundle(
        samples / "installamatic/logs/messages/quiet-otter/gpt-4o-mini-pgtiny-gather-0.json"
    )
    assert (
        bundle is not None
        and bundle.primary.endswith("build-0.json")
        and set(bundle.members) == {"build", "gather", "eval"}
    )


def test_broken_members_become_problems_naming_file_and_line(samples):
    broken = samples / "malformed"
    outs = [o for f in find_run_inputs([broken]) for o in read_input(READERS, str(f))]
    problems = {
        (Path(p.where.split(":")[0]).name, p.where.rsplit(":", 1)[-1], p.reason)
        for p in outs
        if isinstance(p, Problem)
    }
    assert ("history.ipynb", "53", "truncated_json") in problems
    assert ("result.json", "3", "invalid_json") in problems
    assert any(name.endswith("build-2.json") and reason == "wrong_type" for name, _, reason in problems)
    runs = [o for o in outs if isinstance(o, Trajectory)]
    assert [r.outcome.label for r in runs] == ["unknown"]  # the RepoLaunch log still reads, without a verdict


def _records(samples: Path) -> list[Record]:
    recs = []
    for f in find_run_inputs([samples]):
        bundle = detect_bundle(f)
        if bundle is not None and "missing" not in bundle.meta:
            recs += [r for r in bundle_record(bundle) if isinstance(r, Record)]
    return recs


def _mutate(value: Any, data: st.DataObject, depth: int = 0) -> Any:
    if not isinstance(value, (dict, list)) or not value or depth > 5 or data.draw(st.integers(0, 4)) == 0:
        return data.draw(
            st.none() | st.integers() | st.text(max_size=20) | st.lists(st.text(max_size=5), max_size=3)
        )
    if isinstance(value, dict):
        key = data.draw(st.sampled_from(sorted(value, key=str)))
        return {**value, key: _mutate(value[key], data, depth + 1)}
    i = data.draw(st.integers(0, len(value) - 1))
    return [*value[:i], _mutate(value[i], data, depth + 1), *value[i + 1 :]]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_damaged_bundle_records_read_as_a_run_or_a_problem_never_a_crash(data, samples_dir):
    records = _records(samples_dir / "swe_env_setup")
    rec = data.draw(st.sampled_from(records))
    damaged = json.loads(json.dumps(rec.data, default=lambda o: dict(o)))
    damaged = _mutate(damaged, data)
    out = read_record(READERS, Record(damaged, Origin(rec.origin.file, None)))
    assert out is None or isinstance(out, (Trajectory, Problem, list))
    if isinstance(out, Problem):
        assert out.where == rec.origin.file and out.reason


@pytest.mark.parametrize(
    ("cell", "expected"),
    [
        ("!pip install -q seqeval", ("shell", ("pip install -q seqeval",))),
        ("%cd ColBERT", ("shell", ("cd ColBERT",))),
        ("# comment\n!python run.py \\\n  --epochs 1", ("shell", ("python run.py --epochs 1",))),
        ("%%bash\nmake\nmake test", ("shell", ("make", "make test"))),
        ("import os\n!ls", ("code", ())),
        ("# only a comment", ("other", ())),
    ],
)
def test_notebook_cells_normalise_to_shell_commands(cell, expected):
    assert tuple(notebook_commands(cell)) == expected


def test_the_shell_helpers_classify_commands_as_the_extractor_needs():
    assert (
        is_read_only("ls -la")
        and is_read_only("cat README.md | head -n 20")
        and is_read_only("pip show torch")
    )
    assert is_read_only("sed -n '1,20p' setup.py") and not is_read_only("sed -i 's/a/b/' setup.py")
    assert not is_read_only("pip install torch") and not is_read_only("cd repo && ls")
    assert has_placeholder("git clone <repository_url>") and has_placeholder("cd /path/to/repo")
    assert not has_placeholder("python a.py < in.txt > out.txt")
    assert command_key("CUDA_VISIBLE_DEVICES=0 python3 -m colbert.train --amp") == "python -m colbert.train"
    assert command_key("npm ci --force") == command_key("npm ci")


def test_failure_is_inferred_from_output_only_when_the_source_has_no_exit_code():
    resolver = "ERROR: pip's dependency resolver does not currently take into account all the packages\nSuccessfully installed x-1.0\n"
    assert infer_failure("pip install x", resolver) is False
    assert infer_failure("pip install y", "ERROR: No matching distribution found for y\n") is True
    assert (
        infer_failure("python t.py", "Traceback (most recent call last):\n  File ...\nKeyError: 'a'\n")
        is True
    )
    assert infer_failure("python t.py", "epoch 1 loss 0.3\n") is False
    assert infer_failure("python t.py", None) is None
    tb = "Traceback (most recent call last):\n  File \"a.py\", line 1\nModuleNotFoundError: No module named 'faiss'\n"
    assert error_line(tb) == "ModuleNotFoundError: No module named 'faiss'"
    assert (
        error_line("npm ERR! code EBADENGINE\nnpm ERR! engine Unsupported engine\n")
        == "npm ERR! code EBADENGINE"
    )
