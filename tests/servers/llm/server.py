"""The stand-in OpenAI + Anthropic server: lifecycle, fault scripting, latency and the request log."""

from __future__ import annotations

import collections
import contextlib
import socket
import threading

from tests.servers.llm.batches import _BatchesMixin
from tests.servers.llm.dispatch import _DispatchMixin
from tests.servers.llm.faults import Fault
from tests.servers.llm.protocol import ROUTES, Responder
from tests.servers.llm.replies import _RepliesMixin
from tests.servers.llm.requests import RecordedRequest
from tests.servers.llm.responders import default_responder
from tests.servers.llm.wire import _AnthropicBatch, _Handler, _HTTPServer, _OpenAIBatch, _StoredFile


class LLMStandInServer(_DispatchMixin, _RepliesMixin, _BatchesMixin):
    """Stand-in OpenAI + Anthropic server on ``127.0.0.1`` for the real SDKs.

    Use it as a context manager (or call :meth:`start`/:meth:`stop`)::

        with LLMStandInServer() as server:
            client = openai.OpenAI(base_url=server.openai_base_url, api_key="test-key")
            anthropic_client = anthropic.Anthropic(
                base_url=server.anthropic_base_url, api_key="test-key")

    Attributes:
        responder: The :data:`Responder` producing assistant text; may be
            replaced at any time.
        openai_api_key: Bearer key OpenAI routes accept (None: any non-empty key).
        anthropic_api_key: Key Anthropic routes accept in ``x-api-key`` or
            ``Authorization: Bearer`` (None: any non-empty key).
        batch_in_progress_polls: How many retrieve polls report ``in_progress``
            before a batch finishes.  OpenAI: create says ``validating``, the
            next poll ``in_progress`` (this many times), then ``completed``.
            Anthropic: create says ``in_progress``, polls repeat it this many
            times, then ``ended``.
        model_name: Model reported when a request names none.
        errors: Messages of exceptions raised while handling requests,
            including responder exceptions (which are answered with a 500).
    """

    def __init__(
        self,
        *,
        responder: Responder | None = None,
        openai_api_key: str | None = "test-key",
        anthropic_api_key: str | None = "test-key",
        latency: float = 0.0,
        batch_in_progress_polls: int = 1,
        host: str = "127.0.0.1",
    ) -> None:
        """Creates the server (not yet listening; see :meth:`start`).

        Args:
            responder: Produces the assistant text; :func:`default_responder`
                when None.
            openai_api_key: Accepted OpenAI key (None: any non-empty key).
            anthropic_api_key: Accepted Anthropic key (None: any non-empty key).
            latency: Seconds added to every request (see :meth:`set_latency`).
            batch_in_progress_polls: Polls reporting ``in_progress`` per batch.
            host: Loopback address to bind; the port is always chosen by the OS.
        """
        self.responder: Responder = responder or default_responder
        self.openai_api_key = openai_api_key
        self.anthropic_api_key = anthropic_api_key
        self.batch_in_progress_polls = batch_in_progress_polls
        self.model_name = "standin-model"
        self.errors: list[str] = []
        self._host = host
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._connections: set = set()
        self._latency_default = float(latency)
        self._latency_by_route: dict[str, float] = {}
        self._holds: dict[str, int] = {}
        self._released = threading.Event()
        self._faults: dict[str, collections.deque[Fault]] = collections.defaultdict(collections.deque)
        self._log: list[RecordedRequest] = []
        self._counts: collections.Counter = collections.Counter()
        self._files: dict[str, _StoredFile] = {}
        self._openai_batches: dict[str, _OpenAIBatch] = {}
        self._anthropic_batches: dict[str, _AnthropicBatch] = {}

    # -- lifecycle ---------------------------------------------------------- #

    def start(self) -> LLMStandInServer:
        """Binds port 0 on the host and serves in a daemon thread.

        Returns:
            self, for chaining.
        """
        if self._httpd is not None:
            return self
        self._stopping.clear()
        httpd = _HTTPServer((self._host, 0), _Handler)
        httpd.owner = self
        self._httpd = httpd
        self._thread = threading.Thread(
            target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, name="llm-standin", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stops serving, wakes sleeping faults and closes every open connection.

        Clients that still pool a connection to the server get connection
        errors afterwards, as they would from a vanished host.
        """
        httpd, self._httpd = self._httpd, None
        if httpd is None:
            return
        self._stopping.set()
        self._released.set()
        httpd.shutdown()
        httpd.server_close()
        with self._lock:
            connections = list(self._connections)
        for conn in connections:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> LLMStandInServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # -- addresses ---------------------------------------------------------- #

    @property
    def port(self) -> int:
        """The TCP port the server listens on."""
        if self._httpd is None:
            raise RuntimeError("server is not running; call start() or use it as a context manager")
        return int(self._httpd.server_address[1])

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>`` (no path)."""
        return f"http://{self._host}:{self.port}"

    @property
    def openai_base_url(self) -> str:
        """Base URL for ``openai.OpenAI(base_url=...)`` (ends in ``/v1``)."""
        return f"{self.base_url}/v1"

    @property
    def anthropic_base_url(self) -> str:
        """Base URL for ``anthropic.Anthropic(base_url=...)`` (SDK adds ``/v1``)."""
        return self.base_url

    # -- scripting ---------------------------------------------------------- #

    @staticmethod
    def _check_route(route: str) -> None:
        if route not in ROUTES:
            raise ValueError(f"unknown route {route!r}; expected one of {', '.join(ROUTES)}")

    def add_faults(self, route: str, *faults: Fault) -> None:
        """Queues faults for a route; each request to it consumes the next one.

        Faults apply after authentication succeeds; once the queue is empty the
        route answers normally again.

        Args:
            route: A name from :data:`ROUTES`, e.g. ``"chat.completions.create"``.
            *faults: Faults, applied in order.

        Raises:
            ValueError: For an unknown route name.
        """
        self._check_route(route)
        with self._lock:
            self._faults[route].extend(faults)

    def pending_faults(self, route: str | None = None) -> int:
        """Number of queued faults for a route (all routes when None)."""
        with self._lock:
            if route is None:
                return sum(len(q) for q in self._faults.values())
            return len(self._faults.get(route, ()))

    def clear_faults(self) -> None:
        """Drops every queued fault."""
        with self._lock:
            self._faults.clear()

    @property
    def latency(self) -> float:
        """Seconds added to every request without a per-route latency."""
        return self._latency_default

    @latency.setter
    def latency(self, seconds: float) -> None:
        self.set_latency(seconds)

    def set_latency(self, seconds: float, *routes: str) -> None:
        """Adds a fixed delay before answering (e.g. 0.1 for throughput benchmarks).

        Requests are served concurrently, so N parallel clients see roughly
        N / ``seconds`` requests per second.

        Args:
            seconds: Delay in seconds (0 disables).
            *routes: Limit the delay to these routes; all routes when empty.

        Raises:
            ValueError: For an unknown route name.
        """
        for route in routes:
            self._check_route(route)
        with self._lock:
            if routes:
                self._latency_by_route.update({route: float(seconds) for route in routes})
            else:
                self._latency_default = float(seconds)

    def hold(self, route: str, nth: int) -> None:
        """Holds the route's `nth` request (counted as :meth:`count` counts) until :meth:`reset` or
        :meth:`stop`: it is logged, never answered, and its connection is then closed.

        A test that kills a client while a request is in flight needs that request to stay in
        flight however late the kill comes (a latency only gives a window, which a busy machine
        can miss).

        Raises:
            ValueError: For an unknown route name.
        """
        self._check_route(route)
        with self._lock:
            self._holds[route] = nth

    # -- inspection --------------------------------------------------------- #

    @property
    def requests(self) -> list[RecordedRequest]:
        """Snapshot of all recorded requests, oldest first."""
        with self._lock:
            return list(self._log)

    def requests_for(self, route: str) -> list[RecordedRequest]:
        """Snapshot of the recorded requests to one route, oldest first."""
        with self._lock:
            return [r for r in self._log if r.route == route]

    def count(self, route: str | None = None) -> int:
        """Number of requests received for a route (all requests when None)."""
        with self._lock:
            return sum(self._counts.values()) if route is None else self._counts.get(route, 0)

    @property
    def counts(self) -> dict[str, int]:
        """Requests received per route name (unknown paths under ``"unknown"``)."""
        with self._lock:
            return dict(self._counts)

    def reset(self) -> None:
        """Clears the log, counters, faults, latency, holds (dropping held requests), stored files and batches."""
        with self._lock:
            self._log.clear()
            self._counts.clear()
            self._faults.clear()
            self._latency_default = 0.0
            self._latency_by_route.clear()
            self._holds.clear()
            released, self._released = self._released, threading.Event()
            released.set()  # held requests are let go (and dropped)
            self._files.clear()
            self._openai_batches.clear()
            self._anthropic_batches.clear()
            self.errors.clear()

    # -- request handling --------------------------------------------------- #

    def _track(self, conn: socket.socket, *, add: bool) -> None:
        with self._lock:
            if add:
                self._connections.add(conn)
            else:
                self._connections.discard(conn)
