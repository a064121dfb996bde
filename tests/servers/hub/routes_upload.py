"""The stand-in Hub's upload and download routes: preupload, the Git LFS batch/upload/verify flow, NDJSON commits, resolve."""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
from typing import Any

from tests.servers.hub.constants import _STALE_PARENT_MESSAGE
from tests.servers.hub.model import Commit, Repo, StoredFile, _is_hex
from tests.servers.hub.records import (
    _HttpError,
    _ignore_patterns,
    _pattern_matches,
    _PendingUpload,
    _Principal,
    _Request,
    _Response,
)


class _UploadRoutesMixin:
    """Answers the upload, commit and download routes."""

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
