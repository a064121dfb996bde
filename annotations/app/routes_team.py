"""Team pages: agreement and per-reviewer statistics; disputes side by side and adjudication.

Guarantees: only adjudicators see the disputes page and may rule (403 otherwise); a ruling names the
content it was made on, so a ruling on content that changed meanwhile is a conflict, not a verdict.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Form, Request
from fastapi.responses import RedirectResponse, Response

from annotations.agreement import task_agreement
from annotations.app.deps import Judge, Me, St, render
from annotations.app.pages import options_of
from annotations.app.routes_review import Hash, Rev, note_problem
from annotations.records import REASONS, Conflict, QueueError, Seen
from annotations.stats import reason_counts, reviewer_stats

router = APIRouter()


@router.get("/agreement")
def agreement(request: Request, st: St, me: Me) -> Response:
    """Agreement per task, statistics per reviewer, rejection reasons per task."""
    reviews = st.queue.reviews()
    return render(
        request,
        "agreement.html",
        agreement=task_agreement(reviews),
        stats=reviewer_stats(reviews),
        reasons=reason_counts(reviews),
        reason_labels=REASONS,
        required=st.queue.reviews_per_item,
        facets=st.queue.facets(),
    )


@router.get("/disputes")
def disputes(request: Request, st: St, judge: Judge) -> Response:
    """Every disputed item with its reviews side by side and a ruling form."""
    cards = []
    for row in st.queue.disputed():
        view = st.queue.get(row.item_id)
        cards.append(
            {
                "row": row,
                "q": view.question,
                "options": options_of(view.question),
                "reviews": view.reviews,
                "own_rev": st.queue.own_rev(row.item_id, judge.name),
            }
        )
    return render(request, "disputes.html", cards=cards, reason_labels=REASONS, error="")


@router.post("/items/{item_id}/adjudicate")
def adjudicate(
    request: Request,
    st: St,
    judge: Judge,
    item_id: str,
    decision: Annotated[str, Form(max_length=20)],
    content_hash: Hash,
    own_rev: Rev,
    note: Annotated[str, Form()] = "",
) -> Response:
    """Settle a dispute: the ruling decides the item's current content."""
    try:
        if problem := note_problem(note, st.options.note_limit):
            raise QueueError("note_too_long", problem)
        st.queue.adjudicate(
            item_id, judge.name, decision, seen=Seen(content_hash, own_rev), note=note.strip()
        )
    except (Conflict, QueueError) as exc:
        return render(request, "error.html", 409 if isinstance(exc, Conflict) else 422, error=str(exc))
    return RedirectResponse("/disputes?msg=ruled", status_code=303)
