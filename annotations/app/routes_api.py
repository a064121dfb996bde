"""The JSON API: list, read, decide, undo, progress, agreement, statistics.

Guarantees: the same rules as the pages (a decision names the content hash and own revision it was
made on; notes are bounded; numeric parameters are bounded and answer 400 when out of range) and the
same blindness: before a reviewer has decided an item, no response carries another reviewer's
decision, note or name for it (the list never does, except for adjudicators).
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, Field

from annotations.agreement import task_agreement
from annotations.app.auth import Reviewer
from annotations.app.deps import Me, St
from annotations.app.options import MAX_LIMIT, MAX_OFFSET, NOTE_LIMIT
from annotations.queue import blind, revealed
from annotations.records import Conflict, ItemRow, QueueError, Seen
from annotations.stats import reason_counts, reviewer_stats

router = APIRouter(prefix="/api")
Text = Annotated[str | None, Query(max_length=200)]


class DecisionIn(BaseModel):
    """JSON body of `POST /api/items/{item_id}/decision`."""

    decision: str = Field(max_length=20)
    """`accept` or `reject`."""
    content_hash: str = Field(max_length=128)
    """Content hash of the item as the client read it (`GET /api/items/{id}`)."""
    own_rev: int = Field(0, ge=0, le=2**62)
    """The client's own revision of the item as read (`own_rev`; 0 before its first decision)."""
    note: str = Field("", max_length=NOTE_LIMIT)
    """Why (a rejection needs a reason or a note)."""
    reasons: list[str] = Field(default_factory=list, max_length=10)
    """Preset rejection reasons (`gold_wrong`, `distractor_correct`, ...)."""


def row_json(row: ItemRow, me: Reviewer, mine: str | None = None, reveal: bool = False) -> dict[str, Any]:
    """An item row as JSON; the last decider, time and note only for adjudicators or once revealed."""
    out: dict[str, Any] = {**row.__dict__, "disputed": row.disputed, "mine": mine}
    if not (reveal or me.adjudicator):
        out.update(reviewer=None, decided_at=None, note="")
    return out


def _error(exc: QueueError) -> Response:
    if isinstance(exc, Conflict):
        body = {"error": "conflict", "kind": exc.kind, "message": str(exc)}
        return JSONResponse(
            {**body, "content_hash": exc.content_hash, "own_rev": exc.own_rev}, status_code=409
        )
    code = 404 if exc.reason == "unknown_item" else 422
    return JSONResponse({"error": exc.reason, "message": str(exc)}, status_code=code)


@router.get("/items")
def api_items(
    st: St,
    me: Me,
    task: Text = None,
    status: Text = None,
    source: Text = None,
    scenario: Text = None,
    q: Text = None,
    sort: Text = None,
    limit: Annotated[int, Query(ge=1, le=MAX_LIMIT)] = 100,
    offset: Annotated[int, Query(ge=0, le=MAX_OFFSET)] = 0,
) -> dict[str, Any]:
    """One page of items (`total` counts every match)."""
    filters = {"task": task, "status": status, "source": source, "scenario": scenario, "search": q}
    rows = st.queue.items(**filters, sort=sort or "task", limit=limit, offset=offset)
    mine = st.queue.decisions_of(me.name, [r.item_id for r in rows])
    return {
        "items": [row_json(r, me, mine.get(r.item_id), reveal=r.item_id in mine) for r in rows],
        "total": st.queue.count(**filters),
    }


@router.get("/items/{item_id}")
def api_item(st: St, me: Me, item_id: str) -> Response:
    """One item: row, question, reviews (others' only once I decided), and what a decision must name."""
    try:
        view = st.queue.get(item_id)
    except QueueError as exc:
        return _error(exc)
    shown, reveal = blind(view, me.name, me.adjudicator), revealed(view, me.name, me.adjudicator)
    mine = view.review_by(me.name)
    return JSONResponse(
        {
            "item": row_json(shown.row, me, mine.decision if mine else None, reveal),
            "question": view.question.model_dump(mode="json"),
            "reviews": [r.__dict__ for r in shown.reviews],
            "content_hash": view.row.content_hash,
            "own_rev": st.queue.own_rev(item_id, me.name),
        }
    )


@router.post("/items/{item_id}/decision")
def api_decide(st: St, me: Me, item_id: str, body: DecisionIn) -> Response:
    """Accept or reject; 409 with `kind` (content / own) when the read is out of date."""
    if body.decision.strip().lower().startswith("reject") and not (body.note.strip() or body.reasons):
        return JSONResponse(
            {"error": "note_required", "message": "a rejection needs a reason or a note"}, status_code=422
        )
    try:
        row = st.queue.decide(
            item_id,
            me.name,
            body.decision,
            seen=Seen(body.content_hash, body.own_rev),
            note=body.note.strip(),
            reasons=body.reasons,
            origin="api",
        )
    except QueueError as exc:
        return _error(exc)
    mine = st.queue.decisions_of(me.name, [item_id]).get(item_id)
    return JSONResponse(
        {"item": row_json(row, me, mine, reveal=True), "own_rev": st.queue.own_rev(item_id, me.name)}
    )


@router.post("/undo")
def api_undo(st: St, me: Me) -> Response:
    """Withdraw my last decision (within the undo window)."""
    try:
        row = st.queue.undo(me.name, window_seconds=st.options.undo_seconds)
    except QueueError as exc:
        return _error(exc)
    return JSONResponse({"item": row_json(row, me)})


@router.get("/me")
def api_me(st: St, me: Me) -> dict[str, Any]:
    """Who I am and my progress (done / assigned / left)."""
    return {
        "reviewer": me.name,
        "adjudicator": me.adjudicator,
        "progress": st.queue.progress(me.name).__dict__,
    }


@router.get("/agreement")
def api_agreement(st: St, me: Me) -> dict[str, Any]:
    """Agreement figures per task."""
    return {task: a.as_dict() for task, a in task_agreement(st.queue.reviews()).items()}


@router.get("/stats")
def api_stats(st: St, me: Me) -> dict[str, Any]:
    """Per-reviewer statistics and rejection reasons per task."""
    reviews = st.queue.reviews()
    return {"reviewers": [s.as_dict() for s in reviewer_stats(reviews)], "reasons": reason_counts(reviews)}
