"""Requests and responses of the stand-in Hub: the request log, scripted faults, principals, HTTP errors, pattern rules."""

from __future__ import annotations

import fnmatch
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    pass


@dataclass
class RequestRecord:
    """One request received by the stand-in, as recorded in :attr:`StandInHub.requests`.

    Attributes:
        method: HTTP method.
        path: Raw request target (path and query, still URL-encoded).
        route: Route name (see :data:`ROUTES`).
        repo_id: Repo the request addressed, if any.
        repo_type: Type of that repo, if any.
        revision: Revision in the URL, if any (URL-decoded).
        query: Decoded query parameters.
        headers: Request headers (names lower-cased).
        body: Raw request body (de-chunked).
        status: Status code answered (``None`` if the connection was dropped on purpose).
        response_body: Body answered (for ``HEAD``, the body that a ``GET`` would have carried).
        fault: The :class:`Fault` that shaped the answer, if any.
    """

    method: str
    path: str
    route: str
    repo_id: str | None
    repo_type: str | None
    revision: str | None
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: bytes
    status: int | None = None
    response_body: bytes = b""
    fault: Fault | None = None

    @property
    def token(self) -> str | None:
        """Bearer token sent with the request, if any."""
        auth = self.headers.get("authorization", "")
        return auth[len("Bearer ") :] if auth.startswith("Bearer ") else None

    def json(self) -> Any:
        """Decode the body as JSON."""
        return json.loads(self.body)

    def ndjson(self) -> list[dict[str, Any]]:
        """Decode the body as NDJSON (the commit payload)."""
        return [json.loads(line) for line in self.body.splitlines() if line.strip()]

    def response_json(self) -> Any:
        """Decode the answered body as JSON."""
        return json.loads(self.response_body)


@dataclass
class Fault:
    """A scripted failure, created by :meth:`StandInHub.inject_fault`.

    Attributes:
        route: Route name it applies to, or ``"*"`` for any route.
        status: Status code to answer with.
        message: Error message (JSON ``error`` field and ``X-Error-Message`` header).
        times: How many more matching requests it applies to (``None`` = forever).
        repo_id: Only requests addressing this repo match, if set.
        method: Only requests with this HTTP method match, if set.
        after_apply: Let the request take effect, then answer with the failure (e.g. a commit that lands
            but whose response is lost).
        drop_connection: Close the connection without any response instead of answering ``status``.
        delay: Seconds to sleep before answering (applies even without a status override if ``status`` is 0).
        headers: Extra response headers (e.g. ``{"Retry-After": "0"}``).
        error_code: Value for the ``X-Error-Code`` header, if any.
        hits: How many requests it has shaped so far.
    """

    route: str
    status: int = 500
    message: str = "Internal Error"
    times: int | None = 1
    repo_id: str | None = None
    method: str | None = None
    after_apply: bool = False
    drop_connection: bool = False
    delay: float = 0.0
    headers: dict[str, str] = field(default_factory=dict)
    error_code: str | None = None
    hits: int = 0

    def matches(self, route: str, method: str, repo_id: str | None) -> bool:
        """Return whether this fault applies to a request."""
        if self.times is not None and self.times <= 0:
            return False
        if self.route not in ("*", route):
            return False
        if self.method is not None and self.method.upper() != method:
            return False
        return self.repo_id is None or self.repo_id == repo_id


@dataclass(frozen=True)
class _Principal:
    """An authenticated caller."""

    token: str
    username: str
    can_write: bool


@dataclass
class _PendingUpload:
    """An LFS upload announced by the batch API and not completed yet."""

    repo_key: tuple[str, str]
    oid: str
    size: int
    chunk_size: int | None = None
    parts: dict[int, bytes] = field(default_factory=dict)


class _HttpError(Exception):
    """Raised inside handlers to answer with a Hub-shaped JSON error."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        code: str | None = None,
        headers: Mapping[str, str] | None = None,
        extra: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.code = code
        self.headers = dict(headers or {})
        self.extra = dict(extra or {})


@dataclass
class _Response:
    """A response computed by a handler."""

    status: int = 200
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)

    @classmethod
    def json(cls, payload: Any, status: int = 200, headers: Mapping[str, str] | None = None) -> _Response:
        """Build a JSON response."""
        all_headers = {"Content-Type": "application/json; charset=utf-8", **(headers or {})}
        return cls(status, json.dumps(payload).encode(), all_headers)


@dataclass
class _Request:
    """A parsed incoming request."""

    method: str
    raw_path: str
    segments: list[str]
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: bytes
    route: str = "unknown"
    repo_type: str | None = None
    repo_id: str | None = None
    revision: str | None = None
    tail: list[str] = field(default_factory=list)

    def param(self, name: str, default: str | None = None) -> str | None:
        """First value of a query parameter."""
        values = self.query.get(name)
        return values[0] if values else default

    def flag(self, name: str) -> bool:
        """Interpret a query parameter as a boolean (``true``/``1``/``True``)."""
        return (self.param(name) or "").lower() in ("1", "true", "yes")

    def json_body(self) -> Any:
        """Decode the body as JSON, answering 400 if it is not."""
        try:
            return json.loads(self.body or b"{}")
        except ValueError as exc:
            raise _HttpError(400, f"Invalid JSON body: {exc}") from exc


def _pattern_matches(pattern: str, path: str) -> bool:
    """Match a .gitattributes/.gitignore-style pattern against a repo path (simplified git semantics)."""
    pattern = pattern.strip()
    if not pattern:
        return False
    if pattern.endswith("/"):
        directory = pattern.rstrip("/")
        parents = path.split("/")[:-1]
        return any(
            _pattern_matches(directory, "/".join(parents[: i + 1])) for i in range(len(parents))
        ) or any(fnmatch.fnmatchcase(part, directory) for part in parents)
    if "/" in pattern.strip("/"):
        return fnmatch.fnmatchcase(path, pattern.lstrip("/"))
    return fnmatch.fnmatchcase(path.rsplit("/", 1)[-1], pattern.lstrip("/"))


def _lfs_patterns(gitattributes: str) -> list[str]:
    """Extract the patterns marked ``filter=lfs`` from a .gitattributes file."""
    patterns = []
    for line in gitattributes.splitlines():
        parts = line.split()
        if parts and not parts[0].startswith("#") and "filter=lfs" in parts[1:]:
            patterns.append(parts[0])
    return patterns


def _ignore_patterns(gitignore: str) -> list[str]:
    """Extract the (non-negated) patterns of a .gitignore file."""
    return [
        line.strip()
        for line in gitignore.splitlines()
        if line.strip() and not line.strip().startswith(("#", "!"))
    ]
