"""Gold steps: what an extractor finds in a successful trajectory.

A GoldStep is the real next artefact (plan, command, patch window...) plus the context fields a
base model sees before it, ready to be posed as a question by a generator.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from schemas.base import Model
from schemas.provenance import Provenance

Form = Literal["mcq", "completion"]

#: Where a distractor candidate comes from (the part of `Candidate.origin` before the first `:`).
#: `rule` made by a rule from this run's own context or gold (a shifted window, a mutated patch, an
#: edited plan); `same_run` a real but wrong step of this run (a fix that did not work); `same_instance`
#: a failed run of the same instance; `other_run` a step of another run (same repository or framework
#: first); `llm` written by a language model (`llm:<model>`).
CANDIDATE_SOURCES = ("rule", "same_run", "same_instance", "other_run", "llm")


def candidate_source(origin: str) -> str:
    """The source family of an origin string (`rule:shifted_window` -> `rule`)."""
    return origin.split(":", 1)[0]


class Candidate(Model):
    """A wrong option proposed for a gold step, tagged with where it came from."""

    text: str
    """Option text, in the gold's own format."""
    origin: str
    """`<source>:<detail>`, source one of `CANDIDATE_SOURCES` (e.g. `same_instance:failed_run`)."""


class GoldStep(Model):
    """One gold answer with its context, before distractors exist."""

    step_id: str
    """h(scenario, task, trajectory_id, step_index): becomes the item id."""
    scenario: str
    """Extractor name, e.g. `swe_issue_fix`."""
    task: str
    """Task within the scenario, e.g. `plan`, `action`."""
    form: Form
    """`mcq` (needs distractors) or `completion`."""
    trajectory_id: str
    """Trajectory the step comes from."""
    step_index: int
    """Index of the gold step in its trajectory."""
    gold: str
    """The gold answer text (a plan, a command, a JSON step...)."""
    fields: dict[str, Any] = Field(default_factory=dict)
    """Context fields of the published row (APTBench names), without choices/answer."""
    candidates: tuple[Candidate, ...] = ()
    """Scenario-made wrong options in preference order, each with its origin; generators may use them."""
    group: str = ""
    """Grouping key for distractor pools (e.g. instance id, language)."""
    provenance: Provenance
    """Where it came from."""
