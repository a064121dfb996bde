"""The build's report: made once from what the stages returned, written to `report.json`, reused when nothing changed.

`make_report` turns the stages' results into one `BuildReport`; `reusable_report` reads the last report of a
version back (through the model) when its build key matches and every output and queued item is still there.
Reports are never edited in place: a reused one is a `model_copy` with the fresh review state.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import NamedTuple

import pyarrow.parquet as pq
from pydantic import ValidationError

from extractors.ingest.records import SKIPPED_REASONS
from flows.config import BuildConfig
from schemas import GoldStep, Problem, Trajectory
from schemas.report import (
    BuildReport,
    ContaminationReport,
    Counts,
    DedupReport,
    JudgeReport,
    LLMUsage,
    QualityReport,
    ReviewReport,
    SecretsReport,
    TaskChange,
)
from schemas.validity import AdversarialReport, ValidityReport


class Timer:
    """Seconds per stage (a stage may be timed in several parts)."""

    def __init__(self) -> None:
        self.started = time.perf_counter()
        self.seconds: dict[str, float] = {}

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        """Time the block as (part of) stage `name`."""
        start = time.perf_counter()
        try:
            yield
        finally:
            self.add(name, time.perf_counter() - start)

    def add(self, name: str, seconds: float) -> None:
        """Count `seconds` to stage `name` (a part timed where a task ran)."""
        self.seconds[name] = round(self.seconds.get(name, 0.0) + seconds, 4)


class Sections(NamedTuple):
    """The report sections the stages produce besides the counts."""

    judge: JudgeReport
    llm: LLMUsage | None
    secrets: SecretsReport
    dedup: DedupReport
    contamination: ContaminationReport
    review: ReviewReport
    quality: QualityReport
    adversarial: AdversarialReport
    validity: ValidityReport


class RunCounts(NamedTuple):
    """What the report says of the runs read, labelled, kept and extracted: the runs counted once they
    are kept, the gold steps once extracted, so the build holds neither after the stage that needs it."""

    read: int
    formats: Counter[str]
    labels: Counter[str]
    signals: Counter[str]
    needs_judge: int
    """Runs whose answer the rules could not decide and no judge decided (dropped unless keep_unknown)."""
    kept: int
    steps_per_kept: list[int]
    gold_steps: int

    @classmethod
    def of(
        cls,
        trajs: Sequence[Trajectory],
        labelled: Sequence[Trajectory],
        kept: Sequence[Trajectory],
        golds: Sequence[GoldStep] = (),
    ) -> RunCounts:
        """Count the runs read, labelled and kept (and the gold steps extracted, when given)."""
        return cls(
            read=len(trajs),
            formats=Counter(t.source.format for t in trajs),
            labels=Counter(t.outcome.label for t in labelled),
            signals=Counter(t.outcome.signal for t in labelled),
            needs_judge=sum(1 for t in labelled if t.outcome.reason == "needs_judge"),
            kept=len(kept),
            steps_per_kept=[len(t.steps) for t in kept],
            gold_steps=len(golds),
        )


def make_report(
    config: BuildConfig,
    files: Sequence[tuple[str, str | None, str]],
    runs: RunCounts,
    dropped: Mapping[str, int],
    questions_by_task: Mapping[str, int],
    problems: Iterable[Problem],
    timer: Timer,
    sections: Sections,
    build_key: str,
) -> BuildReport:
    """The report of one build (`problems` is read once: a `ProblemLog` rebuilds them as it is read)."""
    by_reason: Counter[str] = Counter()
    skipped = quarantined = 0
    quarantined_files: set[str] = set()
    for p in problems:
        by_reason[f"{p.stage}.{p.reason}"] += 1
        skipped += p.stage == "read" and p.reason in SKIPPED_REASONS
        quarantined += p.severity == "error"
        if p.stage == "read":
            quarantined_files.add(p.where.split(":")[0])
    review = sections.review
    return BuildReport(
        scenario=config.scenario,
        version=config.version,
        config_hash=config.fingerprint(),
        generator=config.generator.name,
        seed=config.seed,
        output_dir=str(config.output_dir()),
        counts=Counts(
            input_files=len(files),
            skipped_entries=skipped,
            trajectories_read=runs.read,
            kept=runs.kept,
            dropped=sum(dropped.values()),
            gold_steps=runs.gold_steps,
            questions=sum(questions_by_task.values()),
            quarantined=quarantined,
            needs_judge=runs.needs_judge,
        ),
        labels=dict(runs.labels),
        label_signals=dict(runs.signals),
        formats=dict(runs.formats),
        dropped_by_reason=dict(sorted(dropped.items())),
        questions_by_task=dict(questions_by_task),
        problems_by_reason=dict(sorted(by_reason.items())),
        quarantined_files=sorted(quarantined_files),
        timings_s=dict(timer.seconds),
        judge=sections.judge,
        llm=sections.llm,
        secrets=sections.secrets,
        dedup=sections.dedup,
        contamination=sections.contamination,
        review=review,
        changelog=review.changelog,  # added/removed/changed per task vs the last build
        quality=sections.quality,
        adversarial=sections.adversarial,
        validity=sections.validity,
        report_html=str(config.output_dir() / "report.html"),
        build_key=build_key,
    )


def reusable_report(config: BuildConfig, key: str) -> BuildReport | None:
    """The last report of this version, with the queue's current state, when nothing changed since it was built.

    Reused only when the build key matches (config, component versions, every input file's size and
    time, report files), every output is there, the generate stage met no Problem (a timeout or a
    spent budget must be retried), and the review queue still holds exactly these items as built
    (otherwise enqueueing them again has work to do: a rebuild of another version retired them).
    """
    if not config.limits.cache:
        return None
    out = config.output_dir()
    try:
        report = BuildReport.model_validate_json((out / "report.json").read_text(encoding="utf-8"))
    except (OSError, ValueError, ValidationError):
        return None
    if report.build_key != key or not config.queue_path().exists():
        return None
    if any(reason.startswith("generate.") for reason in report.problems_by_reason):
        return None
    tasks = list(report.questions_by_task)
    paths = [out / "candidates" / f"{t}.parquet" for t in tasks]
    if not all(p.exists() for p in [*paths, out / "quarantine.jsonl"]):
        return None
    built: dict[str, str] = {}
    for path in paths:
        table = pq.read_table(path, columns=["item_id", "content_hash"])
        built.update(
            zip(table.column("item_id").to_pylist(), table.column("content_hash").to_pylist(), strict=True)
        )
    from annotations.queue import Queue
    from flows.review import review_summary

    queue = Queue(config.queue_path())
    queued: dict[str, str] = {}
    for task_name in tasks:
        rows = queue.items(task=task_name, scenario=config.scenario, limit=10**9)
        queued.update({r.item_id: r.built_hash for r in rows})
    if queued != built:
        return None
    changelog = {t: TaskChange(unchanged=n) for t, n in report.questions_by_task.items()}
    review = ReviewReport.model_validate(
        {"enqueued": {"unchanged": len(built)}, "changelog": changelog, **review_summary(queue)}
    )
    # any `llm` section is the reused build's own spend
    return report.model_copy(update={"review": review, "changelog": changelog})
