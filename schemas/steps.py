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
    candidates: tuple[str, ...] = ()
    """Scenario-specific wrong options (e.g. shifted windows); generators may use them."""
    group: str = ""
    """Grouping key for distractor pools (e.g. instance id, language)."""
    provenance: Provenance
    """Where it came from."""
