"""The build's stages as plain functions over schema objects (Prefect tasks wrap them).

read -> label + keep -> extract -> generate -> check. Each returns its outputs plus the Problems
it met; nothing here knows about Prefect, files on disk beyond the inputs, or the stage order.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple

from extractors.base import ExtractOptions
from extractors.readers.labels import apply_verdict
from extractors.readers.reports import RunVerdict, merge_verdicts
from extractors.readers.sniff import FoundVerdict, read_file
from generators.base import DistractorGenerator, PoolEntry
from generators.checks import check_question
from schemas import GoldStep, Problem, Question, Trajectory


class ReadResult(NamedTuple):
    """Output of reading one shard of files."""

    trajectories: list[Trajectory]
    problems: list[Problem]
    verdicts: list[FoundVerdict]
    files: int


def read_stage(readers: Mapping[str, Any], files: Sequence[tuple[str, str | None]]) -> ReadResult:
    """Read files (each with an optional forced reader name)."""
    trajs: list[Trajectory] = []
    problems: list[Problem] = []
    verdicts: list[FoundVerdict] = []
    for file, forced in files:
        for out in read_file(readers, file, forced):
            if isinstance(out, Trajectory):
                trajs.append(out)
            elif isinstance(out, Problem):
                problems.append(out)
            else:
                verdicts.append(out)
    return ReadResult(trajs, problems, verdicts, len(files))


class KeepResult(NamedTuple):
    """Trajectories kept, and counts of those dropped by reason."""

    kept: list[Trajectory]
    labelled: list[Trajectory]
    dropped: Counter[str]
    problems: list[Problem]


def label_and_keep(
    trajs: Iterable[Trajectory],
    report_verdicts: Mapping[str, RunVerdict],
    found: Iterable[FoundVerdict],
    reads: frozenset[str],
    keep_unknown: bool,
) -> KeepResult:
    """Apply harness verdicts (config reports first, then reports met among inputs) and keep successes."""
    merged = merge_verdicts([(v.verdict, v.origin) for v in found])
    verdicts = {**merged.by_instance, **report_verdicts}
    kept: list[Trajectory] = []
    labelled: list[Trajectory] = []
    dropped: Counter[str] = Counter()
    seen: set[str] = set()
    for traj in trajs:
        traj = apply_verdict(traj, verdicts)
        labelled.append(traj)
        if traj.trajectory_id in seen:
            dropped["duplicate_trajectory"] += 1
            continue
        seen.add(traj.trajectory_id)
        if traj.kind not in reads:
            dropped["kind_mismatch"] += 1
        elif traj.outcome.label == "success" or (traj.outcome.label == "unknown" and keep_unknown):
            kept.append(traj)
        else:
            dropped[traj.outcome.reason or traj.outcome.label] += 1
    return KeepResult(kept, labelled, dropped, list(merged.problems))


def extract_stage(
    extractor: Any, trajs: Iterable[Trajectory], tasks: Mapping[str, ExtractOptions]
) -> tuple[list[GoldStep], list[Problem]]:
    """Run the scenario extractor for every task over a shard of trajectories."""
    golds: list[GoldStep] = []
    problems: list[Problem] = []
    for traj in trajs:
        for task, options in tasks.items():
            for out in extractor.extract(traj, task, options):
                (golds if isinstance(out, GoldStep) else problems).append(out)
    return golds, problems


def pool_of(golds: Iterable[GoldStep]) -> list[PoolEntry]:
    """The distractor pool of one task: every gold answer with its origin."""
    return [PoolEntry(g.step_id, g.trajectory_id, g.group, g.gold) for g in golds]


def generate_stage(
    generator: DistractorGenerator, golds: Sequence[GoldStep], pool: Sequence[PoolEntry], n_options: int
) -> tuple[list[Question], list[Problem]]:
    """Pose gold steps as questions (distractors for MCQ)."""
    questions: list[Question] = []
    problems: list[Problem] = []
    for out in generator.generate(golds, pool, n_options):
        (questions if isinstance(out, Question) else problems).append(out)
    return questions, problems


def check_stage(questions: Iterable[Question]) -> tuple[list[Question], list[Problem]]:
    """Run per-item gates; items with an `error` finding are dropped."""
    passed: list[Question] = []
    problems: list[Problem] = []
    for q in questions:
        found = check_question(q)
        problems.extend(found)
        if not any(p.severity == "error" for p in found):
            passed.append(q)
    return passed, problems
