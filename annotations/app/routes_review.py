"""The reviewer's pages: the list, `next` (leases an item), the item page, decide, edit, undo.

Guarantees: a decision names the content hash and the reviewer's own revision its page showed, so it
conflicts only with a content change or with the same reviewer's later decision (never with another
reviewer's); a refused form (conflict, missing reason, note over the limit) comes back with everything
the reviewer typed still in it and a sentence saying why; what the page shows of other reviewers has
passed `blind` first.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any
from urllib.parse import urlencode

from fastapi import APIRouter, Form, Query, Request
from fastapi.responses import RedirectResponse, Response

from annotations.agreement import task_agreement
from annotations.app.auth import Reviewer
from annotations.app.deps import Me, St, State, render
from annotations.app.options import MAX_PAGE
from annotations.app.pages import (
    FILTERS,
    MESSAGES,
    NOTHING_TYPED,
    Typed,
    filters_of,
    item_context,
    list_query,
)
from annotations.queue import SORTS, blind, revealed
from annotations.records import Conflict, QueueError, Seen
from annotations.rules import revised

router = APIRouter()
MAX_REV = 2**62
Rev = Annotated[int, Form(ge=0, le=MAX_REV)]
Hash = Annotated[str, Form(max_length=128)]


def scope(f: dict[str, str]) -> dict[str, str]:
    """The filters that bound a reviewer's work (`next`, progress): task, source, scenario."""
    return {k: f[k] for k in ("task", "source", "scenario") if k in f}


def show_item(
    request: Request,
    st: State,
    me: Reviewer,
    item_id: str,
    status: int = 200,
    *,
    error: str = "",
    conflict: str = "",
    typed: Typed = NOTHING_TYPED,
) -> Response:
    """The item page as `me` may see it (opening it leases the item to them)."""
    q = st.queue
    try:
        view = q.get(item_id)
    except QueueError as exc:
        return render(request, "error.html", 404, error=str(exc))
    if status == 200:
        q.lease(item_id, me.name, st.options.lease_seconds)
    f = filters_of(request)
    ctx = item_context(
        blind(view, me.name, me.adjudicator),
        me.name,
        f,
        reveal=revealed(view, me.name, me.adjudicator),
        own_rev=q.own_rev(item_id, me.name),
        progress=q.progress(me.name, **scope(f)),
        last=q.last_decisions(me.name),
        guidelines=st.options.guidelines.get(view.row.task, ""),
        warnings=list(st.options.gates(view.question)) if st.options.gates else [],
        note_limit=st.options.note_limit,
        error=error,
        conflict=conflict,
        typed=typed,
    )
    return render(request, "item.html", status, adjudicator=me.adjudicator, **ctx)


@router.get("/")
def index(
    request: Request, st: St, me: Me, page_no: Annotated[int, Query(alias="page", ge=1, le=MAX_PAGE)] = 1
) -> Response:
    """The queue: filters, search, sort, my progress, one page of items, agreement."""
    q, size = st.queue, st.options.page_size
    f = filters_of(request)
    query = list_query(f, me.name)
    total = q.count(**query)
    pages = max(1, -(-total // size))
    start = min(page_no, pages)
    rows = q.items(**query, sort=f.get("sort", "task"), limit=size, offset=(start - 1) * size)
    return render(
        request,
        "list.html",
        rows=rows,
        mine=q.decisions_of(me.name, [r.item_id for r in rows]),
        adjudicator=me.adjudicator,
        total=total,
        page_no=start,
        pages=pages,
        facets=q.facets(),
        filters=f,
        qs=urlencode({k: v for k, v in f.items()}),
        sorts=tuple(SORTS),
        agreement=task_agreement(q.reviews()),
        required=q.reviews_per_item,
        progress=q.progress(me.name, **scope(f)),
        disputed=len(q.disputed()) if me.adjudicator else 0,
        filter_names=FILTERS,
    )


@router.get("/next")
def next_item(
    request: Request, st: St, me: Me, after: Annotated[str, Query(max_length=200)] = ""
) -> Response:
    """Lease the next item waiting for me (my live lease first) and open it; `after` skips one."""
    f = filters_of(request)
    item_id = st.queue.next_for(
        me.name, lease_seconds=st.options.lease_seconds, after=after or None, **scope(f)
    )
    msg = request.query_params.get("msg", "")
    if item_id is None:
        done = f"{msg}_done" if f"{msg}_done" in MESSAGES else "done"
        return RedirectResponse("/?" + urlencode({**f, "msg": done}), status_code=303)
    suffix = f"&msg={msg}" if msg in MESSAGES else ""
    return RedirectResponse(f"/items/{item_id}?{urlencode(f)}{suffix}", status_code=303)


@router.get("/items/{item_id}")
def item(request: Request, st: St, me: Me, item_id: str) -> Response:
    """The item page."""
    return show_item(request, st, me, item_id)


def _saved(
    request: Request, st: State, me: Reviewer, item_id: str, msg: str, typed: Typed, apply: Callable[[], Any]
) -> Response:
    """Run a decision or an edit; on success go to the next item, else show this one with the reason."""
    try:
        apply()
    except Conflict as exc:
        return show_item(request, st, me, item_id, 409, conflict=str(exc), typed=typed)
    except QueueError as exc:
        status = 404 if exc.reason == "unknown_item" else 422
        return show_item(request, st, me, item_id, status, error=str(exc), typed=typed)
    return RedirectResponse("/next?" + urlencode({**filters_of(request), "msg": msg}), status_code=303)


def note_problem(note: str, limit: int) -> str:
    """Why a note cannot be saved ('' when it can)."""
    if len(note) > limit:
        return (
            f"Your note has {len(note):,} characters; the limit is {limit:,}. "
            "Shorten it and send again (your text is kept below)."
        )
    return ""


@router.post("/items/{item_id}/decision")
def decide(
    request: Request,
    st: St,
    me: Me,
    item_id: str,
    decision: Annotated[str, Form(max_length=20)],
    content_hash: Hash,
    own_rev: Rev,
    note: Annotated[str, Form()] = "",
    reason: Annotated[list[str] | None, Form()] = None,
) -> Response:
    """Accept or reject (with preset reasons and a note) the content this page showed."""
    reasons = tuple(reason or ())
    typed = Typed(note=note, reasons=reasons)
    if problem := note_problem(note, st.options.note_limit):
        return show_item(request, st, me, item_id, 400, error=problem, typed=typed)
    if decision.strip().lower().startswith("reject"):
        if not note.strip() and not reasons:
            error = "A rejection needs a reason or a note saying why."
            return show_item(request, st, me, item_id, 422, error=error, typed=typed)
        if "other" in reasons and not note.strip():
            error = "The reason “other” needs a note saying what is wrong."
            return show_item(request, st, me, item_id, 422, error=error, typed=typed)
    seen = Seen(content_hash, own_rev)
    return _saved(
        request,
        st,
        me,
        item_id,
        "saved",
        typed,
        lambda: st.queue.decide(
            item_id, me.name, decision, seen=seen, note=note.strip(), reasons=reasons, origin="app"
        ),
    )


@router.post("/items/{item_id}/edit")
def edit(
    request: Request,
    st: St,
    me: Me,
    item_id: str,
    content_hash: Hash,
    own_rev: Rev,
    note: Annotated[str, Form()] = "",
    option: Annotated[list[str] | None, Form()] = None,
    gold_index: Annotated[int | None, Form(ge=0, le=25)] = None,
    gold: Annotated[str | None, Form()] = None,
) -> Response:
    """Store the edited options / gold as a new version (the original is kept)."""
    typed = Typed(
        edit_note=note,
        options=tuple(option) if option else None,
        gold_index=gold_index,
        gold=gold,
        edit_open=True,
    )
    if problem := note_problem(note, st.options.note_limit):
        return show_item(request, st, me, item_id, 400, error=problem, typed=typed)
    seen = Seen(content_hash, own_rev)

    def apply() -> None:
        base = st.queue.question_at(item_id, content_hash) or st.queue.get(item_id).question
        edited = revised(base, me.name, options=option, gold_index=gold_index, gold=gold)
        st.queue.edit(item_id, me.name, edited, seen=seen, note=note.strip(), origin="app")

    return _saved(request, st, me, item_id, "edited", typed, apply)


@router.post("/undo")
def undo(request: Request, st: St, me: Me) -> Response:
    """Withdraw my last decision (within the undo window) and reopen its item."""
    try:
        row = st.queue.undo(me.name, window_seconds=st.options.undo_seconds)
    except QueueError as exc:
        return render(request, "error.html", 409, error=str(exc))
    return RedirectResponse(f"/items/{row.item_id}?msg=undone", status_code=303)
