"""The `swe_env_setup` extractor: action targets, error fixes and checked-wrong plans.

Pure functions on hand-built runs (every command's fate spelled out) and on the bundled samples;
the offline generator and the model-free baselines are run on the result where the task is MCQ.
"""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest

from extractors.base import ExtractOptions, Origin
from extractors.discovery import discover_readers
from extractors.ingest.bundles import find_run_inputs, read_input
from extractors.readers.envsetup.common import make_step, to_trajectory, verdict
from extractors.shell.commands import has_placeholder, is_read_only
from extractors.swe_env_setup import SweEnvSetup, distinct_fixes, pathless, pins
from extractors.swe_env_setup.errors import error_pairs
from extractors.swe_env_setup.plan import apply, is_wrong, plan_distractors, required_steps, similarity
from extractors.swe_env_setup.steps import plan_steps, render_plan
from flows import stages
from generators.offline import OfflineGenerator
from generators.quality.baselines import Mcq, task_baselines
from schemas import GoldStep, Problem, Trajectory
from schemas.envsetup import EnvSetupRun, SourceRef, TargetRepo, run_of

OPTS = ExtractOptions(
    max_items_per_trajectory=50, max_context_tokens=4000, max_observation_chars=2000, seed=7
)
TRACEBACK = (
    'Traceback (most recent call last):\n  File "/content/widget/train.py", line 9, in <module>\n'
    '    cfg = load_config("cfg.yaml")\n  File "/content/widget/widget/config.py", line 3, in load_config\n'
    "    import {}\nModuleNotFoundError: No module named '{}'\n"
)


def _traj(
    steps: list[dict],
    success: bool = True,
    repo: str = "https://github.com/acme/widget",
    run_id: str = "test/widget",
) -> Trajectory:
    run = EnvSetupRun(
        run_id=run_id,
        source=SourceRef(format="test"),
        target_repo=TargetRepo(url=repo),
        task="Set up widget and run train.py",
        steps=tuple(make_step(i, **s) for i, s in enumerate(steps)),
        outcome=verdict(success, "test verdict", "" if success else "failed"),
    )
    return to_trajectory(
        run, reader_name="test", reader_version=1, origin=Origin(f"/runs/{run_id}.json"), instance_id="widget"
    )


def _sh(cmd: str, output: str = "", code: int | None = 0) -> dict:
    return {"kind": "shell", "command": cmd, "output": output, "exit_code": code}


RUN = [
    _sh("git clone https://github.com/acme/widget.git"),
    _sh("ls widget", "README.md setup.py train.py"),
    _sh("cd widget"),
    _sh("git clone <repository_url>"),
    _sh("python train.py", TRACEBACK.format("yaml", "yaml"), None),
    _sh("apt-get install -y libyaml-dev", "E: Unable to locate package libyaml-dev", 100),
    _sh("pip install pyyaml", "Successfully installed pyyaml-6.0", None),
    _sh("python train.py", "epoch 1 loss 0.2\n", None),
    _sh("cd widget"),
    _sh("export A=1; export B=2"),
    _sh("pip show pyyaml"),
]


def _golds(
    traj: Trajectory, task: str, extractor: SweEnvSetup | None = None
) -> tuple[list[GoldStep], list[Problem]]:
    out = list((extractor or SweEnvSetup()).extract(traj, task, OPTS))
    return [g for g in out if isinstance(g, GoldStep)], [p for p in out if isinstance(p, Problem)]


def test_action_targets_are_only_successful_new_one_line_setup_commands():
    golds, problems = _golds(_traj(RUN), "action")
    targets = [g.gold for g in golds]
    assert targets == ["cd widget", "pip install pyyaml", "python train.py"]
    for g in golds:
        f = g.fields
        assert f["cmd_prefix"] + " " + f["cmd_postfix"] == f["target_cmd"] == g.gold
        assert (
            ";" not in g.gold
            and "\n" not in g.gold
            and not has_placeholder(g.gold)
            and not is_read_only(g.gold)
        )
        assert g.gold not in f["executed_cmds"].split(";") and f["executed_cmds"].startswith("git clone")
        assert f["execution_plan"].startswith("step1: Clone the repository acme/widget")
    assert golds[1].fields["cmd_prefix"] == "pip install" and golds[1].fields["cmd_postfix"] == "pyyaml"
    dropped = next(p for p in problems if p.reason == "action_targets_dropped")
    for reason in ("read_only=2", "placeholder=1", "failed=2", "repeat=1", "semicolon=1"):
        assert reason in dropped.detail


def test_the_error_gold_is_the_fix_that_worked_and_the_failed_attempt_is_a_distractor():
    golds, _ = _golds(_traj(RUN), "error")
    assert len(golds) == 1
    g = golds[0]
    assert g.gold == "1. Run `pip install pyyaml`"
    assert "1. Run `apt-get install -y libyaml-dev`" in [c.text for c in g.candidates]
    assert g.fields["issue_title"].startswith("ModuleNotFoundError: No module named 'yaml'")
    assert "python train.py" in g.fields["issue_body"] and "1. Create" not in g.fields["setup_instruct"]
    assert all(similarity(c.text, g.gold) < 0.9 for c in g.candidates)  # observed fixes, never edited copies


def test_a_failure_that_never_went_away_gives_no_error_item():
    steps = [
        _sh("python train.py", TRACEBACK.format("yaml", "yaml"), None),
        _sh("pip install yml", "Successfully installed yml-1"),
        _sh("python train.py", TRACEBACK.format("yaml", "yaml"), None),
    ]
    golds, problems = _golds(_traj(steps), "error")
    assert golds == [] and [p.reason for p in problems] == ["no_eligible_steps"]


def test_a_directory_change_naming_the_missing_path_is_never_the_whole_fix():
    # SUPER bert-lnl: `%cd data/AG_News/txt_data`, then a code cell writes train.txt; the cd alone was the gold
    missing = (
        'Traceback (most recent call last):\n  File "/content/widget/train.py", line 4, in <module>\n'
        "    open('data/txt/train.txt')\nFileNotFoundError: [Errno 2] No such file or directory: "
        "'data/txt/train.txt'\n"
    )
    cd_then_cell = [
        _sh("python train.py", missing, None),
        _sh("cd data/txt"),
        {"kind": "code", "command": "open('train.txt', 'w').write('x')", "output": "", "exit_code": 0},
        _sh("cd /content/widget"),
        _sh("python train.py", "epoch 1 loss 0.2\n", None),
    ]
    golds, problems = _golds(_traj(cd_then_cell), "error")
    assert golds == [] and [p.reason for p in problems] == ["no_eligible_steps"]
    made_there = [*cd_then_cell[:2], _sh("touch data/txt/train.txt"), *cd_then_cell[3:]]
    golds, _ = _golds(_traj(made_there), "error")  # a step that makes the path is the fix, cd or not
    assert [g.gold for g in golds] == ["1. Run `cd data/txt`\n2. Run `touch data/txt/train.txt`"]


def test_an_edit_fix_shows_every_line_it_adds():
    from extractors.swe_env_setup.errors import fix_lines
    from schemas.envsetup import FileEdit

    # SUPER unsupervisedhierarchicalsymbolicregression: `import matplotlib` alone was shown as the fix
    edit = FileEdit(
        path="train.py",
        before="from config import names\n",
        after="from config import names\n\nimport matplotlib\nmatplotlib.use('Agg')\n",
    )
    run = run_of(_traj([{"kind": "edit", "command": "edit train.py", "edit": edit}]).meta)
    assert fix_lines(run, (0,)) == ["In `train.py`, add `import matplotlib` and `matplotlib.use('Agg')`"]


def test_fixes_that_failed_in_other_runs_become_distractors_of_the_same_repo():
    failed_run = _traj(
        [
            _sh("python train.py", TRACEBACK.format("yaml", "yaml"), None),
            _sh("pip install yaml-tools"),
            _sh("python train.py", TRACEBACK.format("yaml", "yaml"), None),
        ],
        success=False,
        run_id="test/widget-2",
    )
    library = SweEnvSetup.observe([failed_run, _traj(RUN)])
    assert any(
        f.text == "1. Run `pip install yaml-tools`" and f.repo == "https://github.com/acme/widget"
        for f in library.fixes
    )
    extractor = stages.make_extractor(SweEnvSetup, library)
    golds, _ = _golds(_traj(RUN), "error", extractor)
    assert "1. Run `pip install yaml-tools`" in [c.text for c in golds[0].candidates]


def test_every_plan_distractor_is_checked_wrong_by_the_runs_evidence(samples_dir):
    path = samples_dir / "swe_env_setup/super/gpt-4o-2024-08-06_react-super_expert/wordvec/history.ipynb"
    traj = next(o for o in read_input(discover_readers(), str(path)) if isinstance(o, Trajectory))
    run = run_of(traj.meta)
    plan = plan_steps(run)
    required = required_steps(plan, error_pairs(run))
    assert {plan[k].category for k in required} >= {"clone", "edit", "run"}
    options = plan_distractors(plan, required, "wordvec", random.Random(3))
    gold = render_plan(plan, star=True)
    assert len(options) == 6 and gold not in options
    texts = [s.text for s in plan]
    for option in options:
        steps = [t.split(": ", 1)[1] for t in option.rstrip(";").split(";")]
        variant = [texts.index(t) if t in texts else t for t in steps]
        inserted = [t for t in variant if isinstance(t, str)]
        assert all(
            t.startswith(("Uninstall", "Delete")) for t in inserted
        )  # only harmful steps are ever added
        assert is_wrong(variant, required)
        assert similarity(option, gold) < 0.85
    moved_only = [o for o in options if all(t.split(": ", 1)[1] in texts for t in o.rstrip(";").split(";"))]
    assert len(moved_only) >= 4  # mostly the same steps in another order: no word or length tell
    assert not is_wrong(list(range(len(plan))), required)
    assert apply(plan, []) == list(range(len(plan)))


def _sample_golds(samples_dir: Path) -> dict[str, list[GoldStep]]:
    trajs = [
        o
        for f in find_run_inputs([samples_dir / "swe_env_setup"])
        for o in read_input(discover_readers(), str(f))
        if isinstance(o, Trajectory)
    ]
    extractor = stages.make_extractor(SweEnvSetup, stages.observe_runs(SweEnvSetup, trajs))
    out: dict[str, list[GoldStep]] = {"plan": [], "action": [], "error": []}
    for t in trajs:
        if t.outcome.label == "success":
            for task in out:
                out[task] += [g for g in extractor.extract(t, task, OPTS) if isinstance(g, GoldStep)]
    return out


def test_the_bundled_samples_give_items_of_all_three_tasks_that_the_offline_generator_can_pose(samples_dir):
    golds = _sample_golds(samples_dir)
    assert all(golds[t] for t in ("plan", "action", "error"))
    for task in ("plan", "error"):
        questions, problems = stages.generate_stage(
            OfflineGenerator(seed=1), golds[task], stages.pool_of(golds[task]), 7
        )
        assert problems == [] and len(questions) == len(golds[task])
        assert all(len(q.options) == 7 and q.options[q.gold_index] == q.gold for q in questions)
        if task == "plan":  # plan options come only from the checked-wrong candidates
            assert all(
                d.origin.startswith(("rule:plan_", "other_run:plan_"))
                for q in questions
                for d in q.distractors
            )


@pytest.mark.parametrize("seed", [1, 2])
def test_the_gold_fix_is_not_the_most_central_or_longest_option_on_the_samples(samples_dir, seed):
    golds = _sample_golds(samples_dir)["error"]
    questions, _ = stages.generate_stage(OfflineGenerator(seed=seed), golds, stages.pool_of(golds), 7)
    result = task_baselines([Mcq(q.item_id, q.options, q.gold_index) for q in questions])
    assert result.accuracy["central"] <= result.bounds["central"]
    assert result.accuracy["longest"] <= result.bounds["longest"]


def _super_runs(shared_dir: Path) -> list[Trajectory]:
    root = shared_dir / "envsetup" / "super-benchmark"
    assert root.is_dir(), f"{root} is missing"
    files = [(str(f), None, str(root)) for f in find_run_inputs([str(root)])]
    read = stages.read_stage(discover_readers(), files)
    return stages.label_and_keep(
        read.trajectories, {}, read.verdicts, frozenset({"envsetup"}), False
    ).labelled


def test_every_super_error_gold_names_only_what_its_traceback_names_and_was_verified_by_a_rerun(shared_dir):
    from extractors.swe_env_setup.errors import _key, fix_lines, installed, package_named
    from extractors.swe_env_setup.tracebacks import identify, same_error

    checked = 0
    for traj in _super_runs(shared_dir):
        run = run_of(traj.meta)
        for p in error_pairs(run):
            fail, rerun = run.steps[p.fail], run.steps[p.evidence]
            err = identify(fail.output)
            assert err is not None and err.key == p.error.key
            # the next run of the same invocation no longer shows that error
            assert _key(rerun) == _key(fail) and not same_error(err, rerun.output), (run.run_id, p.fail)
            assert all(
                p.fail < i <= p.evidence and (i == p.evidence or not run.steps[i].failed) for i in p.fix
            )
            named = " ".join([*err.repo_files(), fail.command, err.message]).lower()
            for i in p.fix:
                s = run.steps[i]
                if s.kind == "edit":  # an edited file is one the traceback or the failing command names
                    assert s.edit.path.rsplit("/", 1)[-1].lower() in named, (run.run_id, s.edit.path)
                for pkg in installed(s.command) if s.kind == "shell" and i != p.evidence else []:
                    assert package_named(pkg, err), (run.run_id, pkg, err.key)
            lines = fix_lines(run, p.fix, p.fail)
            for line in lines:  # the gold's files are files of this traceback, changed by the run
                for path in re.findall(r"^In `([^`]+)`", line):
                    assert any(run.steps[i].edit and run.steps[i].edit.path.endswith(path) for i in p.fix)
            checked += 1
    assert checked >= 60


def test_super_error_options_are_whole_and_name_no_file_the_item_does_not_mention(shared_dir):
    from extractors.swe_env_setup import mentions_only

    runs = _super_runs(shared_dir)
    extractor = stages.make_extractor(SweEnvSetup, SweEnvSetup.observe(runs))
    items = [g for t in runs if t.outcome.label == "success" for g in _golds(t, "error", extractor)[0]]
    assert len(items) >= 60
    for g in items:
        context = "\n".join(g.fields.values())
        assert "..." not in g.gold and "..." not in g.fields["issue_title"]
        assert len(g.candidates) >= 4, g.fields["issue_title"]
        for c in g.candidates:
            assert "..." not in c.text and mentions_only(c.text, context), c
            assert re.fullmatch(r"(?:\d+\. (?:Run|Re-run it as|In|Add|Remove|Change) [^\n]+\n?)+", c.text), (
                c.text
            )
    assert sum(len(g.candidates) >= 12 for g in items) >= len(items) // 4  # twice the 6 needed, or more


def test_no_error_option_is_the_gold_under_another_path_or_names_the_golds_pin():
    gold = "1. In `train_model.py`, remove `}`"
    cands = [
        "1. In `experiments/SNLI_NLI/train_model.py`, remove `}`",  # the gold under its full path
        "1. Run `pip install -U torch==1.13.1`",
        "1. In `models/prompt.py`, remove `}`",
        "1. In `prompt.py`, remove `}`",  # the one before under another path
        "1. Run `pip install torch==2.0.0`",
    ]
    assert distinct_fixes(gold, cands) == cands[1:3] + cands[4:]
    pinned = "1. Run `pip install torch==1.13.1`"
    assert distinct_fixes(pinned, cands) == [cands[0], cands[2], cands[4]]
    assert (
        pathless("1. Run `pip install -r ./requirements.txt`") == "1. Run `pip install -r requirements.txt`"
    )
    assert pins("1. Run `pip install Torch == 1.13.1 numpy`") == {("torch", "1.13.1")}
