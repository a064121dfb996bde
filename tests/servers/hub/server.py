"""The stand-in Hugging Face Hub: lifecycle, tokens, fault scripting and the request log."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Iterable, Mapping
from http.server import ThreadingHTTPServer
from typing import Any

from tests.servers.hub.constants import ROUTES
from tests.servers.hub.dispatch import _DispatchMixin
from tests.servers.hub.model import Repo
from tests.servers.hub.records import Fault, RequestRecord, _PendingUpload, _Principal
from tests.servers.hub.routes_api import _ApiRoutesMixin
from tests.servers.hub.routes_upload import _UploadRoutesMixin
from tests.servers.hub.state import _StateMixin
from tests.servers.hub.transport import _Handler


class StandInHub(_StateMixin, _DispatchMixin, _ApiRoutesMixin, _UploadRoutesMixin):
    """A stand-in Hugging Face Hub served over HTTP on ``127.0.0.1``.

    Use it as a context manager (or call :meth:`start` / :meth:`stop`)::

        with StandInHub(token="hf_test") as hub:
            api = HfApi(endpoint=hub.endpoint, token=hub.token)
            api.create_repo("aptforge/bench", repo_type="dataset", private=True)

    Args:
        token: The valid write token. Requests carrying any other bearer token get the Hub's
            ``401 Invalid credentials in Authorization header``.
        username: User name owning :attr:`token` (commit author, default namespace, ``whoami``).
        read_tokens: Additional tokens that may read (private repos included) but not write (``403`` on writes).
        lfs_threshold: Files of at least this many bytes must go through LFS (the Hub uses 10 MiB). Binary
            files (a NUL byte in the first 512 bytes) and paths matched by a ``filter=lfs`` rule of the
            revision's ``.gitattributes`` also go through LFS.
        lfs_multipart_chunk_size: If set, LFS objects larger than this are offered the multipart transfer
            (parts of this size plus a completion call) instead of a single PUT.
        lfs_verify: Whether LFS batch answers include a ``verify`` action (the client then calls it).
        commits_page_size: Page size of the commit listing (the Hub uses 50).
        tree_page_size: Page size of the tree listing (the Hub uses 1000, 50 with ``expand``).
        initial_gitattributes: Whether :meth:`create_repo` makes an "initial commit" holding
            :data:`DEFAULT_GITATTRIBUTES` as the real Hub does (``False``: an empty initial commit).

    Attributes:
        host: Always ``"127.0.0.1"``.
        port: Port chosen by the OS (available once started).
        endpoint: ``http://127.0.0.1:<port>``: pass it as ``HfApi(endpoint=...)`` / ``endpoint=``.
        token: The valid write token.
        username: Owner of :attr:`token`.
        requests: Every request received, in arrival order (see :class:`RequestRecord`).
        faults: Scripted faults still armed or already spent (see :meth:`inject_fault`).
        repos: The store: ``(repo_type, repo_id)`` -> :class:`Repo`.
    """

    def __init__(
        self,
        token: str = "hf_stand_in_write_token",
        *,
        username: str = "aptforge-bot",
        read_tokens: Iterable[str] = (),
        lfs_threshold: int = 10 * 1024 * 1024,
        lfs_multipart_chunk_size: int | None = None,
        lfs_verify: bool = True,
        commits_page_size: int = 50,
        tree_page_size: int = 1000,
        initial_gitattributes: bool = True,
    ) -> None:
        self.host = "127.0.0.1"
        self.port: int | None = None
        self.token = token
        self.username = username
        self.lfs_threshold = lfs_threshold
        self.lfs_multipart_chunk_size = lfs_multipart_chunk_size
        self.lfs_verify = lfs_verify
        self.commits_page_size = commits_page_size
        self.tree_page_size = tree_page_size
        self.initial_gitattributes = initial_gitattributes
        self.requests: list[RequestRecord] = []
        self.faults: list[Fault] = []
        self.repos: dict[tuple[str, str], Repo] = {}
        self._principals: dict[str, _Principal] = {token: _Principal(token, username, True)}
        for read_token in read_tokens:
            self._principals[read_token] = _Principal(read_token, username, False)
        self._uploads: dict[str, _PendingUpload] = {}
        self._lock = threading.RLock()
        self._counter = itertools.count()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle ------------------------------------------------------------------------------------------

    @property
    def endpoint(self) -> str:
        """Base URL of the running stand-in (``http://127.0.0.1:<port>``)."""
        if self.port is None:
            raise RuntimeError("StandInHub is not started")
        return f"http://{self.host}:{self.port}"

    def start(self) -> StandInHub:
        """Bind ``127.0.0.1:0`` and serve in a daemon thread.

        Returns:
            ``self``, for chaining.
        """
        if self._server is not None:
            return self
        handler = type("_BoundHandler", (_Handler,), {"hub": self})
        server = ThreadingHTTPServer((self.host, 0), handler)
        server.daemon_threads = True
        self._server = server
        self.port = server.server_address[1]
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05}, name="stand-in-hub", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and release the port."""
        if self._server is None:
            return
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._server = None
        self._thread = None

    def __enter__(self) -> StandInHub:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def client_env(self) -> dict[str, str]:
        """Environment variables pointing a *fresh* ``huggingface_hub`` process (e.g. a CLI) at this stand-in.

        Returns:
            ``HF_ENDPOINT``, ``HF_TOKEN``, ``HF_HUB_DISABLE_XET=1`` and ``HF_HUB_DISABLE_TELEMETRY=1``.
        """
        return {
            "HF_ENDPOINT": self.endpoint,
            "HF_TOKEN": self.token,
            "HF_HUB_DISABLE_XET": "1",
            "HF_HUB_DISABLE_TELEMETRY": "1",
        }

    def client(self, token: str | bool | None = None) -> Any:
        """Build a real ``huggingface_hub.HfApi`` aimed at this stand-in (imports the client lazily).

        Args:
            token: Token to use; defaults to :attr:`token`. ``False`` sends no token.

        Returns:
            An ``HfApi`` instance with ``endpoint=self.endpoint``.
        """
        from huggingface_hub import HfApi

        return HfApi(endpoint=self.endpoint, token=self.token if token is None else token)

    # -- tokens ---------------------------------------------------------------------------------------------

    def add_token(self, token: str, *, write: bool = True, username: str | None = None) -> None:
        """Accept another token.

        Args:
            token: The token value.
            write: Whether it may write (otherwise writes answer ``403``).
            username: Its user name (defaults to :attr:`username`).
        """
        with self._lock:
            self._principals[token] = _Principal(token, username or self.username, write)

    def revoke_token(self, token: str) -> None:
        """Make a token invalid from now on (its requests then get ``401``)."""
        with self._lock:
            self._principals.pop(token, None)

    # -- faults and request log -----------------------------------------------------------------------------

    def inject_fault(
        self,
        route: str,
        status: int = 500,
        *,
        message: str | None = None,
        times: int | None = 1,
        repo_id: str | None = None,
        method: str | None = None,
        after_apply: bool = False,
        drop_connection: bool = False,
        delay: float = 0.0,
        headers: Mapping[str, str] | None = None,
        error_code: str | None = None,
    ) -> Fault:
        """Script a failure for upcoming requests on a route.

        Faults are checked in creation order and the first armed match wins. Note the client retries some
        routes itself (``http_backoff``: 1 s, 2 s, 4 s... on 408/429/5xx for ``preupload``, ``lfs_batch``,
        ``lfs_upload``, ``lfs_verify``, ``tree``, ``commits``), while ``commit``, ``create_repo``,
        ``create_tag``, ``refs`` and ``repo_info`` surface the first error.

        Args:
            route: Route name from :data:`ROUTES`, or ``"*"``.
            status: Status to answer with. ``0`` keeps the real answer (useful with ``delay``).
            message: Error message; defaults to the standard reason phrase.
            times: Number of matching requests to affect (``None``: all of them).
            repo_id: Restrict to requests addressing this repo.
            method: Restrict to this HTTP method.
            after_apply: Process the request normally (so a commit lands), then answer with the failure.
            drop_connection: Close the connection without answering.
            delay: Sleep this many seconds before answering.
            headers: Extra headers on the failure response.
            error_code: ``X-Error-Code`` to send (e.g. ``"RepoNotFound"``).

        Returns:
            The armed :class:`Fault` (its ``hits`` counts how often it fired).

        Raises:
            ValueError: If ``route`` is unknown.
        """
        if route != "*" and route not in ROUTES:
            raise ValueError(f"Unknown route {route!r}; expected one of {sorted(ROUTES)} or '*'")
        from http import HTTPStatus

        default_message = HTTPStatus(status).phrase if status else ""
        fault = Fault(
            route=route,
            status=status,
            message=message if message is not None else default_message,
            times=times,
            repo_id=repo_id,
            method=method,
            after_apply=after_apply,
            drop_connection=drop_connection,
            delay=delay,
            headers=dict(headers or {}),
            error_code=error_code,
        )
        with self._lock:
            self.faults.append(fault)
        return fault

    def fail_next_commit(
        self, status: int = 500, *, after_apply: bool = False, message: str | None = None
    ) -> Fault:
        """Make the next ``commit`` request fail (shorthand for :meth:`inject_fault`).

        Args:
            status: Status to answer with.
            after_apply: Let the commit land before answering with the failure.
            message: Error message.

        Returns:
            The armed :class:`Fault`.
        """
        return self.inject_fault("commit", status, after_apply=after_apply, message=message)

    def clear_faults(self) -> None:
        """Disarm and forget every scripted fault."""
        with self._lock:
            self.faults.clear()

    def requests_for(self, route: str | None = None, *, method: str | None = None) -> list[RequestRecord]:
        """Return the logged requests for a route (and method), in arrival order."""
        with self._lock:
            return [
                record
                for record in self.requests
                if (route is None or record.route == route) and (method is None or record.method == method)
            ]

    def clear_requests(self) -> None:
        """Forget the request log."""
        with self._lock:
            self.requests.clear()
