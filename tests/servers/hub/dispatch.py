"""Request handling of the stand-in Hub: classify the route, authenticate, apply faults, dispatch."""

from __future__ import annotations

import secrets
import time
from urllib.parse import urlsplit

from tests.servers.hub.constants import _INVALID_CREDENTIALS_MESSAGE, _REPO_TYPE_BY_PLURAL
from tests.servers.hub.model import Commit, Repo
from tests.servers.hub.records import Fault, RequestRecord, _HttpError, _Principal, _Request, _Response


class _DispatchMixin:
    """Turns one request into a response."""

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
