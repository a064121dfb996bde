"""Questions: a gold step plus its options, ready for quality checks and review."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from schemas.base import Model
from schemas.provenance import Provenance
from schemas.steps import Form

LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


class Distractor(Model):
    """One wrong option and where it came from."""

    text: str
    """Option text."""
    origin: str
    """How it was made: `other_step:<step_id>`, `perturb:<kind>`, `llm:<model>`, ..."""


class Question(Model):
    """A posed question: context fields, options (MCQ) and the gold."""

    item_id: str
    """Stable id = the gold step's id."""
    scenario: str
    """Extractor name."""
    task: str
    """Task name."""
    form: Form
    """`mcq` or `completion`."""
    trajectory_id: str
    """Source trajectory."""
    step_index: int
    """Gold step index."""
    fields: dict[str, Any] = Field(default_factory=dict)
    """Context fields (APTBench names), without choices/answer."""
    gold: str
    """Gold answer text."""
    options: tuple[str, ...] = ()
    """All options in display order (MCQ); empty for completion."""
    gold_index: int | None = None
    """Position of the gold in `options` (MCQ)."""
    distractors: tuple[Distractor, ...] = ()
    """The wrong options with their origins (order independent of display)."""
    reserve: tuple[Distractor, ...] = ()
    """Further candidates beyond `distractors`, in the generator's preference order: adversarial
    filtering swaps distractors for reserve candidates that cheap scorers cannot tell from the gold,
    then clears it. Never published."""
    provenance: Provenance
    """Where it came from and what made it."""

    @property
    def answer(self) -> str:
        """APTBench answer: the gold letter (MCQ) or the gold text (completion)."""
        if self.form == "mcq":
            assert self.gold_index is not None
            return LETTERS[self.gold_index]
        return self.gold

    def render_choices(self, sep: str = "\n") -> str:
        """APTBench `choices` string: `(A) ...{sep}(B) ...`."""
        return sep.join(f"({LETTERS[i]}) {opt}" for i, opt in enumerate(self.options))
