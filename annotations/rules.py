"""Review rules: how the reviews of an item's content become its status, and what an edit may change.

Why a module of its own: the queue, the app and the Label Studio import must apply the same rules.
Guarantees: pure functions; a majority decides and a tie waits for one more review; an edit changes
content only (options, gold position, gold text), never an item's identity, and keeps the origin of
every distractor it did not rewrite.
"""

from __future__ import annotations

from collections.abc import Sequence

from annotations.records import QueueError
from schemas import Question, Status


def resolve_status(decisions: Sequence[str], required: int, ruling: str | None = None) -> Status:
    """The item status from the reviews of its current content.

    An adjudicator's `ruling` on this content decides outright. Otherwise: fewer than `required`
    reviews: `pending`; else the strict majority of keep (accepted or edited) against rejected decides;
    a tie stays `pending` (disputed: one more review or a ruling breaks it). A kept item whose current
    content a reviewer wrote (an `edited` review of this content) is `edited`.
    """
    if ruling is not None:
        if ruling == "rejected":
            return "rejected"
        return "edited" if "edited" in decisions or ruling == "edited" else "accepted"
    if len(decisions) < required:
        return "pending"
    rejected = sum(1 for d in decisions if d == "rejected")
    kept = len(decisions) - rejected
    if kept > rejected:
        return "edited" if "edited" in decisions else "accepted"
    return "rejected" if rejected > kept else "pending"


def revised(
    question: Question,
    reviewer: str,
    *,
    options: Sequence[str] | None = None,
    gold_index: int | None = None,
    gold: str | None = None,
) -> Question:
    """A reviewer's corrected copy of `question`: new option texts and gold position (MCQ) or gold (completion).

    Unchanged distractors keep their origin; rewritten ones get origin `edit:<reviewer>`.

    Raises:
        QueueError: empty or duplicate options, a gold position out of range, an empty gold.
    """
    data = question.model_dump()
    if question.form == "mcq":
        opts = [o.strip() for o in (options if options is not None else question.options)]
        idx = question.gold_index if gold_index is None else gold_index
        if len(opts) != len(question.options) or any(not o for o in opts) or len(set(opts)) != len(opts):
            raise QueueError(
                "bad_edit", f"an MCQ edit needs {len(question.options)} distinct, non-empty options"
            )
        if idx is None or not 0 <= idx < len(opts):
            raise QueueError("bad_edit", f"gold position {idx} is not one of the {len(opts)} options")
        origins = {d.text: d.origin for d in question.distractors}
        data.update(
            options=tuple(opts),
            gold_index=idx,
            gold=opts[idx],
            distractors=tuple(
                {"text": o, "origin": origins.get(o, f"edit:{reviewer}")}
                for i, o in enumerate(opts)
                if i != idx
            ),
        )
    else:
        text = (gold if gold is not None else question.gold).strip()
        if not text:
            raise QueueError("bad_edit", "the gold answer cannot be empty")
        data.update(gold=text)
    return Question.model_validate(data)
