"""The build report: what a build read, kept, dropped, asked, checked and enqueued, as one typed model.

`report.json` is `BuildReport.model_dump_json()`; build writes it, the CLI summary, the HTML report,
publish and audit read it back through `BuildReport.model_validate_json`. Parts are frozen: a stage that
adds to a report makes a new one (`model_copy(update=...)`), never edits one in place.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from schemas.base import Model
from schemas.validity import AdversarialReport, ValidityReport


class Counts(Model):
    """The build's funnel."""

    input_files: int
    skipped_entries: int = 0
    """Entries met while searching the inputs that were never opened (FIFOs, bad symlinks ...)."""
    trajectories_read: int
    kept: int
    """Successful trajectories of the scenario's kinds, after dedup."""
    dropped: int
    gold_steps: int
    questions: int
    """Candidate questions written."""
    quarantined: int
    """Problems of severity `error`."""
    needs_judge: int = 0
    """Runs whose answer the rules could not decide and no judge decided (dropped unless keep_unknown)."""


class SecretsReport(Model):
    """Redactions by kind (never values)."""

    found_by_kind: dict[str, int] = Field(default_factory=dict)
    redacted_in_trajectories: dict[str, int] = Field(default_factory=dict)
    redacted_in_questions: dict[str, int] = Field(default_factory=dict)
    trajectories_redacted: int = 0
    items_with_redactions: int = 0
    item_placeholders_by_kind: dict[str, int] = Field(default_factory=dict)


class DedupReport(Model):
    """Duplicates removed."""

    trajectories: int = 0
    """Runs read more than once (several files or formats)."""
    items_exact: int = 0
    items_near: int = 0


class SourceOverlap(Model):
    """Overlap of one task's items with one source (earlier releases or reference rows)."""

    rows: int = 0
    flagged: int = 0
    max_overlap: float = 0.0
    mean_overlap: float = 0.0


class TaskContamination(Model):
    """Overlap of one task's items."""

    checked: int = 0
    flagged: int = 0
    by_source: dict[str, SourceOverlap] = Field(default_factory=dict)


class ContaminationReport(Model):
    """Overlap with earlier releases and reference rows."""

    checked: bool = False
    ngram: int | None = None
    min_overlap: float | None = None
    drop: bool | None = None
    reference_rows: dict[str, int] = Field(default_factory=dict)
    flagged: int = 0
    dropped: int = 0
    by_task: dict[str, TaskContamination] = Field(default_factory=dict)


class TaskChange(Model):
    """Items of one task against the previous build (or release)."""

    added: int = 0
    removed: int = 0
    changed: int = 0
    unchanged: int = 0


class Enqueued(Model):
    """What enqueueing did to the review queue."""

    new: int = 0
    unchanged: int = 0
    requeued: int = 0
    restored: int = 0
    retired: int = 0


class Agreement(Model):
    """Inter-reviewer agreement of one task."""

    task: str
    items: int
    reviewers: int
    ratings: int
    percent_agreement: float | None = None
    cohen_kappa: float | None = None
    fleiss_kappa: float | None = None
    fleiss_items: int = 0
    krippendorff_alpha: float | None = None


class ReviewReport(Model):
    """The review queue after the build enqueued its questions."""

    enqueued: Enqueued = Enqueued()
    changelog: dict[str, TaskChange] = Field(default_factory=dict)
    queue: str = ""
    reviews_per_item: int = 1
    status_by_task: dict[str, dict[str, int]] = Field(default_factory=dict)
    agreement: dict[str, Agreement] = Field(default_factory=dict)
    rejection_reasons: dict[str, dict[str, int]] = Field(default_factory=dict)
    """Per task, how often each preset rejection reason was given."""


class Usage(Model):
    """Requests, tokens and cost of one (task, model), one model, or the whole build."""

    requests: int = 0
    cache_hits: int = 0
    retries: int = 0
    refusals: int = 0
    failures: int = 0
    no_distractors: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    cost_usd: float = 0.0


class LLMUsage(Model):
    """What the LLM generator spent."""

    budget_usd: float | None = None
    spent_usd: float = 0.0
    budget_exhausted: bool = False
    priced_models: list[str] = Field(default_factory=list)
    unpriced_models: list[str] = Field(default_factory=list)
    by_task: dict[str, dict[str, Usage]] = Field(default_factory=dict)
    by_model: dict[str, Usage] = Field(default_factory=dict)
    total: Usage = Usage()


class JudgeReport(Model):
    """What the LLM answer judge did with the runs the matching rules left `needs_judge`."""

    enabled: bool = False
    model: str | None = None
    """The configured judge model, when the config names one."""
    counts: dict[str, int] = Field(default_factory=dict)
    """`sent`, `correct`, `incorrect`, `unsure`, `failed` (empty when off)."""
    llm: LLMUsage | None = None
    """The judge's tokens and cost."""


class TaskQuality(BaseModel):
    """Gates and model-free baselines of one task, and whether it may be published.

    The baseline figures are present for MCQ tasks; quality modules may add figures of their own
    (extra keys are kept), so a new baseline needs no edit here.
    """

    model_config = ConfigDict(frozen=True, extra="allow", use_attribute_docstrings=True)

    task: str
    items: int
    forms: dict[str, int] = Field(default_factory=dict)
    flagged: bool = False
    """Some baseline exceeds its bound."""
    findings: dict[str, int] = Field(default_factory=dict)
    """Gate findings per reason."""
    why: str = ""
    """Which baselines exceed their bounds, readably."""
    override: str | None = None
    """The config's reason to publish the task although flagged."""
    publishable: bool = True
    n_items: int | None = None
    option_counts: dict[str, int] | None = None
    chance: float | None = None
    baselines: dict[str, float] | None = None
    """Accuracy per baseline (MCQ tasks)."""
    bounds: dict[str, float] | None = None
    exceeded: list[str] | None = None
    positions: dict[str, int] | None = None
    position_chi2: float | None = None
    position_dof: int | None = None
    position_p: float | None = None


class QualityReport(Model):
    """The quality section: per-task audits, flags and the tasks a publish refuses."""

    baselines: list[str] = Field(default_factory=list)
    """Names of the baselines run."""
    margin: float = 0.1
    min_items: int = 100
    tasks: dict[str, TaskQuality] = Field(default_factory=dict)
    flags: dict[str, str] = Field(default_factory=dict)
    """Flagged task -> why."""
    refused_tasks: list[str] = Field(default_factory=list)


class BuildReport(Model):
    """Everything a build reports (`<out_dir>/<scenario>/<version>/report.json`)."""

    scenario: str
    version: str
    config_hash: str
    generator: str
    seed: int
    output_dir: str
    counts: Counts
    labels: dict[str, int] = Field(default_factory=dict)
    label_signals: dict[str, int] = Field(default_factory=dict)
    formats: dict[str, int] = Field(default_factory=dict)
    dropped_by_reason: dict[str, int] = Field(default_factory=dict)
    questions_by_task: dict[str, int] = Field(default_factory=dict)
    problems_by_reason: dict[str, int] = Field(default_factory=dict)
    """`<stage>.<reason>` -> count."""
    quarantined_files: list[str] = Field(default_factory=list)
    timings_s: dict[str, float] = Field(default_factory=dict)
    judge: JudgeReport = JudgeReport()
    llm: LLMUsage | None = None
    """Tokens and cost (LLM generators only)."""
    secrets: SecretsReport = SecretsReport()
    dedup: DedupReport = DedupReport()
    contamination: ContaminationReport = ContaminationReport()
    review: ReviewReport = ReviewReport()
    changelog: dict[str, TaskChange] = Field(default_factory=dict)
    """Added / removed / changed items per task against the last build."""
    quality: QualityReport = QualityReport()
    adversarial: AdversarialReport = AdversarialReport()
    """Adversarial filtering: per task candidates scored, replaced, dropped, and its cost against generate."""
    validity: ValidityReport | None = None
    """Per MCQ task: every baseline with its bound, positions, lengths, distractor sources, sample items."""
    report_html: str = ""
    build_key: str = ""
    """Hash of config, component versions and inputs: an unchanged build reuses this report."""
    reused: bool = False
    """True when nothing changed and the previous report was reused."""
