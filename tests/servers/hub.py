"""In-process stand-in for the Hugging Face Hub HTTP API, for tests.

Why this exists
---------------
aptforge publishes benchmark datasets with the real ``huggingface_hub`` 2.x client. Tests cannot reach the
internet, and mocking the client would only test our assumptions about it. This module runs a small HTTP
server (standard library only: :class:`http.server.ThreadingHTTPServer` in a background thread, bound to
``127.0.0.1`` on an ephemeral port) that speaks the subset of the Hub protocol the client uses for publishing,
so tests drive the *unmodified* client end to end: repo creation, preupload, the Git LFS batch/upload/verify
flow, the NDJSON commit endpoint, tags, refs, commit listing, tree listing, repo info and file download.

Every wire detail here was taken from the ``huggingface_hub`` 2.4.0 sources (``hf_api.py``, ``_commit_api.py``,
``lfs.py``, ``file_download.py``, ``utils/_http.py``); error statuses and messages copy what the real Hub
sends where it is known (e.g. ``412`` + ``"A commit has happened since. Please refresh and try again."`` for a
stale ``parent_commit``, ``401`` + ``"Invalid credentials in Authorization header"`` for a bad token, and the
``X-Error-Code`` header the client uses to pick ``RepositoryNotFoundError`` / ``RevisionNotFoundError`` /
``RemoteEntryNotFoundError``).

Pointing the client at it
-------------------------
``huggingface_hub`` reads ``HF_ENDPOINT`` once, at import time (``huggingface_hub.constants.ENDPOINT``), and
the stand-in's port is only known once it is running, so in-process code must pass the endpoint explicitly::

    with StandInHub() as hub:
        api = HfApi(endpoint=hub.endpoint, token=hub.token)
        hf_hub_download(repo_id, "data.parquet", repo_type="dataset", endpoint=hub.endpoint, token=hub.token)

``HF_HUB_DISABLE_XET=1`` must be in the environment *before* ``huggingface_hub`` is first imported
(``constants.HF_HUB_DISABLE_XET`` is read at import): in 2.x the client uploads every LFS file through Xet
whenever the ``hf_xet`` package is installed, without asking the server. The stand-in does not implement
Xet; it answers the Xet token routes with ``501`` and a message saying so. :func:`ensure_client_compatible`
checks this up front. Setting ``HF_HUB_DISABLE_TELEMETRY=1`` too avoids a one-off fetch of
``{HF_ENDPOINT}/api/agent-harnesses`` (made while building the User-Agent). Subprocesses (e.g. a CLI under
test) can use env vars instead: :meth:`StandInHub.client_env` returns them.

Client behaviour worth knowing (huggingface_hub 2.4.0)
------------------------------------------------------
* A stale ``parent_commit`` raises a plain ``HfHubHTTPError`` (``.response.status_code == 412``); a bad token
  raises a plain ``HfHubHTTPError`` with 401 (the client maps 401 to ``RepositoryNotFoundError`` only when
  ``X-Error-Code: RepoNotFound`` is sent, which the Hub, and this stand-in, do for anonymous access to a
  private or missing repo); an existing tag raises ``HfHubHTTPError`` with 409.
* ``commit``, ``create_repo``, ``create_tag``, ``refs`` and ``repo_info`` calls are not retried; ``preupload``,
  the LFS calls and the paginated listings go through ``http_backoff`` (retries 408/429/5xx after 1 s, 2 s...).
* A dropped connection surfaces as ``httpx2.RemoteProtocolError`` (a transport error, not ``HfHubHTTPError``).
* Re-adding an unchanged LFS file still calls the LFS batch API (answered without upload actions); the file is
  then dropped from the commit payload.

Routes (names used by the request log and fault scripting)
----------------------------------------------------------
==================  =====================================================================
``whoami``          ``GET  /api/whoami-v2``
``create_repo``     ``POST /api/repos/create``
``delete_repo``     ``DELETE /api/repos/delete``
``validate_yaml``   ``POST /api/validate-yaml`` (called by ``create_commit`` for README.md)
``agent_harnesses`` ``GET  /api/agent-harnesses``
``repo_info``       ``GET  /api/{type}s/{repo}[/revision/{rev}]``
``preupload``       ``POST /api/{type}s/{repo}/preupload/{rev}``
``commit``          ``POST /api/{type}s/{repo}/commit/{rev}`` (NDJSON)
``create_tag``      ``POST /api/{type}s/{repo}/tag/{rev}``
``delete_tag``      ``DELETE /api/{type}s/{repo}/tag/{tag}``
``create_branch``   ``POST /api/{type}s/{repo}/branch/{branch}``
``delete_branch``   ``DELETE /api/{type}s/{repo}/branch/{branch}``
``refs``            ``GET  /api/{type}s/{repo}/refs``
``commits``         ``GET  /api/{type}s/{repo}/commits/{rev}`` (paginated with ``Link: rel="next"``)
``tree``            ``GET  /api/{type}s/{repo}/tree/{rev}[/{path}]`` (paginated)
``paths_info``      ``POST /api/{type}s/{repo}/paths-info/{rev}``
``xet_token``       ``GET  /api/{type}s/{repo}/xet-{read,write}-token/{rev}`` -> always 501
``lfs_batch``       ``POST /[{type}s/]{repo}.git/info/lfs/objects/batch``
``lfs_verify``      ``POST /[{type}s/]{repo}.git/info/lfs/objects/verify``
``lfs_upload``      ``PUT/POST /_stand_in/lfs-upload/{id}[/part/{n}]`` (the "S3" side; no auth)
``resolve``         ``HEAD/GET /[{type}s/]{repo}/resolve/{rev}/{path}``
==================  =====================================================================

Model, dataset and space repos are all accepted; only namespaced repo ids (``"ns/name"``) are supported.
"""

from __future__ import annotations

import base64
import fnmatch
import hashlib
import itertools
import json
import secrets
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlencode, urlsplit

__all__ = [
    "DEFAULT_GITATTRIBUTES",
    "ROUTES",
    "Commit",
    "Fault",
    "Repo",
    "RequestRecord",
    "StandInHub",
    "StoredFile",
    "Tag",
    "ensure_client_compatible",
]

#: Route names accepted by :meth:`StandInHub.inject_fault` and recorded in :class:`RequestRecord`.
ROUTES: frozenset[str] = frozenset(
    {
        "whoami",
        "create_repo",
        "delete_repo",
        "validate_yaml",
        "agent_harnesses",
        "repo_info",
        "preupload",
        "commit",
        "create_tag",
        "delete_tag",
        "create_branch",
        "delete_branch",
        "refs",
        "commits",
        "tree",
        "paths_info",
        "xet_token",
        "lfs_batch",
        "lfs_verify",
        "lfs_upload",
        "resolve",
        "unknown",
    }
)

#: ``.gitattributes`` committed by the Hub in the "initial commit" of a new repo (abridged from the real one).
DEFAULT_GITATTRIBUTES = """\
*.7z filter=lfs diff=lfs merge=lfs -text
*.arrow filter=lfs diff=lfs merge=lfs -text
*.bin filter=lfs diff=lfs merge=lfs -text
*.bz2 filter=lfs diff=lfs merge=lfs -text
*.ckpt filter=lfs diff=lfs merge=lfs -text
*.ftz filter=lfs diff=lfs merge=lfs -text
*.gz filter=lfs diff=lfs merge=lfs -text
*.h5 filter=lfs diff=lfs merge=lfs -text
*.joblib filter=lfs diff=lfs merge=lfs -text
*.lfs.* filter=lfs diff=lfs merge=lfs -text
*.lz4 filter=lfs diff=lfs merge=lfs -text
*.mds filter=lfs diff=lfs merge=lfs -text
*.mlmodel filter=lfs diff=lfs merge=lfs -text
*.model filter=lfs diff=lfs merge=lfs -text
*.msgpack filter=lfs diff=lfs merge=lfs -text
*.npy filter=lfs diff=lfs merge=lfs -text
*.npz filter=lfs diff=lfs merge=lfs -text
*.onnx filter=lfs diff=lfs merge=lfs -text
*.ot filter=lfs diff=lfs merge=lfs -text
*.parquet filter=lfs diff=lfs merge=lfs -text
*.pb filter=lfs diff=lfs merge=lfs -text
*.pickle filter=lfs diff=lfs merge=lfs -text
*.pkl filter=lfs diff=lfs merge=lfs -text
*.pt filter=lfs diff=lfs merge=lfs -text
*.pth filter=lfs diff=lfs merge=lfs -text
*.rar filter=lfs diff=lfs merge=lfs -text
*.safetensors filter=lfs diff=lfs merge=lfs -text
saved_model/**/* filter=lfs diff=lfs merge=lfs -text
*.tar.* filter=lfs diff=lfs merge=lfs -text
*.tar filter=lfs diff=lfs merge=lfs -text
*.tflite filter=lfs diff=lfs merge=lfs -text
*.tgz filter=lfs diff=lfs merge=lfs -text
*.wasm filter=lfs diff=lfs merge=lfs -text
*.xz filter=lfs diff=lfs merge=lfs -text
*.zip filter=lfs diff=lfs merge=lfs -text
*.zst filter=lfs diff=lfs merge=lfs -text
*tfevents* filter=lfs diff=lfs merge=lfs -text
# Audio files - uncompressed
*.pcm filter=lfs diff=lfs merge=lfs -text
*.sam filter=lfs diff=lfs merge=lfs -text
*.raw filter=lfs diff=lfs merge=lfs -text
# Audio files - compressed
*.aac filter=lfs diff=lfs merge=lfs -text
*.flac filter=lfs diff=lfs merge=lfs -text
*.mp3 filter=lfs diff=lfs merge=lfs -text
*.ogg filter=lfs diff=lfs merge=lfs -text
*.wav filter=lfs diff=lfs merge=lfs -text
# Image files - uncompressed
*.bmp filter=lfs diff=lfs merge=lfs -text
*.gif filter=lfs diff=lfs merge=lfs -text
*.png filter=lfs diff=lfs merge=lfs -text
*.tiff filter=lfs diff=lfs merge=lfs -text
# Image files - compressed
*.jpg filter=lfs diff=lfs merge=lfs -text
*.jpeg filter=lfs diff=lfs merge=lfs -text
*.webp filter=lfs diff=lfs merge=lfs -text
# Video files - compressed
*.mp4 filter=lfs diff=lfs merge=lfs -text
*.webm filter=lfs diff=lfs merge=lfs -text
"""

_REPO_TYPE_BY_PLURAL = {"models": "model", "datasets": "dataset", "spaces": "space"}
_URL_PREFIX_BY_TYPE = {"model": "", "dataset": "datasets/", "space": "spaces/"}
_STALE_PARENT_MESSAGE = "A commit has happened since. Please refresh and try again."
_INVALID_CREDENTIALS_MESSAGE = "Invalid credentials in Authorization header"
_LFS_POINTER_TEMPLATE = "version https://git-lfs.github.com/spec/v1\noid sha256:{oid}\nsize {size}\n"
_HEX = frozenset("0123456789abcdef")


# --------------------------------------------------------------------------------------------------------------
# Data model
# --------------------------------------------------------------------------------------------------------------


def _git_blob_oid(data: bytes) -> str:
    """Return the git blob object id (sha1 of ``"blob <len>\\0" + data``) of ``data``."""
    return hashlib.sha1(b"blob %d\x00" % len(data) + data).hexdigest()


def _iso(moment: datetime) -> str:
    """Format a datetime the way the Hub does (``2024-01-31T12:00:00.123Z``)."""
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def _is_hex(value: str, length: int | None = None) -> bool:
    """Return whether ``value`` is lowercase/uppercase hex (of exactly ``length`` chars if given)."""
    return bool(value) and set(value.lower()) <= _HEX and (length is None or len(value) == length)


@dataclass(frozen=True)
class StoredFile:
    """One file version stored in a commit snapshot.

    Attributes:
        path: Path of the file in the repo (POSIX, no leading slash).
        content: Raw bytes of the file (the real content, also for LFS files).
        lfs: Whether the file is stored through Git LFS (the git tree then holds a pointer file).
    """

    path: str
    content: bytes
    lfs: bool = False

    @property
    def size(self) -> int:
        """Size in bytes of the real content."""
        return len(self.content)

    @property
    def sha256(self) -> str:
        """Hex sha256 of the content (the LFS oid)."""
        return hashlib.sha256(self.content).hexdigest()

    @property
    def pointer(self) -> bytes:
        """Git LFS pointer file content (only meaningful when :attr:`lfs` is true)."""
        return _LFS_POINTER_TEMPLATE.format(oid=self.sha256, size=self.size).encode()

    @property
    def git_oid(self) -> str:
        """Git blob id of what git stores: the content, or the pointer file for LFS files."""
        return _git_blob_oid(self.pointer if self.lfs else self.content)

    @property
    def etag(self) -> str:
        """ETag the Hub serves on ``resolve``: the git blob id, or the sha256 for LFS files."""
        return self.sha256 if self.lfs else self.git_oid


@dataclass(frozen=True)
class Commit:
    """One commit; holds a full snapshot of the tree so any revision can be served directly.

    Attributes:
        oid: 40-char sha1 hex commit id.
        parent: Parent commit id, ``None`` for the initial commit (history is linear).
        title: Commit summary (``commit_message`` on the client).
        message: Commit description (``commit_description`` on the client).
        author: User name of the author (``"system"`` for the initial commit).
        date: Commit time (UTC).
        files: Snapshot of every file at this commit, by path.
    """

    oid: str
    parent: str | None
    title: str
    message: str
    author: str
    date: datetime
    files: Mapping[str, StoredFile]


@dataclass(frozen=True)
class Tag:
    """A lightweight or annotated tag.

    Attributes:
        name: Tag name (e.g. ``"v1"``).
        target: Commit id the tag points to.
        message: Tag message, if one was given.
    """

    name: str
    target: str
    message: str | None = None


@dataclass
class Repo:
    """In-memory state of one repository.

    Attributes:
        repo_type: ``"model"``, ``"dataset"`` or ``"space"``.
        repo_id: ``"namespace/name"``.
        private: Visibility flag.
        created_at: Creation time (UTC).
        commits: Every commit, by oid.
        branches: Branch name -> head commit id.
        tags: Tag name -> :class:`Tag`.
        lfs_objects: LFS store of the repo: sha256 hex -> content.
    """

    repo_type: str
    repo_id: str
    private: bool
    created_at: datetime
    commits: dict[str, Commit] = field(default_factory=dict)
    branches: dict[str, str] = field(default_factory=dict)
    tags: dict[str, Tag] = field(default_factory=dict)
    lfs_objects: dict[str, bytes] = field(default_factory=dict)

    def resolve(self, revision: str) -> Commit | None:
        """Resolve a branch, tag, ``refs/heads/*``, ``refs/tags/*``, full or abbreviated commit id.

        Args:
            revision: The revision to resolve (already URL-decoded).

        Returns:
            The commit, or ``None`` if the revision does not exist (or an abbreviation is ambiguous).
        """
        name = revision
        if name.startswith("refs/heads/"):
            name = name[len("refs/heads/") :]
            return self.commits[self.branches[name]] if name in self.branches else None
        if name.startswith("refs/tags/"):
            name = name[len("refs/tags/") :]
            return self.commits[self.tags[name].target] if name in self.tags else None
        if name in self.branches:
            return self.commits[self.branches[name]]
        if name in self.tags:
            return self.commits[self.tags[name].target]
        if _is_hex(name) and 5 <= len(name) <= 40:
            matches = [oid for oid in self.commits if oid.startswith(name.lower())]
            if len(matches) == 1:
                return self.commits[matches[0]]
        return None

    def history(self, commit: Commit) -> list[Commit]:
        """Return ``commit`` and its ancestors, newest first."""
        out: list[Commit] = []
        current: Commit | None = commit
        while current is not None:
            out.append(current)
            current = self.commits[current.parent] if current.parent else None
        return out

    @property
    def url_path(self) -> str:
        """Path of the repo's web page under the endpoint (``datasets/ns/name`` for a dataset)."""
        return f"{_URL_PREFIX_BY_TYPE[self.repo_type]}{self.repo_id}"


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


# --------------------------------------------------------------------------------------------------------------
# Server
# --------------------------------------------------------------------------------------------------------------


class StandInHub:
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

    # -- store helpers (server-side, no HTTP) ---------------------------------------------------------------

    def create_repo(
        self, repo_id: str, *, repo_type: str = "dataset", private: bool = False, exist_ok: bool = False
    ) -> Repo:
        """Create a repo directly in the store (same effect as the ``create_repo`` route).

        Args:
            repo_id: ``"namespace/name"``.
            repo_type: ``"model"``, ``"dataset"`` or ``"space"``.
            private: Visibility.
            exist_ok: Return the existing repo instead of raising.

        Returns:
            The repo.

        Raises:
            ValueError: If it already exists and ``exist_ok`` is false, or the id/type is invalid.
        """
        if repo_type not in _URL_PREFIX_BY_TYPE or repo_id.count("/") != 1:
            raise ValueError(f"Invalid repo {repo_type}:{repo_id}")
        with self._lock:
            key = (repo_type, repo_id)
            if key in self.repos:
                if exist_ok:
                    return self.repos[key]
                raise ValueError(f"Repo {repo_type}:{repo_id} already exists")
            repo = Repo(repo_type, repo_id, private, datetime.now(UTC))
            files = (
                {".gitattributes": StoredFile(".gitattributes", DEFAULT_GITATTRIBUTES.encode())}
                if self.initial_gitattributes
                else {}
            )
            initial = self._new_commit(repo, None, files, "initial commit", "", "system")
            repo.branches["main"] = initial.oid
            self.repos[key] = repo
            return repo

    def get_repo(self, repo_id: str, *, repo_type: str = "dataset") -> Repo:
        """Return a repo from the store.

        Raises:
            KeyError: If it does not exist.
        """
        with self._lock:
            return self.repos[(repo_type, repo_id)]

    def head(self, repo_id: str, *, repo_type: str = "dataset", branch: str = "main") -> str:
        """Return the head commit id of a branch."""
        with self._lock:
            return self.get_repo(repo_id, repo_type=repo_type).branches[branch]

    def history(self, repo_id: str, *, repo_type: str = "dataset", revision: str = "main") -> list[Commit]:
        """Return the commits reachable from a revision, newest first."""
        with self._lock:
            repo = self.get_repo(repo_id, repo_type=repo_type)
            commit = repo.resolve(revision)
            if commit is None:
                raise KeyError(revision)
            return repo.history(commit)

    def files(self, repo_id: str, *, repo_type: str = "dataset", revision: str = "main") -> dict[str, bytes]:
        """Return ``{path: content}`` of every file at a revision."""
        with self._lock:
            commit = self.get_repo(repo_id, repo_type=repo_type).resolve(revision)
            if commit is None:
                raise KeyError(revision)
            return {path: stored.content for path, stored in commit.files.items()}

    def tags(self, repo_id: str, *, repo_type: str = "dataset") -> dict[str, str]:
        """Return ``{tag: commit id}``."""
        with self._lock:
            return {
                name: tag.target for name, tag in self.get_repo(repo_id, repo_type=repo_type).tags.items()
            }

    def commit_out_of_band(
        self,
        repo_id: str,
        files: Mapping[str, bytes | str] | None = None,
        deletes: Iterable[str] = (),
        *,
        repo_type: str = "dataset",
        branch: str = "main",
        message: str = "Out-of-band commit",
        description: str = "",
        author: str = "someone-else",
        lfs: bool | None = None,
    ) -> str:
        """Commit directly to a branch, as another writer would ("the repo moved").

        Any client holding the previous head as ``parent_commit`` then gets ``412``.

        Args:
            repo_id: The repo.
            files: Files to add or replace (``str`` values are UTF-8 encoded).
            deletes: Paths to delete (missing ones are ignored).
            repo_type: Repo type.
            branch: Branch to advance.
            message: Commit title.
            description: Commit description.
            author: Author name shown in the commit listing.
            lfs: Store the added files as LFS (``None``: decide per file like ``preupload`` does).

        Returns:
            The new head commit id.
        """
        with self._lock:
            repo = self.get_repo(repo_id, repo_type=repo_type)
            head = repo.commits[repo.branches[branch]]
            snapshot = dict(head.files)
            for path in deletes:
                snapshot.pop(path, None)
            for path, content in (files or {}).items():
                data = content.encode() if isinstance(content, str) else bytes(content)
                as_lfs = self._upload_mode(head, path, len(data), data[:512]) == "lfs" if lfs is None else lfs
                if as_lfs:
                    repo.lfs_objects[hashlib.sha256(data).hexdigest()] = data
                snapshot[path] = StoredFile(path, data, as_lfs)
            commit = self._new_commit(repo, head.oid, snapshot, message, description, author)
            repo.branches[branch] = commit.oid
            return commit.oid

    # -- internals: store -----------------------------------------------------------------------------------

    def _new_commit(
        self,
        repo: Repo,
        parent: str | None,
        files: Mapping[str, StoredFile],
        title: str,
        message: str,
        author: str,
    ) -> Commit:
        """Create (and register) a commit with a fresh oid."""
        date = datetime.now(UTC)
        tree = hashlib.sha1(
            "".join(f"{path}\0{files[path].git_oid}\n" for path in sorted(files)).encode()
        ).hexdigest()
        serial = f"tree {tree}\nparent {parent}\nauthor {author} {date.isoformat()} {next(self._counter)}\n\n{title}\n\n{message}"
        commit = Commit(
            oid=hashlib.sha1(serial.encode()).hexdigest(),
            parent=parent,
            title=title,
            message=message,
            author=author,
            date=date,
            files=dict(files),
        )
        repo.commits[commit.oid] = commit
        return commit

    def _upload_mode(self, commit: Commit, path: str, size: int, sample: bytes) -> str:
        """Decide ``"lfs"`` or ``"regular"`` for a file, as the Hub's preupload does."""
        if size >= self.lfs_threshold or b"\x00" in sample:
            return "lfs"
        attributes = commit.files.get(".gitattributes")
        if attributes is not None:
            text = attributes.content.decode("utf-8", "replace")
            if any(_pattern_matches(pattern, path) for pattern in _lfs_patterns(text)):
                return "lfs"
        return "regular"

    # -- internals: request processing ----------------------------------------------------------------------

    def _handle(self, request: _Request) -> _Response | None:
        """Route, authorize, apply faults and log one request. ``None`` means: drop the connection."""
        self._classify(request)
        record = RequestRecord(
            method=request.method,
            path=request.raw_path,
            route=request.route,
            repo_id=request.repo_id,
            repo_type=request.repo_type,
            revision=request.revision,
            query=request.query,
            headers=request.headers,
            body=request.body,
        )
        with self._lock:
            self.requests.append(record)
            fault = next(
                (f for f in self.faults if f.matches(request.route, request.method, request.repo_id)), None
            )
            if fault is not None:
                fault.hits += 1
                if fault.times is not None:
                    fault.times -= 1
                record.fault = fault
        if fault is not None and fault.delay:
            time.sleep(fault.delay)
        if fault is not None and not fault.after_apply and (fault.status or fault.drop_connection):
            response = None if fault.drop_connection else self._fault_response(fault)
        else:
            try:
                response = self._dispatch(request)
            except _HttpError as exc:
                response = self._error_response(exc)
            if fault is not None and fault.after_apply and (fault.status or fault.drop_connection):
                response = None if fault.drop_connection else self._fault_response(fault)
        if response is not None:
            response.headers.setdefault(
                "X-Request-Id", request.headers.get("x-amzn-trace-id") or secrets.token_hex(8)
            )
        record.status = None if response is None else response.status
        record.response_body = b"" if response is None else response.body
        return response

    @staticmethod
    def _error_response(exc: _HttpError) -> _Response:
        """Render an :class:`_HttpError` like the Hub: JSON ``{"error": ...}`` plus ``X-Error-*`` headers."""
        header_safe = exc.message.replace("\n", " ").encode("latin-1", "replace").decode("latin-1")
        headers = {"X-Error-Message": header_safe, **exc.headers}
        if exc.code:
            headers["X-Error-Code"] = exc.code
        return _Response.json({"error": exc.message, **exc.extra}, exc.status, headers)

    def _fault_response(self, fault: Fault) -> _Response:
        """Render a scripted fault."""
        exc = _HttpError(fault.status, fault.message, code=fault.error_code, headers=fault.headers)
        return self._error_response(exc)

    def _classify(self, request: _Request) -> None:
        """Fill in route name, repo and revision from the URL."""
        segs = request.segments
        method = request.method
        if segs[:1] == ["api"]:
            rest = segs[1:]
            simple = {
                ("repos", "create"): "create_repo",
                ("repos", "delete"): "delete_repo",
                ("whoami-v2",): "whoami",
                ("validate-yaml",): "validate_yaml",
                ("agent-harnesses",): "agent_harnesses",
            }
            if tuple(rest) in simple:
                request.route = simple[tuple(rest)]
                return
            if len(rest) >= 3 and rest[0] in _REPO_TYPE_BY_PLURAL:
                request.repo_type = _REPO_TYPE_BY_PLURAL[rest[0]]
                request.repo_id = f"{rest[1]}/{rest[2]}"
                tail = rest[3:]
                request.tail = tail
                if not tail:
                    request.route = "repo_info" if method == "GET" else "unknown"
                    return
                kind = tail[0]
                request.revision = "/".join(tail[1:2]) or None
                if kind == "revision" and method == "GET":
                    request.route = "repo_info"
                    request.revision = "/".join(tail[1:])
                elif kind == "preupload" and method == "POST":
                    request.route = "preupload"
                elif kind == "commit" and method == "POST":
                    request.route = "commit"
                elif kind == "tag":
                    request.route = {"POST": "create_tag", "DELETE": "delete_tag"}.get(method, "unknown")
                elif kind == "branch":
                    request.route = {"POST": "create_branch", "DELETE": "delete_branch"}.get(
                        method, "unknown"
                    )
                elif kind == "refs" and method == "GET":
                    request.route = "refs"
                elif kind == "commits" and method == "GET":
                    request.route = "commits"
                elif kind == "tree" and method == "GET":
                    request.route = "tree"
                elif kind == "paths-info" and method == "POST":
                    request.route = "paths_info"
                elif kind.startswith("xet-") and kind.endswith("-token"):
                    request.route = "xet_token"
            return
        if segs[:2] == ["_stand_in", "lfs-upload"]:
            request.route = "lfs_upload"
            request.tail = segs[2:]
            upload = self._uploads.get(segs[2]) if len(segs) > 2 else None
            if upload is not None:
                request.repo_type, request.repo_id = upload.repo_key
            return
        repo_type = "model"
        if segs and segs[0] in ("datasets", "spaces"):
            repo_type = _REPO_TYPE_BY_PLURAL[segs[0]]
            segs = segs[1:]
        if len(segs) < 3:
            return
        namespace, name, tail = segs[0], segs[1], segs[2:]
        if name.endswith(".git") and tail[:3] == ["info", "lfs", "objects"] and method == "POST":
            request.repo_type, request.repo_id = repo_type, f"{namespace}/{name[: -len('.git')]}"
            request.route = {"batch": "lfs_batch", "verify": "lfs_verify"}.get("/".join(tail[3:]), "unknown")
        elif tail[0] == "resolve" and len(tail) >= 3 and method in ("GET", "HEAD"):
            request.repo_type, request.repo_id = repo_type, f"{namespace}/{name}"
            request.route = "resolve"
            request.revision = tail[1]
            request.tail = tail[2:]

    def _principal(self, request: _Request) -> _Principal | None:
        """Authenticate the bearer token, answering ``401`` for unknown ones."""
        auth = request.headers.get("authorization")
        if auth is None:
            return None
        token = auth[len("Bearer ") :] if auth.startswith("Bearer ") else None
        with self._lock:
            principal = self._principals.get(token) if token else None
        if principal is None:
            raise _HttpError(401, _INVALID_CREDENTIALS_MESSAGE)
        return principal

    def _repo(self, request: _Request, principal: _Principal | None, *, write: bool = False) -> Repo:
        """Look up the addressed repo and check access, answering like the Hub does."""
        assert request.repo_type is not None and request.repo_id is not None
        repo = self.repos.get((request.repo_type, request.repo_id))
        if repo is None or (repo.private and principal is None):
            raise _HttpError(401 if principal is None else 404, "Repository not found", code="RepoNotFound")
        if write and principal is None:
            raise _HttpError(401, "Invalid username or password.")
        if write and not principal.can_write:  # type: ignore[union-attr]
            raise _HttpError(
                403, f"You don't have the rights to write to {repo.repo_type} {repo.repo_id}: read-only token"
            )
        return repo

    @staticmethod
    def _resolve(repo: Repo, revision: str) -> Commit:
        """Resolve a revision or answer ``404 RevisionNotFound``."""
        commit = repo.resolve(revision)
        if commit is None:
            raise _HttpError(404, f"Invalid rev id: {revision}", code="RevisionNotFound")
        return commit

    def _dispatch(self, request: _Request) -> _Response:
        """Call the handler for the request's route."""
        if request.route in ("lfs_upload", "agent_harnesses"):
            # Presigned-URL style storage and a public registry: no authentication.
            handler = getattr(self, f"_route_{request.route}")
            with self._lock:
                return handler(request)
        principal = self._principal(request)
        if request.route == "unknown":
            raise _HttpError(
                404, f"Stand-in Hub has no route for {request.method} {urlsplit(request.raw_path).path}"
            )
        handler = getattr(self, f"_route_{request.route}")
        with self._lock:
            return handler(request, principal)

    # -- routes: account and repos --------------------------------------------------------------------------

    def _route_agent_harnesses(self, request: _Request) -> _Response:
        return _Response.json({"standardEnvVars": [], "harnesses": {}})

    def _route_whoami(self, request: _Request, principal: _Principal | None) -> _Response:
        if principal is None:
            raise _HttpError(401, "Invalid username or password.")
        role = "write" if principal.can_write else "read"
        return _Response.json(
            {
                "type": "user",
                "id": hashlib.sha1(principal.username.encode()).hexdigest()[:24],
                "name": principal.username,
                "fullname": principal.username,
                "email": None,
                "emailVerified": False,
                "isPro": False,
                "orgs": [],
                "auth": {"type": "access_token", "accessToken": {"displayName": "stand-in", "role": role}},
            }
        )

    def _route_validate_yaml(self, request: _Request, principal: _Principal | None) -> _Response:
        return _Response.json({"errors": [], "warnings": []})

    def _route_create_repo(self, request: _Request, principal: _Principal | None) -> _Response:
        if principal is None:
            raise _HttpError(401, "Invalid username or password.")
        if not principal.can_write:
            raise _HttpError(403, "You don't have the rights to create a repo: read-only token")
        payload = request.json_body()
        repo_type = payload.get("type") or "model"
        if repo_type not in _URL_PREFIX_BY_TYPE:
            raise _HttpError(400, f"Invalid repo type: {repo_type}")
        name = payload.get("name")
        if not name or "/" in name:
            raise _HttpError(400, "Invalid repo name")
        repo_id = f"{payload.get('organization') or principal.username}/{name}"
        visibility = payload.get("visibility")
        private = visibility == "private" if visibility is not None else bool(payload.get("private", False))
        url = f"{self.endpoint}/{_URL_PREFIX_BY_TYPE[repo_type]}{repo_id}"
        if (repo_type, repo_id) in self.repos:
            raise _HttpError(409, f"You already created this {repo_type} repo", extra={"url": url})
        self.create_repo(repo_id, repo_type=repo_type, private=private)
        return _Response.json({"url": url, "name": repo_id, "id": secrets.token_hex(12)})

    def _route_delete_repo(self, request: _Request, principal: _Principal | None) -> _Response:
        payload = request.json_body()
        request.repo_type = payload.get("type") or "model"
        request.repo_id = f"{payload.get('organization') or (principal.username if principal else '')}/{payload.get('name')}"
        if request.repo_type not in _URL_PREFIX_BY_TYPE:
            raise _HttpError(400, f"Invalid repo type: {request.repo_type}")
        repo = self._repo(request, principal, write=True)
        del self.repos[(repo.repo_type, repo.repo_id)]
        return _Response.json({})

    def _route_repo_info(self, request: _Request, principal: _Principal | None) -> _Response:
        repo = self._repo(request, principal)
        commit = self._resolve(repo, request.revision or "main")
        with_blobs = request.flag("blobs")
        siblings = []
        for path in sorted(commit.files):
            stored = commit.files[path]
            sibling: dict[str, Any] = {"rfilename": path}
            if with_blobs:
                sibling.update(size=stored.size, blobId=stored.git_oid)
                if stored.lfs:
                    sibling["lfs"] = {
                        "sha256": stored.sha256,
                        "size": stored.size,
                        "pointerSize": len(stored.pointer),
                    }
            siblings.append(sibling)
        info: dict[str, Any] = {
            "_id": hashlib.sha1(f"{repo.repo_type}/{repo.repo_id}".encode()).hexdigest()[:24],
            "id": repo.repo_id,
            "author": repo.repo_id.split("/")[0],
            "sha": commit.oid,
            "lastModified": _iso(commit.date),
            "createdAt": _iso(repo.created_at),
            "private": repo.private,
            "gated": False,
            "disabled": False,
            "downloads": 0,
            "likes": 0,
            "tags": [],
            "siblings": siblings,
            "usedStorage": sum(len(blob) for blob in repo.lfs_objects.values()),
        }
        expand = request.query.get("expand") or request.query.get("expand[]")
        if expand:
            info = {key: value for key, value in info.items() if key in ("_id", "id") or key in expand}
        return _Response.json(info)

    # -- routes: refs ---------------------------------------------------------------------------------------

    def _route_refs(self, request: _Request, principal: _Principal | None) -> _Response:
        repo = self._repo(request, principal)
        branches = sorted(repo.branches, key=lambda name: (name != "main", name))
        payload: dict[str, Any] = {
            "branches": [
                {"name": name, "ref": f"refs/heads/{name}", "targetCommit": repo.branches[name]}
                for name in branches
            ],
            "converts": [],
            "tags": [
                {"name": name, "ref": f"refs/tags/{name}", "targetCommit": tag.target}
                for name, tag in sorted(repo.tags.items())
            ],
        }
        if request.flag("include_prs"):
            payload["pullRequests"] = []
        return _Response.json(payload)

    def _route_create_tag(self, request: _Request, principal: _Principal | None) -> _Response:
        repo = self._repo(request, principal, write=True)
        commit = self._resolve(repo, request.revision or "main")
        payload = request.json_body()
        tag = payload.get("tag")
        if not tag or not isinstance(tag, str):
            raise _HttpError(400, "Missing tag name")
        if tag in repo.tags or tag in repo.branches:
            raise _HttpError(409, f'Tag "{tag}" already exists')
        repo.tags[tag] = Tag(tag, commit.oid, payload.get("message"))
        return _Response.json({"name": tag, "ref": f"refs/tags/{tag}", "targetCommit": commit.oid})

    def _route_delete_tag(self, request: _Request, principal: _Principal | None) -> _Response:
        repo = self._repo(request, principal, write=True)
        tag = request.revision or ""
        if tag not in repo.tags:
            raise _HttpError(404, f"Invalid rev id: {tag}", code="RevisionNotFound")
        del repo.tags[tag]
        return _Response.json({})

    def _route_create_branch(self, request: _Request, principal: _Principal | None) -> _Response:
        repo = self._repo(request, principal, write=True)
        branch = request.revision or ""
        payload = request.json_body()
        start = self._resolve(repo, payload.get("startingPoint") or "main")
        if branch in repo.branches or branch in repo.tags:
            raise _HttpError(409, f"Reference already exists: refs/heads/{branch}")
        repo.branches[branch] = start.oid
        return _Response.json({})

    def _route_delete_branch(self, request: _Request, principal: _Principal | None) -> _Response:
        repo = self._repo(request, principal, write=True)
        branch = request.revision or ""
        if branch not in repo.branches:
            raise _HttpError(404, f"Invalid rev id: {branch}", code="RevisionNotFound")
        if branch == "main":
            raise _HttpError(403, "Cannot delete the default branch")
        del repo.branches[branch]
        return _Response.json({})

    def _route_xet_token(self, request: _Request, principal: _Principal | None) -> _Response:
        raise _HttpError(
            501,
            "The stand-in Hub does not implement Xet storage: set HF_HUB_DISABLE_XET=1 in the environment "
            "before huggingface_hub is imported so the client uses the Git LFS protocol.",
        )

    # -- routes: listing ------------------------------------------------------------------------------------

    def _page_links(self, request: _Request, next_params: dict[str, str] | None) -> dict[str, str]:
        """Build a GitHub-style ``Link`` header pointing at the next page, if any."""
        if next_params is None:
            return {}
        params = {key: values[0] for key, values in request.query.items()}
        params.update(next_params)
        url = f"{self.endpoint}{urlsplit(request.raw_path).path}?{urlencode(params)}"
        return {"Link": f'<{url}>; rel="next"'}

    def _route_commits(self, request: _Request, principal: _Principal | None) -> _Response:
        repo = self._repo(request, principal)
        commit = self._resolve(repo, request.revision or "main")
        history = repo.history(commit)
        page = int(request.param("p") or 0)
        size = self.commits_page_size
        chunk = history[page * size : (page + 1) * size]
        items = []
        for item in chunk:
            entry: dict[str, Any] = {
                "id": item.oid,
                "title": item.title,
                "message": item.message,
                "authors": [{"user": item.author, "avatar": ""}],
                "date": _iso(item.date),
            }
            if "formatted" in request.query.get("expand[]", []):
                entry["formatted"] = {"title": item.title, "message": item.message}
            items.append(entry)
        more = (page + 1) * size < len(history)
        return _Response.json(
            items, headers=self._page_links(request, {"p": str(page + 1)} if more else None)
        )

    def _last_commit(self, repo: Repo, commit: Commit, path: str, is_dir: bool) -> dict[str, str]:
        """Return ``lastCommit`` info (the newest commit that changed ``path``) for tree listings."""

        def version(snapshot: Commit) -> Any:
            if is_dir:
                prefix = path + "/" if path else ""
                return sorted((p, f.git_oid) for p, f in snapshot.files.items() if p.startswith(prefix))
            stored = snapshot.files.get(path)
            return None if stored is None else stored.git_oid

        history = repo.history(commit)
        last = history[-1]
        for newer, older in itertools.pairwise(history):
            if version(newer) != version(older):
                last = newer
                break
        return {"id": last.oid, "title": last.title, "date": _iso(last.date)}

    def _tree_entry(self, repo: Repo, commit: Commit, path: str, expand: bool) -> dict[str, Any] | None:
        """Describe a file or directory of a snapshot like the tree/paths-info APIs do."""
        stored = commit.files.get(path)
        if stored is not None:
            entry: dict[str, Any] = {"type": "file", "oid": stored.git_oid, "size": stored.size, "path": path}
            if stored.lfs:
                entry["lfs"] = {"oid": stored.sha256, "size": stored.size, "pointerSize": len(stored.pointer)}
            if expand:
                entry["lastCommit"] = self._last_commit(repo, commit, path, is_dir=False)
                entry["securityFileStatus"] = {
                    "status": "safe",
                    "avScan": {"virusFound": False, "virusNames": None},
                    "pickleImportScan": None,
                }
            return entry
        prefix = path + "/"
        children = sorted((p, f.git_oid) for p, f in commit.files.items() if p.startswith(prefix))
        if not children:
            return None
        oid = hashlib.sha1("".join(f"{p}\0{o}\n" for p, o in children).encode()).hexdigest()
        entry = {"type": "directory", "oid": oid, "size": 0, "path": path}
        if expand:
            entry["lastCommit"] = self._last_commit(repo, commit, path, is_dir=True)
        return entry

    def _route_tree(self, request: _Request, principal: _Principal | None) -> _Response:
        repo = self._repo(request, principal)
        commit = self._resolve(repo, request.revision or "main")
        base = "/".join(request.tail[2:]).strip("/")
        recursive, expand = request.flag("recursive"), request.flag("expand")
        if base and (base in commit.files or self._tree_entry(repo, commit, base, False) is None):
            raise _HttpError(404, f"Entry not found: {base}", code="EntryNotFound")
        prefix = base + "/" if base else ""
        paths: set[str] = set()
        for path in commit.files:
            if not path.startswith(prefix):
                continue
            parts = path[len(prefix) :].split("/")
            if recursive:
                paths.update(prefix + "/".join(parts[: i + 1]) for i in range(len(parts)))
            else:
                paths.add(prefix + parts[0])
        ordered = sorted(paths)
        size = min(self.tree_page_size, 50) if expand else self.tree_page_size
        offset = int(request.param("cursor") or 0)
        chunk = ordered[offset : offset + size]
        entries = [self._tree_entry(repo, commit, path, expand) for path in chunk]
        more = offset + size < len(ordered)
        links = self._page_links(request, {"cursor": str(offset + size)} if more else None)
        return _Response.json(entries, headers=links)

    def _route_paths_info(self, request: _Request, principal: _Principal | None) -> _Response:
        repo = self._repo(request, principal)
        commit = self._resolve(repo, request.revision or "main")
        content_type = request.headers.get("content-type", "")
        if "json" in content_type:
            payload = request.json_body()
            paths, expand = payload.get("paths", []), bool(payload.get("expand"))
        else:
            form = parse_qs(request.body.decode(), keep_blank_values=True)
            paths = form.get("paths", [])
            expand = (form.get("expand", ["false"])[0]).lower() in ("1", "true")
        entries = [self._tree_entry(repo, commit, p.strip("/"), expand) for p in paths]
        return _Response.json([entry for entry in entries if entry is not None])

    # -- routes: upload -------------------------------------------------------------------------------------

    def _reject_pr(self, request: _Request) -> None:
        """Answer ``501`` for ``create_pr=1`` (pull requests are not modelled)."""
        if request.flag("create_pr"):
            raise _HttpError(501, "The stand-in Hub does not implement pull requests (create_pr=1)")

    def _branch_head(self, repo: Repo, revision: str) -> Commit:
        """Return the head commit of a branch, answering ``404``/``400`` for non-branches."""
        branch = revision[len("refs/heads/") :] if revision.startswith("refs/heads/") else revision
        if branch in repo.branches:
            return repo.commits[repo.branches[branch]]
        if repo.resolve(revision) is not None:
            raise _HttpError(400, f"Invalid rev id: {revision} is not a branch")
        raise _HttpError(404, f"Invalid rev id: {revision}", code="RevisionNotFound")

    def _route_preupload(self, request: _Request, principal: _Principal | None) -> _Response:
        repo = self._repo(request, principal, write=True)
        self._reject_pr(request)
        head = self._branch_head(repo, request.revision or "main")
        payload = request.json_body()
        gitignore = payload.get("gitIgnore")
        if gitignore is None and ".gitignore" in head.files:
            gitignore = head.files[".gitignore"].content.decode("utf-8", "replace")
        ignore = _ignore_patterns(gitignore or "")
        files = []
        for item in payload.get("files", []):
            path, size = item["path"], int(item["size"])
            sample = base64.b64decode(item.get("sample", ""))
            mode = self._upload_mode(head, path, size, sample)
            existing = head.files.get(path)
            oid = None
            if existing is not None:
                oid = existing.sha256 if existing.lfs else existing.git_oid
            files.append(
                {
                    "path": path,
                    "uploadMode": mode,
                    "shouldIgnore": any(_pattern_matches(p, path) for p in ignore),
                    "oid": oid,
                }
            )
        return _Response.json({"files": files, "commitOid": head.oid})

    def _route_lfs_batch(self, request: _Request, principal: _Principal | None) -> _Response:
        repo = self._repo(request, principal, write=True)
        payload = request.json_body()
        if payload.get("operation") != "upload":
            raise _HttpError(400, "The stand-in Hub only implements the LFS 'upload' operation")
        transfers = payload.get("transfers") or ["basic"]
        multipart = self.lfs_multipart_chunk_size is not None and "multipart" in transfers
        verify_href = f"{self.endpoint}/{repo.url_path}.git/info/lfs/objects/verify"
        objects = []
        chosen = "basic"
        for obj in payload.get("objects", []):
            oid, size = obj.get("oid"), obj.get("size")
            if not (isinstance(oid, str) and _is_hex(oid, 64) and isinstance(size, int) and size >= 0):
                objects.append(
                    {
                        "oid": str(oid),
                        "size": size if isinstance(size, int) else 0,
                        "error": {
                            "code": 422,
                            "message": "Invalid object: oid must be a sha256 hex, size an int",
                        },
                    }
                )
                continue
            entry: dict[str, Any] = {"oid": oid, "size": size, "authenticated": True}
            if oid not in repo.lfs_objects:
                upload_id = secrets.token_urlsafe(16)
                href = f"{self.endpoint}/_stand_in/lfs-upload/{upload_id}"
                pending = _PendingUpload((repo.repo_type, repo.repo_id), oid, size)
                upload: dict[str, Any] = {"href": href}
                chunk = self.lfs_multipart_chunk_size
                if multipart and chunk is not None and size > chunk:
                    pending.chunk_size = chunk
                    parts = -(-size // chunk)
                    upload["header"] = {"chunk_size": str(chunk)}
                    upload["header"].update({str(n): f"{href}/part/{n}" for n in range(1, parts + 1)})
                    chosen = "multipart"
                self._uploads[upload_id] = pending
                entry["actions"] = {"upload": upload}
                if self.lfs_verify:
                    entry["actions"]["verify"] = {"href": verify_href, "header": {}}
            objects.append(entry)
        return _Response.json(
            {"transfer": chosen, "objects": objects, "hash_algo": "sha256"},
            headers={"Content-Type": "application/vnd.git-lfs+json"},
        )

    def _store_lfs_object(self, pending: _PendingUpload, data: bytes) -> None:
        """Check uploaded bytes against the announced oid/size and store them."""
        if len(data) != pending.size:
            raise _HttpError(400, f"Size mismatch: announced {pending.size} bytes, received {len(data)}")
        digest = hashlib.sha256(data).hexdigest()
        if digest != pending.oid:
            raise _HttpError(400, f"Checksum mismatch: announced sha256 {pending.oid}, received {digest}")
        repo = self.repos.get(pending.repo_key)
        if repo is None:
            raise _HttpError(404, "Repository not found", code="RepoNotFound")
        repo.lfs_objects[pending.oid] = data

    def _route_lfs_upload(self, request: _Request) -> _Response:
        upload_id = request.tail[0] if request.tail else ""
        pending = self._uploads.get(upload_id)
        if pending is None:
            raise _HttpError(403, "Invalid or expired upload URL")
        if request.method == "PUT" and len(request.tail) == 1:
            self._store_lfs_object(pending, request.body)
            return _Response(200, b"", {"ETag": f'"{hashlib.md5(request.body).hexdigest()}"'})
        if request.method == "PUT" and len(request.tail) == 3 and request.tail[1] == "part":
            part = int(request.tail[2])
            pending.parts[part] = request.body
            return _Response(200, b"", {"ETag": f'"{hashlib.md5(request.body).hexdigest()}"'})
        if request.method == "POST" and len(request.tail) == 1:
            payload = request.json_body()
            if payload.get("oid") != pending.oid:
                raise _HttpError(400, "Completion oid does not match the upload")
            numbers = [int(part["partNumber"]) for part in payload.get("parts", [])]
            if sorted(numbers) != sorted(pending.parts) or not numbers:
                raise _HttpError(400, f"Completion lists parts {numbers}, uploaded {sorted(pending.parts)}")
            self._store_lfs_object(pending, b"".join(pending.parts[n] for n in sorted(numbers)))
            return _Response.json({})
        raise _HttpError(405, "Unsupported upload request")

    def _route_lfs_verify(self, request: _Request, principal: _Principal | None) -> _Response:
        repo = self._repo(request, principal, write=True)
        payload = request.json_body()
        data = repo.lfs_objects.get(payload.get("oid", ""))
        if data is None or len(data) != payload.get("size"):
            raise _HttpError(404, f"Object {payload.get('oid')} does not exist (or has another size)")
        return _Response.json({})

    # -- routes: commit -------------------------------------------------------------------------------------

    def _route_commit(self, request: _Request, principal: _Principal | None) -> _Response:
        repo = self._repo(request, principal, write=True)
        self._reject_pr(request)
        revision = request.revision or "main"
        head = self._branch_head(repo, revision)
        try:
            lines = [json.loads(line) for line in request.body.splitlines() if line.strip()]
        except ValueError as exc:
            raise _HttpError(400, f"Invalid NDJSON commit payload: {exc}") from exc
        if not lines or lines[0].get("key") != "header":
            raise _HttpError(400, "The first line of the commit payload must be the header")
        header = lines[0].get("value") or {}
        summary = header.get("summary")
        if not summary:
            raise _HttpError(400, "Commit summary is required")
        parent = header.get("parentCommit")
        if parent is not None and not (
            isinstance(parent, str) and len(parent) >= 5 and head.oid.startswith(parent.lower())
        ):
            raise _HttpError(412, _STALE_PARENT_MESSAGE)
        snapshot = dict(head.files)
        for line in lines[1:]:
            self._apply_operation(repo, head, snapshot, line.get("key"), line.get("value") or {})
        assert principal is not None
        commit = self._new_commit(
            repo, head.oid, snapshot, summary, header.get("description") or "", principal.username
        )
        branch = revision[len("refs/heads/") :] if revision.startswith("refs/heads/") else revision
        repo.branches[branch] = commit.oid
        return _Response.json(
            {
                "success": True,
                "commitOid": commit.oid,
                "commitUrl": f"{self.endpoint}/{repo.url_path}/commit/{commit.oid}",
                "hookOutput": "",
            }
        )

    def _apply_operation(
        self, repo: Repo, head: Commit, snapshot: dict[str, StoredFile], key: Any, value: dict[str, Any]
    ) -> None:
        """Apply one NDJSON commit operation to a snapshot, rejecting it like the Hub would."""
        path = str(value.get("path", "")).strip("/")
        if key in ("file", "lfsFile", "deletedFile") and (not path or ".git" in path.split("/")):
            raise _HttpError(400, f"Invalid path: {value.get('path')!r}")
        if key == "file":
            encoding = value.get("encoding", "base64")
            raw = value.get("content", "")
            data = base64.b64decode(raw) if encoding == "base64" else str(raw).encode()
            if len(data) >= self.lfs_threshold:
                raise _HttpError(
                    400,
                    "Your push was rejected because it contains files larger than 10 MiB. "
                    f"Please use https://git-lfs.github.com/ to store large files. Offending file: {path}",
                )
            if b"\x00" in data[:512]:
                raise _HttpError(
                    400,
                    "Your push was rejected because it contains binary files. "
                    f"Please use https://git-lfs.github.com/ to store binary files. Offending file: {path}",
                )
            snapshot[path] = StoredFile(path, data, lfs=False)
        elif key == "lfsFile":
            oid = value.get("oid", "")
            data = repo.lfs_objects.get(oid)
            if value.get("algo", "sha256") != "sha256" or data is None:
                raise _HttpError(
                    400,
                    "Your push was rejected because an LFS pointer pointed to a file that does not exist. "
                    f"Offending file: {path}",
                )
            if value.get("size") is not None and value["size"] != len(data):
                raise _HttpError(
                    400, f"LFS file {path}: size {value['size']} does not match the stored object"
                )
            snapshot[path] = StoredFile(path, data, lfs=True)
        elif key == "deletedFile":
            if path not in snapshot:
                raise _HttpError(404, f"A file with this name doesn't exist: {path}", code="EntryNotFound")
            del snapshot[path]
        elif key == "deletedFolder":
            prefix = path + "/" if path else ""
            doomed = [p for p in snapshot if p.startswith(prefix)]
            if not doomed:
                raise _HttpError(404, f"A folder with this name doesn't exist: {path}", code="EntryNotFound")
            for doomed_path in doomed:
                del snapshot[doomed_path]
        else:
            raise _HttpError(400, f"Unknown commit operation key: {key!r}")

    # -- routes: download -----------------------------------------------------------------------------------

    def _route_resolve(self, request: _Request, principal: _Principal | None) -> _Response:
        repo = self._repo(request, principal)
        commit = self._resolve(repo, request.revision or "main")
        path = "/".join(request.tail)
        base_headers = {"X-Repo-Commit": commit.oid, "Accept-Ranges": "bytes"}
        stored = commit.files.get(path)
        if stored is None:
            raise _HttpError(
                404, "Entry not found", code="EntryNotFound", headers={"X-Repo-Commit": commit.oid}
            )
        headers = {**base_headers, "ETag": f'"{stored.etag}"', "Content-Type": "application/octet-stream"}
        if stored.lfs:
            headers.update({"X-Linked-Etag": f'"{stored.sha256}"', "X-Linked-Size": str(stored.size)})
        body = stored.content
        status = 200
        range_header = request.headers.get("range")
        if range_header and range_header.startswith("bytes=") and "," not in range_header:
            start_text, _, end_text = range_header[len("bytes=") :].partition("-")
            size = len(body)
            if start_text:
                start, end = int(start_text), int(end_text) if end_text else size - 1
            else:
                start, end = max(size - int(end_text), 0), size - 1
            if start >= size:
                raise _HttpError(
                    416, "Requested range not satisfiable", headers={"Content-Range": f"bytes */{size}"}
                )
            end = min(end, size - 1)
            body, status = body[start : end + 1], 206
            headers["Content-Range"] = f"bytes {start}-{end}/{size}"
        return _Response(status, body, headers)


class _Handler(BaseHTTPRequestHandler):
    """HTTP plumbing: parse the request, delegate to :meth:`StandInHub._handle`, write the answer."""

    hub: StandInHub
    protocol_version = "HTTP/1.1"
    server_version = "StandInHub/1.0"
    timeout = 30
    # Headers and body are written separately: without TCP_NODELAY every response waits ~40 ms on
    # Nagle + delayed ACK.
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: Any) -> None:
        """Silence the default stderr access log (the hub keeps its own request log)."""

    def _read_body(self) -> bytes:
        """Read the request body, honouring ``Content-Length`` or chunked transfer encoding."""
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            chunks = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return b"".join(chunks)
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _serve(self) -> None:
        split = urlsplit(self.path)
        request = _Request(
            method=self.command,
            raw_path=self.path,
            segments=[unquote(segment) for segment in split.path.lstrip("/").split("/")],
            query=parse_qs(split.query, keep_blank_values=True),
            headers={key.lower(): value for key, value in self.headers.items()},
            body=self._read_body(),
        )
        try:
            response = self.hub._handle(request)
        except Exception as exc:  # a bug in the stand-in: answer 500 with the reason rather than hang
            response = _Response.json({"error": f"Stand-in Hub crashed: {exc!r}"}, 500)
        if response is None:
            self.close_connection = True
            return
        self.send_response(response.status)
        for key, value in response.headers.items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(response.body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(response.body)

    do_GET = do_HEAD = do_POST = do_PUT = do_DELETE = _serve


def ensure_client_compatible() -> None:
    """Check that the imported ``huggingface_hub`` will talk Git LFS (not Xet) to the stand-in.

    ``huggingface_hub`` 2.x uploads LFS files through Xet whenever ``hf_xet`` is installed unless
    ``HF_HUB_DISABLE_XET`` was set when ``huggingface_hub`` was first imported.

    Raises:
        RuntimeError: If uploads would go through Xet.
    """
    from huggingface_hub import constants
    from huggingface_hub.utils._runtime import is_xet_available

    if is_xet_available():
        raise RuntimeError(
            "huggingface_hub would upload through Xet, which the stand-in Hub does not implement "
            f"(constants.HF_HUB_DISABLE_XET={constants.HF_HUB_DISABLE_XET}). Set HF_HUB_DISABLE_XET=1 in the "
            "environment before huggingface_hub is first imported (e.g. at the top of conftest.py)."
        )
