"""The validity section of a build report (issue 22): can a cheap rule answer a task's items?

One `TaskValidity` per MCQ task: every baseline against its bound, the gold-position histogram
with its chi-square test, gold vs distractor option lengths, where the distractors came from
(`CANDIDATE_SOURCES`), what adversarial filtering did, and a few items rendered for a quick read.
"""

from __future__ import annotations

from pydantic import Field

from schemas.base import Model


class BaselineBound(Model):
    """One baseline of one task."""

    name: str
    accuracy: float
    bound: float
    passed: bool
    """accuracy <= bound."""


class PositionHistogram(Model):
    """Where the gold sits, against uniform."""

    counts: dict[str, int]
    """Items per gold letter."""
    chi2: float
    dof: int
    p_value: float


class LengthSummary(Model):
    """Option lengths in characters."""

    n: int
    mean: float
    median: float
    p10: float
    p90: float


class OptionLengths(Model):
    """Gold vs distractor lengths, and how often the gold is the longest / shortest option."""

    gold: LengthSummary
    distractors: LengthSummary
    gold_longest: float
    """Share of items whose gold is the unique longest option."""
    gold_shortest: float
    bins: list[float]
    """Histogram edges (characters), shared by the two counts below."""
    gold_counts: list[int]
    distractor_counts: list[int]


class AdversarialTask(Model):
    """What adversarial filtering did to one task (zeros when it did not run)."""

    items: int = 0
    candidates_scored: int = 0
    """Option sets tried (a reserve candidate in a distractor's place)."""
    replaced: int = 0
    """Distractors swapped for a reserve candidate."""
    dropped: int = 0
    """Items no reserve candidate could hide from a rule (`adversarial.too_easy`)."""
    left_to_gates: int = 0
    """Items not filtered: their gold alone is found in the context and no candidate is (the
    `gold_in_context` gate drops them)."""
    rounds: int = 0
    before: dict[str, float] = Field(default_factory=dict)
    """Each rule's accuracy before any swap, as the filter scores it (vectorisers fitted with the reserve)."""
    after: dict[str, float] = Field(default_factory=dict)
    """... and on the kept items, with the audit's folds and models (on the filter's rows: its
    vectorisers saw the reserve too; the validity stage measures the built items anew)."""


class AdversarialReport(Model):
    """The adversarial filtering stage of one build."""

    enabled: bool = False
    seconds: float = 0.0
    generate_seconds: float = 0.0
    """The generate stage it follows: filtering must cost less (issue 22)."""
    tasks: dict[str, AdversarialTask] = Field(default_factory=dict)


class SampleOption(Model):
    """One option of a sampled item."""

    letter: str
    text: str
    gold: bool
    origin: str
    """The distractor's origin (`rule:wrong_target`, `other_run:<id>`...; empty for the gold)."""


class SampleItem(Model):
    """One item rendered for a quick read."""

    item_id: str
    context_tail: str
    """The last characters of the context (what the model reads last)."""
    context_chars: int
    options: list[SampleOption]


class TaskValidity(Model):
    """The validity of one MCQ task."""

    task: str
    items: int
    chance: float
    baselines: list[BaselineBound]
    passed: bool
    """Every baseline within its bound."""
    positions: PositionHistogram
    lengths: OptionLengths
    sources: dict[str, int]
    """Shown distractors per source family (`rule`, `same_run`, `same_instance`, `other_run`, `llm`, `other`)."""
    patch_overlap: float | None = None
    """Where the golds are diffs: share of distractors touching a file the gold touches (else None)."""
    adversarial: AdversarialTask
    samples: list[SampleItem]


class ValidityReport(Model):
    """The validity section of one build."""

    tasks: list[TaskValidity]
    generate_seconds: float
    adversarial_seconds: float
    """Filtering must cost less than the generate stage it follows (issue 22)."""
