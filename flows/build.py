"""The `build` flow: raw trajectories -> candidate questions, on Prefect.

`build` reads as the list of its stages (`flows/build_stages.py`): resolve the scenario, plan the inputs
(reusing an unchanged build), read + redact (sharded), label + keep, extract (sharded), generate (sharded,
per task), redact + dedup + gates + contamination + balance, write `candidates/<task>.parquet`,
`quarantine.jsonl` and `redactions.jsonl`, enqueue for review, report (`report.json`, `report.html`)
under `<out_dir>/<scenario>/<version>/`. Tasks work on shards of files or gold steps, never on single
items. Every output file is written atomically.
"""

from __future__ import annotations

import os
import time
from typing import Any

from prefect import flow
from prefect.task_runners import ThreadPoolTaskRunner

from flows import hygiene, work
from flows import progress as progress_mod
from flows.build_report import RunCounts, Sections, Timer, make_report, reusable_report
from flows.build_stages import (
    Inputs,
    KeptRuns,
    Posed,
    Written,
    audit_candidates,
    chunks,
    clean_outputs,
    enqueue_for_review,
    extract_golds,
    generate_questions,
    keep_runs,
    make_generator,
    make_judge,
    plan_inputs,
    read_inputs,
    read_shard,
    report_html,
    resolve_scenario,
    write_outputs,
)
from flows.config import BuildConfig
from flows.filtering import filter_questions
from flows.finish import Filtered, Final, finish_questions
from flows.io import write_json
from flows.memory import bound_heap, release_memory, survivors_frozen
from flows.problem_log import ProblemLog
from flows.progress import Progress
from flows.report_html import attach_report_artifact
from generators.hygiene.secrets import Redactor
from schemas.report import BuildReport, DedupReport, ReviewReport
from schemas.validity import AdversarialReport


@flow(name="build-benchmark", log_prints=False, validate_parameters=True)
def build(config: BuildConfig) -> BuildReport:
    """Build candidate questions for one scenario; returns the report (also written to `report.json`)."""
    with survivors_frozen():  # full garbage collections walk each stage's new objects, not the process
        return _build(config)


def _build(config: BuildConfig) -> BuildReport:
    timer = Timer()
    scenario = resolve_scenario(config)
    clean_outputs(config)
    bound_heap()  # large arrays get pages of their own: freed, they go back to the OS
    if config.generator.name != "offline" or config.judge.generator:
        from flows.settings import prewarm_llm

        prewarm_llm(config)  # the SDK imports while the stages before generation run
    inputs = plan_inputs(config, scenario)
    previous = reusable_report(config, inputs.build_key)
    if previous is not None:  # nothing changed since the last build of this version: nothing to do
        took = {"check_unchanged": round(time.perf_counter() - timer.started, 4)}
        return _write_report(config, previous.model_copy(update={"reused": True, "timings_s": took}))
    read = read_inputs(config, inputs, timer)
    # the flow holds references and counts, never the runs: the keep task takes the read shards'
    # results where it runs and spills the kept runs as extraction's shards, each read where it runs
    kept = keep_runs(config, scenario, read, timer)
    del read  # the read shards' results go (on Dask, from the workers' memory)
    runs = kept.counts
    release_memory()
    golds, extract_problems = extract_golds(config, scenario, kept, timer)
    runs = runs._replace(gold_steps=golds.total)
    posed = generate_questions(config, scenario, golds, timer)
    del golds
    release_memory()
    filtered = filter_questions(config, posed.questions, timer)
    release_memory()  # the reserve candidates and the filter's counts and features are gone
    redactor = hygiene.make_redactor(config.privacy)  # questions and Problems met from here on
    try:  # the questions are on disk from here until enqueued: the files go whatever happens
        final = finish_questions(config, filtered, redactor, timer)
        release_memory()
        found = (
            ProblemLog(inputs.skipped)
            + kept.read_problems
            + kept.problems
            + extract_problems
            + posed.problems
            + filtered.problems
            + final.problems
        )
        written = write_outputs(config, scenario, final, found, redactor, timer)
        redactor.release()  # every output is redacted: its caches of scanned texts go before the report
        review = work.run_task(  # on Dask a worker reads the questions and writes the queue
            enqueue_for_review,
            str(config.queue_path()),
            final.questions,
            config.version,
            list(scenario.tasks),
            config.review.reviews_per_item,
        )
    finally:
        work.remove_area(config.out_dir, filtered.area)
    release_memory()
    report = report_of(config, inputs, kept, runs, posed, filtered, final, written, review, redactor, timer)
    release_memory()
    work.run_task(report_html, str(config.output_dir()), report, written.rows, runs.steps_per_kept)
    attach_report_artifact(report, report.report_html)
    return _write_report(config, report)


def report_of(
    config: BuildConfig,
    inputs: Inputs,
    kept: KeptRuns,
    runs: RunCounts,
    posed: Posed,
    filtered: Filtered,
    final: Final,
    written: Written,
    review: ReviewReport,
    redactor: Redactor,
    timer: Timer,
) -> BuildReport:
    """The build report, from what every stage returned."""
    quality, validity = work.run_task(
        audit_candidates,
        written.rows,
        config.quality,
        filtered.tasks,
        config.seed,
        timer.seconds.get("generate", 0.0),
        timer.seconds.get("adversarial", 0.0),
    )
    sections = Sections(
        judge=kept.judge,
        llm=posed.usage,
        secrets=hygiene.secrets_report(
            kept.found + redactor.found,
            kept.redacted,
            final.redacted.redacted,
            kept.runs_redacted,
            written.redactions,
        ),
        dedup=DedupReport(
            trajectories=sum(p.reason == "duplicate_trajectory" for p in kept.problems),
            items_exact=final.deduped.exact,
            items_near=final.deduped.near,
        ),
        contamination=final.contamination.report,
        review=review,
        quality=quality,
        adversarial=AdversarialReport(
            enabled=config.adversarial.enabled,
            seconds=timer.seconds.get("adversarial", 0.0),
            generate_seconds=timer.seconds.get("generate", 0.0),
            tasks=filtered.tasks,
        ),
        validity=validity,
    )
    return make_report(
        config,
        inputs.files,
        runs,
        kept.dropped,
        dict(written.rows.counts),
        written.problems,
        timer,
        sections,
        inputs.build_key,
    )


def _write_report(config: BuildConfig, report: BuildReport) -> BuildReport:
    write_json(config.output_dir() / "report.json", report.model_dump(mode="json"))
    return report


#: Batches of messages each Dask comm keeps for debugging (`distributed.admin.low-level-log-length`,
#: 1,000 by default), set before a Dask runner starts (`task_runner`). A LocalCluster's scheduler
#: runs in the flow process, and the batches its comms keep to the workers hold every task they
#: sent, unpickled: the task, its parameters and the flow. At 20,000 runs (about 700 shard tasks)
#: that was 94 MiB of live objects after generation, of the flow process's 170 MiB of growth over
#: 1,000 runs; the client's comm to the scheduler keeps the graphs it sent the same way.
DASK_LOG_LENGTH = 16


def dask_log_length() -> None:
    """Bound Dask's debugging logs of messages (`DASK_LOG_LENGTH`) for the comms started from now on,
    here and in the workers a LocalCluster starts (they get this process's Dask config). An
    operator's unbounded setting (`None`, for debugging) or lower one is left as it is."""
    import dask

    key = "distributed.admin.low-level-log-length"
    value = dask.config.get(key, default=None)
    if isinstance(value, int) and value > DASK_LOG_LENGTH:
        dask.config.set({key: DASK_LOG_LENGTH})


def task_runner(config: BuildConfig) -> Any:
    """The configured task runner: a thread pool, or Dask (an existing scheduler, or a LocalCluster)."""
    if config.limits.task_runner == "dask":
        from prefect_dask import DaskTaskRunner

        dask_log_length()

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


def run_build(config: BuildConfig, progress: Progress | None = None) -> BuildReport:
    """Run the flow with the configured task runner (and an optional progress callback)."""
    runner = task_runner(config)
    previous = os.umask(PRIVATE_UMASK)  # Dask workers started by the flow inherit it
    try:
        with progress_mod.reporting(progress):
            return build.with_options(task_runner=runner)(config)
    finally:
        os.umask(previous)


__all__ = ["build", "chunks", "make_generator", "make_judge", "read_shard", "run_build"]
