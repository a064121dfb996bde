"""Build configuration: one pydantic model, validated from a small YAML file.

Relative paths in a config file are resolved against the file's own directory, so a config
works from any working directory. Paths given on the command line are taken as typed.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from schemas import TaskLimits, content_id


class _Config(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)


class SourceConfig(_Config):
    """One input: a file or a folder searched recursively."""

    path: str
    """File or directory of raw trajectories."""
    reader: str | None = None
    """Reader name to force; sniffed per record when omitted."""
    license: str | None = None
    """Licence of these raw trajectories (the dataset card names it for every source)."""


class ReportConfig(_Config):
    """One harness report (file or folder) and, optionally, the run it judges."""

    path: str
    """Report file, or a folder searched recursively."""
    run: str | None = None
    """The run it belongs to: the run's folder or its model name. When omitted the report is tied
    by its folder tree and name (`extractors.labels.runs`); an ambiguous one is an error."""


class TaskConfig(TaskLimits):
    """Knobs of one task: whether it is built, and the limits (`schemas.TaskLimits`) it sets over the
    defaults its scenario's TaskSpec declares (only the fields a config names override them)."""

    enabled: bool = True
    """Build this task."""


class PriceConfig(_Config):
    """A model's price in USD per million tokens (check the provider's current price list)."""

    input: float = Field(ge=0)
    """USD per million prompt tokens."""
    output: float = Field(ge=0)
    """USD per million completion tokens."""


class GeneratorConfig(_Config):
    """Which distractor generator, and its settings (the LLM ones apply to `openai`, `anthropic`,
    `openai-compatible`; API keys never live here: only `OPENAI_API_KEY` / `ANTHROPIC_API_KEY`)."""

    name: str = "offline"
    """`offline` (default, no network), `openai`, `anthropic` or `openai-compatible`."""
    near_duplicate: float = Field(0.85, gt=0, le=1)
    """Distractors at least this similar to the gold (or to each other) are refused."""
    model: str | None = None
    """LLM model id; else env `APTFORGE_OPENAI_MODEL` / `APTFORGE_ANTHROPIC_MODEL` /
    `APTFORGE_OPENAI_COMPATIBLE_MODEL`, else the generator's default (openai-compatible: the server's first model)."""
    base_url: str | None = None
    """API base URL; else env `OPENAI_BASE_URL` / `ANTHROPIC_BASE_URL`, else the provider's."""
    max_concurrency: int = Field(16, ge=1)
    """LLM requests in flight at once (per provider, across all shards)."""
    rpm: int | None = Field(None, ge=1)
    """Requests per minute (none: unlimited)."""
    tpm: int | None = Field(None, ge=1)
    """Tokens per minute, prompt estimate plus output limit (none: unlimited)."""
    temperature: float | None = Field(None, ge=0, le=2)
    """Sampling temperature (none: the provider's default; reasoning models accept no other)."""
    max_output_tokens: int = Field(1024, ge=16)
    """Output token limit per request (doubled on the retry after a cut reply)."""
    max_context_chars: int = Field(24000, ge=1000)
    """Trajectory characters a distractor prompt may carry (the middle is cut beyond)."""
    structured_output: str = Field("auto", pattern=r"^(auto|json_schema|tool|json_object|none)$")
    """`auto` (OpenAI: strict json_schema; Anthropic: forced tool), `json_schema`, `tool`, `json_object`, `none`."""
    timeout_s: float = Field(120.0, gt=0)
    """Per-request timeout of the SDK client."""
    max_retries: int = Field(4, ge=0)
    """SDK retries of 408/409/429/5xx and connection errors (honouring Retry-After)."""
    prices: dict[str, PriceConfig] = Field(default_factory=dict)
    """Model id -> price; models without one are reported as unpriced (cost 0)."""
    budget_usd: float | None = Field(None, ge=0)
    """Spend cap of one build; items beyond it end as `no_distractors` Problems."""
    cache_path: str | None = None
    """SQLite response cache (and batch ids); default `<out_dir>/llm_cache.sqlite`."""
    batch: bool = False
    """Use the provider's batch API (half price, hours of latency; resumable across runs)."""
    batch_poll_s: float = Field(30.0, gt=0)
    """Seconds between batch status polls."""
    batch_max_wait_s: float = Field(86400.0, gt=0)
    """Longest a build waits for a batch; later its items are `batch_pending` and the next run collects."""
    batch_price_factor: float = Field(0.5, ge=0, le=1)
    """Batch price as a share of the online price."""
    prompt_versions: dict[str, int] = Field(default_factory=dict)
    """Pin prompt files: `"<scenario>.<task>": version` (default: the highest version)."""

    def cache_file(self, out_dir: str) -> Path:
        """The response cache: `cache_path`, or `<out_dir>/llm_cache.sqlite`."""
        return Path(self.cache_path) if self.cache_path else Path(out_dir) / "llm_cache.sqlite"


class JudgeConfig(_Config):
    """The LLM answer judge for deep-research runs the matching rules leave `needs_judge` (off by default).

    With `generator` unset the offline default leaves those runs `unknown` and the report counts them;
    set, only those runs are sent (rule-decided ones never), through the same cache, limiter, ledger
    and budget as LLM distractors (`generators.llm.judge`). API keys come only from the environment.
    """

    generator: str | None = None
    """`openai`, `anthropic` or `openai-compatible`; none: the judge is off."""
    model: str | None = None
    """Model id; else the generator's env model, else `gpt-4.1-mini` / `claude-haiku-4-5` (compatible: the server's first)."""
    base_url: str | None = None
    """API base URL; else env `OPENAI_BASE_URL` / `ANTHROPIC_BASE_URL`."""
    max_concurrency: int = Field(8, ge=1)
    """Judge requests in flight at once."""
    rpm: int | None = Field(None, ge=1)
    """Requests per minute (none: unlimited)."""
    tpm: int | None = Field(None, ge=1)
    """Tokens per minute (none: unlimited)."""
    max_output_tokens: int = Field(256, ge=16)
    """Output limit of one verdict."""
    timeout_s: float = Field(120.0, gt=0)
    """Per-request timeout of the SDK client."""
    max_retries: int = Field(4, ge=0)
    """SDK retries of 408/409/429/5xx and connection errors."""
    prices: dict[str, PriceConfig] = Field(default_factory=dict)
    """Model id -> price."""
    budget_usd: float | None = Field(None, ge=0)
    """Spend cap of the judge in one build; runs beyond it stay `unknown` (`judge_failed`)."""
    cache_path: str | None = None
    """Response cache; default `<out_dir>/llm_cache.sqlite` (shared with LLM distractors)."""
    batch: bool = False
    """Use the provider's batch API."""
    prompt_version: int | None = None
    """Pin `judge.answer.v<N>.md.j2` (default: the highest version)."""

    def as_generator(self) -> GeneratorConfig:
        """The LLM settings in the shape the shared client wiring reads."""
        return GeneratorConfig(
            name=self.generator or "offline",
            model=self.model,
            base_url=self.base_url,
            max_concurrency=self.max_concurrency,
            rpm=self.rpm,
            tpm=self.tpm,
            max_output_tokens=self.max_output_tokens,
            timeout_s=self.timeout_s,
            max_retries=self.max_retries,
            prices=self.prices,
            budget_usd=self.budget_usd,
            cache_path=self.cache_path,
            batch=self.batch,
            prompt_versions={"judge.answer": self.prompt_version} if self.prompt_version else {},
        )


class Limits(_Config):
    """Sizes that shape the run."""

    shard_size: int = Field(200, ge=1)
    """Input files per read shard / gold steps per generate shard."""
    max_workers: int = Field(4, ge=1)
    """Concurrent task workers (thread pool size)."""
    task_runner: Literal["threads", "dask"] = "threads"
    """Where shard tasks run: a thread pool (default) or Dask (`prefect-dask`)."""
    dask_address: str | None = None
    """An existing Dask scheduler (`tcp://host:8786`); without one a LocalCluster is started."""
    dask_workers: int = Field(2, ge=1)
    """Worker processes of the LocalCluster."""
    cache: bool = True
    """Cache shard results under `<out_dir>/.cache` with explicit keys, so reruns and resumed runs skip done work."""


class ScheduleConfig(_Config):
    """When `aptforge serve` rebuilds this benchmark."""

    cron: str | None = None
    """Cron expression (e.g. `0 3 * * 1`); takes precedence over `interval_seconds`."""
    interval_seconds: float | None = Field(None, gt=0)
    """Fixed interval between runs, when no cron is given."""
    timezone: str = "UTC"
    """Time zone of the cron expression."""
    enabled: bool = True
    """Serve this schedule."""

    @model_validator(mode="after")
    def _one_of(self) -> ScheduleConfig:
        if not self.cron and not self.interval_seconds:
            raise ValueError("a schedule needs `cron` or `interval_seconds`")
        return self


class PublishConfig(_Config):
    """Where and how a release is published."""

    repo_id: str | None = None
    """Hub dataset repo (`org/name`); without one, publish writes the release folder only."""
    private: bool = True
    """Create the Hub repo private."""
    license: str = "apache-2.0"
    """License in the dataset card."""


class ReviewConfig(_Config):
    """The human review queue the build fills (see `annotations/`)."""

    queue: str | None = None
    """SQLite queue file; default `<out_dir>/<scenario>/queue.sqlite` (shared by versions, so verdicts carry over)."""
    reviews_per_item: int = Field(1, ge=1)
    """Reviews of its current content an item needs; the majority decides (2+ gives agreement figures)."""
    lease_minutes: float = Field(15, gt=0, le=24 * 60)
    """How long an item handed to a reviewer (`next`, or opening it) stays reserved for them."""
    adjudicators: list[str] = Field(default_factory=list)
    """Reviewer names who settle disputes (beside `:adjudicator` roles in `APTFORGE_REVIEW_TOKENS`)."""
    allowed_hosts: list[str] = Field(default_factory=list)
    """Host names the app answers beside loopback when tokens are set (e.g. `review.example.org`)."""
    guidelines: dict[str, str] = Field(default_factory=dict)
    """Task -> reviewer guidelines (markdown), shown on the item page; overrides the scenario's own."""


class QualityConfig(_Config):
    """Model-free baseline bounds per task, and the reasons to publish a flagged task anyway."""

    margin: float = Field(0.10, ge=0, le=1)
    """Accuracy a baseline may reach above chance (0.10 = 10 points) once a task has `min_items`."""
    min_items: int = Field(100, ge=1)
    """Below this many items the margin widens to `z` standard errors of chance accuracy."""
    z: float = Field(2.326, ge=0)
    """Standard errors of chance accuracy allowed on small tasks (2.326: one-sided 99%)."""
    bounds: dict[str, dict[str, float]] = Field(default_factory=dict)
    """Explicit bounds: task -> baseline (`longest`, `shortest`, `central`, `position`, `no_context`) -> max accuracy."""
    overrides: dict[str, str] = Field(default_factory=dict)
    """Task -> reason: publish this task even when a baseline exceeds its bound."""
    block_items: int = Field(1000, ge=50)
    """A task of more items is audited in seeded blocks of about this many: the learned and n-gram
    rules are fitted within a block (memory bounded by a block, not by the task); accuracies are over
    the whole task."""

    @field_validator("bounds")
    @classmethod
    def _baseline_names(cls, bounds: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
        from generators.quality.baselines import BASELINES

        for task, per in bounds.items():
            for name, value in per.items():
                if name not in BASELINES:
                    raise ValueError(
                        f"task {task!r}: unknown baseline {name!r}; known: {', '.join(BASELINES)}"
                    )
                if not 0 <= value <= 1:
                    raise ValueError(f"task {task!r}: bound of {name!r} must be an accuracy in [0, 1]")
        return bounds

    @field_validator("overrides")
    @classmethod
    def _reasons(cls, overrides: dict[str, str]) -> dict[str, str]:
        for task, reason in overrides.items():
            if not reason.strip():
                raise ValueError(f"task {task!r}: an override needs a reason")
        return overrides


class AdversarialConfig(_Config):
    """Adversarial filtering (generators/quality/adversarial.py): distractors the baselines cannot separate."""

    enabled: bool = True
    """Swap distractors for reserve candidates after generate (a generator without reserve is left as is)."""
    rounds: int = Field(3, ge=0, le=20)
    """Refit-and-replace rounds."""
    folds: int = Field(3, ge=2, le=20)
    """Cross-fitting folds of the learned scorers in the filter's rounds (the audit keeps its five)."""
    slack: float = Field(0.05, ge=0, le=1)
    """A rule counts as solving a task while its accuracy is above chance + slack."""
    drop: bool = True
    """Drop items a rule still solves when it ends over its bound (`adversarial.too_easy` problems)."""
    max_drop: float = Field(0.3, ge=0, le=0.9)
    """At most this share of a task is dropped so; a task the reserve cannot fix beyond it stays flagged
    (publish refuses it) rather than shrinking without a limit. AFLite drops more: raise it for a
    source whose candidates a learned rule still separates after the rounds."""
    block_items: int = Field(1000, ge=50)
    """A task of more items is filtered in seeded blocks of about this many, each on its own (memory
    bounded by a block, time linear in the task)."""


class PrivacyConfig(_Config):
    """What is redacted besides credentials (secrets are always redacted; see generators/hygiene/secrets.py)."""

    redact_emails: bool = False
    """Also redact e-mail addresses as `<REDACTED:email>`."""
    redact_phones: bool = False
    """Also redact phone numbers as `<REDACTED:phone>`."""
    detect_secrets: bool = True
    """Run the detect-secrets plugins beside aptforge's own patterns."""


class DedupConfig(_Config):
    """Near-duplicate items within a version (exact duplicates and copied runs are always dropped)."""

    near_duplicate_threshold: float = Field(0.9, gt=0, le=1)
    """Context MinHash Jaccard (and answer similarity) at which an item duplicates another."""
    num_perm: int = Field(128, ge=16, le=1024)
    """MinHash permutations."""


class ContaminationConfig(_Config):
    """N-gram overlap of new items with earlier releases and reference corpora."""

    reference: list[str] = Field(default_factory=list)
    """Reference rows (JSONL / Parquet files or folders), e.g. APTBench's `input_data.jsonl` files."""
    previous_versions: list[str] = Field(default_factory=list)
    """Folders (or files) of earlier published versions' rows."""
    ngram: int = Field(13, ge=1, le=64)
    """Word n-gram length."""
    min_overlap: float = Field(0.5, gt=0, le=1)
    """Share of an item's n-grams found in a source at which the item is flagged."""
    boilerplate_share: float = Field(0.5, gt=0, le=1)
    """N-grams in at least this share of a task's trajectories (system prompts) are not counted."""
    drop: bool = False
    """Drop flagged items (default: report them only)."""


class BuildConfig(_Config):
    """Everything a build needs; the Prefect flow's single parameter."""

    scenario: str
    """Extractor name (`swe_issue_fix`, ...)."""
    version: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
    """Benchmark version; names the output folder."""
    description: str = ""
    """Free text for reports and the dataset card."""
    sources: list[SourceConfig] = Field(min_length=1)
    """Raw trajectory inputs."""
    reports: list[ReportConfig] = Field(default_factory=list)
    """SWE-bench harness reports deciding success (a bare string is a path), each tied to one run."""
    tasks: dict[str, TaskConfig] = Field(min_length=1)
    """Tasks to build, by name."""
    generator: GeneratorConfig = GeneratorConfig()
    """Distractor generator."""
    judge: JudgeConfig = JudgeConfig()
    """LLM answer judge for `needs_judge` deep-research runs (off by default)."""
    seed: int = 0
    """Seed of every random choice in the build."""
    keep_unknown: bool = False
    """Keep runs without a verdict (default: dropped with reason `no_verdict`)."""
    out_dir: str = "out"
    """Output root; the build writes `<out_dir>/<scenario>/<version>/`."""
    limits: Limits = Limits()
    """Sharding and concurrency."""
    publish: PublishConfig = PublishConfig()
    """Release settings."""
    schedule: ScheduleConfig | None = None
    """Rebuild schedule served by `aptforge serve` (none: not scheduled)."""
    quality: QualityConfig = QualityConfig()
    """Baseline bounds and overrides (a flagged task is refused at publish unless overridden)."""
    adversarial: AdversarialConfig = AdversarialConfig()
    """Adversarial filtering of distractors the baselines can separate from the gold."""
    review: ReviewConfig = ReviewConfig()
    """Human review queue."""
    privacy: PrivacyConfig = PrivacyConfig()
    """Secret and personal-data redaction."""
    dedup: DedupConfig = DedupConfig()
    """Duplicate items and runs."""
    contamination: ContaminationConfig = ContaminationConfig()
    """Overlap with earlier releases and reference corpora."""

    @field_validator("reports", mode="before")
    @classmethod
    def _report_paths(cls, reports: Any) -> Any:
        return (
            [{"path": r} if isinstance(r, str) else r for r in reports]
            if isinstance(reports, list)
            else reports
        )

    def report_paths(self) -> list[str]:
        """The report files and folders, without their runs."""
        return [r.path for r in self.reports]

    def report_entries(self) -> list[tuple[str, str | None]]:
        """(path, run) of every configured report, for `load_reports`."""
        return [(r.path, r.run) for r in self.reports]

    @field_validator("tasks")
    @classmethod
    def _task_names(cls, tasks: dict[str, TaskConfig]) -> dict[str, TaskConfig]:
        for name in tasks:
            if not name.isidentifier():
                raise ValueError(f"task name {name!r} is not a plain identifier")
        return tasks

    def output_dir(self) -> Path:
        """`<out_dir>/<scenario>/<version>`."""
        return Path(self.out_dir) / self.scenario / self.version

    def queue_path(self) -> Path:
        """The review queue file: `review.queue`, or `<out_dir>/<scenario>/queue.sqlite`."""
        return (
            Path(self.review.queue)
            if self.review.queue
            else Path(self.out_dir) / self.scenario / "queue.sqlite"
        )

    def fingerprint(self) -> str:
        """Hash of the whole config (goes into report and manifest)."""
        return content_id(self.model_dump(mode="json"))


class ConfigError(ValueError):
    """A config that cannot be used; the message names the file and field."""


_LEADING_VAR = re.compile(r"\$(?:(\w+)|\{(\w+)\})")


def _resolve(base: Path, value: str) -> str:
    """A config path made absolute: from the config's folder, except a path that begins with a set
    variable (`$APTFORGE_SHARED/...` in configs/real/), whose relative value (CI's `../shared`)
    names a folder from where the command runs, as it would in a shell."""
    path = Path(os.path.expandvars(value)).expanduser()
    if path.is_absolute():
        return str(path)
    head = _LEADING_VAR.match(value)
    from_cwd = head is not None and (head.group(1) or head.group(2)) in os.environ
    return str(path.resolve() if from_cwd else (base / path).resolve())


def _resolve_source(base: Path, source: Any) -> Any:
    if isinstance(source, str):
        return {"path": _resolve(base, source)}
    if isinstance(source, dict) and isinstance(source.get("path"), str):
        return {**source, "path": _resolve(base, source["path"])}
    return source  # left for validation to refuse


def _report(base: Path, entry: Any) -> Any:
    """A report entry with its path resolved; `run` too when it names a folder that exists."""
    if isinstance(entry, str):
        return {"path": _resolve(base, entry)}
    if isinstance(entry, dict) and isinstance(entry.get("path"), str):
        out = {**entry, "path": _resolve(base, entry["path"])}
        run = entry.get("run")
        if isinstance(run, str) and not Path(run).is_absolute() and (base / run).exists():
            out["run"] = _resolve(base, run)
        return out
    return entry  # left for validation to refuse


def load_config(path: str | Path, **overrides: Any) -> BuildConfig:
    """Read, resolve and validate a YAML config; `overrides` (CLI flags) win.

    Raises:
        ConfigError: unreadable YAML or a field that fails validation (named in the message).
    """
    path = Path(path)
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read config: {exc.strerror or exc}") from exc
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: invalid YAML: {exc}") from exc
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: a config must be a mapping of fields, got {type(raw).__name__}")
    base = path.parent.resolve()
    # only lists are normalised: a string where a list belongs stays a string, so validation refuses it
    # (iterating it would make every character a path, `/` the whole filesystem)
    if isinstance(raw.get("sources"), list):
        raw["sources"] = [_resolve_source(base, s) for s in raw["sources"]]
    if isinstance(raw.get("reports"), list):
        raw["reports"] = [_report(base, r) for r in raw["reports"]]
    elif raw.get("reports") is None:
        raw.pop("reports", None)
    if isinstance(raw.get("out_dir"), str):
        raw["out_dir"] = _resolve(base, raw["out_dir"])
    if isinstance(raw.get("review"), dict) and isinstance(raw["review"].get("queue"), str):
        raw["review"]["queue"] = _resolve(base, raw["review"]["queue"])
    if isinstance(raw.get("generator"), dict) and isinstance(raw["generator"].get("cache_path"), str):
        raw["generator"]["cache_path"] = _resolve(base, raw["generator"]["cache_path"])
    contamination = raw.get("contamination")
    for key in ("reference", "previous_versions"):
        if isinstance(contamination, dict) and isinstance(contamination.get(key), list):
            contamination[key] = [_resolve(base, p) if isinstance(p, str) else p for p in contamination[key]]
    for key, value in overrides.items():
        if value is None:
            continue
        if key == "inputs":
            raw["sources"] = [{"path": str(Path(p).resolve())} for p in value]
        elif key == "reports":
            raw["reports"] = [{"path": str(Path(p).resolve())} for p in value]
        elif key == "out_dir":
            raw["out_dir"] = str(Path(value).resolve())
        elif key == "generator":
            gen = raw.get("generator") if isinstance(raw.get("generator"), dict) else {}
            raw["generator"] = {**gen, "name": value}
        else:
            raw[key] = value
    try:
        config = BuildConfig.model_validate(raw)
    except ValidationError as exc:
        lines = []
        for err in exc.errors():
            loc = ".".join(str(p) for p in err["loc"]) or "(top level)"
            got = f" (got {type(err['input']).__name__})" if err["type"] in _TYPE_ERRORS else ""
            lines.append(f"{path}: field `{loc}`: {err['msg']}{got}")
        raise ConfigError("\n".join(lines)) from exc
    return config


_TYPE_ERRORS = frozenset({"list_type", "dict_type", "model_type", "string_type", "int_type", "bool_type"})


def check_components(config: BuildConfig, origin: str | Path) -> None:
    """Check what validation alone cannot, before any stage runs: every named component exists
    (scenario, tasks, generator, forced readers), every source and report path exists, and an LLM
    generator has its key or endpoint in the environment.

    Raises:
        ConfigError: one line per problem, each naming the file and field.
    """
    from extractors.discovery import UnknownComponent, discover_extractors, discover_readers, lookup
    from flows.settings import LLM_GENERATORS, generator_problem

    problems: list[str] = []
    try:
        extractor = lookup(discover_extractors(), config.scenario, "scenario")
    except UnknownComponent as exc:
        extractor = None
        problems.append(f"field `scenario`: {exc.args[0]}")
    if extractor is not None:
        for name in config.tasks:
            if name not in extractor.tasks:
                problems.append(
                    f"field `tasks.{name}`: scenario {config.scenario} has no task {name!r}; "
                    f"it has {', '.join(extractor.tasks)}"
                )
    generators = ("offline", *LLM_GENERATORS)
    if config.generator.name not in generators:
        problems.append(
            f"field `generator.name`: unknown generator {config.generator.name!r}; "
            f"available: {', '.join(generators)}"
        )
    elif config.generator.name != "offline" and (why := generator_problem(config)):
        problems.append(f"field `generator.name`: {why}")
    readers = discover_readers()
    for i, src in enumerate(config.sources):
        if not Path(src.path).exists():
            problems.append(f"field `sources.{i}.path`: no such file or folder: {src.path}")
        if src.reader is not None:
            try:
                lookup(readers, src.reader, "reader")
            except UnknownComponent as exc:
                problems.append(f"field `sources.{i}.reader`: {exc.args[0]}")
    for i, report in enumerate(config.report_paths()):
        if not Path(report).exists():
            problems.append(f"field `reports.{i}`: no such file or folder: {report}")
    if problems:
        raise ConfigError("\n".join(f"{origin}: {p}" for p in problems))
