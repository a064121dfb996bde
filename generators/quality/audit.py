"""The audit of benchmark rows: gates and model-free baselines over anyone's data, as pure functions.

Rows come either in APTBench's official layout (a `choices` string of `(A) ...` options
separated by a newline or, for env_setup, by one space, with option bodies that may hold
newlines; `answer` a letter) or as aptforge's own candidate/published Parquet rows (`options`
list and `gold_index`). Both become `AuditRow`s; a row that cannot be used becomes a Problem
naming where it sits and why. `audit_rows` groups rows by task and returns, per task, the item
and option counts, chance, every baseline against its bound, the gold-position chi-square and
the gate findings; `build_quality` and `audit_json` turn those into the report's quality section
(flags, overrides, publishable) and `refused_tasks` reads it back for publish. Nothing here reads
files: `flows/audit_files.py` does.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, MutableSequence, Sequence
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import Any, Literal, NamedTuple, Protocol

from generators.quality.baselines import BASELINES, BLOCK, Bounds, Mcq, TaskBaselines, task_baselines
from generators.quality.gates import OptionSet, check_options, context_text
from generators.quality.shelf import Shelf
from schemas import LETTERS, Problem, TaskSpec, content_id
from schemas.report import QualityReport, TaskQuality
from schemas.tasks import find_spec, specs_of_dataset

RowForm = Literal["mcq", "completion", "multi_select"]
_SEPARATORS = ("\n", " ")


class QualityRules(Protocol):
    """What the audit reads of a quality config (`flows.config.QualityConfig` is one)."""

    margin: float
    min_items: int
    z: float
    bounds: Mapping[str, Mapping[str, float]]
    overrides: Mapping[str, str]
    block_items: int


class _DefaultRules(NamedTuple):
    margin: float = 0.10
    min_items: int = 100
    z: float = 2.326
    bounds: Mapping[str, Mapping[str, float]] = {}
    overrides: Mapping[str, str] = {}
    block_items: int = BLOCK


DEFAULT_RULES: QualityRules = _DefaultRules()
"""The bounds a task gets when no config names any (the defaults of `QualityConfig`)."""


class AuditRow(NamedTuple):
    """One benchmark row as the audit sees it."""

    task: str
    """Task label: `<dataset>/<task>` (APTBench files) or `<scenario>/<task>` (aptforge rows)."""
    where: str
    """`file:line`."""
    form: RowForm
    """How the row is scored."""
    options: tuple[str, ...]
    """MCQ options in display order (empty otherwise)."""
    gold_index: int | None
    """Gold position (MCQ)."""
    context: str
    """Everything shown besides the options."""
    key: str
    """Content key (context, options, answer) to find duplicate rows."""


def _split(text: str, sep: str) -> tuple[str, ...]:
    if not text.startswith("(A) "):
        return ()
    starts = [(0, 4)]
    pos = 4
    for letter in LETTERS[1:]:
        marker = f"{sep}({letter}) "
        i = text.find(marker, pos)
        if i < 0:
            break
        starts.append((i, len(marker)))
        pos = i + len(marker)
    ends = [s for s, _ in starts[1:]] + [len(text)]
    return tuple(text[s + n : e] for (s, n), e in zip(starts, ends, strict=True))


def parse_choices(text: str, sep: str | None = None) -> tuple[str, ...]:
    """Split an APTBench `choices` string into option bodies (empty tuple if it has no `(A) `).

    With `sep` (the task's known separator) only that one is tried; otherwise the separator
    giving more options wins, a newline on ties.
    """
    best: tuple[str, ...] = ()
    for s in (sep,) if sep else _SEPARATORS:
        opts = _split(text, s)
        if len(opts) > len(best):
            best = opts
    return best


def spec_for(dataset: str, task: str) -> TaskSpec | None:
    """The TaskSpec of an APTBench `<dataset>/<task>` folder (`plan_zh` -> a language-split `plan`), if known."""
    return specs_of_dataset(dataset, task)


def label_for_path(path: str) -> tuple[str, TaskSpec | None]:
    """Task label and spec of an APTBench JSONL file from its folders (`.../env_setup/error/x.jsonl`)."""
    p = PurePath(path)
    parts = p.parent.parts
    if len(parts) >= 2:
        spec = spec_for(parts[-2], parts[-1])
        if spec is not None:
            return f"{parts[-2]}/{parts[-1]}", spec
    return (parts[-1] if p.stem == "input_data" and parts else p.stem), None


def _key(context: str, options: Sequence[str], answer: Any) -> str:
    return content_id(context, list(options), json.dumps(answer, ensure_ascii=False, sort_keys=True))


def aptbench_row(
    data: Mapping[str, Any], where: str, task: str, spec: TaskSpec | None = None
) -> AuditRow | Problem:
    """A row in APTBench's official layout."""
    answer_key = spec.answer_key if spec else "answer"
    if answer_key not in data:
        return Problem(where=where, stage="audit", reason="missing_answer", detail=f"no `{answer_key}` field")
    answer = data[answer_key]
    context = context_text(data, spec)
    if "choices" not in data:
        return AuditRow(task, where, "completion", (), None, context, _key(context, (), answer))
    choices = data["choices"]
    options = parse_choices(choices, spec.choices_sep if spec else None) if isinstance(choices, str) else ()
    if not options:
        return Problem(
            where=where,
            stage="audit",
            reason="unparseable_choices",
            detail="`choices` is not a string of `(A) ...` options",
        )
    if isinstance(answer, list):
        return AuditRow(task, where, "multi_select", options, None, context, _key(context, options, answer))
    letter = str(answer).strip().strip("()")
    if len(letter) != 1 or letter.upper() not in LETTERS or LETTERS.index(letter.upper()) >= len(options):
        return Problem(
            where=where,
            stage="audit",
            reason="answer_not_in_options",
            detail=f"answer {answer!r} but {len(options)} options",
        )
    return AuditRow(
        task, where, "mcq", options, LETTERS.index(letter.upper()), context, _key(context, options, letter)
    )


def candidate_row(data: Mapping[str, Any], where: str) -> AuditRow | Problem:
    """A row of aptforge's candidate or published Parquet (`options`, `gold_index`, `scenario`, `task`)."""
    task = f"{data.get('scenario', '?')}/{data.get('task', '?')}"
    spec = find_spec(str(data.get("scenario")), str(data.get("task")))
    shown = {k: data[k] for k in spec.field_names if k in data} if spec else dict(data)
    context = context_text(shown, spec)
    options = tuple(str(o) for o in data.get("options") or ())
    gold = data.get("gold_index")
    if not options:
        return AuditRow(task, where, "completion", (), None, context, _key(context, (), data.get("gold")))
    if not isinstance(gold, int) or not 0 <= gold < len(options):
        return Problem(
            where=where,
            stage="audit",
            reason="answer_not_in_options",
            detail=f"gold_index {gold!r} of {len(options)} options",
        )
    return AuditRow(task, where, "mcq", options, gold, context, _key(context, options, gold))


def audit_row(data: Any, where: str, task: str, spec: TaskSpec | None = None) -> AuditRow | Problem:
    """Either layout, told apart by aptforge's `options`/`gold_index` columns."""
    if not isinstance(data, Mapping):
        return Problem(where=where, stage="audit", reason="not_a_row", detail=f"got {type(data).__name__}")
    if "options" in data and "gold_index" in data:
        return candidate_row(data, where)
    return aptbench_row(data, where, task, spec)


@dataclass(frozen=True)
class TaskAudit:
    """The audit of one task."""

    task: str
    items: int
    forms: dict[str, int]
    baselines: TaskBaselines | None
    problems: list[Problem] = field(default_factory=list)

    @property
    def findings(self) -> dict[str, int]:
        """Gate findings per reason."""
        return dict(sorted(Counter(p.reason for p in self.problems).items()))

    @property
    def flagged(self) -> bool:
        """True when some baseline exceeds its bound."""
        return bool(self.baselines and self.baselines.exceeded)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready summary."""
        out: dict[str, Any] = {"task": self.task, "items": self.items, "forms": self.forms}
        if self.baselines is not None:
            out.update(self.baselines.as_dict())
        out["flagged"] = self.flagged
        out["findings"] = self.findings
        return out


class AuditResult(NamedTuple):
    """What `aptforge audit` found."""

    tasks: dict[str, TaskAudit]
    problems: list[Problem]
    """Files or rows that could not be read at all (outside any task)."""
    files: list[str]


def audit_task(
    task: str,
    rows: Iterable[AuditRow],
    bounds: Bounds | None = None,
    near_gold: float = 0.9,
    problems: Iterable[Problem] = (),
    block: int | None = BLOCK,
    store: MutableSequence[Mcq] | None = None,
) -> TaskAudit:
    """Gates and baselines of one task's rows (`problems`: rows of this task that could not be used,
    read once `rows` is; `block`: `task_baselines`' block of items).

    `rows` are read once, in order; the MCQ items go to `store` (a list by default; a `Shelf` keeps
    them on disk, so the task is held one block at a time)."""
    bounds = bounds or Bounds()
    mcq = [] if store is None else store
    first: dict[str, str] = {}
    duplicates: list[Problem] = []
    options: list[Problem] = []
    forms: Counter[str] = Counter()
    count = 0
    for r in rows:
        count += 1
        forms[r.form] += 1
        if r.key in first:
            duplicates.append(
                Problem(
                    where=r.where, stage="audit", reason="duplicate_row", detail=f"same as {first[r.key]}"
                )
            )
        first.setdefault(r.key, r.where)
        if r.form == "mcq" and r.gold_index is not None:
            options += check_options(OptionSet(r.where, r.options, r.gold_index, r.context), near_gold)
            mcq.append(Mcq(r.where, r.options, r.gold_index, r.context))
    given = list(problems)
    items = count + sum(1 for p in given if p.stage == "audit")
    found = [*given, *duplicates, *options]
    baselines = task_baselines(mcq, bounds, block=block) if mcq else None  # type: ignore[misc]
    return TaskAudit(task, items, dict(forms), baselines, found)


def audit_rows(
    rows: Iterable[AuditRow | Problem],
    bounds: Bounds | Mapping[str, Bounds] | None = None,
    near_gold: float = 0.9,
    task_of: Mapping[str, str] | None = None,
    block: int | None = BLOCK,
) -> dict[str, TaskAudit]:
    """Audit rows of one or more tasks; Problems are attributed to the task `task_of[file]` names
    (`block`: `task_baselines`' block of items)."""
    by_task: dict[str, list[AuditRow]] = {}
    unusable: dict[str, list[Problem]] = {}
    for r in rows:
        if isinstance(r, Problem):
            task = (task_of or {}).get(r.where.rsplit(":", 1)[0], "?")
            unusable.setdefault(task, []).append(r)
        else:
            by_task.setdefault(r.task, []).append(r)
    out = {}
    for task in sorted(set(by_task) | set(unusable)):
        b = bounds.get(task, Bounds()) if isinstance(bounds, Mapping) else (bounds or Bounds())
        out[task] = audit_task(task, by_task.get(task, []), b, near_gold, unusable.get(task, []), block)
    return out


def _config_key(mapping: Mapping[str, Any], task: str) -> str | None:
    if task in mapping:
        return task
    short = task.rsplit("/", 1)[-1]
    return short if short in mapping else None


def bounds_of(quality: QualityRules, task: str) -> Bounds:
    """The baseline bounds of one task (`task` or its last `/` part names it in the config)."""
    key = _config_key(quality.bounds, task)
    return Bounds(quality.margin, quality.min_items, quality.z, dict(quality.bounds[key]) if key else {})


def override_of(quality: QualityRules, task: str) -> str | None:
    """The configured reason to publish `task` although it is flagged."""
    key = _config_key(quality.overrides, task)
    return quality.overrides[key] if key else None


def task_entry(audit: TaskAudit, quality: QualityRules) -> TaskQuality:
    """The report entry of one task: the audit plus `why`, `override` and `publishable`."""
    reason = override_of(quality, audit.task) if audit.flagged else None
    return TaskQuality(
        **audit.as_dict(),
        why=audit.baselines.why() if audit.baselines else "",
        override=reason,
        publishable=not audit.flagged or reason is not None,
    )


def audit_json(
    result: AuditResult, quality: QualityRules | None = None, examples: int | None = None
) -> dict[str, Any]:
    """The JSON document `aptforge audit --json` prints: per task the entry and its findings (all, or `examples` per reason)."""
    quality = quality or DEFAULT_RULES
    tasks: dict[str, Any] = {}
    for name, audit in result.tasks.items():
        judged = task_entry(audit, quality)
        entry = judged.model_dump(exclude_none=True)  # completion tasks: no baseline figures
        entry["override"] = judged.override
        shown: dict[str, int] = {}
        problems = []
        for p in audit.problems:
            shown[p.reason] = shown.get(p.reason, 0) + 1
            if examples is None or shown[p.reason] <= examples:
                problems.append(p.model_dump())
        entry["problems"] = problems
        tasks[name] = entry
    return {
        "files": result.files,
        "baselines": list(BASELINES),
        "tasks": tasks,
        "problems": [p.model_dump() for p in result.problems],
    }


def _usable(rows: Iterable[Mapping[str, Any]], bad: list[Problem]) -> Iterator[AuditRow]:
    """The candidate rows that parse, in order; the others go to `bad` as they are met."""
    for r in rows:
        row = candidate_row(r, str(r.get("item_id", "?")))
        if isinstance(row, AuditRow):
            yield row
        else:
            bad.append(row)


def build_quality(
    rows_by_task: Mapping[str, Iterable[Mapping[str, Any]]], quality: QualityRules
) -> QualityReport:
    """The quality section of a build report, from the candidate rows of every task."""
    tasks: dict[str, TaskQuality] = {}
    for task, rows in rows_by_task.items():
        bad: list[Problem] = []
        with Shelf[Mcq]() as shelf:  # the task's items on disk: memory holds one block of them
            audit = audit_task(
                task,
                _usable(rows, bad),
                bounds_of(quality, task),
                problems=bad,
                block=quality.block_items,
                store=shelf,
            )
        tasks[task] = task_entry(audit, quality)
    return QualityReport(
        baselines=list(BASELINES),
        margin=quality.margin,
        min_items=quality.min_items,
        tasks=tasks,
        flags={t: e.why for t, e in tasks.items() if e.flagged},
        refused_tasks=sorted(t for t, e in tasks.items() if not e.publishable),
    )


def refused_tasks(quality: QualityReport, overrides: Mapping[str, str] | None = None) -> dict[str, str]:
    """Flagged tasks (a baseline over its bound) that no override excuses: task -> why.

    An override is the reason recorded at build time or one in `overrides` (the config at publish time).
    """
    out = {}
    for task, why in quality.flags.items():
        entry = quality.tasks.get(task)
        if (overrides or {}).get(task) or (entry is not None and entry.override):
            continue
        out[task] = why
    return out
