"""The `build` flow: raw trajectories -> candidate questions, on Prefect.

ingest (sharded) -> label + keep -> extract (sharded) -> generate (sharded, per task) -> check ->
balance gold positions -> write `candidates/<task>.parquet`, `quarantine.jsonl`, `report.json`
under `<out_dir>/<scenario>/<version>/`. Tasks work on shards of files or gold steps, never on
single items. Every output file is written atomically.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, TypeVar

from prefect import flow, task
from prefect.cache_policies import NO_CACHE
from prefect.task_runners import ThreadPoolTaskRunner

from extractors.base import ExtractOptions
from extractors.discovery import discover_extractors, discover_readers, lookup
from extractors.readers.records import find_inputs
from extractors.readers.reports import load_reports
from flows import stages
from flows.config import BuildConfig
from flows.io import write_json, write_jsonl, write_parquet
from generators.balance import balance_positions
from generators.base import DistractorGenerator
from generators.offline import OfflineGenerator
from schemas import GoldStep, Problem, Question, Trajectory, question_row, rows_table, task_spec

T = TypeVar("T")
Progress = Callable[[str, int, int], None]

#: Set by the CLI around a run to show a progress bar; not a flow parameter (it is not data).
PROGRESS: ContextVar[Progress | None] = ContextVar("aptforge_progress", default=None)


def make_generator(config: BuildConfig) -> DistractorGenerator:
    """The distractor generator the config names."""
    gen = config.generator
    if gen.name == "offline":
        return OfflineGenerator(seed=config.seed, near_duplicate=gen.near_duplicate)
    raise ValueError(f"unknown generator {gen.name!r}; available: offline")


def chunks(items: Sequence[T], size: int) -> list[list[T]]:
    """Split `items` into consecutive shards of at most `size`."""
    return [list(items[i : i + size]) for i in range(0, len(items), size)]


@task(name="read-shard", cache_policy=NO_CACHE)
def read_shard(files: list[tuple[str, str | None]]) -> stages.ReadResult:
    """Read one shard of raw files."""
    return stages.read_stage(discover_readers(), files)


@task(name="extract-shard", cache_policy=NO_CACHE)
def extract_shard(
    scenario: str, trajs: list[Trajectory], tasks: dict[str, ExtractOptions]
) -> tuple[list[GoldStep], list[Problem]]:
    """Extract gold steps of every task from one shard of kept trajectories."""
    return stages.extract_stage(discover_extractors()[scenario](), trajs, tasks)


@task(name="generate-shard", cache_policy=NO_CACHE)
def generate_shard(
    config: BuildConfig, golds: list[GoldStep], pool: list[Any], n_options: int
) -> tuple[list[Question], list[Problem]]:
    """Pose one shard of gold steps as questions."""
    return stages.generate_stage(make_generator(config), golds, pool, n_options)


class _Timer:
    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[name] = round(self.seconds.get(name, 0.0) + time.perf_counter() - start, 4)


def _inputs(config: BuildConfig) -> list[tuple[str, str | None]]:
    pairs: dict[str, str | None] = {}
    for src in config.sources:
        for file in find_inputs([src.path]):
            pairs.setdefault(str(file), src.reader)
    report_files = {str(f) for f in find_inputs(config.reports)}
    return [(f, r) for f, r in sorted(pairs.items()) if f not in report_files]


def _gather(futures: list[Any], label: str, progress: Progress | None) -> list[Any]:
    results = []
    for done, fut in enumerate(futures, start=1):
        results.append(fut.result())
        if progress:
            progress(label, done, len(futures))
    return results


@flow(name="build-benchmark", log_prints=False, validate_parameters=True)
def build(config: BuildConfig) -> dict[str, Any]:
    """Build candidate questions for one scenario; returns the report (also written to disk)."""
    timer = _Timer()
    progress = PROGRESS.get()
    extractor_cls = lookup(discover_extractors(), config.scenario, "extractor")
    tasks = {name: t for name, t in config.tasks.items() if t.enabled}
    for name in tasks:
        if name not in extractor_cls.tasks:
            raise ValueError(
                f"extractor {config.scenario} has no task {name!r}; it has {', '.join(extractor_cls.tasks)}"
            )
    specs = {name: task_spec(config.scenario, name) for name in tasks}
    out = config.output_dir()

    with timer.stage("read"):
        files = _inputs(config)
        reads = _gather(
            [read_shard.submit(s) for s in chunks(files, config.limits.shard_size)], "read", progress
        )
        verdicts = load_reports(config.reports)
    trajs = [t for r in reads for t in r.trajectories]
    problems: list[Problem] = [p for r in reads for p in r.problems] + verdicts.problems

    with timer.stage("keep"):
        kept = stages.label_and_keep(
            trajs,
            verdicts.by_instance,
            [v for r in reads for v in r.verdicts],
            extractor_cls.reads,
            config.keep_unknown,
        )
    problems += kept.problems

    options = {
        name: ExtractOptions(
            t.max_items_per_trajectory, t.max_context_tokens, t.max_observation_chars, config.seed
        )
        for name, t in tasks.items()
    }
    with timer.stage("extract"):
        shards = chunks(kept.kept, max(1, config.limits.shard_size // 4))
        extracted = _gather(
            [extract_shard.submit(config.scenario, s, options) for s in shards], "extract", progress
        )
    golds = [g for gs, _ in extracted for g in gs]
    problems += [p for _, ps in extracted for p in ps]

    questions: list[Question] = []
    with timer.stage("generate"):
        for name in tasks:
            task_golds = [g for g in golds if g.task == name]
            pool = stages.pool_of(task_golds)
            futures = [
                generate_shard.submit(config, s, pool, specs[name].n_options)
                for s in chunks(task_golds, config.limits.shard_size)
            ]
            for qs, ps in _gather(futures, f"generate {name}", progress):
                questions += qs
                problems += ps

    with timer.stage("check"):
        passed, found = stages.check_stage(questions)
        problems += found
        balanced = balance_positions(passed, config.seed)

    with timer.stage("write"):
        by_task: dict[str, list[dict[str, Any]]] = {name: [] for name in tasks}
        for q in sorted(balanced, key=lambda q: (q.task, q.item_id)):
            by_task[q.task].append(question_row(q))
        for name, rows in by_task.items():
            write_parquet(out / "candidates" / f"{name}.parquet", rows_table(config.scenario, name, rows))
        write_jsonl(out / "quarantine.jsonl", (p.model_dump() for p in problems))
    report = _report(config, files, trajs, kept, golds, by_task, problems, timer)
    write_json(out / "report.json", report)
    return report


def _report(
    config: BuildConfig,
    files: list[tuple[str, str | None]],
    trajs: list[Trajectory],
    kept: stages.KeepResult,
    golds: list[GoldStep],
    by_task: dict[str, list[dict[str, Any]]],
    problems: list[Problem],
    timer: _Timer,
) -> dict[str, Any]:
    labels = Counter(t.outcome.label for t in kept.labelled)
    signals = Counter(t.outcome.signal for t in kept.labelled)
    formats = Counter(t.source.format for t in trajs)
    by_reason = Counter(f"{p.stage}.{p.reason}" for p in problems)
    quarantined_files = sorted({p.where.split(":")[0] for p in problems if p.stage == "read"})
    return {
        "scenario": config.scenario,
        "version": config.version,
        "config_hash": config.fingerprint(),
        "generator": config.generator.name,
        "seed": config.seed,
        "output_dir": str(config.output_dir()),
        "counts": {
            "input_files": len(files),
            "trajectories_read": len(trajs),
            "kept": len(kept.kept),
            "dropped": sum(kept.dropped.values()),
            "gold_steps": len(golds),
            "questions": sum(len(r) for r in by_task.values()),
            "quarantined": sum(1 for p in problems if p.severity == "error"),
        },
        "labels": dict(labels),
        "label_signals": dict(signals),
        "formats": dict(formats),
        "dropped_by_reason": dict(sorted(kept.dropped.items())),
        "questions_by_task": {name: len(rows) for name, rows in by_task.items()},
        "problems_by_reason": dict(sorted(by_reason.items())),
        "quarantined_files": quarantined_files,
        "timings_s": dict(timer.seconds),
    }


def run_build(config: BuildConfig, progress: Progress | None = None) -> dict[str, Any]:
    """Run the flow with the configured thread pool (and an optional progress callback)."""
    runner = ThreadPoolTaskRunner(max_workers=config.limits.max_workers)
    token = PROGRESS.set(progress)
    try:
        return build.with_options(task_runner=runner)(config)
    finally:
        PROGRESS.reset(token)


__all__ = ["build", "chunks", "make_generator", "run_build"]
