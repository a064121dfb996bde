"""Item-quality gates: pure functions returning Problems, each counted in the report.

`check_question` runs every per-item gate; an `error` Problem drops the item from candidates.
"""

from __future__ import annotations

from collections.abc import Iterator

from generators.text import normalise, similarity
from schemas import Problem, Question


def gate_duplicate_options(q: Question) -> Iterator[Problem]:
    """Two options that normalise to the same text."""
    seen: dict[str, int] = {}
    for i, opt in enumerate(q.options):
        key = normalise(opt)
        if key in seen:
            yield Problem(where=q.item_id, stage="check", reason="duplicate_option",
                          detail=f"options {seen[key]} and {i} are the same text")
        seen.setdefault(key, i)


def gate_near_gold(q: Question, threshold: float = 0.9) -> Iterator[Problem]:
    """A distractor equal or near-equal to the gold."""
    for d in q.distractors:
        sim = similarity(d.text, q.gold)
        if sim >= threshold:
            yield Problem(where=q.item_id, stage="check", reason="distractor_near_gold",
                          detail=f"similarity {sim:.2f} >= {threshold} ({d.origin})")


def gate_answer_in_options(q: Question) -> Iterator[Problem]:
    """MCQ gold must sit at `gold_index` among the declared number of options."""
    if q.form != "mcq":
        if not q.gold.strip():
            yield Problem(where=q.item_id, stage="check", reason="empty_gold", detail="completion target is empty")
        return
    if q.gold_index is None or not 0 <= q.gold_index < len(q.options) or q.options[q.gold_index] != q.gold:
        yield Problem(where=q.item_id, stage="check", reason="answer_not_in_options",
                      detail=f"gold_index {q.gold_index} of {len(q.options)} options")


def check_question(q: Question) -> list[Problem]:
    """All per-item gates."""
    return [*gate_answer_in_options(q), *gate_duplicate_options(q), *gate_near_gold(q)]
