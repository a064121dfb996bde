"""The stages of the `build` flow, each a function over the previous stage's result, and their Prefect tasks.

Shard tasks (read, extract, generate) take shard REFERENCES and return shard results; `_cached` keys them
by content and component versions. The flow in `flows/build.py` only calls these in order.
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple, TypeVar, overload

import pyarrow.parquet as pq
from prefect import task
from prefect.cache_policies import NO_CACHE, CacheKeyFnPolicy
from prefect.utilities.annotations import quote

from extractors.base import ExtractOptions, Extractor
from extractors.discovery import discover_extractors, discover_readers, lookup
from extractors.ingest.bundles import scan_run_inputs
from extractors.ingest.records import find_inputs
from extractors.labels.reports import load_reports
from flows import cache_keys, hygiene, stages, work
from flows import progress as progress_mod
from flows.build_report import RunCounts, Timer
from flows.config import BuildConfig, PrivacyConfig, TaskConfig
from flows.finish import Final, FinalQuestions
from flows.io import clean_stale_temps, write_jsonl, write_parquet_batches
from flows.memory import release_memory
from flows.problem_log import ProblemLog
from flows.progress import Progress
from flows.report_html import write_build_report
from flows.review import enqueue_and_summarise
from generators.base import DistractorGenerator, PoolEntry
from generators.hygiene.scrub import redact_problems, redact_trajectories
from generators.hygiene.secrets import Redactor
from generators.offline import OfflineGenerator
from generators.quality.audit import QualityRules, build_quality
from generators.quality.validity import validity_report
from schemas import (
    GoldStep,
    Problem,
    Question,
    TaskLimits,
    TaskSpec,
    question_row,
    rows_table,
    task_spec,
)
from schemas.report import BuildReport, JudgeReport, LLMUsage, QualityReport, ReviewReport
from schemas.validity import AdversarialTask, ValidityReport

T = TypeVar("T")

#: Rows per row group of a candidates file (a task of fewer rows is one group, as `write_parquet` writes).
#: The write stage holds one group's rows and its Arrow table at a time: 8,192 rows of 6 KB SWE
#: items took about 120 MiB of Arrow buffers on top of the rows, 2,048 about 35.
ROW_GROUP = 2048


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


def extract_options(task: TaskConfig, spec: TaskSpec, seed: int) -> ExtractOptions:
    """A task's extraction knobs: the spec's default limits, overridden by what the config sets."""
    given = task.model_dump(include=task.model_fields_set & set(TaskLimits.model_fields))
    limits = spec.limits.model_copy(update=given)
    return ExtractOptions(
        limits.max_items_per_trajectory, limits.max_context_tokens, limits.max_observation_chars, seed
    )


def chunks(items: Sequence[T], size: int) -> list[list[T]]:
    """Split `items` into consecutive shards of at most `size`."""
    return [list(items[i : i + size]) for i in range(0, len(items), size)]


def _batches(items: Iterable[T], size: int) -> Iterator[list[T]]:
    """`items` in lists of `size` (the last shorter), as `chunks` cuts a list, read as they come."""
    batch: list[T] = []
    for item in items:
        batch.append(item)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch


class ScrubbedRead:
    """A read shard with its secrets already redacted (what the cache may hold), and the counts.

    A plain class on purpose, not a NamedTuple: the keep task takes every read shard's future, and
    Prefect, resolving a task's inputs, walks into each result that is a list, tuple, dict,
    dataclass or pydantic model, looking for more futures (`visit_collection`, remembering every
    object it met). Into a shard's runs, that was every Trajectory, Step and Action of the build:
    2.0 of the keep stage's 2.5 s at 3,000 small runs, and a map of every object until the walk
    ended. Prefect stops at this class, on threads and on Dask alike (`opaque()` would do it on
    threads only: Dask resolves no future inside it)."""

    __slots__ = ("found", "read", "redacted", "runs_redacted")

    def __init__(
        self, read: stages.ReadResult, found: Counter[str], redacted: Counter[str], runs_redacted: int
    ) -> None:
        self.read = read
        self.found = found
        self.redacted = redacted
        self.runs_redacted = runs_redacted


def _shard_arg(config: BuildConfig, value: Any) -> Any:
    """A shard's own data as its task's argument: in `quote()` on the thread runner, so Prefect does not
    walk it for futures on submit; as is on Dask, whose workers get a quote as a bare tuple. What every
    shard shares is passed as a path instead (`flows.work`), so no submit costs more than its shard."""
    return quote(value) if config.limits.task_runner == "threads" else value


#: Scenario classes this process has discovered, by name (a scenario's class never changes in a
#: process: discovery refuses a second one under the same name). Discovery reads every installed
#: package's entry points and the scenarios' YAML (8 ms here, 30 before libyaml parsed the YAML):
#: once per process, not per shard (a 100,000-run build has thousands).
_SCENARIOS: dict[str, type] = {}


def _scenario_class(scenario: str) -> type:
    """The extractor class of `scenario`, discovered on this process's first call (threads or Dask
    worker); that discovery also registers the scenarios' TaskSpecs in the process."""
    if scenario not in _SCENARIOS:
        _SCENARIOS.update(discover_extractors())
    return _SCENARIOS[scenario]


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


@task(name="keep-runs", cache_policy=NO_CACHE)
def keep_task(
    config: BuildConfig, reads: list[ScrubbedRead], options: dict[str, ExtractOptions], area: str
) -> KeptRuns:
    """Label every run read and keep the successful ones, then lay the kept runs out as the extract
    stage's shards: each shard of runs is spilled under `area` and keyed where this task runs.

    `reads` are the read shards' futures: the task runner resolves them where this task runs (on Dask
    the read results go from the workers that read them to this task's worker), so the flow process
    never holds a run, only the counts and references this task returns. What the scenario observes
    of every labelled run is stored here too (`flows.work.store`).
    """
    extractor = _scenario_class(config.scenario)  # a Dask worker's first discovery registers the specs
    results = [r.read for r in reads]
    trajs = [t for r in results for t in r.trajectories]
    verdicts = load_reports(config.report_entries())
    judge = make_judge(config)
    try:
        kept = stages.label_and_keep(
            trajs,
            verdicts.found,
            [v for r in results for v in r.verdicts],
            extractor.reads,
            config.keep_unknown,
            [g for r in results for g in r.golds],
            judge,
        )
        judge_usage = judge.usage_report() if judge is not None else None
    finally:
        if judge is not None:
            judge.close()
    problems = ProblemLog()
    for r in results:
        problems += r.problems
    problems += verdicts.problems
    counts = RunCounts.of(trajs, kept.labelled, kept.kept)
    found = sum((r.found for r in reads), Counter())
    redacted = sum((r.redacted for r in reads), Counter())
    runs_redacted = sum(r.runs_redacted for r in reads)
    del results, reads, trajs
    # what the extractor learns from every labelled run, failed ones included (e.g. fixes that failed)
    observed = stages.observe_runs(extractor, kept.labelled)
    observed_key = cache_keys.trajectories_key(kept.labelled) if observed is not None else ""
    observed_ref = work.store(config.out_dir, "observed", observed_key, observed) if observed_key else ""
    del observed
    shards = [
        (
            work.spill(config.out_dir, area, "runs", i, shard),
            cache_keys.extract_key(extractor, shard, options, observed_key),
        )
        for i, shard in enumerate(chunks(kept.kept, max(1, config.limits.shard_size // 4)))
    ]
    return KeptRuns(
        counts,
        kept.dropped,
        problems,
        ProblemLog(kept.problems),
        JudgeReport(
            enabled=bool(config.judge.generator),
            model=config.judge.model,
            counts=kept.judged,
            llm=judge_usage,
        ),
        found,
        redacted,
        runs_redacted,
        observed_ref,
        area,
        shards,
        options,
    )


@task(name="extract-shard", cache_policy=NO_CACHE)
def extract_shard(
    scenario: str,
    runs: str,
    tasks: dict[str, ExtractOptions],
    observed: str = "",
    cache_key: str = "",
) -> tuple[list[GoldStep], list[Problem]]:
    """Extract gold steps of every task from one shard of kept trajectories (`runs`: the path the keep
    task spilled them to, read where this task runs; `observed`: the path of what the scenario observed
    of every labelled run, `flows.work.store`; "" when it observed nothing)."""
    learnt = work.load(observed) if observed else None
    trajs = work.peek(runs)  # not taken: a retried task reads it again; the build removes the folder
    return stages.extract_stage(stages.make_extractor(_scenario_class(scenario), learnt), trajs, tasks)


@task(name="generate-shard", cache_policy=NO_CACHE)
def generate_shard(
    config: BuildConfig,
    golds: str,
    pool: str,
    n_options: int,
    generator: DistractorGenerator | None = None,
    cache_key: str = "",
) -> tuple[list[Question], list[Problem]]:
    """Pose one shard of gold steps as questions (with the build's shared generator when given);
    `golds` is the path of the shard's steps (`flows.work.spill`, read where the task runs), `pool`
    the path of the task's distractor pool (`Golds.pools`: lists of entries, `flows.work.load_lists`)."""
    # a Dask worker is another process: its first discovery registers the TaskSpecs there
    _scenario_class(config.scenario)
    steps = work.peek(golds)  # not taken: a retried task reads it again; the build removes the folder
    return stages.generate_stage(generator or make_generator(config), steps, work.load_lists(pool), n_options)


@task(name="enqueue-for-review", cache_policy=NO_CACHE)
def enqueue_for_review(
    path: str, questions: Iterable[Question], batch: str, tasks: list[str], reviews_per_item: int
) -> ReviewReport:
    """Enqueue the build's questions for human review (verdicts of unchanged items are kept), where the
    task runs: on Dask a worker reads the questions and writes the queue (in `out_dir`)."""
    discover_extractors()  # a Dask worker's first discovery registers the specs the rows follow
    return enqueue_and_summarise(path, questions, batch, tasks, reviews_per_item)


def cache_dir(config: BuildConfig, kind: str) -> Path:
    """`<out_dir>/.cache/<kind>`: where the shard cache keeps one kind of result (`prefect-results`,
    `filter-blocks`)."""
    return Path(config.out_dir).resolve() / ".cache" / kind


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
        result_storage=cache_dir(config, "prefect-results"),
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
    (cache_dir(config, "prefect-results") / key).unlink(missing_ok=True)


def _key_from_parameter(_context: Any, parameters: dict[str, Any]) -> str | None:
    return parameters.get("cache_key") or None


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


#: A stage's window of shards in flight, or how to count it from its first submitted future.
Window = int | Callable[[Any], int]


def _in_flight(config: BuildConfig) -> Window:
    """How many shards a stage keeps submitted and not yet gathered.

    On threads, twice the pool: every worker busy and its next shard queued, while the flow gathers
    in shard order. With every shard submitted at once, the workers ran ahead of the flow (which
    writes each result to disk) and finished shards' gold steps and questions piled up in memory:
    how many depended on the machine's load. On Dask, four per thread of the cluster's workers,
    counted when the first shard is submitted (`_cluster_threads`; an existing cluster may have
    any number): every shard submitted at once had the scheduler, which a LocalCluster runs in the
    flow process, hold every waiting shard's task and parameters, unpickled: at 20,000 runs (about
    270 extract shards) the flow process's RSS at the end of extraction was 405 MiB, 368 with the
    window (363 at 1,000 runs); the small-object arenas they took stayed the flow's once freed."""
    if config.limits.task_runner == "threads":
        return 2 * config.limits.max_workers
    return lambda future: 4 * _cluster_threads(future)


def _cluster_threads(future: Any) -> int:
    """The threads of the Dask cluster a submitted Prefect future runs on (at least 1)."""
    return max(1, sum(_dask_future(future).client.nthreads().values()))


def _dask_future(future: Any) -> Any:
    """The Dask future a Prefect Dask future wraps (its `client` is the task runner's)."""
    return future.wrapped_future


def _gathered(futures: Iterator[Any], window: Window) -> Iterator[Any]:
    """The results of `futures` in order, with at most `window` of them submitted and not yet
    gathered (`_in_flight`): `futures` submits a shard's task each time it is advanced."""
    pending: deque[Any] = deque()
    size = window if isinstance(window, int) else None
    for future in futures:
        pending.append(future)
        if size is None:
            size = max(1, window(future))
        if len(pending) >= size:
            yield pending.popleft().result()
    while pending:
        yield pending.popleft().result()


class Scenario(NamedTuple):
    """The scenario a build runs: its extractor, the enabled tasks and their specs."""

    extractor: type[Extractor]
    tasks: dict[str, TaskConfig]
    specs: dict[str, TaskSpec]


class Inputs(NamedTuple):
    """The input files, their shards, the key of the whole build, and the entries skipped while searching."""

    files: list[tuple[str, str | None, str]]
    shards: list[list[tuple[str, str | None, str]]]
    keys: list[str]
    build_key: str
    skipped: list[Problem]


class KeptRuns(NamedTuple):
    """What the keep task returns: counts of the runs, the Problems met reading and labelling them, what
    the judge did, the redaction counts of the read stage, and references to the kept runs, spilled as
    the extract stage's shards (path and cache key each) with what the scenario observed (`observed`)."""

    counts: RunCounts
    dropped: Counter[str]
    read_problems: ProblemLog
    """Problems of the read shards and of the harness reports, in shard order."""
    problems: ProblemLog
    """Problems of labelling and keeping (duplicates, unjoined reports, the judge's failures)."""
    judge: JudgeReport
    found: Counter[str]
    """Secrets found in the runs, by kind."""
    redacted: Counter[str]
    """Secrets redacted from the runs, by kind."""
    runs_redacted: int
    observed: str
    area: str
    shards: list[tuple[str, str]]
    options: dict[str, ExtractOptions]
    """The extract options the shards' keys were made with (the extract stage uses the same)."""


class Golds(NamedTuple):
    """The gold steps of every task on disk, one file per task (`work.replay`; in shard order), with
    each MCQ task's distractor pool (`stages.pool_of` of its steps) in a file of its own, a list of
    entries per shard (`pool`; `work.load_lists` where a generate shard runs), and the counts: the flow
    holds neither steps nor pools.

    A completion task has no pool (no file: an empty one where read): its questions take no
    distractors. Its pool was loaded whole where its shards ran, beside the MCQ task's pool and index
    the generator keeps: at 100,000 small rows the 300,000 action steps' entries took the build
    process from 1.46 to 1.77 GB at the end of the generate stage, its peak."""

    area: str
    files: dict[str, Path]
    pools: dict[str, Path]
    counts: dict[str, int]
    retrievable: dict[str, bool]
    pooled: frozenset[str]
    """The tasks with a pool: the MCQ ones."""

    @classmethod
    def start(cls, config: BuildConfig, scenario: Scenario) -> Golds:
        area = work.spill_area()
        names = list(scenario.specs)
        return cls(
            area,
            {n: work.spill_path(config.out_dir, area, f"golds-{n}") for n in names},
            {n: work.spill_path(config.out_dir, area, f"pool-{n}") for n in names},
            {n: 0 for n in names},
            {n: spec.other_runs_as_distractors for n, spec in scenario.specs.items()},
            frozenset(n for n, spec in scenario.specs.items() if spec.form == "mcq"),
        )

    def add(self, out: work.Appender, steps: Iterable[GoldStep]) -> None:
        """One shard's steps, to their tasks' files and pools (steps of a task the scenario does not
        pose are counted, as the steps extracted, and not kept)."""
        entries: dict[str, list[PoolEntry]] = {}
        for g in steps:
            self.counts[g.task] = self.counts.get(g.task, 0) + 1
            if g.task in self.files:
                out.add(self.files[g.task], g)
                if g.task in self.pooled:
                    entries.setdefault(g.task, []).extend(stages.pool_of([g], self.retrievable[g.task]))
        for name, batch in entries.items():
            out.add(self.pools[name], batch)

    def pool(self, task: str) -> Iterator[PoolEntry]:
        """The distractor pool of `task`, read from its file an entry at a time."""
        for batch in work.replay(self.pools[task]):
            yield from batch

    @property
    def total(self) -> int:
        return sum(self.counts.values())


class Spilled(NamedTuple):
    """One task's posed questions, spilled shard by shard (`flows.work.spill`, in shard order)."""

    task: str
    area: str
    refs: list[str]

    def take(self) -> list[Question]:
        """The task's questions in shard order, read once (the files go)."""
        return [q for ref in self.refs for q in work.take(ref)]


class Posed(NamedTuple):
    """Questions posed by the generator (spilled, per task in the scenario's order), the Problems
    met, and what the generator spent."""

    questions: list[Spilled]
    problems: ProblemLog
    usage: LLMUsage | None


class ParquetRows(Sequence[dict[str, Any]]):
    """One task's written rows, read from its Parquet file each time they are gone through, a record
    batch at a time: a pass over them holds one batch of row dicts (and what the reader keeps), not
    the task's. Indexing reads the file whole (the report's sections only iterate)."""

    BATCH = 1024

    def __init__(self, path: Path, n: int) -> None:
        self.path = path
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __iter__(self) -> Iterator[dict[str, Any]]:
        for batch in pq.ParquetFile(self.path).iter_batches(batch_size=self.BATCH):
            yield from batch.to_pylist()

    @overload
    def __getitem__(self, index: int) -> dict[str, Any]: ...
    @overload
    def __getitem__(self, index: slice) -> list[dict[str, Any]]: ...
    def __getitem__(self, index: int | slice) -> dict[str, Any] | list[dict[str, Any]]:
        return pq.read_table(self.path).to_pylist()[index]


class CandidateRows(Mapping[str, Sequence[dict[str, Any]]]):
    """The written candidate rows of every task, read back from `candidates/<task>.parquet` as a task's
    rows are gone through (never kept, `ParquetRows`): the report's sections go through the tasks one
    at a time, so they hold a batch of one task's rows, not the build's. `counts` gives the rows per
    task without reading."""

    def __init__(self, folder: Path, counts: dict[str, int]) -> None:
        self.folder = folder
        self.counts = counts

    def __getitem__(self, task: str) -> ParquetRows:
        if task not in self.counts:
            raise KeyError(task)
        return ParquetRows(self.folder / f"{task}.parquet", self.counts[task])

    def __iter__(self) -> Iterator[str]:
        return iter(self.counts)

    def __len__(self) -> int:
        return len(self.counts)


class Written(NamedTuple):
    """What the write stage wrote: candidate rows per task (read from the files on demand), the
    (redacted) Problems, the redaction rows."""

    rows: CandidateRows
    problems: ProblemLog
    redactions: list[dict[str, Any]]


def resolve_scenario(config: BuildConfig) -> Scenario:
    """The configured scenario (discovery registers its specs) and its enabled tasks."""
    extractor_cls = lookup(discover_extractors(), config.scenario, "extractor")
    tasks = {name: t for name, t in config.tasks.items() if t.enabled}
    for name in tasks:
        if name not in extractor_cls.tasks:
            raise ValueError(
                f"extractor {config.scenario} has no task {name!r}; it has {', '.join(extractor_cls.tasks)}"
            )
    return Scenario(extractor_cls, tasks, {name: task_spec(config.scenario, name) for name in tasks})


def clean_outputs(config: BuildConfig) -> None:
    """Remove what a killed run was writing (its process is gone) from the output and cache folders."""
    for folder in (config.output_dir(), Path(config.out_dir) / ".cache", work.work_dir(config.out_dir)):
        clean_stale_temps(folder)
    work.clean_spills(config.out_dir)


def plan_inputs(config: BuildConfig, scenario: Scenario) -> Inputs:
    """Find the input files, shard them and key the build (inputs, privacy, config, component versions)."""
    files, skipped = _inputs(config)
    shards = chunks(files, config.limits.shard_size)
    keys = [cache_keys.read_key(s, config.privacy) for s in shards]
    return Inputs(files, shards, keys, cache_keys.build_key(config, scenario.extractor, keys), skipped)


def read_inputs(config: BuildConfig, inputs: Inputs, timer: Timer) -> list[Any]:
    """Read every shard (each redacted of secrets before it is cached) and wait until all are done,
    without taking their results; returns the shards' futures (each result stays where its task ran
    until the keep task takes it, `keep_runs`)."""
    with timer.stage("read"):
        reader = _cached(read_shard, config)
        futures = [
            reader.submit(_shard_arg(config, s), config.privacy, k)
            for s, k in zip(inputs.shards, inputs.keys, strict=True)
        ]
        _wait(config, futures, "read", progress_mod.current())
    return futures


def _wait(config: BuildConfig, futures: list[Any], label: str, progress: Progress | None) -> None:
    """Wait for `futures` in order, reporting progress, without bringing their results to this process
    (Prefect's own `wait` on Dask fetches the result)."""
    if config.limits.task_runner == "dask":
        import distributed

        def wait(future: Any) -> None:
            dask_future = _dask_future(future)
            with dask_future.client.as_current():  # the task runner's client, not a default one
                distributed.wait(dask_future)
    else:

        def wait(future: Any) -> None:
            future.wait()

    for done, future in enumerate(futures, start=1):
        wait(future)
        if progress:
            progress(label, done, len(futures))


def keep_runs(config: BuildConfig, scenario: Scenario, read: list[Any], timer: Timer) -> KeptRuns:
    """Label every run (harness reports tied to their runs, gold answers, the answer judge when on),
    keep the successful ones of the scenario's kinds and spill them as the extract stage's shards: one
    task (`keep_task`), which takes the read shards' results where it runs."""
    options = {
        name: extract_options(t, scenario.specs[name], config.seed) for name, t in scenario.tasks.items()
    }
    with timer.stage("keep"):
        area = work.spill_area()
        try:
            kept: KeptRuns = work.run_task(keep_task, config, read, options, area)
        except BaseException:
            work.remove_area(config.out_dir, area)
            raise
    return kept


def extract_golds(
    config: BuildConfig, scenario: Scenario, kept: KeptRuns, timer: Timer
) -> tuple[Golds, ProblemLog]:
    """Extract the gold steps of every task, shard by shard, from the kept runs the keep task spilled.

    Each shard task gets the path of its runs and reads them where it runs. Each shard's gold steps go
    to their task's file, and its distractor pool entries to their task's pool file, as the shard is
    gathered (`Golds`): the flow keeps neither. The runs' folder goes with the stage.
    """
    options = kept.options
    with timer.stage("extract"):
        extractor_task = _cached(extract_shard, config)

        def submitted() -> Iterator[Any]:
            for ref, key in kept.shards:
                yield extractor_task.submit(config.scenario, ref, options, kept.observed, key)

        golds = Golds.start(config, scenario)
        problems = ProblemLog()  # each shard's as one byte string: its objects go with the shard
        progress, total = progress_mod.current(), len(kept.shards)
        try:
            with work.Appender() as out:
                # in shard order, each result dropped once its steps are on disk
                for done, (steps, found) in enumerate(_gathered(submitted(), _in_flight(config)), start=1):
                    golds.add(out, steps)
                    problems += found
                    if progress:
                        progress("extract", done, total)
        except BaseException:
            work.remove_area(config.out_dir, golds.area)  # the build stops here: its files go with it
            raise
        finally:
            work.forget()
            work.remove_area(config.out_dir, kept.area)
    return golds, problems


def generate_questions(config: BuildConfig, scenario: Scenario, golds: Golds, timer: Timer) -> Posed:
    """Pose every gold step as a question, every task's shards at once, with one generator for the whole build.

    Each task's steps are read from their file a shard at a time, keyed and spilled: a shard task gets
    the path of its steps and reads them where it runs (on Dask, in the worker), so the flow holds
    paths and the pools, not the steps. The steps' files go with the stage.
    """
    spilled: list[Spilled] = []
    problems = ProblemLog()  # each shard's as one byte string: its objects go with the shard
    area = work.spill_area()
    with timer.stage("generate"):
        # One generator per build: LLM shards share its client pool, limiter, cache and ledger. Dask
        # workers are other processes, so there each shard makes its own from the config.
        generator = make_generator(config)
        shared = generator if config.limits.task_runner == "threads" else None
        generator_task = _cached(generate_shard, config)
        try:
            # Each shard is keyed, spilled and submitted in turn (the first requests go out while later
            # shards are keyed), a window ahead of the one awaited (`_in_flight`), across task
            # boundaries: every worker stays busy, and with it the generator's one request pool (a
            # re-ask at a task's end overlaps the next task's shards).
            submitted: deque[tuple[str, str]] = deque()  # task and key of each shard, in order

            def shards() -> Iterator[Any]:
                for name, spec in scenario.specs.items():
                    # the shards read the pool from its file (on Dask, each worker process once)
                    pool_key = cache_keys.pool_key(golds.pool(name))
                    pool_ref = str(golds.pools[name])
                    for i, shard in enumerate(
                        _batches(work.replay(golds.files[name]), config.limits.shard_size)
                    ):
                        key = cache_keys.generate_key(config, generator, shard, pool_key, spec.n_options)
                        ref = work.spill(config.out_dir, golds.area, f"shards-{name}", i, shard)
                        del shard
                        submitted.append((name, key))
                        yield generator_task.submit(config, ref, pool_ref, spec.n_options, shared, key)

            size = max(1, config.limits.shard_size)
            totals = {name: -(-golds.counts.get(name, 0) // size) for name in scenario.specs}
            refs: dict[str, list[str]] = {name: [] for name in scenario.specs}
            progress = progress_mod.current()
            # each shard's questions are spilled to `.work/` as it is gathered, its future dropped:
            # the flow holds paths, not the build's questions, until filtering takes them task by task
            for qs, ps in _gathered(shards(), _in_flight(config)):
                name, key = submitted.popleft()
                done = refs[name]
                done.append(work.spill(config.out_dir, area, f"questions-{name}", len(done), qs))
                del qs
                problems += ps
                if key and any(retry_next_run(p) for p in ps):
                    _forget_shard(config, key)  # a spent budget or a failed request: the next run retries
                if progress:
                    progress(f"generate {name}", len(done), totals[name])
            spilled.extend(Spilled(name, area, done) for name, done in refs.items())
        except BaseException:
            work.remove_area(config.out_dir, area)  # the build stops here: its spills go with it
            raise
        finally:
            work.remove_area(config.out_dir, golds.area)  # every shard is posed (or the build stops)
            work.forget()
            usage = generator.usage_report()
            generator.close()
    return Posed(spilled, problems, usage)


def _row_batches(questions: Iterable[Question], size: int = ROW_GROUP) -> Iterator[list[dict[str, Any]]]:
    """Rows of `questions` in lists of `size` (one empty list when there are none: the file still has
    its columns)."""
    rows: list[dict[str, Any]] = []
    sent = False
    for q in questions:
        rows.append(question_row(q))
        if len(rows) >= size:
            yield rows
            rows, sent = [], True
    if rows or not sent:
        yield rows


def _redacted(problems: ProblemLog, redactor: Redactor) -> ProblemLog:
    """`redact_problems` of every Problem: all learnt first (a value learnt anywhere is replaced
    everywhere), a batch at a time keeping a bool per Problem, not its texts; then redacted a batch
    at a time."""
    found: list[bool] = []
    for batch in problems.batches():
        found += redactor.learn_groups((p.where, p.detail) for p in batch)
        redactor.release()
    out = ProblemLog()
    at = 0
    for batch in problems.batches():
        out += redact_problems(batch, redactor, found[at : at + len(batch)])
        at += len(batch)
    return out


@task(name="write-candidates", cache_policy=NO_CACHE)
def write_candidates(
    scenario: str, task: str, questions: FinalQuestions, path: str
) -> tuple[int, list[dict[str, Any]]]:
    """Write one task's `candidates/<task>.parquet` from the final questions on disk, a row group at a
    time, where the task runs (on Dask a worker holds the group's rows and Arrow buffers, not the
    flow); returns the rows written and the task's `redactions.jsonl` rows (`hygiene.redaction_row`:
    the items that show placeholders, read in the same pass)."""
    _scenario_class(scenario)  # a Dask worker's first discovery registers the specs the rows follow
    shown: list[dict[str, Any]] = []

    def noting(qs: Iterable[Question]) -> Iterator[Question]:
        for q in qs:
            if (row := hygiene.redaction_row(q)) is not None:
                shown.append(row)
            yield q

    n = write_parquet_batches(
        Path(path), (rows_table(scenario, task, rows) for rows in _row_batches(noting(questions.of(task))))
    )
    return n, shown


@task(name="audit-candidates", cache_policy=NO_CACHE)
def audit_candidates(
    rows: CandidateRows,
    quality: QualityRules,
    adversarial: dict[str, AdversarialTask],
    seed: int,
    generate_seconds: float,
    adversarial_seconds: float,
) -> tuple[QualityReport, ValidityReport]:
    """The report's quality section (gates and baselines of every task) and validity section, from
    the written candidates, where the task runs: on Dask a worker holds the audit's blocks and the
    rows it reads, not the flow."""
    report = build_quality(rows, quality)
    release_memory()  # the audit's blocks and the rows it read are gone
    validity = validity_report(rows, report, adversarial, seed, generate_seconds, adversarial_seconds)
    return report, validity


@task(name="report-html", cache_policy=NO_CACHE)
def report_html(out_dir: str, report: BuildReport, rows: CandidateRows, steps_per_kept: list[int]) -> str:
    """`report.html` and its charts, drawn from the report and the written candidates where the task
    runs (on Dask a worker reads the rows and draws); returns the HTML's path."""
    return str(write_build_report(out_dir, report, rows, steps_per_kept))


def write_outputs(
    config: BuildConfig,
    scenario: Scenario,
    final: Final,
    problems: Iterable[Problem],
    redactor: Redactor,
    timer: Timer,
) -> Written:
    """Write `candidates/<task>.parquet`, `quarantine.jsonl` and `redactions.jsonl`; returns rows, Problems, redactions."""
    out = config.output_dir()
    with timer.stage("write"):
        counts = {}
        questions = final.questions  # a few paths and the gold positions, not the questions
        placeholders: list[dict[str, Any]] = []
        for name in scenario.tasks:  # one task's rows at a time, a batch of rows at a time
            path = str(out / "candidates" / f"{name}.parquet")
            counts[name], rows = work.run_task(write_candidates, config.scenario, name, questions, path)
            placeholders += rows
        final.questions.counts = counts
        problems = _redacted(ProblemLog(problems), redactor)  # reader errors may quote raw input
        write_jsonl(out / "quarantine.jsonl", (p.model_dump() for p in problems))
        shown = sorted(placeholders, key=lambda row: (row["task"], row["item_id"]))
        write_jsonl(out / "redactions.jsonl", shown)
    return Written(CandidateRows(out / "candidates", counts), problems, shown)
