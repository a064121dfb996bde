"""Log in and out (cookie), health check, favicon."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Form, Request
from fastapi.responses import RedirectResponse, Response

from annotations.app.auth import COOKIE
from annotations.app.deps import St, render

router = APIRouter()


@router.get("/healthz")
def healthz() -> dict[str, bool]:
    """Liveness."""
    return {"ok": True}


@router.get("/favicon.ico")
def favicon() -> Response:
    """No icon (the CSP allows nothing external)."""
    return Response(status_code=204)


@router.get("/login")
def login_form(request: Request, st: St) -> Response:
    """The login form (a name in open mode, a token otherwise)."""
    return render(request, "login.html", open_mode=st.auth.open, error="")


@router.post("/login")
def login(
    request: Request,
    st: St,
    name: Annotated[str, Form(max_length=64)] = "",
    token: Annotated[str, Form(max_length=512)] = "",
) -> Response:
    """Check the name or token and set the HttpOnly, SameSite=Strict session cookie."""
    value = st.auth.login_value(name.strip(), token.strip())
    if value is None:
        error = "Unknown token." if not st.auth.open else "Use a plain name (letters, digits, . _ @ -)."
        return render(request, "login.html", 401, open_mode=st.auth.open, error=error, reviewer=None)
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


@router.post("/logout")
def logout() -> Response:
    """Drop the session cookie."""
    response = RedirectResponse("/login", status_code=303)
    response.delete_cookie(COOKIE)
    return response
