"""The two extension points: `@reader` for raw formats and `@extractor` for scenarios.

The decorators only set class attributes; nothing is registered globally. `discovery` collects
tagged classes from this package and from entry points into read-only mappings.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from types import MappingProxyType
from typing import Any, ClassVar, NamedTuple, Protocol, runtime_checkable

from schemas import Candidate, GoldStep, Problem, TaskSpec, Trajectory
from schemas.trajectory import location

READER_TAG = "__aptforge_reader__"
EXTRACTOR_TAG = "__aptforge_extractor__"


class Origin(NamedTuple):
    """Where a raw record sits: file and 1-based line/row (None for a whole-file record).

    `key` is the file's path relative to the input root it was found under: readers build ids from
    it (never from the absolute path), so moving a checkout or a data folder keeps every id.
    """

    file: str
    line: int | None = None
    key: str = ""

    @property
    def id_path(self) -> str:
        """The path to derive ids from: root-relative when known, else the path as given."""
        return self.key or self.file

    def __str__(self) -> str:
        return self.file if self.line is None else f"{self.file}:{self.line}"


class ReadError(ValueError):
    """A record of a known format that cannot be read; becomes a Problem, never a crash."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


@runtime_checkable
class Reader(Protocol):
    """A raw-format reader. `sniff` must be cheap and never raise."""

    name: ClassVar[str]
    version: ClassVar[int]
    kind: ClassVar[str]
    priority: ClassVar[int]

    def sniff(self, record: Any) -> bool:
        """True when `record` (parsed JSON / a Parquet row) is in this format."""
        ...

    def read(self, record: Any, origin: Origin) -> Trajectory:
        """Normalise one record; raise `ReadError` for a record that is broken."""
        ...


@runtime_checkable
class Extractor(Protocol):
    """A scenario: turns successful trajectories into gold steps for its tasks.

    `observe` sees every labelled run of the build (failed ones too) before extraction and returns
    what the scenario wants to know about them (or None); `use` hands that to an instance. The
    `@extractor` tag supplies both (learning nothing) when a scenario does not define them.
    """

    name: ClassVar[str]
    version: ClassVar[int]
    reads: ClassVar[frozenset[str]]
    tasks: ClassVar[tuple[str, ...]]
    specs: ClassVar[Mapping[str, TaskSpec]]

    @staticmethod
    def observe(runs: Iterable[Trajectory]) -> Any:
        """What the scenario learns from every labelled run before extracting (None: nothing)."""
        ...

    def use(self, observed: Any) -> None:
        """Take what `observe` learned (called once per instance, before `extract`)."""
        ...

    def extract(self, traj: Trajectory, task: str, options: Any) -> Iterator[GoldStep | Problem]:
        """Yield gold steps (or Problems) of `task` from one successful trajectory."""
        ...


def reader(name: str, *, version: int = 1, kind: str = "swe", priority: int = 50):
    """Tag a class as a reader of one raw format (lower `priority` is sniffed first)."""

    def tag(cls: type) -> type:
        cls.name, cls.version, cls.kind, cls.priority = name, version, kind, priority
        setattr(cls, READER_TAG, True)
        return cls

    return tag


def _observe_nothing(runs: Iterable[Trajectory]) -> None:
    return None


def _use_nothing(self: Any, observed: Any) -> None:
    return None


def extractor(name: str, *, version: int, reads: set[str], tasks: Mapping[str, TaskSpec]):
    """Tag a class as a scenario extractor; `name` must equal its module (or package) name.

    `tasks` maps each task name to its TaskSpec; discovery folds in the package's
    `aptbench_prompts.yaml`, validates the specs (a missing APTBench/lm-eval prompt is an error naming
    the scenario and the task) and registers them. A class without
    `observe` / `use` gets ones that learn nothing.
    """

    def tag(cls: type) -> type:
        specs = dict(tasks) if isinstance(tasks, Mapping) else {}
        cls.name, cls.version, cls.reads, cls.tasks = name, version, frozenset(reads), tuple(tasks)
        cls.specs = MappingProxyType(specs)
        if not hasattr(cls, "observe"):
            cls.observe = staticmethod(_observe_nothing)
        if not hasattr(cls, "use"):
            cls.use = _use_nothing
        setattr(cls, EXTRACTOR_TAG, True)
        return cls

    return tag


class ExtractOptions(NamedTuple):
    """Per-task knobs an extractor receives from the build config."""

    max_items_per_trajectory: int = 3
    """At most this many gold steps per trajectory and task (chosen by a seeded rule)."""
    max_context_tokens: int = 16000
    """Context budget, estimated as characters / 4; longer contexts are truncated."""
    max_observation_chars: int = 4000
    """Observations longer than this keep their head and tail around an omission marker."""
    seed: int = 0
    """Build seed; item selection uses `Random(h(seed, trajectory_id, task))`."""


def provenance_of(traj: Trajectory, extractor_name: str, extractor_version: int, seed: int):
    """Provenance of a gold step taken from `traj`."""
    from schemas import Provenance

    src = traj.source
    return Provenance(
        source_file=src.file,
        source_line=src.line,
        source_format=src.format,
        reader_version=src.reader_version,
        instance_id=src.instance_id,
        agent=src.agent,
        agent_model=src.model,
        outcome_signal=traj.outcome.signal,
        extractor=extractor_name,
        extractor_version=extractor_version,
        seed=seed,
    )


def unknown_task(extractor: Any, traj: Trajectory, task: str) -> Problem | None:
    """A Problem when `extractor` has no `task` (never an exception that stops a run)."""
    if task in extractor.tasks:
        return None
    return Problem(
        where=location(traj),
        stage="extract",
        reason="unknown_task",
        detail=f"{extractor.name} has no task {task!r}",
    )


def gold_step(
    extractor_name: str,
    extractor_version: int,
    traj: Trajectory,
    task: str,
    index: int,
    gold: str,
    fields: dict[str, Any],
    seed: int,
    *,
    candidates: tuple[Candidate, ...] = (),
    group: str | None = None,
) -> GoldStep:
    """A gold step of `task` at step `index` of `traj`: content-hash id, form from the task's row spec, provenance.

    `candidates` are the scenario's own wrong options in preference order, each tagged with its origin.
    `group` (default: the run's instance id) names runs that may share a correct answer, so generators
    never draw one's gold as another's distractor.
    """
    from schemas import content_id, task_spec

    return GoldStep(
        step_id=content_id(extractor_name, task, traj.trajectory_id, index),
        scenario=extractor_name,
        task=task,
        form=task_spec(extractor_name, task).form,
        trajectory_id=traj.trajectory_id,
        step_index=index,
        gold=gold,
        fields=fields,
        candidates=candidates,
        group=traj.source.instance_id if group is None else group,
        provenance=provenance_of(traj, extractor_name, extractor_version, seed),
    )


def estimate_tokens(text: str) -> int:
    """Token estimate used for context budgets: characters / 4 (no tokenizer download needed)."""
    return (len(text) + 3) // 4
