"""The review web app (FastAPI routers, server-rendered Jinja2 pages): `create_app(queue, ...)`, `serve(...)`.

Importing this package imports FastAPI; the rest of `annotations` does not, so the build flow can
enqueue without loading the web stack.
"""

from annotations.app.main import create_app
from annotations.app.options import AppOptions
from annotations.app.security import CSP
from annotations.app.server import serve

__all__ = ["CSP", "AppOptions", "create_app", "serve"]
