"""The generator contract: GoldSteps in, Questions (or Problems) out.

A generator is named in config and found by name. `generate()` receives a shard of gold steps
and the pool of all gold steps of the same task (for drawing distractors from other steps),
and yields one Question or one Problem per gold step.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import ClassVar, NamedTuple, Protocol, runtime_checkable

from schemas import Distractor, GoldStep, Problem, Provenance, Question
from schemas.report import LLMUsage


class PoolEntry(NamedTuple):
    """A gold answer of another step, usable as a distractor."""

    step_id: str
    trajectory_id: str
    group: str
    text: str
    retrievable: bool = True
    """May be offered as a distractor of another run's step (`TaskSpec.other_runs_as_distractors`);
    an entry that may not still counts in the task's rank plan."""


@runtime_checkable
class DistractorGenerator(Protocol):
    """Makes the wrong options of MCQ questions."""

    name: ClassVar[str]
    version: ClassVar[int]

    def generate(
        self, steps: Sequence[GoldStep], pool: Sequence[PoolEntry], n_options: int
    ) -> Iterator[Question | Problem]:
        """One Question (gold first, `gold_index=0`) or Problem per step."""
        ...

    def usage_report(self) -> LLMUsage | None:
        """Tokens and cost of the build so far, per task and model (None: the generator spends nothing)."""
        ...

    def close(self) -> None:
        """Release clients, pools and caches (the flow calls it once, after the last shard)."""
        ...


def completion_question(step: GoldStep) -> Question:
    """A completion task needs no distractors: pose the gold as is."""
    return posed(step)


def posed(
    step: GoldStep,
    distractors: Sequence[Distractor] = (),
    provenance: Provenance | None = None,
    reserve: Sequence[Distractor] = (),
) -> Question:
    """The question of `step`: the gold first (`gold_index=0`, positions are balanced later), then the distractors."""
    mcq = step.form == "mcq"
    return Question(
        item_id=step.step_id,
        scenario=step.scenario,
        task=step.task,
        form=step.form,
        trajectory_id=step.trajectory_id,
        step_index=step.step_index,
        fields=step.fields,
        gold=step.gold,
        options=(step.gold, *(d.text for d in distractors)) if mcq else (),
        gold_index=0 if mcq else None,
        distractors=tuple(distractors),
        reserve=tuple(reserve) if mcq else (),
        provenance=provenance or step.provenance,
    )
