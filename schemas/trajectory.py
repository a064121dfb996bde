"""The normalised trajectory every reader produces and every extractor reads.

One shape for all agent formats: the task, the system prompt and first user message the agent
saw, and a list of steps (thought/plan, action = tool name + args + raw text, observation),
with an outcome that says whether the run succeeded and which signal decided it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, Field

from schemas.base import Model

Label = Literal["success", "failure", "unknown"]
M = TypeVar("M", bound=BaseModel)


class Action(Model):
    """What the agent did at one step."""

    tool: str
    """Tool or command name (`bash`, `str_replace_editor`, `web_search`, `submit`...)."""
    args: dict[str, Any] = Field(default_factory=dict)
    """Arguments as structured data, when the format has them (function calling)."""
    raw: str = ""
    """The action as the agent wrote it: a command line, or the tool call rendered as text."""
    call_id: str | None = None
    """Tool-call id linking the action to its observation, when the format has one."""


class Step(Model):
    """One agent turn: thought, action, and what came back."""

    index: int
    """0-based position in the trajectory."""
    thought: str = ""
    """Reasoning or plan text written before the action."""
    action: Action | None = None
    """The action taken; None for a turn with no tool call (e.g. a final answer)."""
    observation: str | None = None
    """Tool output; None when the format has none (e.g. the last `submit`)."""


_new = object.__new__
# the setters of the slots every pydantic model has, called directly (a frozen model's own
# __setattr__ refuses, and object.__setattr__ looks the name up on every call)
_SLOTS = BaseModel.__dict__
_set_dict = _SLOTS["__dict__"].__set__
_set_fields_set = _SLOTS["__pydantic_fields_set__"].__set__
_set_extra = _SLOTS["__pydantic_extra__"].__set__
_set_private = _SLOTS["__pydantic_private__"].__set__
#: The fields-given sets of the trusted builders, one per model and set of fields, shared by every
#: instance built with them (`_fields_set`).
_FIELD_SETS: dict[tuple[type[BaseModel], frozenset[str]], set[str]] = {}


def _fields_set(model: type[BaseModel], names: Iterable[str]) -> set[str]:
    """The one `__pydantic_fields_set__` of every trusted `model` instance given `names`.

    Validation gives each instance a set of its own (200-700 bytes each: 30% of the small objects
    of a parsed 7-step run, 4.2 of 14.2 KB). These models are frozen, so pydantic never adds to an
    instance's set (only the setters of unfrozen models do), and a copy (`model_copy`, `deepcopy`,
    pickling) gets a set of its own: one shared set per model and fields is what each instance
    would hold, less the copies.
    """
    key = (model, frozenset(names))
    found = _FIELD_SETS.get(key)
    if found is None:
        found = _FIELD_SETS.setdefault(key, set(key[1]))
    return found


_ACTION_SET = _fields_set(Action, ("tool", "args", "raw"))
_STEP_SET = _fields_set(Step, ("index", "thought", "action", "observation"))


def _built(model: type[M], values: dict[str, Any], fields_set: set[str]) -> M:
    # what pydantic-core leaves on a validated instance: the field values in field order
    # (`__dict__`), the fields given (shared: `_fields_set`), no extras (`extra="forbid"`), no
    # private attributes (these models declare none)
    obj = _new(model)
    _set_dict(obj, values)
    _set_fields_set(obj, fields_set)
    _set_extra(obj, None)
    _set_private(obj, None)
    return obj


def trusted_action(tool: str, args: dict[str, Any], raw: str) -> Action:
    """`Action(tool=tool, args=args, raw=raw)` built without validation, for a reader's hot path.

    The caller guarantees the types (a `str` tool and raw text, a fresh `dict` of args it hands
    over); the instance is the one validation would give (equal, same fields set, same dump), at a
    fraction of the cost. Anything of unchecked type goes through `Action(...)`.
    """
    return _built(Action, {"tool": tool, "args": args, "raw": raw, "call_id": None}, _ACTION_SET)


def trusted_step(index: int, thought: str, action: Action | None, observation: str | None) -> Step:
    """`Step(index=..., thought=..., action=..., observation=...)` built without validation.

    As `trusted_action`: the caller guarantees an `int` index, `str` thought, an `Action` (itself
    validated or trusted) or None, a `str` observation or None.
    """
    values = {"index": index, "thought": thought, "action": action, "observation": observation}
    return _built(Step, values, _STEP_SET)


def trusted_call_step(
    index: int, thought: str, tool: str, args: dict[str, Any], raw: str, observation: str | None
) -> Step:
    """`trusted_step(index, thought, trusted_action(tool, args, raw), observation)` in one call (the
    same guarantees on the types), `_built` written out twice: the ingest's hottest call, once a
    step of every text-call run."""
    action = _new(Action)
    _set_dict(action, {"tool": tool, "args": args, "raw": raw, "call_id": None})
    _set_fields_set(action, _ACTION_SET)
    _set_extra(action, None)
    _set_private(action, None)
    step = _new(Step)
    _set_dict(step, {"index": index, "thought": thought, "action": action, "observation": observation})
    _set_fields_set(step, _STEP_SET)
    _set_extra(step, None)
    _set_private(step, None)
    return step


class _Plan:
    """How `trusted_model` fills a model: every field's default in field order, the required
    fields, the fields whose default comes from a factory."""

    __slots__ = ("defaults", "factories", "required")

    def __init__(self, model: type[BaseModel]) -> None:
        self.defaults: dict[str, Any] = {}
        self.required: set[str] = set()
        self.factories: dict[str, Any] = {}
        for name, field in model.model_fields.items():
            self.defaults[name] = None if field.is_required() else field.default
            if field.is_required():
                self.required.add(name)
            elif field.default_factory is not None:
                self.factories[name] = field.default_factory


_PLANS: dict[type[BaseModel], _Plan] = {}


def trusted_model(model: type[M], values: dict[str, Any]) -> M:
    """`model(**values)` built without validation, for a reader's hot path.

    The caller guarantees that every value is of its field's type exactly (`str` for `str`, not a
    subclass; models of the field's class, built by validation or by these builders; dicts with
    `str` keys) and meets the field's constraints; anything it has not checked goes through
    `model(**values)`. Fields not given take their default as validation does (the default object
    itself, a fresh value of a factory). Raises TypeError for an unknown or missing field.
    """
    plan = _PLANS.get(model)
    if plan is None:
        plan = _PLANS[model] = _Plan(model)
    fields = {**plan.defaults, **values}  # field order, the given values over the defaults
    if len(fields) != len(plan.defaults) or not plan.required <= values.keys():
        raise TypeError(f"{model.__name__}: unknown or missing fields in {sorted(values)}")
    if plan.factories:
        for name, factory in plan.factories.items():
            if name not in values:
                fields[name] = factory()
    return _built(model, fields, _fields_set(model, values))


class Outcome(Model):
    """Success label and the evidence that decided it."""

    label: Label = "unknown"
    """`success` / `failure` from a verdict; `unknown` when no verdict exists."""
    signal: str = "no_verdict"
    """What decided it, e.g. `harness_summary:resolved_ids`, `row:resolved`, `empty_patch`."""
    reason: str = ""
    """For failure/unknown: a snake_case reason (`unresolved`, `empty_patch`, `no_verdict`)."""


class Source(Model):
    """Where a trajectory came from."""

    format: str
    """Reader name that parsed it (`swe_agent_traj`, `swe_rows`, ...)."""
    reader_version: int = 1
    """Version of that reader."""
    file: str
    """Path of the raw file."""
    line: int | None = None
    """1-based line (JSONL) or row number (Parquet, JSON list), None for a whole-file record."""
    agent: str = ""
    """Agent framework and version, e.g. `swe-agent 1.1.0`."""
    model: str = ""
    """Model that drove the agent, when recorded."""
    instance_id: str = ""
    """Task instance id (SWE-bench instance id, query id...)."""
    native_id: str = ""
    """The format's own id for this run (traj_id, row id); defaults to instance_id."""


class Trajectory(Model):
    """A normalised agent run."""

    trajectory_id: str
    """Content-derived id: h(source format, file name, native id)."""
    kind: str = Field(min_length=1)
    """Family of the run, as its reader declares it (`@reader(kind=...)`); extractors declare which kinds they read."""
    task: str
    """The task text (issue / problem statement / question), without wrapping instructions."""
    system_prompt: str = ""
    """The system prompt the agent saw (may be empty)."""
    prompt: str = ""
    """The first (non-demonstration) user message as the agent saw it, task included."""
    steps: tuple[Step, ...] = ()
    """The agent's turns in order."""
    outcome: Outcome = Outcome()
    """Success label and signal."""
    source: Source
    """Provenance of the raw record."""
    patch: str | None = None
    """Final submitted patch (SWE), when recorded."""
    final_answer: str | None = None
    """Final answer text (deep research), when recorded."""
    gold_answer: str | None = None
    """Reference answer shipped with the run (deep research), when recorded."""
    tool_set: tuple[dict[str, Any], ...] = ()
    """Tool specs the agent was given, when recorded."""
    meta: dict[str, Any] = Field(default_factory=dict)
    """Format-specific extras (exit status, cost, ...); never used for labels."""

    def with_outcome(self, outcome: Outcome) -> Trajectory:
        """Return a copy with another outcome (models are frozen)."""
        return self.model_copy(update={"outcome": outcome})


def location(traj: Trajectory) -> str:
    """`file:line` (or `file`) of a trajectory's raw record, for Problems."""
    return traj.source.file + (f":{traj.source.line}" if traj.source.line else "")
