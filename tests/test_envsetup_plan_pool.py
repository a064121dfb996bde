"""Env-setup `plan` wrong plans that keep the gold's shape, `action` targets the plan determines.

A planted shortcut first: APTBench-style wrong plans (block moves, harmful inserts) leave the gold
the only option that starts with the clone and ends with the final run, and a rule that reads only
the step order finds it every time. The pool of several kinds (omit, wrong entry point, wrong file,
wrong package or version, another repository's step, reorder, extra step) keeps the clone first
and the final run last in most options, so the same rules fall to chance. Then the same on the
76 real SUPER runs through `APTFORGE_SHARED`.
"""

from __future__ import annotations

import random
import re
import statistics
from collections import Counter
from pathlib import Path

import pytest

from extractors.base import ExtractOptions, Origin
from extractors.discovery import discover_readers
from extractors.ingest.bundles import find_run_inputs
from extractors.readers.envsetup.common import make_step, to_trajectory, verdict
from extractors.swe_env_setup import SweEnvSetup
from extractors.swe_env_setup.errors import error_pairs
from extractors.swe_env_setup.plan import plan_distractors, required_steps
from extractors.swe_env_setup.plan_variants import clean_plan, remap_required, wrong_plans
from extractors.swe_env_setup.steps import PlanStep, block_commands, determined, plan_steps, shell_lines
from extractors.swe_env_setup.tasks import SPECS
from flows import stages
from generators.offline import OfflineGenerator
from schemas import GoldStep, Problem, Trajectory
from schemas.envsetup import Doc, EnvSetupRun, RunContext, SourceRef, TargetRepo, run_of

OPTS = ExtractOptions(
    max_items_per_trajectory=50, max_context_tokens=4000, max_observation_chars=2000, seed=7
)
MISSING = (
    'Traceback (most recent call last):\n  File "/content/{repo}/train.py", line 3, in <module>\n'
    "    import {mod}\nModuleNotFoundError: No module named '{mod}'\n"
)
README = (
    "# {repo}\n\nInstall with `pip install -r requirements.txt` (tests: requirements-dev.txt).\n"
    "Prepare the data with `python scripts/prepare_data.py`, train with `python train.py` and\n"
    "evaluate with `python evaluate.py` or `bash run_eval.sh`. Settings live in config.py and model.py.\n"
    "Uses torch and transformers.\n"
)


def _sh(cmd: str, output: str = "", code: int | None = 0) -> dict:
    return {"kind": "shell", "command": cmd, "output": output, "exit_code": code}


def _run(repo: str, mods: tuple[str, ...]) -> Trajectory:
    """A verified run: clone, cd, requirements, then each missing module installed after the failure."""
    steps = [_sh(f"git clone https://github.com/acme/{repo}.git"), _sh(f"cd {repo}")]
    steps.append(_sh("pip install -r requirements.txt", "Successfully installed torch"))
    steps.append(_sh(f"sed -i 's/epochs=10/epochs=1/' {repo}/config.py"))
    for mod in mods:
        steps.append(_sh("python train.py", MISSING.format(repo=repo, mod=mod), None))
        steps.append(_sh(f"pip install {mod}", f"Successfully installed {mod}-1.0", None))
    steps.append(_sh("python train.py", "epoch 1 loss 0.1\nsaved model.pt\n", None))
    run = EnvSetupRun(
        run_id=f"test/{repo}",
        source=SourceRef(format="test"),
        target_repo=TargetRepo(url=f"https://github.com/acme/{repo}"),
        task=f"Set up {repo} and run train.py for one epoch.",
        context=RunContext(
            readme=README.format(repo=repo),
            docs=(Doc(path=f"{repo}/docs/usage.md", text="Run `python train.py`."),),
            file_tree=f"$ ls {repo}\nREADME.md config.py evaluate.py model.py requirements.txt run_eval.sh train.py",
        ),
        steps=tuple(make_step(i, **s) for i, s in enumerate(steps)),
        outcome=verdict(True, "test verdict", ""),
    )
    return to_trajectory(
        run, reader_name="test", reader_version=1, origin=Origin(f"/runs/{repo}.json"), instance_id=repo
    )


RUNS = [
    _run("widget", ("yaml", "einops")),
    _run("gadget", ("einops", "wandb", "sacremoses")),
    _run("sprocket", ("tqdm", "faiss")),
    _run("cog", ("rich", "yaml", "tensorly")),
]


# --- structural rules that read only the step order, as a validity baseline does -------------------


def _steps(option: str) -> list[str]:
    return [m.group(1) for m in re.finditer(r"\*step\d+: (.*?);(?=\*step|$)", option)]


def _kind(step: str) -> str:
    for kind, words in (
        ("delete", ("Delete", "Uninstall", "Remove")),
        ("clone", ("Clone",)),
        ("cd", ("Change",)),
        ("install", ("Install",)),
        ("run", ("Run",)),
        ("edit", ("Edit",)),
    ):
        if step.startswith(words):
            return kind
    return "other"


def _shape_rule(options: list[str]) -> list[float]:
    """Starts with the clone, ends with a run, never deletes: the shape of a working plan."""
    kinds = [[_kind(s) for s in _steps(o)] for o in options]
    return [float(k[0] == "clone" and k[-1] == "run" and "delete" not in k) for k in kinds]


def _most_steps(options: list[str]) -> list[float]:
    return [float(len(_steps(o))) for o in options]


def _rarest_order(options: list[str]) -> list[float]:
    sigs = [tuple(_kind(s) for s in _steps(o)) for o in options]
    counts = Counter(sigs)
    return [-float(counts[s]) for s in sigs]


RULES = {"shape": _shape_rule, "most_steps": _most_steps, "rarest_order": _rarest_order}


def _credit(scores: list[float], gold: int) -> float:
    best = max(scores)
    top = [i for i, s in enumerate(scores) if s == best]
    return 1.0 / len(top) if gold in top else 0.0


def _accuracy(items: list[tuple[list[str], int]]) -> dict[str, float]:
    return {name: statistics.mean(_credit(rule(o), g) for o, g in items) for name, rule in RULES.items()}


def _plan_inputs(
    traj: Trajectory, library_installs: list[PlanStep]
) -> tuple[list[PlanStep], dict[int, int], str]:
    run = run_of(traj.meta)
    plan = plan_steps(run)
    gold = clean_plan(plan)
    required = remap_required(plan, gold, required_steps(plan, error_pairs(run)))
    files = "\n".join([run.context.file_tree, run.context.readme, *(d.text for d in run.context.docs)])
    return gold, required, files


def _foreign(traj: Trajectory) -> list[PlanStep]:
    return [s for t in RUNS if t is not traj for s in plan_steps(run_of(t.meta)) if s.category == "install"]


def test_block_moves_plant_a_step_order_shortcut_that_the_pool_of_several_kinds_removes():
    old: list[tuple[list[str], int]] = []
    new: list[tuple[list[str], int]] = []
    for traj in RUNS:
        gold_plan, required, files = _plan_inputs(traj, _foreign(traj))
        gold = "".join(f"*step{k}: {s.text};" for k, s in enumerate(gold_plan, start=1))
        moves = plan_distractors(gold_plan, required, "widget", random.Random(1))
        old.append(([gold, *moves[:6]], 0))
        pool = wrong_plans(
            gold_plan,
            required,
            files,
            run_of(traj.meta).target_repo.url.rsplit("/", 1)[-1],
            _foreign(traj),
            random.Random(1),
        )
        new.append(([gold, *[w.text for w in pool[:6]]], 0))
    planted = _accuracy(old)
    assert planted["shape"] == 1.0  # the rule detects the planted shortcut: only the gold has the shape
    fixed = _accuracy(new)
    chance = 1 / 7
    assert all(v <= chance + 0.1 for v in fixed.values()), fixed


def test_a_plan_yields_three_times_the_options_it_shows_of_several_kinds_each_checked_wrong():
    traj = RUNS[1]
    gold_plan, required, files = _plan_inputs(traj, _foreign(traj))
    pool = wrong_plans(gold_plan, required, files, "gadget", _foreign(traj), random.Random(3))
    assert len(pool) >= 18 and len({w.text for w in pool}) == len(pool)
    kinds = Counter(k for w in pool for k in w.kinds.split("+"))
    assert {"omit", "wrong_entry", "foreign_step", "wrong_package", "extra"} <= set(kinds), kinds
    gold = "".join(f"*step{k}: {s.text};" for k, s in enumerate(gold_plan, start=1))
    assert gold not in {w.text for w in pool}
    keep_shape = [w for w in pool if _shape_rule([w.text])[0]]
    assert len(keep_shape) >= len(pool) * 0.6  # most keep the clone first and the final run last
    # another repository's step is named as such (its origin is not a rule of this run)
    assert all(w.foreign for w in pool if "foreign_step" in w.kinds)
    # a wrong entry point runs another script the repository shows, never setup.py
    entries = [w.text for w in pool if "wrong_entry" in w.kinds]
    assert entries and all(
        re.search(r"Run the script \S*(?:evaluate|prepare_data|model)\.py;$", t) for t in entries
    ), [t[-60:] for t in entries]


def test_the_extractor_poses_plan_items_whose_candidates_carry_their_kind_and_fill_the_reserve():
    extractor = stages.make_extractor(SweEnvSetup, SweEnvSetup.observe(RUNS))
    golds = [g for t in RUNS for g in extractor.extract(t, "plan", OPTS) if isinstance(g, GoldStep)]
    assert len(golds) == len(RUNS)
    questions, problems = stages.generate_stage(OfflineGenerator(seed=2), golds, stages.pool_of(golds), 7)
    assert problems == [] and len(questions) == len(RUNS)
    for g, q in zip(golds, questions, strict=True):
        assert len(g.candidates) >= 18  # three times the six shown
        # the generator keeps in reserve those far enough apart from each other (six-step plans allow
        # only a few): the adversarial filter still has candidates to swap in
        assert len(q.reserve) >= 5
        assert all(
            d.origin.startswith(("rule:plan_", "other_run:plan_")) for d in (*q.distractors, *q.reserve)
        )
    shown = [(list(q.options), q.gold_index) for q in questions]
    assert all(v <= 1 / 7 + 0.1 for v in _accuracy(shown).values())


# --- action: the plan the commands follow, targets it determines -----------------------------------


def test_the_action_plan_is_the_executed_commands_steps_and_undetermined_targets_are_dropped():
    steps = [
        _sh("git clone https://github.com/acme/widget.git"),
        _sh("cd widget"),
        _sh("pip install -r requirements.txt"),
        _sh("python train.py --epochs 3 --lr 0.0007", "epoch 3 loss 0.1"),
        _sh("pip install einops"),
    ]
    run = EnvSetupRun(
        run_id="test/widget",
        source=SourceRef(format="test"),
        target_repo=TargetRepo(url="https://github.com/acme/widget"),
        steps=tuple(make_step(i, **s) for i, s in enumerate(steps)),
        outcome=verdict(True, "test verdict", ""),
    )
    traj = to_trajectory(
        run, reader_name="test", reader_version=1, origin=Origin("/runs/w.json"), instance_id="widget"
    )
    out = list(SweEnvSetup().extract(traj, "action", OPTS))
    golds = [g for g in out if isinstance(g, GoldStep)]
    assert [g.gold for g in golds] == ["cd widget", "pip install -r requirements.txt", "pip install einops"]
    plan = golds[0].fields["execution_plan"]
    assert plan.count("step") == 5 and "Run the script train.py" in plan
    for g in golds:  # every executed command is a step of the plan, in the plan's order
        history = g.fields["executed_cmds"].split(";")
        assert len(history) == plan.count("step") - (5 - len(history))
    (info,) = [p for p in out if isinstance(p, Problem)]
    assert "not_determined_by_plan_or_history=1" in info.detail  # `--epochs 3 --lr 0.0007`: shown nowhere


def test_determined_accepts_what_the_plan_or_history_spells_out_only():
    assert determined("pip install einops", "Install the Python package einops", [])
    assert determined("git clone https://github.com/acme/widget.git", "Clone the repository acme/widget", [])
    assert determined("cd widget", "Change into the widget directory", ["git clone x/widget"])
    assert not determined("python train.py --seed 4012", "Run the script train.py", [])
    assert determined(
        "python train.py --seed 4012", "Run the script train.py", ["python eval.py --seed 4012"]
    )


def test_shell_cells_read_as_logical_lines_loops_whole_comments_dropped():
    cell = (
        "# prepare\npip install datasets # needed to import the dataset\n"
        "for f in *.en\ndo\n  mv $f data/\ndone\npython train.py \\\n  --epochs 1\n"
        "pip install git+https://github.com/a/b.git#egg=b"
    )
    lines = shell_lines(cell)
    assert lines == [
        "pip install datasets",
        "for f in *.en; do mv $f data/; done",
        "python train.py --epochs 1",
        "pip install git+https://github.com/a/b.git#egg=b",
    ]
    assert block_commands(lines[1]) == ["mv $f data/"]
    assert block_commands("if [ -d x ]; then rm -r x; fi") == ["rm -r x"]


# --- the real SUPER runs ---------------------------------------------------------------------------


def _super(shared_dir: Path) -> tuple[list[Trajectory], list[Trajectory]]:
    root = shared_dir / "envsetup" / "super-benchmark"
    assert root.is_dir(), f"{root} is missing"
    files = [(str(f), None, str(root)) for f in find_run_inputs([str(root)])]
    read = stages.read_stage(discover_readers(), files)
    kept = stages.label_and_keep(read.trajectories, {}, read.verdicts, frozenset({"envsetup"}), False)
    return kept.labelled, kept.kept


@pytest.fixture(scope="module")
def super_plan_questions(shared_dir):
    labelled, kept = _super(shared_dir)
    extractor = stages.make_extractor(SweEnvSetup, SweEnvSetup.observe(labelled))
    options = ExtractOptions(1, 6000, 4000, 20261130)
    golds = [g for t in kept for g in extractor.extract(t, "plan", options) if isinstance(g, GoldStep)]
    pool = stages.pool_of(golds, SPECS["plan"].other_runs_as_distractors)
    questions, _ = stages.generate_stage(OfflineGenerator(seed=20261130), golds, pool, 7)
    return golds, questions


def test_super_plan_items_no_step_order_rule_separates_the_gold(super_plan_questions):
    golds, questions = super_plan_questions
    assert len(questions) >= 30
    acc = _accuracy([(list(q.options), q.gold_index) for q in questions])
    # chance + 10 points, with the binomial allowance below 100 items (as the validity audit bounds)
    bound = 1 / 7 + 0.1 + 1.645 * (1 / 7 * 6 / 7 / len(questions)) ** 0.5 * (len(questions) < 100)
    assert all(v <= bound for v in acc.values()), (acc, bound)
    pool = [len(g.candidates) for g in golds]
    assert statistics.median(pool) >= 18  # three times the six shown, for the adversarial filter
    kinds = [{c.origin.split(":plan_")[1].split("_")[0] for c in g.candidates} for g in golds]
    assert statistics.median(len(k) for k in kinds) >= 3


def test_super_plan_options_are_edits_of_the_runs_own_plan_never_another_runs_whole_plan(
    super_plan_questions,
):
    _, questions = super_plan_questions
    assert len(questions) >= 30 and not SPECS["plan"].other_runs_as_distractors
    for q in questions:
        (clone,) = re.findall(r"Clone the repository ([^;]+);", q.gold)
        for d in (*q.distractors, *q.reserve):
            # another run's plan clones another repository; an edit of this one keeps its clone step
            assert f"Clone the repository {clone};" in d.text, (q.gold, d.text)
            assert re.fullmatch(r"(?:rule|other_run):plan_\w+", d.origin), d.origin


def test_super_plan_golds_hold_no_shell_syntax_or_comment_words(super_plan_questions):
    golds, _ = super_plan_questions
    for g in golds:
        steps = _steps(g.gold)
        assert not [s for s in steps if re.fullmatch(r"Run (?:for|do|done|if|fi|then|while)", s)], g.gold
        assert "#" not in g.gold.replace("#egg", ""), g.gold


def test_dropping_a_package_another_installed_one_requires_is_no_wrong_plan():
    from extractors.swe_env_setup.plan_variants import carried, plan_edits

    assert carried("numpy", ["faiss-gpu", "einops-exts"]) and carried("filelock", ["transformers[torch]>=4"])
    assert not carried("einops-exts", ["einops", "numpy"]) and not carried("numpy", ["torch"])
    plan = [
        PlanStep("Clone the repository acme/widget", "clone", ()),
        PlanStep(
            "Install the Python packages einops-exts, faiss-gpu, numpy",
            "install",
            (),
            ("einops-exts", "faiss-gpu", "numpy"),
        ),
        PlanStep("Run the script train.py", "run", ()),
    ]
    drops = [
        e
        for e in plan_edits(plan, {1: 2, 2: -1}, "", "widget", [], random.Random(0))
        if e.kind == "wrong_package" and len(e.step.packages) == 2
    ]
    wrong = {next(p for p in plan[1].packages if p not in e.step.packages): e.wrong for e in drops}
    # numpy comes with faiss-gpu: the plan without it still works; einops-exts and faiss-gpu do not
    assert wrong == {"numpy": False, "einops-exts": True, "faiss-gpu": True}, wrong


def test_plan_similarity_is_the_standard_librarys_difflib_ratio_of_the_normalised_plans():
    import difflib

    from extractors.swe_env_setup.plan import _norm, similarity

    rng = random.Random(7)
    steps = [
        "Clone the repository",
        "cd into the repo",
        "pip install -e .",
        "pip install -r requirements.txt",
        "Run pytest tests/",
        "Delete the virtual env",
        "conda create -n env python=3.10",
        "export PYTHONPATH=.",
        "python setup.py develop",
        "安装依赖",
    ]
    for _ in range(300):
        a = "\n".join(f"* Step {i + 1}: {s}" for i, s in enumerate(rng.sample(steps, rng.randint(0, 6))))
        b = "\n".join(f"* Step {i + 1}: {s}" for i, s in enumerate(rng.sample(steps, rng.randint(0, 6))))
        expected = difflib.SequenceMatcher(None, _norm(a), _norm(b), autojunk=False).ratio()
        assert similarity(a, b, threshold=0.0) == expected  # threshold 0: the difflib path, always
