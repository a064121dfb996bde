"""The build's stages as plain functions over schema objects (Prefect tasks wrap them).

read -> label + keep -> extract -> generate -> check. Each returns its outputs plus the Problems
it met; nothing here knows about Prefect, files on disk beyond the inputs, or the stage order.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, NamedTuple

from extractors.base import ExtractOptions, Extractor
from extractors.ingest.bundles import read_input
from extractors.ingest.sniff import FoundVerdict
from extractors.labels.gold_answers import FoundGold, join_golds
from extractors.labels.reports import ReportVerdict
from extractors.labels.runs import tie_reports
from extractors.labels.verdicts import apply_verdict
from extractors.readers.aptbench_dr import merge_rows
from generators.base import DistractorGenerator, PoolEntry
from generators.hygiene.dedup import duplicate_runs
from generators.quality.adversarial import Settings, adversarial_filter
from generators.quality.audit import bounds_of
from generators.quality.baselines import Bounds
from generators.quality.gates import check_question
from schemas import GoldStep, Problem, Question, Trajectory
from schemas.validity import AdversarialTask


class ReadResult(NamedTuple):
    """Output of reading one shard of files."""

    trajectories: list[Trajectory]
    problems: list[Problem]
    verdicts: list[FoundVerdict]
    files: int
    golds: list[FoundGold] = []  # noqa: RUF012 (a NamedTuple default, never mutated)


def read_stage(
    readers: Mapping[str, Any], files: Sequence[tuple[str, str | None] | tuple[str, str | None, str | None]]
) -> ReadResult:
    """Read files, each `(file, forced reader name or None[, input root for stable ids])`."""
    trajs: list[Trajectory] = []
    problems: list[Problem] = []
    verdicts: list[FoundVerdict] = []
    golds: list[FoundGold] = []
    for file, forced, *rest in files:
        for out in read_input(
            readers, file, forced, rest[0] if rest else None
        ):  # a run folder's primary file reads as one bundle
            if isinstance(out, Trajectory):
                trajs.append(out)
            elif isinstance(out, Problem):
                problems.append(out)
            elif isinstance(out, FoundGold):
                golds.append(out)
            else:
                verdicts.append(out)
    return ReadResult(trajs, problems, verdicts, len(files), golds)


class KeepResult(NamedTuple):
    """Trajectories kept, and counts of those dropped by reason."""

    kept: list[Trajectory]
    labelled: list[Trajectory]
    dropped: Counter[str]
    problems: list[Problem]
    judged: dict[str, int] = {}  # noqa: RUF012 (a NamedTuple default, never mutated)
    """What the answer judge did (`sent`, `correct`, `incorrect`, `unsure`, `failed`); empty when off."""


def label_and_keep(
    trajs: Iterable[Trajectory],
    reports: Iterable[ReportVerdict],
    found: Iterable[FoundVerdict],
    reads: frozenset[str],
    keep_unknown: bool,
    golds: Iterable[FoundGold] = (),
    judge: Any = None,
) -> KeepResult:
    """Apply harness verdicts (config reports and reports met among inputs, each tied to its run) and keep successes.

    Runs without a gold first take one from the gold-answer files met among the inputs. With a
    `judge` (`generators.llm.judge.AnswerJudge`), runs the rules leave `needs_judge` are relabelled by
    it; rule-decided runs are never sent.
    """
    trajs = list(merge_rows(trajs))  # APTBench DR rows are regrouped across files into whole runs
    joined = iter(join_golds([t for t in trajs if isinstance(t, Trajectory)], golds))
    trajs = [next(joined) if isinstance(t, Trajectory) else t for t in trajs]
    tied = tie_reports(
        [t for t in trajs if isinstance(t, Trajectory)],
        [*reports, *(ReportVerdict(v.verdict, v.origin) for v in found)],
    )
    kept: list[Trajectory] = []
    labelled: list[Trajectory] = []
    dropped: Counter[str] = Counter()
    seen: set[str] = set()
    problems: list[Problem] = list(tied.problems)
    runs = [t if isinstance(t, Problem) else apply_verdict(t, tied.of(t)) for t in trajs]
    judged: dict[str, int] = {}
    if judge is not None:
        result = judge.judge([t for t in runs if isinstance(t, Trajectory)])
        relabelled = iter(result.trajectories)
        runs = [t if isinstance(t, Problem) else next(relabelled) for t in runs]
        judged = result.counts
    copies = duplicate_runs([t for t in runs if isinstance(t, Trajectory)])  # one run, several files/formats
    for traj in runs:
        if isinstance(traj, Problem):
            problems.append(traj)
            continue
        labelled.append(traj)
        if traj.trajectory_id in seen or traj.trajectory_id in copies:
            dropped["duplicate_trajectory"] += 1
            continue
        seen.add(traj.trajectory_id)
        if traj.kind not in reads:
            dropped["kind_mismatch"] += 1
        elif traj.outcome.label == "success" or (traj.outcome.label == "unknown" and keep_unknown):
            kept.append(traj)
        else:
            dropped[traj.outcome.reason or traj.outcome.label] += 1
    problems += copies.values()
    return KeepResult(kept, labelled, dropped, problems, judged)


def observe_runs(extractor_cls: type[Extractor], runs: Iterable[Trajectory]) -> Any:
    """What the scenario learns from every labelled run of its kinds before extracting (None: nothing)."""
    return extractor_cls.observe([t for t in runs if t.kind in extractor_cls.reads])


def make_extractor(extractor_cls: type[Extractor], observed: Any = None) -> Extractor:
    """An extractor instance, handed what `observe_runs` learned (when it learned anything)."""
    extractor = extractor_cls()
    if observed is not None:
        extractor.use(observed)
    return extractor


def extract_stage(
    extractor: Extractor, trajs: Iterable[Trajectory], tasks: Mapping[str, ExtractOptions]
) -> tuple[list[GoldStep], list[Problem]]:
    """Run the scenario extractor for every task over a shard of trajectories."""
    golds: list[GoldStep] = []
    problems: list[Problem] = []
    for traj in trajs:
        for task, options in tasks.items():
            for out in extractor.extract(traj, task, options):
                (golds if isinstance(out, GoldStep) else problems).append(out)
    return golds, problems


def pool_of(golds: Iterable[GoldStep], retrievable: bool = True) -> list[PoolEntry]:
    """The distractor pool of one task: every gold answer with its origin (`retrievable`: whether the
    task's spec lets another run's gold be offered as a distractor)."""
    return [PoolEntry(g.step_id, g.trajectory_id, g.group, g.gold, retrievable) for g in golds]


def generate_stage(
    generator: DistractorGenerator, golds: Sequence[GoldStep], pool: Sequence[PoolEntry], n_options: int
) -> tuple[list[Question], list[Problem]]:
    """Pose gold steps as questions (distractors for MCQ)."""
    questions: list[Question] = []
    problems: list[Problem] = []
    for out in generator.generate(golds, pool, n_options):
        (questions if isinstance(out, Question) else problems).append(out)
    return questions, problems


def adversarial_settings(config: Any) -> Settings:
    """The filter's settings from the build config (`adversarial`)."""
    af = config.adversarial
    return Settings(
        rounds=af.rounds,
        folds=af.folds,
        slack=af.slack,
        drop=af.drop,
        max_drop=af.max_drop,
        block=af.block_items,
    )


def adversarial_bounds(config: Any, task: str) -> Bounds:
    """The baselines' bounds the filter aims under for `task` (the audit's, from `quality`)."""
    return bounds_of(config.quality, task)


def adversarial_stage(
    questions: Sequence[Question], config: Any, consume: bool = False
) -> tuple[list[Question], list[Problem], dict[str, AdversarialTask]]:
    """Adversarial filtering of every MCQ task (config `adversarial`); reserve is cleared either way.
    `consume=True` takes the list over (emptied as read; see `adversarial_filter`)."""
    if not config.adversarial.enabled:
        source = _drained(questions) if consume else questions  # the copies replace the originals
        return [q.model_copy(update={"reserve": ()}) if q.reserve else q for q in source], [], {}
    bounds = {t: adversarial_bounds(config, t) for t in {q.task for q in questions}}
    return adversarial_filter(questions, config.seed, adversarial_settings(config), bounds, consume=consume)


def _drained(questions: Sequence[Question]) -> Iterator[Question]:
    """The list's questions in order, each removed from it as it is yielded."""
    assert isinstance(questions, list), "consume=True takes a list over"
    questions.reverse()
    while questions:
        yield questions.pop()


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
