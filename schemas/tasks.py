"""The TaskSpec type, and the read-only lookup of the specs the scenarios declare.

A task's spec says what its published row looks like (APTBench field names, order and types, MCQ or
completion, number of options), which fields are context and which carry the answer, how lm-eval
and `aptforge eval` pose it (APTBench's protocol per task file), what reviewers check and the default
limits. Each scenario package declares its own specs on its tagged class; nothing here names a scenario or a task. `extractors.discovery` registers
the specs of every scenario it finds (after validating them), and `task_spec` looks them up.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Literal

from pydantic import Field, model_validator

from schemas.base import Model
from schemas.steps import Form

FieldType = Literal["str", "int"]


class AptbenchPrompt(Model):
    """One APTBench task file's evaluation protocol, as its scenario declares it (the lm-eval export and
    `aptforge eval` read it; see `flows.lm_eval_export`)."""

    prompt: str = Field(min_length=1)
    """Jinja query block over the row's fields, ending in the answer cue."""
    answer: str = Field(min_length=1)
    """How a demo's answer follows the cue; also the reference (minus `ignore`)."""
    extract: str = Field(min_length=1)
    """Regex over the generation whose first group is the answer."""
    ignore: str
    """Regex removed from reference and prediction before the exact match."""
    fewshot_delimiter: str
    """Between few-shot demos; also where generation stops."""
    max_gen_toks: int = Field(ge=1)
    """Generation budget in tokens."""
    metrics: tuple[str, ...] = Field(min_length=1)
    """`exact_match`, `rouge_l`, ... in APTBench's order."""

    def as_tuple(self) -> tuple[Any, ...]:
        """The protocol's fields in declaration order (what its provenance hash covers)."""
        return tuple(getattr(self, name) for name in type(self).model_fields)


class TaskLimits(Model):
    """Default per-task knobs; a build config overrides the ones it sets."""

    max_items_per_trajectory: int = Field(3, ge=1)
    """At most this many items per trajectory (seeded choice among eligible steps)."""
    max_context_tokens: int = Field(16000, ge=256)
    """Context budget in tokens (characters / 4)."""
    max_observation_chars: int = Field(4000, ge=64)
    """Observations longer than this are truncated (head and tail kept)."""


class TaskSpec(Model):
    """Everything about one task of a scenario, declared by the scenario's package."""

    dataset: str = Field(min_length=1)
    """APTBench dataset name of the task; used only in release and export names (`<dataset>_<task>`)."""
    task: str = Field(min_length=1)
    """APTBench task folder (usually the task's own name)."""
    form: Form
    """`mcq` or `completion`."""
    n_options: int = Field(ge=0)
    """Options per MCQ item (0 for completion)."""
    fields: tuple[tuple[str, FieldType], ...] = Field(min_length=1)
    """APTBench keys in official order with their types."""
    context: tuple[str, ...]
    """The fields a model reads as context (what the gold must not be copied from)."""
    answers: tuple[str, ...]
    """The fields that carry the answer (the answer key, the options, the gold step, the final answer)."""
    answer_key: str = "answer"
    """Key holding the gold (letter for MCQ, text for completion)."""
    choices_sep: str = "\n"
    """Separator between `(A) ...` options in `choices`."""
    aptbench: dict[str, AptbenchPrompt] = Field(default_factory=dict)
    """APTBench's protocol per release folder of the task (`release_folders`): how lm-eval and `aptforge
    eval` prompt, extract and score it. Declared by the scenario (inline, or in its package's
    `aptbench_prompts.yaml`, which discovery folds in); a folder without one fails at discovery."""
    guidelines: str = ""
    """What a reviewer checks before accepting an item of this task."""
    limits: TaskLimits = TaskLimits()
    """Default limits of the task."""
    split_by_language: bool = False
    """Release rows in `<task>_en` / `<task>_zh` folders by the language of their `query` field."""
    other_runs_as_distractors: bool = True
    """Whether another run's gold of this task may be offered as a wrong option (the generator's pool).
    False where it never is a valid one (a whole plan of another repository, a fix naming files this
    item never shows): the scenario's own candidates are then the only source, and a step with too few
    of them yields no item. The pool still sets the task-wide rank plan (length, centrality)."""
    other_runs_per_item: int | None = None
    """At most this many other runs' golds among one item's distractors and reserve together (None: no
    cap), where `other_runs_as_distractors` allows them: a step with fewer of its own candidates than
    the options need minus the cap yields no item. For tasks where another run's gold is valid but
    weak (off topic), so that an item is mostly its own candidates."""
    other_runs_never: str | None = None
    """A regex: another run's gold it matches (searched) is never drawn as a distractor (a step that
    ends the run, where the scenario's own candidates already hold one completion at most)."""
    other_runs_not_beside: str | None = None
    """A regex: where the gold matches it (searched), another run's gold that matches it too is never
    drawn: the two are the same step whatever their wording (an argument-free completion beside an
    argument-free completion gold)."""

    @model_validator(mode="after")
    def _consistent(self) -> TaskSpec:
        names = [name for name, _ in self.fields]
        unknown = [k for k in (*self.context, *self.answers, self.answer_key) if k not in names]
        if unknown:
            raise ValueError(f"fields {unknown} are not among the row's fields {names}")
        if set(self.context) & set(self.answers):
            raise ValueError(
                f"fields {sorted(set(self.context) & set(self.answers))} are both context and answer"
            )
        if self.answer_key not in self.answers:
            raise ValueError(f"the answer key {self.answer_key!r} must be one of the answer fields")
        if (self.form == "mcq") != (self.n_options > 1):
            raise ValueError(f"a {self.form} task cannot have {self.n_options} options")
        if self.form == "mcq" and "choices" not in names:
            raise ValueError("an MCQ row needs a `choices` field")
        stray = sorted(set(self.aptbench) - set(self.release_folders))
        if stray:
            raise ValueError(
                f"APTBench prompts {stray} name no release folder of the task {self.release_folders}"
            )
        return self

    @property
    def field_names(self) -> tuple[str, ...]:
        """The APTBench keys in official order."""
        return tuple(name for name, _ in self.fields)

    @property
    def release_folders(self) -> tuple[str, ...]:
        """The APTBench task folders the task publishes to (`<task>`, or `<task>_en`/`<task>_zh`)."""
        if self.split_by_language:
            return (f"{self.task}_en", f"{self.task}_zh")
        return (self.task,)

    @property
    def non_context(self) -> frozenset[str]:
        """Fields that are not context: the answer carriers and bookkeeping (ids, lengths, sources)."""
        return frozenset(self.field_names) - frozenset(self.context)


class UnknownTask(KeyError):
    """A (scenario, task) no discovered scenario declares; the message names the known ones."""


class ConflictingTask(ValueError):
    """Two different specs registered for one (scenario, task)."""


_SPECS: dict[tuple[str, str], TaskSpec] = {}


def register_tasks(scenario: str, specs: Mapping[str, TaskSpec]) -> None:
    """Make a scenario's specs known to `task_spec` (discovery calls this; registering again is a no-op).

    Raises:
        ConflictingTask: another, different spec is already registered under the same name.
    """
    for task, spec in specs.items():
        known = _SPECS.setdefault((scenario, task), spec)
        if known != spec:
            raise ConflictingTask(f"{scenario}/{task} is declared twice, with different specs")


def registered_tasks() -> Mapping[tuple[str, str], TaskSpec]:
    """Every registered spec by (scenario, task), read-only."""
    return MappingProxyType(dict(sorted(_SPECS.items())))


def task_spec(scenario: str, task: str) -> TaskSpec:
    """Look up a task, naming the known ones on a miss."""
    try:
        return _SPECS[(scenario, task)]
    except KeyError:
        known = ", ".join(f"{s}/{t}" for s, t in sorted(_SPECS)) or "none (run discovery first)"
        raise UnknownTask(f"unknown task {scenario}/{task}; known: {known}") from None


def find_spec(scenario: str, task: str) -> TaskSpec | None:
    """The registered spec of a task, or None."""
    return _SPECS.get((scenario, task))


def specs_of_dataset(dataset: str, folder: str) -> TaskSpec | None:
    """The spec of an APTBench `<dataset>/<folder>` (a language-split `plan_zh` finds `plan`), if registered."""
    for spec in _SPECS.values():
        if spec.dataset == dataset and (
            folder == spec.task
            or (spec.split_by_language and folder in (f"{spec.task}_en", f"{spec.task}_zh"))
        ):
            return spec
    return None


def non_context_keys() -> frozenset[str]:
    """Keys that are never context in any registered task (for rows whose task is unknown)."""
    return frozenset(k for spec in _SPECS.values() for k in spec.non_context)
