"""The review web app (FastAPI, server-rendered Jinja2 pages): `create_app(queue, tokens=...)`, `serve(...)`.

Importing this package imports FastAPI; the rest of `annotations` does not, so the build flow can
enqueue without loading the web stack.
"""

from annotations.app.main import CSP, create_app
from annotations.app.server import serve

__all__ = ["CSP", "create_app", "serve"]
