"""Redaction of schema objects: trajectories, questions and Problems, through one `Redactor`.

The build redacts twice. Trajectories are redacted right after reading, so a secret is replaced
before an extractor can truncate it in half, and every context, option and answer derived from
the run is already clean. Questions are scanned again before rows are written (defence in depth:
an LLM-written distractor could carry a secret no trajectory had). Problems are redacted before
the quarantine file is written, since a reader's error message may quote raw input. Placeholder
text stays in the question fields, so reviewers see exactly what was redacted and of what kind.

Reads: Trajectory / Question / Problem. Produces: the same objects redacted, counts per kind,
and one `info` Problem per redacted trajectory naming kinds and counts (never values).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, NamedTuple

from generators.hygiene.secrets import PLACEHOLDER, Redactor, strings_of
from schemas import Problem, Question, Trajectory
from schemas.trajectory import location

#: Trajectory fields that identify the run rather than carry its text.
_TRAJECTORY_KEEP = frozenset({"trajectory_id", "kind", "outcome", "source"})
#: Question fields that identify or trace the item rather than show it.
_QUESTION_KEEP = frozenset(
    {"item_id", "scenario", "task", "form", "trajectory_id", "step_index", "gold_index", "provenance"}
)


def _fmt(counts: Counter[str]) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(counts.items()))


def trajectory_texts(traj: Trajectory) -> Iterator[str]:
    """Every free text of a trajectory (task, prompts, thoughts, actions, observations, patch...)."""
    data = traj.model_dump()
    for key, value in data.items():
        if key not in _TRAJECTORY_KEEP:
            yield from strings_of(value)


def question_texts(q: Question) -> Iterator[str]:
    """Every text a question shows: context fields, options, gold and distractor texts."""
    yield from strings_of(q.fields)
    yield from q.options
    yield q.gold
    for d in q.distractors:
        yield d.text


def redacted_texts(q: Question) -> Iterator[str]:
    """Every string `redact_question` redacts: the shown texts (`question_texts`), the distractors'
    origins and the reserve's texts and origins."""
    yield from question_texts(q)
    for d in q.distractors:
        yield d.origin
    for d in q.reserve:
        yield d.text
        yield d.origin


def _redact_model(
    model: Any, keep: frozenset[str], redactor: Redactor, scanned: bool = False
) -> tuple[Any, Counter[str]]:
    counts: Counter[str] = Counter()
    data = model.model_dump()
    for key, value in data.items():
        if key not in keep:
            data[key] = redactor.redact_value(value, counts, scanned)
    if not counts:
        return model, counts
    return type(model).model_validate(data), counts


class TrajectoryScrub(NamedTuple):
    """Redacted trajectories, per-run notes, and replacements per kind."""

    trajectories: list[Trajectory]
    problems: list[Problem]
    redacted: Counter[str]


def redact_trajectories(trajs: Iterable[Trajectory], redactor: Redactor) -> TrajectoryScrub:
    """Learn every trajectory's secrets first, then redact each (same secret, same placeholder)."""
    trajs = list(trajs)
    redactor.learn(text for t in trajs for text in trajectory_texts(t))
    out: list[Trajectory] = []
    problems: list[Problem] = []
    total: Counter[str] = Counter()
    for t in trajs:
        red, counts = _redact_model(t, _TRAJECTORY_KEEP, redactor)
        out.append(red)
        if counts:
            total.update(counts)
            problems.append(
                Problem(
                    where=location(t),
                    stage="redact",
                    reason="secret_redacted",
                    detail=f"trajectory {t.trajectory_id}: {_fmt(counts)}",
                    severity="info",
                )
            )
    return TrajectoryScrub(out, problems, total)


class QuestionScrub(NamedTuple):
    """Redacted questions, the replacements this pass made per kind, and refused questions."""

    questions: list[Question]
    redacted: Counter[str]
    problems: list[Problem]


def _json_broken(before: Question, after: Question) -> str | None:
    """The first context field that parsed as JSON before redaction and no longer does."""
    for key, old in before.fields.items():
        new = after.fields.get(key)
        if isinstance(old, str) and old[:1] in "[{" and new != old:
            try:
                json.loads(old)
            except ValueError:
                continue
            try:
                json.loads(new)
            except ValueError:
                return key
    return None


def redact_question(
    q: Question, redactor: Redactor, scanned: bool = False
) -> tuple[Question | None, Counter[str], Problem | None]:
    """One question redacted with what `redactor` has learnt: the copy and its counts, or None and
    the Problem refusing it (a JSON context field that would no longer parse). `scanned`: its texts
    were learnt and none had findings (`Redactor.learn_groups`): only known values are looked for,
    and without any it is the question itself."""
    if scanned and not redactor.knows_values:
        return q, Counter(), None
    red, counts = _redact_model(q, _QUESTION_KEEP, redactor, scanned)
    broken = _json_broken(q, red) if counts else None
    if broken is None:
        return red, counts, None
    problem = Problem(
        where=q.item_id,
        stage="redact",
        reason="redaction_broke_json",
        detail=f"field {broken!r} would not parse after redaction ({_fmt(counts)})",
    )
    return None, counts, problem


def redact_questions(questions: Iterable[Question], redactor: Redactor) -> QuestionScrub:
    """Scan contexts, options and answers of every question; replace what is found.

    A redaction keeps `gold == options[gold_index]`: the same text always redacts the same way.
    A question whose JSON context field would no longer parse is refused (an `error` Problem)
    rather than shipped broken; spans are built never to split an escape, so this is a guard.
    """
    questions = list(questions)
    found = redactor.learn_groups(redacted_texts(q) for q in questions)
    out: list[Question] = []
    total: Counter[str] = Counter()
    problems: list[Problem] = []
    for q, dirty in zip(questions, found, strict=True):
        red, counts, problem = redact_question(q, redactor, scanned=not dirty)
        if red is None:
            assert problem is not None
            problems.append(problem)
            continue
        out.append(red)
        total.update(counts)
    return QuestionScrub(out, total, problems)


def redact_problems(
    problems: Iterable[Problem], redactor: Redactor, found: Sequence[bool] | None = None
) -> list[Problem]:
    """Problems with secrets removed from `where` and `detail` (error messages may quote input).
    `found`: per Problem, whether its texts had findings when learnt (`Redactor.learn_groups`, by a
    caller that learnt them with others); learnt here when not given."""
    problems = list(problems)
    if found is None:
        found = redactor.learn_groups((p.where, p.detail) for p in problems)
    out = []
    for p, dirty in zip(problems, found, strict=True):
        if not dirty and not redactor.knows_values:
            out.append(p)
            continue
        where, detail = redactor.redact(p.where, not dirty).text, redactor.redact(p.detail, not dirty).text
        out.append(
            p
            if (where, detail) == (p.where, p.detail)
            else p.model_copy(update={"where": where, "detail": detail})
        )
    return out


def placeholder_counts(q: Question) -> Counter[str]:
    """Placeholders a question shows, per kind (what a reviewer sees redacted)."""
    counts: Counter[str] = Counter()
    for text in [*strings_of(q.fields), *q.options, *([] if q.options else [q.gold])]:
        counts.update(m.group(1) for m in PLACEHOLDER.finditer(text))
    return counts


__all__ = [
    "QuestionScrub",
    "TrajectoryScrub",
    "placeholder_counts",
    "question_texts",
    "redact_problems",
    "redact_question",
    "redact_questions",
    "redact_trajectories",
    "redacted_texts",
    "trajectory_texts",
]
