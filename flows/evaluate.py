"""`aptforge eval`: score a base model on a release through any OpenAI-compatible completions endpoint.

Why: a builder must see whether a new version still separates weak from strong models without
taking the release to other code. The release (a folder, or a Hub dataset repo at a tag fetched
with `huggingface_hub`) is read as published: `data/<config>/test-*.parquet` are the items,
`data/<config>/fewshot-*.parquet` the held-aside split the demos come from (never a test item), both
in the release's order. Each task's protocol is the one its scenario declares
(`extractors/<scenario>/aptbench_prompts.yaml`, the same the release's lm-eval tasks are built
from; `flows.eval_prompts`). Two protocols:

- `aptbench`: APTBench's few-shot prompt, greedy generation (`temperature 0`, the declared output
  budget, stopped at the demo delimiter), its answer extraction and metrics (ACC for MCQ as the exact
  match of the letter, EM and ROUGE-L for completions);
- `loglik`: for an MCQ, the log-likelihood of each option letter with its closer (`A)`) after the
  same prompt (`acc`, as `lm_eval/<config>_loglik.yaml`) and of each option text after the cue line,
  normalised by its length (`acc_norm`, as `<config>_loglik_options.yaml`); for a completion, the
  gold continuation's log-likelihood, right when it is the greedy one (`acc`). All are read from the
  prompt's own log-probabilities (`echo: true`, `logprobs: 1`, `max_tokens: 1`; the generated token
  is ignored), as lm-eval's `local-completions` does.

Every request goes through the LLM layer (`generators.llm.engine.LLMEngine`: concurrency limit, SDK
retries, SQLite cache keyed by endpoint and body), so a rerun, or a run resumed after a kill,
sends only what never completed. Outputs, written atomically into `--out`: `predictions.parquet`
(one row per item), `scorecard.json` and `scorecard.html` (+ `charts/scores.png`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Literal, NamedTuple

import pyarrow as pa
import pyarrow.parquet as pq
from prefect import flow
from pydantic import BaseModel, ConfigDict, Field

from extractors.discovery import discover_extractors
from flows.eval_prompts import SHOTS, build_prompt
from flows.eval_scoring import PREDICTION_SCHEMA, continuation_logprob, item_units, score_item
from flows.io import write_json, write_parquet
from schemas import AptbenchPrompt, task_spec

Protocol = Literal["aptbench", "loglik"]


class EvalConfig(BaseModel):
    """What one `aptforge eval` run scores, against what, and where its outputs go."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    release: str
    """Release folder, or Hub dataset repo id (`owner/name`, optionally `@revision`)."""
    endpoint: str
    """OpenAI-compatible base URL (`http://127.0.0.1:8000/v1`)."""
    model: str
    """Model name the endpoint serves."""
    protocol: Protocol = "aptbench"
    tasks: tuple[str, ...] = ()
    """Release configs to score (default: all)."""
    limit: int | None = None
    """Score at most this many items per task (the first by item id)."""
    out_dir: str = "out/eval"
    shots: int = SHOTS
    """Few-shot demos per prompt (from the release's `fewshot` split)."""
    max_tokens: int | None = None
    """Output budget of a generation (default: the task's declared `max_gen_toks`)."""
    max_concurrency: int = Field(8, ge=1)
    timeout_s: float = 600.0
    max_retries: int = 3
    seed: int = 0
    """Seed of the bootstrap resampling."""
    cache_path: str | None = None
    """Response cache (default `<out_dir>/llm_cache.sqlite`)."""


class Release(NamedTuple):
    """A release on disk and what identifies it."""

    folder: Path
    source: str
    """What the user named (folder or `repo@revision`)."""
    manifest_sha256: str
    name: str
    version: str


class EvalTask(NamedTuple):
    """One config of a release, ready to score."""

    name: str
    form: str
    prompt: AptbenchPrompt
    """The protocol the task's scenario declares."""
    rows: list[dict[str, Any]]
    demos: list[dict[str, Any]]
    """Few-shot examples (rows of the `fewshot` split)."""


def open_release(source: str, revision: str | None = None, cache_dir: Path | None = None) -> Release:
    """A release folder, fetched from the Hub (`HF_ENDPOINT`, `HF_TOKEN`) when `source` is not a folder.

    Raises:
        FileNotFoundError: neither a release folder nor a fetchable repo.
    """
    folder = Path(source)
    if not folder.is_dir():
        from flows.hub import hub_api

        repo_id, _, at = source.partition("@")
        api = hub_api(None)  # type: ignore[arg-type]  # no token given: huggingface_hub reads HF_TOKEN itself
        folder = Path(
            api.snapshot_download(
                repo_id, repo_type="dataset", revision=revision or at or None, cache_dir=cache_dir
            )
        )
    manifest = folder / "manifest.json"
    if not manifest.is_file():
        raise FileNotFoundError(f"{source}: not an aptforge release (no manifest.json)")
    blob = manifest.read_bytes()
    meta = json.loads(blob)
    return Release(
        folder,
        source,
        hashlib.sha256(blob).hexdigest(),
        str(meta.get("name", "")),
        str(meta.get("version", "")),
    )


def release_configs(folder: Path) -> list[str]:
    """Configs that have a test split."""
    return sorted(p.name for p in (folder / "data").iterdir() if p.is_dir() and any(p.glob("test-*.parquet")))


def read_split(folder: Path, config: str, split: str) -> list[dict[str, Any]]:
    """Rows of one split in the release's order (lm-eval's `limit` and `first_n` read the same order)."""
    rows: list[dict[str, Any]] = []
    for path in sorted((folder / "data" / config).glob(f"{split}-*.parquet")):
        rows += pq.read_table(path).to_pylist()
    return rows


def task_prompt(config: str, row: Mapping[str, Any]) -> AptbenchPrompt:
    """The APTBench protocol the row's TaskSpec declares for this config's task file.

    Raises:
        ValueError: the spec declares none for it.
    """
    spec = task_spec(row["scenario"], row["task"])
    folder = config[len(spec.dataset) + 1 :] if config.startswith(f"{spec.dataset}_") else spec.task
    if folder not in spec.aptbench:
        raise ValueError(f"{row['scenario']} declares no APTBench prompt for {folder} (config {config})")
    return spec.aptbench[folder]


def load_task(folder: Path, config: str, shots: int, limit: int | None) -> EvalTask:
    """Items and demos of one config.

    Raises:
        ValueError: the config has no test rows.
    """
    rows = read_split(folder, config, "test")
    if not rows:
        raise ValueError(f"{folder}: config {config} has no test rows")
    discover_extractors()  # registers the scenarios' TaskSpecs (row layout, APTBench protocol)
    spec = task_spec(rows[0]["scenario"], rows[0]["task"])
    test_ids = {r["item_id"] for r in rows}
    fewshot = [r for r in read_split(folder, config, "fewshot") if r["item_id"] not in test_ids]
    return EvalTask(
        config, spec.form, task_prompt(config, rows[0]), rows[:limit] if limit else rows, fewshot[:shots]
    )


def _engine(cfg: EvalConfig, api_key: str) -> Any:
    import openai

    from generators.llm.completions import OpenAICompletions
    from generators.llm.engine import Limiter, LLMEngine
    from generators.llm.ledger import Ledger
    from generators.llm.store import ResponseStore

    store = ResponseStore(cfg.cache_path or Path(cfg.out_dir) / "llm_cache.sqlite")
    client = OpenAICompletions(
        openai.AsyncOpenAI(
            api_key=api_key, base_url=cfg.endpoint, timeout=cfg.timeout_s, max_retries=cfg.max_retries
        )
    )
    engine = LLMEngine(client, store, Ledger({}), Limiter(cfg.max_concurrency), secrets=[api_key])
    return engine, store


class TaskRun(NamedTuple):
    """What scoring one task produced."""

    rows: list[dict[str, Any]]
    sent: int
    cached: int


def run_task(
    task: EvalTask, cfg: EvalConfig, engine: Any, progress: Callable[[int], None] | None = None
) -> TaskRun:
    """Score every item of a task (requests in chunks, so progress moves and memory stays bounded)."""
    from generators.llm.engine import Job, make_request

    provider = f"openai-completions@{cfg.endpoint.rstrip('/')}"
    prompts = [build_prompt(task.prompt, task.demos, row) for row in task.rows]
    rows: list[dict[str, Any]] = []
    sent = cached = 0
    chunk = max(1, cfg.max_concurrency * 4)
    for start in range(0, len(task.rows), chunk):
        batch = range(start, min(len(task.rows), start + chunk))
        units = {i: item_units(task, i, prompts[i], cfg) for i in batch}
        jobs = [
            Job(
                f"{task.name}/{task.rows[i]['item_id']}/{u.kind}{u.option}",
                task.name,
                (lambda _a, _f, body=u.body: make_request(provider, body)),
                u.check,
                truncation_ok=True,
            )
            for i in batch
            for u in units[i]
        ]
        outcomes = iter(engine.run(jobs))
        for i in batch:
            got = [next(outcomes) for _ in units[i]]
            sent += sum(o.attempts - o.cached for o in got)
            cached += sum(o.cached for o in got)
            rows.append(
                score_item(
                    task,
                    i,
                    prompts[i],
                    units[i],
                    [o.value for o in got],
                    [f"{o.reason}: {o.detail}" if o.reason else "" for o in got],
                )
            )
        if progress is not None:
            progress(len(batch))
    return TaskRun(rows, sent, cached)


def evaluate(
    cfg: EvalConfig, api_key: str = "", progress: Callable[[str, int, int], None] | None = None
) -> dict[str, Any]:
    """Score the release; write predictions, scorecard JSON and HTML; return the scorecard."""
    from flows.scorecard import scorecard, write_scorecard_html

    release = open_release(cfg.release, cache_dir=Path(cfg.out_dir) / "releases")
    names = list(cfg.tasks) or release_configs(release.folder)
    unknown = sorted(set(names) - set(release_configs(release.folder)))
    if unknown:
        raise ValueError(
            f"unknown task(s) {', '.join(unknown)}; the release has {', '.join(release_configs(release.folder))}"
        )
    tasks = [load_task(release.folder, n, cfg.shots, cfg.limit) for n in names]
    engine, store = _engine(cfg, api_key or "not-needed")
    runs: dict[str, TaskRun] = {}
    try:
        for task in tasks:
            done = 0

            def step(n: int, task: EvalTask = task) -> None:
                nonlocal done
                done += n
                if progress is not None:
                    progress(task.name, done, len(task.rows))

            runs[task.name] = run_task(task, cfg, engine, step)
    finally:
        engine.close()
        store.close()
    out = Path(cfg.out_dir)
    rows = [r for run in runs.values() for r in run.rows]
    write_parquet(out / "predictions.parquet", pa.Table.from_pylist(rows, schema=PREDICTION_SCHEMA))
    card = scorecard(cfg, release, tasks, runs)
    write_json(out / "scorecard.json", card)
    write_scorecard_html(out, card)
    return card


@flow(name="eval-benchmark", log_prints=False)
def eval_flow(cfg: EvalConfig) -> dict[str, Any]:
    """`evaluate` as a Prefect flow; the key comes from `OPENAI_API_KEY` (optional for local servers)."""
    from flows import progress
    from flows.settings import load_settings

    settings = load_settings()
    key = settings.openai_api_key.get_secret_value() if settings.openai_api_key else ""
    return evaluate(cfg, key, progress.current())


def eval_benchmark(
    cfg: EvalConfig, progress: Callable[[str, int, int], None] | None = None
) -> dict[str, Any]:
    """Run the `eval-benchmark` flow with a progress callback (the CLI's entry; tests call `evaluate`)."""
    from flows.progress import reporting

    with reporting(progress):
        return eval_flow(cfg)


__all__ = [
    "PREDICTION_SCHEMA",
    "EvalConfig",
    "EvalTask",
    "Release",
    "continuation_logprob",
    "eval_benchmark",
    "eval_flow",
    "evaluate",
    "load_task",
    "open_release",
    "release_configs",
    "run_task",
    "score_item",
]
