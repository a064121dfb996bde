"""Golden files of the extractor contract: each scenario's bundled sample, extracted, in a reviewable form.

`extract_sample(name)` runs one discovered extractor over `extractors/samples/<name>/` the way a
build does (find inputs with run folders folded into one, read, label with the verdicts found
among the inputs, keep successes only, let the extractor `observe` every labelled run, extract
every task with default options and seed 0). Paths are given relative to the repository root, so
ids (which hash the source path) do not depend on where the checkout lives. `golden_records`
reduces the gold steps to one small JSON object each: ids, the gold (cut to `GOLD_CHARS`) and
hashes of the gold, the context fields and the candidates, so a golden file stays a few KB and a
diff shows which items changed. `python -m tests.golden_support [NAME ...]` (`make golden`)
rewrites `tests/golden/<name>.jsonl`; review the diff before committing it.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NamedTuple

from extractors.base import ExtractOptions
from extractors.discovery import discover_extractors, discover_readers
from extractors.ingest.bundles import find_run_inputs
from flows import stages
from flows.io import write_jsonl
from schemas import GoldStep, Problem, content_id

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = ROOT / "tests" / "golden"
GOLD_CHARS = 300


class SampleRun(NamedTuple):
    """What one extractor made of its bundled sample."""

    golds: list[GoldStep]
    problems: list[Problem]
    kept: int


@contextmanager
def at_root() -> Iterator[None]:
    """Work from the repository root (sample paths, hence ids, are root-relative)."""
    before = Path.cwd()
    os.chdir(ROOT)
    try:
        yield
    finally:
        os.chdir(before)


def sample_folder(name: str) -> Path:
    """`extractors/samples/<name>` (root-relative)."""
    return Path("extractors") / "samples" / name


def extract_sample(name: str, seed: int = 0) -> SampleRun:
    """Read, label, keep and extract the bundled sample of extractor `name`."""
    cls = discover_extractors()[name]
    with at_root():
        files = [(str(f), None, str(sample_folder(name))) for f in find_run_inputs([sample_folder(name)])]
        read = stages.read_stage(discover_readers(), files)
        kept = stages.label_and_keep(read.trajectories, {}, read.verdicts, cls.reads, keep_unknown=False)
        options = {task: ExtractOptions(seed=seed) for task in cls.tasks}
        extractor = stages.make_extractor(cls, stages.observe_runs(cls, kept.labelled))
        golds, problems = stages.extract_stage(extractor, kept.kept, options)
    return SampleRun(golds, [*read.problems, *kept.problems, *problems], len(kept.kept))


def golden_records(golds: list[GoldStep]) -> list[dict[str, Any]]:
    """One small record per gold step, sorted by task then id."""
    out = []
    for g in sorted(golds, key=lambda g: (g.task, g.step_id)):
        out.append(
            {
                "task": g.task,
                "step_id": g.step_id,
                "trajectory_id": g.trajectory_id,
                "step_index": g.step_index,
                "form": g.form,
                "gold": g.gold if len(g.gold) <= GOLD_CHARS else g.gold[:GOLD_CHARS] + " [...]",
                "gold_hash": content_id(g.gold, length=12),
                "fields": sorted(g.fields),
                "fields_hash": content_id(g.fields, length=12),
                "candidates": len(g.candidates),
                "candidates_hash": content_id([c.text for c in g.candidates], length=12),
            }
        )
    return out


def golden_path(name: str) -> Path:
    """`tests/golden/<name>.jsonl`."""
    return GOLDEN / f"{name}.jsonl"


def read_golden(name: str) -> list[dict[str, Any]]:
    """The committed golden records of `name`."""
    return [json.loads(line) for line in golden_path(name).read_text(encoding="utf-8").splitlines() if line]


def write_golden(name: str) -> Path:
    """Regenerate the golden file of `name` (atomically) and return its path."""
    path = golden_path(name)
    write_jsonl(path, golden_records(extract_sample(name).golds))
    return path


def main(argv: list[str]) -> int:
    """Regenerate the golden files named (all discovered extractors with a sample folder by default)."""
    names = argv or [n for n in discover_extractors() if (ROOT / sample_folder(n)).is_dir()]
    unknown = [n for n in names if n not in discover_extractors()]
    if unknown:
        sys.stderr.write(
            f"unknown extractor(s): {', '.join(unknown)}; known: {', '.join(discover_extractors())}\n"
        )
        return 2
    for name in names:
        if not (ROOT / sample_folder(name)).is_dir():
            sys.stderr.write(f"{name}: no sample folder {sample_folder(name)}/\n")
            return 2
        path = write_golden(name)
        sys.stdout.write(f"{name}: {len(read_golden(name))} gold steps -> {path.relative_to(ROOT)}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
