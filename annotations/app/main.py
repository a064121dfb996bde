"""The review web app: FastAPI routes over the queue, server-rendered Jinja2 pages and a small JSON API.

Trajectory text is untrusted (web pages, code, model output), so: every template is autoescaped and
none marks text safe; every response carries a strict Content-Security-Policy (scripts and styles only
from this app's own static files, no inline code, no frames, forms post only here); the OpenAPI docs
(which load a CDN script) are off. A decision carries the revision the reviewer saw: when the item
changed meanwhile the reviewer gets a 409 page saying who changed it, and nothing is overwritten.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import urlencode

from fastapi import FastAPI, Form, Query, Request
from fastapi.responses import JSONResponse, PlainTextResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles
from fastapi.templating import Jinja2Templates
from jinja2 import Environment, FileSystemLoader, StrictUndefined
from pydantic import BaseModel

from annotations.agreement import task_agreement
from annotations.app.auth import COOKIE, Auth, Forbidden, NotLoggedIn
from annotations.app.pages import FILTERS, MESSAGES, SHORTCUTS, STATUSES, filters_of, item_context
from annotations.queue import Queue
from annotations.records import Conflict, ItemRow, QueueError
from annotations.rules import revised

HERE = Path(__file__).parent
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
    "form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)
SECURITY_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-store",
}


class DecisionIn(BaseModel):
    """JSON body of `POST /api/items/{item_id}/decision`."""

    decision: str
    """`accept` or `reject`."""
    rev: int
    """Item revision the decision was made on."""
    note: str = ""
    """Required for reject."""


def _row_json(row: ItemRow) -> dict[str, Any]:
    return {**row.__dict__, "disputed": row.disputed}


@lru_cache(maxsize=1)
def _templates() -> Jinja2Templates:
    """One autoescaping Jinja2 environment per process (compiled templates are reused by every app)."""
    env = Environment(loader=FileSystemLoader(HERE / "templates"), autoescape=True, undefined=StrictUndefined)
    env.globals.update(shortcuts=SHORTCUTS, statuses=STATUSES)
    return Jinja2Templates(env=env)


def create_app(queue: Queue, *, tokens: dict[str, str] | None = None, page_size: int = 50) -> FastAPI:
    """The review app over `queue`; `tokens` (reviewer -> token) switches token login on."""
    auth = Auth(tokens)
    templates = _templates()
    app = FastAPI(title="aptforge review", docs_url=None, redoc_url=None, openapi_url=None)
    app.mount("/static", StaticFiles(directory=HERE / "static"), name="static")

    @app.middleware("http")
    async def security(request: Request, call_next: Any) -> Response:
        try:
            auth.guard(request)
        except Forbidden as exc:
            response: Response = PlainTextResponse(str(exc), status_code=403)
        else:
            response = await call_next(request)
        response.headers.update(SECURITY_HEADERS)
        return response

    @app.exception_handler(NotLoggedIn)
    async def not_logged_in(request: Request, exc: NotLoggedIn) -> Response:
        if request.url.path.startswith("/api/"):
            return JSONResponse(
                {"error": "unauthorized", "message": "a reviewer token is required"},
                status_code=401,
                headers={"WWW-Authenticate": "Bearer"},
            )
        return RedirectResponse("/login", status_code=303)

    def me(request: Request) -> str:
        name = auth.reviewer(request)
        if name is None:
            raise NotLoggedIn
        return name

    def page(request: Request, name: str, status: int = 200, **ctx: Any) -> Response:
        ctx.setdefault("reviewer", auth.reviewer(request))
        ctx.setdefault("message", MESSAGES.get(request.query_params.get("msg", ""), ""))
        return templates.TemplateResponse(request, name, ctx, status_code=status)

    def show_item(request: Request, item_id: str, status: int = 200, **extra: Any) -> Response:
        reviewer = me(request)
        try:
            view = queue.get(item_id)
        except QueueError as exc:
            return page(request, "error.html", 404, error=str(exc))
        return page(
            request, "item.html", status, **item_context(view, reviewer, filters_of(request), **extra)
        )

    @app.get("/healthz")
    def healthz() -> dict[str, bool]:
        return {"ok": True}

    @app.get("/favicon.ico")
    def favicon() -> Response:
        return Response(status_code=204)

    @app.get("/login")
    def login_form(request: Request) -> Response:
        return page(request, "login.html", open_mode=auth.open, error="")

    @app.post("/login")
    def login(
        request: Request, name: Annotated[str, Form()] = "", token: Annotated[str, Form()] = ""
    ) -> Response:
        value = auth.login_value(name.strip(), token.strip())
        if value is None:
            error = "Unknown token." if not auth.open else "Use a plain name (letters, digits, . _ @ -)."
            return page(request, "login.html", 401, open_mode=auth.open, error=error, reviewer=None)
        response = RedirectResponse("/", status_code=303)
        response.set_cookie(
            COOKIE,
            value,
            httponly=True,
            samesite="strict",
            secure=request.url.scheme == "https",
            max_age=7 * 24 * 3600,
        )
        return response

    @app.post("/logout")
    def logout() -> Response:
        response = RedirectResponse("/login", status_code=303)
        response.delete_cookie(COOKIE)
        return response

    @app.get("/")
    def index(request: Request, page_no: Annotated[int, Query(alias="page")] = 1) -> Response:
        reviewer = me(request)
        f = filters_of(request)
        query = {k: f.get(k) for k in ("task", "status", "source", "scenario")}
        todo = reviewer if f.get("todo") else None
        start = max(page_no, 1)
        rows = queue.items(**query, unreviewed_by=todo, limit=page_size, offset=(start - 1) * page_size)
        total = queue.count(**query, unreviewed_by=todo)
        agreement = task_agreement(queue.reviews())
        return page(
            request,
            "list.html",
            rows=rows,
            total=total,
            page_no=start,
            pages=max(1, -(-total // page_size)),
            facets=queue.facets(),
            filters=f,
            qs=urlencode(f),
            agreement=agreement,
            required=queue.reviews_per_item,
            filter_names=FILTERS,
        )

    @app.get("/next")
    def next_item(request: Request) -> Response:
        reviewer = me(request)
        f = filters_of(request)
        item_id = queue.next_for(reviewer, **{k: f[k] for k in ("task", "source", "scenario") if k in f})
        if item_id is None:
            return RedirectResponse("/?" + urlencode({**f, "msg": "done"}), status_code=303)
        suffix = "&msg=" + request.query_params["msg"] if request.query_params.get("msg") in MESSAGES else ""
        return RedirectResponse(f"/items/{item_id}?{urlencode(f)}{suffix}", status_code=303)

    @app.get("/items/{item_id}")
    def item(request: Request, item_id: str) -> Response:
        return show_item(request, item_id)

    def saved(
        request: Request, item_id: str, note: str, msg: str, invalid: int, apply: Callable[[], None]
    ) -> Response:
        """Run a decision or an edit; on success go to the next item, else show this one with the reason."""
        try:
            apply()
        except Conflict as exc:
            return show_item(request, item_id, 409, conflict=str(exc), note=note)
        except QueueError as exc:
            status = 404 if exc.reason == "unknown_item" else invalid
            return show_item(request, item_id, status, error=str(exc), note=note)
        return RedirectResponse("/next?" + urlencode({**filters_of(request), "msg": msg}), status_code=303)

    @app.post("/items/{item_id}/decision")
    def decide(
        request: Request,
        item_id: str,
        decision: Annotated[str, Form()],
        rev: Annotated[int, Form()],
        content_hash: Annotated[str, Form()] = "",
        note: Annotated[str, Form()] = "",
    ) -> Response:
        reviewer = me(request)
        if decision.strip().lower().startswith("reject") and not note.strip():
            return show_item(request, item_id, 422, error="A rejection needs a note saying why.", note=note)

        def apply() -> None:
            queue.decide(
                item_id,
                reviewer,
                decision,
                expected_rev=rev,
                seen_hash=content_hash or None,
                note=note.strip(),
                origin="app",
            )

        return saved(request, item_id, note, "saved", 400, apply)

    @app.post("/items/{item_id}/edit")
    def edit(
        request: Request,
        item_id: str,
        rev: Annotated[int, Form()],
        content_hash: Annotated[str, Form()] = "",
        note: Annotated[str, Form()] = "",
        option: Annotated[list[str] | None, Form()] = None,
        gold_index: Annotated[int | None, Form()] = None,
        gold: Annotated[str | None, Form()] = None,
    ) -> Response:
        reviewer = me(request)

        def apply() -> None:
            edited = revised(
                queue.get(item_id).question, reviewer, options=option, gold_index=gold_index, gold=gold
            )
            queue.edit(
                item_id,
                reviewer,
                edited,
                expected_rev=rev,
                seen_hash=content_hash or None,
                note=note.strip(),
                origin="app",
            )

        return saved(request, item_id, note, "edited", 422, apply)

    @app.get("/agreement")
    def agreement(request: Request) -> Response:
        me(request)
        return page(
            request,
            "agreement.html",
            agreement=task_agreement(queue.reviews()),
            required=queue.reviews_per_item,
            facets=queue.facets(),
        )

    @app.get("/api/items")
    def api_items(
        request: Request,
        task: str | None = None,
        status: str | None = None,
        source: str | None = None,
        scenario: str | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> dict[str, Any]:
        me(request)
        rows = queue.items(
            task=task,
            status=status,
            source=source,
            scenario=scenario,
            limit=min(max(limit, 1), 1000),
            offset=max(offset, 0),
        )
        return {
            "items": [_row_json(r) for r in rows],
            "total": queue.count(task=task, status=status, source=source, scenario=scenario),
        }

    @app.get("/api/items/{item_id}")
    def api_item(request: Request, item_id: str) -> Response:
        me(request)
        try:
            view = queue.get(item_id)
        except QueueError as exc:
            return JSONResponse({"error": exc.reason, "message": str(exc)}, status_code=404)
        return JSONResponse(
            {
                "item": _row_json(view.row),
                "question": view.question.model_dump(mode="json"),
                "reviews": [r.__dict__ for r in view.reviews],
            }
        )

    @app.post("/api/items/{item_id}/decision")
    def api_decide(request: Request, item_id: str, body: DecisionIn) -> Response:
        reviewer = me(request)
        if body.decision.strip().lower().startswith("reject") and not body.note.strip():
            return JSONResponse(
                {"error": "note_required", "message": "a rejection needs a note"}, status_code=422
            )
        try:
            row = queue.decide(
                item_id, reviewer, body.decision, expected_rev=body.rev, note=body.note.strip(), origin="api"
            )
        except Conflict as exc:
            return JSONResponse(
                {"error": "conflict", "message": str(exc), "current_rev": exc.current_rev}, status_code=409
            )
        except QueueError as exc:
            code = 404 if exc.reason == "unknown_item" else 422
            return JSONResponse({"error": exc.reason, "message": str(exc)}, status_code=code)
        return JSONResponse({"item": _row_json(row)})

    @app.get("/api/agreement")
    def api_agreement(request: Request) -> dict[str, Any]:
        me(request)
        return {task: a.as_dict() for task, a in task_agreement(queue.reviews()).items()}

    return app
