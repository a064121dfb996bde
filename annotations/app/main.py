"""The review web app: `create_app` wires the queue, authentication and options to the routers.

Trajectory text is untrusted (web pages, code, model output), so: every template is autoescaped and
none marks text safe; every response carries a strict Content-Security-Policy; the OpenAPI docs
(which load a CDN script) are off; the Host allow-list and Origin checks of `security` run before any
route; bad parameters are a 400 (page or JSON), never a 500.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles
from starlette.middleware.trustedhost import TrustedHostMiddleware

from annotations.app import routes_api, routes_auth, routes_review, routes_team
from annotations.app.auth import Auth, Forbidden, NotLoggedIn
from annotations.app.deps import HERE, State, render
from annotations.app.options import AppOptions
from annotations.app.security import SECURITY_HEADERS, allowed_hosts, check_request
from annotations.queue import Queue


def create_app(
    queue: Queue, *, tokens: dict[str, str] | None = None, options: AppOptions | None = None
) -> FastAPI:
    """The review app over `queue`; `tokens` (reviewer -> token) switches token login on."""
    opts = options or AppOptions()
    auth = Auth(tokens, opts.adjudicators)
    app = FastAPI(title="aptforge review", docs_url=None, redoc_url=None, openapi_url=None)
    app.state.review = State(queue, auth, opts)
    app.mount("/static", StaticFiles(directory=HERE / "static"), name="static")
    for module in (routes_auth, routes_review, routes_team, routes_api):
        app.include_router(module.router)

    @app.middleware("http")
    async def security(request: Request, call_next: Any) -> Response:
        try:
            check_request(auth, request)
        except Forbidden as exc:
            response: Response = PlainTextResponse(str(exc), status_code=403)
        else:
            response = await call_next(request)
        response.headers.update(SECURITY_HEADERS)
        return response

    # Outermost: a request for a Host not on the list never reaches the app (DNS rebinding).
    app.add_middleware(TrustedHostMiddleware, allowed_hosts=allowed_hosts(auth, opts.allowed_hosts))
    app.add_exception_handler(NotLoggedIn, _not_logged_in)
    app.add_exception_handler(Forbidden, _forbidden)
    app.add_exception_handler(RequestValidationError, _bad_request)
    return app


async def _not_logged_in(request: Request, exc: Exception) -> Response:
    if request.url.path.startswith("/api/"):
        return JSONResponse(
            {"error": "unauthorized", "message": "a reviewer token is required"},
            status_code=401,
            headers={"WWW-Authenticate": "Bearer"},
        )
    return RedirectResponse("/login", status_code=303)


async def _forbidden(request: Request, exc: Exception) -> Response:
    if request.url.path.startswith("/api/"):
        return JSONResponse({"error": "forbidden", "message": str(exc)}, status_code=403)
    return render(request, "error.html", 403, error=str(exc))


async def _bad_request(request: Request, exc: Exception) -> Response:
    """Out-of-range or malformed parameters: 400 naming the parameter (never a 500 from the database)."""
    errors = exc.errors() if isinstance(exc, RequestValidationError) else []
    where = ", ".join(
        f"{'.'.join(str(p) for p in e.get('loc', ()) if p not in ('body', 'query', 'path'))}: {e.get('msg', '')}"
        for e in errors
    )
    if request.url.path.startswith("/api/"):
        return JSONResponse({"error": "bad_request", "message": where}, status_code=400)
    return render(request, "error.html", 400, error=f"Bad request ({where}).")
