"""The scenario contract: every discovered extractor, on its own bundled sample, against its golden file.

A new scenario is tested the moment it exists: it must be named after its module, ship a sample
folder `extractors/samples/<name>/` that yields at least one gold step for every task it declares,
pose schema-valid rows (APTBench fields of its task spec), and match `tests/golden/<name>.jsonl`
(regenerate with `make golden NAME=<name>` and review the diff).
"""

from __future__ import annotations

from functools import cache

import pytest

from extractors.discovery import discover_extractors
from flows import stages
from generators.offline import OfflineGenerator
from schemas import GoldStep, Question, question_row, rows_table, task_spec
from tests.golden_support import (
    ROOT,
    SampleRun,
    extract_sample,
    golden_path,
    golden_records,
    read_golden,
    sample_folder,
)

NAMES = sorted(discover_extractors())


@cache
def _run(name: str) -> SampleRun:
    return extract_sample(name)


@pytest.mark.parametrize("name", NAMES)
def test_an_in_tree_extractor_is_named_after_its_module(name):
    cls = discover_extractors()[name]
    if cls.__module__.startswith("extractors."):
        assert cls.__module__ == f"extractors.{name}"
    assert cls.tasks and cls.reads and cls.version >= 1


@pytest.mark.parametrize("name", NAMES)
def test_every_task_of_an_extractor_has_gold_steps_from_its_bundled_sample(name):
    folder = ROOT / sample_folder(name)
    assert folder.is_dir(), f"{name} ships no sample folder {sample_folder(name)}/"
    run = _run(name)
    cls = discover_extractors()[name]
    assert run.kept >= 1, f"no trajectory of {sample_folder(name)} was kept: {run.problems[:3]}"
    by_task = {t: [g for g in run.golds if g.task == t] for t in cls.tasks}
    assert all(by_task.values()), f"tasks without gold steps: {[t for t, gs in by_task.items() if not gs]}"
    for g in run.golds:
        assert isinstance(g, GoldStep) and g.scenario == name and g.gold.strip()
        assert g.form == task_spec(name, g.task).form
        assert g.provenance.extractor == name and g.provenance.extractor_version == cls.version


@pytest.mark.parametrize("name", NAMES)
def test_posed_sample_items_are_rows_of_the_task_schema(name):
    run = _run(name)
    posed = 0
    for task in {g.task for g in run.golds}:
        golds = [g for g in run.golds if g.task == task]
        spec = task_spec(name, task)
        questions, _ = stages.generate_stage(
            OfflineGenerator(seed=0), golds, stages.pool_of(golds), spec.n_options
        )
        rows = [question_row(q) for q in questions if isinstance(q, Question)]
        table = rows_table(name, task, rows)  # raises on a missing field or a wrong type
        assert table.num_rows == len(rows)
        posed += len(rows)
    assert posed >= 1


@pytest.mark.parametrize("name", NAMES)
def test_an_extractor_still_makes_what_its_golden_file_says(name):
    path = golden_path(name)
    assert path.is_file(), (
        f"no golden file {path.relative_to(ROOT)}: run `make golden NAME={name}` and review it"
    )
    assert golden_records(_run(name).golds) == read_golden(name), (
        f"{name} output changed: if intended, run `make golden NAME={name}`, review the diff and bump its version"
    )
