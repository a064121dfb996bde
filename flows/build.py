"""The `build` flow: raw trajectories -> candidate questions, on Prefect.

ingest (sharded) -> label + keep -> extract (sharded) -> generate (sharded, per task) -> check ->
balance gold positions -> write `candidates/<task>.parquet`, `quarantine.jsonl`, `report.json`
under `<out_dir>/<scenario>/<version>/`. Tasks work on shards of files or gold steps, never on
single items. Every output file is written atomically.
"""

from __future__ import annotations

import json
import os
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

import pyarrow.parquet as pq
from prefect import flow, task
from prefect.cache_policies import NO_CACHE, CacheKeyFnPolicy
from prefect.task_runners import ThreadPoolTaskRunner

from extractors.base import ExtractOptions
from extractors.discovery import discover_extractors, discover_readers, lookup
from extractors.ingest.bundles import scan_run_inputs
from extractors.ingest.records import SKIPPED_REASONS, find_inputs
from extractors.labels.reports import load_reports
from flows import cache_keys, hygiene, stages
from flows import progress as progress_mod
from flows.config import BuildConfig, PrivacyConfig
from flows.io import clean_stale_temps, write_json, write_jsonl, write_parquet
from flows.progress import Progress
from flows.report_html import attach_report_artifact, write_build_report
from flows.review import enqueue_and_summarise
from generators.base import DistractorGenerator
from generators.hygiene.dedup import dedup_questions
from generators.hygiene.scrub import redact_problems, redact_questions, redact_trajectories
from generators.offline import OfflineGenerator
from generators.quality.audit import build_quality
from generators.quality.balance import balance_positions
from schemas import GoldStep, Problem, Question, Trajectory, question_row, rows_table, task_spec

T = TypeVar("T")


def make_generator(config: BuildConfig) -> DistractorGenerator:
    """The distractor generator the config names."""
    gen = config.generator
    if gen.name == "offline":
        return OfflineGenerator(seed=config.seed, near_duplicate=gen.near_duplicate)
    from flows.settings import LLM_GENERATORS, make_llm_generator  # SDKs load only when needed

    if gen.name in LLM_GENERATORS:
        return make_llm_generator(config)  # API keys are read from the environment here, at the edge
    raise ValueError(f"unknown generator {gen.name!r}; available: offline, {', '.join(LLM_GENERATORS)}")


def make_judge(config: BuildConfig) -> Any:
    """The answer judge `config.judge` names, or None when it is off (the default)."""
    if not config.judge.generator:
        return None
    from flows.settings import make_llm_judge  # SDKs load only when needed

    return make_llm_judge(config)  # API keys are read from the environment here, at the edge


def chunks(items: Sequence[T], size: int) -> list[list[T]]:
    """Split `items` into consecutive shards of at most `size`."""
    return [list(items[i : i + size]) for i in range(0, len(items), size)]


class ScrubbedRead(NamedTuple):
    """A read shard with its secrets already redacted (what the cache may hold), and the counts."""

    read: stages.ReadResult
    found: Counter[str]
    redacted: Counter[str]
    runs_redacted: int


@task(name="read-shard", cache_policy=NO_CACHE)
def read_shard(
    files: list[tuple[str, str | None, str]], privacy: PrivacyConfig, cache_key: str = ""
) -> ScrubbedRead:
    """Read one shard of raw files and redact it before it is returned, hence before it is cached
    (`cache_key` names the result when caching is on): no secret ever reaches `<out_dir>/.cache`.

    Redaction comes right after reading, so no truncation can cut a secret in half; Problems are
    redacted too (a reader's error may quote raw input).
    """
    result = stages.read_stage(discover_readers(), files)
    redactor = hygiene.make_redactor(privacy)
    scrubbed = redact_trajectories(result.trajectories, redactor)
    problems = redact_problems(result.problems, redactor) + scrubbed.problems
    read = result._replace(trajectories=scrubbed.trajectories, problems=problems)
    return ScrubbedRead(read, redactor.found, scrubbed.redacted, len(scrubbed.problems))


@task(name="extract-shard", cache_policy=NO_CACHE)
def extract_shard(
    scenario: str,
    trajs: list[Trajectory],
    tasks: dict[str, ExtractOptions],
    observed: Any = None,
    cache_key: str = "",
) -> tuple[list[GoldStep], list[Problem]]:
    """Extract gold steps of every task from one shard of kept trajectories."""
    return stages.extract_stage(
        stages.make_extractor(discover_extractors()[scenario], observed), trajs, tasks
    )


@task(name="generate-shard", cache_policy=NO_CACHE)
def generate_shard(
    config: BuildConfig,
    golds: list[GoldStep],
    pool: list[Any],
    n_options: int,
    generator: DistractorGenerator | None = None,
    cache_key: str = "",
) -> tuple[list[Question], list[Problem]]:
    """Pose one shard of gold steps as questions (with the build's shared generator when given)."""
    return stages.generate_stage(generator or make_generator(config), golds, pool, n_options)


@task(name="enqueue-for-review", cache_policy=NO_CACHE)
def enqueue_for_review(
    path: str, questions: list[Question], batch: str, tasks: list[str], reviews_per_item: int
) -> dict[str, Any]:
    """Enqueue the build's questions for human review (verdicts of unchanged items are kept)."""
    return enqueue_and_summarise(path, questions, batch, tasks, reviews_per_item)


def _cached(t: Any, config: BuildConfig) -> Any:
    """`t` with its result persisted under `<out_dir>/.cache` and keyed by the explicit `cache_key` parameter.

    Keys are computed by `flows.cache_keys` from input content and component versions, never from
    task source, so an edit that bumps a reader/extractor/generator version invalidates exactly
    what it should, and a rerun (or a run resumed after SIGKILL) skips every shard already done.
    """
    if not config.limits.cache:
        return t
    return t.with_options(
        cache_policy=CacheKeyFnPolicy(cache_key_fn=_key_from_parameter),
        persist_result=True,
        result_storage=Path(config.out_dir).resolve() / ".cache" / "prefect-results",
    )


def retry_next_run(problem: Problem) -> bool:
    """A generate Problem that a later run may not meet: the budget ran out, a batch is still
    running, or the LLM failed in a way that may pass (timeouts, 5xx, invalid output; not a refusal)."""
    if problem.stage != "generate":
        return False
    reason = problem.reason
    return reason in ("no_distractors", "batch_pending") or (
        reason.startswith("llm_") and reason != "llm_refused"
    )


def _forget_shard(config: BuildConfig, key: str) -> None:
    """Drop a shard's cached result (its file is named by the cache key), so the next run redoes it."""
    (Path(config.out_dir).resolve() / ".cache" / "prefect-results" / key).unlink(missing_ok=True)


def _key_from_parameter(_context: Any, parameters: dict[str, Any]) -> str | None:
    return parameters.get("cache_key") or None


def _unchanged_build(config: BuildConfig, key: str) -> dict[str, Any] | None:
    """The last report of this version, refreshed, when nothing changed since it was built.

    Reused only when the build key matches (config, component versions, every input file's size and
    time, report files), every output is there, the generate stage met no Problem (a timeout or a
    spent budget must be retried), and the review queue still holds exactly these items as built
    (otherwise enqueueing them again has work to do: a rebuild of another version retired them).
    """
    if not config.limits.cache:
        return None
    out = config.output_dir()
    try:
        report = json.loads((out / "report.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if report.get("build_key") != key or not config.queue_path().exists():
        return None
    if any(reason.startswith("generate.") for reason in report.get("problems_by_reason", {})):
        return None
    tasks = list(report.get("questions_by_task", {}))
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
    unchanged = {"new": 0, "unchanged": len(built), "requeued": 0, "restored": 0, "retired": 0}
    counts = report.get("questions_by_task", {})
    changelog = {t: {"added": 0, "removed": 0, "changed": 0, "unchanged": counts.get(t, 0)} for t in tasks}
    report["review"] = {"enqueued": unchanged, "changelog": changelog, **review_summary(queue)}
    report["changelog"] = changelog  # (any `llm` section is the reused build's own spend)
    return report


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


def _inputs(config: BuildConfig) -> tuple[list[tuple[str, str | None, str]], list[Problem]]:
    """(file, forced reader, input root) per input, and a Problem per entry skipped while searching.

    Ids derive from the path below the root, so moves keep them. FIFOs, sockets, devices, bad
    symlinks and folders named like input files are never opened: each is quarantined and counted.
    """
    found: dict[str, tuple[str | None, str]] = {}
    skipped: list[Problem] = []
    for src in config.sources:
        scan = scan_run_inputs([src.path])  # run folders (env-setup bundles) fold into one file
        skipped += scan.problems
        for file in scan.files:
            found.setdefault(str(file), (src.reader, src.path))
    report_files = {str(f) for f in find_inputs(config.report_paths())}
    return [(f, r, root) for f, (r, root) in sorted(found.items()) if f not in report_files], skipped


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
    started = time.perf_counter()
    timer = _Timer()
    progress = progress_mod.current()
    extractor_cls = lookup(discover_extractors(), config.scenario, "extractor")
    tasks = {name: t for name, t in config.tasks.items() if t.enabled}
    for name in tasks:
        if name not in extractor_cls.tasks:
            raise ValueError(
                f"extractor {config.scenario} has no task {name!r}; it has {', '.join(extractor_cls.tasks)}"
            )
    specs = {name: task_spec(config.scenario, name) for name in tasks}
    out = config.output_dir()
    for folder in (out, Path(config.out_dir) / ".cache"):
        clean_stale_temps(folder)  # what a killed run was writing (its process is gone)

    with timer.stage("read"):
        files, skipped = _inputs(config)
        shard_files = chunks(files, config.limits.shard_size)
        read_keys = [cache_keys.read_key(s, config.privacy) for s in shard_files]
        build_key = cache_keys.build_key(config, extractor_cls, read_keys)
        previous = _unchanged_build(config, build_key)
        if previous is not None:  # nothing changed since the last build of this version: nothing to do
            previous["reused"] = True
            previous["timings_s"] = {"check_unchanged": round(time.perf_counter() - started, 4)}
            write_json(out / "report.json", previous)
            return previous
        reader = _cached(read_shard, config)
        scrubbed = _gather(
            [reader.submit(s, config.privacy, k) for s, k in zip(shard_files, read_keys, strict=True)],
            "read",
            progress,
        )
        verdicts = load_reports(config.report_entries())
    reads = [r.read for r in scrubbed]
    trajs = [t for r in reads for t in r.trajectories]
    problems: list[Problem] = skipped + [p for r in reads for p in r.problems] + verdicts.problems
    found_in_runs: Counter[str] = sum((r.found for r in scrubbed), Counter())
    redacted_in_runs: Counter[str] = sum((r.redacted for r in scrubbed), Counter())
    redactor = hygiene.make_redactor(config.privacy)  # questions and Problems met later

    with timer.stage("keep"):
        judge = make_judge(config)
        try:
            kept = stages.label_and_keep(
                trajs,
                verdicts.found,
                [v for r in reads for v in r.verdicts],
                extractor_cls.reads,
                config.keep_unknown,
                [g for r in reads for g in r.golds],
                judge,
            )
            judge_usage = judge.usage_report() if judge is not None else None
        finally:
            if judge is not None:
                judge.close()
    problems += kept.problems

    options = {
        name: ExtractOptions(
            t.max_items_per_trajectory, t.max_context_tokens, t.max_observation_chars, config.seed
        )
        for name, t in tasks.items()
    }
    with timer.stage("extract"):
        # what the extractor learns from every labelled run, failed ones included (e.g. fixes that failed)
        observed = stages.observe_runs(extractor_cls, kept.labelled)
        shards = chunks(kept.kept, max(1, config.limits.shard_size // 4))
        extractor_task = _cached(extract_shard, config)
        observed_key = cache_keys.trajectories_key(kept.labelled) if observed is not None else ""
        extracted = _gather(
            [
                extractor_task.submit(
                    config.scenario,
                    s,
                    options,
                    observed,
                    cache_keys.extract_key(extractor_cls, s, options, observed_key),
                )
                for s in shards
            ],
            "extract",
            progress,
        )
    golds = [g for gs, _ in extracted for g in gs]
    problems += [p for _, ps in extracted for p in ps]

    questions: list[Question] = []
    llm_usage: dict[str, Any] | None = None
    with timer.stage("generate"):
        # One generator per build: LLM shards share its client pool, limiter, cache and ledger. Dask
        # workers are other processes, so there each shard makes its own from the config.
        generator = make_generator(config)
        shared = generator if config.limits.task_runner == "threads" else None
        generator_task = _cached(generate_shard, config)
        try:
            for name in tasks:
                task_golds = [g for g in golds if g.task == name]
                pool = stages.pool_of(task_golds)
                pool_key = cache_keys.pool_key(pool)
                shards = chunks(task_golds, config.limits.shard_size)
                keys = [
                    cache_keys.generate_key(config, generator, s, pool_key, specs[name].n_options)
                    for s in shards
                ]
                futures = [
                    generator_task.submit(config, s, pool, specs[name].n_options, shared, key)
                    for s, key in zip(shards, keys, strict=True)
                ]
                for key, (qs, ps) in zip(keys, _gather(futures, f"generate {name}", progress), strict=True):
                    questions += qs
                    problems += ps
                    if key and any(retry_next_run(p) for p in ps):
                        _forget_shard(config, key)  # a spent budget or a failed request: the next run retries
        finally:
            if hasattr(generator, "usage_report"):
                llm_usage = generator.usage_report()
            if hasattr(generator, "close"):
                generator.close()

    with timer.stage("redact"):
        redacted = redact_questions(questions, redactor)
    with timer.stage("dedup"):
        deduped = dedup_questions(
            redacted.questions, config.dedup.near_duplicate_threshold, config.dedup.num_perm
        )
    problems += redacted.problems + deduped.problems

    with timer.stage("check"):
        passed, found = stages.check_stage(deduped.kept)
        problems += found
    with timer.stage("contamination"):
        contamination = hygiene.contamination_stage(passed, config.contamination)
        problems += contamination.problems
        balanced = balance_positions(contamination.kept, config.seed)

    with timer.stage("write"):
        by_task: dict[str, list[dict[str, Any]]] = {name: [] for name in tasks}
        for q in sorted(balanced, key=lambda q: (q.task, q.item_id)):
            by_task[q.task].append(question_row(q))
        for name, rows in by_task.items():
            write_parquet(out / "candidates" / f"{name}.parquet", rows_table(config.scenario, name, rows))
        problems = redact_problems(problems, redactor)  # reader errors may quote raw input
        write_jsonl(out / "quarantine.jsonl", (p.model_dump() for p in problems))
        shown = hygiene.redaction_rows(balanced)
        write_jsonl(out / "redactions.jsonl", shown)
    report = _report(config, files, trajs, kept, golds, by_task, problems, timer)
    report["judge"] = {
        "enabled": bool(config.judge.generator),
        **({"model": config.judge.model} if config.judge.model else {}),
        "counts": kept.judged,
        **({"llm": judge_usage} if judge_usage is not None else {}),
    }
    if llm_usage is not None:
        report["llm"] = llm_usage  # tokens and cost per task and per model
    report["secrets"] = hygiene.secrets_report(
        found_in_runs + redactor.found,
        redacted_in_runs,
        redacted.redacted,
        sum(r.runs_redacted for r in scrubbed),
        shown,
    )
    report["dedup"] = {
        "trajectories": sum(p.reason == "duplicate_trajectory" for p in kept.problems),
        "items_exact": deduped.exact,
        "items_near": deduped.near,
    }
    report["contamination"] = contamination.report
    report["review"] = enqueue_for_review(
        str(config.queue_path()), balanced, config.version, list(tasks), config.review.reviews_per_item
    )
    report["changelog"] = report["review"].get(
        "changelog", {}
    )  # added/removed/changed per task vs the last build
    report["quality"] = build_quality(by_task, config.quality)
    html_report = write_build_report(out, report, by_task, [len(t.steps) for t in kept.kept])
    report["report_html"] = str(html_report)
    report["build_key"] = build_key
    write_json(out / "report.json", report)
    attach_report_artifact(report, html_report)
    return report


def _report(
    config: BuildConfig,
    files: list[tuple[str, str | None, str]],
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
            "skipped_entries": sum(1 for p in problems if p.stage == "read" and p.reason in SKIPPED_REASONS),
            "trajectories_read": len(trajs),
            "kept": len(kept.kept),
            "dropped": sum(kept.dropped.values()),
            "gold_steps": len(golds),
            "questions": sum(len(r) for r in by_task.values()),
            "quarantined": sum(1 for p in problems if p.severity == "error"),
            # runs whose answer the rules could not decide and no judge decided (dropped unless keep_unknown)
            "needs_judge": sum(1 for t in kept.labelled if t.outcome.reason == "needs_judge"),
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


def task_runner(config: BuildConfig) -> Any:
    """The configured task runner: a thread pool, or Dask (an existing scheduler, or a LocalCluster)."""
    if config.limits.task_runner == "dask":
        from prefect_dask import DaskTaskRunner

        if config.limits.dask_address:
            return DaskTaskRunner(address=config.limits.dask_address)
        return DaskTaskRunner(
            cluster_kwargs={
                "n_workers": config.limits.dask_workers,
                "threads_per_worker": 1,
                "processes": True,
                "dashboard_address": None,
            }
        )
    return ThreadPoolTaskRunner(max_workers=config.limits.max_workers)


#: Files the build creates are its owner's only (0600, folders 0700): the shard cache, the LLM
#: cache and the queue hold trajectory text (redacted, but still someone's work). Atomic writes
#: are 0600 anyway (`mkstemp`); this covers what Prefect and SQLite create.
PRIVATE_UMASK = 0o077


def run_build(config: BuildConfig, progress: Progress | None = None) -> dict[str, Any]:
    """Run the flow with the configured task runner (and an optional progress callback)."""
    runner = task_runner(config)
    previous = os.umask(PRIVATE_UMASK)  # Dask workers started by the flow inherit it
    try:
        with progress_mod.reporting(progress):
            return build.with_options(task_runner=runner)(config)
    finally:
        os.umask(previous)


__all__ = ["build", "chunks", "make_generator", "run_build"]
