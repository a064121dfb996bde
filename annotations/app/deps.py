"""What routes depend on: the app state, the `reviewer` (and `adjudicator`) dependency, page rendering.

Guarantees: a route that takes `Me` runs only for a logged-in reviewer (otherwise the login page, or
401 for the API); one that takes `Judge` only for an adjudicator (403 otherwise); pages render through
one autoescaping Jinja2 environment with the reviewer and flash message filled in.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Annotated, Any

from fastapi import Depends, Request
from fastapi.responses import Response
from fastapi.templating import Jinja2Templates
from jinja2 import Environment, FileSystemLoader, StrictUndefined

from annotations.app.auth import Auth, Forbidden, NotLoggedIn, Reviewer
from annotations.app.options import AppOptions
from annotations.app.pages import MESSAGES, SHORTCUTS, STATUSES
from annotations.queue import Queue

HERE = Path(__file__).parent


@dataclass(frozen=True)
class State:
    """One app's queue, authentication and options."""

    queue: Queue
    auth: Auth
    options: AppOptions


@lru_cache(maxsize=1)
def templates() -> Jinja2Templates:
    """One autoescaping Jinja2 environment per process (compiled templates are reused by every app)."""
    env = Environment(loader=FileSystemLoader(HERE / "templates"), autoescape=True, undefined=StrictUndefined)
    env.globals.update(shortcuts=SHORTCUTS, statuses=STATUSES)
    return Jinja2Templates(env=env)


def state(request: Request) -> State:
    """The app's state."""
    return request.app.state.review


def reviewer(request: Request, st: Annotated[State, Depends(state)]) -> Reviewer:
    """The logged-in reviewer.

    Raises:
        NotLoggedIn: no valid cookie or token.
    """
    me = st.auth.reviewer(request)
    if me is None:
        raise NotLoggedIn
    return me


def adjudicator(me: Annotated[Reviewer, Depends(reviewer)]) -> Reviewer:
    """The logged-in reviewer, who must be an adjudicator.

    Raises:
        Forbidden: a reviewer without the role.
    """
    if not me.adjudicator:
        raise Forbidden("only adjudicators may do this")
    return me


St = Annotated[State, Depends(state)]
Me = Annotated[Reviewer, Depends(reviewer)]
Judge = Annotated[Reviewer, Depends(adjudicator)]


def render(request: Request, name: str, status: int = 200, **ctx: Any) -> Response:
    """A page from `templates/`, with the reviewer and the flash message (from fixed keys only)."""
    st = state(request)
    ctx.setdefault("reviewer", st.auth.reviewer(request))
    ctx.setdefault("message", MESSAGES.get(request.query_params.get("msg", ""), ""))
    return templates().TemplateResponse(request, name, ctx, status_code=status)
